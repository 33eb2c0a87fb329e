"""The JSON shapes of ``mathsearch serve``'s API (pydantic models; they make the OpenAPI schema).

Request bodies refuse unknown fields, so a misspelt parameter is a 422 with its name rather than
a silently ignored default. Unset ranking fields come from the server's search profile.

Example::

    body = SearchBody.model_validate({"latex": "x^2+y^2", "mode": "rrf", "k": 5})
    body.mode  # Mode.RRF
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mathsearch.opensearch.fusion import Combination, Normalization
from mathsearch.opensearch.library_search import LibraryHit
from mathsearch.opensearch.modes import MODES
from mathsearch.opensearch.queries import Filters, Mode
from mathsearch.opensearch.results import DocumentGroup, Hit
from mathsearch.opensearch.search_profile import RANKING_FIELDS

#: The ``mode`` field's description: every registered mode and its summary.
MODE_HELP = "; ".join(f"{mode.value}: {spec.summary.rstrip('.')}" for mode, spec in MODES.items())


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FiltersBody(_Strict):
    """Restrictions applied in every mode (inside the kNN search too)."""

    doc_ids: list[str] = Field(default_factory=list, description="only these documents")
    terms: dict[str, list[str]] = Field(
        default_factory=dict,
        description="keyword field -> allowed values (doc_id, eq_id, section, symbols, "
        "keywords, model_versions, source)",
    )
    ranges: dict[str, tuple[int | str | None, int | str | None]] = Field(
        default_factory=dict, description="position / indexed_at -> [low, high] (null: open)"
    )

    def to_filters(self) -> Filters:
        return Filters(
            doc_ids=tuple(self.doc_ids),
            terms={name: tuple(values) for name, values in self.terms.items()},
            ranges=dict(self.ranges),
        )


class SearchBody(_Strict):
    """POST /search: a LaTeX query (and words) with the ranking parameters to override."""

    latex: str = Field("", description="the query equation (LaTeX, no $ delimiters)")
    text: str = Field("", description="words matched against the equations' context")
    like: str = Field(
        "",
        max_length=256,
        description="instead of latex: an indexed equation's id; its LaTeX is the query and "
        "the equation itself is left out (similar equations)",
    )
    mode: Mode | None = Field(None, description=MODE_HELP)
    alpha: float | None = Field(None, ge=0.0, le=1.0, description="the vector's share")
    k: int | None = Field(None, ge=1, description="results (documents when grouped)")
    offset: int = Field(
        0, ge=0, description="skip the first N results (documents when grouped): the next page"
    )
    window: int | None = Field(None, ge=1, description="rescore window")
    depth: int | None = Field(None, ge=1, description="hits per subquery in fusion / rrf")
    normalization: Normalization | None = None
    combination: Combination | None = None
    rank_constant: int | None = Field(None, ge=1, description="RRF rank constant")
    max_df: float | None = Field(None, gt=0.0, le=1.0, description="drop tokens above this df")
    max_terms: int | None = Field(
        None, ge=0, description="BM25 gets the N most informative query tokens (0: all)"
    )
    rerank_window: int | None = Field(
        None,
        ge=0,
        le=1000,
        description="hits the second stage re-ranks with the profile's rerank encoders (0: off)",
    )
    rerank_alpha: float | None = Field(
        None, ge=0.0, le=1.0, description="the rerank encoders' share in the second stage"
    )
    wildcard_mode: str | None = Field(
        None,
        description="the first stage of a query with variables: bm25 (default: BM25 over the "
        "pattern's tokens without a variable), another mode, or same (the request's mode)",
    )
    filters: FiltersBody | None = None
    group: bool = Field(False, description="group the hits by document")
    explain: bool = Field(False, description="each hit's score breakdown")
    mathml: bool = Field(
        False,
        description="each hit's Presentation MathML: stored for MathML input, rendered from "
        "the LaTeX otherwise (the search page asks for it)",
    )
    field: str | None = Field(None, description="vector field (default: the index's)")
    encoders: list[str] | None = Field(
        None,
        description="encoder families whose vector fields the search uses (gcn, bitmap, "
        "seq2seq, figure), the primary first; each must have a field in the index",
    )
    weights: list[float] | None = Field(
        None, description="each subquery's share: BM25, then one per encoder; sum 1"
    )
    index: str | None = Field(
        None,
        max_length=255,
        description="a library index the server serves (serve --library): its documents "
        "ranked by their math (math.tokens, math.vector), the answer a LibraryOut",
    )
    text_field: str | None = Field(
        None, max_length=255, description="library index: the field the text query matches"
    )
    text_weight: float | None = Field(
        None, ge=0.0, lt=1.0, description="library index: the text query's share (0.5)"
    )

    @field_validator("encoders")
    @classmethod
    def _known_encoders(cls, value: list[str] | None) -> list[str] | None:
        """Families only (a server loads no model file a request names)."""
        if value is None:
            return None
        from mathsearch.runtime.embedders import FAMILIES

        unknown = [name for name in value if name not in FAMILIES]
        if unknown:
            raise ValueError(f"unknown encoder {unknown[0]!r}; encoders: {', '.join(FAMILIES)}")
        if not value:
            raise ValueError("name at least one encoder")
        return list(dict.fromkeys(value))

    def overrides(self) -> dict[str, Any]:
        """The ranking parameters the body sets (for :meth:`SearchProfile.request`)."""
        out = {
            name: getattr(self, name) for name in RANKING_FIELDS if getattr(self, name) is not None
        }
        if self.filters is not None:
            out["filters"] = self.filters.to_filters()
        if self.field:
            out["vector_field"] = self.field
        if self.encoders:
            out["encoders"] = tuple(self.encoders)
        if self.weights is not None:
            out["weights"] = tuple(self.weights)
        out.update(
            text=self.text,
            group=self.group,
            explain=self.explain,
            mathml=self.mathml,
            offset=self.offset,
        )
        return out


class RenderBody(_Strict):
    """POST /render: LaTeX to show as MathML (the page's live preview)."""

    latex: str = Field(..., description="LaTeX, no $ delimiters")


class RenderOut(BaseModel):
    latex: str
    mathml: str
    unknown_macros: list[str] = Field(default_factory=list)


class SearchOut(BaseModel):
    """POST /search's answer; hits and groups are :mod:`mathsearch.opensearch.results`'
    dataclasses."""

    mode: str
    k: int
    vector_field: str | None
    vector_fields: list[str] | None = None
    took_ms: float
    stages_ms: dict[str, float] = Field(default_factory=dict)
    fused: str | None = None
    parameters: dict[str, Any]
    query_tokens: list[str] = Field(default_factory=list)
    hits: list[Hit]
    groups: list[DocumentGroup] | None = None
    warnings: list[str] = Field(default_factory=list)


class LibraryOut(BaseModel):
    """POST /search's answer for a library index (``index`` named): documents, each with the
    equations that matched (:mod:`mathsearch.opensearch.library_search`)."""

    kind: Literal["library"] = "library"
    index: str
    mode: str
    profile: str | None = None
    model: str | None = None
    equations_index: str | None = None
    parameters: dict[str, Any]
    took_ms: float
    warnings: list[str] = Field(default_factory=list)
    hits: list[LibraryHit]


class ErrorDetail(BaseModel):
    status: int
    reason: str
    details: list[dict[str, Any]] | None = None


class ErrorOut(BaseModel):
    """Every 4xx / 5xx answer: ``{"error": {"status", "reason", "details"?}}``."""

    error: ErrorDetail


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": text}
    for code, text in (
        (400, "a body that is not JSON (the reason says where it breaks)"),
        (411, "POST without Content-Length"),
        (413, "body too large"),
        (422, "invalid request (the reason says which field and why)"),
        (429, "rate limited (see Retry-After)"),
        (503, "OpenSearch or the index is unavailable"),
    )
}
