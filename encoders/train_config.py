"""Configuration of the graph-CNN training loop (:func:`mathsearch.encoders.training.train`).

The defaults are the KDD 2020 seed's (section 4.4): 20 epochs, Adam, batches of 128 triplets,
learning rate 0.0001 decreasing linearly, histogram loss with R = 64 bins (triplet margin 1),
masking task on 15% of the nodes, identifier permutation with Poisson(32) swaps, and the graph
CNN of section 4.1 (:class:`~mathsearch.encoders.gcn.GCNConfig`).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from mathsearch.encoders.gcn import GCNConfig
from mathsearch.encoders.prefetch import prefetch_enabled
from mathsearch.encoders.sampler import DEFAULT_MIXTURE

logger = logging.getLogger(__name__)

__all__ = ["LOSSES", "TrainConfig", "TrainingError"]

#: ``histogram`` (KDD 2020 eq. 2, the full model), ``triplet`` (KDD 2020 eq. 1, the "No
#: Histogram Loss" ablation), ``ecml`` (ECML 2019: triplet loss with anchor swap, squared hinge),
#: ``infonce`` (in-batch negatives, :mod:`mathsearch.encoders.losses.info_nce_loss`; beyond the
#: seeds: each step draws (anchor, positive) pairs and every other positive of the batch is a
#: negative).
LOSSES = ("histogram", "triplet", "ecml", "infonce")


class TrainingError(ValueError):
    """Training cannot start or continue with this configuration, corpus or checkpoint."""


@dataclass
class TrainConfig:
    """Hyper-parameters of :func:`mathsearch.encoders.training.train`; defaults: the seed's (section
    4.4)."""

    epochs: int = 20
    steps_per_epoch: int | None = None  # None: triplet_pool / batch, else train equations / batch
    batch_size: int = 128  # triplets per step (3 * 128 graphs; infonce: pairs, 2 * 128 graphs)
    lr: float = 1e-4  # decreases linearly to 0
    loss: str = "histogram"  # histogram | triplet | ecml
    histogram_bins: int = 64
    margin: float = 1.0
    use_masking: bool = True
    mask_rate: float = 0.15
    masking_weight: float = 1.0
    shared_masking_pass: bool = False
    use_augmentation: bool = True
    mean_swaps: float = 32.0
    mixture: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MIXTURE))
    triplet_pool: int | None = None
    seed: int = 0
    device: str = "auto"  # auto: cuda when available, else cpu
    checkpoint_dir: str | None = None
    checkpoint_every: int | None = 1000  # steps; a checkpoint is also written at the end
    keep_checkpoints: int = 3
    eval_every: int | None = None  # steps; None: after every epoch
    eval_triplets: int = 10_000
    progress: bool = True
    #: Batches cut from the packed corpus
    #: (:class:`~mathsearch.encoders.packed_corpus.PackedCorpus`) and the model's id path;
    #: False: the older per-graph collate (kept to measure against).
    packed: bool = True
    #: Seconds of training after which the run stops (the learning rate then decreases linearly
    #: over this time instead of over the steps); None: ``epochs`` decide.
    time_budget: float | None = None
    #: torch intra-op threads (None: torch's default).
    threads: int | None = None
    #: Inverse temperature the infonce loss starts from (learned, capped at 100).
    infonce_scale: float = 20.0
    #: infonce: leave the other pairs of the anchor's paper out of its softmax (weak labels).
    infonce_ignore_same_paper: bool = True
    #: infonce: count the other pairs of the anchor's paper as positives of its softmax instead
    #: (supervised contrastive, :func:`~mathsearch.encoders.losses.info_nce_loss_fn`'s
    #: ``positives``; beyond the seeds); False: ``infonce_ignore_same_paper`` decides.
    same_paper_positives: bool = False
    #: Pairs drawn from each anchor paper of a step (``K``: a step's ``batch_size`` pairs come
    #: from ``batch_size / K`` papers, ``K`` anchors of each, each with its own positive);
    #: 1: every anchor from its own uniformly drawn paper, the seed's sampler.
    pairs_per_paper: int = 1
    weight_decay: float = 0.0
    #: Hard in-batch negatives (beyond the seeds): each step draws its anchors from this many
    #: groups of papers with similar notation (:mod:`~mathsearch.encoders.notation_groups`);
    #: 0: uniform anchor papers, the seed's sampler.
    hard_batches: int = 0
    #: How many notation groups the papers are clustered into for ``hard_batches``.
    notation_groups: int = 512
    #: infonce: one extra negative per anchor, drawn from the anchor's this many best BM25
    #: matches among other papers (:mod:`~mathsearch.encoders.lexical_negatives`, beyond the
    #: seeds); 0: in-batch negatives only.
    bm25_negatives: int = 0
    #: infonce: weight ``w`` (cosine units) of a fixed BM25 prior added to every in-batch score,
    #: so the vectors learn what the lexical ranker misses
    #: (:mod:`~mathsearch.encoders.lexical_prior`, beyond the seeds); 0: no prior.
    bm25_prior: float = 0.0
    #: bf16 autocast of the matrix products (and bf16 node states), on CUDA or on the CPU (fast
    #: where the CPU has bf16 matrix units: AMX / AVX512-BF16; the weights stay float32).
    amp: bool = False
    #: Prepare step t + 1's batch on a worker thread while step t trains
    #: (:mod:`~mathsearch.encoders.prefetch`): ``auto`` (on for CUDA), ``on``, ``off``.
    prefetch: str = "auto"
    #: A checkpoint whose model weights (and infonce scale) the run starts from instead of a
    #: random initialisation (fine-tuning; its optimiser, schedule and step are not taken).
    init_from: str | None = None
    #: infonce: the fraction of each batch's pairs whose anchor is replaced by a sub-formula crop
    #: of the pair's positive (:mod:`~mathsearch.encoders.subformula_crop`, beyond the seeds:
    #: fragments as queries); 0: the seed's pairs only.
    crop_rate: float = 0.0
    #: How the corpus was split (``test_fraction``, ``seed``, ``limit``), so eval can redo it.
    split: dict[str, Any] | None = None
    model: GCNConfig = field(default_factory=GCNConfig)

    def __post_init__(self) -> None:
        if isinstance(self.model, dict):
            self.model = GCNConfig.from_dict(self.model)
        if self.loss not in LOSSES:
            raise TrainingError(f"loss must be one of {LOSSES}, not {self.loss!r}")
        for name in ("epochs", "batch_size", "eval_triplets", "keep_checkpoints"):
            if int(getattr(self, name)) < 1:
                raise TrainingError(f"{name} must be >= 1, not {getattr(self, name)}")
        if self.histogram_bins < 2:
            raise TrainingError(f"histogram_bins must be >= 2, not {self.histogram_bins}")
        for name in ("steps_per_epoch", "triplet_pool", "checkpoint_every", "eval_every"):
            value = getattr(self, name)
            if value is not None and int(value) < 1:
                raise TrainingError(f"{name} must be >= 1 or None, not {value}")
        if int(self.pairs_per_paper) < 1:
            raise TrainingError(f"pairs_per_paper must be >= 1, not {self.pairs_per_paper}")
        if int(self.pairs_per_paper) > 1 and self.triplet_pool:
            raise TrainingError("pairs_per_paper needs fresh draws every step, not triplet_pool")
        if self.same_paper_positives and self.loss != "infonce":
            raise TrainingError("same_paper_positives needs the infonce loss")
        if int(self.hard_batches) < 0 or int(self.notation_groups) < 1:
            raise TrainingError(
                f"hard_batches must be >= 0 and notation_groups >= 1, not "
                f"{self.hard_batches} and {self.notation_groups}"
            )
        for name in ("bm25_negatives", "bm25_prior"):  # the lexical options of the infonce loss
            value = getattr(self, name)
            if not float(value) >= 0:
                raise TrainingError(f"{name} must be >= 0, not {value}")
            if value and (self.loss != "infonce" or not self.packed):
                raise TrainingError(f"{name} needs the infonce loss and packed batches")
        if self.time_budget is not None and not self.time_budget > 0:
            raise TrainingError(f"time_budget must be > 0 seconds, not {self.time_budget}")
        if self.threads is not None and int(self.threads) < 1:
            raise TrainingError(f"threads must be >= 1, not {self.threads}")
        try:
            prefetch_enabled(self.prefetch, "cpu")  # checks the mode
        except ValueError as exc:
            raise TrainingError(str(exc)) from exc
        if not 0.0 <= self.crop_rate <= 1.0:
            raise TrainingError(f"crop_rate must be in [0, 1], not {self.crop_rate}")
        if self.crop_rate and (self.loss != "infonce" or not self.packed):
            raise TrainingError("crop_rate needs the infonce loss and packed batches")
        if not self.lr > 0 or not 0.0 <= self.mask_rate <= 1.0 or self.masking_weight < 0:
            raise TrainingError("lr must be > 0, mask_rate in [0, 1], masking_weight >= 0")

    def resolve_prefetch(self, device: torch.device) -> bool:
        """Whether batches are prepared one step ahead on ``device`` (see ``prefetch``)."""
        return prefetch_enabled(self.prefetch, device.type)

    def resolve_device(self) -> torch.device:
        """``auto``: cuda when available, else cpu; a cuda device must be available."""
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            device = torch.device(self.device)
        except RuntimeError as exc:
            raise TrainingError(f"unknown device {self.device!r}: {exc}") from exc
        if device.type == "cuda" and not torch.cuda.is_available():
            raise TrainingError(f"device {self.device!r} asked for, but CUDA is not available")
        return device

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["model"] = self.model.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})
