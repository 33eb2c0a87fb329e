"""run_with_time_limit: the SIGALRM path times out, and a deadline that lands in a ``__del__``
is repeated instead of reaching ``sys.unraisablehook`` (pytest fails a test on that hook)."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest

from mathsearch.indexer.errors import LimitExceeded
from mathsearch.indexer.time_limit import TIMEOUT_REASON, run_with_time_limit


class _SlowFinaliser:
    """Spins in ``__del__`` (where Python drops a raised exception as unraisable)."""

    def __del__(self) -> None:
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            pass


def _finalise_then_spin() -> None:
    _SlowFinaliser()  # dropped at once: the first alarm lands in its __del__
    end = time.monotonic() + 10.0
    while time.monotonic() < end:  # a repeat of the alarm lands here
        pass


def test_returns_the_result_within_the_limit() -> None:
    assert run_with_time_limit(sum, 5.0, ([1, 2, 3],)) == 6


def test_times_out_with_the_error_and_its_reason() -> None:
    started = time.monotonic()
    with pytest.raises(LimitExceeded) as caught:
        run_with_time_limit(time.sleep, 0.2, (5.0,), what="sleeping")
    assert caught.value.reason == TIMEOUT_REASON
    assert "sleeping took longer than 0.2 s" in str(caught.value)
    assert time.monotonic() - started < 4.0


def test_a_deadline_inside_a_finaliser_is_repeated_not_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    with pytest.raises(LimitExceeded) as caught:
        run_with_time_limit(_finalise_then_spin, 0.2, what="finalising")
    assert caught.value.reason == TIMEOUT_REASON
    assert [type(u.exc_value).__name__ for u in seen] == []
    assert sys.unraisablehook == seen.append  # the caller's hook is back


def test_other_unraisable_errors_still_reach_the_callers_hook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class _Broken:
        def __del__(self) -> None:
            raise ValueError("broken finaliser")

    def drop_one() -> str:
        _Broken()
        return "done"

    seen: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    assert run_with_time_limit(drop_one, 5.0) == "done"
    assert [type(u.exc_value).__name__ for u in seen] == ["ValueError"]
