"""Encoders side by side on the validation papers: kNN and fusion nDCG@10, paired against the first.

Usage::

    python bench/compare_encoders.py NAME=MODEL.onnx [NAME=A.onnx+B.onnx ...] \\
        [--alphas 0.3,0.4,0.5,0.6] [--json]

    python bench/compare_encoders.py v7=export/models/gcn-v7.onnx v8=export/models/gcn-v8.onnx

Each argument names an encoder: one ONNX model, or several joined by ``+``, whose unit vectors
are concatenated (each tower weighs the same: a quick stand-in for ``mathsearch train ensemble``,
which fits a projection instead). A bare path is its own name. The collection and topics are
those of ``bench/fusion_prototypes.py``: the relevance set of ``mathsearch eval retrieval --task
same-document --validation`` (the default model's validation papers, 200 topics; never the
held-out papers), scored in memory with its NumPy BM25 and its fusion (min-max inside each top
100, ``(1 - alpha) bm25 + alpha knn``).

For each encoder it prints nDCG@10 of exact kNN and of the fusion at each alpha, over the same
topics, and for every encoder after the first the paired difference from the first with its 95%
width (``1.96 * sd / sqrt(topics)`` of the per-topic differences). The first line is BM25 alone.
docs/encoders.md quotes its figures (the towers of the later H200 leases).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fusion_prototypes import Collection, fuse, validation_set

from mathsearch.export.runtime import Encoder

logger = logging.getLogger(__name__)

DEFAULT_ALPHAS = (0.3, 0.4, 0.5, 0.6)


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


def paired(diff: np.ndarray) -> tuple[float, float]:
    """Mean of per-topic differences and its 95% half-width (normal approximation)."""
    if len(diff) < 2:
        return float(diff.mean()) if len(diff) else 0.0, math.nan
    return float(diff.mean()), float(1.96 * diff.std(ddof=1) / math.sqrt(len(diff)))


def per_topic(collection: Collection, alphas: Sequence[float]) -> dict[str, np.ndarray]:
    """nDCG@10 of every topic by kNN and by the fusion at each alpha."""
    rows = {"knn": [], **{f"fusion {a:g}": [] for a in alphas}}
    for topic in collection.topics:
        i = collection.row[topic.qid]
        bm25, knn = collection.bm25(i), collection.cosine(i)
        rows["knn"].append(collection.topic_ndcg(topic, knn))
        for a in alphas:
            rows[f"fusion {a:g}"].append(collection.topic_ndcg(topic, fuse(bm25, knn, a)))
    return {name: np.array(values) for name, values in rows.items()}


def compare(specs: Sequence[str], alphas: Sequence[float]) -> dict[str, object]:
    """BM25 and every encoder's per-metric means, with the paired differences from the first."""
    data, kept = validation_set()
    graphs = [p.graph for p in kept]
    report: dict[str, object] = {"equations": len(kept), "encoders": {}}
    base: dict[str, np.ndarray] | None = None
    for spec in specs:
        name, paths = parse_encoder(spec)
        vectors = unit_concat([Encoder(path).encode(graphs) for path in paths])
        collection = Collection(data, kept, vectors)
        if base is None:
            report["topics"] = len(collection.topics)
            bm25 = [
                collection.topic_ndcg(t, collection.bm25(collection.row[t.qid]))
                for t in collection.topics
            ]
            report["bm25"] = round(float(np.mean(bm25)), 4)
        values = per_topic(collection, alphas)
        entry: dict[str, object] = {"models": paths}
        for metric, v in values.items():
            entry[metric] = round(float(v.mean()), 4)
            if base is not None:
                mean, width = paired(v - base[metric])
                entry[f"{metric} diff"] = [
                    round(mean, 4),
                    round(mean - width, 4),
                    round(mean + width, 4),
                ]
        base = base if base is not None else values
        report["encoders"][name] = entry  # type: ignore[index]
        logger.info("%s: %s", name, entry)
    return report


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
            cell = f"{metric} {value:.4f}"
            diff = entry.get(f"{metric} diff")
            if diff:
                cell += f" ({diff[0]:+.4f} [{diff[1]:+.4f}, {diff[2]:+.4f}])"
            cells.append(cell)
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n", maxsplit=1)[0],
        epilog="example: python bench/compare_encoders.py v7=export/models/gcn-v7.onnx "
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
        for spec in args.encoders:
            parse_encoder(spec)
    except ValueError as exc:
        parser.error(str(exc))
    for spec in args.encoders:
        for path in parse_encoder(spec)[1]:
            if not Path(path).is_file():
                parser.error(f"no such model: {path}")
    report = compare(args.encoders, alphas)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
