"""mathsearch.encoders.torch_setup: process settings for training."""

from __future__ import annotations

import sys

import pytest

from mathsearch.encoders.torch_setup import keep_large_allocations


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_keep_large_allocations_is_applied_on_glibc() -> None:
    assert keep_large_allocations() is True
    assert keep_large_allocations(32 << 20) is True  # glibc's own upper bound is accepted too
