"""mathsearch.encoders.losses.info_nce_loss: the InfoNCE formula as a pure function, and its
module."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mathsearch.encoders.losses import (
    InfoNCELoss,
    info_nce_loss_fn,
    multi_positive_cross_entropy,
    same_group_mask,
)


def _reference(a: np.ndarray, p: np.ndarray, scale: float, ignore: np.ndarray | None) -> float:
    """The docstring's formula, row by row in float64."""
    logits = scale * a @ p.T
    n = len(a)

    def direction(matrix: np.ndarray) -> float:
        total = 0.0
        for i in range(n):
            keep = [j for j in range(n) if j == i or ignore is None or not ignore[i, j]]
            row = matrix[i, keep]
            total += -(matrix[i, i] - math.log(np.exp(row).sum()))
        return total / n

    return 0.5 * (direction(logits) + direction(logits.T))


def _unit(rows: int, dim: int, seed: int) -> torch.Tensor:
    x = torch.randn(rows, dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x / x.norm(dim=1, keepdim=True)


def test_equal_similarities_give_log_batch() -> None:
    a = torch.ones(8, 4) / 2.0
    assert info_nce_loss_fn(a, a.clone(), 20.0).item() == pytest.approx(math.log(8))


def test_matches_the_formula_with_and_without_ignored_pairs() -> None:
    a, p = _unit(6, 5, 0), _unit(6, 5, 1)
    ignore = same_group_mask(torch.tensor([0, 0, 1, 2, 2, 2]))
    for mask in (None, ignore):
        got = info_nce_loss_fn(a, p, 7.0, mask).item()
        want = _reference(a.numpy(), p.numpy(), 7.0, None if mask is None else mask.numpy())
        assert got == pytest.approx(want, rel=1e-9)


def test_same_group_mask_leaves_the_diagonal() -> None:
    mask = same_group_mask(torch.tensor([3, 3, 4]))
    assert mask.tolist() == [[False, True, False], [True, False, False], [False, False, False]]


def test_aligned_pairs_score_low_and_one_direction_differs() -> None:
    a = _unit(16, 8, 2)
    assert info_nce_loss_fn(a, a.clone(), 50.0).item() < 0.05
    p = _unit(16, 8, 3)
    one_way = info_nce_loss_fn(a, p, 5.0, symmetric=False).item()
    other_way = info_nce_loss_fn(p, a, 5.0, symmetric=False).item()
    assert info_nce_loss_fn(a, p, 5.0).item() == pytest.approx(0.5 * (one_way + other_way))


def test_module_learns_its_scale_and_refuses_bad_shapes() -> None:
    loss = InfoNCELoss(scale=10.0)
    assert float(loss.scale.detach()) == pytest.approx(10.0)
    a = _unit(4, 3, 4).float().requires_grad_()
    value = loss(a, _unit(4, 3, 5).float())
    value.backward()
    assert loss.log_scale.grad is not None and a.grad is not None
    fixed = InfoNCELoss(scale=10.0, learn_scale=False)
    assert not list(fixed.parameters())
    with pytest.raises(ValueError, match="alike"):
        info_nce_loss_fn(torch.zeros(3, 2), torch.zeros(4, 2))
    with pytest.raises(ValueError, match="scale"):
        InfoNCELoss(scale=0.0)


def _reference_with_negatives(
    a: np.ndarray,
    p: np.ndarray,
    n: np.ndarray,
    scale: float,
    ignore: np.ndarray | None,
    prior: np.ndarray | None = None,
) -> float:
    """The docstring's formula with extra negatives: B + B' columns a -> candidates, p -> a
    over the anchors only, row by row in float64; the prior added before the scale (and
    transposed for p -> a)."""
    candidates = np.concatenate([p, n])
    prior = np.zeros((len(a), len(candidates))) if prior is None else prior
    forward = scale * (a @ candidates.T + prior)
    backward = scale * (p @ a.T + prior[:, : len(a)].T)
    size = len(a)
    total_forward = total_backward = 0.0
    for i in range(size):
        keep = [j for j in range(len(candidates)) if j == i or ignore is None or not ignore[i, j]]
        total_forward += -(forward[i, i] - math.log(np.exp(forward[i, keep]).sum()))
        keep = [j for j in range(size) if j == i or ignore is None or not ignore[j, i]]
        total_backward += -(backward[i, i] - math.log(np.exp(backward[i, keep]).sum()))
    return 0.5 * (total_forward + total_backward) / size


def test_extra_negatives_widen_each_anchors_softmax() -> None:
    a, p, n = _unit(5, 4, 6), _unit(5, 4, 7), _unit(5, 4, 8)
    ignore = torch.zeros(5, 10, dtype=torch.bool)
    ignore[0, 1] = ignore[2, 7] = True
    for mask in (None, ignore):
        got = info_nce_loss_fn(a, p, 6.0, mask, negative=n).item()
        want = _reference_with_negatives(
            a.numpy(), p.numpy(), n.numpy(), 6.0, None if mask is None else mask.numpy()
        )
        assert got == pytest.approx(want, rel=1e-9)
    # A negative that is a copy of its anchor costs more than a random one; the other
    # direction (positives against anchors) does not see the negatives.
    assert info_nce_loss_fn(a, p, 6.0, negative=a.clone()).item() > (
        info_nce_loss_fn(a, p, 6.0, negative=n).item()
    )
    one_way = info_nce_loss_fn(a, p, 6.0, symmetric=False, negative=n).item()
    assert one_way > info_nce_loss_fn(a, p, 6.0, symmetric=False).item()
    with pytest.raises(ValueError, match="ignore must be"):
        info_nce_loss_fn(a, p, 6.0, torch.zeros(5, 5, dtype=torch.bool), negative=n)
    with pytest.raises(ValueError, match="negative must be"):
        info_nce_loss_fn(a, p, 6.0, negative=torch.zeros(5, 3, dtype=torch.float64))


def test_a_prior_is_added_to_every_score_before_the_scale() -> None:
    """``prior``: fixed scores (a BM25 prior) added to the similarities, in both directions."""
    a, p, n = _unit(5, 4, 16), _unit(5, 4, 17), _unit(5, 4, 18)
    rng = np.random.default_rng(3)
    prior = torch.from_numpy(rng.random((5, 10)) * 0.3)
    ignore = torch.zeros(5, 10, dtype=torch.bool)
    ignore[1, 3] = True
    got = info_nce_loss_fn(a, p, 6.0, ignore, negative=n, prior=prior).item()
    want = _reference_with_negatives(
        a.numpy(), p.numpy(), n.numpy(), 6.0, ignore.numpy(), prior.numpy()
    )
    assert got == pytest.approx(want, rel=1e-9)
    square = prior[:, :5].contiguous()
    got = info_nce_loss_fn(a, p, 6.0, prior=square).item()
    want = _reference_with_negatives(a.numpy(), p.numpy(), n[:0].numpy(), 6.0, None, square.numpy())
    assert got == pytest.approx(want, rel=1e-9)
    # A prior that already favours every positive leaves less loss (and gradient) to the vectors;
    # a constant prior changes nothing (softmax is shift-invariant).
    diagonal = torch.eye(5, dtype=torch.float64) * 0.5
    assert info_nce_loss_fn(a, p, 6.0, prior=diagonal).item() < info_nce_loss_fn(a, p, 6.0).item()
    constant = torch.full((5, 5), 0.7, dtype=torch.float64)
    assert info_nce_loss_fn(a, p, 6.0, prior=constant).item() == pytest.approx(
        info_nce_loss_fn(a, p, 6.0).item(), rel=1e-12
    )
    with pytest.raises(ValueError, match="prior must be"):
        info_nce_loss_fn(a, p, 6.0, prior=torch.zeros(5, 4, dtype=torch.float64))


def _reference_multi_positive(
    a: np.ndarray, p: np.ndarray, scale: float, positives: np.ndarray
) -> float:
    """The supervised contrastive form of the docstring, row by row in float64: every
    positive column of a row (its diagonal included) scored against the whole row."""
    logits = scale * a @ p.T
    n = len(a)

    def direction(matrix: np.ndarray, pos: np.ndarray) -> float:
        total = 0.0
        for i in range(n):
            log_z = math.log(np.exp(matrix[i]).sum())
            chosen = [j for j in range(n) if j == i or pos[i, j]]
            total += -sum(matrix[i, j] - log_z for j in chosen) / len(chosen)
        return total / n

    return 0.5 * (direction(logits, positives) + direction(logits.T, positives.T))


def test_extra_positives_follow_the_supervised_contrastive_formula() -> None:
    a, p = _unit(6, 5, 4), _unit(6, 5, 5)
    same = same_group_mask(torch.tensor([0, 0, 1, 2, 2, 2]))
    got = info_nce_loss_fn(a, p, 7.0, positives=same).item()
    assert got == pytest.approx(_reference_multi_positive(a.numpy(), p.numpy(), 7.0, same.numpy()))
    # the same pairs left out, or counted as negatives, give other losses
    assert got != pytest.approx(info_nce_loss_fn(a, p, 7.0, same).item(), rel=1e-3)
    assert got != pytest.approx(info_nce_loss_fn(a, p, 7.0).item(), rel=1e-3)
    # no extra positive: the plain loss, and the pure helper is cross-entropy for one-hot rows
    none = torch.zeros(6, 6, dtype=torch.bool)
    plain = info_nce_loss_fn(a, p, 7.0).item()
    assert info_nce_loss_fn(a, p, 7.0, positives=none).item() == pytest.approx(plain, rel=1e-12)
    logits = 7.0 * a @ p.t()
    eye = torch.eye(6, dtype=torch.bool)
    ce = torch.nn.functional.cross_entropy(logits, torch.arange(6))
    assert multi_positive_cross_entropy(logits, eye).item() == pytest.approx(ce.item())
    # a same-paper pair's score is pulled up as a positive and pushed down as a negative
    scores = logits.clone().requires_grad_(True)
    multi_positive_cross_entropy(scores, eye | same).backward()
    assert scores.grad is not None and scores.grad[0, 1] < 0 and scores.grad[0, 3] > 0
    scores.grad = None
    multi_positive_cross_entropy(scores, eye).backward()
    assert scores.grad[0, 1] > 0
    with pytest.raises(ValueError, match="positives must be"):
        info_nce_loss_fn(a, p, 7.0, positives=torch.zeros(6, 5, dtype=torch.bool))
