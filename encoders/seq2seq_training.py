"""Training of the ExpEmb seq2seq encoder (expemb seed, sections 3-4, appendix E).

Data (EXPEMB-E): ordered pairs of equivalent expressions from the E-Gen clusters (a held-out
share of clusters kept apart for ``eval generation``), SymPy-generated pairs
(:mod:`mathsearch.indexer.sympy_pairs`, section 4) and, optionally, pairs within SemVec training
classes
whose canonical form is not in a validation set (so the validation classes stay unseen).
EXPEMB-A trains on ``(x, x)`` of the same expressions. Teacher forcing, eq. 7 loss, AdamW
(appendix E); batches are grouped by target length to keep the stepwise decoder short.

A checkpoint (``OUT/checkpoint.pt``, ``torch.save`` of plain containers) is::

    {"family": "seq2seq", "format": "mathsearch-seq2seq-checkpoint/1", "step": 1234,
     "model_config": ExpEmbConfig.to_dict(), "vocab": [tokens...], "vocab_hash": "...",
     "model": state_dict, "run": RunConfig.to_dict(), "history": {...}}

``OUT`` also gets ``vocab.json``, ``heldout-egen.txt`` (the held-out clusters, E-Gen format),
``sympy-pairs.json`` (the generated pairs, reused by the next run with the same settings) and
``train.json``.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from mathsearch.encoders.checkpoints import CheckpointError, read_checkpoint
from mathsearch.encoders.seq2seq import ExpEmb, ExpEmbConfig, sequence_nll
from mathsearch.encoders.seq2seq_data import (
    Batch,
    EncodedPairs,
    Pair,
    TokenVocabulary,
    autoencoder_pairs,
    batch_of_ids,
    cluster_pairs,
    read_egen,
    semvec_pairs,
    split_clusters,
)
from mathsearch.encoders.train_loop import LoopResult, LoopSchedule, LoopState, run_loop

logger = logging.getLogger(__name__)

__all__ = [
    "CHECKPOINT_FORMAT",
    "LR_SCHEDULES",
    "RunConfig",
    "load_expemb",
    "lr_factor",
    "train_expemb",
]

#: ``--lr-schedule`` choices
LR_SCHEDULES = ("constant", "linear")


def lr_factor(
    schedule: str, step: int, total: int, elapsed: float = 0.0, budget: float | None = None
) -> float:
    """The learning rate's multiplier after ``step`` of ``total`` steps, ``elapsed`` seconds.

    ``constant`` is the seed's (appendix E: AdamW at a fixed rate). ``linear`` goes beyond it,
    as the graph CNN's training does: ``1 - progress``, where progress is the larger of the
    share of steps done and the share of the time budget spent, so a run cut by
    ``--time-budget`` still ends at rate 0.

    Args:
        schedule: one of :data:`LR_SCHEDULES`.
        step: steps done (0 before the first).
        total: the run's steps (epochs x steps an epoch, or ``--max-steps``).
        elapsed: seconds of training so far.
        budget: ``--time-budget`` in seconds, or None.

    Example:
        >>> lr_factor("linear", 25, 100)
        0.75
        >>> lr_factor("linear", 10, 100, elapsed=30.0, budget=60.0)
        0.5

    Raises:
        ValueError: an unknown schedule.
    """
    if schedule == "constant":
        return 1.0
    if schedule != "linear":
        raise ValueError(f"unknown learning-rate schedule {schedule!r}; choose from {LR_SCHEDULES}")
    progress = step / total if total > 0 else 1.0
    if budget:
        progress = max(progress, elapsed / budget)
    return max(0.0, 1.0 - progress)


CHECKPOINT_FORMAT = "mathsearch-seq2seq-checkpoint/1"


@dataclass
class RunConfig:
    """One training run (model settings live in :class:`ExpEmbConfig`)."""

    egen: list[str] = field(default_factory=list)
    out: str = "runs/seq2seq"
    mode: str = "equivalent"
    hidden: int = 1024
    layers: int = 1
    lr: float = 1e-4
    #: ``constant`` (the seed's) or ``linear``: ``lr`` decays to 0 over the run (:func:`lr_factor`)
    lr_schedule: str = "constant"
    #: start from this checkpoint's weights and vocabulary (a warm start; the optimiser is new)
    init: str | None = None
    batch_size: int = 64
    max_len: int = 512
    epochs: int = 20
    max_steps: int | None = None
    time_budget: float | None = None
    max_clusters: int | None = None
    held_out: float = 0.05
    per_cluster: int = 20
    generated: int = 0
    sympy_timeout: float = 1.0
    semvec: list[str] = field(default_factory=list)
    semvec_exclude: list[str] = field(default_factory=list)
    semvec_per_class: int = 20
    #: Appendix C: every pair within a class (<= 100k unordered), both directions
    all_pairs: bool = False
    #: SemVec validation files: score_5 (EQNET's denominator) after every epoch, the best kept
    validation: list[str] = field(default_factory=list)
    #: also validate every this many steps (0: after every epoch only)
    validate_every: int = 0
    #: classes drawn per validation set (None: all of them)
    validation_classes: int | None = None
    min_count: int = 2
    vocabulary: str | None = None
    seed: int = 0
    threads: int = 1
    #: ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (see ``torch_setup.resolve_device``)
    device: str = "cpu"
    #: bf16 autocast of the forward pass (the loss and the optimiser stay float32)
    amp: bool = False
    log_every: int = 50
    #: without validation sets: write checkpoint.pt every this many steps (0: only at the end)
    checkpoint_every: int = 2000
    progress: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _generated_pairs(run: RunConfig, out: Path) -> list[Pair]:
    if run.generated <= 0:
        return []
    cache = out / "sympy-pairs.json"
    key = {"expressions": run.generated, "seed": run.seed, "timeout": run.sympy_timeout}
    if cache.is_file():
        data = json.loads(cache.read_text(encoding="utf-8"))
        if data.get("key") == key:
            return [(tuple(a), tuple(b)) for a, b in data["pairs"]]
    from mathsearch.indexer.sympy_pairs import generate_pairs

    pairs = generate_pairs(run.generated, random.Random(run.seed), timeout=run.sympy_timeout)
    cache.write_text(json.dumps({"key": key, "pairs": pairs}), encoding="utf-8")
    return [(tuple(a), tuple(b)) for a, b in pairs]


def _semvec_pairs(run: RunConfig, rng: random.Random) -> list[Pair]:
    if not run.semvec:
        return []
    from mathsearch.indexer.semvec_prefix import read_semvec_prefix

    exclude = {c.canonical for path in run.semvec_exclude for c in read_semvec_prefix(path)}
    pairs: list[Pair] = []
    for path in run.semvec:
        classes = read_semvec_prefix(path)
        if run.mode == "autoencoder":  # EXPEMB-A: every expression of the training classes
            members = (m for c in classes if c.canonical not in exclude for m in c.members)
            pairs += autoencoder_pairs(members)
        else:
            pairs += semvec_pairs(
                classes, rng, run.semvec_per_class, exclude, all_pairs=run.all_pairs
            )
    return pairs


def collect_pairs(run: RunConfig, out: Path) -> tuple[list[Pair], dict[str, int]]:
    """All training pairs of ``run`` and their counts by source; writes the held-out clusters."""
    rng = random.Random(run.seed)
    clusters = read_egen(run.egen, run.max_len, run.max_clusters) if run.egen else []
    train, held = split_clusters(clusters, run.held_out)
    with open(out / "heldout-egen.txt", "w", encoding="utf-8") as handle:
        for cluster in held:
            handle.write("".join(" ".join(seq) + "\n" for seq in cluster) + "\n")
    if run.mode == "autoencoder":
        egen = autoencoder_pairs(seq for cluster in train for seq in cluster)
    else:
        egen = cluster_pairs(train, rng, run.per_cluster)
    generated = _generated_pairs(run, out)
    semvec = _semvec_pairs(run, rng)
    if run.mode == "autoencoder":
        generated = autoencoder_pairs(a for a, _ in generated)
    pairs = [p for p in egen + generated + semvec if max(len(p[0]), len(p[1])) <= run.max_len]
    counts = {
        "egen_clusters_train": len(train),
        "egen_clusters_held_out": len(held),
        "egen_pairs": len(egen),
        "sympy_pairs": len(generated),
        "semvec_pairs": len(semvec),
        "pairs": len(pairs),
    }
    return pairs, counts


def optimise_step(
    model: ExpEmb,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    *,
    device: str | torch.device = "cpu",
    amp: bool = False,
) -> float:
    """One teacher-forced step: loss (eq. 7), backward, clip at 5, AdamW; returns the loss.

    ``batch`` is moved to ``device`` (the model's); ``amp`` runs the forward pass under bf16
    autocast (no loss scaling: bf16 keeps float32's exponent range).
    """
    batch = batch.to(device)
    kind = torch.device(device).type
    with torch.autocast(kind, dtype=torch.bfloat16, enabled=amp):
        logits = model(batch.src, batch.lengths, batch.tgt_in)
    loss = sequence_nll(logits.float(), batch.tgt_out).mean()
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    optimizer.step()
    return float(loss.detach())


class _Validator:
    """score_5 on the validation sets after each epoch; the best model saved as checkpoint.pt."""

    def __init__(self, run: RunConfig, vocab: TokenVocabulary, out: Path) -> None:
        from mathsearch.indexer.semvec_prefix import read_semvec_prefix

        self.sets = {Path(path).name: read_semvec_prefix(path) for path in run.validation}
        self.vocab = vocab
        self.out = out
        self.scores: list[dict[str, Any]] = []
        self.best: dict[str, Any] | None = None

    def check(
        self, model: ExpEmb, step: int, epoch: float, history: dict[str, Any], run: RunConfig
    ) -> None:
        from mathsearch.encoders.seq2seq_eval import checkpoint_embedder, semvec_score_k

        embed = checkpoint_embedder(model, self.vocab)
        drawn = run.validation_classes
        per_set = {
            name: round(100 * semvec_score_k(embed, classes, 5, drawn, eqnet=True)["score"], 2)
            for name, classes in self.sets.items()
        }
        model.train()
        mean = round(sum(per_set.values()) / len(per_set), 2)
        row = {"step": step, "epoch": round(epoch, 3), "score_5": mean, "sets": per_set}
        self.scores.append(row)
        history["validation"] = self.scores
        logger.info("epoch %.2f (step %d): validation score_5 %.2f %s", epoch, step, mean, per_set)
        if self.best is None or mean > self.best["score_5"]:
            self.best = row
            save_checkpoint(
                self.out / "checkpoint.pt",
                model=model,
                vocab=self.vocab,
                step=step,
                run=run,
                history=history,
            )

    def summary(self) -> dict[str, Any]:
        return {"best": self.best, "epochs": self.scores}


def save_checkpoint(
    path: Path, *, model: ExpEmb, vocab: TokenVocabulary, step: int, run: RunConfig, history: Any
) -> Path:
    data = {
        "family": "seq2seq",
        "format": CHECKPOINT_FORMAT,
        "step": step,
        "model_config": model.config.to_dict(),
        "vocab": list(vocab.tokens),
        "vocab_hash": vocab.hash,
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "run": run.to_dict(),
        "history": history,
    }
    tmp = path.with_name(path.name + ".tmp")
    torch.save(data, tmp)
    tmp.replace(path)
    return path


def load_expemb(path: str | Path) -> tuple[ExpEmb, TokenVocabulary, dict[str, Any]]:
    """The trained model (eval mode), its vocabulary and the checkpoint dict.

    Raises:
        CheckpointError: unreadable, or not a seq2seq checkpoint.
    """
    data = read_checkpoint(path, CHECKPOINT_FORMAT)
    vocab = TokenVocabulary(data["vocab"])
    model = ExpEmb(ExpEmbConfig.from_dict(data["model_config"]))
    model.load_state_dict(data["model"])
    return model.eval(), vocab, data


def train_expemb(run: RunConfig) -> dict[str, Any]:
    """Train one model; returns the summary also written to ``OUT/train.json``."""
    lr_factor(run.lr_schedule, 0, 1)  # an unknown schedule fails before the data is read
    device = _prepare_torch(run)
    out = Path(run.out)
    out.mkdir(parents=True, exist_ok=True)
    pairs, counts = _training_pairs(run, out)
    setup = _setup(run, pairs, out, device)
    vocab, config, model, optimizer = setup.vocab, setup.config, setup.model, setup.optimizer
    rng = random.Random(run.seed)
    encoded = EncodedPairs.build(pairs, vocab)  # each sequence tokenised once, not per step
    del pairs
    per_epoch, total = _step_counts(run, len(encoded), config)
    history: dict[str, Any] = {"losses": [], "counts": counts}
    start = time.perf_counter()
    window: list[float] = []
    validator = _Validator(run, vocab, out) if run.validation else None
    epoch_rows: Iterator[Any] = iter(())
    factor = 1.0

    def start_epoch(state: LoopState) -> None:
        nonlocal epoch_rows
        epoch_rows = iter(encoded.batches(config.batch_size, rng))

    def optimise(state: LoopState) -> float:
        nonlocal factor, epoch_rows
        rows = next(epoch_rows, None)
        if rows is None:  # an epoch of fewer batches than per_epoch: the next pass
            epoch_rows = iter(encoded.batches(config.batch_size, rng))
            rows = next(epoch_rows)
        factor = lr_factor(
            run.lr_schedule, state.step, total, time.perf_counter() - start, run.time_budget
        )
        for group in optimizer.param_groups:
            group["lr"] = config.lr * factor
        loss = optimise_step(
            model, optimizer, batch_of_ids(encoded.take(rows)), device=device, amp=run.amp
        )
        window.append(loss)
        if (state.step + 1) % run.log_every == 0:
            mean, lr = sum(window) / len(window), config.lr * factor
            history["losses"].append({"step": state.step + 1, "loss": mean, "lr": lr})
            window.clear()
        return float(loss)

    def validate(state: LoopState) -> None:
        if validator is not None:
            validator.check(model, state.step, state.step / per_epoch, history, run)

    def save(state: LoopState) -> Path:
        path = out / "checkpoint.pt"
        return save_checkpoint(
            path, model=model, vocab=vocab, step=state.step, run=run, history=history
        )

    def postfix(state: LoopState) -> dict[str, str]:
        return {"loss": f"{history['losses'][-1]['loss']:.3f}"} if history["losses"] else {}

    model.train()
    loop = run_loop(
        LoopSchedule(
            total_steps=total, steps_per_epoch=per_epoch, time_budget=run.time_budget,
            clock="wall", eval_every=run.validate_every, eval_each_epoch=True,
            checkpoint_every=0 if validator is not None else run.checkpoint_every,
            final_checkpoint=False, progress=run.progress, desc="train seq2seq",
        ),
        optimise, start_epoch=start_epoch, evaluate=validate if validator is not None else None,
        checkpoint=save, postfix=postfix,
    )  # fmt: skip
    checkpoint = _final_checkpoint(
        run, out, setup, history, window, validator=validator, step=loop.step, per_epoch=per_epoch
    )
    summary = _summary(
        run, setup, loop, checkpoint=checkpoint, per_epoch=per_epoch, start=start, device=device,
        counts=counts, history=history, validator=validator,
    )  # fmt: skip
    _write_report(out, summary, run, history)
    return summary


def _prepare_torch(run: RunConfig) -> str:
    """Torch's threads and seed; the device the run trains on."""
    from mathsearch.encoders.torch_setup import resolve_device

    torch.set_num_threads(max(1, run.threads))
    torch.manual_seed(run.seed)
    return resolve_device(run.device)


@dataclass
class _Setup:
    """What the loop trains: the vocabulary, the model's config, the model and its optimiser."""

    vocab: TokenVocabulary
    config: ExpEmbConfig
    model: ExpEmb
    optimizer: torch.optim.Optimizer


def _training_pairs(run: RunConfig, out: Path) -> tuple[list[Pair], dict[str, int]]:
    """:func:`collect_pairs`, refusing a run without any pair."""
    pairs, counts = collect_pairs(run, out)
    if not pairs:
        raise ValueError("no training pairs: give E-Gen files, --generated or --semvec sets")
    return pairs, counts


def _setup(run: RunConfig, pairs: list[Pair], out: Path, device: str) -> _Setup:
    """The vocabulary (saved as ``OUT/vocab.json``), the model (``--init``'s weights when
    given) on ``device`` and its AdamW optimiser.

    Raises:
        CheckpointError: ``--init`` names a checkpoint of another shape.
    """
    initial: dict[str, Any] | None = None
    if run.init:
        _, vocab, initial = load_expemb(run.init)
        shape = {k: initial["model_config"].get(k) for k in ("hidden", "layers", "mode")}
        if shape != {"hidden": run.hidden, "layers": run.layers, "mode": run.mode}:
            raise CheckpointError(
                f"--init {run.init} is a {shape} model; this run asks for hidden={run.hidden}, "
                f"layers={run.layers}, mode={run.mode}"
            )
    elif run.vocabulary:
        vocab = TokenVocabulary.load(run.vocabulary)
    else:
        vocab = TokenVocabulary.build((s for p in pairs for s in p), run.min_count)
    vocab.save(out / "vocab.json")
    config = ExpEmbConfig(
        vocab_size=len(vocab),
        hidden=run.hidden,
        layers=run.layers,
        lr=run.lr,
        batch_size=run.batch_size,
        max_len=run.max_len,
        epochs=run.epochs,
        mode=run.mode,
    )
    model = ExpEmb(config)
    if initial is not None:
        model.load_state_dict(initial["model"])
        logger.info("warm start from %s (step %s)", run.init, initial.get("step"))
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    return _Setup(vocab, config, model, optimizer)


def _step_counts(run: RunConfig, pairs: int, config: ExpEmbConfig) -> tuple[int, int]:
    """Steps an epoch (batches of ``pairs``) and the run's steps (``--max-steps`` at most)."""
    per_epoch = -(-pairs // config.batch_size)
    total = per_epoch * config.epochs
    if run.max_steps:
        total = min(total, run.max_steps)
    return per_epoch, total


def _final_checkpoint(
    run: RunConfig,
    out: Path,
    setup: _Setup,
    history: dict[str, Any],
    window: list[float],
    *,
    validator: _Validator | None,
    step: int,
    per_epoch: int,
) -> Path:
    """Log the last losses, validate once more unless this step was, save the final model;
    the path of the run's checkpoint (with validation sets: the best epoch's)."""
    model, optimizer = setup.model, setup.optimizer
    if window:
        lr = optimizer.param_groups[0]["lr"]
        history["losses"].append({"step": step, "loss": sum(window) / len(window), "lr": lr})
    model.eval()
    if validator is not None and (not validator.scores or validator.scores[-1]["step"] != step):
        validator.check(model, step, step / per_epoch, history, run)
    checkpoint = save_checkpoint(
        out / "last.pt" if validator else out / "checkpoint.pt",
        model=model,
        vocab=setup.vocab,
        step=step,
        run=run,
        history=history,
    )
    if validator is not None:  # checkpoint.pt is the best validation epoch's
        checkpoint = out / "checkpoint.pt"
    return checkpoint


def _summary(
    run: RunConfig,
    setup: _Setup,
    loop: LoopResult,
    *,
    checkpoint: Path,
    per_epoch: int,
    start: float,
    device: str,
    counts: dict[str, int],
    history: dict[str, Any],
    validator: _Validator | None,
) -> dict[str, Any]:
    """What the run did: steps, time, vocabulary, losses and (with validation sets) scores."""
    step, vocab = loop.step, setup.vocab
    summary = {
        "checkpoint": str(checkpoint),
        "steps": step,
        "epochs": round(step / per_epoch, 3),
        "stopped_by": loop.stopped_by,
        "seconds": round(time.perf_counter() - start, 1),
        "vocab_size": len(vocab),
        "vocab_hash": vocab.hash,
        "device": device,
        "amp": run.amp,
        "counts": counts,
        "first_loss": history["losses"][0]["loss"] if history["losses"] else None,
        "last_loss": history["losses"][-1]["loss"] if history["losses"] else None,
        "model_config": setup.config.to_dict(),
    }
    if validator is not None:
        summary["validation"] = validator.summary()
    return summary


def _write_report(
    out: Path, summary: dict[str, Any], run: RunConfig, history: dict[str, Any]
) -> None:
    """``OUT/train.json``: the summary, the run's settings and its history."""
    (out / "train.json").write_text(
        json.dumps({**summary, "run": run.to_dict(), "history": history}, indent=2),
        encoding="utf-8",
    )
