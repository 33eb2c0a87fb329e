"""`mathsearch demo`: the stack, the bundled real corpus indexed, a few hybrid queries.

The equations go through the real featurisation (indexer.parse: LaTeX -> MathML graph, math
tokens, symbols). Until the graph-CNN encoder lands (issue 4), the kNN half of the hybrid
queries uses the seed's bag-of-words baseline (KDD 2020, section 5): the 256-d sum of the
graph's one-hot node features, L2-normalised, in ``vec_bow_v1``.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

import numpy as np
from opensearchpy import OpenSearch, helpers

from indexer.hepth import bundled_sample_lines, iter_hepth
from indexer.parse import Featuriser, ParsedEquation
from indexer.records import EquationRecord, Failure
from opensearch.client import connect
from opensearch.stack import Stack

logger = logging.getLogger(__name__)

DIMENSION = 256
VECTOR_FIELD = "vec_bow_v1"
DEMO_VERSION = 2
QUERIES = (
    r"\frac{1}{2}\int d^D x \left[(\partial_x\Phi)^2 - m^2\Phi^2\right]",
    r"\Gamma(\ell-1) \lambda(m_0^2,m_1^2,m_2^2)",
    r"\sum_k \phi_k(x) \exp(iky/R)",
)


def bow_unit_vector(parsed: ParsedEquation) -> list[float]:
    """The BoW vector of an equation, L2-normalised (cosine similarity in OpenSearch)."""
    norm = float(np.linalg.norm(parsed.bow))
    return (parsed.bow / (norm or 1.0)).round(6).tolist()


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


def demo_records(
    featuriser: Featuriser | None = None,
) -> tuple[list[ParsedEquation], list[Failure]]:
    """The bundled sample featurised: parsed equations, and failure records with reasons."""
    featuriser = featuriser or Featuriser()
    parsed: list[ParsedEquation] = []
    failures: list[Failure] = []
    records: list[EquationRecord] = []
    for item in iter_hepth(bundled_sample_lines()):
        if isinstance(item, Failure):
            failures.append(item)
        else:
            records.append(item)
    for result in featuriser.parse_batch(records):
        if isinstance(result, Failure):
            failures.append(result)
        else:
            parsed.append(result)
    return parsed, failures


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
                    "section": {"type": "keyword"},
                    "latex": {"type": "text", "index": False},
                    "mathml": {"type": "text", "index": False},
                    "math_tokens": {"type": "text", "analyzer": "whitespace"},
                    "symbols": {"type": "keyword"},
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
    client: OpenSearch, index: str, pipeline: str, query: ParsedEquation, k: int
) -> list[DemoHit]:
    body = {
        "size": k,
        "_source": ["eq_id", "doc_id", "latex"],
        "query": {
            "hybrid": {
                "queries": [
                    {"match": {"math_tokens": {"query": " ".join(query.math_tokens)}}},
                    {"knn": {VECTOR_FIELD: {"vector": bow_unit_vector(query), "k": max(k, 10)}}},
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
    featuriser = Featuriser()
    kept, rejected = demo_records(featuriser)
    ensure_index(client, index)
    actions = []
    for parsed in kept:
        record = parsed.record
        actions.append(
            {
                "_index": index,
                "_id": record.eq_id,
                "_source": {
                    "eq_id": record.eq_id,
                    "doc_id": record.doc_id,
                    "position": record.position,
                    "section": record.section,
                    "latex": record.latex,
                    "mathml": parsed.mathml,
                    "math_tokens": " ".join(parsed.math_tokens),
                    "symbols": [s for values in parsed.symbols.values() for s in values],
                    VECTOR_FIELD: bow_unit_vector(parsed),
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
        query = featuriser.parse_latex(latex)
        if isinstance(query, Failure):
            logger.warning("demo query %s failed: %s", latex, query.detail)
            continue
        for mode, pipeline in pipelines.items():
            hits = hybrid_search(client, index, pipeline, query, k)
            report.queries.append(DemoQuery(latex=latex, mode=mode, hits=hits))
    return report
