"""``mathsearch bench recall``: recall@k of the HNSW search against exact search, and its cost.

For each query vector (real formula queries - ARQMath / NTCIR topics - featurised and embedded
as ``search`` does), the exact top ``k`` is a brute-force ``script_score`` over every equation
with the k-NN plugin's ``knn_score`` (the field's space type), and each HNSW search asks the
graph for ``candidates`` neighbours (Lucene's ``k``, the search-time beam, ``ef_search``) and
keeps the first ``k``. Reported per candidate count: mean recall@k (the share of the exact top k
the HNSW search found) and the cluster latency p50 / p99; the exact search's own latency as
the reference. :data:`mathsearch.opensearch.modes.knn.MIN_CANDIDATES` was chosen with it.

Example::

    rows = knn_recall(client, "mathsearch-bench-100000", "vec_gcn_v2", "cosinesimil", vectors,
                      candidates=(10, 20, 50, 100))
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Sequence
from typing import Any

from mathsearch.bench.timing import percentile
from mathsearch.opensearch.queries import knn_score_script

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_CANDIDATES", "knn_recall", "recall_at"]

DEFAULT_CANDIDATES = (10, 20, 50, 100)


def recall_at(found: Sequence[str], exact: Sequence[str], k: int) -> float:
    """The share of the exact top ``k`` among the first ``k`` found.

    >>> recall_at(["a", "b", "x"], ["a", "b", "c"], 3)
    0.6666666666666666
    """
    truth = set(exact[:k])
    return len(truth & set(found[:k])) / len(truth) if truth else 1.0


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def knn_recall(
    client: Any,
    index: str,
    field: str,
    space_type: str,
    vectors: Sequence[Sequence[float]],
    *,
    candidates: Sequence[int] = DEFAULT_CANDIDATES,
    k: int = 10,
) -> dict[str, Any]:
    """Exact top ``k`` of each vector, then the HNSW search at each candidate count.

    Raises:
        ValueError: no vectors, or a candidate count below ``k``.
    """
    if not vectors:
        raise ValueError("no query vectors")
    if min(candidates) < k:
        raise ValueError(f"candidate counts must be >= k ({k}), not {sorted(candidates)}")
    exact: list[list[str]] = []
    exact_ms: list[float] = []
    for vector in vectors:
        body = {
            "size": k, "_source": False, "track_total_hits": False,
            "query": {"script_score": {
                "query": {"match_all": {}},
                "script": knn_score_script(field, vector, space_type),
            }},
        }  # fmt: skip
        started = time.perf_counter()
        found = client.search(index=index, body=body, request_timeout=300)
        exact_ms.append(_ms(started))
        exact.append([hit["_id"] for hit in found["hits"]["hits"]])
    rows = []
    for count in sorted(candidates):
        recalls, took = [], []
        for vector, truth in zip(vectors, exact, strict=True):
            body = {
                "size": k, "_source": False, "track_total_hits": False,
                "query": {"knn": {field: {"vector": [float(x) for x in vector], "k": count}}},
            }  # fmt: skip
            started = time.perf_counter()
            found = client.search(index=index, body=body)
            took.append(_ms(started))
            recalls.append(recall_at([hit["_id"] for hit in found["hits"]["hits"]], truth, k))
        rows.append({
            "candidates": count,
            f"recall@{k}": round(statistics.mean(recalls), 4),
            "min_recall": round(min(recalls), 4),
            "p50_ms": round(percentile(took, 50), 2),
            "p99_ms": round(percentile(took, 99), 2),
        })  # fmt: skip
        logger.info("candidates %d: recall@%d %.3f", count, k, statistics.mean(recalls))
    return {
        "index": index,
        "field": field,
        "space_type": space_type,
        "queries": len(vectors),
        "k": k,
        "exact_ms": {
            "p50": round(percentile(exact_ms, 50), 2),
            "p99": round(percentile(exact_ms, 99), 2),
        },
        "rows": rows,
    }
