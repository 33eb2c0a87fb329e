"""Sub-formula crops as test-time augmentation of the graph CNN, prototyped on the validation
papers.

Usage::

    python -m research.query_crops_prototype [--onnx MODEL.onnx] [--crops 16] [--seed 0]
        [--weights 0.9,0.75,0.5,0.25] [--alpha 0.4] [--json]

The shipped towers were trained with sub-formula crops as positives (``train gcn --crop-rate``,
``encoders/subformula_crop.py``), so a crop of an equation lies near the equations of its paper.
Averaging a query's crops into its vector (test-time augmentation) could then stress the
sub-expressions it shares with the other equations of its paper. This script measures it:

* every equation gets ``--crops`` draws of :func:`mathsearch.encoders.subformula_crop.crop_tree`
  (the training's crop: a run of a row's children with their subtrees, 6 nodes at least, 90% of
  the graph at most; seeded), each embedded by the ONNX model like a whole equation;
* ``query``: the query vector is ``w q + (1 - w) mean(crops)`` (unit vectors; an equation
  without a crop keeps ``q``), the collection's vectors unchanged, for each ``w`` of
  ``--weights``: the cost is the crops' embedding at query time only;
* ``both``: the collection's vectors get the same mix, so the index would pay ``--crops`` more
  embeddings per equation;
* scored in memory on the relevance set of ``research/fusion_prototypes.py`` (the validation papers
  of ``eval retrieval --task same-document --validation``: 1,242 equations, 200 topics; never the
  held-out papers): exact kNN, and BM25 + kNN fused by ``rrf`` and ``fusion`` (min-max, alpha
  ``--alpha``) as ``research/fuse_encoders.py`` fuses them, each with its paired difference from
  the same fusion without crops and the 95% interval of the paired t-test.

docs/research/2026-12-06-tuning-record.md ("Beyond a linear fusion") has the figures. Nothing here
is used by the search path.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time
from collections.abc import Sequence

import numpy as np

from mathsearch.encoders.subformula_crop import container_tags, crop_tree
from mathsearch.evaluation.ir_metrics import Evaluation
from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.indexer.parse import Featuriser
from mathsearch.runtime.gcn_session import GcnSession
from mathsearch.runtime.settings import RuntimeSettings
from research.compare_encoders import NDCG, paired_difference, render_cell, unit_concat
from research.fuse_encoders import Field, fused_scorer
from research.fusion_prototypes import Collection, validation_set

logger = logging.getLogger(__name__)

METHODS = ("rrf", "fusion")


class QueryField(Field):
    """A field whose collection vectors are ``unit`` and whose query vectors are ``queries``."""

    def __init__(self, name: str, unit: np.ndarray, queries: np.ndarray) -> None:
        super().__init__(name, unit, np.ones(len(unit), dtype=bool))
        self.queries = unit_concat([queries])

    def scores(self, i: int) -> np.ndarray:
        out = self.unit @ self.queries[i]
        out[i] = -np.inf
        return out


def crops(
    graphs: Sequence[EquationGraph], per_graph: int, seed: int
) -> tuple[list[EquationGraph], np.ndarray]:
    """Up to ``per_graph`` crops of every graph, and the index of the graph each came from."""
    with Featuriser() as featuriser:
        containers = container_tags(featuriser.vocabulary)
    rng = np.random.default_rng(seed)
    out: list[EquationGraph] = []
    owner: list[int] = []
    for i, graph in enumerate(graphs):
        for _ in range(per_graph):
            crop = crop_tree(graph.parents, graph.tag_ids, graph.positions, containers, rng)
            if crop is None:
                continue
            nodes, parent, pos = crop
            out.append(
                dataclasses.replace(
                    graph,
                    tag_ids=graph.tag_ids[nodes],
                    attr_ids=graph.attr_ids[nodes],
                    char_ids=graph.char_ids[nodes],
                    positions=pos.astype(np.int32),
                    parents=parent.astype(np.int32),
                )
            )
            owner.append(i)
    return out, np.asarray(owner, dtype=np.int64)


def compare(
    onnx: str, per_graph: int, seed: int, weights: Sequence[float], alpha: float
) -> dict[str, object]:
    """kNN and the fusions without crops, then with the crops mixed in at each weight."""
    data, kept = validation_set()
    encoder = GcnSession(onnx)
    whole = unit_concat([encoder.encode([p.graph for p in kept]).astype(np.float64)])
    cropped, owner = crops([p.graph for p in kept], per_graph, seed)
    crop_sum = np.zeros_like(whole)
    np.add.at(crop_sum, owner, unit_concat([encoder.encode(cropped).astype(np.float64)]))
    count = np.bincount(owner, minlength=len(whole))[:, None]
    crop_mean = np.where(count > 0, crop_sum / np.maximum(count, 1), whole)
    plain = Field("plain", whole, np.ones(len(whole), dtype=bool))
    collection = Collection(data, kept, plain.unit)
    topics = collection.topics

    def fused(field: Field, method: str) -> Evaluation:
        scorer = fused_scorer(collection, [field], method, alpha=alpha, rank_constant=60, depth=100)
        return collection.evaluation(scorer, topics)

    base = {method: fused(plain, method) for method in METHODS}
    report: dict[str, object] = {
        "equations": len(kept),
        "topics": len(topics),
        "crops": len(cropped),
        "bm25": round(collection.ndcg(collection.bm25, topics), 4),
        "plain": {"knn": round(collection.ndcg(plain.scores, topics), 4)}
        | {method: round(e.means[NDCG], 4) for method, e in base.items()},
    }
    for side in ("query", "both"):
        for w in weights:
            mixed = w * whole + (1 - w) * crop_mean
            field = (
                QueryField(f"{side} w{w:g}", whole, mixed)
                if side == "query"
                else Field(f"{side} w{w:g}", mixed, np.ones(len(whole), dtype=bool))
            )
            entry: dict[str, object] = {"knn": round(collection.ndcg(field.scores, topics), 4)}
            for method in METHODS:
                evaluation = fused(field, method)
                entry[method] = round(evaluation.means[NDCG], 4)
                entry[f"{method} diff"] = paired_difference(evaluation, base[method])
            report[field.name] = entry
            logger.info("%s: %s", field.name, entry)
    return report


def render(report: dict[str, object]) -> str:
    lines = [
        f"bm25 {report['bm25']:.4f} ({report['topics']} topics, {report['equations']} "
        f"equations, {report['crops']} crops; {report.get('seconds', 0):g} s)"
    ]
    for name, entry in report.items():
        if not isinstance(entry, dict):
            continue
        cells = [f"{name} | knn {entry['knn']:.4f}"]
        cells += [render_cell(m, entry[m], entry.get(f"{m} diff")) for m in METHODS]
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--onnx", default=None, help="model (default: the shipped default)")
    parser.add_argument("--crops", type=int, default=16, help="crop draws per equation")
    parser.add_argument("--seed", type=int, default=0, help="seed of the crop draws")
    parser.add_argument("--weights", default="0.9,0.75,0.5,0.25", help="weights w of the whole")
    parser.add_argument("--alpha", type=float, default=0.4, help="fusion's vector weight")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    started = time.perf_counter()
    report = compare(
        args.onnx or str(RuntimeSettings.from_env().model),
        args.crops,
        args.seed,
        [float(w) for w in args.weights.split(",")],
        args.alpha,
    )
    report["seconds"] = round(time.perf_counter() - started, 1)
    sys.stdout.write((json.dumps(report, indent=2) if args.json else render(report)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
