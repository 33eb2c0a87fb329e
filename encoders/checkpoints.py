"""Training checkpoints of the graph CNN: what :mod:`mathsearch.encoders.training` saves and resumes
from.

A checkpoint is one ``torch.save`` file of plain containers and tensors (loadable with
``weights_only=True``)::

    {
      "format": "mathsearch-gcn-checkpoint/1",
      "step": 1200,                      # optimiser steps done
      "total_steps": 4000,               # length of the linear learning-rate schedule
      "vocab_hash": "2f5a1e89...",       # the vocabulary the graphs were built with
      "model_config": {...},             # GCNConfig.to_dict()
      "train_config": {...},             # TrainConfig.to_dict()
      "model": state_dict, "heads": state_dict | None,
      "optimizer": state_dict, "scheduler": state_dict,
      "rng": {"torch": ByteTensor, "cuda": [ByteTensor, ...]},
      "history": {"evaluations": [...], "epochs": [...]},
    }

The sampler, the augmentation and the masks draw from generators seeded with
``(seed, step)``, so restoring the step restores them; the torch states are kept for anything
else. :func:`load_model` gives the trained :class:`~mathsearch.encoders.gcn.GraphCNN` (eval mode)
for export
and evaluation.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from mathsearch.encoders.gcn import GCNConfig, GraphCNN

logger = logging.getLogger(__name__)

__all__ = [
    "CHECKPOINT_FORMAT",
    "CheckpointError",
    "check_compatible",
    "load_checkpoint",
    "load_model",
    "load_runs",
    "model_from_record",
    "read_checkpoint",
    "rng_states",
    "run_dir",
    "runs_report",
    "save_checkpoint",
    "set_rng_states",
]

CHECKPOINT_FORMAT = "mathsearch-gcn-checkpoint/1"
#: Sub-folder of a run's ``--out`` folder that keeps the numbered checkpoints.
CHECKPOINTS = "checkpoints"


class CheckpointError(ValueError):
    """A checkpoint is unreadable, of another format, or does not fit the run."""


def rng_states() -> dict[str, Any]:
    """The torch CPU (and CUDA, when available) generator states."""
    states: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict[str, Any]) -> None:
    if "torch" in states:
        torch.set_rng_state(states["torch"].cpu())
    if states.get("cuda") and torch.cuda.is_available():
        cuda = [s.cpu() for s in states["cuda"]]
        if len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)


def save_checkpoint(path: str | os.PathLike[str], payload: dict[str, Any]) -> Path:
    """Write ``payload`` (see the module docstring) atomically to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"format": CHECKPOINT_FORMAT, **payload}, tmp)
    tmp.replace(path)
    return path


def read_checkpoint(
    path: str | os.PathLike[str],
    fmt: str | None,
    *,
    map_location: str | torch.device = "cpu",
) -> dict[str, Any]:
    """Read any family's checkpoint: the one loader of every ``torch.load`` of the encoders.

    Args:
        path: the ``.pt`` file.
        fmt: the ``"format"`` entry it must carry (``mathsearch-gcn-checkpoint/1``,
            ``mathsearch-bitmap-checkpoint/1``, ...); None accepts any dict.
        map_location: where the tensors go (default the CPU).

    Raises:
        CheckpointError: missing or unreadable file, or another format.
    """
    try:
        data = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch.load fails in many ways (pickle, zip, struct, OS)
        raise CheckpointError(f"cannot read the checkpoint {path}: {exc}") from exc
    if not isinstance(data, dict) or (fmt is not None and data.get("format") != fmt):
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise CheckpointError(f"{path} is not a {fmt} file (found {found!r})")
    return data


def load_checkpoint(
    path: str | os.PathLike[str], map_location: str | torch.device = "cpu"
) -> dict[str, Any]:
    """Read a graph-CNN checkpoint written by :func:`save_checkpoint`.

    Raises:
        CheckpointError: missing or unreadable file, or another format.
    """
    return read_checkpoint(path, CHECKPOINT_FORMAT, map_location=map_location)


def check_compatible(
    data: dict[str, Any],
    path: str | os.PathLike[str],
    vocab_hash: str,
    network: GCNConfig,
    what: str,
) -> None:
    """Refuse the checkpoint ``data`` (read from ``path``) unless it was trained on ``vocab_hash``
    with the network ``network``, those of ``what`` (a run, another checkpoint).

    The network is compared after :meth:`GCNConfig.from_dict`: a checkpoint older than a config
    field holds that field's default.

    Raises:
        CheckpointError: another vocabulary or network, or an ensemble (not trainable).
    """
    if data.get("ensemble"):
        raise CheckpointError(
            f"{path} is an ensemble of {len(data['ensemble']['members'])} runs: it can be "
            "exported and evaluated, not trained further; use one of its towers"
        )
    if data["vocab_hash"] != vocab_hash:
        raise CheckpointError(
            f"{path} was trained on vocabulary {str(data['vocab_hash'])[:12]}, {what} uses "
            f"{vocab_hash[:12]}"
        )
    if GCNConfig.from_dict(dict(data["model_config"])).to_dict() != network.to_dict():
        raise CheckpointError(f"{path} holds another network (model configuration) than {what}")


def model_from_record(data: dict[str, Any]) -> Any:
    """A freshly initialised model of the architecture a checkpoint (or its metadata) records:
    a :class:`~mathsearch.encoders.gcn_ensemble.GCNEnsemble` for an ensemble checkpoint
    (:mod:`mathsearch.encoders.ensemble_checkpoint`: towers + projection), else a
    :class:`GraphCNN` of ``model_config``.

    Raises:
        GCNConfigError: the recorded configuration is not a valid network.
    """
    if data.get("ensemble"):
        from mathsearch.encoders.gcn_ensemble import GCNEnsemble

        return GCNEnsemble.from_record(data["ensemble"])
    return GraphCNN(GCNConfig.from_dict(dict(data["model_config"])))


def load_model(
    path: str | os.PathLike[str], map_location: str | torch.device = "cpu"
) -> tuple[Any, dict[str, Any]]:
    """The trained model of a checkpoint (eval mode) and the checkpoint's metadata.

    The model is a :class:`GraphCNN`, or for an ensemble checkpoint
    (:mod:`mathsearch.encoders.ensemble_checkpoint`) a
    :class:`~mathsearch.encoders.gcn_ensemble.GCNEnsemble`; both embed with ``model(batch)``.

    The metadata is the checkpoint without the state dicts: ``step``, ``vocab_hash``,
    ``model_config``, ``train_config``, ``history``.
    """
    data = load_checkpoint(path, map_location)
    model = model_from_record(data)
    model.load_state_dict(data["model"])
    model.eval()
    heavy = {"model", "heads", "optimizer", "scheduler", "rng"}
    return model, {k: v for k, v in data.items() if k not in heavy}


def run_dir(checkpoint: str | os.PathLike[str]) -> Path:
    """The ``--out`` folder of the run that wrote ``checkpoint`` (``OUT/checkpoint.pt`` or
    ``OUT/checkpoints/step-N.pt``): where its ``train.json`` and ``cache/`` are."""
    folder = Path(checkpoint).resolve().parent
    return folder.parent if folder.name == CHECKPOINTS else folder


def prune(directory: Path, keep: int) -> None:
    """Delete all but the ``keep`` newest ``step-*.pt`` files of ``directory``."""
    if keep < 1:
        return
    found = sorted(directory.glob("step-*.pt"))
    for old in found[:-keep]:
        try:
            old.unlink()
        except OSError as exc:  # pragma: no cover - best effort
            logger.warning("could not delete the old checkpoint %s: %s", old, exc)


def load_runs(
    checkpoints: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], what: str
) -> tuple[list[Path], list[dict[str, Any]]]:
    """The paths and contents of two or more checkpoints that ``what`` (``"a soup"``, ``"an
    ensemble"``) combines into ``out/checkpoint.pt``.

    Raises:
        CheckpointError: fewer than two checkpoints, ``out/checkpoint.pt`` among them, or an
            unreadable file.
    """
    paths = [Path(path) for path in checkpoints]
    if len(paths) < 2:
        raise CheckpointError(f"{what} needs two or more checkpoints, not {len(paths)}")
    target = (Path(out) / "checkpoint.pt").resolve()
    if any(path.resolve() == target for path in paths):
        raise CheckpointError(f"{target} is one of the inputs: write {what} to another folder")
    return paths, [load_checkpoint(path) for path in paths]


def runs_report(
    paths: Sequence[Path], loaded: Sequence[dict[str, Any]], key: str, written: Path
) -> dict[str, Any]:
    """The ``train.json`` of a checkpoint made from several runs: under ``key`` each run's
    checkpoint, step and training time (from its own ``train.json``), their total, and the
    first run's corpus counts and configuration (its paper split is the combination's)."""
    summaries = []
    for path in paths:
        try:
            summaries.append(json.loads((run_dir(path) / "train.json").read_text("utf-8")))
        except (OSError, json.JSONDecodeError):
            summaries.append({})
    seconds = [s.get("train_seconds") for s in summaries]
    known = [float(s) for s in seconds if isinstance(s, int | float)]
    return {
        key: [
            {"checkpoint": str(path.resolve()), "step": int(data["step"]), "train_seconds": s}
            for path, data, s in zip(paths, loaded, seconds, strict=True)
        ],
        "step": int(loaded[0]["step"]),
        "total_steps": int(loaded[0]["total_steps"]),
        "train_seconds": sum(known) if len(known) == len(paths) else None,
        "vocab_hash": loaded[0]["vocab_hash"],
        "corpus": summaries[0].get("corpus"),
        "config": dict(loaded[0]["train_config"]),
        "checkpoint": str(written),
    }
