"""``rrf``: BM25 and k-NN combined by reciprocal rank fusion.

The neural-search ``score-ranker-processor``: a hit scores ``sum over subqueries of 1 /
(rank_constant + rank)`` (rank from 1 in each subquery's top ``depth``; rank constant 60, the
RRF paper's). Server-side or client-side: :mod:`mathsearch.opensearch.modes.hybrid`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mathsearch.opensearch.fusion import FusedHit, rrf
from mathsearch.opensearch.modes.hybrid import HybridMode
from mathsearch.opensearch.queries import Mode

if TYPE_CHECKING:
    from mathsearch.opensearch.cluster_capabilities import ClusterCapabilities
    from mathsearch.opensearch.search_request import SearchRequest
    from mathsearch.opensearch.vector_plan import VectorPlan


def rrf_pipeline(rank_constant: int = 60, *, flat: bool = False) -> dict:
    """A search pipeline with the ``score-ranker-processor`` (reciprocal rank fusion).

    ``flat``: the rank constant as ``combination.rank_constant`` (neural-search 3.x) instead of
    ``combination.parameters.rank_constant`` (2.19); each version refuses or ignores the other's
    form (:attr:`ClusterCapabilities.rrf_flat_rank_constant`).
    """
    combination: dict[str, Any] = {"technique": "rrf"}
    if flat:
        combination["rank_constant"] = int(rank_constant)
    else:
        combination["parameters"] = {"rank_constant": int(rank_constant)}
    return {"phase_results_processors": [{"score-ranker-processor": {"combination": combination}}]}


class RrfMode(HybridMode):
    mode = Mode.RRF
    summary = "BM25 and k-NN combined by reciprocal rank fusion."
    parameters = ("depth", "rank_constant")

    def pipeline(
        self, request: SearchRequest, plan: VectorPlan, capabilities: ClusterCapabilities
    ) -> dict[str, Any]:
        return rrf_pipeline(request.rank_constant, flat=capabilities.rrf_flat_rank_constant)

    def fuse(
        self,
        ranked: Sequence[Sequence[tuple[str, float]]],
        request: SearchRequest,
        plan: VectorPlan,
        limit: int | None,
    ) -> list[FusedHit]:
        return rrf(ranked, rank_constant=request.rank_constant, limit=limit)

    def formula(self, request: SearchRequest, fields: Sequence[str]) -> tuple[str, list]:
        return (
            f"sum over subqueries of 1 / ({request.rank_constant} + rank)",
            [None] * (len(fields) + 1),
        )


MODE = RrfMode()
