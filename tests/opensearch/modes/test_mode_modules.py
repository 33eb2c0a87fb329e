"""Each mode module's pure parts (golden bodies, pipelines and formulas) and what it asks of the
searcher, run over a recording :class:`~mathsearch.opensearch.modes.base.ModeContext` (the same
modes against a real node: tests/opensearch/test_searcher.py, test_fusion.py,
test_multi_field_search.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pytest

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.cluster_capabilities import ClusterCapabilities
from mathsearch.opensearch.fusion import FusedHit
from mathsearch.opensearch.modes import MODES
from mathsearch.opensearch.modes.fusion import fusion_pipeline
from mathsearch.opensearch.modes.hybrid import hybrid_body
from mathsearch.opensearch.modes.knn import knn_body_multi
from mathsearch.opensearch.modes.knn_rescore import knn_rescore_body
from mathsearch.opensearch.modes.rrf import rrf_pipeline
from mathsearch.opensearch.queries import NO_FILTERS, Mode, VectorQuery
from mathsearch.opensearch.results import Hit
from mathsearch.opensearch.search_fields import EQUATION_FIELDS, SearchFields
from mathsearch.opensearch.search_request import SearchRequest
from mathsearch.opensearch.vector_plan import VectorPlan

V = VectorQuery("vec_a", [1.0, 0.0], 1.0)
W = VectorQuery("vec_b", [0.0, 1.0], 1.0)


def test_knn_rescore_body_one_field_is_the_seeds_interpolation() -> None:
    body = knn_rescore_body(
        ["x"], "", [V], size=2, window=5, alpha=0.3, filters=NO_FILTERS, source=()
    )
    assert body["size"] == 2 and body["_source"] is False
    assert body["query"] == {"knn": {"vec_a": {"vector": [1.0, 0.0], "k": 5}}}
    assert body["rescore"]["window_size"] == 5
    assert body["rescore"]["query"]["query_weight"] == 0.3
    assert body["rescore"]["query"]["rescore_query_weight"] == pytest.approx(0.7)
    with pytest.raises(QueryError, match="window"):
        knn_rescore_body(["x"], "", [V], size=9, window=5, alpha=0.3, filters=NO_FILTERS,
                         source=())  # fmt: skip
    with pytest.raises(QueryError, match="alpha"):
        knn_rescore_body(["x"], "", [V], size=2, window=5, alpha=1.3, filters=NO_FILTERS,
                         source=())  # fmt: skip


def test_knn_body_multi_boosts_each_field_by_its_share() -> None:
    body = knn_body_multi([VectorQuery("vec_a", [1.0], 3.0), VectorQuery("vec_b", [2.0], 1.0)],
                          size=4)  # fmt: skip
    should = body["query"]["bool"]["should"]
    boosts = [
        clause["knn"][name]["boost"]
        for clause, name in zip(should, ("vec_a", "vec_b"), strict=True)
    ]
    assert boosts == [0.75, 0.25]


def test_hybrid_body_takes_at_most_four_fields_beside_bm25() -> None:
    body = hybrid_body(["x"], "", [V, W], size=3, depth=7, filters=NO_FILTERS, source=(),
                       pipeline=rrf_pipeline(20))  # fmt: skip
    subqueries = body["query"]["hybrid"]["queries"]
    assert len(subqueries) == 3 and subqueries[1]["knn"]["vec_a"]["k"] == 7
    technique = body["search_pipeline"]["phase_results_processors"][0]["score-ranker-processor"]
    assert technique["combination"]["parameters"] == {"rank_constant": 20}
    with pytest.raises(QueryError, match="at most 4"):
        hybrid_body(["x"], "", [V] * 5, size=3, depth=7, filters=NO_FILTERS, source=())
    with pytest.raises(QueryError, match="no vector field"):
        hybrid_body(["x"], "", [], size=3, depth=7, filters=NO_FILTERS, source=())


def test_the_rrf_pipeline_takes_the_form_of_the_clusters_neural_search() -> None:
    def combination(version: str) -> dict[str, Any]:
        pipeline = MODES[Mode.RRF].pipeline(  # type: ignore[attr-defined]
            SearchRequest("x", mode=Mode.RRF, rank_constant=20),
            PLAN,
            ClusterCapabilities.parse(version),
        )
        return pipeline["phase_results_processors"][0]["score-ranker-processor"]["combination"]

    # 2.19 reads only parameters.rank_constant; 3.x refuses it and reads rank_constant
    assert combination("2.19.1") == {"technique": "rrf", "parameters": {"rank_constant": 20}}
    assert combination("3.6.0") == {"technique": "rrf", "rank_constant": 20}


def test_fusion_pipeline_carries_the_weights() -> None:
    processor = fusion_pipeline(weights=[0.7, 0.3])["phase_results_processors"][0]
    assert processor["normalization-processor"] == {
        "normalization": {"technique": "min_max"},
        "combination": {"technique": "arithmetic_mean", "parameters": {"weights": [0.7, 0.3]}},
    }


@pytest.mark.parametrize(
    ("mode", "formula"),
    [
        ("fusion", "arithmetic_mean(min_max(bm25), min_max(knn); weights 0.7, 0.3)"),
        ("rrf", "sum over subqueries of 1 / (60 + rank)"),
    ],
)
def test_the_fused_modes_explain_their_formula(mode: str, formula: str) -> None:
    spec = MODES[Mode(mode)]
    item = FusedHit("e1", 0.9, raw=[3.0, 0.8], normalized=[1.0, 0.5])
    got = spec.breakdown(SearchRequest("x", mode=mode, alpha=0.3), item)  # type: ignore[attr-defined]
    assert got.formula == formula
    assert (got.bm25, got.knn, got.bm25_normalized, got.knn_normalized) == (3.0, 0.8, 1.0, 0.5)


@dataclass
class Recorder:
    """A ModeContext that answers from canned hits and records every call."""

    fields: SearchFields = EQUATION_FIELDS
    calls: list[tuple[str, Any]] = field(default_factory=list)
    annotated: list[bool] = field(default_factory=list)
    ids: tuple[str, ...] = ("e1", "e2", "e3")
    cluster: ClusterCapabilities = field(default_factory=ClusterCapabilities)

    def _response(self, size: int) -> dict[str, Any]:
        hits = [
            {"_id": i, "_score": 3.0 - n, "_source": {"eq_id": i, "vec_a": [1.0, float(n)]}}
            for n, i in enumerate(self.ids[:size])
        ]
        return {"hits": {"hits": hits}}

    def run_body(self, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("search", body))
        return self._response(body["size"])

    def run_bodies(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.calls.append(("msearch", bodies))
        return [self._exact(body) or self._response(body["size"]) for body in bodies]

    def _exact(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """An exact-cosine body's answer: ``(1 + cos) / 2`` of the canned vectors (knn_score)."""
        script = body["query"].get("script_score")
        if script is None:
            return None
        params = script["script"]["params"]
        ids = script["query"]["bool"]["filter"][0]["ids"]["values"]
        query = np.asarray(params["query_value"])
        hits = []
        for n, i in enumerate(self.ids):
            vector = np.asarray([1.0, float(n)])
            if i in ids:
                cos = float(query @ vector / np.linalg.norm(query) / np.linalg.norm(vector))
                hits.append({"fields": {"eq_id": [i]}, "_score": (1.0 + cos) / 2})
        return {"hits": {"hits": hits}}

    def sources_of(self, ids: list[str], source: Sequence[str]) -> dict[str, dict[str, Any]]:
        self.calls.append(("fetch", ids))
        return {i: {"eq_id": i} for i in ids}

    def bm25_scores(self, ids: list[str], tokens: list[str], words: str) -> dict[str, float]:
        self.calls.append(("bm25", ids))
        return {i: 1.0 for i in ids}

    def hits_of(
        self, response: dict[str, Any], tokens: list[str], *, annotate: bool = True
    ) -> list[Hit]:
        self.annotated.append(annotate)
        return [
            Hit(rank=n, eq_id=raw["_id"], doc_id="d", score=float(raw["_score"]), latex="x")
            for n, raw in enumerate(response["hits"]["hits"], start=1)
        ]

    def source_fields(self, request: SearchRequest) -> tuple[str, ...]:
        return ("eq_id",)

    def capabilities(self) -> ClusterCapabilities:
        return self.cluster


PLAN = VectorPlan(queries=(VectorQuery("vec_a", [1.0, 0.0], 0.5),), bm25_weight=0.5)


@pytest.mark.parametrize(
    ("mode", "side", "calls"),
    [
        ("bm25", "auto", ["search"]),
        ("knn", "auto", ["search"]),
        ("rescore", "auto", ["search", "msearch", "fetch"]),
        ("knn-rescore", "auto", ["search", "bm25", "msearch"]),
        ("fusion", "auto", ["msearch", "fetch"]),
        ("rrf", "client", ["msearch", "fetch"]),
        ("rrf", "server", ["search", "msearch"]),
    ],
)
def test_each_mode_makes_its_calls_and_explains_every_hit(
    mode: str, side: str, calls: list[str]
) -> None:
    ctx = Recorder()
    request = SearchRequest("x", mode=mode, k=2, window=3, depth=3, explain=True, fusion_side=side)
    spec = MODES[request.mode]
    hits = spec.run(ctx, request, ["x"], PLAN if spec.uses_vectors else VectorPlan((), 1.0))
    assert [name for name, _ in ctx.calls] == calls
    bodies = [body for name, body in ctx.calls if name == "search"]
    bodies += [body for name, group in ctx.calls if name == "msearch" for body in group]
    # nothing shows a total: every search lets Lucene skip non-competitive blocks
    assert bodies and all(body["track_total_hits"] is False for body in bodies)
    # the id-only lists of a multi-search read no stored field: ids come from doc values
    for name, group in ctx.calls:
        for body in group if name == "msearch" else ():
            assert body["stored_fields"] == "_none_" and body["docvalue_fields"] == ["eq_id"]
    assert [hit.rank for hit in hits] == [1, 2]
    assert all(hit.explanation is not None and hit.explanation.formula for hit in hits)
    assert spec.fused_side(request) == (
        (side if side != "auto" else "client") if spec.fused else None
    )


@pytest.mark.parametrize(
    ("mode", "side"),
    [("bm25", "auto"), ("knn", "auto"), ("rescore", "auto"), ("knn-rescore", "auto"),
     ("fusion", "auto"), ("rrf", "client"), ("rrf", "server")],
)  # fmt: skip
@pytest.mark.parametrize("annotate", [True, False])
def test_each_mode_passes_annotate_to_its_hits(mode: str, side: str, annotate: bool) -> None:
    ctx = Recorder()
    request = SearchRequest("x", mode=mode, k=2, window=3, depth=3, fusion_side=side)
    request = replace(request, annotate=annotate)
    spec = MODES[request.mode]
    spec.run(ctx, request, ["x"], PLAN if spec.uses_vectors else VectorPlan((), 1.0))
    assert ctx.annotated == [annotate]


def test_knn_asks_the_graph_for_more_candidates_than_it_shows() -> None:
    from mathsearch.opensearch.modes.knn import MIN_CANDIDATES

    ctx = Recorder()
    MODES[Mode.KNN].run(ctx, SearchRequest("x", mode="knn", k=2), ["x"], PLAN)
    ((_, body),) = ctx.calls
    assert body["size"] == 2
    assert body["query"]["knn"]["vec_a"]["k"] == MIN_CANDIDATES >= 20
    ctx = Recorder()
    MODES[Mode.KNN].run(ctx, SearchRequest("x", mode="knn", k=80, window=80, depth=80), [], PLAN)
    assert ctx.calls[0][1]["query"]["knn"]["vec_a"]["k"] == 80  # more shown: as many asked


def test_rescore_ranks_the_window_by_the_interpolated_scores() -> None:
    # BM25 puts e1 first; the stored vectors put e1 farthest from the query [0, 1] and e3
    # nearest, so a vector share of 0.9 turns the window round
    ctx = Recorder()
    plan = VectorPlan(queries=(VectorQuery("vec_a", [0.0, 1.0], 0.9),), bm25_weight=0.1)
    request = SearchRequest("x", mode="rescore", k=3, window=3, alpha=0.9, explain=True)
    hits = MODES[Mode.RESCORE].run(ctx, request, ["x"], plan)
    assert [hit.eq_id for hit in hits] == ["e3", "e2", "e1"]
    (_, window), (_, exact), (_, shown) = ctx.calls
    # the window ships no vector: ids and BM25 scores, then the cosines of those ids
    assert window["size"] == 3 and window["_source"] is False
    (body,) = exact
    assert body["query"]["script_score"]["query"]["bool"]["filter"][0]["ids"]["values"] == [
        "e1",
        "e2",
        "e3",
    ]
    assert shown == ["e3", "e2", "e1"]
    # the breakdown's raw vector score is (1 + cos) / 2, as the k-NN query's
    assert hits[0].explanation is not None
    assert hits[0].explanation.knn == pytest.approx((1 + 2 / np.sqrt(5)) / 2)
