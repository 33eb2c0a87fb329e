"""The torch settings and checkpoint reads the command line asks for, kept here so that torch is
imported only under ``encoders/`` and ``export/`` (docs/architecture.md, rule 1): threads, seeds,
the device, availability, a checkpoint's family."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys

logger = logging.getLogger(__name__)

__all__ = [
    "checkpoint_family",
    "ensure_torch",
    "keep_large_allocations",
    "resolve_device",
    "seed",
    "set_threads",
]

#: glibc's ``mallopt`` parameter number of ``M_MMAP_THRESHOLD`` (malloc.h).
_M_MMAP_THRESHOLD = -3
#: Allocations below this come from the heap, which keeps freed pages for reuse.
LARGE_ALLOCATION_THRESHOLD = 1 << 30


def keep_large_allocations(threshold: int = LARGE_ALLOCATION_THRESHOLD) -> bool:
    """Serve allocations below ``threshold`` bytes from glibc's heap instead of fresh ``mmap``s.

    glibc maps every block above its mmap threshold (at most 32 MiB when it adapts it itself)
    anew and unmaps it when freed, so a training step whose activations are just above 32 MiB
    faults every page of them in again on each step: on this machine's CPU training with a
    BM25 negative per anchor (768 graphs a step) that was 3.3x slower, with 14x the page faults
    and more than 40% of the time in the kernel (docs/research/2026-12-06-gcn-training-record.md,
    "BM25-mined hard negatives"). The same as starting the process with
    ``MALLOC_MMAP_THRESHOLD_``. Returns whether it was applied (False off glibc).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        applied = bool(libc.mallopt(_M_MMAP_THRESHOLD, int(threshold)))
    except (OSError, AttributeError):
        return False
    logger.debug("mmap threshold %d bytes: %s", threshold, "set" if applied else "refused")
    return applied


def ensure_torch() -> None:
    """Import torch (``ImportError`` when the train extra is not installed)."""
    import torch  # noqa: F401


def set_threads(threads: int) -> None:
    """``torch.set_num_threads(max(1, threads))``."""
    import torch

    torch.set_num_threads(max(1, threads))


def seed(value: int) -> None:
    """``torch.manual_seed(value)``: the same untrained weights on every call."""
    import torch

    torch.manual_seed(value)


def resolve_device(name: str) -> str:
    """``auto`` (cuda if available, else cpu), ``cpu``, ``cuda``, ``cuda:N``.

    Raises:
        ValueError: an unknown device, or CUDA asked for where it is not available.
    """
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ValueError(f"unknown device {name!r}: {exc}") from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} asked for, but CUDA is not available")
    return str(device)


def checkpoint_family(path: str | os.PathLike[str]) -> str:
    """The top-level ``"family"`` of a checkpoint, ``gcn`` when it has none (the graph CNN's
    checkpoints predate the key)."""
    from mathsearch.encoders.checkpoints import read_checkpoint

    family = read_checkpoint(path, None).get("family")
    return str(family) if family else "gcn"
