"""Uniform model soup of graph-CNN runs: the element-wise mean of their weights.

Beyond the seeds. Wortsman et al., "Model soups: averaging weights of multiple fine-tuned models
improves accuracy without increasing inference time" (ICML 2022), section 2: runs fine-tuned from
one pre-trained checkpoint with different seeds (here: anchor order and batches) end in one basin
of the loss, so the mean of their weights

.. math::

    \\theta_{\\mathrm{soup}} = \\frac{1}{K} \\sum_{k=1}^{K} \\theta_k

is a network as cheap to run as each of them and usually better on unseen data than the average
ingredient. Averaging networks that started from *different* random initialisations does not work
(the hidden units are permuted between them), so :func:`soup_checkpoints` refuses ingredients that
did not start from one checkpoint (``--init``) or, for snapshots of one run, one seed.

:func:`soup_state` is the pure math; :func:`soup_checkpoints` reads, checks and writes checkpoint
files (:mod:`mathsearch.encoders.checkpoints`). The soup's checkpoint holds no optimiser state, so
it can be exported, evaluated and used as ``--init``, not resumed.

Example::

    soup_checkpoints(["runs/a/checkpoint.pt", "runs/b/checkpoint.pt"], "runs/soup")
    # -> runs/soup/checkpoint.pt and runs/soup/train.json
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from mathsearch.encoders.checkpoints import (
    CheckpointError,
    check_compatible,
    load_runs,
    runs_report,
    save_checkpoint,
)
from mathsearch.encoders.gcn import GCNConfig

logger = logging.getLogger(__name__)

__all__ = ["soup_checkpoints", "soup_state"]


def soup_state(states: Sequence[Mapping[str, Tensor]]) -> dict[str, Tensor]:
    """The uniform soup ``(1/K) sum_k theta_k`` of ``K`` state dicts with the same keys and shapes.

    Floating-point tensors are averaged in float64 and cast back to their dtype; integer
    tensors (batch-norm's ``num_batches_tracked``) are taken from the first state.

    Args:
        states: ``K >= 1`` state dicts of one network (same keys, shapes and dtypes).

    Returns:
        A new state dict; the inputs are not changed.

    Raises:
        CheckpointError: no states, or states of different networks.

    Example::

        >>> a = {"w": torch.tensor([0.0, 2.0])}
        >>> b = {"w": torch.tensor([1.0, 4.0])}
        >>> soup_state([a, b])["w"]
        tensor([0.5000, 3.0000])
    """
    if not states:
        raise CheckpointError("a soup needs at least one state dict")
    first = states[0]
    for index, state in enumerate(states[1:], start=2):
        if state.keys() != first.keys():
            raise CheckpointError(f"ingredient {index} holds other parameters than the first")
        for key, value in state.items():
            if value.shape != first[key].shape or value.dtype != first[key].dtype:
                raise CheckpointError(
                    f"ingredient {index}: {key} is {tuple(value.shape)} {value.dtype}, the "
                    f"first's {tuple(first[key].shape)} {first[key].dtype}"
                )
    soup: dict[str, Tensor] = {}
    for key, value in first.items():
        if value.is_floating_point():
            total = torch.stack([state[key].to(torch.float64) for state in states]).mean(dim=0)
            soup[key] = total.to(value.dtype)
        else:
            soup[key] = value.clone()
    return soup


def _start(data: Mapping[str, Any]) -> tuple[str, Any]:
    """Where a run's weights started: ``("init", path)`` or ``("seed", seed)``."""
    config = data.get("train_config") or {}
    if config.get("init_from"):
        return ("init", str(Path(str(config["init_from"])).resolve()))
    return ("seed", config.get("seed", 0))


def soup_checkpoints(
    checkpoints: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    allow_different_starts: bool = False,
) -> Path:
    """Write the uniform soup of ``checkpoints`` to ``out/checkpoint.pt`` (and ``out/train.json``).

    The first ingredient gives the soup its metadata (configuration, seed, split), so
    ``eval ranking --checkpoint`` draws the first run's held-out triplets; ``train.json`` copies
    the first run's corpus counts and lists the ingredients.

    Args:
        checkpoints: two or more graph-CNN checkpoints of one vocabulary and network.
        out: the soup's folder (created).
        allow_different_starts: average runs that did not start from one checkpoint or seed
            (off: refused, see the module docstring).

    Returns:
        The soup's checkpoint path.

    Raises:
        CheckpointError: fewer than two ingredients, unreadable files, another vocabulary,
            network or start, or the soup's own folder among the ingredients.
    """
    paths, loaded = load_runs(checkpoints, out, "a soup")
    out = Path(out)
    first = loaded[0]
    network = GCNConfig.from_dict(dict(first["model_config"]))
    for path, data in zip(paths[1:], loaded[1:], strict=True):
        check_compatible(data, path, str(first["vocab_hash"]), network, str(paths[0]))
        if not allow_different_starts and _start(data) != _start(first):
            raise CheckpointError(
                f"{path} started from {_start(data)[1]!r}, {paths[0]} from "
                f"{_start(first)[1]!r}: averaging networks of different starts mixes unrelated "
                "hidden units (pass allow_different_starts / --any-start to do it anyway)"
            )
    ingredients = [str(path.resolve()) for path in paths]
    config = dict(first["train_config"])
    config["soup"] = ingredients
    payload = {
        "step": int(first["step"]),
        "total_steps": int(first["total_steps"]),
        "vocab_hash": first["vocab_hash"],
        "model_config": dict(first["model_config"]),
        "train_config": config,
        "model": soup_state([data["model"] for data in loaded]),
        "heads": None,
        "history": {"evaluations": [], "epochs": []},
        "soup": ingredients,
    }
    written = save_checkpoint(out / "checkpoint.pt", payload)
    (out / "train.json").write_text(
        json.dumps(runs_report(paths, loaded, "soup", written), indent=2), encoding="utf-8"
    )
    logger.info("soup of %d checkpoints written to %s", len(paths), written)
    return written
