"""What a search mode is (:class:`SearchMode`) and the cluster calls it may make
(:class:`ModeContext`).

A mode is one module of :mod:`mathsearch.opensearch.modes` holding its body builder, how it runs
(one request, a multi-search, or client-side work over the hits) and how it explains a hit's
score; :data:`mathsearch.opensearch.modes.MODES` registers it by its :class:`Mode`. The
:class:`~mathsearch.opensearch.searcher.Searcher` does what every mode shares (featurisation,
``max_df`` pruning, the vector plan, grouping, the response) and hands the rest to the mode.

Example::

    spec = MODES[Mode.RRF]
    spec.parameters           # ('depth', 'rank_constant'): what shapes its ranking besides k
    hits = spec.run(searcher, request, tokens, plan)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from mathsearch.opensearch.queries import Mode, bm25_body, hit_id, knn_body
from mathsearch.opensearch.results import Hit
from mathsearch.opensearch.search_fields import SearchFields

if TYPE_CHECKING:
    from mathsearch.opensearch.cluster_capabilities import ClusterCapabilities
    from mathsearch.opensearch.search_request import SearchRequest
    from mathsearch.opensearch.vector_plan import VectorPlan

__all__ = ["ModeContext", "SearchMode", "per_field", "ranked_lists"]


class ModeContext(Protocol):
    """The searcher as a mode sees it: one index, its field names, typed-error cluster calls."""

    fields: SearchFields

    def run_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """One ``_search`` of the index."""
        ...

    def run_bodies(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Several searches in one ``_msearch`` round trip."""
        ...

    def sources_of(self, ids: list[str], source: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored ``source`` fields of ``ids`` (one ``ids`` search)."""
        ...

    def bm25_scores(self, ids: list[str], tokens: list[str], words: str) -> dict[str, float]:
        """The exact BM25 score of each of ``ids``."""
        ...

    def hits_of(
        self, response: dict[str, Any], tokens: list[str], *, annotate: bool = True
    ) -> list[Hit]:
        """A search response's hits, ranked, with matched tokens and highlight (unless
        ``annotate`` is False)."""
        ...

    def source_fields(self, request: SearchRequest) -> tuple[str, ...]:
        """The stored fields a hit needs for ``request``."""
        ...

    def capabilities(self) -> ClusterCapabilities:
        """What the cluster's OpenSearch version can do (pipeline forms, server-side z_score)."""
        ...


class SearchMode(ABC):
    """One search mode.

    Attributes:
        mode: the enum it is registered by (``--mode``, the API's ``mode``).
        summary: one line for ``--help``, the API schema and the search page.
        parameters: the request fields besides ``k`` that shape its ranking, in report order
            (``alpha``, ``window``, ``depth``, ``normalization``, ``combination``,
            ``rank_constant``); :meth:`SearchRequest.parameters` reports these, the tuning grid
            sweeps these.
        uses_bm25: has a BM25 side (``max_df`` applies, the web page shows a bm25 score).
        uses_vectors: has a vector side (needs query vectors; falls back to BM25 when it has
            both sides and every encoder refused the query).
        fused: the hybrid query can run on the cluster or client-side (``fusion_side``).
        hybrid: (derived) both sides: the modes that fall back to BM25 and that re-rank.
    """

    mode: Mode
    summary: str
    parameters: tuple[str, ...] = ()
    uses_bm25: bool = True
    uses_vectors: bool = True
    fused: bool = False

    @abstractmethod
    def run(
        self, ctx: ModeContext, request: SearchRequest, tokens: list[str], plan: VectorPlan
    ) -> list[Hit]:
        """The top ``request.k`` hits, each with its explanation when ``request.explain``."""

    @property
    def hybrid(self) -> bool:
        """Whether the mode has both a BM25 and a vector side (``rescore``, ``knn-rescore``,
        ``fusion``, ``rrf``)."""
        return self.uses_bm25 and self.uses_vectors

    def fused_side(self, request: SearchRequest) -> str | None:
        """Who fuses this request (``"server"`` / ``"client"``), None for a mode that does not."""
        return None

    def subqueries(self) -> list[str]:
        """The scores a hit's explanation carries (``bm25``, ``knn``), for the search page."""
        sides = (("bm25", self.uses_bm25), ("knn", self.uses_vectors))
        return [name for name, used in sides if used]


def ranked_lists(
    ctx: ModeContext,
    request: SearchRequest,
    tokens: list[str],
    plan: VectorPlan,
    *,
    depth: int,
    bm25: bool = True,
) -> list[list[tuple[str, float]]]:
    """BM25 (unless ``bm25`` is false) and one kNN list per field, top ``depth`` ``(id, score)``
    each, best first, in one ``_msearch`` (the cluster runs them concurrently)."""
    # ids and scores only, the ids from doc values (no stored field read per hit): the sources
    # of the hits kept are fetched afterwards
    ids_from = ctx.fields.id_field
    common: dict[str, Any] = {
        "filters": request.filters, "source": (), "fields": ctx.fields, "ids_from": ids_from,
    }  # fmt: skip
    bodies = [bm25_body(tokens, request.text, size=depth, **common)] if bm25 else []
    bodies += [knn_body(v.field, v.vector, size=depth, k=depth, **common) for v in plan.queries]
    return [
        [(hit_id(hit, ids_from), float(hit["_score"])) for hit in response["hits"]["hits"]]
        for response in ctx.run_bodies(bodies)
    ]


def per_field(
    ctx: ModeContext, request: SearchRequest, plan: VectorPlan, k: int
) -> list[dict[str, float]]:
    """Each field's top ``k`` kNN scores by id (the lists a multi-field kNN sums)."""
    return [dict(ranked) for ranked in ranked_lists(ctx, request, [], plan, depth=k, bm25=False)]
