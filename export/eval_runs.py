"""The numbers of ``mathsearch eval`` (KDD 2020 seed, sections 5 and 6) as JSON-able dicts.

:mod:`mathsearch.cli.eval` parses the command line and prints,
:mod:`mathsearch.encoders.eval_inputs` reads
the input files; this module loads the models, embeds and scores:

* :func:`eval_ranking`: the hold-out ranking score (eq. 3) of a trained model, of an untrained
  model of the same configuration and seed, and of the BoW baseline on the same triplets, each
  with the Theorem 5.1 width for the number of test papers and the eq. 9 width for the sampled
  triplets (greedy chromatic number of their dependency graph);
* :func:`eval_knn`: leave-one-out 1-NN accuracy and ranking score on labelled formulas
  (section 6.1's evaluation data);
* :func:`eval_retrieval`: mean P@k and uMAP (section 6.3) of ranking a corpus per query.

Similarities: the model's embeddings by inner product (eq. 3, the seed's search), the BoW
vectors (:func:`mathsearch.indexer.lexical.bow_vector`, section 6.3) by cosine. Torch is imported
only
where a model is used, so the BoW-only runs need no train extra.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mathsearch.encoders.corpus import EquationCorpus
from mathsearch.encoders.eval_inputs import EvalInputError, featurise_formulas
from mathsearch.encoders.evaluation import (
    UMAP_MAX_RANK,
    dependency_chromatic_number,
    incomplete_confidence_bound,
    loo_ranking_score,
    mean_precision_at_k,
    mean_umap,
    one_nn_accuracy,
    ranking_confidence_bound,
    ranking_score,
    similarity_matrix,
)
from mathsearch.indexer.lexical import bow_vector
from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.indexer.parse import Featuriser
from mathsearch.indexer.vocabulary import Vocabulary

if TYPE_CHECKING:
    from mathsearch.encoders.gcn import GraphCNN
    from mathsearch.runtime.gcn_session import GcnSession

logger = logging.getLogger(__name__)

__all__ = [
    "DELTA",
    "eval_knn",
    "eval_ranking",
    "eval_retrieval",
    "load_model_checked",
    "untrained_model",
]

#: Failure probability of the reported confidence widths (95%).
DELTA = 0.05
_CHUNK = 512  # graphs per forward pass
_QUERY_CHUNK = 64  # queries per similarity block in retrieval


# --- models ------------------------------------------------------------------------------------


def load_model_checked(
    checkpoint: str | Path, vocabulary: Vocabulary, device: str
) -> tuple[GraphCNN, dict[str, Any]]:
    """The checkpoint's model (eval mode, on ``device``), refused when its vocabulary differs.

    Raises:
        EvalInputError: a missing file or another vocabulary than ``vocabulary``.
        CheckpointError: an unreadable checkpoint or another format.
    """
    from mathsearch.encoders.checkpoints import load_model

    if not Path(checkpoint).is_file():
        raise EvalInputError(f"checkpoint {checkpoint} does not exist")
    model, metadata = load_model(checkpoint, map_location="cpu")
    trained_with = str(metadata.get("vocab_hash", ""))
    if trained_with != vocabulary.content_hash:
        raise EvalInputError(
            f"checkpoint {checkpoint} was trained with vocabulary {trained_with[:12] or '?'}, "
            f"but this run featurises with vocabulary {vocabulary.content_hash[:12]}: "
            "pass --vocabulary with the vocabulary file it was trained with"
        )
    return model.to(device), metadata


def untrained_model(metadata: dict[str, Any], device: str) -> Any:
    """The model of the checkpoint's configuration as training initialised it (same seed); for
    an ensemble checkpoint, its towers so initialised and a random projection."""
    import torch

    from mathsearch.encoders.checkpoints import model_from_record

    seed = int((metadata.get("train_config") or {}).get("seed", 0))
    torch.manual_seed(seed)
    return model_from_record(metadata).to(device).eval()


def embed(
    model: GraphCNN | GcnSession,
    graphs: Sequence[EquationGraph],
    device: str,
    progress: bool,
    desc: str,
) -> np.ndarray:
    """``(n, out_dim)`` float64 embeddings ``phi_bar`` of ``graphs``, in chunks, eval mode.

    ``model`` may also be an exported model (:class:`mathsearch.runtime.gcn_session.GcnSession`,
    ONNX
    Runtime).
    """
    from mathsearch.runtime.gcn_session import GcnSession

    if isinstance(model, GcnSession):  # ONNX Runtime: no torch needed
        return model.encode(graphs).astype(np.float64)
    import torch
    from tqdm.auto import tqdm

    from mathsearch.encoders.graph_data import collate

    model.eval()
    parts = []
    with torch.no_grad():
        starts = range(0, len(graphs), _CHUNK)
        for start in tqdm(starts, desc=desc, unit="chunk", disable=None if progress else True):
            batch = collate(graphs[start : start + _CHUNK]).to(device)
            parts.append(model(batch).double().cpu().numpy())
    if not parts:
        return np.zeros((0, model.config.out_dim))
    return np.concatenate(parts)


def _bows(graphs: Sequence[EquationGraph]) -> np.ndarray:
    if not graphs:
        return np.zeros((0, 256))
    return np.stack([bow_vector(graph) for graph in graphs]).astype(np.float64)


# --- the three evaluations ---------------------------------------------------------------------


def _triplet_score(x: np.ndarray, triplets: np.ndarray, metric: str) -> float:
    a, p, n = (x[triplets[:, k]] for k in range(3))
    if metric == "cosine":
        a, p, n = (
            v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12) for v in (a, p, n)
        )
    return ranking_score((a * p).sum(1), (a * n).sum(1))


def eval_ranking(
    corpus_test: EquationCorpus,
    triplets: list[tuple[int, int, int]],
    models: dict[str, GraphCNN | GcnSession],
    *,
    device: str = "cpu",
    progress: bool = False,
) -> dict[str, Any]:
    """Ranking scores of ``models`` (inner product) and of BoW (cosine) on the same triplets."""
    if not triplets:
        raise EvalInputError("no hold-out triplets to score")
    index = np.asarray(triplets, dtype=np.int64)
    wanted = np.unique(index)
    remap = np.full(len(corpus_test), -1, dtype=np.int64)
    remap[wanted] = np.arange(wanted.size)
    local = remap[index]
    graphs = [corpus_test.graphs[i] for i in wanted]
    n_papers = corpus_test.num_papers
    width = ranking_confidence_bound(n_papers, DELTA)
    chi = dependency_chromatic_number(corpus_test.eq_paper[index].tolist())
    sampled = incomplete_confidence_bound(len(triplets), chi, DELTA)
    scores: dict[str, dict[str, Any]] = {}
    for name, model in models.items():
        x = embed(model, graphs, device, progress, f"embed {name}")
        scores[name] = {"ranking_score": _triplet_score(x, local, "inner"), "similarity": "inner"}
    scores["bow"] = {"ranking_score": _triplet_score(_bows(graphs), local, "cosine")}
    scores["bow"]["similarity"] = "cosine"
    for entry in scores.values():
        entry["bound_95"] = width
        entry["bound_95_sampled"] = sampled
    return {
        "test_papers": n_papers,
        "test_equations": len(corpus_test),
        "triplets": len(triplets),
        "chromatic_number": chi,
        "delta": DELTA,
        "scores": scores,
    }


def eval_knn(
    categories: dict[str, list[str]],
    featuriser: Featuriser,
    model: GraphCNN | None,
    *,
    device: str = "cpu",
    progress: bool = False,
) -> dict[str, Any]:
    """Leave-one-out 1-NN accuracy and ranking score of the model and BoW on labelled formulas."""
    items = [
        (f"{name}#{i}", formula)
        for name, formulas in categories.items()
        for i, formula in enumerate(formulas)
    ]
    labels_all = [name for name, formulas in categories.items() for _ in formulas]
    graphs, kept, failures = featurise_formulas(featuriser, items)
    for failure in failures:
        logger.warning(
            "cannot featurise %s: %s/%s", failure["id"], failure["stage"], failure["reason"]
        )
    labels = [labels_all[i] for i in kept]
    if len(set(labels)) < 2:
        raise EvalInputError(
            f"need formulas of at least two categories; {len(graphs)} of {len(items)} "
            f"featurised, in {len(set(labels))} category"
        )
    vectors: dict[str, tuple[np.ndarray, str]] = {}
    if model is not None:
        vectors["model"] = (embed(model, graphs, device, progress, "embed model"), "inner")
    vectors["bow"] = (_bows(graphs), "cosine")
    scores = {
        name: {
            "one_nn_accuracy": one_nn_accuracy(x, labels, metric),  # type: ignore[arg-type]
            "loo_ranking_score": loo_ranking_score(x, labels, metric),  # type: ignore[arg-type]
            "similarity": metric,
        }
        for name, (x, metric) in vectors.items()
    }
    return {
        "categories": len(categories),
        "formulas": len(items),
        "featurised": len(graphs),
        "failures": failures,
        "scores": scores,
    }


def _top(row: np.ndarray, limit: int) -> np.ndarray:
    """Indices of the ``limit`` largest entries, best first, ties in index order."""
    if limit >= row.size:
        return np.argsort(-row, kind="stable")
    head = np.argpartition(-row, limit - 1)[:limit]
    return head[np.lexsort((head, -row[head]))]


def _rankings(
    queries: np.ndarray, corpus: np.ndarray, metric: str, eq_ids: list[str], limit: int
) -> list[list[str]]:
    out: list[list[str]] = []
    for start in range(0, queries.shape[0], _QUERY_CHUNK):
        sims = similarity_matrix(corpus, metric, queries[start : start + _QUERY_CHUNK])  # type: ignore[arg-type]
        out.extend([eq_ids[i] for i in _top(row, limit)] for row in sims)
    return out


def eval_retrieval(
    queries: dict[str, str],
    relevance: dict[str, list[str]],
    corpus: EquationCorpus,
    featuriser: Featuriser,
    model: GraphCNN | None,
    *,
    k: int = 10,
    device: str = "cpu",
    progress: bool = False,
) -> dict[str, Any]:
    """Mean P@k and uMAP of ranking ``corpus`` per query, for the model and BoW.

    Queries without a relevance entry are skipped (and counted); a query that cannot be
    featurised retrieves nothing (scores 0) and is reported.
    """
    if len(corpus) == 0:
        raise EvalInputError("the corpus has no featurised equation")
    judged = [qid for qid in queries if qid in relevance]
    if not judged:
        raise EvalInputError("no query of the queries file has an entry in the relevance file")
    graphs, kept, failures = featurise_formulas(featuriser, [(q, queries[q]) for q in judged])
    for failure in failures:
        logger.warning("cannot featurise query %s: %s", failure["id"], failure["reason"])
    known = set(corpus.eq_ids)
    wanted = {eq for qid in judged for eq in relevance[qid]}
    relevants = [set(relevance[qid]) for qid in judged]
    limit = max(k, UMAP_MAX_RANK)
    vectors: dict[str, tuple[np.ndarray, np.ndarray, str]] = {}
    if model is not None:
        corpus_x = embed(model, corpus.graphs, device, progress, "embed corpus")
        query_x = embed(model, graphs, device, False, "embed queries")
        vectors["model"] = (query_x, corpus_x, "inner")
    vectors["bow"] = (_bows(graphs), _bows(corpus.graphs), "cosine")
    scores: dict[str, dict[str, Any]] = {}
    for name, (query_x, corpus_x, metric) in vectors.items():
        rankings: list[list[str]] = [[] for _ in judged]
        if kept:
            found = _rankings(query_x, corpus_x, metric, corpus.eq_ids, limit)
            for position, ranked in zip(kept, found, strict=True):
                rankings[position] = ranked
        scores[name] = {
            "precision_at_k": mean_precision_at_k(rankings, relevants, k),
            "umap": mean_umap(rankings, relevants, UMAP_MAX_RANK),
            "similarity": metric,
        }
    return {
        "queries": len(judged),
        "queries_without_relevance": len(queries) - len(judged),
        "query_failures": failures,
        "corpus_equations": len(corpus),
        "relevant_ids": len(wanted),
        "relevant_ids_not_in_corpus": len(wanted - known),
        "k": k,
        "umap_max_rank": UMAP_MAX_RANK,
        "scores": scores,
    }
