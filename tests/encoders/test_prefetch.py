"""mathsearch.encoders.prefetch: one step ahead on a worker thread, the same results as inline."""

from __future__ import annotations

import threading

import pytest

from mathsearch.encoders.prefetch import BatchPrefetcher, prefetch_enabled


class _Source:
    """A stateful batch source (like a sampler reseeded per step) that records its callers."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, str]] = []
        self.busy = False

    def __call__(self, step: int) -> str:
        if self.busy:  # two steps at once would corrupt a stateful sampler
            raise AssertionError("prepare called concurrently")
        self.busy = True
        self.calls.append((step, threading.current_thread().name))
        self.busy = False
        return f"batch-{step}"


def _run(enabled: bool, steps: int = 5) -> tuple[list[str], _Source]:
    source = _Source()
    with BatchPrefetcher(source, enabled=enabled) as fetch:
        got = [fetch.get(s, s + 1 if s + 1 < steps else None) for s in range(steps)]
    return got, source


def test_prefetched_batches_equal_inline_ones_and_come_from_the_worker() -> None:
    inline, inline_source = _run(enabled=False)
    ahead, ahead_source = _run(enabled=True)
    assert ahead == inline == [f"batch-{s}" for s in range(5)]
    assert [s for s, _ in ahead_source.calls] == list(range(5))  # each step prepared once
    assert {name for _, name in inline_source.calls} == {threading.current_thread().name}
    # only step 0 is prepared by the caller; steps 1-4 on the worker thread, ahead of time
    assert [name.startswith("prefetch") for _, name in ahead_source.calls] == [False] + [True] * 4


def test_a_step_out_of_order_is_prepared_again() -> None:
    source = _Source()
    with BatchPrefetcher(source) as fetch:
        assert fetch.get(0, 1) == "batch-0"
        assert fetch.get(7) == "batch-7"  # step 1 was in flight; 7 is built fresh
    assert [s for s, _ in source.calls] == [0, 1, 7]


def test_an_error_while_preparing_is_raised_by_get() -> None:
    def prepare(step: int) -> int:
        if step == 2:
            raise ValueError("bad batch 2")
        return step

    with BatchPrefetcher(prepare) as fetch:
        assert fetch.get(0, 1) == 0
        assert fetch.get(1, 2) == 1
        with pytest.raises(ValueError, match="bad batch 2"):
            fetch.get(2, 3)


def test_modes() -> None:
    assert prefetch_enabled("auto", "cuda") and not prefetch_enabled("auto", "cpu")
    assert prefetch_enabled("on", "cpu") and not prefetch_enabled("off", "cuda")
    with pytest.raises(ValueError, match="prefetch must be one of"):
        prefetch_enabled("always", "cpu")
