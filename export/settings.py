"""Settings of the export runtime, read from ``MATHSEARCH_*`` environment variables.

================================  ================================================  =============
variable                          meaning                                           default
================================  ================================================  =============
MATHSEARCH_MODEL                  ONNX model the runtime loads (card beside it)     shipped gcn-v5
MATHSEARCH_EMBED_DEVICE           ``auto`` (CUDA when it really loads), cpu, cuda   auto
MATHSEARCH_EMBED_THREADS          ONNX Runtime intra-op threads; 0 = its default    0
MATHSEARCH_EMBED_MAX_GRAPHS       equations per ONNX Runtime call                   1024
MATHSEARCH_EMBED_MAX_NODES        graph nodes per ONNX Runtime call                 262144
================================  ================================================  =============

A larger input is split into several calls; one equation larger than the node limit runs alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from mathsearch.indexer.settings import SettingsError, env_int

__all__ = ["DEFAULT_MODEL_PATH", "DEVICES", "ExportSettings", "SettingsError"]

#: The default model shipped with the package (trained by the project, see its card).
DEFAULT_MODEL_PATH = Path(__file__).resolve().parent / "models" / "gcn-v5.onnx"
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class ExportSettings:
    """Runtime settings (see the module docstring for the variables and defaults)."""

    model: Path = field(default=DEFAULT_MODEL_PATH)
    device: str = "auto"
    threads: int = 0
    max_graphs: int = 1024
    max_nodes: int = 262_144

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise SettingsError(f"device must be one of {DEVICES}, not {self.device!r}")
        if self.threads < 0 or self.max_graphs < 1 or self.max_nodes < 1:
            raise SettingsError("threads must be >= 0, max_graphs and max_nodes >= 1")

    @classmethod
    def from_env(cls) -> ExportSettings:
        model = os.environ.get("MATHSEARCH_MODEL", "").strip()
        return cls(
            model=Path(model) if model else DEFAULT_MODEL_PATH,
            device=os.environ.get("MATHSEARCH_EMBED_DEVICE", "").strip().lower() or "auto",
            threads=env_int("MATHSEARCH_EMBED_THREADS", 0, 0),
            max_graphs=env_int("MATHSEARCH_EMBED_MAX_GRAPHS", 1024, 1),
            max_nodes=env_int("MATHSEARCH_EMBED_MAX_NODES", 262_144, 1),
        )
