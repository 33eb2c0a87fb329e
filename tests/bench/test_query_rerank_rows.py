"""``bench query --rerank``: which rows it adds and what each row's requests ask for."""

from __future__ import annotations

import pytest

from mathsearch.bench.query import with_rerank_rows
from mathsearch.bench.timing import VARIANTS, variant_of
from mathsearch.opensearch.queries import Mode


def test_a_rerank_row_follows_each_hybrid_mode_only() -> None:
    modes = ["bm25", "knn", "fusion", "fusion-client", "rescore"]
    assert with_rerank_rows(modes, ["gcn-v8.onnx"]) == [
        "bm25", "knn", "fusion", "fusion+rerank", "fusion-client", "fusion-client+rerank",
        "rescore", "rescore+rerank",
    ]  # fmt: skip
    assert with_rerank_rows(modes, []) == modes
    # the shipped profile's row brings its own second stage: no default+rerank row after it
    assert with_rerank_rows(["knn", "default"], ["gcn-v8.onnx"]) == ["knn", "default"]


def test_a_rerank_variant_asks_for_the_second_stage_and_the_plain_one_does_not() -> None:
    variant = variant_of("rrf-client+rerank", ["gcn-v8.onnx", "gcn-v9.onnx"], 30)
    request = variant.request("x^2", k=10)
    assert request.mode is Mode.RRF and request.fusion_side == "client"
    assert request.rerank == ("gcn-v8.onnx", "gcn-v9.onnx") and request.rerank_window == 30
    assert request.reranks
    assert variant_of("rrf-client") is VARIANTS["rrf-client"]
    assert not variant_of("rrf-client").request("x^2", k=10).rerank


def test_rerank_variants_of_one_sided_modes_or_without_encoders_are_refused() -> None:
    with pytest.raises(ValueError, match="only a hybrid mode"):
        variant_of("bm25+rerank", ["gcn"])
    with pytest.raises(ValueError, match="name the rerank encoders"):
        variant_of("fusion+rerank")
    with pytest.raises(ValueError, match="unknown mode"):
        variant_of("fusionish+rerank", ["gcn"])
