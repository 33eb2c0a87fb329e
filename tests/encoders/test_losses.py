"""Losses against hand-computed values (KDD 2020 eq. 1, eq. 2, masking task; ECML 2019 eq. 3)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from mathsearch.encoders.losses import (  # noqa: E402 - after the importorskip
    HistogramLoss,
    TripletLoss,
    histogram_loss_fn,
    masked_feature_loss_fn,
    triplet_loss_fn,
)


def _t(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


# --- histogram loss -------------------------------------------------------------------------


def test_histogram_single_pair_by_hand() -> None:
    # R = 3: nodes -1, 0, 1, Delta = 1. s+ = 0.5 -> h+ = [0, .5, .5], CDF+ = [0, .5, 1];
    # s- = 0 -> h- = [0, 1, 0]; loss = 1 * 0.5.
    assert float(histogram_loss_fn(_t([0.5]), _t([0.0]), bins=3)) == pytest.approx(0.5)


def test_histogram_batch_by_hand_matches_eq2_double_sum() -> None:
    # R = 3. s+ = (1, .5): sum_i delta[s+] = [0,0,1] + [0,.5,.5] = [0, .5, 1.5]
    # s- = (-.5, .5): sum_i delta[s-] = [.5,.5,0] + [0,.5,.5] = [.5, 1, .5]
    # eq. 2: 1/m^2 * sum_r neg_r * sum_{r'<=r} pos_r' = (.5*0 + 1*.5 + .5*2) / 4 = 0.375
    loss = histogram_loss_fn(_t([1.0, 0.5]), _t([-0.5, 0.5]), bins=3)
    assert float(loss) == pytest.approx(0.375)


def test_histogram_unequal_counts_normalise_each_histogram() -> None:
    # R = 3. s+ = (1,) -> CDF+ = [0, 0, 1]; s- = (-1, 1, 1, 0) -> h- = [.25, .25, .5]
    # loss = .5 * 1 = 0.5 (half of the negatives sit on the positive's node)
    loss = histogram_loss_fn(_t([1.0]), _t([-1.0, 1.0, 1.0, 0.0]), bins=3)
    assert float(loss) == pytest.approx(0.5)


def test_histogram_separated_is_zero_and_reversed_is_one() -> None:
    gen = torch.Generator().manual_seed(0)
    pos = torch.rand(50, generator=gen, dtype=torch.float64) * 0.4 + 0.6  # in [.6, 1]
    neg = torch.rand(50, generator=gen, dtype=torch.float64) * 0.8 - 1.0  # in [-1, -.2]
    assert float(histogram_loss_fn(pos, neg, bins=64)) == pytest.approx(0.0, abs=1e-12)
    assert float(histogram_loss_fn(neg, pos, bins=64)) == pytest.approx(1.0)


def test_histogram_clamps_out_of_range_similarities() -> None:
    # 1.3 is clamped to 1 and -2 to -1: perfectly separated.
    assert float(histogram_loss_fn(_t([1.3]), _t([-2.0]), bins=5)) == pytest.approx(0.0)


def test_histogram_gradients_flow_and_have_the_right_sign() -> None:
    pos = torch.tensor([0.1, 0.3, -0.2], dtype=torch.float64, requires_grad=True)
    neg = torch.tensor([0.05, 0.25, 0.0], dtype=torch.float64, requires_grad=True)
    loss = histogram_loss_fn(pos, neg, bins=9)
    loss.backward()
    assert pos.grad is not None and neg.grad is not None
    assert (pos.grad <= 0).all() and pos.grad.abs().sum() > 0  # raising s+ lowers the loss
    assert (neg.grad >= 0).all() and neg.grad.abs().sum() > 0  # raising s- raises it


def test_histogram_gradcheck() -> None:
    # off the bin nodes the loss is smooth (piecewise quadratic)
    pos = torch.tensor([0.11, 0.37, -0.23], dtype=torch.float64, requires_grad=True)
    neg = torch.tensor([0.07, 0.29, 0.02], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda p, n: histogram_loss_fn(p, n, bins=9), (pos, neg))


@pytest.mark.parametrize(
    ("pos", "neg", "bins"),
    [([], [0.1], 64), ([0.1], [], 64), ([0.1], [0.1], 1), ([[0.1]], [0.1], 64)],
)
def test_histogram_rejects_bad_input(pos: list, neg: list, bins: int) -> None:
    with pytest.raises(ValueError, match=r"empty|bins|1-d"):
        histogram_loss_fn(_t(pos), _t(neg), bins=bins)


def test_histogram_module_uses_inner_products() -> None:
    # anchor (.5, 0): <a, p> = .5 * 1 = .5, <a, n> = 0 -> the first hand example, 0.5 (R = 3).
    # With cosine, s+ = 1 and s- = 0 -> CDF+ = [0, 0, 1], h- = [0, 1, 0] -> 0.
    a, p, n = _t([[0.5, 0.0]]), _t([[1.0, 0.0]]), _t([[0.0, 1.0]])
    assert float(HistogramLoss(bins=3)(a, p, n)) == pytest.approx(0.5)
    assert float(HistogramLoss(bins=3, similarity="cosine")(a, p, n)) == pytest.approx(0.0)


def test_histogram_module_backpropagates_to_embeddings() -> None:
    gen = torch.Generator().manual_seed(1)
    emb = (torch.randn(3, 8, 4, generator=gen, dtype=torch.float64) * 0.3).requires_grad_()
    loss = HistogramLoss()(emb[0], emb[1], emb[2])
    loss.backward()
    assert emb.grad is not None and torch.isfinite(emb.grad).all()
    assert emb.grad.abs().sum() > 0


def test_histogram_module_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="shape"):
        HistogramLoss()(torch.zeros(2, 4), torch.zeros(2, 4), torch.zeros(3, 4))
    with pytest.raises(ValueError, match="similarity"):
        HistogramLoss(similarity="l2")  # type: ignore[arg-type]


# --- triplet loss ---------------------------------------------------------------------------

# Row 0: a=(1,0), p=(0,1), n=(0,1): <a,p>=0, <a,n>=0, <p,n>=1
#   plain: max(0, 1 - 0 + 0) = 1; swap: max(0, 1 - 0 + max(0, 1)) = 2
# Row 1: a=(1,0), p=(1,0), n=(-1,0): <a,p>=1, <a,n>=-1, <p,n>=-1 -> max(0, 1 - 1 - 1) = 0
_A = [[1.0, 0.0], [1.0, 0.0]]
_P = [[0.0, 1.0], [1.0, 0.0]]
_N = [[0.0, 1.0], [-1.0, 0.0]]


@pytest.mark.parametrize(
    ("swap", "squared", "expected"),
    [
        (False, False, (1 + 0) / 2),
        (True, False, (2 + 0) / 2),
        (False, True, (1 + 0) / 2),
        (True, True, (4 + 0) / 2),
    ],
)
def test_triplet_by_hand(swap: bool, squared: bool, expected: float) -> None:
    loss = triplet_loss_fn(_t(_A), _t(_P), _t(_N), swap=swap, squared=squared)
    assert float(loss) == pytest.approx(expected)
    module = TripletLoss(swap=swap, squared=squared)
    assert float(module(_t(_A), _t(_P), _t(_N))) == pytest.approx(expected)


def test_triplet_margin_and_partial_hinge() -> None:
    # <a,p> = .8, <a,n> = .3 -> margin 1: 1 - .8 + .3 = .5; squared .25; margin .2: 0
    a, p, n = _t([[1.0, 0.0]]), _t([[0.8, 0.6]]), _t([[0.3, 0.2]])
    assert float(triplet_loss_fn(a, p, n)) == pytest.approx(0.5)
    assert float(triplet_loss_fn(a, p, n, squared=True)) == pytest.approx(0.25)
    assert float(triplet_loss_fn(a, p, n, margin=0.2)) == pytest.approx(0.0)


def test_triplet_gradient() -> None:
    a = _t([[1.0, 0.0]]).requires_grad_()
    p, n = _t([[0.8, 0.6]]), _t([[0.3, 0.2]])
    triplet_loss_fn(a, p, n).backward()
    # d/da (1 - <a,p> + <a,n>) = n - p
    assert a.grad is not None
    assert torch.allclose(a.grad, n - p)


def test_triplet_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError):
        triplet_loss_fn(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError):
        triplet_loss_fn(torch.zeros(0, 3), torch.zeros(0, 3), torch.zeros(0, 3))


# --- masking loss ---------------------------------------------------------------------------


def test_masked_loss_uniform_logits_by_hand() -> None:
    # uniform logits: each head costs ln C whatever the target -> (ln 32 + ln 33 + ln 193) / 3
    loss = masked_feature_loss_fn(
        torch.zeros(3, 32),
        torch.zeros(3, 33),
        torch.zeros(3, 193),
        torch.tensor([0, 1, 31]),
        torch.tensor([-1, 0, 31]),
        torch.tensor([-1, 191, 5]),
    )
    expected = (math.log(32) + math.log(33) + math.log(193)) / 3
    assert float(loss) == pytest.approx(expected, rel=1e-6)


def test_masked_loss_maps_minus_one_to_the_none_class() -> None:
    # tiny heads (2, 3, 3 classes), one node; the "none" (last) class gets logit ln 2 vs 0:
    # p(none) = 2 / (2 + 1 + 1) = 1/2 for attr and char; tag target 0 with logits (0, 0): 1/2
    half = math.log(2.0)
    attr = torch.tensor([[0.0, 0.0, half]])
    char = torch.tensor([[0.0, 0.0, half]])
    loss = masked_feature_loss_fn(
        torch.zeros(1, 2), attr, char, torch.tensor([0]), torch.tensor([-1]), torch.tensor([-1])
    )
    assert float(loss) == pytest.approx(math.log(2.0), rel=1e-6)
    # the same node with an explicit last-class target gives the same value
    explicit = masked_feature_loss_fn(
        torch.zeros(1, 2), attr, char, torch.tensor([0]), torch.tensor([2]), torch.tensor([2])
    )
    assert float(explicit) == pytest.approx(float(loss))


def test_masked_loss_gradient_and_empty_mask() -> None:
    logits = [torch.randn(4, c, requires_grad=True) for c in (32, 33, 193)]
    targets = [torch.tensor([1, 2, 3, 4]), torch.tensor([-1, 0, 5, -1]), torch.tensor([-1] * 4)]
    masked_feature_loss_fn(*logits, *targets).backward()
    assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in logits)
    empty = [torch.zeros(0, c, requires_grad=True) for c in (32, 33, 193)]
    none = [torch.zeros(0, dtype=torch.long)] * 3
    loss = masked_feature_loss_fn(*empty, *none)
    assert float(loss.detach()) == 0.0 and loss.requires_grad


@pytest.mark.parametrize(
    ("tag_target", "attr_target"),
    [
        (torch.tensor([32]), torch.tensor([0])),  # tag out of range
        (torch.tensor([0]), torch.tensor([-2])),  # below -1
        (torch.tensor([0.0]), torch.tensor([0])),  # float ids
        (torch.tensor([0, 1]), torch.tensor([0])),  # wrong length
    ],
)
def test_masked_loss_rejects_bad_targets(
    tag_target: torch.Tensor, attr_target: torch.Tensor
) -> None:
    with pytest.raises(ValueError):
        masked_feature_loss_fn(
            torch.zeros(1, 32),
            torch.zeros(1, 33),
            torch.zeros(1, 193),
            tag_target,
            attr_target,
            torch.tensor([-1]),
        )
