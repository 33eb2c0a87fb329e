"""Parity of an exported model: ONNX Runtime against PyTorch eval mode on real equations.

For every equation the PyTorch path (:func:`mathsearch.encoders.graph_data.collate` +
:meth:`GraphCNN.forward`, eval mode, running statistics) and the ONNX path
(:func:`mathsearch.runtime.graph_batch.pack_graphs` + an ONNX Runtime CPU session) embed the same
graphs in
batches of ``batch_size`` (the last one smaller, so dynamic shapes are exercised); the check
passes when ``max |torch - onnx| <= tolerance`` over all coordinates of all equations.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from mathsearch.encoders.gcn import GraphCNN
from mathsearch.encoders.gcn_ensemble import GCNEnsemble
from mathsearch.encoders.graph_data import collate
from mathsearch.export.errors import ParityError
from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.runtime.gcn_session import open_session
from mathsearch.runtime.graph_batch import pack_graphs

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_TOLERANCE", "ParityReport", "check_parity"]

DEFAULT_TOLERANCE = 1e-4


@dataclass(frozen=True)
class ParityReport:
    """How far ONNX Runtime's embeddings are from PyTorch's."""

    equations: int
    batches: int
    max_abs_diff: float
    mean_abs_diff: float
    tolerance: float
    provider: str

    @property
    def passed(self) -> bool:
        return self.max_abs_diff <= self.tolerance

    def to_dict(self) -> dict[str, float | int | str | bool]:
        return {**asdict(self), "passed": self.passed}


def check_parity(
    model: GraphCNN | GCNEnsemble,
    onnx_path: str | os.PathLike[str],
    graphs: Sequence[EquationGraph],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    batch_size: int = 256,
    raise_on_failure: bool = True,
) -> ParityReport:
    """Compare ONNX Runtime (CPU) with PyTorch eval mode (``model``: a graph CNN or an ensemble
    of them) on ``graphs``.

    Raises:
        ParityError: with ``raise_on_failure``, when the maximum difference exceeds
            ``tolerance`` (the message names the worst equation).
    """
    if not graphs:
        raise ParityError("the parity check needs at least one equation")
    session = open_session(onnx_path, device="cpu")
    output = session.get_outputs()[0].name
    model = model.cpu().eval()
    worst, worst_index, total, batches = 0.0, -1, 0.0, 0
    with torch.no_grad():
        for start in range(0, len(graphs), batch_size):
            chunk = graphs[start : start + batch_size]
            expected = model(collate(chunk)).numpy().astype(np.float64)
            (got,) = session.run([output], pack_graphs(chunk).feeds())
            diff = np.abs(np.asarray(got, dtype=np.float64) - expected)
            row_max = diff.max(axis=1)
            if row_max.max() > worst:
                worst, worst_index = float(row_max.max()), start + int(row_max.argmax())
            total += float(diff.sum())
            batches += 1
    dim = model.config.out_dim
    report = ParityReport(
        equations=len(graphs),
        batches=batches,
        max_abs_diff=worst,
        mean_abs_diff=total / (len(graphs) * dim),
        tolerance=tolerance,
        provider="CPUExecutionProvider",
    )
    logger.info(
        "parity on %d equations: max |diff| %.3g, mean %.3g (tolerance %g)",
        report.equations,
        report.max_abs_diff,
        report.mean_abs_diff,
        tolerance,
    )
    if raise_on_failure and not report.passed:
        raise ParityError(
            f"ONNX Runtime differs from PyTorch by {worst:.3g} > {tolerance:g} "
            f"(worst: equation {worst_index} of {len(graphs)})"
        )
    return report
