"""One training step, the triplet batches and the hold-out ranking score of the graph CNN.

Used by :func:`mathsearch.encoders.training.train` (see its module docstring for the losses). The
triplets,
identifier permutations and masks of step ``t`` come from generators seeded with ``(seed, t)``:
a resumed run draws exactly what the uninterrupted run would have drawn.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from mathsearch.encoders.checkpoints import (
    CHECKPOINTS,
    CheckpointError,
    check_compatible,
    load_checkpoint,
    prune,
    rng_states,
    save_checkpoint,
    set_rng_states,
)
from mathsearch.encoders.corpus import EquationCorpus
from mathsearch.encoders.gcn import GraphCNN, tree_adjacency
from mathsearch.encoders.graph_data import collate
from mathsearch.encoders.lexical_negatives import mine_lexical_negatives
from mathsearch.encoders.lexical_prior import LexicalPrior, row_min_max
from mathsearch.encoders.losses import (
    HistogramLoss,
    InfoNCELoss,
    TripletLoss,
    masked_feature_loss_fn,
    same_group_mask,
)
from mathsearch.encoders.masking import MaskingHeads, mask_nodes
from mathsearch.encoders.notation_groups import notation_groups
from mathsearch.encoders.packed_corpus import PackedCorpus
from mathsearch.encoders.sampler import TripletArrays, TripletSampler
from mathsearch.encoders.subformula_crop import container_tags, crop_tree, packed_with_crops
from mathsearch.encoders.torch_setup import keep_large_allocations
from mathsearch.encoders.train_config import TrainConfig, TrainingError
from mathsearch.indexer.vocabulary import Vocabulary

logger = logging.getLogger(__name__)

__all__ = [
    "PreparedBatch",
    "TrainState",
    "TripletBatches",
    "evaluate_ranking",
    "similarity_loss",
]

_EVAL_CHUNK = 512


def _cpu_has_bf16() -> bool:
    """Whether oneDNN has fast bf16 kernels on this CPU (False when torch cannot tell)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def _seed_int(*parts: int) -> int:
    return int(np.random.SeedSequence(list(parts)).generate_state(1, np.uint64)[0] >> 1)


class TripletBatches:
    """The triplets of step ``t``: fresh draws seeded with (seed, t), or a shuffled pool."""

    def __init__(
        self,
        corpus: EquationCorpus,
        config: TrainConfig,
        steps_per_epoch: int,
        packed: PackedCorpus | None = None,
    ) -> None:
        """``packed``: the run's packed corpus, if it has one (``hard_batches`` and
        ``bm25_negatives`` read its columns instead of packing the corpus again)."""
        self.config = config
        self.steps_per_epoch = steps_per_epoch
        self.sampler = TripletSampler(corpus, config.mixture, [config.seed, 0])
        self.pool: TripletArrays | None = None
        self._order: tuple[int, np.ndarray] | None = None
        if config.triplet_pool:
            self.pool = self.sampler.sample_arrays(config.triplet_pool)
            logger.info("triplet pool: %s", self.pool.kind_counts())
        #: papers of each notation group (``hard_batches``), as one array per group
        self.group_papers: list[np.ndarray] = []
        #: ``bm25_negatives``: each equation's best BM25 matches among other papers (-1: none)
        self.lexical: np.ndarray | None = None
        if config.hard_batches or config.bm25_negatives:
            if packed is None:
                packed = PackedCorpus.from_corpus(corpus)
            if config.hard_batches:
                self.group_papers = _notation_group_papers(corpus, config, packed)
            if config.bm25_negatives:
                self.lexical = mine_lexical_negatives(
                    packed, corpus.eq_paper, int(config.bm25_negatives)
                )

    def _lexical_negatives(self, triplets: TripletArrays, step: int) -> TripletArrays:
        """``triplets`` with each negative one of its anchor's mined BM25 matches, drawn
        uniformly (the sampler's uniform negative where the anchor has none)."""
        if self.lexical is None:
            return triplets
        rng = np.random.default_rng([self.config.seed, 7, step])
        candidates = self.lexical[triplets.anchors]
        found = (candidates >= 0).sum(axis=1)
        pick = np.minimum((rng.random(found.shape[0]) * found).astype(np.int64), found - 1)
        mined = candidates[np.arange(found.shape[0]), np.maximum(pick, 0)]
        negatives = np.where(found > 0, mined, triplets.negatives)
        return TripletArrays(triplets.anchors, triplets.positives, negatives, triplets.kinds)

    def _restrict(self, step: int) -> None:
        """Anchors of step ``step`` from ``hard_batches`` notation groups drawn at random."""
        rng = np.random.default_rng([self.config.seed, 5, step])
        order = rng.permutation(len(self.group_papers))
        chosen: list[np.ndarray] = []
        for group in order:
            chosen.append(self.group_papers[group])
            if len(chosen) >= self.config.hard_batches and (
                self.sampler.restrict_anchors(np.concatenate(chosen)) > 0
            ):
                return
        self.sampler.restrict_anchors(None)

    def __call__(self, step: int) -> TripletArrays:
        size = self.config.batch_size
        if self.pool is None:
            if self.group_papers:
                self._restrict(step)
            self.sampler.reseed([self.config.seed, 1, step])
            triplets = self.sampler.sample_arrays(size, self.config.pairs_per_paper)
            return self._lexical_negatives(triplets, step)
        epoch, index = divmod(step, self.steps_per_epoch)
        if self._order is None or self._order[0] != epoch:
            rng = np.random.default_rng([self.config.seed, 2, epoch])
            self._order = (epoch, rng.permutation(len(self.pool)))
        take = np.take(self._order[1], np.arange(index * size, (index + 1) * size), mode="wrap")
        pool = self.pool
        triplets = TripletArrays(
            pool.anchors[take], pool.positives[take], pool.negatives[take], pool.kinds[take]
        )
        return self._lexical_negatives(triplets, step)


def _notation_group_papers(
    corpus: EquationCorpus, config: TrainConfig, packed: PackedCorpus
) -> list[np.ndarray]:
    n_groups = min(int(config.notation_groups), corpus.num_papers)
    groups = notation_groups(
        packed.char, packed.offsets, corpus.eq_paper, corpus.num_papers, n_groups, config.seed
    )
    order = np.argsort(groups, kind="stable")
    bounds = np.searchsorted(groups[order], np.arange(n_groups + 1))
    return [order[bounds[g] : bounds[g + 1]] for g in range(n_groups) if bounds[g + 1] > bounds[g]]


def similarity_loss(config: TrainConfig) -> nn.Module:
    if config.loss == "histogram":
        return HistogramLoss(config.histogram_bins)
    if config.loss == "infonce":
        return InfoNCELoss(config.infonce_scale)
    return TripletLoss(config.margin, swap=config.loss == "ecml", squared=config.loss == "ecml")


@torch.no_grad()
def evaluate_ranking(
    model: GraphCNN,
    corpus: EquationCorpus,
    triplets: list[tuple[int, int, int]],
    device: torch.device | str = "cpu",
) -> float:
    """Hold-out ranking score: the fraction of triplets with ``<a, p> > <a, n>`` (eq. 3)."""
    from mathsearch.encoders.evaluation import ranking_score

    wanted = sorted({i for triplet in triplets for i in triplet})
    was_training = model.training
    model.eval()
    try:
        parts = []
        for start in range(0, len(wanted), _EVAL_CHUNK):
            chunk = [corpus.graphs[i] for i in wanted[start : start + _EVAL_CHUNK]]
            parts.append(model(collate(chunk).to(device)).double().cpu())
    finally:
        model.train(was_training)
    embeddings = torch.cat(parts).numpy()
    row = {i: r for r, i in enumerate(wanted)}
    a, p, n = (np.array([row[t[k]] for t in triplets]) for k in range(3))
    pos = (embeddings[a] * embeddings[p]).sum(axis=1)
    neg = (embeddings[a] * embeddings[n]).sum(axis=1)
    return ranking_score(pos, neg)


@dataclass
class PreparedBatch:
    """What :meth:`TrainState.prepare` builds for one step (the network not yet involved)."""

    batch: Any
    masked: Any | None
    mask: Tensor | None
    targets: Any | None
    ignore: Tensor | None  # infonce: (B, B) or, with bm25_negatives, (B, 2B) left out
    adjacency: Tensor | None = None  # packed: the batch's sparse A + I (same for the masked one)
    prior: Tensor | None = None  # infonce with bm25_prior: w * row-normalised BM25, like ignore
    positives: Tensor | None = None  # infonce, same_paper_positives: the pairs ignore would hold


class TrainState:
    """State of one training run (model, heads, optimiser, schedule, history)."""

    def __init__(
        self,
        config: TrainConfig,
        corpus: EquationCorpus,
        vocabulary: Vocabulary,
        steps_per_epoch: int,
    ) -> None:
        self.config = config
        self.corpus = corpus
        self.vocabulary = vocabulary
        self.device = config.resolve_device()
        if config.threads:
            torch.set_num_threads(int(config.threads))
        if self.device.type == "cpu":
            keep_large_allocations()
        if config.amp and self.device.type == "cpu" and not _cpu_has_bf16():
            logger.warning(
                "--amp on a CPU without bf16 matrix units (AMX / AVX512-BF16): bf16 products "
                "are emulated there and usually slower than float32"
            )
        self.steps_per_epoch = steps_per_epoch
        self.total_steps = config.epochs * steps_per_epoch
        torch.manual_seed(config.seed)
        self.model = GraphCNN(config.model).to(self.device)
        self.heads: MaskingHeads | None = None
        params = list(self.model.parameters())
        if config.use_masking:
            self.heads = MaskingHeads(config.model.hidden, config.model.sizes).to(self.device)
            params += list(self.heads.parameters())
        self.similarity = similarity_loss(config).to(self.device)
        params += list(self.similarity.parameters())  # infonce: the learned scale
        self.optimizer: torch.optim.Optimizer
        if config.weight_decay:
            self.optimizer = torch.optim.AdamW(
                params, lr=config.lr, weight_decay=config.weight_decay
            )
        else:
            self.optimizer = torch.optim.Adam(params, lr=config.lr)
        total = self.total_steps
        #: seconds spent in training steps, over resumes (the time-budget schedule reads it)
        self.elapsed = 0.0
        budget = config.time_budget

        def factor(step: int) -> float:
            if budget:
                return max(0.0, 1.0 - self.elapsed / budget)
            return max(0.0, 1.0 - step / total)

        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)
        self.packed = PackedCorpus.from_corpus(corpus) if config.packed else None
        #: ``bm25_prior``: the training corpus's BM25 statistics
        self.lexical_prior = (
            LexicalPrior(self.packed) if config.bm25_prior and self.packed is not None else None
        )
        self.containers = container_tags(vocabulary) if config.crop_rate else set()
        self.step = 0
        self.evaluations: list[dict[str, float]] = []
        self.epochs: list[dict[str, float]] = []
        self.holdout: tuple[EquationCorpus, list[tuple[int, int, int]]] | None = None

    def set_holdout(self, corpus: EquationCorpus, triplets: list[tuple[int, int, int]]) -> None:
        """Evaluate the ranking score on these triplets of the test corpus."""
        self.holdout = (corpus, triplets)

    def evaluate(self) -> None:
        """Log (and keep) the hold-out ranking score at this step, once per step."""
        if self.holdout is None or (self.evaluations and self.evaluations[-1]["step"] == self.step):
            return
        from mathsearch.encoders.evaluation import ranking_confidence_bound

        corpus, triplets = self.holdout
        score = evaluate_ranking(self.model, corpus, triplets, self.device)
        bound = ranking_confidence_bound(corpus.num_papers, 0.05)
        self.evaluations.append(
            {
                "step": self.step,
                "epoch": self.step / self.steps_per_epoch,
                "ranking_score": score,
                "bound_95": bound,
            }
        )
        logger.info(
            "step %d: hold-out ranking score %.4f (+-%.3f at 95%%, %d papers, %d triplets)",
            self.step,
            score,
            bound,
            corpus.num_papers,
            len(triplets),
        )

    def end_epoch(self, recent: list[dict[str, float]]) -> None:
        """Keep and log the mean losses of the epoch that just ended."""
        summary: dict[str, float] = {
            "epoch": self.step // self.steps_per_epoch,
            "step": self.step,
        }
        for key in ("loss", "similarity", "masking"):
            summary[key] = float(np.mean([x[key] for x in recent]))
        self.epochs.append(summary)
        logger.info(
            "epoch %d (step %d): loss %.4f (similarity %.4f, masking %.4f)",
            summary["epoch"],
            self.step,
            summary["loss"],
            summary["similarity"],
            summary["masking"],
        )

    def state(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "total_steps": self.total_steps,
            "vocab_hash": self.corpus.vocab_hash,
            "model_config": self.config.model.to_dict(),
            "train_config": self.config.to_dict(),
            "model": self.model.state_dict(),
            "heads": self.heads.state_dict() if self.heads is not None else None,
            "similarity": self.similarity.state_dict(),
            "elapsed": self.elapsed,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng": rng_states(),
            "history": {"evaluations": self.evaluations, "epochs": self.epochs},
        }

    def _compatible_checkpoint(self, path: str | Path) -> dict[str, Any]:
        """The checkpoint at ``path``, refused unless its vocabulary and network are this run's."""
        data = load_checkpoint(path, self.device)
        check_compatible(data, path, self.corpus.vocab_hash, self.config.model, "this run")
        return data

    def initialise_from(self, path: str | Path) -> None:
        """Start from the model weights of another run's checkpoint (fine-tuning).

        Only the network (and the infonce scale, when both runs learn one) is taken; the
        optimiser, schedule, step and history start fresh, as in a new run.

        Raises:
            CheckpointError: another vocabulary or model configuration, or a bad file.
        """
        data = self._compatible_checkpoint(path)
        self.model.load_state_dict(data["model"])
        if (
            data.get("similarity")
            and self.similarity.state_dict().keys() == data["similarity"].keys()
        ):
            self.similarity.load_state_dict(data["similarity"])
        logger.info("initialised from %s (its step %d)", path, int(data["step"]))

    def restore(self, path: str | Path) -> None:
        data = self._compatible_checkpoint(path)
        if "optimizer" not in data:
            raise CheckpointError(
                f"{path} holds no optimiser state (a model soup?): start a new run from it "
                "with --init instead of --resume"
            )
        if (data["heads"] is None) != (self.heads is None):
            raise CheckpointError(f"{path}: masking was {'off' if data['heads'] is None else 'on'}")
        saved = data["train_config"]
        for key in ("lr", "batch_size", "seed", "loss", "epochs", "steps_per_epoch"):
            if saved.get(key) != getattr(self.config, key):
                logger.warning(
                    "resuming with %s=%r (checkpoint: %r)",
                    key,
                    getattr(self.config, key),
                    saved.get(key),
                )
        self.model.load_state_dict(data["model"])
        if self.heads is not None:
            self.heads.load_state_dict(data["heads"])
        if data.get("similarity"):
            self.similarity.load_state_dict(data["similarity"])
        self.elapsed = float(data.get("elapsed", 0.0))
        self.optimizer.load_state_dict(data["optimizer"])
        self.scheduler.load_state_dict(data["scheduler"])
        set_rng_states(data["rng"])
        self.step = int(data["step"])
        self.evaluations = list(data["history"]["evaluations"])
        self.epochs = list(data["history"]["epochs"])
        logger.info("resumed from %s at step %d of %d", path, self.step, self.total_steps)

    def prepare(self, triplets: TripletArrays, step: int | None = None) -> PreparedBatch:
        """The data side of step ``step`` (default: the current one): the graph batch of the
        triplets (anchors, positives[, negatives]), identifiers permuted, nodes masked.

        Everything random comes from generators seeded with ``(seed, step)``.
        """
        config = self.config
        step = self.step if step is None else step
        parts = [triplets.anchors, triplets.positives]
        if config.loss != "infonce" or config.bm25_negatives:
            parts.append(triplets.negatives)
        order = np.concatenate(parts)
        # the step's graphs as a packed corpus (crops in place)
        step_graphs: PackedCorpus | None = None
        if self.packed is not None and config.crop_rate:
            step_graphs = self._cropped_graphs(self.packed, order, len(triplets), step)
            batch = step_graphs.batch(np.arange(order.size))
        elif self.packed is not None:
            batch = self.packed.batch(order)
        else:
            batch = collate([self.corpus.graphs[i] for i in order.tolist()])
        if config.use_augmentation:
            from mathsearch.encoders.augment import permute_identifiers

            rng = np.random.default_rng([config.seed, 3, step])
            batch = permute_identifiers(batch, self.vocabulary, rng, config.mean_swaps)
        masked = mask = targets = None
        if self.heads is not None:
            generator = torch.Generator().manual_seed(_seed_int(config.seed, 4, step))
            masked, mask, targets = mask_nodes(batch, config.mask_rate, generator)
        ignore = positives = None
        if config.loss == "infonce" and (
            config.infonce_ignore_same_paper or config.same_paper_positives
        ):
            papers = torch.from_numpy(self.corpus.eq_paper[order])
            ignore = same_group_mask(papers[: len(triplets)])
            if config.bm25_negatives:  # the extra columns: negatives of the anchor's paper
                extra = papers[: len(triplets), None] == papers[None, 2 * len(triplets) :]
                ignore = torch.cat([ignore, extra], dim=1)
            if config.same_paper_positives:  # the same pairs, counted as positives instead
                ignore, positives = None, ignore
        adjacency = None
        if self.packed is not None and not config.amp:  # autocast sums row-wise (gcn.aggregate)
            adjacency = tree_adjacency(batch.edge_index, int(batch.x_tag.numel())).coalesce()
        prior = None
        # anchors as queries, the candidates as documents (the prior exists only when packed)
        if self.lexical_prior is not None and self.packed is not None:
            if step_graphs is None:
                step_graphs = packed_with_crops(self.packed, order, {})
            beta = row_min_max(self.lexical_prior.scores(step_graphs, len(triplets)))
            prior = torch.from_numpy(beta * np.float32(config.bm25_prior))
        return PreparedBatch(batch, masked, mask, targets, ignore, adjacency, prior, positives)

    def _cropped_graphs(
        self, packed: PackedCorpus, order: np.ndarray, pairs: int, step: int
    ) -> PackedCorpus:
        """``order``'s graphs (of ``packed``, the run's packed corpus) with a ``crop_rate``
        share of the anchors (the first ``pairs`` slots, updated in place) replaced by a
        sub-formula crop of their pair's positive."""
        rng = np.random.default_rng([self.config.seed, 6, step])
        crops = {}
        for i in np.flatnonzero(rng.random(pairs) < self.config.crop_rate).tolist():
            graph = int(order[pairs + i])
            lo, hi = int(packed.offsets[graph]), int(packed.offsets[graph + 1])
            crop = crop_tree(
                packed.parent[lo:hi], packed.tag[lo:hi], packed.pos[lo:hi], self.containers, rng
            )
            if crop is not None:
                crops[i] = crop
                order[i] = graph
        return packed_with_crops(packed, order, crops)

    def _forward(self, batch: Any, adjacency: Tensor | None) -> tuple[Tensor, Tensor]:
        batch = batch.to(self.device)
        if self.packed is None:
            return self.model.forward_with_states(batch)
        if adjacency is not None:
            adjacency = adjacency.to(self.device)
        return self.model.forward_ids(
            batch.x_tag, batch.x_attr, batch.x_char, batch.pos, batch.edge_index, batch.batch,
            batch.ptr, adjacency,
        )  # fmt: skip

    def _losses(self, prepared: PreparedBatch) -> tuple[Tensor, Tensor, Tensor]:
        config = self.config
        if self.heads is not None and config.shared_masking_pass:
            embeddings, states = self._forward(prepared.masked, prepared.adjacency)
        else:
            embeddings, states = self._forward(prepared.batch, prepared.adjacency)
            if self.heads is not None:
                states = self._forward(prepared.masked, prepared.adjacency)[1]
        if config.loss == "infonce":
            negative = None
            if config.bm25_negatives:
                anchor, positive, negative = embeddings.chunk(3)
            else:
                anchor, positive = embeddings.chunk(2)
            ignore, prior, positives = (
                None if t is None else t.to(self.device)
                for t in (prepared.ignore, prepared.prior, prepared.positives)
            )
            similarity = self.similarity(
                anchor, positive, ignore, negative, prior, positives=positives
            )
        else:
            anchor, positive, negative = embeddings.chunk(3)
            similarity = self.similarity(anchor, positive, negative)
        loss, masking = similarity, torch.zeros((), device=similarity.device)
        if self.heads is not None:
            if prepared.mask is None or prepared.targets is None:
                raise TrainingError("masking is on, but the batch was prepared without masks")
            logits = self.heads(states, prepared.mask.to(self.device))
            t = prepared.targets
            masking = masked_feature_loss_fn(
                logits.tag,
                logits.attr,
                logits.char,
                *(x.to(self.device) for x in (t.tag, t.attr, t.char)),
            )
            loss = similarity + config.masking_weight * masking
        return loss, similarity, masking

    def optimise(self, prepared: PreparedBatch) -> dict[str, float]:
        """The network side of one step: forward, losses, backward, optimiser and schedule."""
        step = self.step
        self.model.train()
        if self.config.amp:
            with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16):
                loss, similarity, masking = self._losses(prepared)
        else:
            loss, similarity, masking = self._losses(prepared)
        if not torch.isfinite(loss):
            raise TrainingError(f"the loss is {float(loss)} at step {step}")
        lr = self.scheduler.get_last_lr()[0]
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        return {
            "step": self.step,
            "loss": loss.item(),
            "similarity": similarity.item(),
            "masking": masking.item(),
            "lr": float(lr),
        }

    def checkpoint(self) -> Path | None:
        if not self.config.checkpoint_dir:
            return None
        directory = Path(self.config.checkpoint_dir)
        state = self.state()
        save_checkpoint(directory / CHECKPOINTS / f"step-{self.step:08d}.pt", state)
        prune(directory / CHECKPOINTS, self.config.keep_checkpoints)
        path = save_checkpoint(directory / "checkpoint.pt", state)
        logger.info("checkpoint at step %d: %s", self.step, path)
        return path
