"""Evaluation of ExpEmb embeddings and generations (expemb seed, sections 5.1-5.3).

* :func:`score_k` - eq. 1 (Allamanis et al. 2017): for a query ``q`` of class ``c``,
  ``score_k(q) = |N_k(q) ∩ c| / min(k, |c|)`` with ``N_k(q)`` its ``k`` nearest neighbours by
  cosine similarity among the *other* expressions of the set; ``|c|`` counts the other members
  of ``q``'s class (``q`` itself is never its own neighbour), and queries alone in their class
  are skipped (the score is undefined there). The set score is the mean over queries.
  :func:`semvec_score_k` runs it on one SemVec file (unseen-class protocol: the model must not
  have trained on those classes - ``train seq2seq --semvec-exclude`` the validation sets).
* :func:`generation_accuracy` - section 5.1: beam search of size ``b``; EXPEMB-E succeeds when
  any hypothesis is a complete expression tree, differs from the input and SymPy proves it
  equivalent (``simplify(a - b) == 0`` under a time limit; a timeout is a failure); EXPEMB-A
  when any hypothesis is the input itself.
* :func:`analogies` - section 5.2 "Embedding Algebra": ``z = emb(x1) - emb(y1) + emb(y2)``,
  its nearest expressions by cosine (``x1, y1, y2`` excluded) from a pool that contains the
  expected ``x2``; top-k accuracy. :data:`SEED_ANALOGIES` are the seed's Table 4 rows.
* :func:`bag_of_tokens` - the simple baseline embedding (token counts).

Embedding functions map prefix sequences to a ``(n, d)`` float array
(:func:`checkpoint_embedder`, :func:`bag_of_tokens`, or an ONNX
:class:`~mathsearch.runtime.seq2seq_runtime.Seq2SeqEmbedder` via :func:`onnx_embedder`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mathsearch.indexer.prefix import PrefixError, equivalent, expr_to_prefix, prefix_to_expr
from mathsearch.indexer.semvec_prefix import SemvecPrefixClass, is_complete_prefix

logger = logging.getLogger(__name__)

__all__ = [
    "SEED_ANALOGIES",
    "EmbedFn",
    "analogies",
    "bag_of_tokens",
    "checkpoint_embedder",
    "equivalent_prefix",
    "generation_accuracy",
    "onnx_embedder",
    "score_k",
    "semvec_score_k",
]

EmbedFn = Callable[[Sequence[Sequence[str]]], np.ndarray]

#: Table 4 of the seed: (x1, y1, y2, expected x2) with x2 ~ x1 - y1 + y2 (SymPy syntax).
SEED_ANALOGIES: tuple[tuple[str, str, str, str], ...] = (
    ("cos(x)", "sin(x)", "csc(x)", "sec(x)"),
    ("sin(x)", "cos(x)", "cosh(x)", "sinh(x)"),
    ("sin(x)", "csc(x)", "sec(x)", "cos(x)"),
    ("x**2 - 1", "x + 1", "x + 2", "x**2 - 4"),
    ("x**2 - 1", "x + 1", "2*x + 2", "4*x**2 - 4"),
    ("sin(x)", "sinh(x)", "cosh(x)", "cos(x)"),
    ("x**2", "x", "sin(x)", "sin(x)**2"),
)


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def score_k(
    embeddings: np.ndarray,
    labels: Sequence[Any],
    k: int = 5,
    chunk: int = 1024,
    *,
    eqnet: bool = False,
) -> dict[str, float | int]:
    """Eq. 1 averaged over queries (see the module docstring).

    Args:
        embeddings: ``(n, d)``; labels: the class of each row.
        eqnet: the denominator of the code the seed used for its tables (EQNET's
            ``knnstats.py``): ``min(k, |c|)`` with ``|c|`` counting the query itself, so a
            class of 3 scores at most 2/3; default ``min(k, |c| - 1)``, the other members.
    Returns:
        ``{"score": mean score_k, "queries": scored rows, "skipped": singleton rows}``.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    unit = _normalise(embeddings)
    codes = np.unique(np.asarray([str(x) for x in labels]), return_inverse=True)[1]
    sizes = np.bincount(codes)
    n = len(codes)
    total, scored = 0.0, 0
    for start in range(0, n, chunk):
        sims = unit[start : start + chunk] @ unit.T
        rows = np.arange(sims.shape[0])
        sims[rows, start + rows] = -np.inf  # a query is not its own neighbour
        kk = min(k, n - 1)
        if kk < 1:
            break
        top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
        same = (codes[top] == codes[start + rows][:, None]).sum(axis=1)
        others = sizes[codes[start + rows]] - 1
        valid = others > 0
        denominator = others[valid] + 1 if eqnet else others[valid]
        total += float((same[valid] / np.minimum(k, denominator)).sum())
        scored += int(valid.sum())
    return {"score": total / scored if scored else 0.0, "queries": scored, "skipped": n - scored}


def semvec_score_k(
    embed: EmbedFn,
    classes: Sequence[SemvecPrefixClass],
    k: int = 5,
    max_classes: int | None = None,
    seed: int = 0,
    *,
    eqnet: bool = False,
) -> dict[str, Any]:
    """score_k of one SemVec set's classes (optionally ``max_classes`` drawn at random;
    ``eqnet``: the seed's denominator, see :func:`score_k`)."""
    chosen = list(classes)
    if max_classes is not None and len(chosen) > max_classes:
        chosen = random.Random(seed).sample(chosen, max_classes)
    sequences = [m for c in chosen for m in c.members]
    labels = [c.class_id for c in chosen for _ in c.members]
    result = score_k(embed(sequences), labels, k, eqnet=eqnet)
    return {**result, "classes": len(chosen), "expressions": len(sequences)}


def bag_of_tokens(vocabulary: Sequence[str]) -> EmbedFn:
    """Baseline: token count vectors over ``vocabulary`` (+1 slot for other tokens)."""
    index = {token: n for n, token in enumerate(vocabulary)}

    def embed(sequences: Sequence[Sequence[str]]) -> np.ndarray:
        out = np.zeros((len(sequences), len(index) + 1), dtype=np.float32)
        for row, seq in enumerate(sequences):
            for token in seq:
                out[row, index.get(token, len(index))] += 1.0
        return out

    return embed


def checkpoint_embedder(model: Any, vocab: Any, batch_size: int = 256) -> EmbedFn:
    """PyTorch embeddings ``h_N`` of a trained :class:`~mathsearch.encoders.seq2seq.ExpEmb`."""
    import torch

    from mathsearch.encoders.seq2seq_data import pad_ids

    def embed(sequences: Sequence[Sequence[str]]) -> np.ndarray:
        parts = []
        model.eval()
        device = next(model.parameters()).device
        with torch.no_grad():
            for start in range(0, len(sequences), batch_size):
                chunk = sequences[start : start + batch_size]
                ids = [vocab.encode(s[: model.config.max_len]) for s in chunk]
                src, lengths = pad_ids(ids)
                parts.append(model.embed(src.to(device), lengths.to(device)).float().cpu().numpy())
        return np.concatenate(parts) if parts else np.zeros((0, model.config.hidden))

    return embed


def onnx_embedder(embedder: Any) -> EmbedFn:
    """Embeddings through an ONNX runtime
    (:class:`~mathsearch.runtime.seq2seq_runtime.Seq2SeqEmbedder`);
    a refused item gets a zero vector (it then scores as a miss)."""

    def embed(sequences: Sequence[Sequence[str]]) -> np.ndarray:
        results = embedder.embed([{"prefix": list(s)} for s in sequences])
        out = np.zeros((len(sequences), embedder.dim), dtype=np.float32)
        for row, result in enumerate(results):
            if isinstance(result, np.ndarray):
                out[row] = result
        return out

    return embed


def equivalent_prefix(a: Sequence[str], b: Sequence[str], timeout: float = 2.0) -> bool:
    """The seed's check on prefix sequences: ``simplify(a - b) == 0`` within ``timeout``
    (derivatives ``d x f`` are carried out first); unreadable sequences are not equivalent."""
    try:
        left, right = prefix_to_expr(list(a)), prefix_to_expr(list(b))
        left, right = left.doit(), right.doit()
    except (PrefixError, TypeError, ValueError, AttributeError, RecursionError):
        return False
    return equivalent(left, right, timeout)


def generation_accuracy(
    model: Any,
    vocab: Any,
    sources: Sequence[Sequence[str]],
    beam_sizes: Sequence[int] = (1, 10, 50),
    *,
    mode: str = "equivalent",
    timeout: float = 2.0,
    max_len: int = 64,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Section 5.1 accuracy by beam size over ``sources`` (see the module docstring)."""
    from mathsearch.encoders.beam_search import beam_search

    out: dict[str, Any] = {"sources": len(sources), "mode": mode, "beams": {}}
    for size in beam_sizes:
        hits, invalid, total_hyps = 0, 0, 0
        for source in sources:
            hyps = beam_search(model, vocab.encode(source), size, max_len)
            ok = False
            for hyp in hyps:
                tokens = vocab.decode(hyp.ids)
                total_hyps += 1
                if "<unk>" in tokens or not is_complete_prefix(tokens):
                    invalid += 1
                    continue
                if mode == "autoencoder":
                    ok = tuple(tokens) == tuple(source)
                else:
                    ok = tuple(tokens) != tuple(source) and equivalent_prefix(
                        source, tokens, timeout
                    )
                if ok:
                    break
            hits += ok
            if progress is not None:
                progress(1)
        out["beams"][str(size)] = {
            "accuracy": hits / len(sources) if sources else 0.0,
            "correct": hits,
            "invalid_hypotheses": invalid,
            "hypotheses": total_hyps,
        }
    return out


def _prefix_of(text: str) -> tuple[str, ...]:
    import sympy

    return tuple(expr_to_prefix(sympy.sympify(text)))


def analogies(
    embed: EmbedFn,
    pool: Sequence[Sequence[str]],
    rows: Sequence[tuple[str, str, str, str]] = SEED_ANALOGIES,
    top_k: int = 5,
) -> dict[str, Any]:
    """Embedding algebra ``x1 - y1 + y2 ~ x2`` (section 5.2) over ``pool`` + the analogy
    expressions; top-1 and top-k accuracy and each row's nearest expressions."""
    parsed = [tuple(_prefix_of(t) for t in row) for row in rows]
    candidates = list(dict.fromkeys([*map(tuple, pool), *(t for row in parsed for t in row)]))
    where = {seq: n for n, seq in enumerate(candidates)}
    unit = _normalise(embed(candidates))
    results, top1, topk = [], 0, 0
    for text, (x1, y1, y2, x2) in zip(rows, parsed, strict=True):
        z = unit[where[x1]] - unit[where[y1]] + unit[where[y2]]
        sims = unit @ (z / max(np.linalg.norm(z), 1e-12))
        for seq in (x1, y1, y2):
            sims[where[seq]] = -np.inf
        order = np.argsort(-sims)[:top_k]
        nearest = [" ".join(candidates[i]) for i in order]
        hit1 = candidates[order[0]] == x2
        hitk = any(candidates[i] == x2 for i in order)
        top1 += hit1
        topk += hitk
        results.append(
            {
                "x1": text[0], "y1": text[1], "y2": text[2], "expected": text[3],
                "expected_prefix": " ".join(x2), "nearest": nearest,
                "top1": bool(hit1), f"top{top_k}": bool(hitk),
            }
        )  # fmt: skip
    n = len(rows)
    return {
        "pool": len(candidates),
        "top1_accuracy": top1 / n if n else 0.0,
        f"top{top_k}_accuracy": topk / n if n else 0.0,
        "analogies": results,
    }
