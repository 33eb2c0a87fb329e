r"""Unification of a query pattern (with variables) against equation trees, and its scores.

The spec of a match, on Presentation MathML trees (:class:`MathNode`):

1. **Normalisation, both sides.** ``math``, ``mrow``, ``mstyle`` and ``mpadded`` are rows, all
   alike; a row with one child is that child (``{x}`` unifies with ``x``). In a row, invisible
   operators (U+2061-U+2064, function application), ``mspace`` and blank ``mtext`` are dropped,
   so ``?f(?x)`` meets ``\sin(x)`` and ``a\,b`` equals ``ab``. Elements that lay out a sequence
   (rows, ``msqrt``, ``menclose``, ``mphantom``, ``merror``, ``mtd``) compare their children as a
   row; the others (``msup``, ``mfrac``, ``mroot``, ``munderover``, ``mtable``, ...) child by
   child; ``msubsup(b, s, t)`` is ``msup(msub(b, s), t)``, so ``?x^2`` meets ``p_x^2`` with
   ``x = p_x``. Attributes are ignored except ``mathvariant`` of tokens (``italic`` = none).
2. **A variable binds exactly one sub-expression**: one node; in a row it may also bind a
   contiguous run of one or more siblings (the binding is then a new ``mrow`` over the
   original nodes, no copy). A run never crosses a relation or a separator of its row (``=``,
   ``<``, ``\to``, ``,``, ``;`` ...): ``?a = ?b`` is not ``x = y = z`` as a whole; and its
   brackets are balanced (``(``, ``[``, ``\{``, angle, floor and ceiling brackets).
3. **Leftmost-shortest.** Runs are tried shortest first, variables left to right, so among the
   bindings that unify, the first variable gets the shortest run: ``?a + ?b`` against
   ``x + y + z`` binds ``a = x``, ``b = y + z``. Backtracking is complete (every split is tried)
   within a budget of :data:`MAX_STEPS` steps per call; past it the attempt counts as failed.
4. **The same name binds equal sub-expressions** (:func:`equal_trees`); different names may
   bind different or equal ones (``?x + ?y`` matches ``a + a``).
5. **No commutativity, no associativity**: ``a + b`` does not match ``b + a``; ``{a+b}+c`` is
   not ``a+{b+c}``. Variables work everywhere a node stands: scripts, fractions, roots,
   accents, table cells. A variable inside text (``\text{Frequency ?x}``) matches an ``mtext``
   as a glob, binding the rest of the text (``mtext``).

:func:`match` scores a candidate (the best of, in this order):

- ``exact`` (1.0): the pattern unifies with the whole equation.
- ``contained`` (in (0.5, 1)): with a sub-expression: a node, or a contiguous run of a row
  (``?a + ?b`` in ``E = x + y``). Score ``0.5 + 0.5 * pattern size / equation size`` (nodes after
  normalisation, a variable counts 1): the more of the equation the pattern accounts for, the
  higher. The reported bindings are the first match in document order, leftmost-shortest.
- ``partial`` (in [0, 0.5)): the largest proper part of the pattern (a sub-tree, or a run of
  two or more items of one of its rows starting at a non-variable) that is contained in the
  equation; score ``0.5 * part size / pattern size``; bindings are the part's.
- ``none`` (0.0).

Speed: the pattern is compiled once (cached by identity, so do not mutate a pattern tree after
its first match); each candidate is walked once to index its nodes by tag and text, and each
attempt fails on the first node that differs.

>>> from mathsearch.indexer.latex_to_mathml import latex_to_mathml
>>> from mathsearch.indexer.query_variables import QVAR_TAG
>>> x = MathNode(QVAR_TAG, text="x")
>>> pattern = MathNode("mrow", children=[x, MathNode("mo", text="+"), x])
>>> unify(pattern, latex_to_mathml("a+b").tree) is None
True
>>> {k: subtree_latex(v) for k, v in unify(pattern, latex_to_mathml("a+a").tree).items()}
{'x': 'a'}
>>> result = match(pattern, latex_to_mathml(r"E = \frac{1}{2}+\frac{1}{2}").tree)
>>> result.kind, round(result.score, 3), result.bindings_latex()
('contained', 0.7, {'x': '\\frac{1}{2}'})
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import repeat

from mathsearch.indexer import latex_symbols as sym
from mathsearch.indexer.lexical import symbols
from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.query_variables import QVAR_TAG
from mathsearch.indexer.tree_latex import subtree_latex
from mathsearch.indexer.tree_shape import (
    ROWLIKE,
    TRANSPARENT,
    equal_trees,
    is_glob,
    is_token,
    kids_of,
    row_kids,
    row_tag,
    split_subsup,
    token_variant,
    unwrap,
)

logger = logging.getLogger(__name__)

__all__ = [
    "MAX_STEPS",
    "Match",
    "equal_trees",
    "match",
    "required_symbols",
    "subtree_latex",
    "unify",
]

#: Backtracking steps one :func:`unify` / :func:`match` call may take.
MAX_STEPS = 20_000

_OPENING = frozenset("([{\u27e8\u230a\u2308")
_CLOSING = frozenset(")]}\u27e9\u230b\u2309")
_BREAKS = frozenset({*sym.RELATIONS.values(), "=", "<", ">", ",", ";", "≠", "≤", "≥"})
_CACHE_SIZE = 64


# -- the compiled pattern --------------------------------------------------------------------


class _P:
    """One normalised pattern node."""

    __slots__ = (
        "det",
        "kids",
        "needs",
        "regex",
        "rnames",
        "row",
        "size",
        "tag",
        "text",
        "var",
        "variant",
    )

    def __init__(self) -> None:
        self.tag = ""
        self.text: str | None = None
        self.variant: str | None = None
        self.var: str | None = None
        self.kids: tuple[_P, ...] = ()
        self.row = False
        self.det = True  # no row with a variable item below: at most one way to unify
        self.size = 1
        self.regex: re.Pattern[str] | None = None
        self.rnames: tuple[str, ...] = ()
        # (key, count) of the sub-tree's non-variable nodes but rows: a tree lacking them
        # cannot hold a match (unification maps pattern nodes to distinct nodes).
        self.needs: tuple[tuple[object, int], ...] = ()

    @property
    def key(self) -> object:
        return (self.tag, self.text) if self.text is not None and self.tag != "mtext" else self.tag


def _compile(node: MathNode) -> _P:
    node = unwrap(node)
    if node.tag == "msubsup":
        node = split_subsup(node)
    p = _P()
    if node.tag == QVAR_TAG:
        p.var = p.text = (node.text or "").strip()
        p.tag = QVAR_TAG
        return p
    if is_glob(node):
        return _compile_text(node, p)
    p.tag = row_tag(node)
    if is_token(node):
        p.text = (node.text or "").strip()
        p.variant = token_variant(node)
        return p
    p.row = node.tag in ROWLIKE
    p.kids = tuple(_compile(child) for child in kids_of(node))
    p.size = 1 + sum(k.size for k in p.kids)
    p.det = all(k.det for k in p.kids) and not (p.row and any(k.var for k in p.kids))
    return p


def _needs(items: tuple[_P, ...]) -> tuple[tuple[object, int], ...]:
    counts: dict[object, int] = {}
    stack = list(items)
    while stack:
        p = stack.pop()
        if p.var is None and p.tag != "mrow":
            counts[p.key] = counts.get(p.key, 0) + 1
        stack.extend(p.kids)
    return tuple(counts.items())


def _compile_text(node: MathNode, p: _P) -> _P:
    """Text with variables: an ``mtext`` glob, each variable a lazy group (repeats: backrefs)."""
    parts: list[str] = []
    names: list[str] = []
    for child in node.children:
        if child.tag == QVAR_TAG:
            name = (child.text or "").strip()
            if name in names:
                parts.append(rf"\s*(?P=v{names.index(name)})\s*")
            else:
                parts.append(rf"\s*(?P<v{len(names)}>.+?)\s*")
                names.append(name)
        else:
            parts.append(r"\s+".join(re.escape(w) for w in (child.text or "").split()))
    p.tag = "mtext"
    p.regex = re.compile("".join(parts), re.DOTALL)
    p.rnames = tuple(names)
    return p


class _Compiled:
    """A compiled pattern: the root, its sub-trees (largest first) and the runs of its rows
    that can be partial matches: ``(row, start, last stop)``, runs of two or more items."""

    __slots__ = ("keys", "nodes", "pattern", "repeated", "root", "runs", "tags")

    def __init__(self, pattern: MathNode) -> None:
        self.pattern = pattern
        self.root = root = _compile(pattern)
        self.nodes: list[_P] = []
        runs: list[tuple[_P, int, int]] = []
        stack = [root]
        while stack:
            p = stack.pop()
            if p.var is None and p is not root:
                self.nodes.append(p)
            if p.row:
                n = len(p.kids)
                limit = n - 1 if p is root else n  # the whole root row is no part
                runs.extend(
                    (p, start, limit)
                    for start in range(n)
                    if p.kids[start].var is None and limit - start >= 2
                )
            stack.extend(p.kids)
        self.nodes.sort(key=lambda p: -p.size)
        #: (row, start, last stop, item sizes, needs of the run of two at start)
        self.runs = [
            (p, start, limit, [k.size for k in p.kids], _needs(p.kids[start : start + 2]))
            for p, start, limit in runs
        ]
        for p in (root, *self.nodes):
            p.needs = _needs((p,))
        names = [p.var for p in _walk(root) if p.var is not None]
        self.repeated = frozenset(name for name in names if names.count(name) > 1)
        #: The keys (and their tags) a candidate's index needs: those of the pattern's nodes.
        self.keys = frozenset(p.key for p in _walk(root) if p.var is None and p.tag != "mrow")
        self.tags = frozenset(p.tag for p in _walk(root) if p.var is None and p.tag != "mrow")


def _walk(root: _P) -> Iterator[_P]:
    stack = [root]
    while stack:
        p = stack.pop()
        yield p
        stack.extend(p.kids)


_COMPILED: dict[int, _Compiled] = {}


def _compiled(pattern: MathNode) -> _Compiled:
    """The compiled pattern (cached by identity)."""
    entry = _COMPILED.get(id(pattern))
    if entry is not None and entry.pattern is pattern:
        return entry
    entry = _Compiled(pattern)
    if len(_COMPILED) >= _CACHE_SIZE:
        _COMPILED.clear()
    _COMPILED[id(pattern)] = entry
    return entry


# -- unification -----------------------------------------------------------------------------


class _OutOfStepsError(Exception):
    pass


class _State:
    __slots__ = ("bindings", "steps", "trail")

    def __init__(self) -> None:
        self.bindings: dict[str, MathNode] = {}
        self.trail: list[str] = []
        self.steps = 0

    def tick(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _OutOfStepsError

    def undo(self, mark: int) -> None:
        trail, bindings = self.trail, self.bindings
        while len(trail) > mark:
            del bindings[trail.pop()]

    def bind(self, name: str, node: MathNode) -> bool:
        old = self.bindings.get(name)
        if old is None:
            self.bindings[name] = node
            self.trail.append(name)
            return True
        return old is node or equal_trees(old, node)


def _det(p: _P, t: MathNode, st: _State) -> bool:
    """Unify a deterministic pattern node (bindings added to ``st``; the caller undoes)."""
    if t.tag in TRANSPARENT:
        t = unwrap(t)
    if p.var is not None:
        return st.bind(p.var, t)
    tag = t.tag
    if tag == "msubsup" and p.tag == "msup":
        t = split_subsup(t)
        tag = t.tag
    if p.tag != ("mrow" if tag in TRANSPARENT else tag):
        return False
    if p.regex is not None:
        return _text_glob(p, t, st)
    if not p.kids and p.text is not None:
        text = t.text
        return text == p.text and token_variant(t) == p.variant
    kids = row_kids(t) if p.row else t.children
    if len(kids) != len(p.kids):
        return False
    return all(_det(pk, tk, st) for pk, tk in zip(p.kids, kids, strict=True))


def _text_glob(p: _P, t: MathNode, st: _State) -> bool:
    found = p.regex.fullmatch((t.text or "").strip()) if p.regex is not None else None
    if found is None:
        return False
    return all(
        st.bind(name, MathNode("mtext", text=found.group(f"v{i}").strip()))
        for i, name in enumerate(p.rnames)
    )


def _gen(p: _P, t: MathNode, st: _State) -> Iterator[None]:
    """Every way ``p`` unifies with ``t``: yields with the bindings in ``st``, undoes them
    before trying the next way and when done."""
    mark = len(st.trail)
    if p.det:
        if _det(p, t, st):
            yield
        st.undo(mark)
        return
    t = unwrap(t)
    if t.tag == "msubsup" and p.tag == "msup":
        t = split_subsup(t)
    if p.tag != row_tag(t):
        return
    if p.row:
        kids = row_kids(t)
        for _ in _seq(p.kids, 0, kids, 0, st, anchored=True):
            yield
    else:
        kids = t.children
        if len(kids) == len(p.kids):
            yield from _fixed(p.kids, kids, 0, st)


def _fixed(pk: tuple[_P, ...], tk: list[MathNode], i: int, st: _State) -> Iterator[None]:
    if i == len(pk):
        yield
        return
    for _ in _gen(pk[i], tk[i], st):
        yield from _fixed(pk, tk, i + 1, st)


def _run(kids: list[MathNode], j: int, length: int) -> MathNode:
    return kids[j] if length == 1 else MathNode("mrow", children=kids[j : j + length])


def _bound_lengths(bound: MathNode, kids: list[MathNode], j: int, most: int) -> Iterator[int]:
    """Lengths of the runs at ``j`` equal to an earlier binding (1, or the row's length)."""
    if equal_trees(bound, kids[j]):
        yield 1
    bound = unwrap(bound)
    if bound.tag in TRANSPARENT:
        inner = row_kids(bound)
        n = len(inner)
        if 1 < n <= most and all(
            equal_trees(a, b) for a, b in zip(inner, kids[j : j + n], strict=True)
        ):
            yield n


def _seq(
    pk: tuple[_P, ...], i: int, tk: list[MathNode], j: int, st: _State, *, anchored: bool
) -> Iterator[int]:
    """Match pattern items ``pk[i:]`` to ``tk[j:]``; yields where each match ends (only at
    the end of ``tk`` when ``anchored``)."""
    st.tick()
    end = len(tk)
    if i == len(pk):
        if not anchored or j == end:
            yield j
        return
    p = pk[i]
    var = p.var
    if var is None:
        if j >= end:
            return
        for _ in _gen(p, tk[j], st):
            yield from _seq(pk, i + 1, tk, j + 1, st, anchored=anchored)
        return
    most = end - j - (len(pk) - i - 1)
    if most < 1:
        return
    bound = st.bindings.get(var)
    if bound is not None:
        for length in list(_bound_lengths(bound, tk, j, most)):
            yield from _seq(pk, i + 1, tk, j + length, st, anchored=anchored)
        return
    depth = 0  # brackets opened and not closed in the run: a run is balanced
    for length in range(1, most + 1):
        last = tk[j + length - 1]
        if length > 1:
            first = tk[j]
            if (last.tag == "mo" and last.text in _BREAKS) or (
                first.tag == "mo" and first.text in _BREAKS
            ):
                return
        if last.tag == "mo" and last.text:
            depth += (last.text in _OPENING) - (last.text in _CLOSING)
            if depth < 0:  # a run that closes what it did not open
                return
        if depth:
            continue
        st.bindings[var] = _run(tk, j, length)
        st.trail.append(var)
        yield from _seq(pk, i + 1, tk, j + length, st, anchored=anchored)
        st.undo(len(st.trail) - 1)


def unify(pattern: MathNode, tree: MathNode) -> dict[str, MathNode] | None:
    """The bindings under which ``pattern`` unifies with the whole of ``tree``, or None.

    >>> from mathsearch.indexer.latex_to_mathml import latex_to_mathml
    >>> x = MathNode(QVAR_TAG, text="x")
    >>> bindings = unify(MathNode("msup", children=[MathNode("mi", text="e"), x]),
    ...                  latex_to_mathml("e^{i\\\\pi}").tree)
    >>> subtree_latex(bindings["x"])
    'i\\\\pi'
    """
    root = _compiled(pattern).root
    st = _State()
    try:
        for _ in _gen(root, tree, st):
            return dict(st.bindings)
    except _OutOfStepsError:
        logger.debug("unify gave up after %d steps", MAX_STEPS)
    return None


# -- matching --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    """How a pattern matches one equation (see the module docstring for kinds and scores)."""

    kind: str
    score: float
    bindings: dict[str, MathNode] = field(default_factory=dict)

    def bindings_latex(self) -> dict[str, str]:
        """``name -> LaTeX`` of each binding (:func:`subtree_latex`)."""
        return {name: subtree_latex(node) for name, node in self.bindings.items()}


_NONE = Match("none", 0.0, {})
_Entry = tuple[MathNode, list[MathNode] | None, int]


class _Search:
    """One candidate tree, indexed: its nodes by key (``(tag, text)`` of tokens, the tag of
    ``mtext`` and of layouts; only the keys the pattern has) with their row and position in
    document order; the children of its rows; its size (nodes after normalisation)."""

    __slots__ = ("compiled", "index", "rows", "size", "st", "top")

    def __init__(self, compiled: _Compiled, tree: MathNode, st: _State) -> None:
        self.compiled = compiled
        self.st = st
        index: dict[object, list[_Entry]] = {}
        rows: list[list[MathNode]] = []
        size = 0
        transparent, rowlike = TRANSPARENT, ROWLIKE
        keys, tags = compiled.keys, compiled.tags
        self.top = top = unwrap(tree)
        stack: list[_Entry] = [(top, None, 0)]
        pop, extend = stack.pop, stack.extend
        while stack:
            node, row, at = pop()
            tag = node.tag
            if tag in transparent:
                node = unwrap(node)
                tag = node.tag
            size += 1
            children = node.children
            if tag == "msubsup" and len(children) == 3 and ("msup" in keys or "msub" in keys):
                split = split_subsup(node)  # also an msup over an msub: x_1^2 is {x_1}^2
                if "msup" in keys:
                    index.setdefault("msup", []).append((split, row, at))
                if "msub" in keys:
                    index.setdefault("msub", []).append((split.children[0], None, 0))
            if tag in tags:
                text = node.text
                key: object = tag if children or text is None or tag == "mtext" else (tag, text)
                if key in keys:
                    found = index.get(key)
                    if found is None:
                        index[key] = [(node, row, at)]
                    else:
                        found.append((node, row, at))
            if not children:
                continue
            if tag in rowlike:
                kids = row_kids(node)
                rows.append(kids)
                extend(zip(reversed(kids), repeat(kids), range(len(kids) - 1, -1, -1)))
            else:
                extend(zip(reversed(children), repeat(None), range(len(children) - 1, -1, -1)))
        self.index, self.rows, self.size = index, rows, size

    def has(self, needs: tuple[tuple[object, int], ...]) -> bool:
        index = self.index
        return all(len(index.get(key, ())) >= count for key, count in needs)

    def find(self, p: _P, start: int = -1, stop: int = -1, skip: MathNode | None = None) -> bool:
        """Whether ``p`` (or the run ``start:stop`` of its items) occurs in the tree; the
        bindings of the first occurrence stay in the state."""
        st = self.st
        if start < 0 and p.tag != "mrow":
            for node, _, _ in self.index.get(p.key, ()):
                if node is not skip:
                    for _ in _gen(p, node, st):
                        return True
            return False
        items = p.kids[start:stop] if start >= 0 else p.kids
        first = next((k for k, item in enumerate(items) if item.var is None), None)
        places: list[tuple[list[MathNode], int]] = []
        if first is None:  # only variables: any row
            places = [(kids, s) for kids in self.rows for s in range(len(kids))]
        else:
            # Leading variables take one item each (the shortest) unless a repeated name
            # may need a longer run.
            repeated = self.compiled.repeated
            loose = any(item.var in repeated for item in items[:first])
            for _, kids, at in self.index.get(items[first].key, ()):
                if kids is not None and at >= first:
                    low = 0 if loose else at - first
                    places.extend((kids, s) for s in range(low, at - first + 1))
        tried: set[tuple[int, int]] = set()
        for kids, s in places:
            if (id(kids), s) in tried:
                continue
            tried.add((id(kids), s))
            for _ in _seq(items, 0, kids, s, st, anchored=False):
                return True
        return False

    def partial(self) -> Match | None:
        """The largest proper part of the pattern that occurs in the tree."""
        compiled, st = self.compiled, self.st
        best, where = 0, (compiled.root, -1, -1)
        for p, start, limit, sizes, needs in compiled.runs:
            if sum(sizes[start:limit]) <= best or not self.has(needs):
                continue
            stop = start + 2  # a run occurs => its prefixes occur: grow while it does
            while stop <= limit and self.find(p, start, stop):
                st.undo(0)
                if sum(sizes[start:stop]) > best:
                    best, where = sum(sizes[start:stop]), (p, start, stop)
                stop += 1
        for p in compiled.nodes:
            if p.size <= best:
                break
            if self.has(p.needs) and self.find(p):
                st.undo(0)
                best, where = p.size, (p, -1, -1)
                break
        if not best:
            return None
        p, start, stop = where
        self.find(p, start, stop)  # again, for the bindings
        return Match("partial", 0.5 * best / compiled.root.size, dict(st.bindings))


def match(pattern: MathNode, tree: MathNode, *, whole: bool = True, partial: bool = True) -> Match:
    """The best match of ``pattern`` in ``tree``: exact, contained, partial or none.

    ``whole`` False skips the exact and contained attempts (the caller knows the tree cannot
    hold the whole pattern: :func:`required_symbols`); ``partial`` False skips the partial one
    (a tree that holds no whole match is then ``none``).

    >>> from mathsearch.indexer.latex_to_mathml import latex_to_mathml
    >>> pattern = latex_to_mathml("a^2+b^2=c^2").tree
    >>> found = match(pattern, latex_to_mathml("a^2+b^2=d^2").tree)
    >>> found.kind, round(found.score, 3)
    ('partial', 0.333)
    """
    compiled = _compiled(pattern)
    root = compiled.root
    st = _State()
    try:
        search = _Search(compiled, tree, st)
        if whole and search.has(root.needs):
            for _ in _gen(root, search.top, st):
                return Match("exact", 1.0, dict(st.bindings))
            if search.find(root, skip=search.top):
                score = min(0.5 + 0.5 * root.size / max(search.size, 1), 0.999999)
                return Match("contained", score, dict(st.bindings))
        return (search.partial() if partial else None) or _NONE
    except _OutOfStepsError:
        logger.debug("match gave up after %d steps", MAX_STEPS)
    return _NONE


def required_symbols(pattern: MathNode) -> frozenset[str]:
    """The symbols (:func:`mathsearch.indexer.lexical.symbols`, flattened as the index's
    ``symbols`` field) of the pattern's identifiers: an equation the pattern matches whole
    (``exact`` or ``contained``) has every one of them, because unification maps each ``mi`` of
    the pattern onto an ``mi`` whose text equals its stripped text. A candidate whose stored
    symbols lack one needs no whole attempt (nor its conversion, unless a partial match is
    looked for). Operators are left out: a fence attribute, which unification ignores, keeps an
    operator out of the symbols.

    >>> from mathsearch.indexer.latex_to_mathml import latex_to_mathml
    >>> sorted(required_symbols(latex_to_mathml(r"\\sin x + y_1 = 2").tree))
    ['sin', 'x', 'y']
    """
    stack, names = [pattern], []
    while stack:
        node = stack.pop()
        if node.children:
            stack.extend(node.children)
        elif node.tag == "mi" and node.text and node.text.strip():
            names.append(MathNode("mi", text=node.text.strip()))
    found = symbols(MathNode("mrow", children=names))
    return frozenset(name for group in found.values() for name in group)
