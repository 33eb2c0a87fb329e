"""`mathsearch demo`: the stack, the bundled real corpus indexed, a few hybrid queries.

The equations go through the real featurisation (indexer.parse: LaTeX -> MathML graph, math
tokens, symbols) and the shipped default model (``export/models/gcn-v1.onnx``, the KDD 2020 graph
CNN trained by the project on hep-th, run by the torch-free :class:`export.runtime.Encoder`). Its
vectors go into the model card's field (``vec_gcn_v1``, 64-d, inner product) and are the kNN half
of the hybrid queries.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

from opensearchpy import OpenSearch, helpers

from export.model_card import ModelCard
from export.runtime import Encoder
from indexer.hepth import bundled_sample_lines, iter_hepth
from indexer.parse import Featuriser, ParsedEquation
from indexer.records import EquationRecord, Failure
from opensearch.client import connect
from opensearch.stack import Stack

logger = logging.getLogger(__name__)

DEMO_VERSION = 3
QUERIES = (
    r"\frac{1}{2}\int d^D x \left[(\partial_x\Phi)^2 - m^2\Phi^2\right]",
    r"\Gamma(\ell-1) \lambda(m_0^2,m_1^2,m_2^2)",
    r"\sum_k \phi_k(x) \exp(iky/R)",
)


def embed(encoder: Encoder, parsed: list[ParsedEquation]) -> list[list[float]]:
    """The model's vectors of ``parsed`` (float32, rounded to 6 digits for the JSON body)."""
    return encoder.encode([p.graph for p in parsed]).round(6).tolist()


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
    model: dict[str, object] = field(default_factory=dict)
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


def ensure_index(client: OpenSearch, name: str, card: ModelCard) -> None:
    """(Re)create the demo index when missing or made by an older demo or another model."""
    if client.indices.exists(index=name):
        meta = client.indices.get_mapping(index=name)[name]["mappings"].get("_meta", {})
        if meta.get("demo_version") == DEMO_VERSION and meta.get("model") == card.sha256:
            return
        client.indices.delete(index=name)
    client.indices.create(
        index=name,
        body={
            "settings": {"index.knn": True, "number_of_shards": 1, "number_of_replicas": 0},
            "mappings": {
                "_meta": {"demo_version": DEMO_VERSION, "model": card.sha256},
                "properties": {
                    "eq_id": {"type": "keyword"},
                    "doc_id": {"type": "keyword"},
                    "position": {"type": "integer"},
                    "section": {"type": "keyword"},
                    "latex": {"type": "text", "index": False},
                    "mathml": {"type": "text", "index": False},
                    "math_tokens": {"type": "text", "analyzer": "whitespace"},
                    "symbols": {"type": "keyword"},
                    card.vector_field: {
                        "type": "knn_vector",
                        "dimension": card.embedding_dim,
                        "method": {
                            "name": "hnsw",
                            "engine": "lucene",
                            "space_type": card.space_type,
                        },
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
    client: OpenSearch,
    index: str,
    pipeline: str,
    query: ParsedEquation,
    k: int,
    *,
    vector: tuple[str, list[float]],
) -> list[DemoHit]:
    field_name, values = vector
    body = {
        "size": k,
        "_source": ["eq_id", "doc_id", "latex"],
        "query": {
            "hybrid": {
                "queries": [
                    {"match": {"math_tokens": {"query": " ".join(query.math_tokens)}}},
                    {"knn": {field_name: {"vector": values, "k": max(k, 10)}}},
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
    encoder = Encoder()
    card = encoder.card
    kept, rejected = demo_records(featuriser)
    ensure_index(client, index, card)
    actions = []
    for parsed, vector in zip(kept, embed(encoder, kept), strict=True):
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
                    card.vector_field: vector,
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
    model = {
        "name": card.name,
        "field": card.vector_field,
        "dim": card.embedding_dim,
        "similarity": card.similarity,
        "providers": encoder.providers,
    }
    report = DemoReport(stack=messages, index=index, indexed=indexed, rejected=reasons, model=model)
    for latex in QUERIES:
        query = featuriser.parse_latex(latex)
        if isinstance(query, Failure):
            logger.warning("demo query %s failed: %s", latex, query.detail)
            continue
        for mode, pipeline in pipelines.items():
            vector = (card.vector_field, embed(encoder, [query])[0])
            hits = hybrid_search(client, index, pipeline, query, k, vector=vector)
            report.queries.append(DemoQuery(latex=latex, mode=mode, hits=hits))
    return report
