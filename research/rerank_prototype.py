"""A second stage at query time: re-rank the default's fused window with heavier encoders.

Usage::

    python -m research.rerank_prototype [--first gcn] [--heavy M.onnx ...] [--windows 20,50,100]
        [--alphas 0.5,0.6,0.7,0.8]

The index holds only the cheap default's vectors (gcn-v7: its CPU embedding rate sets the
indexing speed). At query time, BM25 fused with that field gives a window of the top ``K``
candidates; each candidate is embedded by the heavier encoders (the seed-size towers, which
index at 0.07-0.15x gcn-v7's rate on the CPU) and the window is fused again, min-max inside the
window, ``(1 - alpha) bm25 + alpha / n sum_e cosine_e`` over the ``n`` fields (the first and
the heavy ones). The cost moves from every indexed equation to ``K`` candidates per query.

Scored in memory on the validation papers only (the relevance set of
``research/fusion_prototypes.py``: 200 topics of the default model's validation papers, never the
held-out ones), nDCG@10 with the paired 95% interval against BM25 + the first field fused at the
profile's alpha 0.4 (the served default), and against the fusion of every field over the whole
collection (what indexing all of them would give). Each re-ranking is scored twice: with the
candidates' exact BM25 (``bm25``, what :mod:`mathsearch.opensearch.window_rerank` ships) and with
the first stage's fused score in its place (``first``). It prints a JSON object of ``[nDCG@10, [mean
difference, low, high]]`` per row, and logs each row as it is scored.
docs/research/2026-12-06-tuning-record.md ("A second stage") quotes its figures.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mathsearch.cli.common import emit
from mathsearch.evaluation.ir_metrics import Evaluation
from research.compare_encoders import NDCG, paired_difference
from research.fuse_encoders import Field, embed_field, fused_scorer
from research.fusion_prototypes import Collection, Scores, validation_set

logger = logging.getLogger(__name__)

HEAVY = (
    "export/models/gcn-v8.onnx",
    "export/models/gcn-v9.onnx",
    "export/models/gcn-v10.onnx",
)


def window_min_max(scores: np.ndarray) -> np.ndarray:
    """Min-max of a window's scores (all 1 when they are equal)."""
    lo, hi = scores.min(), scores.max()
    return np.ones_like(scores) if hi <= lo else (scores - lo) / (hi - lo)


def reranker(
    collection: Collection,
    first: Scores,
    fields: Sequence[Field],
    *,
    window: int,
    alpha: float,
    lexical: str = "bm25",
) -> Scores:
    """``first``'s top ``window`` re-fused with BM25 (or ``first``'s own score, ``lexical=
    "first"``) and ``fields``, the rest below it."""

    def score(i: int) -> np.ndarray:
        s = first(i)
        cand = [j for j in np.argsort(-s, kind="stable")[:window] if np.isfinite(s[j])]
        out = np.full(len(s), -np.inf)
        if not cand:
            return out
        cand_a = np.array(cand)
        base = collection.bm25(i)[cand_a] if lexical == "bm25" else s[cand_a]
        fused = (1 - alpha) * window_min_max(base)
        for f in fields:
            cos = f.scores(i)[cand_a]
            cos = np.where(np.isfinite(cos), cos, -1.0)
            fused += alpha / len(fields) * window_min_max(cos)
        out[cand_a] = fused
        return out

    return score


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--first", default="gcn", help="the indexed field (default: gcn)")
    parser.add_argument("--heavy", nargs="+", default=list(HEAVY), help="re-ranking encoders")
    parser.add_argument("--windows", default="20,50,100")
    parser.add_argument("--alphas", default="0.4,0.5,0.6")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    windows = [int(w) for w in args.windows.split(",")]
    alphas = [float(a) for a in args.alphas.split(",")]

    data, kept = validation_set()
    first = embed_field(args.first, kept)
    heavy = [embed_field(h, kept) for h in args.heavy]
    for f, h in zip(heavy, args.heavy, strict=True):
        f.name = Path(h).stem
    c = Collection(data, kept, first.unit)
    topics = c.topics

    def ev(s: Scores) -> Evaluation:
        return c.evaluation(s, topics)

    base_scorer = fused_scorer(c, [first], "fusion", alpha=0.4, rank_constant=60, depth=100)
    base = ev(base_scorer)
    report: dict[str, object] = {
        "equations": len(kept),
        "topics": len(topics),
        "bm25": round(ev(c.bm25).means[NDCG], 4),
        "first fusion 0.4": round(base.means[NDCG], 4),
    }
    everything = [first, *heavy]
    for a in alphas:
        one = ev(fused_scorer(c, [first], "fusion", alpha=a, rank_constant=60, depth=100))
        report[f"first fusion {a:g}"] = [round(one.means[NDCG], 4), paired_difference(one, base)]
        full = ev(fused_scorer(c, everything, "fusion", alpha=a, rank_constant=60, depth=100))
        report[f"all fields fusion {a:g}"] = [
            round(full.means[NDCG], 4),
            paired_difference(full, base),
        ]
    groups = {"all": everything, "heavy only": heavy}
    for h in heavy:
        groups[h.name] = [h]
    for label, group in groups.items():
        for w in windows:
            for a in alphas:
                for lexical in ("bm25", "first"):
                    e = ev(reranker(c, base_scorer, group, window=w, alpha=a, lexical=lexical))
                    key = f"rerank {label} K{w} a{a:g} {lexical}"
                    report[key] = [round(e.means[NDCG], 4), paired_difference(e, base)]
                    logger.warning("%s %s", key, report[key])
    emit(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
