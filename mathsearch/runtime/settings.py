"""Settings of the export runtime, read from ``MATHSEARCH_*`` environment variables.

================================  ================================================  =============
variable                          meaning                                           default
================================  ================================================  =============
MATHSEARCH_MODEL                  ONNX model the runtime loads (card beside it)     shipped gcn-v7
MATHSEARCH_EMBED_DEVICE           ``auto`` (CUDA when it really loads), cpu, cuda   auto
MATHSEARCH_EMBED_THREADS          ONNX Runtime intra-op threads; 0 = its default    0
MATHSEARCH_QUERY_THREADS          the same for the query encoder (one equation a    1
                                  call; 0 = ONNX Runtime's default)
MATHSEARCH_EMBED_MAX_GRAPHS       equations per ONNX Runtime call; 0 = by device:   0
                                  32 on the CPU, 1024 on CUDA
MATHSEARCH_EMBED_MAX_NODES        graph nodes per ONNX Runtime call                 262144
================================  ================================================  =============

A larger input is split into several calls; one equation larger than the node limit runs alone.

The CPU limit is small because a call's node states must stay in the cache: on a 2-core Xeon
with AMX, 2,048 hep-th equations embed 1.69x (gcn-v7) and 1.66x (gcn-v9) faster in calls of 16
or 32 equations than in calls of 1,024, and 1.13-1.17x faster than in the workers' batches of
128 (``mathsearch bench embed --onnx ... --batch-sizes 8,16,32,64,128,1024``, docs/export.md,
"Equations per call"). A GPU wants the large calls.

The query encoder (searches, ``mathsearch serve``) embeds one equation per call, which a second
intra-op thread does not speed up (0.37 / 0.40 ms p50 with ONNX Runtime's 2 threads / 1 on this
2-core machine), while that thread spins between calls: in ``serve``, a hybrid query cost the
server process 21.6 ms of CPU with it and 8.0 ms without (the node's CPU, which shares those
cores, 7.6 / 7.7 ms), hence its own setting with a default of 1.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from mathsearch.indexer.settings import SettingsError, env_int
from mathsearch.runtime.families import FAMILY_REGISTRY

__all__ = [
    "CPU_MAX_GRAPHS",
    "CUDA_MAX_GRAPHS",
    "DEFAULT_MODEL_PATH",
    "DEVICES",
    "MODELS_DIR",
    "RuntimeSettings",
    "SettingsError",
]


def _shipped_models() -> Path:
    """``export/models``, where the exporter writes the shipped models: ``mathsearch/export/models``
    in an installed wheel, the clone's top-level ``export/models`` in a checkout."""
    package = Path(__file__).resolve().parents[1]
    for folder in (package / "export" / "models", package.parent / "export" / "models"):
        if folder.is_dir():
            return folder
    return package / "export" / "models"


#: Where the shipped default models live (package data of ``mathsearch.export``).
MODELS_DIR = _shipped_models()
#: The default model shipped with the package (trained by the project, see its card).
DEFAULT_MODEL_PATH = MODELS_DIR / FAMILY_REGISTRY["gcn"].default_model
DEVICES = ("auto", "cpu", "cuda")
#: Equations per session call when ``max_graphs`` is 0 (the default), on the CPU and on CUDA.
CPU_MAX_GRAPHS = 32
CUDA_MAX_GRAPHS = 1024


@dataclass(frozen=True)
class RuntimeSettings:
    """Runtime settings (see the module docstring for the variables and defaults)."""

    model: Path = field(default=DEFAULT_MODEL_PATH)
    device: str = "auto"
    threads: int = 0
    query_threads: int = 1
    max_graphs: int = 0  # 0: CPU_MAX_GRAPHS or CUDA_MAX_GRAPHS, by the session's provider
    max_nodes: int = 262_144

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise SettingsError(f"device must be one of {DEVICES}, not {self.device!r}")
        if self.threads < 0 or self.query_threads < 0:
            raise SettingsError("threads and query_threads must be >= 0")
        if self.max_graphs < 0 or self.max_nodes < 1:
            raise SettingsError("max_graphs must be >= 0 and max_nodes >= 1")

    @classmethod
    def from_env(cls) -> RuntimeSettings:
        model = os.environ.get("MATHSEARCH_MODEL", "").strip()
        return cls(
            model=Path(model) if model else DEFAULT_MODEL_PATH,
            device=os.environ.get("MATHSEARCH_EMBED_DEVICE", "").strip().lower() or "auto",
            threads=env_int("MATHSEARCH_EMBED_THREADS", 0, 0),
            query_threads=env_int("MATHSEARCH_QUERY_THREADS", 1, 0),
            max_graphs=env_int("MATHSEARCH_EMBED_MAX_GRAPHS", 0, 0),
            max_nodes=env_int("MATHSEARCH_EMBED_MAX_NODES", 262_144, 1),
        )
