"""Targets of the bitmap CNN's teacher task: a rank-d projection that keeps inner products."""

from __future__ import annotations

import numpy as np
import pytest

from mathsearch.encoders.bitmap_teacher import TeacherError, project_targets


def test_projection_keeps_cosines_of_rank_d_vectors() -> None:
    rng = np.random.default_rng(0)
    low = rng.standard_normal((200, 8))
    vectors = low @ rng.standard_normal((8, 32))  # 32-d vectors of rank 8
    vectors[5] = 0.0  # refused by the teacher
    targets, basis = project_targets(vectors.astype(np.float32), 8, centre=False)
    assert targets.shape == (200, 8) and basis.shape == (32, 8)
    keep = np.linalg.norm(vectors, axis=1) > 0
    unit = vectors[keep] / np.linalg.norm(vectors[keep], axis=1, keepdims=True)
    assert np.allclose(targets[keep] @ targets[keep].T, unit @ unit.T, atol=1e-4)
    assert not targets[5].any()
    assert np.allclose(np.linalg.norm(targets[keep], axis=1), 1.0, atol=1e-5)


def test_centred_targets_lose_the_shared_direction() -> None:
    rng = np.random.default_rng(1)
    shared = np.ones(32, np.float32) * 3.0
    vectors = (shared + rng.standard_normal((300, 32))).astype(np.float32)
    raw, _ = project_targets(vectors, 8, centre=False)
    centred, _ = project_targets(vectors, 8)
    off = ~np.eye(300, dtype=bool)
    assert (raw @ raw.T)[off].mean() > 0.8  # every pair alike: the shared direction
    assert abs((centred @ centred.T)[off].mean()) < 0.05
    assert np.allclose(np.linalg.norm(centred, axis=1), 1.0, atol=1e-5)


def test_projection_loses_what_rank_d_cannot_hold() -> None:
    vectors = np.eye(16, dtype=np.float32)
    targets, _ = project_targets(vectors, 4, centre=False)
    assert np.count_nonzero(np.abs(targets).sum(axis=1) > 1e-6) <= 16
    with pytest.raises(TeacherError, match=">= 32"):
        project_targets(vectors, 32)
    with pytest.raises(TeacherError, match="usable"):
        project_targets(np.zeros((10, 16), np.float32), 4)
