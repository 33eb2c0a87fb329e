"""Which encoders to fuse: BM25 + one kNN list per encoder on the validation papers, nDCG@10.

Usage::

    python -m research.fuse_encoders ENCODER [ENCODER ...] [--alpha 0.4] [--rank-constant 60]
        [--json]

    python -m research.fuse_encoders gcn export/models/gcn-v8.onnx bitmap

Each encoder is a family (its default model) or an ``.onnx`` path, as ``mathsearch search
--encoders`` takes them; each embeds the equations through its own runtime
(``workers.embedding.embed_parsed``: the vectors the workers write) into its own list, as
several vector fields are searched in one hybrid query. The collection and topics are those of
``research/fusion_prototypes.py``: the relevance set of ``mathsearch eval retrieval --task
same-document --validation`` (the default model's validation papers, 200 topics; never the
held-out papers), with its NumPy BM25 over the same math tokens.

Each list holds the top ``--depth`` (100) of its field; an equation an encoder refuses is in no
list of that field, and a query it refuses has no list there (as in the index). The lists are
fused by the client-side fusion that is golden-tested equal to the node's
(``mathsearch.opensearch.fusion``): ``rrf`` (reciprocal ranks, ``--rank-constant``) and
``fusion`` (min-max, arithmetic mean, weights ``[1 - alpha, alpha / n, ...]``, the defaults of
``mathsearch search --encoders`` without ``--weights``). It prints BM25 alone, each encoder's
exact kNN, then BM25 fused with the first encoder, with the first and each other one, and with
all of them; every fused row after the first with its mean paired difference from BM25 + the
first encoder and the 95% interval of the paired t-test (``mathsearch.evaluation.paired_test``).
docs/encoders.md ("Which encoders to fuse") quotes its figures.
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
from mathsearch.indexer.parse import ParsedEquation
from mathsearch.opensearch.explain import subquery_weights
from mathsearch.opensearch.fusion import FusedHit, fuse, rrf
from mathsearch.opensearch.search_request import SearchRequest
from mathsearch.runtime.embedder_base import EmbedRefusal
from mathsearch.runtime.embedders import load_embedder, parse_encoders
from mathsearch.runtime.errors import ModelCardError
from mathsearch.workers.embedding import embed_parsed
from research.compare_encoders import NDCG, paired_difference, render_cell, unit_concat
from research.fusion_prototypes import Collection, Scores, validation_set

logger = logging.getLogger(__name__)


class Field:
    """One encoder's unit vectors over the collection and which equations it refused."""

    def __init__(self, name: str, vectors: np.ndarray, embedded: np.ndarray) -> None:
        self.name = name
        self.unit = unit_concat([vectors.astype(np.float64)])
        #: True where the encoder gave a vector
        self.embedded = embedded

    def scores(self, i: int) -> np.ndarray:
        """Cosine of every equation to equation ``i`` (-inf: itself, or no vector)."""
        if not self.embedded[i]:
            return np.full(len(self.unit), -np.inf)
        out = self.unit @ self.unit[i]
        out[~self.embedded] = -np.inf
        out[i] = -np.inf
        return out


def embed_field(name: str, parsed: Sequence[ParsedEquation]) -> Field:
    """``name``'s vector of every equation as the workers write it (zeros and ``embedded``
    False where it refused)."""
    embedder = load_embedder(name)
    vectors = np.zeros((len(parsed), embedder.dim))
    embedded = np.zeros(len(parsed), dtype=bool)
    for n, result in enumerate(embed_parsed(embedder, parsed)):
        if not isinstance(result, EmbedRefusal):
            vectors[n], embedded[n] = result, True
    return Field(embedder.card.name, vectors, embedded)


def ranked(ids: Sequence[str], scores: np.ndarray, depth: int) -> list[tuple[str, float]]:
    """The top ``depth`` finite scores as ``[(eq_id, score), ...]``, best first."""
    top = [j for j in np.argsort(-scores, kind="stable")[:depth] if np.isfinite(scores[j])]
    return [(ids[j], float(scores[j])) for j in top]


def as_scores(row: dict[str, int], hits: Sequence[FusedHit]) -> np.ndarray:
    """A fused list as one score per equation (-inf outside it)."""
    out = np.full(len(row), -np.inf)
    for hit in hits:
        out[row[hit.doc_id]] = hit.score
    return out


def fused_scorer(
    collection: Collection,
    fields: Sequence[Field],
    method: str,
    *,
    alpha: float,
    rank_constant: int,
    depth: int,
) -> Scores:
    """BM25 + ``fields``' kNN lists fused by ``method`` (``rrf`` or ``fusion``) per query."""

    def score(i: int) -> np.ndarray:
        lists = [ranked(collection.ids, collection.bm25(i), depth)]
        lists += [ranked(collection.ids, f.scores(i), depth) for f in fields]
        lists = [lst for lst in lists if lst] or [[]]
        if method == "rrf":
            hits = rrf(lists, rank_constant=rank_constant)
        elif len(lists) == 1:
            hits = fuse(lists)
        else:  # the weights of `search --encoders` without --weights
            weights = subquery_weights(SearchRequest("x", alpha=alpha), len(lists) - 1)
            hits = fuse(lists, weights=weights)
        return as_scores(collection.row, hits)

    return score


def systems(fields: Sequence[Field]) -> list[list[Field]]:
    """The fused systems: the first field, the first with each other, all (when > 2)."""
    out = [[fields[0]]] + [[fields[0], other] for other in fields[1:]]
    if len(fields) > 2:
        out.append(list(fields))
    return out


def compare(
    encoders: Sequence[str],
    alpha: float,
    rank_constant: int,
    depth: int = 100,
    *,
    held_out: bool = False,
) -> dict[str, object]:
    """BM25, each encoder's kNN and the fused systems, paired against BM25 + the first
    (``held_out``: on the held-out papers, not the validation papers)."""
    data, kept = validation_set(held_out=held_out)
    fields = [embed_field(name, kept) for name in encoders]
    names = [f.name for f in fields]
    for f, name in zip(fields, encoders, strict=True):
        if names.count(f.name) > 1:  # two models whose cards share a name: their file names
            f.name = Path(name).stem
    collection = Collection(data, kept, fields[0].unit)
    topics = collection.topics
    report: dict[str, object] = {
        "equations": len(kept),
        "topics": len(topics),
        "alpha": alpha,
        "rank_constant": rank_constant,
        "bm25": round(collection.ndcg(collection.bm25, topics), 4),
        "knn": {},
        "refused": {f.name: int((~f.embedded).sum()) for f in fields},
        "fused": {},
    }
    for f in fields:
        report["knn"][f.name] = round(collection.ndcg(f.scores, topics), 4)  # type: ignore[index]
    base: dict[str, Evaluation] = {}
    for group in systems(fields):
        label = "bm25 + " + " + ".join(f.name for f in group)
        entry: dict[str, object] = {}
        for method in ("rrf", "fusion"):
            scorer = fused_scorer(
                collection, group, method, alpha=alpha, rank_constant=rank_constant, depth=depth
            )
            evaluation = collection.evaluation(scorer, topics)
            entry[method] = round(evaluation.means[NDCG], 4)
            if method in base:
                entry[f"{method} diff"] = paired_difference(evaluation, base[method])
            else:
                base[method] = evaluation
        report["fused"][label] = entry  # type: ignore[index]
        logger.info("%s: %s", label, entry)
    return report


def render(report: dict[str, object]) -> str:
    """The report as lines: BM25, the kNN rows, then one line per fused system."""
    lines = [
        f"bm25 {report['bm25']:.4f} ({report['topics']} topics, {report['equations']} "
        f"equations; fusion alpha {report['alpha']:g}, rrf rank constant {report['rank_constant']})"
    ]
    for name, value in report["knn"].items():  # type: ignore[union-attr]
        refused = report["refused"][name]  # type: ignore[index]
        lines.append(f"knn {name} {value:.4f}" + (f" ({refused} refused)" if refused else ""))
    for label, entry in report["fused"].items():  # type: ignore[union-attr]
        cells = [label]
        for method in ("rrf", "fusion"):
            cells.append(render_cell(method, entry[method], entry.get(f"{method} diff")))
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n", maxsplit=1)[0],
        epilog="example: python -m research.fuse_encoders gcn export/models/gcn-v8.onnx bitmap "
        "[--held-out]",
    )
    parser.add_argument(
        "encoders", nargs="+", help="families or .onnx paths; the first is fused in every row"
    )
    parser.add_argument(
        "--alpha", type=float, default=0.4, help="the vectors' share in fusion (default 0.4)"
    )
    parser.add_argument("--rank-constant", type=int, default=60, help="RRF constant (default 60)")
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="the held-out papers instead of the validation papers (measure, never tune)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if not 0.0 <= args.alpha <= 1.0:
        parser.error(f"--alpha must lie in [0, 1], not {args.alpha}")
    try:
        encoders = parse_encoders(args.encoders)
        report = compare(encoders, args.alpha, args.rank_constant, held_out=args.held_out)
    except ModelCardError as exc:
        parser.error(str(exc))
    emit(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
