"""Every command and subcommand's ``--help`` ends with examples: an "example(s):" section with at
least one ``mathsearch ...`` line (docs/architecture.md, "Command line")."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from mathsearch.cli.main import _parser

#: "examples:" (or "example:") on a line of its own, as the epilogs write it.
SECTION = re.compile(r"^examples?:\s*$", flags=re.IGNORECASE | re.MULTILINE)


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser of the tree, the top one included, with its command path."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # an alias names the same parser again
                    seen.add(id(sub))
                    yield from _commands(sub, (*path, name))


def _examples(help_text: str) -> list[str]:
    """The ``mathsearch ...`` lines of the help's example section (empty when it has none)."""
    match = SECTION.search(help_text)
    if match is None:
        return []
    lines = help_text[match.end() :].splitlines()
    return [line.strip() for line in lines if line.strip().startswith("mathsearch ")]


COMMANDS = dict(_commands(_parser()))


def test_the_walk_reaches_nested_subcommands() -> None:
    assert {("stack", "up"), ("models", "drop"), ("vocab", "show"), ("drop",)} <= set(COMMANDS)
    assert ("bench", "train", "gcn") in COMMANDS and len(COMMANDS) > 40


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=lambda p: " ".join(p) or "mathsearch")
def test_help_has_examples(path: tuple[str, ...]) -> None:
    examples = _examples(COMMANDS[path].format_help())
    assert examples, f"`mathsearch {' '.join(path)} --help` has no examples"
    if path:  # a subcommand's examples run that subcommand
        assert any(line.split()[1 : 1 + len(path)] == list(path) for line in examples), examples


def test_examples_are_found_only_in_an_example_section() -> None:
    assert _examples("usage: mathsearch x\n\n  mathsearch x --json\n") == []
    assert _examples("usage: x\n\nexamples:\n  mathsearch x --json   what it does\n") == [
        "mathsearch x --json   what it does"
    ]


def test_tune_help_names_every_grid_key() -> None:
    from mathsearch.evaluation.tuning_grid import KEYS

    text = " ".join(COMMANDS[("tune",)].format_help().split())
    grid = text.split("grid keys:", 1)[1]
    missing = [key for key in KEYS if not re.search(rf"\b{key}\b", grid)]
    assert not missing, f"tune --help does not name the grid keys {missing}"
