"""``fusion``: BM25 and k-NN retrieved separately, normalised and combined.

The neural-search ``normalization-processor``: each subquery's scores normalised
(``normalization``: min_max, l2, z_score) and combined (``combination``) with the weights
``[bm25, field 1, ..., field n]`` - ``[1 - alpha, alpha]`` with one field, the request's
``weights`` or ``alpha / n`` each with several
(:func:`~mathsearch.opensearch.explain.subquery_weights`).
Server-side or client-side: :mod:`mathsearch.opensearch.modes.hybrid`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mathsearch.opensearch.explain import subquery_weights
from mathsearch.opensearch.fusion import Combination, FusedHit, Normalization, fuse
from mathsearch.opensearch.modes.hybrid import HybridMode
from mathsearch.opensearch.queries import Mode

if TYPE_CHECKING:
    from mathsearch.opensearch.cluster_capabilities import ClusterCapabilities
    from mathsearch.opensearch.search_request import SearchRequest
    from mathsearch.opensearch.vector_plan import VectorPlan


def fusion_pipeline(
    normalization: Normalization = Normalization.MIN_MAX,
    combination: Combination = Combination.ARITHMETIC_MEAN,
    weights: Sequence[float] | None = None,
) -> dict:
    """A search pipeline with the ``normalization-processor`` (weights: [bm25, knn, ...], one
    per subquery)."""
    combo: dict[str, Any] = {"technique": Combination(combination).value}
    if weights is not None:
        combo["parameters"] = {"weights": [float(w) for w in weights]}
    return {
        "phase_results_processors": [
            {
                "normalization-processor": {
                    "normalization": {"technique": Normalization(normalization).value},
                    "combination": combo,
                }
            }
        ]
    }


class FusionMode(HybridMode):
    mode = Mode.FUSION
    summary = "BM25 and k-NN retrieved separately, normalised and combined."
    parameters = ("alpha", "depth", "normalization", "combination")

    def pipeline(
        self, request: SearchRequest, plan: VectorPlan, capabilities: ClusterCapabilities
    ) -> dict[str, Any]:
        # z_score: 3.x takes it (capabilities.server_z_score); 2.19's refusal is a QueryError
        return fusion_pipeline(request.normalization, request.combination, plan.weights)

    def fuse(
        self,
        ranked: Sequence[Sequence[tuple[str, float]]],
        request: SearchRequest,
        plan: VectorPlan,
        limit: int | None,
    ) -> list[FusedHit]:
        return fuse(
            ranked,
            normalization=request.normalization,
            combination=request.combination,
            weights=plan.weights,
            limit=limit,
        )

    def formula(self, request: SearchRequest, fields: Sequence[str]) -> tuple[str, list]:
        weights = subquery_weights(request, len(fields))
        norm = request.normalization.value
        parts = [f"{norm}(bm25)", *(f"{norm}({name})" for name in fields)]
        formula = (
            f"{request.combination.value}({', '.join(parts)}; "
            f"weights {', '.join(f'{x:g}' for x in weights)})"
        )
        return formula, list(weights)


MODE = FusionMode()
