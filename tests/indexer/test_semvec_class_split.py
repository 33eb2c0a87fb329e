"""Seeded unseen/seen splits of SemVec classes and the `eval class-split` CLI."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from mathsearch.cli.main import main
from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.semvec import read_semvec_raw
from mathsearch.indexer.semvec_class_split import split_classes
from mathsearch.indexer.semvec_prefix import read_semvec_prefix

RESOURCES = Path(__file__).resolve().parents[1] / "resources"
ONEV10 = RESOURCES / "indexer" / "semvec" / "oneVarPoly10-validationset.json.gz"


def test_split_is_a_seeded_partition() -> None:
    classes = read_semvec_raw(ONEV10)
    unseen, seen = split_classes(classes, 0.5, seed=0)
    assert len(unseen) == len(classes) // 2 and len(unseen) + len(seen) == len(classes)
    assert not set(unseen) & set(seen) and {**unseen, **seen} == classes
    keys = sorted(classes)
    random.Random(0).shuffle(keys)
    assert list(unseen) == keys[: len(unseen)]  # the documented rule, reproducible elsewhere
    assert split_classes(classes, 0.5, seed=0) == (unseen, seen)
    assert set(split_classes(classes, 0.5, seed=1)[0]) != set(unseen)
    assert len(split_classes(classes, 0.25)[0]) == int(len(classes) * 0.25)
    for bad in (0.0, 1.0, -0.5):
        with pytest.raises(IndexerError, match="fraction"):
            split_classes(classes, bad)


def test_cli_writes_both_parts_as_readable_sets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "splits"
    assert main(["eval", "class-split", str(ONEV10), "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (row,) = report["sets"]
    unseen = read_semvec_prefix(out / "unseen" / ONEV10.name)
    seen = read_semvec_prefix(out / "seen" / ONEV10.name)
    assert row["set"] == "oneVarPoly10" and (row["unseen"], row["seen"]) == (len(unseen), len(seen))
    everything = {c.canonical for c in read_semvec_prefix(ONEV10)}
    assert {c.canonical for c in unseen} | {c.canonical for c in seen} == everything
    assert main(["eval", "class-split", str(ONEV10), "--out", str(out), "--fraction", "2"]) == 1
    assert "fraction" in capsys.readouterr().err
