r"""Identifier renaming of LaTeX equations: the replicas of ``mathsearch bench query``.

Replica ``r`` of an equation renames its identifiers with :func:`letter_permutation` ``(r)``: a
fixed permutation per replica of the Latin letters (a single 26-cycle of the lower-case letters
and one of the upper-case letters, so no letter keeps its name). :func:`rename_latex` applies it
to the LaTeX outside control words and outside the arguments that are names, not mathematics
(``\begin{...}``, column specs of ``array``, ``\label``, ``\text``, ``\mathrm``,
``\operatorname``, dimensions such as ``\hspace{1cm}``). :func:`rename_tokens` gives the math
tokens one expects of the renamed equation, to check that featurising the renamed LaTeX renames
the tokens consistently.

Example::

    mapping = letter_permutation(1)
    rename_latex(r"\frac{a}{b} + \mathrm{Tr}\,x", mapping)  # '\frac{l}{u} + \mathrm{Tr}\,v'
"""

from __future__ import annotations

import logging
import random
import re
import string
from collections.abc import Iterable, Mapping

logger = logging.getLogger(__name__)

__all__ = ["letter_permutation", "rename_latex", "rename_tokens"]


def _cycle(letters: str, rng: random.Random) -> dict[str, str]:
    order = list(letters)
    rng.shuffle(order)
    return {a: b for a, b in zip(order, order[1:] + order[:1], strict=True)}


def letter_permutation(replica: int) -> dict[str, str]:
    """The letter renaming of replica ``replica`` (>= 1): one 26-cycle of the lower-case and one
    of the upper-case Latin letters, fixed per replica (no letter is mapped to itself)."""
    if replica < 1:
        raise ValueError(f"replica numbers start at 1, not {replica}")
    rng = random.Random(f"mathsearch-bench-query-replica-{replica}")
    return {**_cycle(string.ascii_lowercase, rng), **_cycle(string.ascii_uppercase, rng)}


#: Commands whose next argument is a name or text, never renamed.
_NAME_ARGUMENT = frozenset(
    {
        "begin", "end", "label", "ref", "eqref", "cite", "tag", "text", "textrm", "textit",
        "textbf", "textsf", "texttt", "textup", "textnormal", "textsc", "mbox", "hbox", "fbox",
        "makebox", "mathrm", "operatorname", "color", "textcolor", "hspace", "vspace",
        "mspace", "rule", "href", "url", "newcommand", "renewcommand", "providecommand",
        "input", "includegraphics", "raisebox", "setlength", "addtolength", "DeclareMathOperator",
        "newenvironment", "multirow", "vrule", "hrule", "pagestyle", "bibitem",
    }
)  # fmt: skip
#: Font switches of upright names (``{\rm free}``, ``\mathop{\rm diag}``): the rest of the
#: group is a name, kept as is.
_NAME_SWITCH = frozenset({"rm", "sf", "tt", "rmfamily", "upshape"})
#: Commands followed by a bare TeX dimension (``\kern 2pt``, ``\hskip 1em plus 1fil``).
_DIMENSION = frozenset({"kern", "mkern", "hskip", "vskip", "mskip", "lower", "raise"})
#: Environments whose first argument is a column specification.
_TABLES = frozenset({"array", "tabular", "tabular*", "subarray", "tabularx", "alignat", "alignat*"})
_CONTROL = re.compile(r"\\(?:([A-Za-z]+)\*?|.)", re.DOTALL)
_DIMEN = re.compile(
    r"\s*=?\s*[-+]?\s*(?:\d+(?:\.\d*)?|\.\d+)\s*(?:true\s*)?"
    r"(?:pt|mu|em|ex|cm|mm|in|bp|pc|dd|cc|sp)"
    r"(?:\s*(?:plus|minus)\s*[-+]?\s*(?:\d+(?:\.\d*)?|\.\d+)?\s*(?:fil+|pt|mu|em|ex|cm|mm))*"
)
_SPACES = re.compile(r"\s*")


def _closing(latex: str, start: int, open_: str = "{", close: str = "}") -> int:
    """Index of the ``close`` that ends the group already open at ``start`` (escapes skipped),
    or ``len(latex)`` when it never closes."""
    depth = 0
    i = start
    while i < len(latex):
        char = latex[i]
        if char == "\\":
            i += 2
            continue
        if char == open_:
            depth += 1
        elif char == close:
            if depth == 0:
                return i
            depth -= 1
        i += 1
    return len(latex)


def _group_end(latex: str, start: int, open_: str = "{", close: str = "}") -> int:
    """End (exclusive) of the balanced group opening at ``latex[start]`` (escapes skipped)."""
    return min(len(latex), _closing(latex, start + 1, open_, close) + 1)


def _group_rest(latex: str, start: int) -> int:
    """Where the group around ``start`` closes (its ``}``, or the end of ``latex``)."""
    return _closing(latex, start)


def _verbatim_argument(latex: str, start: int, *, optional: bool = True) -> int:
    """End of the ``[optional]{argument}`` (or single token) after ``start``, kept as is."""
    i = _SPACES.match(latex, start).end()  # type: ignore[union-attr]
    if optional and i < len(latex) and latex[i] == "[":
        i = _SPACES.match(latex, _group_end(latex, i, "[", "]")).end()  # type: ignore[union-attr]
    if i < len(latex) and latex[i] == "{":
        return _group_end(latex, i)
    if i < len(latex) and latex[i] == "\\":
        found = _CONTROL.match(latex, i)
        return found.end() if found else i + 1
    return start  # no argument: nothing is protected


def rename_latex(latex: str, mapping: Mapping[str, str]) -> str:
    r"""``latex`` with every letter of ``mapping`` renamed where it names a mathematical object.

    Left alone: control words (``\alpha``, ``\frac``), the name arguments of
    :data:`_NAME_ARGUMENT` commands (``\begin{array}``, ``\label{eq:x}``, ``\text{if}``,
    ``\mathrm{Tr}``, ``\operatorname{tr}``, ``\hspace{1cm}``), the rest of a group after an
    upright font switch (``{\rm free}``), the column specification of
    ``array``-like environments, bare dimensions after ``\kern``/``\hskip``/... and after a row
    break ``\\[2pt]``, and ``%`` comments. Everything else - the identifiers - is renamed.
    """
    out: list[str] = []
    i, n = 0, len(latex)
    while i < n:
        char = latex[i]
        if char == "\\":
            found = _CONTROL.match(latex, i)
            if found is None:  # a lone backslash at the very end
                out.append(char)
                break
            end = found.end()
            name = found.group(1)
            if name in _NAME_ARGUMENT:
                stop = _verbatim_argument(latex, end, optional=name != "begin")
                if name == "begin":
                    env = latex[end:stop].strip().strip("{}").strip()
                    if env in _TABLES:
                        stop = _verbatim_argument(latex, stop)
                end = stop
            elif name in _NAME_SWITCH:
                end = _group_rest(latex, end)
            elif name == "multicolumn":
                end = _verbatim_argument(latex, _verbatim_argument(latex, end, optional=False))
            elif name in _DIMENSION:
                dimension = _DIMEN.match(latex, end)
                if dimension is not None:
                    end = dimension.end()
            elif found.group(0) == "\\\\":
                after = _SPACES.match(latex, end).end()  # type: ignore[union-attr]
                if after < n and latex[after] == "[":
                    end = _group_end(latex, after, "[", "]")
            out.append(latex[i:end])
            i = end
        elif char == "%":
            stop = latex.find("\n", i)
            stop = n if stop < 0 else stop
            out.append(latex[i:stop])
            i = stop
        else:
            out.append(mapping.get(char, char))
            i += 1
    return "".join(out)


_PAIR = re.compile(r"\A(.+?)\|(next|sup|sub|presup|presub|over|under|num|den|frac|in|idx)\|(.+)\Z")


def _rename_label(label: str, mapping: Mapping[str, str]) -> str:
    return mapping.get(label, label) if len(label) == 1 else label


def rename_tokens(tokens: Iterable[str], mapping: Mapping[str, str]) -> list[str]:
    """Math tokens (:func:`mathsearch.indexer.lexical.math_tokens`) with one-letter labels renamed.

    Symbols, both ends of symbol pairs (``x|sup|2``) and the labels of paths
    (``path:msup0:x``) are renamed when they are a single letter of ``mapping``; tag pairs and
    shapes, which hold no identifier, are unchanged. This is what featurising the renamed LaTeX
    gives when every identifier is one letter (multi-letter names such as ``\\mathrm{Tr}`` are
    kept by :func:`rename_latex` and here).
    """
    out: list[str] = []
    for token in tokens:
        if token.startswith("shape:"):
            out.append(token)
        elif token.startswith("path:"):
            head, _, label = token.rpartition(":")
            if not label and head.endswith(":"):  # the label is ":" itself
                out.append(token)
            else:
                out.append(f"{head}:{_rename_label(label, mapping)}")
        elif (pair := _PAIR.match(token)) is not None:
            left, rel, right = pair.groups()
            out.append(f"{_rename_label(left, mapping)}|{rel}|{_rename_label(right, mapping)}")
        else:
            out.append(_rename_label(token, mapping))
    return out
