"""The in-memory Presentation MathML tree every featurisation works on.

Both the LaTeX converters and the MathML reader produce :class:`MathNode` trees, so the graph, the
BoW vector, the math tokens and the symbols are computed from one structure whatever the source was
(docs/architecture.md, rule 2, one featurisation). Token elements (``mi``, ``mn``, ``mo``,
``mtext``, ``ms``) carry ``text``; layout elements carry ``children``.
"""

from __future__ import annotations

from collections.abc import Iterator

#: MathML token elements: their content is text, never children.
TOKEN_TAGS = frozenset({"mi", "mn", "mo", "mtext", "ms", "mspace"})

_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})


class MathNode:
    """One MathML element: local tag name, attributes, children, text (token elements).

    >>> node = MathNode("mrow", children=[MathNode("mi", text="x"), MathNode("mo", text="+")])
    >>> to_mathml(node, display=False)
    '<math xmlns="http://www.w3.org/1998/Math/MathML"><mrow><mi>x</mi><mo>+</mo></mrow></math>'
    """

    __slots__ = ("attrs", "children", "tag", "text")

    def __init__(
        self,
        tag: str,
        attrs: dict[str, str] | None = None,
        children: list[MathNode] | None = None,
        text: str | None = None,
    ) -> None:
        self.tag = tag
        self.attrs = attrs
        self.children = children if children is not None else []
        self.text = text

    def __repr__(self) -> str:
        if self.text is not None:
            return f"MathNode({self.tag!r}, text={self.text!r})"
        return f"MathNode({self.tag!r}, {len(self.children)} children)"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MathNode):
            return NotImplemented
        return (
            self.tag == other.tag
            and (self.attrs or {}) == (other.attrs or {})
            and (self.text or None) == (other.text or None)
            and self.children == other.children
        )

    __hash__ = None  # type: ignore[assignment]

    def iter(self) -> Iterator[MathNode]:
        """Pre-order traversal (iterative: deep trees do not hit the recursion limit)."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def depth(self) -> int:
        """Levels of the tree (a single element has depth 1)."""
        best = 0
        stack = [(self, 1)]
        while stack:
            node, level = stack.pop()
            best = max(best, level)
            stack.extend((child, level + 1) for child in node.children)
        return best

    def size(self) -> int:
        """Number of elements."""
        return sum(1 for _ in self.iter())


def _write(node: MathNode, out: list[str]) -> None:
    # Iterative serialisation: an explicit stack of (node, closing) entries.
    stack: list[MathNode | str] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        out.append("<" + item.tag)
        if item.attrs:
            for key, value in item.attrs.items():
                out.append(f' {key}="{value.translate(_ESCAPES)}"')
        if item.text is None and not item.children:
            out.append("/>")
            continue
        out.append(">")
        if item.text is not None:
            out.append(item.text.translate(_ESCAPES))
        stack.append(f"</{item.tag}>")
        stack.extend(reversed(item.children))


def to_mathml(node: MathNode, display: bool = True) -> str:
    """Serialise a tree as a standalone ``<math>`` element (MathML namespace)."""
    out: list[str] = ['<math xmlns="http://www.w3.org/1998/Math/MathML"']
    out.append(' display="block">' if display else ">")
    if node.tag == "math":
        for child in node.children:
            _write(child, out)
    else:
        _write(node, out)
    out.append("</math>")
    return "".join(out)
