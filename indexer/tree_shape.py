"""The normal form of Presentation MathML trees that wildcard matching and its LaTeX writer
share (:mod:`mathsearch.indexer.unify`, :mod:`mathsearch.indexer.tree_latex`): rows alike, a row
of one child that child, invisible operators and blank spacing dropped, ``msubsup`` split, only
``mathvariant`` of tokens compared; and :func:`equal_trees` under that normal form.
"""

from __future__ import annotations

from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.query_variables import QVAR_TEXT_ATTR

__all__ = [
    "BLANK",
    "INVISIBLE",
    "ROWLIKE",
    "TRANSPARENT",
    "equal_trees",
    "filler",
    "is_glob",
    "is_token",
    "kids_of",
    "row_kids",
    "row_tag",
    "split_subsup",
    "token_variant",
    "unwrap",
    "visible",
]

TRANSPARENT = frozenset({"math", "mrow", "mstyle", "mpadded"})
ROWLIKE = TRANSPARENT | {"msqrt", "menclose", "mphantom", "merror", "mtd"}
FILLER_TAGS = frozenset({"mo", "mspace", "mtext"})
BLANK = str.maketrans(dict.fromkeys("\u2061\u2062\u2063\u2064\u200b\u00a0"))
INVISIBLE = frozenset("\u2061\u2062\u2063\u2064\u200b")


def filler(node: MathNode) -> bool:
    """``mspace``, and ``mo`` / ``mtext`` that show nothing (invisible operators, blanks)."""
    if node.tag == "mspace":
        return True
    text = node.text
    return not text or text in INVISIBLE or text.isspace()


def visible(children: list[MathNode]) -> list[MathNode]:
    """``children`` without fillers (the list itself when it has none: do not mutate it)."""
    fillers, invisible = FILLER_TAGS, INVISIBLE
    for child in children:
        if child.tag in fillers:
            text = child.text
            if child.tag == "mspace" or not text or text in invisible or text.isspace():
                return [c for c in children if c.tag not in fillers or not filler(c)]
    return children


def unwrap(node: MathNode) -> MathNode:
    """A row with one visible child is that child (repeatedly)."""
    while node.tag in TRANSPARENT:
        kids = node.children
        if len(kids) == 1:
            node = kids[0]
            continue
        if not kids or len(kids) > 6:
            return node
        shown = visible(kids)
        if len(shown) != 1:
            return node
        node = shown[0]
    return node


def row_kids(node: MathNode) -> list[MathNode]:
    """The visible children of a row-like node (a lone inner row is looked through)."""
    kids = visible(node.children)
    while len(kids) == 1 and kids[0].tag in TRANSPARENT:
        kids = visible(kids[0].children)
    return kids


def split_subsup(node: MathNode) -> MathNode:
    """``msubsup(b, s, t)`` as ``msup(msub(b, s), t)`` (new nodes over the same children)."""
    kids = node.children
    if len(kids) != 3:
        return node
    return MathNode("msup", children=[MathNode("msub", children=kids[:2]), kids[2]])


def row_tag(node: MathNode) -> str:
    return "mrow" if node.tag in TRANSPARENT else node.tag


def token_variant(node: MathNode) -> str | None:
    """A token's ``mathvariant`` (None for none or ``italic``, the identifiers' default)."""
    attrs = node.attrs
    if not attrs:
        return None
    value = attrs.get("mathvariant")
    return None if value == "italic" else value


def is_token(node: MathNode) -> bool:
    return node.text is not None and not node.children


def is_glob(node: MathNode) -> bool:
    """Whether ``node`` is text with variables (:data:`QVAR_TEXT_ATTR`)."""
    return bool(node.attrs and node.attrs.get(QVAR_TEXT_ATTR))


def kids_of(node: MathNode) -> list[MathNode]:
    return row_kids(node) if node.tag in ROWLIKE else node.children


def equal_trees(a: MathNode, b: MathNode) -> bool:
    """Whether two trees are equal after the normalisation of the module docstring (tags,
    ``mathvariant``, stripped token texts, children; variables by name).

    >>> from mathsearch.indexer.latex_to_mathml import latex_to_mathml
    >>> equal_trees(latex_to_mathml("{x}^{2}").tree, latex_to_mathml(r"x^2\\,").tree)
    True
    """
    stack = [(a, b)]
    while stack:
        left, right = stack.pop()
        if left is right:
            continue
        left, right = unwrap(left), unwrap(right)
        if left.tag == "msubsup":
            left = split_subsup(left)
        if right.tag == "msubsup":
            right = split_subsup(right)
        if row_tag(left) != row_tag(right):
            return False
        if is_token(left) or is_token(right):
            if (left.text or "").strip() != (right.text or "").strip():
                return False
            if token_variant(left) != token_variant(right) or left.children or right.children:
                return False
            continue
        if is_glob(left) != is_glob(right):
            return False
        lk, rk = kids_of(left), kids_of(right)
        if len(lk) != len(rk):
            return False
        stack.extend(zip(lk, rk, strict=True))
    return True
