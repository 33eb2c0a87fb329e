"""`mathsearch demo`: the stack, workers, the bundled real corpus indexed, hybrid queries.

1. ``mathsearch stack up`` (OpenSearch with k-NN + neural-search, Redis);
2. Celery workers in their own processes (``mathsearch worker``; ones already running are used);
3. the bundled real hep-th equations (or ``corpus``) through the pipeline - parse queue
   (LaTeX -> MathML graph, math tokens, symbols; :mod:`mathsearch.indexer.parse`), embed queue (the
   shipped
   graph CNNs of the KDD 2020 seed in ONNX Runtime, each into its own vector field: ``gcn-v7``,
   the default, and ``gcn-v8``, three wider towers trained on a lent GPU, both trained by the
   project on hep-th) and bulk writes - into the demo equation index; failures become records in
   the failures index;
4. enrichment of a library's own document index: the same papers stored as documents with their
   equations in a full-text ``body`` get ``math.*`` fields by partial updates;
5. hybrid queries (``fusion`` and ``rrf`` through the node's neural-search pipelines,
   ``rescore``) whose results a person can read, and one ``rrf`` query that fuses BM25 with every
   encoder's kNN in one hybrid query;
6. an equivalent rewriting: a query whose expanded form sits among near misses in a small
   index beside the sample, found first by BM25 with canonical forms (``canon_tokens``,
   :mod:`mathsearch.indexer.canonical_form`) and missed by BM25 over structure tokens alone.

Workers that are already running are used as they are, with the encoders they serve
(``MATHSEARCH_ENCODERS``).
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from opensearchpy import OpenSearch

from mathsearch.core.errors import QueryError
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from mathsearch.indexer.opensearch_source import iter_opensearch_index
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.opensearch.client import connect
from mathsearch.opensearch.modes import MODES, SearchMode
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.results import Hit
from mathsearch.opensearch.schema import resolve_alias
from mathsearch.opensearch.search_profile import SearchProfile
from mathsearch.opensearch.searcher import ModelQueryEncoder, Searcher, SearchRequest
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.runtime.embedders import MODELS_DIR, default_model_path, load_embedder
from mathsearch.stack import Stack
from mathsearch.workers.index_job import Broker, IndexJobError, IndexReport, run_index
from mathsearch.workers.settings import WorkerSettings
from mathsearch.workers.worker_process import start_worker, stop_worker

logger = logging.getLogger(__name__)


def demo_modes(modes: Mapping[Mode, SearchMode] = MODES) -> tuple[Mode, ...]:
    """Every registered mode in the order the demo queries them (after the profile's own): the
    fused hybrids, then the other hybrids, then the one-sided modes, each group in the
    registry's order."""
    return tuple(sorted(modes, key=lambda mode: (not modes[mode].fused, not modes[mode].hybrid)))


#: Every ranking mode, each with the default profile's parameters (alpha, normalisation, ...).
DEMO_MODES = demo_modes()
#: The second encoder the demo indexes with beside the default ``gcn``, when it is there: the
#: shipped ``gcn-v8``. On the validation papers (docs/encoders.md, "Which encoders to fuse") rrf
#: of BM25 + gcn-v7 + gcn-v8 scores nDCG@10 0.670 against 0.653 for BM25 + gcn-v7, while
#: ``bitmap-v1`` in gcn-v8's place drops it to 0.608, about BM25 alone (0.598); seq2seq reads 1
#: of the 206 bundled equations, so it would add refusals only.
DEMO_SECOND_ENCODER = "gcn-v8.onnx"


def demo_encoders() -> tuple[str, ...]:
    """``gcn`` (the default model) and :data:`DEMO_SECOND_ENCODER`'s path, when it is shipped
    and is not the default model itself."""
    second = MODELS_DIR / DEMO_SECOND_ENCODER
    if not second.is_file() or second.resolve() == default_model_path("gcn").resolve():
        return ("gcn",)
    return ("gcn", str(second))


QUERIES = (
    r"\frac{1}{2}\int d^D x \left[(\partial_x\Phi)^2 - m^2\Phi^2\right]",
    r"\Gamma(\ell-1) \lambda(m_0^2,m_1^2,m_2^2)",
    r"\sum_k \phi_k(x) \exp(iky/R)",
)
#: The near-identical equations of the bundled sample that each query retypes (paper 0301004:
#: the action S_free is written twice there, in eq. #2 and #9).
EXPECTED: dict[str, tuple[str, ...]] = {
    QUERIES[0]: ("0301004#2", "0301004#9"),
    QUERIES[1]: ("0301004#5",),
    QUERIES[2]: ("0301004#1",),
}


#: Step 6: a query, its equivalent rewriting and near misses that share more of its structure.
EQUIVALENCE_QUERY = r"\frac{(p+q)^{2}}{2m}"
EQUIVALENCE_FORMS = (
    ("rewriting", r"\frac{p^{2}+2pq+q^{2}}{2m}"),
    ("cube", r"\frac{(p+q)^{3}}{2m}"),
    ("difference", r"\frac{(p-q)^{2}}{2m}"),
    ("no-half", r"\frac{(p+q)^{2}}{m}"),
    ("no-cross-term", r"\frac{p^{2}+q^{2}}{2m}"),
)


@dataclass
class DemoQuery:
    latex: str
    mode: str
    hits: list[Hit]
    expected: list[str] = field(default_factory=list)  # the near-identical equation(s)

    @property
    def expected_first(self) -> bool:
        return bool(self.hits) and self.hits[0].eq_id in self.expected

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "expected_first": self.expected_first}


@dataclass
class DemoReport:
    stack: list[str]
    index: str
    indexed: int
    rejected: dict[str, int]
    workers: str = ""
    job: dict[str, Any] = field(default_factory=dict)
    enrichment: dict[str, Any] = field(default_factory=dict)
    models: list[dict[str, Any]] = field(default_factory=list)
    profile: dict[str, Any] = field(default_factory=dict)
    queries: list[DemoQuery] = field(default_factory=list)
    equivalence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["queries"] = [query.to_dict() for query in self.queries]
        return data


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


class DemoWorkers:
    """Workers for the demo: the running ones, or ``mathsearch worker`` started (and stopped)."""

    def __init__(self, concurrency: int = 2, encoders: tuple[str, ...] = ("gcn",)) -> None:
        self.concurrency = concurrency
        self.encoders = encoders
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> str:
        settings = WorkerSettings.from_env()
        try:
            Broker(settings).check_workers()
            self.encoders = tuple(settings.encoders)
            return "workers already running"
        except IndexJobError:
            pass
        self.process = start_worker(
            settings, self.concurrency, hostname="demo", encoders=self.encoders
        )
        return (
            f"started `mathsearch worker --concurrency {self.concurrency} "
            f"--encoders {','.join(self.encoders)}`"
        )

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            stop_worker(self.process)


def library_documents(items: Iterable[EquationRecord | Failure]) -> dict[str, dict[str, Any]]:
    """The sample's papers as a library would store them: a title and a body with display math."""
    papers: dict[str, list[str]] = {}
    for item in items:
        if isinstance(item, EquationRecord) and item.latex:
            papers.setdefault(item.doc_id, []).append(item.latex)
    return {
        doc_id: {
            "title": f"arXiv hep-th/{doc_id}",
            "body": "We find\n"
            + "\nand\n".join(f"\\begin{{equation}}\n{latex}\n\\end{{equation}}" for latex in eqs)
            + "\nwhich completes the argument.",
        }
        for doc_id, eqs in papers.items()
    }


def enrichment_example(
    client: OpenSearch,
    settings: OpenSearchSettings,
    items: list[EquationRecord | Failure],
    progress: bool,
) -> dict[str, Any]:
    """Store the papers in a plain library index, then enrich it through the workers."""
    prefix = settings.index_prefix
    papers = f"{prefix}-demo-papers"
    documents = library_documents(items)
    if not client.indices.exists(index=papers):
        client.indices.create(index=papers, body={
            "settings": {"number_of_replicas": settings.replicas},
            "mappings": {"properties": {"title": {"type": "text"}, "body": {"type": "text"}}},
        })  # fmt: skip
    for doc_id, source in documents.items():
        if not client.exists(index=papers, id=doc_id):
            client.index(index=papers, id=doc_id, body=source)
    client.indices.refresh(index=papers)
    report = run_index(
        iter_opensearch_index(client, papers, "body", mode="text"),
        f"{prefix}-demo-paper-equations",
        enrich_index=papers,
        progress=progress,
    )
    example_id = max(documents, key=lambda d: len(documents[d]["body"]))
    math = client.get(index=papers, id=example_id)["_source"].get("math", {})
    return {
        "index": papers,
        "documents": len(documents),
        "equations": report.written,
        "failed": report.failed,
        "example": {
            "doc_id": example_id,
            "equation_count": math.get("equation_count"),
            "symbols": (math.get("symbols") or [])[:12],
            "vector_dim": len(math.get("vector") or []),
        },
    }


def run_demo(
    stack: Stack | None = None,
    bring_up: bool = True,
    k: int = 3,
    corpus: str | None = None,
    progress: bool = False,
) -> DemoReport:
    """Bring the stack up, index the corpus through the workers, enrich, run hybrid queries."""
    stack = stack or Stack.from_env()
    # keep a cluster the user already runs (e.g. `stack up --nodes 3`, `--version 3.6.0`)
    # instead of replacing it
    running = stack.running()
    size, version = (running.nodes, running.version) if running else (1, None)
    messages = stack.up(size, version=version) if bring_up else []
    settings = stack.settings
    client = connect(settings)
    alias = f"{settings.index_prefix}-demo-equations"
    if client.indices.exists(index=alias) and resolve_alias(client, alias) is None:
        client.indices.delete(index=alias)  # a concrete index left by an older demo
    sample = list(iter_hepth(bundled_sample_lines()))
    if corpus:
        from mathsearch.indexer.extract import extract

        items: Iterable[EquationRecord | Failure] = extract([corpus])
    else:
        items = sample
    pool = DemoWorkers(encoders=demo_encoders())
    with pool as workers:
        job = run_index(items, alias, settings=settings, progress=progress, encoders=pool.encoders)
        enrichment = enrichment_example(client, settings, sample, progress)
    embedders = [load_embedder(name) for name in pool.encoders]
    _search_the_default_model(client, alias, embedders[0].vector_field)
    models = [
        {
            "name": e.card.name,
            "family": e.family,
            "field": e.vector_field,
            "dim": e.dim,
            "similarity": e.card.similarity,
            "providers": e.providers,
        }
        for e in embedders
    ]
    report = DemoReport(
        stack=messages,
        index=alias,
        indexed=job.written,
        rejected=failure_reasons(client, settings.index_prefix, alias) if job.failed else {},
        workers=workers,
        job=_job_summary(job),
        enrichment=enrichment,
        models=models,
    )
    profile = SearchProfile.default()
    report.profile = {"label": profile.label, **profile.to_dict()}
    searcher = Searcher(client, alias, encoder=ModelQueryEncoder(encoders=embedders[:1]))
    modes = (profile.mode, *(m for m in DEMO_MODES if m is not profile.mode))
    for latex in QUERIES:
        for mode in modes:
            try:
                # fusion and rrf through the neural-search pipelines of the node
                response = searcher.search(
                    profile.request(latex, mode=mode, k=k, fusion_side="server")
                )
            except QueryError as exc:
                logger.warning("demo query %s failed: %s", latex, exc)
                continue
            report.queries.append(
                DemoQuery(latex, mode.value, response.hits, list(EXPECTED.get(latex, ())))
            )
    if len(embedders) > 1:  # BM25 + one kNN per encoder, fused in one hybrid query
        fused = Searcher(client, alias, encoder=ModelQueryEncoder())
        request = SearchRequest(
            QUERIES[0], mode=Mode.RRF, k=k, fusion_side="server", encoders=pool.encoders
        )
        try:
            response = fused.search(request)
            label = f"rrf: bm25 + {' + '.join(e.vector_field for e in embedders)}"
            report.queries.append(
                DemoQuery(QUERIES[0], label, response.hits, list(EXPECTED[QUERIES[0]]))
            )
        except QueryError as exc:
            logger.warning("demo multi-encoder query failed: %s", exc)
    report.equivalence = equivalence_example(client, settings, sample, k)
    return report


def _search_the_default_model(client: OpenSearch, alias: str, field: str) -> None:
    """Make ``field`` (the default model's) the demo index's search field: a demo index built
    by an older release keeps its old default field when the new model's field joins it."""
    from mathsearch.opensearch.vector_fields import default_vector_field, set_default_vector_field

    if default_vector_field(client, alias) != field:
        set_default_vector_field(client, alias, field)  # logs the switch


def equivalence_example(
    client: OpenSearch,
    settings: OpenSearchSettings,
    sample: list[EquationRecord | Failure],
    k: int,
) -> dict[str, Any]:
    """Step 6: :data:`EQUIVALENCE_FORMS` beside the sample in their own index (inline), then
    the query by BM25 with canonical forms and by BM25 over structure tokens alone."""
    from mathsearch.opensearch.search_fields import EQUATION_FIELDS, SearchFields

    alias = f"{settings.index_prefix}-demo-equivalence"
    forms = [
        EquationRecord(eq_id=f"rewrite#{i}", doc_id="rewrite", position=i, latex=latex)
        for i, (_, latex) in enumerate(EQUIVALENCE_FORMS)
    ]
    run_index([*forms, *sample], alias, settings=settings, inline=True, progress=False)
    structure = SearchFields(
        text=tuple(f for f in EQUATION_FIELDS.text if "canon" not in f), canonical=None
    )
    out: dict[str, Any] = {"index": alias, "query": EQUIVALENCE_QUERY, "expected": "rewrite#0"}
    for label, fields in (("canonical", EQUATION_FIELDS), ("structure_only", structure)):
        response = Searcher(client, alias, fields=fields).search(
            SearchRequest(EQUIVALENCE_QUERY, mode=Mode.BM25, k=k)
        )
        out[label] = [
            {"rank": hit.rank, "eq_id": hit.eq_id, "score": hit.score, "latex": hit.latex}
            for hit in response.hits
        ]
        out[f"{label}_first"] = bool(response.hits) and response.hits[0].eq_id == "rewrite#0"
    return out


def failure_reasons(client: OpenSearch, prefix: str, alias: str) -> dict[str, int]:
    """Failure records of the equations bound for ``alias``, counted by reason."""
    body = {
        "size": 0,
        "query": {"term": {"index": alias}},
        "aggs": {"reasons": {"terms": {"field": "reason", "size": 20}}},
    }
    answer = client.search(index=f"{prefix}-failures", body=body)
    return {b["key"]: b["doc_count"] for b in answer["aggregations"]["reasons"]["buckets"]}


def _job_summary(job: IndexReport) -> dict[str, Any]:
    keys = ("equations", "written", "failed", "batches", "seconds", "stage_seconds", "mode")
    return {key: job.to_dict()[key] for key in keys} | {"eq_per_s": round(job.eq_per_s, 1)}
