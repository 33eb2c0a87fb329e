"""Benchmarks and fuzz harnesses: ``mathsearch bench ...`` (parse, train, embed, index, query,
serve, outage, fuzz, fuzz-api) and the fuzz inputs they share.

Room above the pipeline and the other rooms (see docs/architecture.md); names load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "bench_train": "mathsearch.bench.train_gcn",
    "bench_train_seq2seq": "mathsearch.bench.train_seq2seq",
}

__all__ = ["bench_train", "bench_train_seq2seq"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
