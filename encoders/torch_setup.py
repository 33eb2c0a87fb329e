"""The torch settings and checkpoint reads the command line asks for, kept here so that torch
is imported only under ``encoders/`` and ``export/`` (DESIGN.md rule 1): threads, seeds, the
device, availability, a checkpoint's family."""

from __future__ import annotations

import os

__all__ = ["checkpoint_family", "ensure_torch", "resolve_device", "seed", "set_threads"]


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
    import torch

    data = torch.load(path, map_location="cpu", weights_only=True)
    family = data.get("family") if isinstance(data, dict) else None
    return str(family) if family else "gcn"
