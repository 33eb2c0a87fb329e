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

from export.runtime import Encoder
from indexer.hepth import bundled_sample_lines, iter_hepth
from indexer.parse import Featuriser, ParsedEquation
from indexer.records import EquationRecord, Failure
from opensearch.bulk_writer import BulkWriter
from opensearch.client import connect
from opensearch.documents import equation_actions, failure_actions
from opensearch.errors import QueryError
from opensearch.queries import Mode
from opensearch.results import Hit
from opensearch.schema import (
    VectorSpec,
    ensure_equation_index,
    ensure_failures_index,
    resolve_alias,
)
from opensearch.searcher import ModelQueryEncoder, Searcher, SearchRequest
from opensearch.stack import Stack
from opensearch.vector_fields import set_default_vector_field
from workers.embedding import vectors_of

logger = logging.getLogger(__name__)

DEMO_MODES = (Mode.FUSION, Mode.RRF, Mode.RESCORE)
QUERIES = (
    r"\frac{1}{2}\int d^D x \left[(\partial_x\Phi)^2 - m^2\Phi^2\right]",
    r"\Gamma(\ell-1) \lambda(m_0^2,m_1^2,m_2^2)",
    r"\sum_k \phi_k(x) \exp(iky/R)",
)


@dataclass
class DemoQuery:
    latex: str
    mode: str
    hits: list[Hit]


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


def run_demo(stack: Stack | None = None, bring_up: bool = True, k: int = 3) -> DemoReport:
    """Bring the stack up, index the bundled corpus (idempotently), run the hybrid queries."""
    stack = stack or Stack.from_env()
    # keep a cluster the user already runs (e.g. `stack up --nodes 3`) instead of replacing it
    messages = stack.up(stack.running_size() or 1) if bring_up else []
    settings = stack.settings
    client = connect(settings)
    alias = f"{settings.index_prefix}-demo-equations"
    if client.indices.exists(index=alias) and resolve_alias(client, alias) is None:
        client.indices.delete(index=alias)  # a concrete index left by an older demo
    featuriser = Featuriser()
    encoder = Encoder()
    card = encoder.card
    spec = VectorSpec.from_card(card)
    kept, rejected = demo_records(featuriser)
    ensure_equation_index(client, alias, [spec], settings)
    set_default_vector_field(client, alias, spec.field)
    failures_index = ensure_failures_index(client, settings)
    writer = BulkWriter(client, settings, refresh="end")
    written = writer.write(
        equation_actions(
            alias, [p.to_dict() for p in kept], {spec.field: vectors_of(encoder, kept)}
        )
    )
    writer.write(failure_actions(failures_index, rejected))
    if written.failures:
        logger.warning(
            "%d demo documents failed to index: %s", len(written.failures), written.failures[:3]
        )
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
    report = DemoReport(
        stack=messages, index=alias, indexed=written.written, rejected=reasons, model=model
    )
    searcher = Searcher(client, alias, encoder=ModelQueryEncoder(encoder))
    for latex in QUERIES:
        for mode in DEMO_MODES:
            try:
                # fusion and rrf through the neural-search pipelines of the node
                response = searcher.search(
                    SearchRequest(latex, mode=mode, k=k, fusion_side="server")
                )
            except QueryError as exc:
                logger.warning("demo query %s failed: %s", latex, exc)
                continue
            report.queries.append(DemoQuery(latex=latex, mode=mode.value, hits=response.hits))
    return report
