"""torch -> ONNX export with parity checks, model cards, and the torch-free runtime."""

from __future__ import annotations

from export.providers import cuda_usable, select_providers

__all__ = ["cuda_usable", "select_providers"]
