r"""Lexical features of an equation: the BoW vector, math tokens for BM25, and symbol keywords.

``bow_vector(graph)``: the seed's bag-of-words baseline (KDD 2020, section 5): the sum of the
one-hot node features, 256-d float32, computed with ``np.bincount`` over the id arrays.

``math_tokens(tree)``: the text of the ``math_tokens`` field (OpenSearch whitespace analyzer, BM25).
A token never contains whitespace (whitespace in a label becomes ``_``). Kinds, in this order,
capped at :data:`MAX_TOKENS` per equation (later kinds are cut first):

1. symbols: the label of every token element (the whole text, ``sin``, ``12``, ``α``; invisible
   operators such as U+2061 dropped), once per occurrence, so BM25's term frequency counts them;
2. symbol pairs ``a|rel|b`` along the symbol layout tree (Tangent): ``next`` (baseline neighbours:
   the last baseline symbol of one row item and the first symbol of the next), ``sup``, ``sub``,
   ``presup``, ``presub``, ``over``, ``under`` (from the base's last baseline symbol to the
   script's first symbol); a fraction is the pseudo-symbol ``#frac`` with ``#frac|num|a``,
   ``#frac|den|b`` and the direct ``a|frac|b``; roots are ``#sqrt`` / ``#root`` with
   ``#sqrt|in|x``, ``#root|in|x`` and ``#root|idx|n``; tables are rows of rows (``mtd`` cells are
   row-like). Pairs come out bottom-up, outermost row first (the order only matters for the cap);
3. leaf-to-root paths (Approach Zero): ``path:STEPS:label``, where STEPS are the structural
   ancestors nearest first (at most 4), each the tag with the child's index (``msup0`` = base,
   ``msup1`` = superscript, ``mfrac1`` = denominator; ``msqrt`` has no index); row-like elements
   (``mrow``, ``mstyle``, ``mtd``, ...) are transparent. Symbols on the outer baseline get none;
4. tag pairs ``parent>child`` of every element edge;
5. shapes ``shape:STEPS:tag``: a path with the token tag instead of the label, so BM25 also
   rewards the same layout with renamed variables.

Worked example, ``x^2 + \frac{a}{b}`` as KaTeX MathML
``<math><mrow><msup><mi>x</mi><mn>2</mn></msup><mo>+</mo><mfrac><mi>a</mi><mi>b</mi></mfrac>
</mrow></math>``::

    x 2 + a b
    +|next|#frac x|next|+ x|sup|2 #frac|den|b #frac|num|a a|frac|b
    path:msup0:x path:msup1:2 path:mfrac0:a path:mfrac1:b
    math>mrow mrow>msup msup>mi msup>mn mrow>mo mrow>mfrac mfrac>mi mfrac>mi
    shape:msup0:mi shape:msup1:mn shape:mfrac0:mi shape:mfrac1:mi

``symbols(tree)``: ``identifiers`` (``mi`` text of one character, or of several non-letters),
``operators`` (``mo`` text except fences, separators, punctuation and invisible operators) and
``functions`` (multi-letter ``mi`` such as ``sin``, ``det``, ``\operatorname{tr}``, and
multi-letter ``mo`` such as ``lim``), each deduplicated in order of first occurrence, for keyword
fields; ``symbol_keywords(tree)`` flattens them.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from functools import lru_cache

import numpy as np

from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.indexer.mathml_tree import MathNode

logger = logging.getLogger(__name__)

__all__ = ["MAX_TOKENS", "bow_vector", "math_tokens", "symbol_keywords", "symbols"]

#: Most math tokens kept per equation.
MAX_TOKENS = 512
#: Most structural steps in a path token.
MAX_STEPS = 4
_MAX_LABEL = 64

_SCRIPTS = {
    "msup": ("sup",),
    "msub": ("sub",),
    "msubsup": ("sub", "sup"),
    "mover": ("over",),
    "munder": ("under",),
    "munderover": ("under", "over"),
}
_INDEXED = frozenset({*_SCRIPTS, "mmultiscripts", "mfrac", "mroot"})
_INVISIBLE = str.maketrans(dict.fromkeys("\u2061\u2062\u2063\u2064\u200b\u200c\u200d\ufeff"))
_SPACE = re.compile(r"\s+")
_FENCES = frozenset("()[]{}|‖⟨⟩⌊⌋⌈⌉⟦⟧,;.:")
_TRUE = "true"
_SYMBOL_TAGS = frozenset({"mi", "mo"})
_XML_WS = " \t\n\r"


@lru_cache(maxsize=8)
def _bow_keep(sizes: tuple[int, int, int]) -> np.ndarray:
    """Bins of the shifted ids that are real slots (the "none" bins -1 land on are dropped)."""
    s0, s1, s2 = sizes
    return np.r_[0:s0, s0 + 1 : s0 + 1 + s1, s0 + s1 + 2 : s0 + s1 + 2 + s2]


def bow_vector(graph: EquationGraph) -> np.ndarray:
    """The sum of the one-hot node features (float32, ``(256,)``), without building them.

    Attribute and character ids are shifted past a "none" bin each (where -1 lands), counted
    with one ``np.bincount`` and the none bins dropped.
    """
    sizes = tuple(graph.sizes)
    s0, s1, _ = sizes
    ids = np.concatenate((graph.tag_ids, graph.attr_ids + (s0 + 1), graph.char_ids + (s0 + s1 + 2)))
    counts = np.bincount(ids, minlength=sum(sizes) + 2)
    return counts[_bow_keep(sizes)].astype(np.float32)


def _slow_label(text: str) -> str | None:
    """A label for stripped text that is not short, printable, space-free ASCII."""
    if not text.isascii():
        text = unicodedata.normalize("NFC", text).translate(_INVISIBLE)
    if _SPACE.search(text):
        text = _SPACE.sub("_", text).strip("_")
    return text[:_MAX_LABEL] or None


def _multiscript_relations(kids: list[int], nodes: list[MathNode]) -> list[str]:
    rels: list[str] = []
    pre = False
    slot = 0
    for k in kids[1:]:
        if nodes[k].tag == "mprescripts":
            pre, slot = True, 0
            rels.append("")
            continue
        rel = ("sub", "sup")[slot % 2]
        rels.append("pre" + rel if pre else rel)
        slot += 1
    return rels


def math_tokens(tree: MathNode, limit: int = MAX_TOKENS) -> list[str]:
    """Symbols, symbol pairs, paths, tag pairs and shapes (see the module docstring)."""
    nodes: list[MathNode] = []
    labels: list[str | None] = []
    kids: list[list[int]] = []
    symbol_tokens: list[str] = []
    path_tokens: list[str] = []
    tag_pairs: list[str] = []
    shape_tokens: list[str] = []
    indexed = _INDEXED
    no_kids: list[int] = []  # shared by all childless nodes, never appended to
    # (node, parent index, parent tag + ">", structural steps nearest first joined by ".",
    # number of steps)
    stack: list[tuple[MathNode, int, str, str, int]] = [(tree, -1, "", "", 0)]
    pop, push = stack.pop, stack.append
    while stack:
        node, parent, up, steps, nsteps = pop()
        index = len(nodes)
        nodes.append(node)
        children = node.children
        kids.append([] if children else no_kids)
        tag = node.tag
        if parent >= 0:
            kids[parent].append(index)
            tag_pairs.append(up + tag)
        label = None
        text = node.text
        if text:
            label = text.strip(_XML_WS)
            if (
                " " in label
                or not label.isascii()
                or not label.isprintable()
                or len(label) > _MAX_LABEL
            ):
                label = _slow_label(label)
            if label:
                symbol_tokens.append(label)
                if steps:
                    path_tokens.append("path:" + steps + ":" + label)
                    shape_tokens.append("shape:" + steps + ":" + tag)
            else:
                label = None
        labels.append(label)
        if not children:
            continue
        up = tag + ">"
        if tag in indexed or tag == "msqrt":
            if nsteps == MAX_STEPS:
                steps = steps.rpartition(".")[0]
            else:
                nsteps += 1
            tail = "." + steps if steps else ""
            if tag == "msqrt":
                child_steps = "msqrt" + tail
                for child in reversed(children):
                    push((child, index, up, child_steps, nsteps))
            else:
                j = len(children)
                for child in reversed(children):
                    j -= 1
                    push((child, index, up, f"{tag}{j}{tail}", nsteps))
        else:
            for child in reversed(children):
                push((child, index, up, steps, nsteps))

    tokens = symbol_tokens
    tokens += _pairs(nodes, labels, kids)
    tokens += path_tokens
    tokens += tag_pairs
    tokens += shape_tokens
    return tokens[:limit] if len(tokens) > limit else tokens


def _pairs(nodes: list[MathNode], labels: list[str | None], kids: list[list[int]]) -> list[str]:
    """Symbol-layout-tree pairs, computed bottom-up (children before parents)."""
    n = len(nodes)
    head: list[str | None] = [None] * n
    tail: list[str | None] = [None] * n
    out: list[str] = []
    for i in range(n - 1, -1, -1):
        label = labels[i]
        if label is not None:
            head[i] = tail[i] = label
            continue
        ks = kids[i]
        if not ks:
            continue
        tag = nodes[i].tag
        rels = _SCRIPTS.get(tag)
        if rels is not None or tag == "mmultiscripts":
            if rels is None:
                rels = tuple(_multiscript_relations(ks, nodes))
            base = ks[0]
            last = tail[base]
            if last is not None:
                for rel, k in zip(rels, ks[1:], strict=False):
                    first = head[k]
                    if first is not None and rel:
                        out.append(f"{last}|{rel}|{first}")
            head[i], tail[i] = head[base], last
        elif tag == "mfrac" and len(ks) >= 2:
            num, den = head[ks[0]], head[ks[1]]
            if num is not None and den is not None:
                out.append(f"{num}|frac|{den}")
            if num is not None:
                out.append(f"#frac|num|{num}")
            if den is not None:
                out.append(f"#frac|den|{den}")
            head[i] = tail[i] = "#frac"
        elif tag == "mroot" and len(ks) >= 2:
            if head[ks[0]] is not None:
                out.append(f"#root|in|{head[ks[0]]}")
            if head[ks[1]] is not None:
                out.append(f"#root|idx|{head[ks[1]]}")
            head[i] = tail[i] = "#root"
        else:
            first = previous = None
            for k in ks:
                if head[k] is None:
                    continue
                if previous is not None:
                    out.append(f"{previous}|next|{head[k]}")
                else:
                    first = head[k]
                previous = tail[k]
            if tag == "msqrt":
                if first is not None:
                    out.append(f"#sqrt|in|{first}")
                head[i] = tail[i] = "#sqrt"
            else:
                head[i], tail[i] = first, previous
    out.reverse()  # roughly document order (each node's own pairs come out reversed)
    return out


def symbols(tree: MathNode) -> dict[str, list[str]]:
    """Identifiers, operators and functions of the equation (deduplicated, first-seen order)."""
    identifiers: dict[str, None] = {}
    operators: dict[str, None] = {}
    functions: dict[str, None] = {}
    stack = [tree]
    pop, extend = stack.pop, stack.extend
    while stack:
        node = pop()
        children = node.children
        if children:
            extend(reversed(children))
        tag = node.tag
        text = node.text
        if not text or tag not in _SYMBOL_TAGS:
            continue
        text = text.strip(_XML_WS)
        if not text.isascii():
            text = unicodedata.normalize("NFC", text).translate(_INVISIBLE).strip()
        if not text:
            continue
        if tag == "mi":
            if len(text) > 1 and not text.isdigit() and any(ch.isalpha() for ch in text):
                functions[text] = None
            else:
                identifiers[text] = None
            continue
        attrs = node.attrs
        if attrs and (attrs.get("fence") == _TRUE or attrs.get("separator") == _TRUE):
            continue
        if text in _FENCES:
            continue
        if len(text) > 1 and text.isalpha():
            functions[text] = None
        else:
            operators[text] = None
    return {
        "identifiers": list(identifiers),
        "operators": list(operators),
        "functions": list(functions),
    }


def symbol_keywords(tree: MathNode) -> list[str]:
    """Identifiers, then operators, then functions, as one deduplicated keyword list."""
    out: dict[str, None] = {}
    for values in symbols(tree).values():
        out.update(dict.fromkeys(values))
    return list(out)
