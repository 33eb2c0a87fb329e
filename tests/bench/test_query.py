"""The goal check and the text report of ``mathsearch bench query``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mathsearch.bench.query import GOAL_MODES, goal_check, goal_modes
from mathsearch.bench.query_report import format_bench_query
from mathsearch.bench.timing import DEFAULT, MODES, VARIANTS
from mathsearch.opensearch.modes import MODES as SEARCH_MODES

# -- report ------------------------------------------------------------------------------------


def _row(mode: str, p50: float, p99: float) -> dict:
    stats = {"n": 200, "p50": p50, "p95": p99 - 1, "p99": p99, "mean": p50, "max": p99, "qps": 50.0}
    return {
        "mode": mode,
        "end_to_end": {**stats, "p50": p50 + 5, "p99": p99 + 5},
        "cluster": stats,
        "took": {"n": 200, "p50": p50 - 1, "p99": p99 - 1},
        "errors": 0,
        "mean_hits": 10.0,
    }


def test_goal_check() -> None:
    goal = goal_check([_row("knn", 1, 2), _row("fusion", 12, 40), _row("rrf", 14, 60)])
    assert set(goal["modes"]) == {"fusion", "rrf"}
    assert goal["modes"]["fusion"] == {"end_to_end": False, "cluster": True}  # e2e p50 17
    assert goal["modes"]["rrf"] == {"end_to_end": False, "cluster": False}  # p99 60
    assert goal_check([{"mode": "fusion", "end_to_end": {"n": 0}, "cluster": {"n": 0}}])["modes"][
        "fusion"
    ] == {"end_to_end": False, "cluster": False}


def _report() -> dict:
    rows = [_row(mode, 3.0, 9.0) for mode in MODES]
    return {
        "environment": {
            "opensearch": "2.19.1",
            "nodes": 1,
            "cpu_count": 2,
            "heap_bytes": 512 * 2**20,
            "hnsw_m": 16,
            "hnsw_ef_construction": 128,
        },
        "model": {"name": "gcn-v1", "vector_field": "vec_gcn_v1", "dim": 64},
        "corpus": {
            "unique": 120000,
            "extracted": 130000,
            "duplicates": 9000,
            "failed": 1000,
            "held_out": 200,
        },
        "queries": {
            "topics_ok": 330,
            "topics_failed": 15,
            "held_ok": 200,
            "features_ms": {"p50": 2.5, "p99": 9.0},
        },
        "k": 10,
        "queries_per_mode": 200,
        "warmup": 20,
        "sizes": [
            {
                "equations": 1_000_000,
                "index": "mathsearch-bench-1000000-000001",
                "reused": False,
                "build_s": 3600.0,
                "store_bytes": 4_000_000_000,
                "bytes_per_equation": 4000.0,
                "segments": 12,
                "replicas": {
                    "documents": 880000,
                    "vectors": "copy",
                    "skipped": 12,
                    "tokens_consistent": 0.97,
                },
                "modes": rows,
                "goal": goal_check(rows),
            }
        ],
        "notes": ["replica vectors are copies"],
    }


def test_format_bench_query() -> None:
    text = format_bench_query(_report())
    lines = text.splitlines()
    assert "1,000,000 equations" in text
    assert "4,000 B/equation" in text
    assert "SHORTCUT" in text  # copied replica vectors are flagged
    for mode in MODES:
        assert any(line.strip().startswith(mode + " ") for line in lines), mode
    fusion = next(line for line in lines if line.strip().startswith("fusion "))
    assert "8.0" in fusion and "3.0" in fusion and "2.0" in fusion  # e2e p50, cluster, took
    assert "fusion end to end met, cluster met" in text
    assert "(the goal is for 1M" not in text  # this is the 1M row
    assert "330 topic formulas (15 unreadable" in text
    assert "note: replica vectors are copies" in text


def test_goal_check_covers_every_hybrid_variant() -> None:
    rows = [_row(mode, 3.0, 9.0) for mode in MODES]
    goal = goal_check(rows)
    assert set(goal["modes"]) == set(GOAL_MODES)
    assert set(GOAL_MODES) == {
        "fusion", "rrf", "fusion-client", "rrf-client", "knn-rescore", "rescore",
    }  # fmt: skip
    assert "knn" not in goal["modes"] and "bm25" not in goal["modes"]


def test_goal_modes_follow_the_mode_registry() -> None:
    """Every bench variant of a hybrid mode of ``MODES`` (the default profile's row aside)."""
    assert goal_modes() == GOAL_MODES
    for name, variant in VARIANTS.items():
        hybrid = SEARCH_MODES[variant.mode].hybrid and name != DEFAULT
        assert (name in GOAL_MODES) == hybrid, name
    # a mode that turns hybrid in the registry joins the goal with no list to edit
    registry = {mode: SimpleNamespace(hybrid=spec.hybrid) for mode, spec in SEARCH_MODES.items()}
    knn = VARIANTS["knn"].mode
    registry[knn] = SimpleNamespace(hybrid=True)
    assert "knn" in goal_modes(VARIANTS, registry)  # type: ignore[arg-type]
    assert set(goal_modes(VARIANTS, registry)) == {*GOAL_MODES, "knn"}  # type: ignore[arg-type]


def test_format_bench_query_says_who_fused_and_max_df() -> None:
    report = _report()
    for row in report["sizes"][0]["modes"]:
        row["fused"] = VARIANTS[row["mode"]].fusion_side
    text = format_bench_query(report)
    lines = text.splitlines()
    assert "max_df" not in text
    client = next(line for line in lines if line.strip().startswith("rrf-client "))
    assert client.split()[1] == "client"
    server = next(line for line in lines if line.strip().startswith("rrf "))
    assert server.split()[1] == "server"
    assert next(line for line in lines if line.strip().startswith("knn ")).split()[1] == "-"
    assert "fusion-client end to end met, cluster met (fused on the client side)" in text
    assert "fusion end to end met, cluster met (fused on the server side)" in text
    assert "knn-rescore end to end met, cluster met" in text
    assert "k=10, max_df=0.2 " in format_bench_query({**report, "max_df": 0.2})


def test_a_bench_index_built_with_other_hnsw_parameters_is_not_reused() -> None:
    from dataclasses import replace as with_values

    from mathsearch.bench.query_index import _bench_meta
    from mathsearch.opensearch import OpenSearchSettings

    class Corpus:
        key, stats = "c0ffee", {"model_sha256": "m" * 64}

        def __len__(self) -> int:
            return 100

    settings = OpenSearchSettings()
    fields = {"vec_gcn_v8": "a" * 64 + " float16"}
    wanted = _bench_meta(Corpus(), 100, "embed", settings, fields)  # type: ignore[arg-type]
    assert (wanted["hnsw_m"], wanted["hnsw_ef_construction"]) == (16, 128)
    other = with_values(settings, hnsw_m=32)
    assert _bench_meta(Corpus(), 100, "embed", other, fields) != wanted  # type: ignore[arg-type]
    # other second-stage fields (another model, another storage): another index
    int8 = {"vec_gcn_v8": "a" * 64 + " int8"}
    assert _bench_meta(Corpus(), 100, "embed", settings, int8) != wanted  # type: ignore[arg-type]


@pytest.mark.services
def test_the_size_after_a_force_merge_is_read_once_it_has_settled(
    client, settings, encoder, demo_dicts, demo_vectors, fresh_alias
) -> None:
    """The merged-away segments stay on disk until a commit and the node caches store sizes
    for 10 s: ``settled_index_info`` reads the size the index keeps."""
    import time

    from mathsearch.bench.query_index import index_info, settled_index_info
    from mathsearch.opensearch.bulk_writer import BulkWriter
    from mathsearch.opensearch.documents import equation_actions
    from mathsearch.opensearch.equation_index import ensure_equation_index
    from mathsearch.opensearch.schema import VectorSpec, resolve_alias

    spec = VectorSpec.from_card(encoder.card)
    ensure_equation_index(client, fresh_alias, [spec], settings)
    third = len(demo_dicts) // 3
    for start in range(0, 3 * third, third):  # three refreshes: three segments
        part = slice(start, start + third)
        BulkWriter(client, settings, refresh="end").write(
            equation_actions(fresh_alias, demo_dicts[part], {spec.field: demo_vectors[part]})
        )
    concrete = resolve_alias(client, fresh_alias)
    assert index_info(client, concrete)["segments"] >= 2
    client.indices.forcemerge(index=concrete, max_num_segments=1)
    client.indices.refresh(index=concrete)
    settled = settled_index_info(client, concrete, interval_s=1.0)
    assert settled["segments"] == 1 and settled["docs"] == 3 * third
    time.sleep(11)  # past the node's store-size cache: the size does not move any more
    assert index_info(client, concrete)["store_bytes"] == settled["store_bytes"]
