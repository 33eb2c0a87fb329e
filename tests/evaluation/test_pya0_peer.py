"""Approach Zero (pya0) indexes real hep-th equations in a child process and can search them."""

from __future__ import annotations

from pathlib import Path

import pytest

from mathsearch.evaluation import pya0_peer
from mathsearch.evaluation.pya0_peer import Pya0Error, Pya0Result, Pya0Unavailable, index_with_pya0
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from mathsearch.indexer.records import EquationRecord

pytest.importorskip("pya0")

MALFORMED = ("malformed-0", r"\frac{a")


@pytest.fixture(scope="module")
def equations() -> list[tuple[str, str]]:
    """The first 50 equations of the bundled hep-th sample plus one that does not parse."""
    records = [r for r in iter_hepth(bundled_sample_lines()) if isinstance(r, EquationRecord)]
    return [(r.eq_id, r.latex) for r in records[:50]] + [MALFORMED]


def test_indexes_real_equations_and_finds_them(
    equations: list[tuple[str, str]], tmp_path: Path
) -> None:
    stale = tmp_path / pya0_peer.INDEX_DIR / "stale.bin"
    stale.parent.mkdir()
    stale.write_bytes(b"left over from an earlier run")

    result = index_with_pya0(equations, tmp_path, maintain_every=10)

    assert isinstance(result, Pya0Result)
    assert result.equations == len(equations) == 51
    assert result.indexed + result.rejected == result.equations
    assert result.indexed > 40
    assert result.rejected >= 1  # at least the malformed one
    assert result.searchable is True
    assert result.seconds > 0
    assert result.eq_per_s == pytest.approx(result.equations / result.seconds)
    assert result.index_bytes > 0
    assert not stale.exists()
    assert set(result.to_dict()) == {
        "equations",
        "indexed",
        "rejected",
        "seconds",
        "eq_per_s",
        "index_bytes",
        "searchable",
        "index_files",
        "allocated_bytes",
    }
    assert result.index_files > 0
    assert result.allocated_bytes >= result.index_bytes


def test_only_malformed_is_not_searchable(tmp_path: Path) -> None:
    result = index_with_pya0([MALFORMED], tmp_path)
    assert (result.equations, result.indexed, result.rejected) == (1, 0, 1)
    assert result.searchable is False


def test_missing_pya0_raises_unavailable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(pya0_peer, "_pya0_importable", lambda: False)
    with pytest.raises(Pya0Unavailable, match=r"pip install pya0==0\.3\.7"):
        index_with_pya0([("a-0", "x^2")], tmp_path)


def test_child_failure_raises_with_stderr(tmp_path: Path) -> None:
    (tmp_path / pya0_peer.INDEX_DIR).write_text("a file where the index directory goes")
    with pytest.raises(Pya0Error, match="NotADirectoryError"):
        index_with_pya0([("a-0", "x^2")], tmp_path)


def test_negative_maintain_every_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="maintain_every"):
        index_with_pya0([("a-0", "x^2")], tmp_path, maintain_every=-1)
