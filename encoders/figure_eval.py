"""Evaluation of figure embeddings (figure-embeddings seed, section 5.2), on held-out articles.

* Semantic similarity prediction (Tables 1 and 3): pairs scored by cosine, a threshold from
  {0.1, ..., 0.9} chosen on validation pairs; accuracy on "Same" (same-article pairs + as many
  random pairs), "Citing" (citing-article pairs + random) and "Accuracy" (both).
* Figure recommendation (Tables 4 and 5): for held-out target figures, tf-idf retrieves the
  first 100 figures of the whole collection, which are re-ranked by
  ``(1 - alpha) * tfidf + alpha * cosine(embeddings)`` with ``alpha`` from {0.1, ..., 0.9}
  chosen on validation targets; p@3 and p@5 where relevant = same article, citing article, or
  either (the main measure), with each target's values (``per_target``) for the seed's two-tailed
  paired t-test against tf-idf (the command line runs it: the evaluation floor is above this
  one). Pure embedding retrieval is reported beside it.

Baselines: tf-idf over the 1000-word vocabulary (:func:`tfidf_vectors`) and the untrained model
or random vectors, passed in like any other vectors. Nothing here imports torch.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from mathsearch.encoders.figure_data import FigureCorpus

logger = logging.getLogger(__name__)

__all__ = ["evaluate_vectors", "recommendation", "similarity_prediction", "tfidf_vectors"]

THRESHOLDS = tuple(round(0.1 * k, 1) for k in range(1, 10))
ALPHAS = THRESHOLDS


def tfidf_vectors(corpus: FigureCorpus) -> np.ndarray:
    """L2-normalised tf-idf ``(N, vocabulary words)`` of the figure texts (padding/unknown out)."""
    size = corpus.vocabulary.size
    counts = np.zeros((len(corpus), size), dtype=np.float64)
    tokens, lengths = corpus.features.tokens, corpus.features.lengths
    for n in range(len(corpus)):
        np.add.at(counts[n], tokens[n, : lengths[n]], 1.0)
    counts[:, :2] = 0.0
    df = (counts > 0).sum(axis=0)
    idf = np.log((1 + len(corpus)) / (1 + df)) + 1.0
    vectors = counts * idf
    return _normalise(vectors).astype(np.float32)


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def _pair_sets(
    corpus: FigureCorpus, rows: np.ndarray, size: int, seed: int
) -> dict[str, np.ndarray]:
    """``{"same": (n,3), "citing": (n,3)}``: (i, j, label) with ``i`` in ``rows`` (held-out
    articles, so no pair was trained on) and ``j`` any other figure; balanced random negatives."""
    rng = np.random.default_rng(seed)
    i = np.repeat(np.asarray(rows), len(corpus))
    j = np.tile(np.arange(len(corpus)), len(rows))
    keep = (i != j) & ~(np.isin(j, rows) & (j < i))  # each held-out pair once
    i, j = i[keep], j[keep]
    relation = corpus.relation(i, j)
    out = {}
    for name, value in (("same", 1.0), ("citing", 0.6)):
        hits = np.flatnonzero(np.isclose(relation, value))
        if len(hits) > size:
            hits = rng.choice(hits, size, replace=False)
        negatives = np.flatnonzero(relation == 0)
        negatives = rng.choice(negatives, min(len(hits), len(negatives)), replace=False)
        chosen = np.concatenate([hits, negatives])
        labels = np.concatenate([np.ones(len(hits)), np.zeros(len(negatives))])
        out[name] = np.stack([i[chosen], j[chosen], labels], axis=1).astype(np.int64)
    return out


def _cosines(vectors: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    unit = _normalise(vectors.astype(np.float64))
    return (unit[pairs[:, 0]] * unit[pairs[:, 1]]).sum(axis=1)


def _accuracy(scores: np.ndarray, labels: np.ndarray, threshold: float) -> float:
    return float(((scores >= threshold) == (labels > 0)).mean()) if len(labels) else float("nan")


def similarity_prediction(
    vectors: np.ndarray,
    corpus: FigureCorpus,
    val_rows: np.ndarray,
    test_rows: np.ndarray,
    *,
    size: int = 500,
    seed: int = 0,
) -> dict[str, Any]:
    """Accuracy on Same / Citing / Accuracy with a validation-chosen cosine threshold."""
    val = _pair_sets(corpus, val_rows, size, seed)
    test = _pair_sets(corpus, test_rows, size, seed + 1)
    val_all = np.concatenate([val["same"], val["citing"]])
    scores = _cosines(vectors, val_all)
    threshold = max(THRESHOLDS, key=lambda t: _accuracy(scores, val_all[:, 2], t))
    out: dict[str, Any] = {"threshold": threshold}
    for name, pairs in (
        ("same", test["same"]),
        ("citing", test["citing"]),
        ("accuracy", np.concatenate([test["same"], test["citing"]])),
    ):
        out[name] = _accuracy(_cosines(vectors, pairs), pairs[:, 2], threshold)
        out[f"{name}_pairs"] = len(pairs)
    return out


def _precisions(ranked: np.ndarray, target: int, corpus: FigureCorpus) -> dict[str, float]:
    relation = corpus.relation(np.full(len(ranked), target), ranked)
    out = {}
    for k in (3, 5):
        top = relation[:k]
        out[f"p@{k}"] = float((top > 0).sum() / k)
        out[f"same_p@{k}"] = float((top == 1.0).sum() / k)
        out[f"citing_p@{k}"] = float(np.isclose(top, 0.6).sum() / k)
    return out


def _rank(
    target: int, tfidf: np.ndarray, unit: np.ndarray | None, alpha: float, depth: int
) -> np.ndarray:
    first = tfidf @ tfidf[target]
    first[target] = -np.inf
    window = np.argsort(-first, kind="stable")[:depth]
    if unit is None:
        return window
    score = (1 - alpha) * first[window] + alpha * (unit[window] @ unit[target])
    return window[np.argsort(-score, kind="stable")]


def _mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: float(np.mean([r[key] for r in rows])) for key in rows[0]} if rows else {}


def _targets(corpus: FigureCorpus, rows: np.ndarray) -> list[int]:
    """Figures with at least one other figure of their article in the collection."""
    counts: dict[str, int] = {}
    for a in corpus.articles:
        counts[a] = counts.get(a, 0) + 1
    return [int(r) for r in rows if counts[corpus.articles[r]] > 1]


def recommendation(
    vectors: np.ndarray | None,
    corpus: FigureCorpus,
    val_rows: np.ndarray,
    test_rows: np.ndarray,
    *,
    tfidf: np.ndarray,
    depth: int = 100,
) -> dict[str, Any]:
    """p@3/p@5 of tf-idf re-ranked with ``vectors`` (alpha tuned on validation targets);
    ``vectors=None`` gives tf-idf alone."""
    unit = None if vectors is None else _normalise(vectors.astype(np.float64))
    val, test = _targets(corpus, val_rows), _targets(corpus, test_rows)
    alpha = 0.0
    if unit is not None:
        alpha = max(
            ALPHAS,
            key=lambda a: _mean(
                [_precisions(_rank(t, tfidf, unit, a, depth)[:5], t, corpus) for t in val]
            ).get("p@5", 0.0),
        )
    rows = [_precisions(_rank(t, tfidf, unit, alpha, depth)[:5], t, corpus) for t in test]
    per_target = {key: [r[key] for r in rows] for key in ("p@3", "p@5")} if rows else {}
    return {"alpha": alpha, "targets": len(test), **_mean(rows), "per_target": per_target}


def embedding_retrieval(
    vectors: np.ndarray, corpus: FigureCorpus, test_rows: np.ndarray
) -> dict[str, Any]:
    """p@k of retrieval by cosine alone over the whole collection (seed Table 4)."""
    unit = _normalise(vectors.astype(np.float64))
    rows = []
    for target in _targets(corpus, test_rows):
        score = unit @ unit[target]
        score[target] = -np.inf
        rows.append(_precisions(np.argsort(-score, kind="stable")[:5], target, corpus))
    return _mean(rows)


def evaluate_vectors(
    named: dict[str, np.ndarray],
    corpus: FigureCorpus,
    val_rows: np.ndarray,
    test_rows: np.ndarray,
    seed: int = 0,
) -> dict[str, Any]:
    """Every metric for each named set of vectors, plus the tf-idf baseline."""
    tfidf = tfidf_vectors(corpus)
    report: dict[str, Any] = {
        "similarity": {
            "tfidf": similarity_prediction(tfidf, corpus, val_rows, test_rows, seed=seed)
        },
        "recommendation": {"tfidf": recommendation(None, corpus, val_rows, test_rows, tfidf=tfidf)},
        "retrieval": {"tfidf": embedding_retrieval(tfidf, corpus, test_rows)},
    }
    for name, vectors in named.items():
        report["similarity"][name] = similarity_prediction(
            vectors, corpus, val_rows, test_rows, seed=seed
        )
        report["recommendation"][f"tfidf+{name}"] = recommendation(
            vectors, corpus, val_rows, test_rows, tfidf=tfidf
        )
        report["retrieval"][name] = embedding_retrieval(vectors, corpus, test_rows)
    return report
