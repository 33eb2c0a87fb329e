"""A second dense vector beside the graph CNN: a hashed bag of math tokens, prototyped.

Usage::

    python -m research.token_bag_prototype [--seconds 600] [--every 150] [--json]

The graph CNN reads one-hot node features of 256 dimensions, so most identifiers, macros and
multi-letter names share a few input ids; BM25 sees every token but no learned similarity. This
prototype asks whether a cheap learned vector over the *full* token strings adds what neither
has (a fastText-style model: Joulin et al., "Bag of tricks for efficient text classification",
2017):

* each equation's ``math_tokens`` (the BM25 field: symbols, symbol pairs, paths, tag pairs,
  shapes; :mod:`mathsearch.indexer.lexical`) hashed (CRC-32) into ``--buckets`` rows of a
  ``--dim`` table, summed, divided by the square root of the count and L2-normalised;
* trained with the in-batch contrastive loss of ``encoders/losses`` (InfoNCE, temperature
  ``--tau``, symmetric): ``--batch`` papers a step, two equations of each, the other papers'
  equations the negatives (the KDD 2020 seed's same-paper positives, section 4.2);
* on the training papers of every source (``hepth2003`` records plus the ``hep_array`` papers it
  does not cover; the held-out and validation papers left out, as in
  :mod:`mathsearch.encoders.shared_corpus`), with lazy Adam on the rows a batch touches, in
  NumPy (gradients written out; no torch outside encoders/ and export/);
* scored every ``--every`` seconds on the validation papers' relevance set of
  ``research/fusion_prototypes.py`` (never the held-out papers): kNN alone, fused with BM25, and
  fused three ways with BM25 and the shipped graph CNN's kNN (min-max in each top 100).

docs/research/2026-12-06-tuning-record.md ("Beyond a linear fusion") has the figures. Nothing here
is used by the product.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import zlib
from collections.abc import Sequence

import numpy as np
from scipy import sparse

from mathsearch.cli.common import emit
from mathsearch.encoders.shared_corpus import shared_sources
from mathsearch.evaluation.held_out import held_out_papers, validation_papers
from mathsearch.evaluation.relevance_sets import SHARED_DATA
from mathsearch.indexer.extract import extract
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord
from mathsearch.runtime.settings import RuntimeSettings
from research.fusion_prototypes import Collection, fuse, load, min_max_top

logger = logging.getLogger(__name__)


def training_tokens() -> tuple[list[str], list[list[str]]]:
    """``(paper, math tokens)`` of every training equation (held-out and validation papers
    dropped; a ``hep_array`` paper that ``hepth2003`` covers dropped, as in shared_corpus)."""
    test = set(held_out_papers()) | set(validation_papers())
    papers: list[str] = []
    tokens: list[list[str]] = []
    covered: set[str] = set()
    paths = shared_sources(SHARED_DATA, ("hepth2003", "hep_array"))
    sources = [(paths["hepth2003"], False), (paths["hep_array"], True)]
    with Featuriser() as featuriser:
        for (files, fmt), is_array in sources:
            batch = []
            records = [r for r in extract(files, fmt) if isinstance(r, EquationRecord)]
            for record in records:
                paper = record.eq_id.split("#")[0]
                if paper in test or (is_array and paper in covered):
                    continue
                if not is_array:
                    covered.add(paper)
                batch.append(record)
            for start in range(0, len(batch), 512):
                for parsed in featuriser.parse_batch(batch[start : start + 512]):
                    if isinstance(parsed, ParsedEquation) and parsed.math_tokens:
                        papers.append(parsed.eq_id.split("#")[0])
                        tokens.append(list(parsed.math_tokens))
    return papers, tokens


class TokenBag:
    """The hashed bag of tokens, its InfoNCE gradient and lazy Adam (see the module docstring)."""

    def __init__(self, buckets: int, dim: int, lr: float, tau: float, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.buckets, self.lr, self.tau = buckets, lr, tau
        self.table = (rng.standard_normal((buckets, dim)) * 0.1).astype(np.float32)
        self.m = np.zeros_like(self.table)
        self.v = np.zeros_like(self.table)
        self.steps = 0

    def ids(self, tokens: Sequence[str]) -> np.ndarray:
        return np.array([zlib.crc32(t.encode()) % self.buckets for t in tokens], dtype=np.int64)

    def embed(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        out = np.stack([self.table[b].sum(0) / np.sqrt(max(len(b), 1)) for b in bags])
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    def step(self, anchors: Sequence[np.ndarray], positives: Sequence[np.ndarray]) -> float:
        """One InfoNCE step: ``L = (CE(za zp^T / tau, I) + CE(zp za^T / tau, I)) / 2``."""
        bags = [*anchors, *positives]
        lengths = np.array([len(b) for b in bags])
        flat = np.concatenate(bags)
        uniq, inverse = np.unique(flat, return_inverse=True)
        rows = np.repeat(np.arange(len(bags)), lengths)
        weights = np.repeat(1 / np.sqrt(lengths), lengths).astype(np.float32)
        s = sparse.csr_matrix((weights, (rows, inverse)), shape=(len(bags), len(uniq)))
        e = self.table[uniq]
        raw = np.asarray(s @ e)
        norm = np.maximum(np.linalg.norm(raw, axis=1, keepdims=True), 1e-12)
        z = raw / norm
        n = len(anchors)
        za, zp = z[:n], z[n:]
        logits = za @ zp.T / self.tau
        rows_soft = _softmax(logits)
        cols_soft = _softmax(logits.T)
        diag = np.arange(n)
        loss = -0.5 * (np.log(rows_soft[diag, diag]).mean() + np.log(cols_soft[diag, diag]).mean())
        rows_soft[diag, diag] -= 1
        cols_soft[diag, diag] -= 1
        grad_logits = 0.5 * (rows_soft + cols_soft.T) / n
        grad_z = np.concatenate([grad_logits @ zp, grad_logits.T @ za]) / self.tau
        grad_raw = (grad_z - z * (grad_z * z).sum(1, keepdims=True)) / norm
        grad = np.asarray(s.T @ grad_raw, dtype=np.float32)
        self.steps += 1
        b1, b2, t = 0.9, 0.999, self.steps
        m = b1 * self.m[uniq] + (1 - b1) * grad
        v = b2 * self.v[uniq] + (1 - b2) * grad * grad
        self.m[uniq], self.v[uniq] = m, v
        self.table[uniq] -= self.lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + 1e-8)
        return float(loss)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def scores(c: Collection, vectors: np.ndarray) -> dict[str, float]:
    def bag_cosine(i: int) -> np.ndarray:
        s = vectors @ vectors[i]
        s[i] = -np.inf
        return s

    out = {"knn bag": c.ndcg(bag_cosine)}
    for alpha in (0.3, 0.4):
        out[f"fusion bm25 + bag a{alpha}"] = c.ndcg(
            lambda i, a=alpha: fuse(c.bm25(i), bag_cosine(i), a)
        )
    for gcn, bag in ((0.4, 0.1), (0.4, 0.2), (0.3, 0.2), (0.5, 0.1)):
        out[f"fusion3 bm25 {1 - gcn - bag:.1f} gcn {gcn} bag {bag}"] = c.ndcg(
            lambda i, g=gcn, b=bag: (
                (1 - g - b) * min_max_top(c.bm25(i))
                + g * min_max_top(c.cosine(i))
                + b * min_max_top(bag_cosine(i))
            )
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600, help="training budget")
    parser.add_argument("--every", type=float, default=150, help="seconds between scores")
    parser.add_argument("--buckets", type=int, default=1 << 18)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--batch", type=int, default=1024, help="papers a step")
    parser.add_argument("--tau", type=float, default=0.05)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    c = load(str(RuntimeSettings.from_env().model))
    base = {"bm25": c.ndcg(c.bm25), "knn gcn": c.ndcg(c.cosine)}
    for alpha in (0.4, 0.5):
        base[f"fusion bm25 + gcn a{alpha}"] = c.ndcg(
            lambda i, a=alpha: fuse(c.bm25(i), c.cosine(i), a)
        )
    papers, tokens = training_tokens()
    model = TokenBag(args.buckets, args.dim, args.lr, args.tau)
    bags = [model.ids(t) for t in tokens]
    by_paper: dict[str, list[int]] = {}
    for i, paper in enumerate(papers):
        by_paper.setdefault(paper, []).append(i)
    groups = [np.array(v) for v in by_paper.values() if len(v) >= 2]
    valid_bags = [model.ids(t) for t in c.tokens]
    rng = np.random.default_rng(0)
    history: list[dict[str, float]] = []
    started, next_score, losses = time.perf_counter(), args.every, []
    while True:
        elapsed = time.perf_counter() - started
        if elapsed >= next_score or elapsed >= args.seconds:
            row = {"seconds": round(elapsed), "steps": model.steps, "loss": float(np.mean(losses))}
            row.update(scores(c, model.embed(valid_bags)))
            history.append(row)
            logger.warning("%s", row)
            next_score += args.every
            losses = []
            if elapsed >= args.seconds:
                break
        chosen = rng.choice(len(groups), min(args.batch, len(groups)), replace=False)
        pairs = [rng.choice(groups[g], 2, replace=False) for g in chosen]
        losses.append(model.step([bags[a] for a, _ in pairs], [bags[p] for _, p in pairs]))
    result = {
        "equations": len(bags),
        "papers with pairs": len(groups),
        "validation": {"equations": len(c.ids), "topics": len(c.data.topics), **base},
        "history": history,
    }
    if args.json:
        emit(json.dumps(result, indent=2))
    else:
        emit(f"training: {len(bags)} equations, {len(groups)} papers with two or more")
        for name, value in base.items():
            emit(f"{name:40s} {value:.4f}")
        for row in history:
            emit(json.dumps({k: round(v, 4) for k, v in row.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
