"""Fragment queries: part of an equation as the query, the whole equation as the one answer.

Users often type a piece of a longer equation (the demo's ``\\sum_k \\phi_k(x) \\exp(iky/R)`` is
the right-hand side's first terms of a mode expansion). ``eval exact-knn --fragments`` measures
this: for every topic equation of the relevance set a fragment is cut from its MathML tree and
featurised as a MathML query (the same path as any query); the system ranks the whole
collection, and the topic's own equation is the only relevant answer.

A fragment (:func:`fragment_tree`) is a contiguous run of the children of a row: an element of
tag ``mrow`` or the ``math`` root with at least two children is drawn uniformly, then a run
length uniform in ``1..k`` and a start uniform; a draw is refused unless the run holds between
``min_elements`` and ``max_fraction`` of the equation's elements (up to ``tries`` draws). The run
is wrapped as ``<math><mrow>run</mrow></math>`` (``<math>run</math>`` for the root's children),
which is what the parser builds for the same LaTeX typed alone.

Scores per topic (the source's rank ``r`` among all collection equations by cosine):
``RR@10 = 1 / r`` for ``r <= 10`` else 0, and ``S@1 = [r = 1]``; means with the Hoeffding
half-width of the other retrieval tables (:func:`~mathsearch.evaluation.ir_metrics.hoeffding_width`,
both measures lie in [0, 1]).

Training crops of ``train gcn --crop-rate`` (:mod:`mathsearch.encoders.subformula_crop`) come from
the same family of cuts, so this score is in-distribution for such models; the demo's typed
queries are the out-of-family check.

Example::

    fragment = fragment_tree(parsed.tree, np.random.default_rng(0))
    scores = fragment_scores(query_vectors, collection_vectors, sources)
"""

from __future__ import annotations

import logging

import numpy as np

from mathsearch.evaluation.ir_metrics import hoeffding_width
from mathsearch.indexer.mathml_tree import MathNode

logger = logging.getLogger(__name__)

__all__ = ["ROW_TAGS", "fragment_scores", "fragment_tree", "summarise_fragments"]

#: Elements whose children runs make fragments.
ROW_TAGS = ("mrow", "math")


def fragment_tree(
    tree: MathNode,
    rng: np.random.Generator,
    *,
    min_elements: int = 3,
    max_fraction: float = 0.7,
    tries: int = 16,
) -> MathNode | None:
    """A fragment of ``tree`` (see the module docstring), or ``None`` when no draw is accepted.

    Args:
        tree: the equation's MathML tree (root ``math``).
        rng: the generator every draw comes from.
        min_elements: fewest elements the run holds.
        max_fraction: most of the tree's elements the run holds.
        tries: draws before giving up.
    """
    rows = [node for node in tree.iter() if node.tag in ROW_TAGS and len(node.children) >= 2]
    if not rows:
        return None
    total = tree.size()
    for _ in range(tries):
        row = rows[int(rng.integers(len(rows)))]
        k = len(row.children)
        length = int(rng.integers(1, k + 1))
        first = int(rng.integers(0, k - length + 1))
        run = row.children[first : first + length]
        size = sum(child.size() for child in run)
        if min_elements <= size <= max_fraction * total:
            if row.tag == "math":
                return MathNode("math", children=list(run))
            return MathNode("math", children=[MathNode("mrow", children=list(run))])
    return None


def fragment_scores(
    queries: np.ndarray, collection: np.ndarray, sources: np.ndarray, depth: int = 10
) -> dict[str, np.ndarray]:
    """Per-query ``rank`` of the source, ``RR@depth`` and ``S@1`` by cosine.

    Args:
        queries: ``(Q, d)`` the fragments' vectors.
        collection: ``(N, d)`` the collection's vectors.
        sources: ``(Q,)`` the row of each fragment's own equation in ``collection``.
        depth: the cut-off of the reciprocal rank.
    """

    def unit(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32)
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        return x / np.maximum(norms, 1e-12)

    scores = unit(queries) @ unit(collection).T
    own = scores[np.arange(len(sources)), sources]
    rank = 1 + (scores > own[:, None]).sum(axis=1)  # ties go to the source
    rr = np.where(rank <= depth, 1.0 / rank, 0.0)
    return {"rank": rank, f"RR@{depth}": rr, "S@1": (rank == 1).astype(np.float64)}


def summarise_fragments(per_query: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, object]:
    """Means and Hoeffding half-widths of the ``RR@*`` and ``S@1`` columns over ``rows``."""
    out: dict[str, object] = {"queries": int(rows.size)}
    means, widths = {}, {}
    width = round(hoeffding_width(rows.size), 4) if rows.size else None
    for name, column in per_query.items():
        if name == "rank":
            continue
        values = column[rows]
        means[name] = round(float(values.mean()), 4) if values.size else 0.0
        widths[name] = width
    out["means"], out["confidence"] = means, widths
    return out
