"""SemVec expressions as prefix (Polish) tokens in the E-Gen convention of
:mod:`mathsearch.indexer.prefix`.

The seq2seq (ExpEmb) encoder reads prefix token sequences (expemb seed, section 3, "Data
Formatting"). A SemVec member (:mod:`mathsearch.indexer.semvec`) carries its parse ``Tree``: nested
``{"Name", "Symbol", "Children": {"child" | "left", "right"}}`` under a ``Start`` root. Its
prefix form writes each operator node before its children (``left`` then ``right``):

============  ===========  =====================================================
tree name     token        note
============  ===========  =====================================================
``Add``       ``+``        as in E-Gen
``Subtract``  ``-``        binary minus, as written (E-Gen has it too)
``Multiply``  ``*``        as in E-Gen
``Pow``       ``pow``      as in E-Gen (does not occur in the 15 sets)
``And``       ``and``      boolean tokens beyond E-Gen (binary)
``Or``        ``or``
``Xor``       ``xor``
``Implies``   ``implies``
``Not``       ``not``      unary
``a`` .. ``j`` themselves  variables; integers stay one decimal token
============  ===========  =====================================================

Any other name raises :class:`~mathsearch.indexer.semvec.SemvecTokenError` (never guessed).

Example::

    tree_to_prefix({"Name": "Start", "Children": {"child": {"Name": "And", "Children": {
        "left": {"Name": "a"}, "right": {"Name": "Not", "Children": {"child": {"Name": "b"}}}}}}})
    # ['and', 'a', 'not', 'b']

:func:`token_arity` and :func:`is_complete_prefix` know both the :mod:`mathsearch.indexer.prefix`
tokens and
the boolean ones, so beam search can tell a finished expression tree from a broken one.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from mathsearch.indexer.errors import ExtractionError
from mathsearch.indexer.prefix import PrefixError, parse_prefix_line
from mathsearch.indexer.semvec import SemvecTokenError, read_semvec_raw, set_name

logger = logging.getLogger(__name__)

__all__ = [
    "BOOLEAN_TOKENS",
    "TREE_TOKENS",
    "SemvecPrefixClass",
    "is_complete_prefix",
    "open_slots",
    "read_semvec_prefix",
    "token_arity",
    "tree_to_prefix",
]

#: SemVec tree node name -> prefix token (operators).
TREE_TOKENS: dict[str, str] = {
    "Add": "+",
    "Subtract": "-",
    "Multiply": "*",
    "Pow": "pow",
    "And": "and",
    "Or": "or",
    "Xor": "xor",
    "Implies": "implies",
    "Not": "not",
}
#: Boolean tokens (not in :mod:`mathsearch.indexer.prefix`) and their arity.
BOOLEAN_TOKENS: dict[str, int] = {"and": 2, "or": 2, "xor": 2, "implies": 2, "not": 1}
_LEAF = re.compile(r"^(?:[A-Za-z]|-?\d+)$")
_ORDER = ("child", "left", "right")


def tree_to_prefix(tree: Mapping[str, Any]) -> list[str]:
    """Prefix tokens of one SemVec ``Tree`` (the ``Start`` root is skipped).

    Raises:
        SemvecTokenError: a node name without a token, or a malformed tree.
    """
    out: list[str] = []
    stack: list[Any] = [tree]
    while stack:  # iterative: no recursion limit on deep trees
        node = stack.pop()
        if not isinstance(node, Mapping) or not isinstance(node.get("Name"), str):
            raise SemvecTokenError(f"malformed SemVec tree node {str(node)[:80]!r}")
        name = node["Name"]
        children = node.get("Children") or {}
        if not isinstance(children, Mapping):
            raise SemvecTokenError(f"node {name!r}: 'Children' is not an object")
        ordered = [children[key] for key in _ORDER if key in children]
        if len(ordered) != len(children):
            raise SemvecTokenError(f"node {name!r}: unknown child keys {sorted(children)}")
        if name == "Start":
            if len(ordered) != 1:
                raise SemvecTokenError("a Start node needs exactly one child")
        elif name in TREE_TOKENS:
            token = TREE_TOKENS[name]
            if len(ordered) != token_arity(token):
                raise SemvecTokenError(f"{name} with {len(ordered)} children")
            out.append(token)
        elif _LEAF.match(name) and not ordered:
            out.append(name)
        else:
            raise SemvecTokenError(f"SemVec tree node {name!r} has no prefix token")
        stack.extend(reversed(ordered))
    return out


@lru_cache(maxsize=4096)
def token_arity(token: str) -> int:
    """Operands a prefix token takes: 0 for leaves, 1 for ``sin``/``not``, 2 for ``+`` ...

    The :mod:`mathsearch.indexer.prefix` tokens are asked of
    :func:`~mathsearch.indexer.prefix.parse_prefix_line`
    (the arity that E-Gen lines are checked with); ``fnN`` takes ``N + 1``.
    """
    if token in BOOLEAN_TOKENS:
        return BOOLEAN_TOKENS[token]
    for arity in range(6):
        try:
            parse_prefix_line(" ".join([token] + ["x"] * arity))
            return arity
        except PrefixError:
            continue
    match = re.fullmatch(r"fn(\d+)", token)
    return int(match.group(1)) + 1 if match else 0


def is_complete_prefix(tokens: Sequence[str]) -> bool:
    """Whether ``tokens`` is exactly one expression tree (no operand missing, none extra)."""
    open_slots = 1
    for token in tokens:
        if open_slots == 0:
            return False
        open_slots += token_arity(token) - 1
    return bool(tokens) and open_slots == 0


def open_slots(tokens: Sequence[str]) -> int:
    """Operands still missing after ``tokens`` (0: a complete tree; < 0: extra tokens)."""
    slots = 1
    for token in tokens:
        slots += token_arity(token) - 1
    return slots


@dataclass(frozen=True)
class SemvecPrefixClass:
    """One SemVec equivalence class as prefix sequences (Original first, then Noise)."""

    set_name: str
    class_id: str
    canonical: str
    members: tuple[tuple[str, ...], ...]


def read_semvec_prefix(path: str | Path) -> list[SemvecPrefixClass]:
    """The classes of one SemVec set file, members as prefix tokens (ids as
    :func:`mathsearch.indexer.semvec.read_semvec`: ``<set>-c<index>``).

    Raises:
        ExtractionError: the file is unreadable or not in the SemVec format.
        SemvecTokenError: a tree node without a token.
    """
    name = set_name(path)
    classes: list[SemvecPrefixClass] = []
    for index, (canonical, value) in enumerate(read_semvec_raw(path).items()):
        if not isinstance(value, dict) or "Original" not in value:
            raise ExtractionError(f"{path}: class {canonical!r} has no 'Original'")
        members = []
        for entry in [value["Original"], *(value.get("Noise") or [])]:
            tree = entry.get("Tree") if isinstance(entry, dict) else None
            if not isinstance(tree, Mapping):
                raise ExtractionError(f"{path}: class {canonical!r} has a member without a Tree")
            members.append(tuple(tree_to_prefix(tree)))
        classes.append(SemvecPrefixClass(name, f"{name}-c{index}", str(canonical), tuple(members)))
    logger.info("%s: %d classes as prefix sequences", name, len(classes))
    return classes
