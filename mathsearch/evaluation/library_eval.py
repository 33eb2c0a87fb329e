"""Document-level retrieval over a library's enriched index: is a paper found by one of its
equations?

The library is the hep-th documents (``../shared/data/hepth2003-documents``: one document per
paper, ``title`` + ``body``), indexed as a library's own index and enriched by an inline job
(``math.*``; the equations in an equation index beside it, gcn-v7 vectors only). A topic is one
display equation of a paper the default model never trained on (the held-out papers of
:func:`mathsearch.evaluation.held_out.held_out_papers`), drawn with a seed among those of at
least :data:`MIN_LATEX` characters; its one relevant document is its paper. Every other
document of the library is a distractor.

Runs (top ``depth`` documents each):

* ``bm25-body`` - what a library's own index does without mathsearch: the equation's LaTeX as
  a ``match`` on the body (standard analyzer);
* ``math`` - :func:`~mathsearch.opensearch.library_search.search_library`, the default fusion
  of BM25 over ``math.tokens`` and kNN over ``math.vector`` (alpha 0.4); ``math-bm25`` and
  ``math-knn`` each list alone;
* with words: ``bm25-body+words`` (LaTeX and words on the body) and ``math+words`` (the math
  fusion with the words on the body as a third list, ``text_weight`` 0.5). The words are the
  title of the equation's section (``mathsearch extract --format tex``), the kind of words a
  reader adds to a formula; a topic whose equation has no section title gets none.

Reported per run: nDCG@10, RR (reciprocal rank) and R@10 with the Hoeffding width of the KDD
seed's section 5 (:mod:`mathsearch.evaluation.ir_metrics`), and each run's paired t-test
against ``bm25-body`` on nDCG@10 (:mod:`mathsearch.evaluation.paired_test`).

Example::

    report = run_library_eval(client, settings, papers=held_out_papers(), seed=0)
    report["runs"]["math"]["means"]["nDCG@10"]
"""

from __future__ import annotations

import json
import logging
import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mathsearch.core.errors import EvaluationError
from mathsearch.evaluation.ir_metrics import evaluate
from mathsearch.evaluation.paired_test import compare_per_topic
from mathsearch.evaluation.trec_files import Qrels, Run

logger = logging.getLogger(__name__)

__all__ = ["MEASURES", "MIN_LATEX", "document_title", "library_topics", "run_library_eval"]

#: Measures of the report.
MEASURES = ("nDCG@10", "RR", "R@10")
#: The shortest query equation, in characters of LaTeX (shorter ones are mostly symbols).
MIN_LATEX = 20
_TITLE = re.compile(r"\\title\{((?:[^{}]|\{[^{}]*\})*)\}")


def document_title(body: str, paper: str) -> str:
    """A document's title: its ``\\title{...}`` without markup, else ``hep-th/PAPER``.

    >>> document_title(r"\\title{On \\emph{BRST} symmetry}", "0301085")
    'On BRST symmetry'
    >>> document_title("no title here", "0301085")
    'hep-th/0301085'
    """
    match = _TITLE.search(body)
    if match:
        text = re.sub(r"\\[a-zA-Z]+\*?\s*|[{}~$%]|\\\\", " ", match.group(1))
        text = " ".join(text.split())
        if text:
            return text
    return f"hep-th/{paper}"


def library_topics(
    documents: Sequence[Path], papers: Sequence[str], *, seed: int = 0, per_paper: int = 1
) -> list[dict[str, str]]:
    """``per_paper`` topics of each of ``papers`` that has a document: ``{"qid", "paper",
    "latex", "words"}`` (words: the equation's section title, or empty)."""
    from mathsearch.indexer.extract import extract
    from mathsearch.indexer.records import EquationRecord

    by_paper = {path.stem: path for path in documents}
    rng = random.Random(seed)
    topics: list[dict[str, str]] = []
    for paper in sorted(set(papers) & set(by_paper)):
        records = [
            r
            for r in extract([str(by_paper[paper])], "tex")
            if isinstance(r, EquationRecord) and len((r.latex or "").strip()) >= MIN_LATEX
        ]
        for number, record in enumerate(rng.sample(records, min(per_paper, len(records)))):
            topics.append(
                {
                    "qid": f"{paper}-{number}",
                    "paper": paper,
                    "latex": (record.latex or "").strip(),  # set: filtered above
                    "words": (record.section or "").strip(),
                }
            )
    return topics


def _build(
    client: Any,
    settings: Any,
    documents: Sequence[Path],
    library: str,
    equations: str,
    *,
    rebuild: bool,
    progress: bool,
) -> dict[str, Any]:
    """The enriched library index and its equation index (reused when complete)."""
    from mathsearch.indexer.opensearch_source import iter_opensearch_index
    from mathsearch.opensearch.bulk_writer import BulkWriter
    from mathsearch.workers.index_job import run_index

    if (
        not rebuild
        and client.indices.exists(index=library)
        and client.indices.exists(index=equations)
    ):
        enriched = client.count(index=library, body={"query": {"exists": {"field": "math.tokens"}}})
        if int(client.count(index=library)["count"]) == len(documents) and enriched["count"]:
            logger.info("reusing %s (%d documents) and %s", library, len(documents), equations)
            return {"reused": True, "documents": len(documents)}
    client.indices.delete(index=library, ignore_unavailable=True)
    client.indices.delete(index=f"{equations}-0*", ignore_unavailable=True)
    mapping = {"properties": {"title": {"type": "text"}, "body": {"type": "text"}}}
    client.indices.create(
        index=library, body={"settings": {"number_of_replicas": 0}, "mappings": mapping}
    )

    def actions() -> Any:
        for path in documents:
            body = path.read_text(encoding="utf-8", errors="replace")
            yield {
                "_op_type": "index", "_index": library, "_id": path.stem,
                "_source": {"title": document_title(body, path.stem), "body": body},
            }  # fmt: skip

    BulkWriter(client, settings, refresh="end").write(actions())
    items = list(iter_opensearch_index(client, library, "body", mode="text"))
    report = run_index(
        items, equations, inline=True, enrich_index=library, rerank=(), progress=progress
    )
    client.indices.refresh(index=f"{library},{equations}")
    return {
        "reused": False,
        "documents": len(documents),
        "equations": report.written,
        "failed": report.failed,
        "seconds": round(report.seconds, 1),
    }


def run_library_eval(
    client: Any,
    settings: Any,
    *,
    papers: Sequence[str],
    documents_dir: Path | None = None,
    seed: int = 0,
    per_paper: int = 1,
    library: str | None = None,
    rebuild: bool = False,
    depth: int = 100,
    progress: bool = True,
    out_dir: Path | None = None,
) -> dict[str, Any]:
    """Build (or reuse) the enriched library, draw the topics, run every variant, evaluate.

    Raises:
        EvaluationError: no documents, or none of ``papers`` has a document.
    """
    from mathsearch.evaluation.relevance_sets import SHARED_DATA
    from mathsearch.opensearch.library_search import describe_library, search_library
    from mathsearch.opensearch.query_encoder import ModelQueryEncoder

    folder = documents_dir or SHARED_DATA / "hepth2003-documents"
    documents = sorted(folder.glob("*.tex"))
    if not documents:
        raise EvaluationError(f"no .tex documents in {folder}")
    library = library or f"{settings.index_prefix}-eval-library"
    equations = f"{library}-eq"
    built = _build(
        client, settings, documents, library, equations, rebuild=rebuild, progress=progress
    )
    topics = library_topics(documents, papers, seed=seed, per_paper=per_paper)
    if not topics:
        raise EvaluationError("none of the papers has a document with an equation to query")
    described = describe_library(client, library)
    encoder = ModelQueryEncoder()
    qrels: Qrels = {t["qid"]: {t["paper"]: 1} for t in topics}

    def body_list(text: str) -> list[tuple[str, float]]:
        found = client.search(
            index=library,
            body={"size": depth, "_source": False, "query": {"match": {"body": {"query": text}}}},
        )
        return [(str(h["_id"]), float(h["_score"])) for h in found["hits"]["hits"]]

    def math_list(topic: dict[str, str], **kwargs: Any) -> list[tuple[str, float]]:
        response = search_library(
            client, library, topic["latex"], k=depth, depth=depth, library=described,
            encoder=encoder, equations=False, **kwargs,
        )  # fmt: skip
        return [(hit.doc_id, hit.score) for hit in response.hits]

    variants: dict[str, Callable[[dict[str, str]], list[tuple[str, float]]]] = {
        "bm25-body": lambda t: body_list(t["latex"]),
        "math": math_list,
        "math-bm25": lambda t: math_list(t, mode="bm25"),
        "math-knn": lambda t: math_list(t, mode="knn"),
        "bm25-body+words": lambda t: body_list(f"{t['latex']} {t['words']}".strip()),
        "math+words": lambda t: (
            math_list(t, text=t["words"], text_field="body") if t["words"] else math_list(t)
        ),
    }
    runs: dict[str, Run] = {name: {} for name in variants}
    failures: dict[str, dict[str, str]] = {name: {} for name in variants}
    for topic in topics:
        for name, variant in variants.items():
            try:
                runs[name][topic["qid"]] = variant(topic)
            except Exception as exc:  # a refused query scores 0, with its reason
                failures[name][topic["qid"]] = f"{type(exc).__name__}: {exc}"
                runs[name][topic["qid"]] = []
    evaluations = {name: evaluate(qrels, run, MEASURES) for name, run in runs.items()}
    report: dict[str, Any] = {
        "library": library,
        "equations_index": equations,
        "build": built,
        "documents": len(documents),
        "papers": len({t["paper"] for t in topics}),
        "topics": len(topics),
        "topics_with_words": sum(1 for t in topics if t["words"]),
        "seed": seed,
        "model": described.model_field,
        "runs": {},
    }
    baseline = evaluations["bm25-body"]
    for name, evaluation in evaluations.items():
        entry = evaluation.to_dict()
        entry["failures"] = len(failures[name])
        if name != "bm25-body":
            entry["vs_bm25_body"] = compare_per_topic(
                evaluation.per_topic, baseline.per_topic, "nDCG@10"
            ).to_dict()
        report["runs"][name] = entry
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "topics.json").write_text(json.dumps(topics, indent=1), encoding="utf-8")
        (out_dir / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report
