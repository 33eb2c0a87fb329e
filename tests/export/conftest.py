"""Real equations for the export tests: 1,171 hep-th equations of 357 papers (every 12th record
of ../shared/data/hepth2003/equation.txt, verbatim, in tests/resources/export)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from mathsearch.indexer.hepth import iter_hepth
from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord

PARITY_FILE = (
    Path(__file__).resolve().parents[1] / "resources" / "export" / "hepth2003-every12th.txt"
)


@lru_cache(maxsize=1)
def real_graphs() -> tuple[EquationGraph, ...]:
    records = [r for r in iter_hepth(PARITY_FILE) if isinstance(r, EquationRecord)]
    parsed = Featuriser().parse_batch(records)
    return tuple(p.graph for p in parsed if isinstance(p, ParsedEquation))
