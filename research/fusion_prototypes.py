"""Ranking ideas beyond a linear BM25 + kNN fusion, prototyped on the validation papers.

Usage::

    python -m research.fusion_prototypes [--onnx MODEL.onnx] [--json]

It builds the relevance set of ``mathsearch eval retrieval --task same-document --validation``
(100 papers asked, 200 topics, seed 0: the default model's validation papers only, never the
held-out ones), embeds the collection with the model (default: the shipped default) and scores,
in memory and on every topic, nDCG@10 of:

* ``bm25``: a NumPy BM25 over the equations' math tokens (k1 1.2, b 0.75, Lucene's idf; the
  query keeps its 32 rarest distinct tokens, like the shipped profile's ``max_terms``). It is an
  approximation of the index's BM25, not the cluster's own scores;
* ``knn``: exact cosine; ``fusion aA``: min-max inside each top 100, ``(1 - A) bm25 + A knn``;
* ``prf-vector``: Rocchio feedback on the vectors (Li et al., "Pseudo relevance feedback with
  deep language models and dense retrievers", 2021): the query vector plus ``beta`` times the
  mean of the top ``k`` of a first fusion, then fused with BM25 again;
* ``prf-tokens``: RM3-like expansion of the BM25 query with the ``n`` tokens of the first
  fusion's top ``k`` that carry the most idf, at weight ``w``;
* ``propagation``: the fused score plus ``gamma`` times a candidate's mean cosine to the
  fused top 5 (the cluster hypothesis);
* ``ltr``: a pointwise logistic regression over nine features of each candidate (both
  normalised scores, the raw cosine, both reciprocal ranks, the cosine to the fused top-5
  centroid, ...), trained and tested in 2-fold cross-validation by paper, repeated 3 times,
  against fusion on the same folds;
* ``whitening``: kNN on centred, whitened or partly whitened vectors (statistics of the
  collection itself, so an upper bound for statistics from training papers);
* ``adaptive alpha``: a per-query fusion weight (query performance prediction). Each topic is
  scored at alpha 0, 0.1, ..., 1; one query feature (its length, distinct tokens, idf, the
  BM25 or kNN top score and its gap to the 10th, ...) splits the topics at a quantile, and each
  side takes the alpha best on it. Threshold and both alphas are chosen on half the papers and
  scored on the other half (20 random halves, both ways), against the one best alpha chosen on
  the same halves;
* ``propagation, cross-validated``: the same halves choose among fusion at alpha 0.3-0.6 with
  and without propagation (gamma 0.5-3, the fused top 3, 5 or 10), against fusion alone;
* ``calibrated``: fusion with BM25 divided by the query's BM25 against itself (its largest
  possible score) instead of min-max, with the cosine min-maxed or raw, and BM25 divided by its
  top score with the raw cosine; each alpha chosen on the same halves.

docs/research/2026-12-06-tuning-record.md ("Beyond a linear fusion") has the figures. Nothing here
is used by the search path; it records why the shipped modes stay linear fusions.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import math
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import sparse

from mathsearch.cli.common import emit
from mathsearch.evaluation.held_out import held_out_papers, validation_papers
from mathsearch.evaluation.ir_metrics import Evaluation, evaluate
from mathsearch.evaluation.relevance_sets import RelevanceSet, featuriser_filter
from mathsearch.evaluation.relevance_tasks import build_relevance
from mathsearch.evaluation.trec_files import Run, Topic
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.runtime.gcn_session import GcnSession
from mathsearch.runtime.settings import RuntimeSettings

logger = logging.getLogger(__name__)

Scores = Callable[[int], np.ndarray]


class Collection:
    """Tokens, vectors and a BM25 matrix of one relevance set's collection."""

    def __init__(self, data: RelevanceSet, parsed: Sequence[ParsedEquation], vectors: np.ndarray):
        self.data = data
        self.ids = [p.eq_id for p in parsed]
        self.row = {eq_id: i for i, eq_id in enumerate(self.ids)}
        #: the topics whose query equation is in the collection
        self.topics = [t for t in data.topics if t.qid in self.row]
        self.tokens = [p.math_tokens for p in parsed]
        self._set_vectors(vectors)
        n = len(self.ids)
        df = Counter(t for toks in self.tokens for t in set(toks))
        self.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        self.vocab = {t: i for i, t in enumerate(df)}
        lengths = np.array([len(t) for t in self.tokens], dtype=float)
        rows, cols, vals = [], [], []
        k1, b = 1.2, 0.75
        for i, toks in enumerate(self.tokens):
            norm = k1 * (1 - b + b * lengths[i] / lengths.mean())
            for t, tf in Counter(toks).items():
                rows.append(i)
                cols.append(self.vocab[t])
                vals.append(self.idf[t] * tf * (k1 + 1) / (tf + norm))
        self.bm25_matrix = sparse.csr_matrix((vals, (rows, cols)), shape=(n, len(self.vocab)))

    def _set_vectors(self, vectors: np.ndarray) -> None:
        self.unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        self.raw = vectors.astype(np.float64)

    def with_vectors(self, vectors: np.ndarray) -> Collection:
        """The same equations, topics and BM25 with other vectors (one row per equation)."""
        other = copy.copy(self)
        other._set_vectors(vectors)
        return other

    def query_vector(self, i: int, max_terms: int = 32) -> np.ndarray:
        counts = Counter(self.tokens[i])
        q = np.zeros(len(self.vocab))
        for t in sorted(counts, key=lambda t: -self.idf[t])[:max_terms]:
            q[self.vocab[t]] = counts[t]
        return q

    def bm25(self, i: int, query: np.ndarray | None = None) -> np.ndarray:
        scores = self.bm25_matrix @ (self.query_vector(i) if query is None else query)
        scores[i] = -np.inf
        return scores

    def cosine(self, i: int, vector: np.ndarray | None = None) -> np.ndarray:
        scores = self.unit @ (self.unit[i] if vector is None else vector)
        scores[i] = -np.inf
        return scores

    def run(self, scores: Scores, topics: Sequence[Topic]) -> Run:
        run: Run = {}
        for topic in topics:
            i = self.row.get(topic.qid)
            if i is None:
                continue
            s = scores(i).astype(float)
            for eq_id in topic.exclude:
                if eq_id in self.row:
                    s[self.row[eq_id]] = -np.inf
            top = np.argsort(-s, kind="stable")[:100]
            run[topic.qid] = [(self.ids[j], float(s[j])) for j in top]
        return run

    def topic_ndcg(self, topic: Topic, scores: np.ndarray) -> float:
        """nDCG@10 of one topic ranked by ``scores`` (one per equation)."""
        run = self.run(lambda _i: scores, [topic])
        qrels = {topic.qid: self.data.qrels[topic.qid]}
        return evaluate(qrels, run, ["nDCG@10"]).means["nDCG@10"]

    def bm25_self(self, i: int) -> float:
        """The BM25 of equation ``i``'s query against itself: the largest score it can reach."""
        return float((self.bm25_matrix[i] @ self.query_vector(i))[0])

    def evaluation(self, scores: Scores, topics: Sequence[Topic] | None = None) -> Evaluation:
        """nDCG@10 of ``scores`` over ``topics`` (default: every topic), per topic and mean."""
        topics = self.data.topics if topics is None else topics
        wanted = {t.qid for t in topics}
        qrels = {q: judged for q, judged in self.data.qrels.items() if q in wanted}
        return evaluate(qrels, self.run(scores, topics), ["nDCG@10"])

    def ndcg(self, scores: Scores, topics: Sequence[Topic] | None = None) -> float:
        return self.evaluation(scores, topics).means["nDCG@10"]


def min_max_top(scores: np.ndarray, depth: int = 100) -> np.ndarray:
    """Min-max inside the top ``depth``, zero outside (the shipped fusion's normalisation)."""
    out = np.zeros_like(scores)
    top = np.argsort(-scores)[:depth]
    lo, hi = scores[top].min(), scores[top].max()
    if hi > lo:
        out[top] = (scores[top] - lo) / (hi - lo)
    return out


def fuse(bm25: np.ndarray, knn: np.ndarray, alpha: float) -> np.ndarray:
    return (1 - alpha) * min_max_top(bm25) + alpha * min_max_top(knn)


def prototypes(c: Collection) -> dict[str, float]:
    out: dict[str, float] = {
        "bm25": c.ndcg(c.bm25),
        "bm25 every token": c.ndcg(lambda i: c.bm25(i, c.query_vector(i, 10**6))),
        "knn": c.ndcg(c.cosine),
    }
    for alpha in (0.2, 0.3, 0.4, 0.5):
        out[f"fusion a{alpha}"] = c.ndcg(lambda i, a=alpha: fuse(c.bm25(i), c.cosine(i), a))

    def prf_vector(i: int, k: int, beta: float, alpha: float) -> np.ndarray:
        b0 = c.bm25(i)
        top = np.argsort(-fuse(b0, c.cosine(i), 0.4))[:k]
        q = c.unit[i] + beta * c.unit[top].mean(0)
        return fuse(b0, c.cosine(i, q / np.linalg.norm(q)), alpha)

    for k in (3, 5, 10):
        for beta in (0.5, 1.0, 2.0):
            name = f"prf-vector k{k} beta{beta} a0.4"
            out[name] = c.ndcg(lambda i, k=k, beta=beta: prf_vector(i, k, beta, 0.4))

    def prf_tokens(i: int, k: int, n: int, w: float) -> np.ndarray:
        k0 = c.cosine(i)
        top = np.argsort(-fuse(c.bm25(i), k0, 0.4))[:k]
        feedback: Counter[str] = Counter()
        for j in top:
            for t in sorted(set(c.tokens[j])):  # sorted: ties rank the same every run
                feedback[t] += c.idf[t]
        q = c.query_vector(i)
        for t, _ in feedback.most_common(n):
            q[c.vocab[t]] += w
        return fuse(c.bm25(i, q), k0, 0.4)

    for k in (3, 5):
        for n in (10, 30):
            out[f"prf-tokens k{k} n{n} w1.0 a0.4"] = c.ndcg(
                lambda i, k=k, n=n: prf_tokens(i, k, n, 1.0)
            )

    def propagation(i: int, gamma: float) -> np.ndarray:
        s = fuse(c.bm25(i), c.cosine(i), 0.4)
        s[i] = -np.inf
        cand = np.argsort(-s)[:100]
        top = cand[:5]
        out = np.full_like(s, -np.inf)
        out[cand] = s[cand] + gamma * (c.unit[cand] @ c.unit[top].T).mean(1)
        out[i] = -np.inf
        return out

    for gamma in (0.3, 0.6, 1.0):
        out[f"propagation gamma{gamma}"] = c.ndcg(lambda i, g=gamma: propagation(i, g))
    out.update(whitening(c))
    return out


def whitening(c: Collection) -> dict[str, float]:
    centred = c.raw - c.raw.mean(0)
    u, s, _ = np.linalg.svd(np.cov(centred.T))

    def knn_of(matrix: np.ndarray) -> float:
        unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)

        def scores(i: int) -> np.ndarray:
            out = unit @ unit[i]
            out[i] = -np.inf
            return out

        return c.ndcg(scores)

    return {
        "knn centred": knn_of(centred),
        "knn whitened": knn_of(centred @ (u / np.sqrt(s))),
        "knn whitened, power 0.25": knn_of(centred @ (u * s**-0.125)),
    }


ALPHAS = tuple(round(0.1 * a, 1) for a in range(11))


def _per_topic_fusion(c: Collection) -> tuple[list[Topic], np.ndarray, dict[str, np.ndarray]]:
    """nDCG@10 of every topic at every alpha of ``ALPHAS`` (topics x alphas), and query features."""
    topics = c.topics
    table = np.zeros((len(topics), len(ALPHAS)))
    features: dict[str, list[float]] = {}
    for ti, topic in enumerate(topics):
        i = c.row[topic.qid]
        b, k = c.bm25(i), c.cosine(i)
        table[ti] = [c.topic_ndcg(topic, fuse(b, k, alpha)) for alpha in ALPHAS]
        idfs = sorted((c.idf[t] for t in set(c.tokens[i])), reverse=True)
        top_b = np.sort(b[np.isfinite(b)])[::-1]
        top_k = np.sort(k[np.isfinite(k)])[::-1]
        self_score = c.bm25_self(i)
        row = {
            "tokens": len(c.tokens[i]), "distinct tokens": len(idfs), "max idf": idfs[0],
            "idf of the query terms": sum(idfs[:32]), "bm25 top": top_b[0],
            "bm25 top / self": top_b[0] / max(self_score, 1e-9),
            "bm25 gap 1-10": (top_b[0] - top_b[9]) / max(top_b[0], 1e-9),
            "knn top": top_k[0], "knn gap 1-10": top_k[0] - top_k[9],
        }  # fmt: skip
        for name, value in row.items():
            features.setdefault(name, []).append(float(value))
    return topics, table, {name: np.array(v) for name, v in features.items()}


def adaptive_alpha(c: Collection, repeats: int = 20) -> dict[str, float]:
    """A two-sided alpha per query feature, cross-validated by paper, against one alpha."""
    topics, table, features = _per_topic_fusion(c)
    fixed: list[float] = []
    split: dict[str, list[float]] = {name: [] for name in features}
    for train in _paper_halves(c, topics, repeats):
        test = ~train
        one = int(table[train].mean(0).argmax())
        fixed.append(float(table[test, one].mean()))
        for name, x in features.items():
            best: tuple[float, float, int, int] = (-1.0, math.inf, one, one)
            for q in (0.25, 0.5, 0.75):
                cut = float(np.quantile(x[train], q))
                low = x <= cut
                if not (train & low).any() or not (train & ~low).any():
                    continue  # ties: the cut leaves one side empty
                a_low = int(table[train & low].mean(0).argmax())
                a_high = int(table[train & ~low].mean(0).argmax())
                score = table[train & low, a_low].sum() + table[train & ~low, a_high].sum()
                best = max(best, (float(score), cut, a_low, a_high))
            _, cut, a_low, a_high = best
            low = x <= cut
            scored = table[test & low, a_low].sum() + table[test & ~low, a_high].sum()
            split[name].append(float(scored / test.sum()))
    out = {
        "fusion, per-topic best alpha (oracle)": float(table.max(1).mean()),
        "fusion, one alpha (same halves)": float(np.mean(fixed)),
    }
    out.update({f"adaptive alpha by {name}": float(np.mean(v)) for name, v in split.items()})
    return out


def _paper_halves(c: Collection, topics: Sequence[Topic], repeats: int) -> list[np.ndarray]:
    """Boolean masks over ``topics``: ``repeats`` random halves of their papers, both ways."""
    doc_of = {e.eq_id: e.doc_id for e in c.data.collection}
    paper = np.array([doc_of[t.qid] for t in topics])
    papers = sorted(set(paper))
    rng = np.random.default_rng(0)
    masks = []
    for _ in range(repeats):
        half = set(rng.permutation(papers)[: len(papers) // 2])
        masks += [np.array([p in half for p in paper]), np.array([p not in half for p in paper])]
    return masks


def propagation_cv(c: Collection, repeats: int = 50) -> dict[str, float]:
    """Fusion with score propagation against fusion alone, each chosen on half the papers."""
    topics = c.topics
    alphas = (0.3, 0.4, 0.5, 0.6)
    configs = [(a, 0.0, 0) for a in alphas]
    configs += [(a, g, m) for a in alphas for g in (0.5, 1.0, 1.5, 2.0, 3.0) for m in (3, 5, 10)]
    table = np.zeros((len(topics), len(configs)))
    for ti, topic in enumerate(topics):
        i = c.row[topic.qid]
        b, k = c.bm25(i), c.cosine(i)
        fused = {a: fuse(b, k, a) for a in alphas}
        for ci, (alpha, gamma, m) in enumerate(configs):
            s = fused[alpha].copy()
            s[i] = -np.inf
            if gamma:
                cand = np.argsort(-s)[:100]
                s = np.full_like(s, -np.inf)
                s[cand] = fused[alpha][cand] + gamma * (c.unit[cand] @ c.unit[cand[:m]].T).mean(1)
            table[ti, ci] = c.topic_ndcg(topic, s)
    plain, chosen = [], []
    for train in _paper_halves(c, topics, repeats):
        means = table[train].mean(0)
        plain.append(table[~train, int(means[: len(alphas)].argmax())].mean())
        chosen.append(table[~train, int(means.argmax())].mean())
    return {
        "fusion, best alpha (cross-validated)": float(np.mean(plain)),
        "propagation, best setting (cross-validated)": float(np.mean(chosen)),
    }


def calibrated_cv(c: Collection, repeats: int = 50) -> dict[str, float]:
    """Fusion over absolute score scales instead of min-max, each alpha chosen on half the
    papers: BM25 over the query's self-score (or over the top score) and the raw cosine."""
    topics = c.topics
    alphas = [round(0.1 * a, 1) for a in range(1, 10)]
    kinds = ("min-max", "bm25 / self, cosine min-max", "bm25 / self, raw cosine",
             "bm25 / top, raw cosine")  # fmt: skip
    table = np.zeros((len(topics), len(kinds), len(alphas)))
    for ti, topic in enumerate(topics):
        i = c.row[topic.qid]
        b, k = c.bm25(i), c.cosine(i)
        self_score = c.bm25_self(i)
        top_b, top_k = np.argsort(-b)[:100], np.argsort(-k)[:100]
        by_self, by_top, raw = np.zeros_like(b), np.zeros_like(b), np.zeros_like(k)
        by_self[top_b] = b[top_b] / max(self_score, 1e-9)
        by_top[top_b] = b[top_b] / max(b[top_b].max(), 1e-9)
        raw[top_k] = np.clip(k[top_k], 0, None)
        pairs = ((min_max_top(b), min_max_top(k)), (by_self, min_max_top(k)), (by_self, raw),
                 (by_top, raw))  # fmt: skip
        for ki, (lexical, dense) in enumerate(pairs):
            for ai, alpha in enumerate(alphas):
                s = (1 - alpha) * lexical + alpha * dense
                s[i] = -np.inf
                table[ti, ki, ai] = c.topic_ndcg(topic, s)
    scored: dict[str, list[float]] = {kind: [] for kind in kinds}
    for train in _paper_halves(c, topics, repeats):
        for ki, kind in enumerate(kinds):
            best = int(table[train, ki].mean(0).argmax())
            scored[kind].append(float(table[~train, ki, best].mean()))
    return {f"fusion, {kind} (cross-validated)": float(np.mean(v)) for kind, v in scored.items()}


def learning_to_rank(c: Collection, repeats: int = 3) -> dict[str, float]:
    """Pointwise logistic regression against fusion a0.4 on the same held-out folds."""
    features = {t.qid: _features(c, c.row[t.qid]) for t in c.topics}
    scores: dict[str, list[float]] = {"ltr": [], "fusion a0.4 (same folds)": []}
    for in_train in _paper_halves(c, c.topics, repeats):
        train = [t for t, chosen in zip(c.topics, in_train, strict=True) if chosen]
        test = [t for t, chosen in zip(c.topics, in_train, strict=True) if not chosen]
        xs = [features[t.qid][1] for t in train]
        ys = [
            np.array([c.ids[j] in c.data.qrels[t.qid] for j in features[t.qid][0]], float)
            for t in train
        ]
        model = _logistic(np.concatenate(xs), np.concatenate(ys))

        def ltr(i: int, model: Any = model) -> np.ndarray:
            cand, x = features[c.ids[i]]
            out = np.full(len(c.ids), -np.inf)
            out[cand] = model(x)
            return out

        scores["ltr"].append(c.ndcg(ltr, test))
        scores["fusion a0.4 (same folds)"].append(
            c.ndcg(lambda i: fuse(c.bm25(i), c.cosine(i), 0.4), test)
        )
    return {name: float(np.mean(values)) for name, values in scores.items()}


def _features(c: Collection, i: int) -> tuple[np.ndarray, np.ndarray]:
    b, k = c.bm25(i), c.cosine(i)
    top_b, top_k = np.argsort(-b)[:100], np.argsort(-k)[:100]
    cand = np.union1d(top_b, top_k)
    rank_b = np.full(len(b), 1000.0)
    rank_b[top_b] = np.arange(100)
    rank_k = np.full(len(b), 1000.0)
    rank_k[top_k] = np.arange(100)
    nb, nk = min_max_top(b), min_max_top(k)
    centroid = c.unit[np.argsort(-(0.6 * nb + 0.4 * nk))[:5]].mean(0)
    scaled = np.zeros(len(b))
    scaled[top_b] = b[top_b] / (b[top_b].max() + 1e-9)
    columns = [
        nb, nk, k, 1 / (60 + rank_b), 1 / (60 + rank_k), c.unit @ centroid, scaled,
        (rank_b < 1000).astype(float), (rank_k < 1000).astype(float),
    ]  # fmt: skip
    return cand, np.stack([col[cand] for col in columns], 1)


def _logistic(
    x: np.ndarray, y: np.ndarray, steps: int = 2000
) -> Callable[[np.ndarray], np.ndarray]:
    """L2-regularised logistic regression by gradient descent on standardised features."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = (x - mu) / sd
    w, b = np.zeros(z.shape[1]), 0.0
    for _ in range(steps):
        g = 1 / (1 + np.exp(-(z @ w + b))) - y
        w -= 0.5 * (z.T @ g / len(y) + w / len(y))
        b -= 0.5 * g.mean()
    return lambda features: ((features - mu) / sd) @ w + b


def validation_set(*, held_out: bool = False) -> tuple[RelevanceSet, list[ParsedEquation]]:
    """The validation relevance set (``held_out``: the held-out papers' set instead, to measure
    a model, never to tune on) and its collection's parsed equations, in order."""
    parsed: dict[str, ParsedEquation] = {}
    with Featuriser() as featuriser:
        data = build_relevance(
            "same-document", papers=100, topics=200, seed=0,
            only_papers=held_out_papers() if held_out else validation_papers(),
            parseable=featuriser_filter(featuriser, keep=parsed),
        )  # fmt: skip
    return data, [parsed[e.eq_id] for e in data.collection]


def load(onnx: str) -> Collection:
    data, kept = validation_set()
    return Collection(data, kept, GcnSession(onnx).encode([p.graph for p in kept]))


def model_arguments(doc: str, argv: Sequence[str] | None) -> argparse.Namespace:
    """``--onnx`` and ``--json`` of a prototype script (``args.onnx`` defaults to the shipped
    model); sets up warning-level logging."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--onnx", default=None, help="model (default: the shipped default)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    args.onnx = args.onnx or str(RuntimeSettings.from_env().model)
    logging.basicConfig(level=logging.WARNING)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = model_arguments(__doc__, argv)
    collection = load(args.onnx)
    result = {
        **prototypes(collection),
        **learning_to_rank(collection),
        **adaptive_alpha(collection),
        **propagation_cv(collection),
        **calibrated_cv(collection),
    }
    result = {name: round(value, 4) for name, value in result.items()}
    if args.json:
        emit(json.dumps(result, indent=2))
    else:
        sizes = f"{len(collection.ids)} equations, {len(collection.data.topics)} topics"
        emit(f"validation papers: {sizes}")
        for name, value in result.items():
            emit(f"{name:40s} {value:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
