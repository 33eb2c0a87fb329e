r"""Targets of the bitmap CNN's ``teacher`` task: another encoder's vectors of the same equations.

Beyond the ECML 2019 seed: the seed's proxy tasks (symbols, keywords, same paper) give the CNN a
weak signal per crop; here every crop gets a dense target, the vector a trained encoder (e.g. the
graph CNN, which reads the same equation's LaTeX) gives it, and the CNN learns to place the
rendered crop where the teacher places the formula (cross-modal distillation with in-batch
negatives, as CLIP aligns images with text: Radford et al. 2021, sec. 2.3). The loss is
:class:`~mathsearch.encoders.losses.info_nce_loss.InfoNCELoss` with the crop embeddings as anchors
and the targets as positives.

The teacher's unit vectors are centred (``centre=True``: their mean :math:`\mu`, a direction
every equation shares, is taken out, so that the targets differ where the equations do) and
projected onto their top ``d`` principal directions, then re-normalised:

.. math::
    T - \mu = U \Sigma V^\top,\qquad
    \hat t_i = \frac{(t_i - \mu) V_{:, :d}}{\lVert (t_i - \mu) V_{:, :d} \rVert}

(``centre=False``: :math:`\mu = 0`, and inner products are kept as well as rank ``d`` allows.)

Rows of zeros (equations the teacher refused) stay zero and are left out of training. Numpy
only: the teacher's vectors come from the torch-free runtime, computed by the caller.

Example::

    targets, basis = project_targets(teacher_vectors, 64)   # (N, 128) -> (N, 64), (128, 64)
"""

from __future__ import annotations

import logging

import numpy as np

logger = logging.getLogger(__name__)

__all__ = ["TeacherError", "project_targets"]


class TeacherError(ValueError):
    """Teacher vectors that cannot serve as targets."""


def project_targets(
    vectors: np.ndarray, dim: int, *, centre: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Unit targets ``(N, dim)`` and the basis ``(D, dim)`` from teacher vectors ``(N, D)``.

    Raises:
        TeacherError: not a 2-d array, ``D < dim``, or fewer than ``dim`` usable rows.

    >>> t, basis = project_targets(np.eye(3, dtype=np.float32), 3, centre=False)
    >>> bool(np.allclose(np.abs(t @ t.T), np.eye(3))), basis.shape
    (True, (3, 3))
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[1] < dim:
        raise TeacherError(f"teacher vectors must be (N, >= {dim}), not {vectors.shape}")
    usable = np.linalg.norm(vectors, axis=1) > 0
    if usable.sum() < dim:
        raise TeacherError(f"{int(usable.sum())} usable teacher vectors: need at least {dim}")
    unit = vectors[usable] / np.linalg.norm(vectors[usable], axis=1, keepdims=True)
    if centre:
        unit = unit - unit.mean(axis=0)
    if vectors.shape[1] == dim and not centre:
        basis = np.eye(dim, dtype=np.float32)
    else:
        _, _, vt = np.linalg.svd(unit, full_matrices=False)
        basis = vt[:dim].T.astype(np.float32)
    out = np.zeros((len(vectors), dim), dtype=np.float32)
    projected = unit @ basis
    out[usable] = projected / np.maximum(np.linalg.norm(projected, axis=1, keepdims=True), 1e-12)
    return out, basis
