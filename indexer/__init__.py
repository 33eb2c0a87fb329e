"""From source documents to featurised equations (no torch here), and the command line."""

from __future__ import annotations

from indexer.hepth import (
    HepthRecord,
    Rejected,
    bundled_sample_lines,
    equation_body,
    read_records,
)
from indexer.math_tokens import math_tokens

__all__ = [
    "HepthRecord",
    "Rejected",
    "bundled_sample_lines",
    "equation_body",
    "math_tokens",
    "read_records",
]
