"""The demo's modes come from the mode registry (no stack: the query order only)."""

from __future__ import annotations

from types import SimpleNamespace

from mathsearch.opensearch.modes import MODES
from mathsearch.opensearch.queries import Mode
from mathsearch.stack.demo import DEMO_MODES, demo_modes


def test_the_demo_queries_every_registered_mode_in_its_order() -> None:
    assert set(DEMO_MODES) == set(MODES) and len(DEMO_MODES) == len(MODES)
    # the fused hybrids, the other hybrids, the one-sided modes: the demo's output as before
    assert DEMO_MODES == (
        Mode.FUSION, Mode.RRF, Mode.RESCORE, Mode.KNN_RESCORE, Mode.KNN, Mode.BM25,
    )  # fmt: skip


def test_demo_modes_follow_the_registry_entries() -> None:
    def spec(*, fused: bool = False, hybrid: bool = True) -> SimpleNamespace:
        return SimpleNamespace(fused=fused, hybrid=hybrid)

    registry = {
        Mode.KNN: spec(hybrid=False),
        Mode.BM25: spec(hybrid=False),
        Mode.RESCORE: spec(),
        Mode.RRF: spec(fused=True),  # a new fused mode comes with the fused ones
    }
    assert demo_modes(registry) == (Mode.RRF, Mode.RESCORE, Mode.KNN, Mode.BM25)  # type: ignore[arg-type]
    assert demo_modes({Mode.KNN: spec(hybrid=False)}) == (Mode.KNN,)  # type: ignore[arg-type]
