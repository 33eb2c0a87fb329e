"""Embedding rate of a bitmap-CNN model file: rendering, the network, and both (no torch).

``mathsearch bench embed --onnx bitmap-vN.onnx`` times, on the same real equations (spread evenly
over the sources) and with the runtime that indexes them
(:class:`~mathsearch.runtime.bitmap_runtime.BitmapEmbedder`):

* *render*: LaTeX -> 531 x 106 image -> 333 x 32 centre crop, one equation at a time (the
  renderer is single-threaded; a worker process renders its own batch);
* *network*: ONNX Runtime over the rendered crops at every batch size (median of ``repeat``);
* *end to end*: the render time plus the network time at the largest batch size, what an
  indexing worker pays per equation.

Example::

    report = bench_bitmap_embed(Path("export/models/bitmap-v2.onnx"), latex, [1, 64, 256])
"""

from __future__ import annotations

import logging
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mathsearch.export.errors import ExportError
from mathsearch.indexer.extract import extract
from mathsearch.indexer.records import EquationRecord
from mathsearch.runtime.bitmap_runtime import BitmapEmbedder
from mathsearch.runtime.embedder_base import EmbedRefusal

logger = logging.getLogger(__name__)

__all__ = ["bench_bitmap_embed", "format_bitmap_embed", "sample_latex"]


def sample_latex(sources: Sequence[str], fmt: str | None, count: int) -> list[str]:
    """``count`` LaTeX strings spread evenly over the equation records of ``sources``.

    Raises:
        ExportError: the sources hold no equation.
    """
    records = [r for r in extract(list(sources), fmt) if isinstance(r, EquationRecord) and r.latex]
    if not records:
        raise ExportError(f"no equation in {', '.join(map(str, sources))}")
    picks = np.unique(np.linspace(0, len(records) - 1, min(count, len(records))).round())
    return [str(records[int(i)].latex) for i in picks]


def bench_bitmap_embed(
    model: Path,
    latex: Sequence[str],
    batch_sizes: Sequence[int],
    *,
    repeat: int = 3,
    threads: int | None = None,
    device: str | None = "cpu",
) -> dict[str, Any]:
    """Render, network and end-to-end rates of ``model`` on ``latex`` (see the module docstring).

    Raises:
        ExportError: no equation of ``latex`` renders.
    """
    embedder = BitmapEmbedder(model, device=device, threads=threads)
    tick = time.perf_counter()
    results = [embedder.crop(tex) for tex in latex]
    render_s = time.perf_counter() - tick
    crops = [c for c in results if isinstance(c, np.ndarray)]
    refused = Counter(r.reason for r in results if isinstance(r, EmbedRefusal))
    if not crops:
        raise ExportError(f"none of the {len(latex)} equations renders: {dict(refused)}")
    stack = np.stack(crops)
    network: dict[str, float] = {}
    seconds_at: dict[int, float] = {}
    for size in batch_sizes:
        embedder.batch_size = size
        embedder.encode_crops(stack[: min(size, len(stack))])  # warm-up
        timed = []
        for _ in range(repeat):
            tick = time.perf_counter()
            embedder.encode_crops(stack)
            timed.append(time.perf_counter() - tick)
        seconds_at[size] = statistics.median(timed)
        network[str(size)] = round(len(stack) / seconds_at[size], 1)
    largest = seconds_at[max(batch_sizes)]
    return {
        "model": str(model),
        "providers": embedder.providers,
        "equations": len(latex),
        "rendered": len(crops),
        "refused": dict(refused),
        "render_eq_per_s": round(len(latex) / render_s, 1),
        "network_eq_per_s": network,
        "end_to_end_eq_per_s": round(len(crops) / (render_s + largest), 1),
        "render_share": round(render_s / (render_s + largest), 3),
    }


def format_bitmap_embed(report: dict[str, Any]) -> str:
    """A few lines of :func:`bench_bitmap_embed`'s report."""
    network = ", ".join(f"batch {b}: {r:.0f}/s" for b, r in report["network_eq_per_s"].items())
    return "\n".join(
        [
            f"{Path(report['model']).name} on {report['equations']} equations "
            f"({report['rendered']} rendered, refused {report['refused'] or 'none'})",
            f"  render (LaTeX -> crop)  {report['render_eq_per_s']:.1f} eq/s",
            f"  network (ONNX Runtime)  {network}",
            f"  end to end              {report['end_to_end_eq_per_s']:.1f} eq/s "
            f"(rendering {100 * report['render_share']:.0f}% of the time)",
        ]
    )
