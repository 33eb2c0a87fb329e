"""Training of the graph CNN (KDD 2020 seed, sections 4.2 and 4.4).

"We propose to train our embeddings using two self-supervised learning tasks simultaneously by
adding their respective losses": per step

* a batch of ``batch_size`` triplets (:class:`~mathsearch.encoders.sampler.TripletSampler`, section
  4.2) is
  collated into one graph batch of ``3 * batch_size`` equations (anchors, positives,
  negatives), each with its identifiers permuted when ``use_augmentation`` (Poisson(32) swaps);
* contextual similarity: the embeddings ``phi_bar`` of the batch go into the histogram loss
  (``loss="histogram"``, R = 64, the seed's full model), the triplet loss (``"triplet"``, eq. 1,
  margin 1: the "No Histogram Loss" ablation) or the ECML 2019 triplet loss (``"ecml"``: anchor
  swap and squared hinge);
* masking task (``use_masking``): 15% of the nodes of every graph are blanked and three linear
  heads predict their tag, attribute and character from ``phi(x_masked)``; the loss is the mean
  of the three cross-entropies over the masked nodes. By default the masked graphs go through the
  model in a second pass (the seed scores ``phi_bar(x)`` and ``phi(x_masked)``);
  ``shared_masking_pass`` computes both tasks from the masked graphs in one pass (cheaper);
* ``loss="infonce"`` (beyond the seed): (anchor, positive) pairs only, every other positive of
  the batch a negative (:mod:`mathsearch.encoders.losses.info_nce_loss`);
* batches are cut from the packed corpus (:mod:`mathsearch.encoders.packed_corpus`) and go through
  the
  model's id path (:meth:`GraphCNN.forward_ids`); ``time_budget`` stops a run after so many
  seconds of steps, the learning rate decreasing linearly over that time;
* ``loss = similarity + masking_weight * masking`` (weight 1: the seed's sum), Adam, learning
  rate ``lr`` decreasing linearly to 0 over ``epochs * steps_per_epoch`` steps (section 4.4:
  20 epochs, batches of 128 triplets, 0.0001).

Triplets, permutations and masks of step ``t`` come from generators seeded with
``(seed, t)``, so a run resumed from a checkpoint (:mod:`mathsearch.encoders.checkpoints`) continues
exactly
as the uninterrupted run would. With ``triplet_pool`` a fixed set of triplets is drawn once and
visited in a new order every epoch (the seed's protocol: 1M to 20M triplets); otherwise every
step draws fresh triplets. With a test corpus the hold-out ranking score (section 5, eq. 3) is
logged before training, after every epoch (or every ``eval_every`` steps) and at the end.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mathsearch.encoders.corpus import EquationCorpus
from mathsearch.encoders.gcn import GraphCNN
from mathsearch.encoders.masking import MaskingHeads
from mathsearch.encoders.prefetch import BatchPrefetcher
from mathsearch.encoders.sampler import SamplerError, holdout_triplets
from mathsearch.encoders.train_config import LOSSES, TrainConfig, TrainingError
from mathsearch.encoders.train_loop import LoopSchedule, LoopState, run_loop
from mathsearch.encoders.train_state import TrainState, TripletBatches, evaluate_ranking
from mathsearch.indexer.vocabulary import Vocabulary, default_vocabulary

logger = logging.getLogger(__name__)

__all__ = ["LOSSES", "TrainConfig", "TrainResult", "TrainingError", "evaluate_ranking", "train"]


@dataclass
class TrainResult:
    """What :func:`train` did: the model, the step reached and the logged numbers."""

    model: GraphCNN
    heads: MaskingHeads | None
    step: int
    total_steps: int
    losses: list[dict[str, float]]  # one per step run in this call
    evaluations: list[dict[str, float]]  # all of the run, resumed ones included
    epochs: list[dict[str, float]]  # mean losses per epoch, all of the run
    checkpoint: Path | None
    seconds: float
    triplets_per_second: float
    vocab_hash: str
    train_seconds: float = 0.0  # seconds in training steps over the whole run, resumes included

    def summary(self) -> dict[str, Any]:
        """JSON-able numbers (no model)."""
        last = self.losses[-1] if self.losses else {}
        return {
            "step": self.step,
            "total_steps": self.total_steps,
            "final_loss": last.get("loss"),
            "evaluations": self.evaluations,
            "epochs": self.epochs,
            "checkpoint": str(self.checkpoint) if self.checkpoint else None,
            "seconds": round(self.seconds, 3),
            "triplets_per_second": round(self.triplets_per_second, 1),
            "train_seconds": round(self.train_seconds, 1),
            "vocab_hash": self.vocab_hash,
        }


def train(
    config: TrainConfig,
    corpus_train: EquationCorpus,
    corpus_test: EquationCorpus | None = None,
    resume: str | Path | None = None,
    *,
    vocabulary: Vocabulary | None = None,
) -> TrainResult:
    """Train (or resume training) the graph CNN; see the module docstring.

    Args:
        config: hyper-parameters.
        corpus_train: the training papers' equations.
        corpus_test: held-out papers for the ranking score (optional).
        resume: a checkpoint to continue from (same model and vocabulary).
        vocabulary: the corpus's vocabulary (default: the shipped one); the augmentation needs it.

    Raises:
        TrainingError, CheckpointError, SamplerError: bad config, corpus or checkpoint.
    """
    vocabulary = vocabulary or default_vocabulary()
    if len(corpus_train) == 0:
        raise TrainingError("the training corpus is empty")
    if corpus_train.vocab_hash != vocabulary.content_hash:
        raise TrainingError(
            f"the corpus was featurised with vocabulary {corpus_train.vocab_hash[:12]}, "
            f"not {vocabulary.content_hash[:12]}"
        )
    steps_per_epoch = config.steps_per_epoch or max(
        1, math.ceil((config.triplet_pool or len(corpus_train)) / config.batch_size)
    )
    run = TrainState(config, corpus_train, vocabulary, steps_per_epoch)
    batches = TripletBatches(corpus_train, config, steps_per_epoch, run.packed)
    if corpus_test is not None and len(corpus_test):
        try:
            triplets = holdout_triplets(corpus_test, config.eval_triplets, [config.seed, 5])
        except SamplerError as exc:
            logger.warning("no hold-out ranking score: %s", exc)
        else:
            run.set_holdout(corpus_test, triplets)
    if resume is not None:
        run.restore(resume)
    else:
        if config.init_from:
            run.initialise_from(config.init_from)
        run.evaluate()  # the untrained (or the initial) model, for comparison
    logger.info(
        "training on %r: %d epochs x %d steps of %d triplets on %s (loss %s, masking %s, "
        "augmentation %s)",
        corpus_train,
        config.epochs,
        steps_per_epoch,
        config.batch_size,
        run.device,
        config.loss,
        config.use_masking,
        config.use_augmentation,
    )
    rate = 0.0

    def sync(state: LoopState) -> None:  # the run's clock drives its learning-rate schedule
        run.elapsed = state.elapsed

    def step(state: LoopState) -> dict[str, float]:
        sync(state)
        ahead = state.step + 1 if state.step + 1 < run.total_steps else None
        return run.optimise(fetch.get(state.step, ahead))

    def postfix(state: LoopState) -> dict[str, str]:
        nonlocal rate
        now = config.batch_size / max(state.last_seconds, 1e-9)
        rate = now if rate == 0.0 else 0.9 * rate + 0.1 * now
        return {"loss": f"{state.losses[-1]['loss']:.4f}", "triplets_s": f"{rate:.0f}"}

    def evaluate(state: LoopState) -> None:
        sync(state)
        run.evaluate()

    def checkpoint(state: LoopState) -> Path | None:
        sync(state)
        return run.checkpoint()

    schedule = LoopSchedule(
        total_steps=run.total_steps,
        steps_per_epoch=steps_per_epoch,
        start_step=run.step,
        elapsed=run.elapsed,
        time_budget=config.time_budget,
        eval_every=config.eval_every or 0,
        checkpoint_every=config.checkpoint_every or 0,
        progress=config.progress,
        desc="train gcn",
    )
    fetch = BatchPrefetcher(
        lambda step: run.prepare(batches(step), step),
        enabled=config.resolve_prefetch(run.device),
    )
    try:
        loop = run_loop(
            schedule,
            step,
            end_epoch=lambda state, recent: run.end_epoch(recent),
            evaluate=evaluate,
            checkpoint=checkpoint,
            postfix=postfix,
        )
    finally:
        fetch.close()
    run.elapsed = loop.elapsed
    losses, seconds = loop.losses, loop.seconds
    checkpoint_path = loop.checkpoint
    return TrainResult(
        model=run.model.eval(),
        heads=run.heads,
        step=run.step,
        total_steps=run.total_steps,
        losses=losses,
        evaluations=run.evaluations,
        epochs=run.epochs,
        checkpoint=checkpoint_path,
        seconds=seconds,
        triplets_per_second=len(losses) * config.batch_size / max(seconds, 1e-9),
        vocab_hash=corpus_train.vocab_hash,
        train_seconds=run.elapsed,
    )
