"""Reader of the SemVec equivalence data sets (Allamanis et al. 2017), their tokens as LaTeX.

A set file (``boolean8-validationset.json.gz``) is a gzip JSON object: key = the canonical
SymPy form of a class (``"And(a, c)"``), value = ``{"Original": {"Tree", "Tokens"}, "Noise":
[{"Tree", "Tokens"}, ...]}``; every member of a class is an equivalent expression. The tokens
are fully parenthesised infix SymPy syntax; :func:`tokens_to_latex` turns them into LaTeX that
the LaTeX -> MathML featurisation (and Approach Zero) parses:

==========  ===============  ============================================
token       LaTeX            SymPy meaning
==========  ===============  ============================================
``&``       ``\\land``        And
``|``       ``\\lor``         Or
``~``       ``\\lnot``        Not (prefix)
``^``       ``\\oplus``       Xor (``^`` on booleans is SymPy's Xor)
``>>``      ``\\Rightarrow``  Implies
``*``       ``\\cdot``        Multiply
``**``      ``^{...}``        Pow (the right operand, an atom or a group)
``+ - ( )`` themselves       Add, Subtract, grouping
``a``..     themselves       variables (one letter), and integers
==========  ===============  ============================================

Across the 15 sets (train and validation) the tokens are ``~ ( ) & | ^ >> + - *`` and the
variables ``a`` .. ``j``; ``**`` and integers do not occur but are mapped. Any other token
raises :class:`SemvecTokenError` (an unmapped token is an error, never guessed).

Members get stable ids: the class is ``<set>-c<index of the class in the file>`` (the doc id,
so "same document" means "same class") and a member ``<class>#<n>`` with n = 0 for the
Original and 1.. for the Noise entries in file order.

Example::

    classes = read_semvec("../shared/data/semvec/poly5-validationset.json.gz")
    first = classes[0].members[0]
    first.eq_id, first.latex        # ('poly5-c0#0', '(b - b) \\cdot a')
"""

from __future__ import annotations

import gzip
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mathsearch.indexer.errors import ExtractionError, IndexerError
from mathsearch.indexer.records import make_eq_id

logger = logging.getLogger(__name__)

#: Binary and unary operators: SemVec token -> LaTeX.
OPERATORS: dict[str, str] = {
    "&": r"\land",
    "|": r"\lor",
    "~": r"\lnot",
    "^": r"\oplus",
    ">>": r"\Rightarrow",
    "*": r"\cdot",
    "+": "+",
    "-": "-",
}
POWER = "**"
_ATOM = re.compile(r"^(?:[A-Za-z]|\d+)$")
_SET_NAME = re.compile(r"^(?P<name>.+?)-(?P<split>train|validation|test)set\.json(?:\.gz)?$")


class SemvecTokenError(IndexerError):
    """A SemVec token sequence holds a token with no LaTeX mapping, or is malformed."""

    reason = "semvec-token"


@dataclass(frozen=True)
class SemvecExpression:
    """One member of an equivalence class, its tokens and their LaTeX."""

    eq_id: str
    class_id: str
    tokens: tuple[str, ...]
    latex: str


@dataclass(frozen=True)
class SemvecClass:
    """One equivalence class: its canonical SymPy form and its members (Original first)."""

    set_name: str
    class_id: str
    canonical: str
    members: tuple[SemvecExpression, ...]


def set_name(path: str | Path) -> str:
    """``boolean8`` of ``.../boolean8-validationset.json.gz`` (else the name without suffixes)."""
    name = Path(path).name
    match = _SET_NAME.match(name)
    return match.group("name") if match else name.split(".", 1)[0]


def set_split(path: str | Path) -> str | None:
    """``train`` of ``.../boolean8-trainset.json.gz`` (``validation``, ``test``), else None."""
    match = _SET_NAME.match(Path(path).name)
    return match.group("split") if match else None


def validation_sets(directory: str | Path) -> list[Path]:
    """The ``*-validationset.json.gz`` files of ``directory``, sorted by name."""
    return sorted(Path(directory).glob("*-validationset.json.gz"))


def tokens_to_latex(tokens: Sequence[str]) -> str:
    """LaTeX of a SemVec token sequence (see the module table).

    >>> tokens_to_latex(["(", "a", "|", "a", ")", "&", "c"])
    '(a \\\\lor a) \\\\land c'

    Raises:
        SemvecTokenError: a token without a mapping, unbalanced parentheses, or ``**``
            without an operand.
    """
    latex, end = _convert(list(tokens), 0, closing=False)
    if end != len(tokens):
        raise SemvecTokenError(f"unbalanced ')' at token {end} of {' '.join(tokens)!r}")
    return latex


def _convert(tokens: list[str], start: int, *, closing: bool) -> tuple[str, int]:
    """Convert from ``start`` up to the matching ``)`` (when ``closing``) or the end."""
    parts: list[str] = []
    i = start
    while i < len(tokens):
        token = tokens[i]
        if token == ")":
            if not closing:
                return _join(parts), i
            return _join(parts), i + 1
        if token == "(":
            inner, i = _group(tokens, i)
            parts.append(f"({inner})")
            continue
        if token == POWER:
            exponent, i = _operand(tokens, i + 1)
            if not parts:
                raise SemvecTokenError(f"'**' without a base in {' '.join(tokens)!r}")
            parts[-1] += f"^{{{exponent}}}"
            continue
        parts.append(_atom(token, tokens))
        i += 1
    if closing:
        raise SemvecTokenError(f"unbalanced '(' in {' '.join(tokens)!r}")
    return _join(parts), i


def _group(tokens: list[str], i: int) -> tuple[str, int]:
    """The LaTeX inside the parentheses opening at ``i`` and the index after the ``)``."""
    inner, end = _convert(tokens, i + 1, closing=True)
    return inner, end


def _operand(tokens: list[str], i: int) -> tuple[str, int]:
    """The exponent after ``**``: an atom, or a parenthesised group (braces replace the parens)."""
    if i >= len(tokens):
        raise SemvecTokenError(f"'**' without an exponent in {' '.join(tokens)!r}")
    if tokens[i] == "(":
        return _group(tokens, i)
    return _atom(tokens[i], tokens), i + 1


def _atom(token: str, tokens: list[str]) -> str:
    if token in OPERATORS:
        return OPERATORS[token]
    if _ATOM.match(token):
        return token
    raise SemvecTokenError(f"SemVec token {token!r} has no LaTeX mapping (in {' '.join(tokens)!r})")


def _join(parts: list[str]) -> str:
    return " ".join(parts)


def _load(path: Path) -> dict[str, Any]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, EOFError, ValueError) as exc:
        raise ExtractionError(f"cannot read SemVec set {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ExtractionError(f"{path} is not a SemVec set (a JSON object of classes)")
    return data


def read_semvec_raw(path: str | Path) -> dict[str, Any]:
    """The JSON object of one SemVec set file (class -> ``{"Original", "Noise"}``), unconverted.

    Raises:
        ExtractionError: the file is unreadable or not a JSON object.
    """
    return _load(Path(path))


def _tokens(entry: Any, where: str) -> tuple[str, ...]:
    tokens = entry.get("Tokens") if isinstance(entry, dict) else None
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise ExtractionError(f"{where}: a member without a list of 'Tokens'")
    return tuple(tokens)


def read_semvec(path: str | Path) -> list[SemvecClass]:
    """The classes of one SemVec set file, in file order, members as LaTeX.

    Raises:
        ExtractionError: the file is unreadable or not in the SemVec format.
        SemvecTokenError: a member holds a token without a LaTeX mapping.
    """
    path = Path(path)
    name = set_name(path)
    classes: list[SemvecClass] = []
    for index, (canonical, value) in enumerate(_load(path).items()):
        class_id = f"{name}-c{index}"
        if not isinstance(value, dict) or "Original" not in value:
            raise ExtractionError(f"{path}: class {canonical!r} has no 'Original'")
        noise = value.get("Noise") or []
        entries = [value["Original"], *noise]
        members = []
        for n, entry in enumerate(entries):
            tokens = _tokens(entry, f"{path}: class {canonical!r}")
            members.append(
                SemvecExpression(make_eq_id(class_id, n), class_id, tokens, tokens_to_latex(tokens))
            )
        classes.append(SemvecClass(name, class_id, str(canonical), tuple(members)))
    logger.info(
        "%s: %d classes, %d members", name, len(classes), sum(len(c.members) for c in classes)
    )
    return classes
