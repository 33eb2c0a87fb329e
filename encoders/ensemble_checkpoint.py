"""Write an ensemble checkpoint from K graph-CNN runs (:mod:`mathsearch.encoders.gcn_ensemble`).

:func:`ensemble_checkpoints` loads the towers, embeds equations of their *training* papers (the
paper split recorded in the runs, rebuilt on the hep-th corpus the split is of: the held-out and
validation papers are never seen), fits the projection (:func:`fit_projection`) and writes
``out/checkpoint.pt`` and ``out/train.json``. The checkpoint is the usual format
(:mod:`mathsearch.encoders.checkpoints`) with an ``ensemble`` entry: ``load_model`` returns a
:class:`GCNEnsemble`, which ``mathsearch export`` and ``eval`` take like any graph CNN. It holds no
optimiser state and cannot be trained further (``--init`` / ``--resume`` refuse it).

Example::

    ensemble_checkpoints(["runs/a/checkpoint.pt", "runs/b/checkpoint.pt"], "runs/ens",
                         fit_sources=["../shared/data/hepth2003/equation.txt",
                                      "../shared/data/hepth2003/eqnarray.txt"])
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from mathsearch.encoders.checkpoints import (
    CheckpointError,
    load_runs,
    model_from_record,
    runs_report,
    save_checkpoint,
)
from mathsearch.encoders.gcn import GCNConfigError, GraphCNN
from mathsearch.encoders.gcn_ensemble import GCNEnsemble, fit_projection, tower_weights

logger = logging.getLogger(__name__)

__all__ = ["FIT_EQUATIONS", "ensemble_checkpoints", "member_towers", "training_graphs"]

#: Equations of training papers the projection is fitted on by default.
FIT_EQUATIONS = 4000
_CHUNK = 512


def _split(data: dict[str, Any], path: Path) -> dict[str, Any]:
    split = dict((data.get("train_config") or {}).get("split") or {})
    if "test_fraction" not in split:
        raise CheckpointError(f"{path} records no paper split: its training papers are unknown")
    return split


def training_graphs(
    split: dict[str, Any],
    sources: Sequence[str],
    count: int = FIT_EQUATIONS,
    cache_dir: str | os.PathLike[str] | None = None,
) -> list[Any]:
    """``count`` equations spread evenly over the training papers of ``split``.

    ``split`` is a run's ``train_config["split"]`` (test fraction, seed, limit and, for
    ``--shared-data`` runs, the validation split); ``sources`` the hep-th files it is a split of.

    Raises:
        CheckpointError: the sources cannot be read or hold fewer training equations than
            ``count``.
    """
    from mathsearch.encoders.corpus import CorpusError, EquationCorpus
    from mathsearch.encoders.shared_corpus import hepth2003_splits

    try:
        if cache_dir is not None:
            corpus = EquationCorpus.cached(list(sources), "hepth", cache_dir, split.get("limit"))
        else:
            corpus = EquationCorpus.from_sources(list(sources), "hepth", split.get("limit"))
        train, _, _ = hepth2003_splits(corpus, split.get("validation"), split)
    except (CorpusError, OSError) as exc:
        raise CheckpointError(f"cannot rebuild the towers' training papers: {exc}") from exc
    if len(train) < count:
        raise CheckpointError(
            f"the training papers hold {len(train)} equations, fewer than the {count} asked for"
        )
    picks = np.linspace(0, len(train) - 1, count).round().astype(int)
    return [train.graphs[i] for i in picks]


def member_towers(data: dict[str, Any], path: Path) -> tuple[list[GraphCNN], list[float]]:
    """The towers of one member checkpoint and their shares of its weight (summing to 1): a
    graph CNN is one tower; an ensemble checkpoint its towers at its own weights.

    Raises:
        CheckpointError: the recorded architecture is invalid or the weights do not fit it.
    """
    try:
        model = model_from_record(data)
        model.load_state_dict(data["model"])
    except (GCNConfigError, RuntimeError) as exc:
        raise CheckpointError(f"{path}: {exc}") from exc
    model.eval()
    if isinstance(model, GCNEnsemble):
        towers = [cast(GraphCNN, tower) for tower in model.towers]  # an ensemble's are GraphCNNs
        return towers, tower_weights(model.weights, len(model.towers))
    return [model], [1.0]


def _flat_weights(
    shares: Sequence[Sequence[float]], member_weights: Sequence[float] | None
) -> list[float] | None:
    """Each tower's weight: its member's (normalised; default equal) times its share in the
    member; ``None`` when every tower weighs the same (the equal ensemble)."""
    try:
        members = tower_weights(member_weights, len(shares))
    except GCNConfigError as exc:
        raise CheckpointError(f"--weights: {exc}") from exc
    flat = [w * share for w, part in zip(members, shares, strict=True) for share in part]
    return None if max(flat) - min(flat) < 1e-12 else flat


def ensemble_checkpoints(
    checkpoints: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    fit_sources: Sequence[str],
    out_dim: int | None = None,
    fit_equations: int = FIT_EQUATIONS,
    cache_dir: str | os.PathLike[str] | None = None,
    weights: Sequence[float] | None = None,
) -> Path:
    """Write the ensemble of ``checkpoints`` to ``out/checkpoint.pt`` (and ``out/train.json``).

    Args:
        checkpoints: two or more members: L2-normalised graph-CNN checkpoints of one vocabulary
            and one paper split, or ensemble checkpoints of such towers (an ensemble member
            joins with its towers, which share its weight as they did in it).
        out: the ensemble's folder (created).
        fit_sources: the hep-th files the runs' split is of (``../shared/data/hepth2003``'s
            equation.txt and eqnarray.txt).
        out_dim: the ensemble vector's width (default: the first tower's).
        fit_equations: training-paper equations the projection is fitted on.
        cache_dir: featurised-corpus cache for ``fit_sources``.
        weights: each member's weight in the mean of cosines (default: equal).

    Returns:
        The checkpoint path.

    Raises:
        CheckpointError: fewer than two members, unreadable files, other vocabularies or
            splits, towers that are not L2-normalised, bad weights, or the output among the
            inputs.
    """
    paths, loaded = load_runs(checkpoints, out, "an ensemble")
    out = Path(out)
    first, split = loaded[0], _split(loaded[0], paths[0])
    for path, data in zip(paths[1:], loaded[1:], strict=True):
        if data["vocab_hash"] != first["vocab_hash"]:
            raise CheckpointError(f"{path} was trained on another vocabulary than {paths[0]}")
        if _split(data, path) != split:
            raise CheckpointError(f"{path} held out other papers than {paths[0]}")
    parts = [member_towers(data, path) for path, data in zip(paths, loaded, strict=True)]
    towers = [tower for members, _ in parts for tower in members]
    tower_share = _flat_weights([shares for _, shares in parts], weights)
    width = out_dim or towers[0].config.out_dim
    try:
        model = GCNEnsemble(towers, width, tower_share)
    except GCNConfigError as exc:
        raise CheckpointError(str(exc)) from exc
    graphs = training_graphs(split, fit_sources, fit_equations, cache_dir)
    z = _concat(model, graphs)
    model.set_projection(*fit_projection(z, width))
    members = [str(path.resolve()) for path in paths]
    info = {
        "members": members,
        "model_configs": [tower.config.to_dict() for tower in towers],
        **({"weights": tower_share} if tower_share is not None else {}),
        "out_dim": width,
        "fit_equations": len(graphs),
        "fit_sources": [str(Path(source).resolve()) for source in fit_sources],
    }
    config = dict(first["train_config"])
    config["ensemble"] = members
    payload = {
        "step": int(first["step"]),
        "total_steps": int(first["total_steps"]),
        "vocab_hash": first["vocab_hash"],
        "model_config": model.config.to_dict(),
        "train_config": config,
        "model": model.state_dict(),
        "heads": None,
        "history": {"evaluations": [], "epochs": []},
        "ensemble": info,
    }
    written = save_checkpoint(out / "checkpoint.pt", payload)
    (out / "train.json").write_text(
        json.dumps(_report(paths, loaded, info, written), indent=2), encoding="utf-8"
    )
    logger.info("ensemble of %d towers (%d-d) written to %s", len(towers), width, written)
    return written


def _concat(model: GCNEnsemble, graphs: Sequence[Any]) -> torch.Tensor:
    from mathsearch.encoders.graph_data import collate

    parts = []
    with torch.no_grad():
        for start in range(0, len(graphs), _CHUNK):
            parts.append(model.concat(collate(graphs[start : start + _CHUNK])))
    return torch.cat(parts)


def _report(
    paths: list[Path], loaded: list[dict[str, Any]], info: dict[str, Any], written: Path
) -> dict[str, Any]:
    """``train.json``: the towers (:func:`runs_report`), the width and the fitting equations."""
    report = runs_report(paths, loaded, "ensemble", written)
    return {**report, "out_dim": info["out_dim"], "fit_equations": info["fit_equations"]}
