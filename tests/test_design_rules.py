"""The design rules live in the repository: docs/architecture.md numbers them, and every
"docs/architecture.md, rule N" in the code and the docs names one of them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO / "docs" / "architecture.md"

#: The rules by number, as the design they come from numbers them (the numbers never change).
RULES = {
    1: "The inference path never imports torch",
    2: "One featurisation",
    3: "Errors are data",
    4: "Every write is idempotent",
    5: "One concept per module",
    6: "Imports point down only",
}
#: Files that still cite the design outside the repository, left to their owners' next edit.
#: Remove a name once its file cites docs/architecture.md instead.
PENDING: set[str] = set()

SUFFIXES = {".py", ".md", ".toml", ".sh", ".yaml", ".yml", ".cfg", ".txt", ".json"}
SKIP_DIRS = {"research", "__pycache__", "node_modules", "build", "dist", "test-artifacts"}
CITATION = re.compile(r"architecture\.md,?\s+rules?\s+(\d+)")


def _rules(text: str) -> dict[int, str]:
    """The numbered items of the "## Design rules" section."""
    section = text.split("\n## Design rules\n", 1)[1].split("\n## ", 1)[0]
    return {
        int(m.group(1)): m.group(2)
        for m in re.finditer(r"^(\d+)\. (.+)$", section, flags=re.MULTILINE)
    }


def _files() -> Iterator[Path]:
    for path in REPO.rglob("*"):
        parts = path.relative_to(REPO).parts
        if any(p.startswith(".") or p in SKIP_DIRS or p.endswith(".egg-info") for p in parts):
            continue
        if path.suffix in SUFFIXES and path.is_file() and path != Path(__file__).resolve():
            yield path


def test_architecture_numbers_the_design_rules() -> None:
    rules = _rules(ARCHITECTURE.read_text(encoding="utf-8"))
    assert sorted(rules) == sorted(RULES)
    for number, title in RULES.items():
        assert title in rules[number], f"rule {number} is not '{title}': {rules[number]}"


def test_every_rule_citation_resolves_inside_the_repository() -> None:
    numbers = set(_rules(ARCHITECTURE.read_text(encoding="utf-8")))
    unresolved, outside, citing = [], [], set()
    for path in _files():
        text = path.read_text(encoding="utf-8", errors="replace")
        name = path.relative_to(REPO).as_posix()
        for match in CITATION.finditer(text):
            if int(match.group(1)) not in numbers:
                unresolved.append(f"{name}: {match.group(0)}")
        if "DESIGN.md" in text:
            citing.add(name)
            if name not in PENDING:
                outside.append(name)
    assert not unresolved, "citations of rules docs/architecture.md lacks: " + ", ".join(unresolved)
    assert not outside, "cite docs/architecture.md, not DESIGN.md: " + ", ".join(sorted(outside))
    assert not PENDING - citing, f"no longer pending, drop from PENDING: {sorted(PENDING - citing)}"


def test_the_citation_pattern_finds_both_spellings() -> None:
    found = CITATION.findall("(docs/architecture.md, rule 4) and architecture.md rule 7")
    assert found == ["4", "7"]
