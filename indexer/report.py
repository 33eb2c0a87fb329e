"""Coverage reports of extract and parse runs: counts per stage, failures by reason, speed.

The JSON that ``--report`` writes::

    {"stage_counts": {"input": 28923, "extract": 28890, "convert": 28700, ...},
     "failures": {"convert": {"unbalanced-braces": {"count": 33, "examples": [...]}}},
     "converted_with_unknown_macros": 6095, "unknown_macros": [["nn", 676], ...],
     "seconds": 12.3, "equations_per_second": 2351.0, "stage_seconds": {...}}
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mathsearch.indexer.records import Failure

logger = logging.getLogger(__name__)

_EXAMPLES = 5


@dataclass
class CoverageReport:
    """Counts as a run goes; :meth:`to_dict` is the ``--report`` JSON."""

    stages: tuple[str, ...] = ("extract", "convert", "graph", "tokens")
    inputs: int = 0
    passed: Counter[str] = field(default_factory=Counter)
    failures: dict[str, dict[str, list[Failure]]] = field(default_factory=dict)
    failure_counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    unknown_macros: Counter[str] = field(default_factory=Counter)
    with_unknown_macros: int = 0
    seconds: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    #: Optional stages that do not fail an equation (``prefix``): stage -> outcome -> count.
    optional: dict[str, Counter[str]] = field(default_factory=dict)

    def add_optional(self, stage: str, outcome: str) -> None:
        self.optional.setdefault(stage, Counter())[outcome] += 1

    def add_failure(self, failure: Failure) -> None:
        """Count a failure; the stages before the one it failed at count as passed."""
        self.failure_counts[(failure.stage, failure.reason)] += 1
        if failure.stage in self.stages:
            for stage in self.stages[: self.stages.index(failure.stage)]:
                self.passed[stage] += 1
        examples = self.failures.setdefault(failure.stage, {}).setdefault(failure.reason, [])
        if len(examples) < _EXAMPLES:
            examples.append(failure)

    def add_success(self, stages: tuple[str, ...], unknown_macros: list[str] | None = None) -> None:
        for stage in stages:
            self.passed[stage] += 1
        if unknown_macros:
            self.with_unknown_macros += 1
            self.unknown_macros.update(set(unknown_macros))

    @property
    def failed(self) -> int:
        return sum(self.failure_counts.values())

    def failed_at(self, stage: str) -> int:
        return sum(n for (s, _), n in self.failure_counts.items() if s == stage)

    def to_dict(self) -> dict[str, Any]:
        grouped: dict[str, dict[str, Any]] = {}
        for (stage, reason), count in self.failure_counts.most_common():
            grouped.setdefault(stage, {})[reason] = {
                "count": count,
                "examples": [
                    {"eq_id": f.eq_id, "detail": f.detail, "excerpt": f.excerpt}
                    for f in self.failures.get(stage, {}).get(reason, [])
                ],
            }
        done = self.passed[self.stages[-1]] if self.stages else 0
        return {
            "inputs": self.inputs,
            "stage_counts": {stage: self.passed[stage] for stage in self.stages},
            "failed": self.failed,
            "failed_per_stage": {stage: self.failed_at(stage) for stage in self.stages},
            "failures": grouped,
            "coverage": round(done / self.inputs, 6) if self.inputs else None,
            "converted_with_unknown_macros": self.with_unknown_macros,
            "unknown_macros": self.unknown_macros.most_common(30),
            "seconds": round(self.seconds, 3),
            "equations_per_second": round(self.inputs / self.seconds, 1) if self.seconds else None,
            "stage_seconds": {k: round(v, 3) for k, v in self.stage_seconds.items()},
            "optional_stages": {k: dict(v.most_common()) for k, v in self.optional.items()},
        }

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n")

    def summary(self) -> str:
        """One paragraph for the terminal."""
        data = self.to_dict()
        lines = [
            f"{self.inputs} input(s), {self.failed} failure record(s)"
            + (f", {data['equations_per_second']:.0f} equations/s" if self.seconds else "")
        ]
        for (stage, reason), count in self.failure_counts.most_common(12):
            lines.append(f"  {stage:<8} {reason:<28} {count}")
        if self.with_unknown_macros:
            top = ", ".join(f"\\{name} {n}" for name, n in self.unknown_macros.most_common(8))
            lines.append(
                f"  {self.with_unknown_macros} converted with unknown macros kept as identifiers"
                f" (top: {top})"
            )
        return "\n".join(lines)
