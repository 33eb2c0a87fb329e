"""An ensemble of graph-CNN towers: K independently trained networks, one vector per equation.

Beyond the seeds. K graph CNNs (:class:`~mathsearch.encoders.gcn.GraphCNN`, L2-normalised, the
same input vocabulary) trained from different starts make different errors; the mean of their
cosines ranks better than any one of them (deep ensembles, Lakshminarayanan et al., NeurIPS
2017). An exact search over the scaled concatenation of their unit vectors

.. math::

    z = \\frac{1}{\\sqrt{K}} [e_1; \\dots; e_K], \\qquad
    \\langle z_q, z_d \\rangle = \\frac{1}{K} \\sum_{k=1}^{K} \\cos_k(q, d)

ranks by that mean. Towers may also weigh differently (``weights``, beyond the equal default):
with weights ``w_k >= 0`` that sum to 1,

.. math::

    z = [\\sqrt{w_1}\\, e_1; \\dots; \\sqrt{w_K}\\, e_K], \\qquad
    \\langle z_q, z_d \\rangle = \\sum_{k=1}^{K} w_k \\cos_k(q, d)

so that an ensemble made of a three-tower ensemble and one more tower, each counting half, is
the four towers at weights 1/6, 1/6, 1/6 and 1/2. So that the indexed vector stays as wide as
one tower's (the same index size and kNN cost), ``z`` (``K d`` wide) is projected onto its top
``D`` principal directions, fitted on equations of the towers' training papers, and normalised
again:

.. math::

    e = \\frac{P^\\top z}{\\lVert P^\\top z \\rVert_2}

with ``P`` (``K d x D``) the top-``D`` eigenvectors of the uncentred second moment
``E[z z^T]`` (:func:`fit_projection`). At ``D = K d`` this is a rotation and every inner product
is kept. Not centred: on the validation papers, subtracting the training papers' mean cost
0.006 nDCG@10 of exact kNN even at full width (docs/encoders.md). The projection is one linear
layer (weight ``P^T``, bias zero).

:func:`ensemble_concat` and :func:`ensemble_embed` are the pure math; :class:`GCNEnsemble` is
the module :func:`mathsearch.encoders.checkpoints.load_model` returns for an ensemble checkpoint
(written by :func:`mathsearch.encoders.ensemble_checkpoint.ensemble_checkpoints`). It embeds like
a :class:`GraphCNN` (``model(batch)``), for evaluation and export; it is not trained further.

Example::

    >>> towers = [GraphCNN(GCNConfig(hidden=8, out_dim=4, layers=1, normalisation="l2",
    ...                              batch_norm_before=(0,))) for _ in range(3)]
    >>> model = GCNEnsemble(towers, out_dim=4)
    >>> model.config.out_dim
    4
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from mathsearch.encoders.gcn import GCNConfig, GCNConfigError, GraphCNN, l2_normalise

logger = logging.getLogger(__name__)

__all__ = [
    "GCNEnsemble",
    "ensemble_concat",
    "ensemble_embed",
    "fit_projection",
    "tower_weights",
]


def tower_weights(weights: Sequence[float] | None, towers: int) -> list[float]:
    """The K weights of an ensemble's cosines, normalised to sum to 1 (``None``: 1/K each).

    Raises:
        GCNConfigError: not K weights, a negative or non-finite one, or all zero.

    Example::

        >>> tower_weights([1, 1, 2], 3)
        [0.25, 0.25, 0.5]
    """
    if weights is None:
        return [1.0 / towers] * towers
    values = [float(w) for w in weights]
    if len(values) != towers:
        raise GCNConfigError(f"{len(values)} weights for {towers} towers")
    if any(not math.isfinite(w) or w < 0 for w in values) or sum(values) <= 0:
        raise GCNConfigError(f"tower weights must be >= 0 and not all 0, not {values}")
    total = sum(values)
    return [w / total for w in values]


def ensemble_concat(parts: Sequence[Tensor], weights: Sequence[float] | None = None) -> Tensor:
    """``z = [sqrt(w_1) e_1; ...; sqrt(w_K) e_K]``: (B, K d) from K unit-vector blocks (B, d).

    The inner product of two such rows is the ``w``-weighted mean of the K blocks' cosines;
    ``weights`` (normalised by :func:`tower_weights`) default to 1/K each, ``z = [e_1; ...;
    e_K] / sqrt(K)``.

    Example::

        >>> a = torch.tensor([[1.0, 0.0]]); b = torch.tensor([[0.0, 1.0]])
        >>> ensemble_concat([a, b]) @ ensemble_concat([a, a]).T   # (cos 1 + cos 0) / 2
        tensor([[0.5000]])
        >>> ensemble_concat([a, b], [3, 1]) @ ensemble_concat([a, a], [3, 1]).T  # 3/4 + 0
        tensor([[0.7500]])
    """
    if not parts:
        raise GCNConfigError("an ensemble needs at least one tower")
    if weights is None:
        return torch.cat(list(parts), dim=1) / math.sqrt(len(parts))
    shares = tower_weights(weights, len(parts))
    return torch.cat([part * math.sqrt(w) for part, w in zip(parts, shares, strict=True)], dim=1)


def ensemble_embed(
    parts: Sequence[Tensor],
    weight: Tensor,
    bias: Tensor,
    weights: Sequence[float] | None = None,
) -> Tensor:
    """``e = l2(W z + b)`` with ``z = ensemble_concat(parts, weights)``: (B, D).

    Args:
        parts: K tower embeddings, (B, d) unit vectors each.
        weight: (D, K d) projection ``P^T``.
        bias: (D,) ``-P^T mu``.
        weights: the towers' weights (default 1/K each).
    """
    return l2_normalise(ensemble_concat(parts, weights) @ weight.t() + bias)


def fit_projection(z: Tensor, out_dim: int) -> tuple[Tensor, Tensor]:
    """The projection of :func:`ensemble_embed`: top-``out_dim`` principal directions of ``z``
    about the origin (eigenvectors of the uncentred second moment ``z^T z / n``).

    Args:
        z: (n, K d) concatenated tower vectors (:func:`ensemble_concat`) of fitting equations;
            n must be at least ``out_dim``.
        out_dim: D, at most K d.

    Returns:
        ``(weight, bias)``: (D, K d) rows = eigenvectors, largest eigenvalue first, each signed
        so that its largest-magnitude entry is positive (a fit is deterministic); (D,) zeros.
        float32.

    Raises:
        GCNConfigError: ``out_dim`` outside ``[1, K d]`` or fewer rows than ``out_dim``.

    Example::

        >>> z = torch.tensor([[3.0, 0.0], [-3.0, 0.1], [0.0, 1.0]])
        >>> fit_projection(z, 1)[0].abs().round()
        tensor([[1., 0.]])
    """
    rows, width = z.shape
    if not 1 <= out_dim <= width:
        raise GCNConfigError(f"the projection's out_dim must be in [1, {width}], not {out_dim}")
    if rows < out_dim:
        raise GCNConfigError(f"fitting {out_dim} directions needs >= {out_dim} rows, got {rows}")
    data = z.to(torch.float64)
    moment = data.t() @ data / rows
    values, vectors = torch.linalg.eigh(moment)  # ascending
    top = vectors[:, torch.argsort(values, descending=True)[:out_dim]].t()  # (D, K d)
    peak = top.gather(1, top.abs().argmax(dim=1, keepdim=True))
    top = top * torch.where(peak < 0, -1.0, 1.0)
    return top.float(), torch.zeros(out_dim)


class GCNEnsemble(nn.Module):
    """K graph-CNN towers and the projection of :func:`ensemble_embed` (module docstring).

    Args:
        towers: K >= 2 L2-normalised graph CNNs of one input vocabulary (sizes, positions).
        out_dim: D, the width of the ensemble's vector (at most K times a tower's).
        weights: the towers' weights in the mean of cosines (:func:`tower_weights`; default
            ``None``, 1/K each).

    Shapes: ``forward(batch)`` -> (B, D). ``config`` is the first tower's with ``out_dim`` D
    (what code that reads a model's ``config.out_dim`` / ``normalisation`` expects).
    """

    def __init__(
        self, towers: Sequence[GraphCNN], out_dim: int, weights: Sequence[float] | None = None
    ) -> None:
        super().__init__()
        if len(towers) < 2:
            raise GCNConfigError(f"an ensemble needs two or more towers, not {len(towers)}")
        first = towers[0].config
        for index, tower in enumerate(towers, start=1):
            config = tower.config
            if config.normalisation != "l2":
                raise GCNConfigError(f"tower {index} is not L2-normalised: cosines do not add")
            if (config.sizes, config.max_position) != (first.sizes, first.max_position):
                raise GCNConfigError(f"tower {index} reads another input than tower 1")
        self.towers = nn.ModuleList(towers)
        #: ``None`` (equal) or the normalised weights of :func:`ensemble_concat`.
        self.weights = None if weights is None else tower_weights(weights, len(towers))
        width = sum(tower.config.out_dim for tower in towers)
        if not 1 <= out_dim <= width:
            raise GCNConfigError(f"out_dim must be in [1, {width}], not {out_dim}")
        self.mix = nn.Linear(width, out_dim)
        self.config: GCNConfig = dataclasses.replace(first, out_dim=out_dim)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> GCNEnsemble:
        """A freshly initialised ensemble of the recorded architecture: ``record`` holds
        ``model_configs`` (each tower's :meth:`GCNConfig.to_dict`), ``out_dim`` and, when the
        towers weigh differently, ``weights``, as an ensemble checkpoint's ``ensemble`` entry
        and its model card's ``training.ensemble`` do.
        """
        towers = [GraphCNN(GCNConfig.from_dict(dict(c))) for c in record["model_configs"]]
        return cls(towers, int(record["out_dim"]), record.get("weights"))

    def concat(self, batch: object) -> Tensor:
        """``z`` (B, K d) of a torch-geometric batch: the towers' unit vectors, scaled."""
        return ensemble_concat([tower(batch) for tower in self.towers], self.weights)

    def set_projection(self, weight: Tensor, bias: Tensor) -> None:
        """Install a fitted projection (:func:`fit_projection`)."""
        with torch.no_grad():
            self.mix.weight.copy_(weight)
            self.mix.bias.copy_(bias)

    def forward(self, batch: object) -> Tensor:
        """Unit vectors (B, D) of a :class:`Batch` (or one :class:`Data`)."""
        parts = [tower(batch) for tower in self.towers]
        return ensemble_embed(parts, self.mix.weight, self.mix.bias, self.weights)
