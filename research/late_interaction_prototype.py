"""Late interaction on the graph CNN's node vectors, prototyped on the validation papers.

Usage::

    python -m research.late_interaction_prototype [--onnx MODEL.onnx] [--json]

The shipped encoder mean-pools its node vectors, so the cosine of two equations is (up to the
normalisation) the mean similarity of *all* node pairs. MaxSim, the late interaction of ColBERT
(Khattab and Zaharia, SIGIR 2020), matches each query node with its best candidate node instead,
which could reward a shared sub-expression that the mean washes out. This script measures it
zero-shot, with the towers as trained:

* each tower's node vectors are read from the ONNX graph itself (its last per-node ``MatMul``,
  the projection that the export applies before the mean pooling: ``/towers.K/MatMul`` in an
  ensemble such as gcn-v7), each row L2-normalised;
* ``maxsim``: ``mean_{i in q} max_{j in c} <q_i, c_j>``, averaged over the towers;
  ``maxsim sym``: the mean of that and the same with ``q`` and ``c`` swapped;
* scored in memory on the relevance set of ``research/fusion_prototypes.py`` (the validation papers
  of ``eval retrieval --task same-document --validation``: 1,242 equations, 200 topics; never the
  held-out papers), alone, fused with the NumPy BM25 instead of the pooled cosine, and as a third
  list beside BM25 and the pooled cosine.

docs/research/2026-12-06-tuning-record.md ("Beyond a linear fusion") has the figures. Nothing here
is used by the search path: the index holds one vector per equation and field.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Sequence

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from mathsearch.indexer.parse import ParsedEquation
from mathsearch.runtime.gcn_session import GcnSession
from mathsearch.runtime.graph_batch import pack_graphs
from research.fusion_prototypes import (
    Collection,
    fuse,
    min_max_top,
    model_arguments,
    validation_set,
)

logger = logging.getLogger(__name__)

#: The per-node projection of each tower (an ensemble) or of the one network.
NODE_MATMUL = re.compile(r"^(/towers\.\d+)?/MatMul$")
BATCH = 64


def node_model(path: str) -> tuple[bytes, list[str]]:
    """The model at ``path`` with each tower's per-node vectors as extra outputs."""
    model = onnx.load(path)
    names = [n.output[0] for n in model.graph.node if NODE_MATMUL.match(n.name)]
    if len(names) > 1:  # an ensemble: the towers' node projections, not the joint projection
        names = [name for name in names if name.startswith("/towers.")]
    if not names:
        raise SystemExit(f"{path}: no per-node MatMul named like /towers.K/MatMul")
    for name in names:
        model.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    return model.SerializeToString(), names


class NodeVectors:
    """Every equation's unit node vectors per tower, stacked, with each equation's first row."""

    def __init__(self, path: str, encoder: GcnSession, parsed: Sequence[ParsedEquation]) -> None:
        blob, names = node_model(path)
        session = ort.InferenceSession(blob, providers=["CPUExecutionProvider"])
        per_tower: list[list[np.ndarray]] = [[] for _ in names]
        for start in range(0, len(parsed), BATCH):
            graphs = [p.graph for p in parsed[start : start + BATCH]]
            feeds = pack_graphs(graphs, encoder.card.vocab_hash, encoder.card.vocab_sizes).feeds()
            ptr = feeds["ptr"]
            for tower, out in enumerate(session.run(names, feeds)):
                for g in range(len(graphs)):
                    rows = np.asarray(out[ptr[g] : ptr[g + 1]], dtype=np.float32)
                    norms = np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
                    per_tower[tower].append(rows / norms)
        self.per_tower = per_tower
        self.stacks = [np.concatenate(eqs) for eqs in per_tower]
        counts = np.array([len(x) for x in per_tower[0]])
        self.starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.counts = counts
        self.towers = len(names)

    def maxsim(self, i: int, symmetric: bool = False) -> np.ndarray:
        """MaxSim of equation ``i`` against every equation (itself excluded), tower mean."""
        total = np.zeros(len(self.counts))
        for tower, stack in enumerate(self.stacks):
            sims = self.per_tower[tower][i] @ stack.T  # query nodes x every node
            score = np.maximum.reduceat(sims, self.starts, axis=1).mean(0)
            if symmetric:
                back = np.add.reduceat(sims.max(0), self.starts) / self.counts
                score = 0.5 * (score + back)
            total += score
        total /= self.towers
        total[i] = -np.inf
        return total


def load(onnx_path: str) -> tuple[Collection, NodeVectors]:
    data, kept = validation_set()
    encoder = GcnSession(onnx_path)
    collection = Collection(data, kept, encoder.encode([p.graph for p in kept]))
    return collection, NodeVectors(onnx_path, encoder, kept)


def scores(c: Collection, nodes: NodeVectors) -> dict[str, float]:
    cache: dict[tuple[int, bool], np.ndarray] = {}

    def ms(i: int, symmetric: bool) -> np.ndarray:
        if (i, symmetric) not in cache:
            cache[(i, symmetric)] = nodes.maxsim(i, symmetric)
        return cache[(i, symmetric)]

    out = {"bm25": c.ndcg(c.bm25), "knn (pooled cosine)": c.ndcg(c.cosine)}
    for alpha in (0.4, 0.5):
        out[f"fusion bm25 + knn a{alpha}"] = c.ndcg(
            lambda i, a=alpha: fuse(c.bm25(i), c.cosine(i), a)
        )
    for symmetric in (False, True):
        tag = "maxsim sym" if symmetric else "maxsim"
        out[tag] = c.ndcg(lambda i, s=symmetric: ms(i, s))
        for alpha in (0.4, 0.5):
            out[f"fusion bm25 + {tag} a{alpha}"] = c.ndcg(
                lambda i, a=alpha, s=symmetric: fuse(c.bm25(i), ms(i, s), a)
            )
        for weight in (0.1, 0.2, 0.3):
            out[f"bm25 0.5 + knn {0.5 - weight:.1f} + {tag} {weight}"] = c.ndcg(
                lambda i, w=weight, s=symmetric: (
                    0.5 * min_max_top(c.bm25(i))
                    + (0.5 - w) * min_max_top(c.cosine(i))
                    + w * min_max_top(ms(i, s))
                )
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = model_arguments(__doc__, argv)
    started = time.perf_counter()
    c, nodes = load(args.onnx)
    out = scores(c, nodes)
    out["seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        for name, value in out.items():
            sys.stdout.write(f"{name:45s} {value:.4f}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
