"""Benchmarks and fuzz harnesses: ``mathsearch bench ...`` (parse, train, embed, index, query,
serve, outage, fuzz, fuzz-api) and the fuzz inputs they share.

Room above the pipeline and the other rooms (see docs/architecture.md); names load on first use.
"""

from __future__ import annotations

from mathsearch.core.lazy import lazy_exports

_LAZY = {
    "bench_train": "mathsearch.encoders.bench_train",
    "bench_train_seq2seq": "mathsearch.encoders.bench_train_seq2seq",
}

__all__ = ["bench_train", "bench_train_seq2seq"]

__getattr__ = lazy_exports(__name__, _LAZY)
