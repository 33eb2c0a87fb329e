"""A shipped graph-CNN ONNX file back into a checkpoint: its weights, read from the file.

The project's models ship as ONNX + card (``export/models/``); their training checkpoints stay
on the machines that trained them. :func:`model_from_onnx` rebuilds the PyTorch module that
:func:`mathsearch.export.gcn_onnx.export_gcn` exported - a
:class:`~mathsearch.encoders.gcn.GraphCNN`, or a
:class:`~mathsearch.encoders.gcn_ensemble.GCNEnsemble` of them - from the architecture the card
records (``training.config.model`` or ``training.ensemble``) and the file's initialisers:

=========================================  ==============================================
ONNX initialiser                           parameter
=========================================  ==============================================
``[towers.K.]lookup`` (in + 1, hidden)     ``input_layer.linear.weight`` = ``lookup[:-1]^T``
``[towers.K.]model.<name>``                the parameter ``<name>`` (``alpha``, the biases,
                                           the gate)
the ``BatchNormalization`` inputs, in      each tower's ``norms.L`` (scale, shift, running
graph order                                mean and variance)
the ``MatMul`` weights, in graph order     each tower's ``convs.L.linear.weight^T``, then its
                                           ``project.weight^T``; last the ensemble's
                                           ``mix.weight^T``
``mix.bias``                               the ensemble's ``mix.bias``
=========================================  ==============================================

Batch norms and matrix products are read by position, and ``Identity`` nodes are followed,
because the exporter keeps one copy of equal tensors (two batch norms still at scale 1 share
one initialiser). The fixed
sinusoid table is rebuilt from the configuration. The rebuilt module is then checked
against the file itself (:func:`mathsearch.export.parity.check_parity` on real equations), so a
file of another layout fails loudly instead of giving other vectors.
:func:`reexport_onnx` writes the same model again with today's exporter (the same vectors, a
faster graph: the slot aggregation of :mod:`mathsearch.export.gcn_onnx`) and the card with its
new digest and parity (``mathsearch export OLD.onnx -o NEW.onnx``). :func:`checkpoint_from_onnx`
writes it as a checkpoint (:mod:`mathsearch.encoders.checkpoints` format, the card's training
configuration, paper split and vocabulary hash), which ``mathsearch train ensemble`` and
``mathsearch export`` take like a training run's.

Example::

    graphs = parity_sample(["../shared/data/hepth2003/equation.txt"], "hepth", 256)
    checkpoint_from_onnx("export/models/gcn-v9.onnx", "runs/v9/checkpoint.pt", graphs)
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mathsearch.encoders.gcn import GCNConfig, GCNConfigError, GraphCNN
from mathsearch.encoders.gcn_ensemble import GCNEnsemble
from mathsearch.export.errors import ExportError, ModelCardError, ParityError
from mathsearch.export.gcn_onnx import export_gcn
from mathsearch.export.onnx_file import IR_VERSION, OPSET, software_versions
from mathsearch.export.parity import DEFAULT_TOLERANCE, check_parity
from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.runtime.gcn_session import GcnSession
from mathsearch.runtime.model_card import ModelCard, file_sha256, load_card

logger = logging.getLogger(__name__)

__all__ = ["checkpoint_from_onnx", "model_from_onnx", "reexport_onnx"]


class _Weights:
    """A file's named initialisers, and the ``MatMul`` weights and ``BatchNormalization``
    inputs in graph order (consumed from the front, tower by tower)."""

    def __init__(self, path: Path) -> None:
        import onnx
        from onnx import numpy_helper

        proto = onnx.load(path)
        self.named = {init.name: numpy_helper.to_array(init) for init in proto.graph.initializer}
        nodes = list(proto.graph.node)
        for node in nodes:  # the exporter's copies of equal tensors: Identity of the kept one
            if node.op_type == "Identity" and node.input[0] in self.named:
                self.named.setdefault(node.output[0], self.named[node.input[0]])
        named = self.named
        self.matmuls = [
            named[n.input[1]] for n in nodes if n.op_type == "MatMul" and n.input[1] in named
        ]
        self.norms = [
            [named[name] for name in n.input[1:5]]
            for n in nodes
            if n.op_type == "BatchNormalization" and all(i in named for i in n.input[1:5])
        ]


_NORM_PARTS = ("weight", "bias", "running_mean", "running_var")


def _tensor(value: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(value))


def _tower(config: GCNConfig, prefix: str, weights: _Weights) -> GraphCNN:
    """One tower from the file's weights (``prefix`` ``""`` or ``towers.K.``)."""
    model = GraphCNN(config).eval()
    named = weights.named
    state = {}
    for name in model.state_dict():
        key = f"{prefix}model.{name}"
        if key in named and not name.startswith("norms."):
            state[name] = _tensor(named[key])
    for index in config.batch_norm_before:  # BatchNormalization's scale, bias, mean, var
        values = weights.norms.pop(0)
        for part, value in zip(_NORM_PARTS, values, strict=True):
            state[f"norms.{index}.{part}"] = _tensor(value)
    lookup = named.get(f"{prefix}lookup")
    if lookup is None:
        raise ExportError(f"no {prefix}lookup table: not a graph CNN exported by mathsearch")
    state["input_layer.linear.weight"] = _tensor(lookup[:-1].T)
    for index in range(config.layers):
        state[f"convs.{index}.linear.weight"] = _tensor(weights.matmuls.pop(0).T)
    state["project.weight"] = _tensor(weights.matmuls.pop(0).T)
    l2 = config.normalisation == "l2"  # the soft normalisation's statistics are unused then
    missing = [
        k
        for k in model.state_dict()
        if k not in state and "num_batches" not in k and not (l2 and k.startswith("soft_norm."))
    ]
    if missing:
        raise ExportError(f"the file has no weights for {prefix}{', '.join(missing)}")
    try:
        model.load_state_dict(state, strict=False)
    except RuntimeError as exc:
        raise ExportError(f"the file's {prefix}weights do not fit its card: {exc}") from exc
    return model


def model_from_onnx(
    path: str | os.PathLike[str],
    graphs: Sequence[EquationGraph],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
) -> tuple[GraphCNN | GCNEnsemble, ModelCard]:
    """The PyTorch module (eval mode) of a graph-CNN ONNX file and its card (module docstring).

    Args:
        path: the ``.onnx`` file, its card beside it.
        graphs: real equations the rebuilt module is checked on against the file.
        tolerance: the largest absolute difference allowed in that check.

    Raises:
        ExportError: no card, not a graph CNN, weights that do not fit the card, or a module
            that does not embed as the file does (``ParityError``).
    """
    path = Path(path)
    try:
        card = load_card(path)
    except ModelCardError as exc:
        raise ExportError(str(exc)) from exc
    if card.family != "gcn":
        raise ExportError(f"{path} is a {card.family!r} model, not a graph CNN")
    ensemble = card.training.get("ensemble")
    recorded: Any = (card.training.get("config") or {}).get("model")  # the card's JSON
    if not ensemble and not recorded:
        raise ExportError(f"the card of {path} records no architecture (training.config.model)")
    try:
        weights = _Weights(path)
        configs = (
            [GCNConfig.from_dict(dict(c)) for c in ensemble["model_configs"]]
            if ensemble
            else [GCNConfig.from_dict(dict(recorded))]
        )
        prefixes = [f"towers.{k}." for k in range(len(configs))] if ensemble else [""]
        towers = [_tower(c, p, weights) for c, p in zip(configs, prefixes, strict=True)]
        model: GraphCNN | GCNEnsemble = towers[0]
        if ensemble:
            model = GCNEnsemble(towers, int(ensemble["out_dim"]), ensemble.get("weights")).eval()
            if len(weights.matmuls) != 1 or "mix.bias" not in weights.named:
                raise ExportError(f"{path} has no single projection after its towers")
            model.set_projection(
                _tensor(weights.matmuls.pop().T), _tensor(weights.named["mix.bias"])
            )
        if weights.matmuls or weights.norms:
            raise ExportError(f"{path} has more weights than its card's network")
    except (GCNConfigError, IndexError, ValueError) as exc:
        raise ExportError(f"{path} does not match its card's architecture: {exc}") from exc
    parity = check_parity(model, path, graphs, tolerance=tolerance)
    logger.info("rebuilt %s from %s: max |torch - onnx| %.3g", card.name, path, parity.max_abs_diff)
    return model, card


def checkpoint_from_onnx(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    graphs: Sequence[EquationGraph],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
) -> Path:
    """Write :func:`model_from_onnx`'s module as a checkpoint at ``out``; returns ``out``.

    The checkpoint carries the card's training configuration (with its paper split), step and
    vocabulary hash, an ``ensemble`` entry for an ensemble, and ``from_onnx`` (the file and its
    SHA-256); a ``train.json`` beside it gives the card's data counts, held-out rule and
    training time, as a training run's does (what ``mathsearch export`` copies into a card).
    It has no optimiser state: ``train gcn --init`` can start from it, ``--resume`` cannot.

    Raises:
        ExportError: as :func:`model_from_onnx`.
    """
    from mathsearch.encoders.checkpoints import save_checkpoint

    path = Path(path)
    model, card = model_from_onnx(path, graphs, tolerance=tolerance)
    training = card.training
    payload: dict[str, Any] = {
        "step": int(training.get("step") or 0),
        "total_steps": int(training.get("total_steps") or 0),
        "vocab_hash": card.vocab_hash,
        "model_config": model.config.to_dict(),
        "train_config": dict(training.get("config") or {}),
        "model": model.state_dict(),
        "heads": None,
        "history": {"evaluations": [], "epochs": []},
        "from_onnx": {"path": str(path.resolve()), "sha256": file_sha256(path), "name": card.name},
    }
    ensemble = training.get("ensemble")
    if ensemble:
        payload["ensemble"] = {
            "members": [str(m) for m in ensemble.get("members") or []],
            "model_configs": list(ensemble["model_configs"]),
            **({"weights": ensemble["weights"]} if ensemble.get("weights") else {}),
            "out_dim": int(ensemble["out_dim"]),
            "fit_equations": ensemble.get("fit_equations"),
        }
    payload["train_config"].setdefault("split", training.get("split"))
    written = save_checkpoint(out, payload)
    summary = json.dumps(_run_summary(training), indent=2)
    (written.parent / "train.json").write_text(summary, encoding="utf-8")
    return written


def _run_summary(training: dict[str, Any]) -> dict[str, Any]:
    """The ``train.json`` of a run, rebuilt from its card's ``training`` (the inverse of what
    :func:`mathsearch.export.export_model.export_checkpoint` reads from it)."""
    data = training.get("data") or {}
    corpus: dict[str, Any] = {"train": data.get("train"), "test": data.get("test")}
    if training.get("sources"):
        corpus["shared"] = {
            "sources": training.get("sources"),
            "held_out": training.get("held_out"),
            "parts": training.get("parts"),
            "hepth2003": data.get("hepth2003"),
        }
    else:
        corpus["all"] = data.get("all")
    keys = ("train_seconds", "seconds", "triplets_per_second")
    return {"corpus": corpus, **{key: training.get(key) for key in keys}}


def reexport_onnx(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    graphs: Sequence[EquationGraph],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    parity_data: str = "",
) -> tuple[ModelCard, float]:
    """Write the model of ``path`` again to ``out`` with the current exporter; returns the new
    card and the largest absolute difference between the two files' vectors on ``graphs``.

    The card is ``path``'s (name, version, vector field, training, metrics, description) with
    this file's SHA-256, opset, parity check against PyTorch, creation time, software versions
    and ``reexported_from`` (the old file's name and digest).

    Raises:
        ExportError: as :func:`model_from_onnx`, ``out`` is ``path``, or the new file's vectors
            differ from the old one's by more than ``tolerance`` (``ParityError``).
    """
    path, out = Path(path), Path(out)
    if out.resolve() == path.resolve():
        raise ExportError(f"write the re-export of {path} to another file")
    model, card = model_from_onnx(path, graphs, tolerance=tolerance)
    export_gcn(
        model,
        out,
        metadata={"name": card.name, "family": card.family, "vocab_hash": card.vocab_hash},
    )
    parity = check_parity(model, out, graphs, tolerance=tolerance)
    new = replace(
        card,
        sha256=file_sha256(out),
        opset=OPSET,
        ir_version=IR_VERSION,
        parity={
            **parity.to_dict(),
            "data": parity_data,
            "reexported_from": {"file": path.name, "sha256": card.sha256},
        },
        created=datetime.now(UTC).replace(microsecond=0).isoformat(),
        software=software_versions(),
    )
    new.write(out)
    old_vectors = GcnSession(path, vocab_hash=card.vocab_hash, device="cpu").encode(graphs)
    new_vectors = GcnSession(out, vocab_hash=card.vocab_hash, device="cpu").encode(graphs)
    diff = float(np.abs(old_vectors - new_vectors).max())
    if diff > tolerance:
        raise ParityError(f"the re-export of {path} differs from it by {diff:.3g} > {tolerance:g}")
    logger.info("re-exported %s to %s: max |new - old| %.3g", path, out, diff)
    return new, diff
