"""`mathsearch demo`: the stack, the bundled real corpus indexed, a few hybrid queries.

Until the graph-CNN encoder and the indexing pipeline land, the vectors are placeholders:
signed feature hashing of the math tokens and their bigrams (64 dimensions, L2-normalised). They
are real vectors of the real equations, so the kNN half of every hybrid query does real work, but
they are not the learned embeddings the product will ship.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from dataclasses import asdict, dataclass, field

import numpy as np
from opensearchpy import OpenSearch, helpers

from indexer.hepth import (
    HepthRecord,
    Rejected,
    bundled_sample_lines,
    equation_body,
    read_records,
)
from indexer.math_tokens import math_tokens
from opensearch.client import connect
from opensearch.stack import Stack

logger = logging.getLogger(__name__)

DIMENSION = 64
VECTOR_FIELD = "vec_placeholder_v0"
DEMO_VERSION = 1
QUERIES = (
    r"\frac{1}{2}\int d^D x \left[(\partial_x\Phi)^2 - m^2\Phi^2\right]",
    r"\Gamma(\ell-1) \lambda(m_0^2,m_1^2,m_2^2)",
    r"\sum_k \phi_k(x) \exp(iky/R)",
)


def placeholder_vector(tokens: list[str]) -> list[float]:
    """Signed feature hashing of unigrams and bigrams into ``DIMENSION`` dims, L2-normalised."""
    vector = np.zeros(DIMENSION, dtype=np.float32)
    grams = tokens + [f"{a} {b}" for a, b in itertools.pairwise(tokens)]
    for gram in grams:
        digest = hashlib.blake2b(gram.encode("utf-8"), digest_size=8).digest()
        slot = int.from_bytes(digest[:4], "little") % DIMENSION
        vector[slot] += 1.0 if digest[4] & 1 else -1.0
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:
        vector[0] = 1.0
        norm = 1.0
    return (vector / norm).round(6).tolist()


@dataclass
class DemoHit:
    rank: int
    score: float
    eq_id: str
    doc_id: str
    latex: str


@dataclass
class DemoQuery:
    latex: str
    mode: str
    hits: list[DemoHit]


@dataclass
class DemoReport:
    stack: list[str]
    index: str
    indexed: int
    rejected: dict[str, int]
    queries: list[DemoQuery] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def demo_records() -> tuple[list[tuple[HepthRecord, str]], list[Rejected]]:
    """The bundled sample's records split into (record, equation LaTeX) and rejected ones."""
    kept: list[tuple[HepthRecord, str]] = []
    rejected: list[Rejected] = []
    for record in read_records(bundled_sample_lines()):
        body = equation_body(record)
        if isinstance(body, Rejected):
            rejected.append(body)
        else:
            kept.append((record, body))
    return kept, rejected


def ensure_index(client: OpenSearch, name: str) -> None:
    """(Re)create the demo index when missing or made by an older demo."""
    if client.indices.exists(index=name):
        meta = client.indices.get_mapping(index=name)[name]["mappings"].get("_meta", {})
        if meta.get("demo_version") == DEMO_VERSION:
            return
        client.indices.delete(index=name)
    client.indices.create(
        index=name,
        body={
            "settings": {"index.knn": True, "number_of_shards": 1, "number_of_replicas": 0},
            "mappings": {
                "_meta": {"demo_version": DEMO_VERSION},
                "properties": {
                    "eq_id": {"type": "keyword"},
                    "doc_id": {"type": "keyword"},
                    "position": {"type": "integer"},
                    "latex": {"type": "text", "index": False},
                    "math_tokens": {"type": "text", "analyzer": "whitespace"},
                    VECTOR_FIELD: {
                        "type": "knn_vector",
                        "dimension": DIMENSION,
                        "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
                    },
                },
            },
        },
    )


def ensure_pipelines(client: OpenSearch, prefix: str) -> dict[str, str]:
    fusion, rrf = f"{prefix}-demo-fusion", f"{prefix}-demo-rrf"
    client.transport.perform_request(
        "PUT",
        f"/_search/pipeline/{fusion}",
        body={
            "description": "mathsearch demo: min-max normalised BM25 and kNN, arithmetic mean",
            "phase_results_processors": [
                {
                    "normalization-processor": {
                        "normalization": {"technique": "min_max"},
                        "combination": {
                            "technique": "arithmetic_mean",
                            "parameters": {"weights": [0.5, 0.5]},
                        },
                    }
                }
            ],
        },
    )
    client.transport.perform_request(
        "PUT",
        f"/_search/pipeline/{rrf}",
        body={
            "description": "mathsearch demo: reciprocal rank fusion of BM25 and kNN",
            "phase_results_processors": [
                {
                    "score-ranker-processor": {
                        "combination": {"technique": "rrf", "rank_constant": 60}
                    }
                }
            ],
        },
    )
    return {"fusion": fusion, "rrf": rrf}


def hybrid_search(
    client: OpenSearch, index: str, pipeline: str, latex: str, k: int
) -> list[DemoHit]:
    tokens = math_tokens(latex)
    body = {
        "size": k,
        "_source": ["eq_id", "doc_id", "latex"],
        "query": {
            "hybrid": {
                "queries": [
                    {"match": {"math_tokens": {"query": " ".join(tokens)}}},
                    {
                        "knn": {
                            VECTOR_FIELD: {"vector": placeholder_vector(tokens), "k": max(k, 10)}
                        }
                    },
                ]
            }
        },
    }
    response = client.search(index=index, body=body, params={"search_pipeline": pipeline})
    return [
        DemoHit(
            rank=rank,
            score=float(hit["_score"]),
            eq_id=hit["_source"]["eq_id"],
            doc_id=hit["_source"]["doc_id"],
            latex=hit["_source"]["latex"],
        )
        for rank, hit in enumerate(response["hits"]["hits"], start=1)
    ]


def run_demo(stack: Stack | None = None, bring_up: bool = True, k: int = 3) -> DemoReport:
    """Bring the stack up, index the bundled corpus (idempotently), run the hybrid queries."""
    stack = stack or Stack.from_env()
    # keep a cluster the user already runs (e.g. `stack up --nodes 3`) instead of replacing it
    messages = stack.up(stack.running_size() or 1) if bring_up else []
    client = connect(stack.settings)
    prefix = stack.settings.index_prefix
    index = f"{prefix}-demo-equations"
    kept, rejected = demo_records()
    ensure_index(client, index)
    actions = []
    for record, body in kept:
        tokens = math_tokens(body)
        actions.append(
            {
                "_index": index,
                "_id": record.eq_id,
                "_source": {
                    "eq_id": record.eq_id,
                    "doc_id": record.doc_id,
                    "position": record.position,
                    "latex": body,
                    "math_tokens": " ".join(tokens),
                    VECTOR_FIELD: placeholder_vector(tokens),
                },
            }
        )
    indexed, errors = helpers.bulk(client, actions, refresh="wait_for", raise_on_error=False)
    if errors:
        logger.warning("%d demo documents failed to index: %s", len(errors), errors[:3])
    pipelines = ensure_pipelines(client, prefix)
    reasons: dict[str, int] = {}
    for item in rejected:
        reasons[item.reason] = reasons.get(item.reason, 0) + 1
    report = DemoReport(stack=messages, index=index, indexed=indexed, rejected=reasons)
    for latex in QUERIES:
        for mode, pipeline in pipelines.items():
            hits = hybrid_search(client, index, pipeline, latex, k)
            report.queries.append(DemoQuery(latex=latex, mode=mode, hits=hits))
    return report
