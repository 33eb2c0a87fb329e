"""Training of the figure encoder (figure-embeddings seed, sections 3-5.1).

The seed trains the three sub-models separately ("we train all three components of the model
... separately, due to our limited data"), which :func:`train_figure_encoder` follows:

1. text: the Siamese LSTM on weak-supervision pairs with :func:`pair_mse_loss`
   ``MSE(t_i . t_j, R_ij)``, ``R`` = 1 / 0.6 / 0 (same / citing / random article);
2. image: the Siamese CNN on triplets of visually similar figures with
   :func:`triplet_hinge_loss` ``max(0, 1 + f_q . f_- - f_q . f_+)`` (Table 3 fuses the CNN
   trained with the hinge loss; positives: related pairs with SSIM >= 0.5, negatives: SSIM < 0.3);
3. fusion: batch norm + dense on the frozen features, again with ``MSE(f_i . f_j, R_ij)``.

``loss="info-nce"`` (beyond the seed, the recipe that made gcn-v7 work) trains the text and fusion
stages with :func:`soft_info_nce_loss` instead: batches of related pairs (``R > 0``), every other
figure of the batch a negative unless the relation grades it (same article 1, citing 0.6).

Adam, learning rate 0.01, batch 64, 3 epochs (seed section 5.1). Checkpoints are
``torch.save`` dicts with ``"family": "figure"`` (:func:`save_figure_checkpoint`).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from tqdm import tqdm

from mathsearch.encoders.checkpoints import read_checkpoint
from mathsearch.encoders.figure_data import FigureCorpus, ssim
from mathsearch.encoders.figure_encoder import FigureEncoder, FigureEncoderConfig
from mathsearch.encoders.train_loop import LoopSchedule, LoopState, run_loop
from mathsearch.indexer.figure_features import FigureFeatures, FigureVocabulary

logger = logging.getLogger(__name__)

__all__ = [
    "CHECKPOINT_FORMAT",
    "FigureTrainConfig",
    "corpus_vectors",
    "load_figure_checkpoint",
    "pair_ce_loss",
    "pair_mse_loss",
    "save_figure_checkpoint",
    "soft_info_nce_loss",
    "to_tensors",
    "train_figure_encoder",
    "triplet_hinge_loss",
]

CHECKPOINT_FORMAT = "mathsearch-figure-checkpoint/1"
LOSSES = ("mse", "ce", "info-nce")


class FigureTrainingError(ValueError):
    """A configuration or checkpoint that cannot be used."""


def pair_mse_loss(a: Tensor, b: Tensor, score: Tensor) -> Tensor:
    """Seed section 3, "Loss Function": ``mean_k (a_k . b_k - R_k)^2``.

    a, b: ``(B, D)`` vectors of the two figures; score: ``(B,)`` weak-supervision ``R``.

    >>> float(pair_mse_loss(torch.ones(1, 2), torch.ones(1, 2), torch.tensor([1.0])))
    1.0
    """
    return ((a * b).sum(dim=1) - score).pow(2).mean()


def pair_ce_loss(a: Tensor, b: Tensor, score: Tensor) -> Tensor:
    """``CE(sigmoid(a . b), L)`` with ``L = [R > 0]`` (seed section 3)."""
    return nn.functional.binary_cross_entropy_with_logits((a * b).sum(dim=1), (score > 0).float())


def soft_info_nce_loss(a: Tensor, b: Tensor, relation: Tensor, temperature: float = 0.05) -> Tensor:
    """In-batch contrastive loss with the seed's graded relation as soft targets.

    With ``s_kl = cos(a_k, b_l) / tau`` and ``t_kl = R_kl / sum_m R_km`` (``R`` from seed
    section 4: 1 same article, 0.6 citing, 0 other), the loss is the mean of the two
    directions' cross-entropies::

        L = -1/(2B) sum_k [ sum_l t_kl log softmax_l(s_k.) + sum_l t'_lk log softmax_l(s_.k) ]

    where ``t'`` normalises ``R``'s columns. The seed's MSE regresses each pair's dot product on
    ``R`` alone; here every other figure of the batch is a negative unless ``R`` grades it.

    Args:
        a, b: ``(B, D)`` vectors of the pairs' two sides (pair ``k`` is related: ``R_kk > 0``).
        relation: ``(B, B)`` ``R`` of ``a_k`` against ``b_l``.
        temperature: ``tau`` (default 0.05).

    >>> x = torch.eye(3)
    >>> low = soft_info_nce_loss(x, x, torch.eye(3))
    >>> high = soft_info_nce_loss(x, x.flip(0), torch.eye(3))
    >>> bool(low < 0.01 < high)
    True
    """
    logits = nn.functional.normalize(a, dim=1) @ nn.functional.normalize(b, dim=1).T / temperature
    rows = relation / relation.sum(dim=1, keepdim=True).clamp(min=1e-12)
    cols = relation.T / relation.T.sum(dim=1, keepdim=True).clamp(min=1e-12)
    forward = -(rows * logits.log_softmax(dim=1)).sum(dim=1).mean()
    backward = -(cols * logits.T.log_softmax(dim=1)).sum(dim=1).mean()
    return (forward + backward) / 2


def triplet_hinge_loss(query: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
    """``mean max(0, 1 + f_q . f_- - f_q . f_+)`` (seed section 3); all ``(B, D)``."""
    return (1 + (query * negative).sum(1) - (query * positive).sum(1)).clamp(min=0).mean()


@dataclass
class FigureTrainConfig:
    """Training settings (defaults: seed section 5.1)."""

    epochs: int = 3
    batch_size: int = 64
    lr: float = 0.01
    loss: str = "mse"
    temperature: float = 0.05
    max_pairs: int = 20_000
    image_triplets: int = 4_000
    ssim_positive: float = 0.5
    ssim_negative: float = 0.3
    seed: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise FigureTrainingError(f"loss must be one of {LOSSES}, not {self.loss!r}")
        if self.epochs < 1 or self.batch_size < 2 or self.lr <= 0 or self.temperature <= 0:
            raise FigureTrainingError(
                "epochs >= 1, batch_size >= 2, lr > 0 and temperature > 0 are needed"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def to_tensors(features: FigureFeatures) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The model's four inputs as tensors."""
    return (
        torch.from_numpy(features.tokens),
        torch.from_numpy(features.lengths),
        torch.from_numpy(features.images),
        torch.from_numpy(features.has_image),
    )


def image_triplets(corpus: FigureCorpus, rows: np.ndarray, config: FigureTrainConfig) -> np.ndarray:
    """``(n, 3)`` (query, positive, negative) figure indices for the image model (seed section 4:
    related pairs with SSIM >= 0.5, random negatives with SSIM < 0.3)."""
    rng = np.random.default_rng(config.seed + 1)
    with_image = rows[corpus.features.has_image[rows, 0] > 0]
    if len(with_image) < 3:
        return np.zeros((0, 3), dtype=np.int64)
    images = corpus.features.images
    i, j = np.triu_indices(len(with_image), k=1)
    i, j = with_image[i], with_image[j]
    related = corpus.relation(i, j) > 0
    positives = [
        (a, b)
        for a, b in zip(i[related], j[related], strict=True)
        if ssim(images[a], images[b]) >= config.ssim_positive
    ]
    out = []
    for a, b in positives:
        for q, p in ((a, b), (b, a)):
            for _ in range(10):
                n = int(rng.choice(with_image))
                if corpus.relation(np.asarray([q]), np.asarray([n]))[0] == 0 and (
                    ssim(images[q], images[n]) < config.ssim_negative
                ):
                    out.append((q, p, n))
                    break
    triplets = np.asarray(out, dtype=np.int64).reshape(-1, 3)
    if len(triplets) > config.image_triplets:
        triplets = triplets[rng.choice(len(triplets), config.image_triplets, replace=False)]
    return triplets


def _frozen_features(model: FigureEncoder, features: FigureFeatures) -> tuple[Tensor, Tensor]:
    """Text and image features of every figure (eval mode, no gradient)."""
    model.eval()
    return (
        torch.from_numpy(corpus_vectors(model, features, "text")),
        torch.from_numpy(corpus_vectors(model, features, "image")),
    )


def _batches(count: int, size: int, rng: np.random.Generator) -> list[np.ndarray]:
    order = rng.permutation(count)
    return [order[s : s + size] for s in range(0, count, size) if len(order[s : s + size]) > 1]


def _batch_count(count: int, size: int) -> int:
    """How many batches :func:`_batches` cuts (single-row remainders dropped)."""
    return sum(1 for s in range(0, count, size) if min(size, count - s) > 1)


class _Stages:
    """The three stages of :func:`train_figure_encoder`, each one :func:`run_loop` over its
    batches (text pairs, image triplets, fusion pairs)."""

    def __init__(  # noqa: PLR0917 - one private call site
        self,
        model: FigureEncoder,
        corpus: FigureCorpus,
        config: FigureTrainConfig,
        rng: np.random.Generator,
        pairs: np.ndarray,
        scores: Tensor,
        triplets: np.ndarray,
        pair_loss: Any,
        bar: Any,
    ) -> None:
        self.model, self.corpus, self.config, self.rng = model, corpus, config, rng
        self.pairs, self.scores, self.triplets, self.pair_loss = pairs, scores, triplets, pair_loss
        self.bar = bar
        self.tokens, self.lengths, self.images, self.flags = to_tensors(corpus.features)
        self.frozen: tuple[Tensor, Tensor] | None = None
        self.batches: list[np.ndarray] = []

    def train(self, name: str, part: nn.Module, count: int) -> list[float | None]:
        """Train ``part`` for the configured epochs; the mean loss of each epoch."""
        config, model = self.config, self.model
        model.eval()
        part.train()
        optimiser = torch.optim.Adam(part.parameters(), lr=config.lr)
        means: list[float | None] = []
        per_epoch = _batch_count(count, config.batch_size)
        if per_epoch == 0:  # no batch: the epochs still draw their (empty) orders
            for _ in range(config.epochs):
                _batches(count, config.batch_size, self.rng)
                means.append(None)
            return means

        def start_epoch(state: LoopState) -> None:
            self.batches = _batches(count, config.batch_size, self.rng)

        def step(state: LoopState) -> float:
            loss = self.loss(name, self.batches[state.step % per_epoch])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            return float(loss.item())

        def end_epoch(state: LoopState, losses: list[float]) -> None:
            means.append(float(np.mean(losses)))
            logger.info("stage %s: mean loss %s", name, means[-1])

        run_loop(
            LoopSchedule(total_steps=config.epochs * per_epoch, steps_per_epoch=per_epoch),
            step,
            start_epoch=start_epoch,
            end_epoch=end_epoch,
            postfix=lambda state: {"stage": name, "loss": f"{state.losses[-1]:.4f}"},
            bar=self.bar,
        )
        return means

    def loss(self, name: str, batch: np.ndarray) -> Tensor:
        """The loss of one batch of the stage ``name``."""
        model = self.model
        if name == "image":
            rows = torch.from_numpy(self.triplets[batch])
            q, p, n = (model.image(self.images[rows[:, k]]) for k in range(3))
            return triplet_hinge_loss(q, p, n)
        rows = torch.from_numpy(np.concatenate([self.pairs[batch, 0], self.pairs[batch, 1]]))
        lengths = self.lengths
        if name == "text":
            width = max(int(lengths[rows].max()), 1)  # causal: padding cut off
            out = model.text(self.tokens[rows, :width], lengths[rows])
        else:  # the text and image models are frozen: their features once
            if self.frozen is None:
                self.frozen = _frozen_features(model, self.corpus.features)
            text, image = self.frozen
            out = model.fuse(text[rows], image[rows], lengths[rows], self.flags[rows])
        a, b = out[: len(batch)], out[len(batch) :]
        if self.config.loss == "info-nce":
            left, right = self.pairs[batch, 0], self.pairs[batch, 1]
            grid = self.corpus.relation(np.repeat(left, len(batch)), np.tile(right, len(batch)))
            relation = torch.from_numpy(grid.reshape(len(batch), len(batch)))
            return soft_info_nce_loss(a, b, relation, self.config.temperature)
        return self.pair_loss(a, b, self.scores[torch.from_numpy(batch)])


def train_figure_encoder(
    corpus: FigureCorpus,
    train_rows: np.ndarray,
    config: FigureTrainConfig,
    model: FigureEncoder | None = None,
) -> tuple[FigureEncoder, dict[str, Any]]:
    """Train text, image and fusion models in turn; returns the model (eval mode) and history
    (mean loss per stage and epoch, pair and triplet counts, seconds)."""
    torch.manual_seed(config.seed)
    vocab = corpus.vocabulary
    model = model or FigureEncoder(
        FigureEncoderConfig(vocab.size, image_size=vocab.image_size, channels=vocab.channels)
    )
    pairs = corpus.pairs(train_rows, config.seed, config.max_pairs)
    if config.loss == "info-nce":  # related pairs only: the batch brings the negatives
        pairs = pairs[corpus.relation(pairs[:, 0], pairs[:, 1]) > 0]
    scores = torch.from_numpy(corpus.relation(pairs[:, 0], pairs[:, 1]))
    triplets = image_triplets(corpus, train_rows, config)
    pair_loss = pair_mse_loss if config.loss == "mse" else pair_ce_loss
    rng = np.random.default_rng(config.seed)
    stages = [
        ("text", model.text, len(pairs)),
        ("image", model.image, len(triplets)),
        ("fusion", nn.ModuleList([model.norm, model.dense]), len(pairs)),
    ]
    total = sum(config.epochs * len(_batches(n, config.batch_size, rng)) for _, _, n in stages)
    bar = tqdm(
        total=total,
        disable=None if config.progress else True,
        desc="train figure",
        unit="step",
        dynamic_ncols=True,
    )
    history: dict[str, Any] = {
        "pairs": len(pairs),
        "image_triplets": len(triplets),
        "losses": {},
    }
    start = time.perf_counter()
    stage = _Stages(model, corpus, config, rng, pairs, scores, triplets, pair_loss, bar)
    for name, part, count in stages:
        history["losses"][name] = stage.train(name, part, count)
    bar.close()
    history["seconds"] = time.perf_counter() - start
    model.eval()
    return model, history


def save_figure_checkpoint(
    path: str | Path, model: FigureEncoder, vocabulary: FigureVocabulary, **meta: Any
) -> Path:
    """``torch.save`` the model with ``family: figure``, its config, vocabulary and ``meta``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": CHECKPOINT_FORMAT,
        "family": "figure",
        "model_config": model.config.to_dict(),
        "vocabulary": vocabulary.to_dict(),
        "vocab_hash": vocabulary.content_hash,
        "model": model.state_dict(),
        **meta,
    }
    tmp = path.with_name(path.name + ".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)
    return path


def load_figure_checkpoint(
    path: str | os.PathLike[str],
) -> tuple[FigureEncoder, FigureVocabulary, dict[str, Any]]:
    """The model (eval mode), its vocabulary and the checkpoint's other entries.

    Raises:
        CheckpointError: unreadable or not a figure checkpoint.
    """
    data = read_checkpoint(path, CHECKPOINT_FORMAT)
    v = data["vocabulary"]
    vocabulary = FigureVocabulary(list(v["words"]), v["max_words"], v["image_size"], v["channels"])
    model = FigureEncoder(FigureEncoderConfig.from_dict(dict(data["model_config"])))
    model.load_state_dict(data["model"])
    model.eval()
    meta = {k: val for k, val in data.items() if k not in ("model", "vocabulary")}
    return model, vocabulary, meta


def corpus_vectors(
    model: FigureEncoder, features: FigureFeatures, part: str = "figure", batch_size: int = 256
) -> np.ndarray:
    """Vectors of every featurised figure (eval mode): ``part`` ``figure`` (the fused
    embedding), ``text`` (LSTM features) or ``image`` (CNN features); float32 ``(N, d)``."""
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(features), batch_size):
            tokens, lengths, images, flags = to_tensors(
                features.take(np.arange(start, min(start + batch_size, len(features))))
            )
            tokens = tokens[:, : max(int(lengths.max()), 1)]  # causal LSTM: padding cut off
            if part == "text":
                out.append(model.text(tokens, lengths))
            elif part == "image":
                out.append(model.image(images))
            else:
                out.append(model(tokens, lengths, images, flags))
    return torch.cat(out).numpy().astype(np.float32)
