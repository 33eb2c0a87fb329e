"""Training of the bitmap CNN on one proxy task (ECML 2019 sec. 4.2-4.3).

Tasks (:data:`TASKS`) and losses:

* ``symbols`` / ``keywords``: multi-label with negative sampling, logistic loss eq. 1
  (:class:`~mathsearch.encoders.losses.multilabel_loss.LabelLogLoss`, one weight vector per label);
* ``context`` with ``--loss triplet``: eq. 3 with anchor swap and squared hinge (the existing
  :class:`~mathsearch.encoders.losses.triplet_loss.TripletLoss` with ``swap=True, squared=True``),
  or
  ``--loss siamese``: eq. 2, squared hinge
  (:class:`~mathsearch.encoders.losses.siamese_loss.SiameseLoss`), or
  ``--loss info-nce`` (beyond the seed, the recipe that made the graph CNN work): each anchor
  with a positive of its paper against every other positive of the batch
  (:class:`~mathsearch.encoders.losses.info_nce_loss.InfoNCELoss`, learned scale, symmetric;
  other anchors of the same paper are left out of each other's softmax, not negatives). The
  net's embeddings are L2-normalised, so its inner products are cosines.
* ``teacher`` (beyond the seed): every crop against the vector another encoder gives the same
  equation, InfoNCE with in-batch negatives (:mod:`mathsearch.encoders.bitmap_teacher`).

``augment`` re-samples every training crop at a random scale and shift
(:mod:`mathsearch.encoders.bitmap_augment`); the steps themselves are
:mod:`mathsearch.encoders.bitmap_steps`.

Procedure (sec. 4.3): Adam, learning rate 0.00025 reduced by 0.1 every 10 epochs, minibatches of
100, 30 epochs, margin 1, new negatives/positives every step; the large net's batch norm is frozen
from epoch ``freeze_bn_epoch`` (the authors' code: after the first). Transfer ("SYMBOLS+TRIPLES",
"ABSTRACT+TRIPLES"): ``pretrained`` loads the encoder of another run's checkpoint (its label
weights are dropped) before training on this task.

After every epoch (and once before training, the untrained baseline) the hold-out metrics of
:mod:`mathsearch.encoders.bitmap_eval` are computed on fixed triplets of the test papers, and
``OUT/checkpoint.pt`` is written (torch.save of plain containers, ``weights_only`` loadable):
``{"family": "bitmap", "format", "model_config", "model", "train_config", "labels", "head",
"settings_hash", "epoch", "step", "history"}``.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from mathsearch.encoders.bitmap_augment import CropAugment
from mathsearch.encoders.bitmap_cnn import BitmapCNN, BitmapCNNConfig
from mathsearch.encoders.bitmap_data import BitmapCorpus
from mathsearch.encoders.bitmap_eval import holdout_metrics, holdout_triplets
from mathsearch.encoders.bitmap_labels import LabelVocabulary
from mathsearch.encoders.bitmap_steps import LOSSES, TASKS, BitmapTaskError, build_steps
from mathsearch.encoders.checkpoints import read_checkpoint
from mathsearch.encoders.losses.multilabel_loss import LabelLogLoss
from mathsearch.encoders.train_loop import LoopSchedule, LoopState, run_loop

logger = logging.getLogger(__name__)

__all__ = [
    "CHECKPOINT_FORMAT",
    "LOSSES",
    "TASKS",
    "BitmapTrainConfig",
    "BitmapTrainingError",
    "embed_crops",
    "load_bitmap_model",
    "train_bitmap",
]

CHECKPOINT_FORMAT = "mathsearch-bitmap-checkpoint/1"


class BitmapTrainingError(ValueError):
    """The run cannot start: bad options, too little data, unreadable checkpoint."""


@dataclass
class BitmapTrainConfig:
    """Options of one run (defaults: the seed's sec. 4.3; see the module docstring)."""

    task: str = "context"
    loss: str = "triplet"
    net: str = "small"
    epochs: int = 30
    steps_per_epoch: int | None = None
    batch_size: int = 100
    lr: float = 2.5e-4
    lr_step: int = 10
    lr_gamma: float = 0.1
    margin: float = 1.0
    freeze_bn_epoch: int = 1
    min_label_count: int = 2
    max_labels: int = 5000
    eval_triplets: int = 2000
    seed: int = 0
    threads: int = 0
    progress: bool = True
    pretrained: str | None = None
    augment: bool = False
    teacher: str | None = None
    out_norm: bool = False

    def __post_init__(self) -> None:
        if self.task not in TASKS or self.loss not in LOSSES:
            raise BitmapTrainingError(f"task must be in {TASKS} and loss in {LOSSES}")
        if min(self.epochs, self.batch_size, self.lr_step, self.eval_triplets) < 1:
            raise BitmapTrainingError("epochs, batch_size, lr_step, eval_triplets must be >= 1")
        if self.steps_per_epoch is not None and self.steps_per_epoch < 1:
            raise BitmapTrainingError("steps_per_epoch must be >= 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _batch(crops: np.ndarray, idx: np.ndarray) -> Tensor:
    return torch.from_numpy(crops[idx]).float().unsqueeze(1)


@torch.no_grad()
def embed_crops(model: BitmapCNN, crops: np.ndarray, batch_size: int = 256) -> np.ndarray:
    """Eval-mode embeddings float32 ``(N, d)`` of uint8 crops ``(N, H, W)``."""
    was_training = model.training
    model.eval()
    parts = [
        model(_batch(crops, np.arange(s, min(s + batch_size, len(crops))))).numpy()
        for s in range(0, len(crops), batch_size)
    ]
    model.train(was_training)
    if not parts:
        return np.zeros((0, model.config.out_dim), dtype=np.float32)
    return np.concatenate(parts).astype(np.float32)


def load_bitmap_model(path: str | os.PathLike[str]) -> tuple[BitmapCNN, dict[str, Any]]:
    """The encoder of a checkpoint (eval mode) and the checkpoint without its state dicts.

    Raises:
        CheckpointError: unreadable file or not a bitmap checkpoint.
    """
    data = read_checkpoint(path, CHECKPOINT_FORMAT)
    model = BitmapCNN(BitmapCNNConfig.from_dict(dict(data["model_config"])))
    if data.get("batch_norm_frozen"):
        model.freeze_batch_norm()
    model.load_state_dict(data["model"])
    model.eval()
    return model, {k: v for k, v in data.items() if k not in ("model", "head", "optimizer")}


def _evaluate(model: BitmapCNN, test: BitmapCorpus | None, triplets: Any) -> dict[str, Any]:
    if test is None or triplets is None:
        return {}
    used = np.unique(np.concatenate(triplets))
    emb = np.zeros((len(test), model.config.out_dim), dtype=np.float32)
    emb[used] = embed_crops(model, test.crops[used])
    return holdout_metrics(emb, triplets)


def train_bitmap(
    config: BitmapTrainConfig,
    train: BitmapCorpus,
    test: BitmapCorpus | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    targets: np.ndarray | None = None,
) -> dict[str, Any]:
    """Train on ``train``, evaluate on ``test`` after every epoch; returns the run summary.

    ``targets`` ``(len(train), d)``: the ``teacher`` task's unit target of every crop (zeros:
    none), from :func:`~mathsearch.encoders.bitmap_teacher.project_targets`.

    Raises:
        BitmapTrainingError: too little data for the task, or missing teacher targets.
        CheckpointError: an unreadable ``pretrained``.
    """
    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    model = BitmapCNN(BitmapCNNConfig(net=config.net, out_norm=config.out_norm))
    if config.pretrained:
        donor, _ = load_bitmap_model(config.pretrained)
        if donor.config != model.config:
            raise BitmapTrainingError(f"{config.pretrained} is a {donor.config.net} net")
        model.load_state_dict(donor.state_dict())
    try:
        steps_of = build_steps(
            config,
            train,
            model,
            targets=targets,
            augment=CropAugment() if config.augment else None,
            rng=rng,
        )
    except BitmapTaskError as exc:
        raise BitmapTrainingError(str(exc)) from exc
    anchors, head, vocabulary = steps_of.anchors, steps_of.head, steps_of.vocabulary
    optimizer = torch.optim.Adam(steps_of.parameters(), lr=config.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, config.lr_step, config.lr_gamma)
    steps = config.steps_per_epoch or max(1, math.ceil(len(anchors) / config.batch_size))
    triplets = None
    if test is not None and len(test) > 2:
        try:
            triplets = holdout_triplets(test.eq_paper, config.eval_triplets, config.seed)
        except ValueError as exc:
            logger.warning("no hold-out metrics: %s", exc)
    history: dict[str, list[dict[str, Any]]] = {"epochs": [], "evaluations": []}
    history["evaluations"].append({"epoch": 0, "step": 0, **_evaluate(model, test, triplets)})
    out = Path(out_dir) if out_dir is not None else None
    order = anchors

    def start_epoch(state: LoopState) -> None:
        nonlocal order
        frozen_from = config.freeze_bn_epoch
        if model.batch_norm is not None and frozen_from and state.epoch > frozen_from:
            model.freeze_batch_norm()
        order = rng.permutation(anchors)

    def step(state: LoopState) -> float:
        start = ((state.step % steps) * config.batch_size) % len(order)
        idx = np.take(order, range(start, start + config.batch_size), mode="wrap")
        loss = steps_of.loss(steps_of.prepare(idx))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return float(loss.item())

    def end_epoch(state: LoopState, losses: list[float]) -> None:
        lr = optimizer.param_groups[0]["lr"]
        history["epochs"].append({"epoch": state.epoch, "loss": float(np.mean(losses)), "lr": lr})
        scheduler.step()

    def evaluate(state: LoopState) -> None:
        evaluation = {"epoch": state.epoch, "step": state.step, **_evaluate(model, test, triplets)}
        history["evaluations"].append(evaluation)
        logger.info(
            "epoch %d: loss %.4f %s", state.epoch, history["epochs"][-1]["loss"], evaluation
        )

    def checkpoint(state: LoopState) -> Path | None:
        if out is None:
            return None
        status = {"epoch": state.epoch, "step": state.step, "history": history}
        path = out / "checkpoint.pt"
        _save(path, model, head, vocabulary, config, train.settings_digest, status)
        return path

    model.train()
    loop = run_loop(
        LoopSchedule(
            total_steps=config.epochs * steps,
            steps_per_epoch=steps,
            checkpoint_every=steps,
            progress=config.progress,
            desc=f"train bitmap/{config.task}",
        ),
        step,
        start_epoch=start_epoch,
        end_epoch=end_epoch,
        evaluate=evaluate,
        checkpoint=checkpoint,
        postfix=lambda state: {"loss": f"{np.mean(state.losses[-20:]):.4f}"},
    )
    step_count, seconds = loop.step, loop.seconds
    return {
        "family": "bitmap",
        "epochs": config.epochs,
        "steps": step_count,
        "seconds": seconds,
        "examples_per_second": step_count * config.batch_size / max(seconds, 1e-9),
        "anchors": len(anchors),
        "labels": len(vocabulary) if vocabulary is not None else None,
        "parameters": model.num_parameters(),
        "history": history,
        "checkpoint": str(out / "checkpoint.pt") if out is not None else None,
        "model": model,
    }


def _save(  # noqa: PLR0917 - one private call site
    path: Path,
    model: BitmapCNN,
    head: LabelLogLoss | None,
    vocabulary: LabelVocabulary | None,
    config: BitmapTrainConfig,
    digest: str,
    state: dict[str, Any],
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "family": "bitmap",
        "format": CHECKPOINT_FORMAT,
        "model_config": model.config.to_dict(),
        "model": model.state_dict(),
        "batch_norm_frozen": model.batch_norm_frozen,
        "head": head.state_dict() if head is not None else None,
        "labels": vocabulary.labels if vocabulary is not None else None,
        "train_config": config.to_dict(),
        "settings_hash": digest,
        **state,
    }
    tmp = path.with_name(path.name + ".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)
