"""The Celery queues: CPU-bound parsing, embedding (GPU or CPU), and everything else."""

from __future__ import annotations

PARSE = "parse"
EMBED = "embed"
DEFAULT = "default"
QUEUES: tuple[str, ...] = (PARSE, EMBED, DEFAULT)
