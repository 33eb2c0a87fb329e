"""Encoders side by side on the validation papers: kNN and fusion nDCG@10, paired against the first.

Usage::

    python -m research.compare_encoders NAME=MODEL.onnx [NAME=A.onnx+B.onnx ...] \\
        [--alphas 0.3,0.4,0.5,0.6] [--json]

    python -m research.compare_encoders v7=export/models/gcn-v7.onnx v8=export/models/gcn-v8.onnx

Each argument names an encoder: one ONNX model, or several joined by ``+``, whose unit vectors
are concatenated (each tower weighs the same: a quick stand-in for ``mathsearch train ensemble``,
which fits a projection instead). A bare path is its own name. The collection and topics are
those of ``research/fusion_prototypes.py``: the relevance set of ``mathsearch eval retrieval --task
same-document --validation`` (the default model's validation papers, 200 topics; never the
held-out papers), scored in memory with its NumPy BM25 and its fusion (min-max inside each top
100, ``(1 - alpha) bm25 + alpha knn``).

For each encoder it prints nDCG@10 of exact kNN and of the fusion at each alpha, over the same
topics, and for every encoder after the first the mean paired difference from the first with its 95%
interval (the two-tailed paired t-test of ``mathsearch.evaluation.paired_test``). The first line is
BM25 alone. docs/research/2026-12-06-gcn-training-record.md quotes its figures (the towers of the
later H200 leases).
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
from mathsearch.evaluation.paired_test import compare_per_topic
from mathsearch.runtime.gcn_session import GcnSession
from research.fusion_prototypes import Collection, Scores, fuse, validation_set

logger = logging.getLogger(__name__)

DEFAULT_ALPHAS = (0.3, 0.4, 0.5, 0.6)
NDCG = "nDCG@10"


def parse_encoder(spec: str) -> tuple[str, list[str]]:
    """``NAME=A.onnx+B.onnx`` (or a bare path list) as ``(name, [paths])``.

    Raises:
        ValueError: an empty name or path.
    """
    name, sep, paths = spec.partition("=")
    if not sep:
        name, paths = spec, spec
    parts = paths.split("+")
    if not name or not all(parts):
        raise ValueError(f"not NAME=MODEL.onnx[+MODEL.onnx...]: {spec!r}")
    return name, parts


def unit_concat(blocks: Sequence[np.ndarray]) -> np.ndarray:
    """Each block's rows L2-normalised, then the blocks side by side, ``(n, sum of dims)``."""
    return np.concatenate(
        [b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12) for b in blocks], axis=1
    )


def evaluations(collection: Collection, alphas: Sequence[float]) -> dict[str, Evaluation]:
    """nDCG@10 (per topic and mean) of kNN and of the fusion at each alpha."""

    def fused(alpha: float) -> Scores:
        return lambda i: fuse(collection.bm25(i), collection.cosine(i), alpha)

    scorers = {"knn": collection.cosine, **{f"fusion {a:g}": fused(a) for a in alphas}}
    return {name: collection.evaluation(s, collection.topics) for name, s in scorers.items()}


def compare(
    encoders: Sequence[tuple[str, list[str]]], alphas: Sequence[float]
) -> dict[str, object]:
    """BM25 and every encoder's means, with the paired t-test of each against the first."""
    data, kept = validation_set()
    graphs = [p.graph for p in kept]
    collection: Collection | None = None
    base: dict[str, Evaluation] | None = None
    report: dict[str, object] = {"equations": len(kept), "encoders": {}}
    for name, paths in encoders:
        vectors = unit_concat([GcnSession(path).encode(graphs) for path in paths])
        if collection is None:
            collection = Collection(data, kept, vectors)
            report["topics"] = len(collection.topics)
            report["bm25"] = round(collection.ndcg(collection.bm25, collection.topics), 4)
        else:
            collection = collection.with_vectors(vectors)
        scored = evaluations(collection, alphas)
        entry: dict[str, object] = {"models": paths}
        for metric, evaluation in scored.items():
            entry[metric] = round(evaluation.means[NDCG], 4)
            if base is not None:
                entry[f"{metric} diff"] = paired_difference(evaluation, base[metric])
        base = base if base is not None else scored
        report["encoders"][name] = entry  # type: ignore[index]
        logger.info("%s: %s", name, entry)
    return report


def paired_difference(evaluation: Evaluation, base: Evaluation) -> list[float]:
    """``[mean, low, high]`` of nDCG@10 minus ``base``'s over the same topics: the mean paired
    difference and its 95% interval (two-tailed paired t-test), rounded to 4 places."""
    test = compare_per_topic(evaluation.per_topic, base.per_topic, NDCG)
    return [round(v, 4) for v in (test.mean_difference, test.ci_low, test.ci_high)]


def render_cell(metric: str, value: float, diff: Sequence[float] | None = None) -> str:
    """``"metric 0.1234"``, with ``" (+0.0100 [+0.0010, +0.0190])"`` when there is a diff."""
    cell = f"{metric} {value:.4f}"
    if diff:
        cell += f" ({diff[0]:+.4f} [{diff[1]:+.4f}, {diff[2]:+.4f}])"
    return cell


def render(report: dict[str, object]) -> str:
    """The report as one line for BM25 and one per encoder."""
    lines = [
        f"bm25 {report['bm25']:.4f} ({report['topics']} topics, {report['equations']} equations)"
    ]
    for name, entry in report["encoders"].items():  # type: ignore[union-attr]
        cells = [name]
        for metric, value in entry.items():
            if metric == "models" or metric.endswith(" diff"):
                continue
            cells.append(render_cell(metric, value, entry.get(f"{metric} diff")))
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n", maxsplit=1)[0],
        epilog="example: python -m research.compare_encoders v7=export/models/gcn-v7.onnx "
        "v8=export/models/gcn-v8.onnx",
    )
    parser.add_argument(
        "encoders", nargs="+", help="NAME=MODEL.onnx[+MODEL.onnx...]; the first is the base"
    )
    parser.add_argument(
        "--alphas",
        default=",".join(f"{a:g}" for a in DEFAULT_ALPHAS),
        help="fusion weights of the vectors (default %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    try:
        alphas = [float(a) for a in args.alphas.split(",") if a.strip()]
        encoders = [parse_encoder(spec) for spec in args.encoders]
    except ValueError as exc:
        parser.error(str(exc))
    for path in (path for _, paths in encoders for path in paths):
        if not Path(path).is_file():
            parser.error(f"no such model: {path}")
    report = compare(encoders, alphas)
    emit(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
