"""Search results as plain data: hits, score breakdowns, groups by document, matched tokens.

Pure functions: :func:`group_hits` (results grouped by document, a document ranked by its best
equation) and :func:`matched_tokens` / :func:`highlight` (the query's math tokens found in a
hit; exact for the whitespace analyzer of ``math_tokens``, so they are computed here rather than
by the cluster's highlighter, and work the same in every mode).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

HIGHLIGHT_OPEN = "<em>"
HIGHLIGHT_CLOSE = "</em>"


@dataclass
class FieldScore:
    """One vector field's part of a hit's score: its raw score (kNN score, or ``(1 + cos) / 2``
    in ``rescore``), the normalised one (fusion: the normalisation's value, rrf: the rank
    score, knn / rescore: the weighted contribution) and the weight. ``None``: the field's
    subquery did not retrieve the hit, or the hit has no vector in that field."""

    field: str
    raw: float | None = None
    normalized: float | None = None
    weight: float | None = None


@dataclass
class ScoreBreakdown:
    """Why a hit scored what it did: each subquery's raw and normalised score and the formula.

    ``None`` means the subquery did not retrieve the hit (it then contributes nothing).
    ``knn`` / ``knn_normalized`` are the first vector field's; ``fields`` lists every vector
    field's (filled when the search used several). A hit that a second stage re-ranked keeps
    the first stage's ``bm25`` / ``knn`` here, with both stages' breakdowns under
    ``first_stage`` and ``second_stage``.
    """

    bm25: float | None = None
    knn: float | None = None
    bm25_normalized: float | None = None
    knn_normalized: float | None = None
    score: float = 0.0
    formula: str = ""
    fields: list[FieldScore] = field(default_factory=list)
    #: a hit a second stage re-ranked: the first stage's breakdown and the second stage's
    #: (its BM25 over the window and each rerank encoder's ``(1 + cos) / 2`` in ``fields``)
    first_stage: ScoreBreakdown | None = None
    second_stage: ScoreBreakdown | None = None


@dataclass
class Hit:
    """One equation of the result list.

    ``matched_tokens`` are the query's math tokens this equation has; ``highlight`` is the
    equation's token string with them in ``<em>...</em>``; ``mathml`` is the
    Presentation MathML, only when the request asks for it: stored for MathML input, rendered
    from ``latex`` otherwise (:mod:`mathsearch.opensearch.mathml_display`).
    """

    rank: int
    eq_id: str
    doc_id: str
    score: float
    latex: str = ""
    mathml: str = ""
    position: int | None = None
    section: str = ""
    matched_tokens: list[str] = field(default_factory=list)
    highlight: str = ""
    explanation: ScoreBreakdown | None = None
    #: a wildcard search's structural match (``exact``, ``contained``, ``partial``, ``none``)
    match: str | None = None
    #: a wildcard search's bindings: variable name -> the LaTeX of the sub-expression it binds
    bindings: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.explanation is None:
            del data["explanation"]
        else:
            _compact(data["explanation"])
        if self.match is None:
            del data["match"], data["bindings"]
        if not self.mathml:
            del data["mathml"]
        return data


def _compact(breakdown: dict[str, Any]) -> None:
    """A breakdown's JSON without the keys a single-stage one does not use."""
    if not breakdown.get("fields"):
        breakdown.pop("fields", None)
    for stage in ("first_stage", "second_stage"):
        if breakdown.get(stage) is None:
            breakdown.pop(stage, None)
        else:
            _compact(breakdown[stage])


@dataclass
class DocumentGroup:
    """The hits of one document; the document ranks by its best hit."""

    rank: int
    doc_id: str
    score: float
    hits: list[Hit]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "doc_id": self.doc_id,
            "score": self.score,
            "hits": [hit.to_dict() for hit in self.hits],
        }


@dataclass
class SearchResponse:
    """A search's hits (and groups when asked), with what produced them."""

    mode: str
    k: int
    vector_field: str | None
    took_ms: float
    hits: list[Hit]
    groups: list[DocumentGroup] | None = None
    fused: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    query_tokens: list[str] = field(default_factory=list)
    vector_fields: list[str] = field(default_factory=list)
    #: what a reader should know about how the ranking was made (e.g. a second stage that
    #: embedded candidates at query time because the index lacks its fields)
    warnings: list[str] = field(default_factory=list)
    #: where ``took_ms`` went: ``query`` (featurisation and embedding), ``first_stage`` (the
    #: mode's cluster calls and fusion), ``second_stage`` (the re-ranking, when there is one)
    stages_ms: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "mode": self.mode,
            "k": self.k,
            "vector_field": self.vector_field,
            "took_ms": round(self.took_ms, 2),
            "stages_ms": {name: round(ms, 2) for name, ms in self.stages_ms.items()},
            "fused": self.fused,
            "parameters": self.parameters,
            "hits": [hit.to_dict() for hit in self.hits],
        }
        if len(self.vector_fields) > 1:
            data["vector_fields"] = list(self.vector_fields)
        if self.groups is not None:
            data["groups"] = [group.to_dict() for group in self.groups]
        if self.warnings:
            data["warnings"] = list(self.warnings)
        return data


def token_kind(token: str) -> int:
    """Readability rank of a math token, most readable first: 0 symbols (``x``, ``+``), 1 symbol
    pairs (``x|sup|2``), 2 paths (``path:msub0:x``), 3 tag pairs (``math>mrow``), 4 shapes
    (``shape:...``) and other prefixed tokens (``form:...``)."""
    if token.startswith("path:"):
        return 2
    if ":" in token[1:] and token[0] != ":":
        return 4
    if token.count("|") >= 2 and token.strip("|"):
        return 1
    tags = token.split(">")
    if len(tags) == 2 and all(tag.isalpha() for tag in tags):
        return 3
    return 0


def matched_tokens(query_tokens: Iterable[str], document_tokens: Sequence[str]) -> list[str]:
    """The distinct document tokens that the query also has: readable kinds first
    (:func:`token_kind`: symbols, pairs, paths, then tag pairs and shapes), each kind in
    document order.

    >>> matched_tokens(["x", "+", "x|sup|2", "mrow>mi"], ["mrow>mi", "y", "+", "x|sup|2", "x"])
    ['+', 'x', 'x|sup|2', 'mrow>mi']
    """
    wanted = set(query_tokens)
    seen: dict[str, None] = {}
    for token in document_tokens:
        if token in wanted and token not in seen:
            seen[token] = None
    return sorted(seen, key=token_kind)


def highlight(query_tokens: Iterable[str], document_tokens: Sequence[str]) -> str:
    """The document's tokens with the matched ones wrapped in ``<em>...</em>``.

    >>> highlight(["x"], ["x", "+", "y"])
    '<em>x</em> + y'
    """
    wanted = set(query_tokens)
    return " ".join(
        f"{HIGHLIGHT_OPEN}{token}{HIGHLIGHT_CLOSE}" if token in wanted else token
        for token in document_tokens
    )


def group_hits(hits: Sequence[Hit], k: int) -> list[DocumentGroup]:
    """Hits grouped by ``doc_id`` in rank order; the first ``k`` documents.

    >>> hits = [Hit(1, "a#1", "a", 3.0), Hit(2, "b#0", "b", 2.0), Hit(3, "a#4", "a", 1.0)]
    >>> [(g.doc_id, len(g.hits)) for g in group_hits(hits, 10)]
    [('a', 2), ('b', 1)]
    """
    groups: dict[str, DocumentGroup] = {}
    for hit in hits:
        group = groups.get(hit.doc_id)
        if group is None:
            if len(groups) == k:
                continue
            group = DocumentGroup(rank=len(groups) + 1, doc_id=hit.doc_id, score=hit.score, hits=[])
            groups[hit.doc_id] = group
        group.hits.append(hit)
    return list(groups.values())
