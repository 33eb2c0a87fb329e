"""One training step of the bitmap CNN, split into ``prepare`` (sampling, batch, augmentation)
and ``loss`` (forward), so that the loop and the network can be timed apart
(``mathsearch bench train bitmap``) and :func:`~mathsearch.encoders.bitmap_training.train_bitmap`
runs the same code.

:func:`build_steps` sets a task up on a training corpus (:data:`TASKS` x :data:`LOSSES`, see
:mod:`mathsearch.encoders.bitmap_training`): the anchors an epoch walks, the criterion, and for the
label tasks the vocabulary and the label head; for the ``teacher`` task the per-crop targets of
:mod:`mathsearch.encoders.bitmap_teacher`.

Example::

    steps = build_steps(config, train, model, targets=None)
    prepared = steps.prepare(steps.anchors[:100])
    loss = steps.loss(prepared)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from mathsearch.encoders.bitmap_augment import CropAugment
from mathsearch.encoders.bitmap_cnn import BitmapCNN
from mathsearch.encoders.bitmap_data import BitmapCorpus
from mathsearch.encoders.bitmap_labels import LabelVocabulary, keyword_labels, symbol_labels
from mathsearch.encoders.bitmap_sampler import (
    context_anchors,
    paper_members,
    sample_labels,
    sample_pairs,
    sample_triplets,
)
from mathsearch.encoders.losses.info_nce_loss import InfoNCELoss, same_group_mask
from mathsearch.encoders.losses.multilabel_loss import LabelLogLoss
from mathsearch.encoders.losses.siamese_loss import SiameseLoss
from mathsearch.encoders.losses.triplet_loss import TripletLoss

logger = logging.getLogger(__name__)

__all__ = ["LOSSES", "TASKS", "BitmapSteps", "BitmapTaskError", "build_steps"]

TASKS = ("symbols", "keywords", "context", "teacher")
LOSSES = ("triplet", "siamese", "info-nce")
#: teacher targets this close (cosine) are the same formula twice: neither positive nor negative
DUPLICATE_COSINE = 0.98


class BitmapTaskError(ValueError):
    """The task cannot be set up on this corpus (too little data, missing targets)."""


@dataclass
class BitmapSteps:
    """A task set up on a training corpus; see the module docstring."""

    task: str
    loss_name: str
    model: BitmapCNN
    crops: np.ndarray
    eq_paper: np.ndarray
    anchors: np.ndarray
    criterion: torch.nn.Module
    rng: np.random.Generator
    generator: torch.Generator
    augment: CropAugment | None = None
    members: list[np.ndarray] = field(default_factory=list)
    label_ids: list[np.ndarray] | None = None
    vocabulary: LabelVocabulary | None = None
    head: LabelLogLoss | None = None
    targets: np.ndarray | None = None

    def batch(self, idx: np.ndarray) -> Tensor:
        """Grey crops ``(B, 1, H, W)`` float of ``idx``, augmented when configured."""
        grey = torch.from_numpy(self.crops[idx]).float().unsqueeze(1)
        return self.augment(grey, self.generator) if self.augment is not None else grey

    def prepare(self, idx: np.ndarray) -> dict[str, Tensor]:
        """Everything the step's forward needs, drawn for the anchors ``idx``."""
        if self.task == "teacher":
            targets = torch.from_numpy(self.targets[idx])  # type: ignore[index]
            duplicate = (targets @ targets.t()) > DUPLICATE_COSINE
            duplicate &= ~torch.eye(len(idx), dtype=torch.bool)
            return {"x": self.batch(idx), "targets": targets, "ignore": duplicate}
        if self.task != "context":
            labels, z = sample_labels(
                self.rng, idx, self.label_ids or [], len(self.vocabulary or ())
            )
            return {"x": self.batch(idx), "labels": torch.from_numpy(labels),
                    "z": torch.from_numpy(z)}  # fmt: skip
        if self.loss_name == "triplet":
            pos, neg = sample_triplets(self.rng, idx, self.eq_paper, self.members)
            return {"x": self.batch(np.concatenate([idx, pos, neg]))}
        if self.loss_name == "info-nce":
            pos, _ = sample_triplets(self.rng, idx, self.eq_paper, self.members)
            same = same_group_mask(torch.from_numpy(self.eq_paper[idx]))
            return {"x": self.batch(np.concatenate([idx, pos])), "ignore": same}
        other, y = sample_pairs(self.rng, idx, self.eq_paper, self.members)
        return {"x": self.batch(np.concatenate([idx, other])), "y": torch.from_numpy(y)}

    def loss(self, prepared: dict[str, Tensor]) -> Tensor:
        """The scalar loss of one prepared step (forward only)."""
        emb = self.model(prepared["x"])
        if self.task == "teacher":
            return self.criterion(emb, prepared["targets"], ignore=prepared["ignore"])
        if self.task != "context":
            return self.criterion(emb, prepared["labels"], prepared["z"])
        if self.loss_name == "triplet":
            return self.criterion(*emb.split(len(emb) // 3))
        first, second = emb.split(len(emb) // 2)
        if self.loss_name == "info-nce":
            return self.criterion(first, second, ignore=prepared["ignore"])
        return self.criterion(first, second, prepared["y"])

    def parameters(self) -> list[torch.nn.Parameter]:
        """The net's and the criterion's (a label head, a learned scale) trainable parameters."""
        return list(self.model.parameters()) + list(self.criterion.parameters())


def _label_sets(task: str, corpus: BitmapCorpus) -> list[set[str]]:
    if task == "symbols":
        return symbol_labels(corpus.latex)
    return keyword_labels(corpus.papers, corpus.contexts)


def build_steps(
    config: Any,
    train: BitmapCorpus,
    model: BitmapCNN,
    *,
    targets: np.ndarray | None = None,
    augment: CropAugment | None = None,
    rng: np.random.Generator | None = None,
) -> BitmapSteps:
    """Set ``config.task`` / ``config.loss`` up on ``train`` (see the module docstring).

    Raises:
        BitmapTaskError: too little data, or targets missing / of the wrong shape.
    """
    rng = rng if rng is not None else np.random.default_rng(config.seed)
    generator = torch.Generator().manual_seed(int(config.seed))
    common: dict[str, Any] = {
        "task": config.task, "loss_name": config.loss, "model": model, "crops": train.crops,
        "eq_paper": train.eq_paper, "rng": rng, "generator": generator, "augment": augment,
    }  # fmt: skip
    if config.task == "teacher":
        dim = model.config.out_dim
        if targets is None or targets.shape != (len(train), dim):
            shape = None if targets is None else targets.shape
            raise BitmapTaskError(f"the teacher task needs targets ({len(train)}, {dim}): {shape}")
        anchors = np.flatnonzero(np.linalg.norm(targets, axis=1) > 0)
        if anchors.size < 2:
            raise BitmapTaskError(f"{anchors.size} crops have a teacher vector: need 2 or more")
        targets = np.ascontiguousarray(targets, dtype=np.float32)
        return BitmapSteps(**common, anchors=anchors, criterion=InfoNCELoss(), targets=targets)
    if config.task == "context":
        try:
            anchors = context_anchors(train.eq_paper)
        except ValueError as exc:
            raise BitmapTaskError(str(exc)) from exc
        criterion: torch.nn.Module
        if config.loss == "triplet":
            criterion = TripletLoss(config.margin, swap=True, squared=True)
        elif config.loss == "siamese":
            criterion = SiameseLoss(config.margin, squared=True)
        else:
            criterion = InfoNCELoss()
        members = paper_members(train.eq_paper)
        return BitmapSteps(**common, anchors=anchors, criterion=criterion, members=members)
    label_sets = _label_sets(config.task, train)
    vocabulary = LabelVocabulary.build(label_sets, config.min_label_count, config.max_labels)
    label_ids = vocabulary.encode(label_sets)
    anchors = np.array([i for i, ids in enumerate(label_ids) if len(ids) > 0], np.int64)
    if len(vocabulary) < 2 or anchors.size == 0:
        raise BitmapTaskError(
            f"the {config.task} task found {len(vocabulary)} labels on {anchors.size} "
            "equations (hep-th record files carry no text: keywords need .tex sources)"
        )
    head = LabelLogLoss(len(vocabulary), model.config.out_dim)
    return BitmapSteps(**common, anchors=anchors, criterion=head, label_ids=label_ids,
                       vocabulary=vocabulary, head=head)  # fmt: skip
