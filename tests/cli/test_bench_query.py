"""``mathsearch bench query`` on the command line: its options, checks and wiring."""

from __future__ import annotations

import argparse

import pytest

from mathsearch.bench.query import DEFAULT_MODES
from mathsearch.bench.timing import MODES
from mathsearch.cli.bench_query import _check, add_bench_query, run_bench_query
from mathsearch.cli.main import _parser


def test_parser_defaults_and_help() -> None:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="bench_command")
    add_bench_query(commands)
    args = parser.parse_args(["query"])
    assert args.sizes == "10000,100000,1000000"
    # the first-stage peers and the shipped default profile, not every variant
    assert args.modes.split(",") == list(DEFAULT_MODES)
    assert set(DEFAULT_MODES) <= set(MODES) and "default" in DEFAULT_MODES
    assert (args.queries, args.warmup, args.k) == (200, 20, 10)
    assert args.keep is True and args.rebuild is False and args.json is False
    assert args.replica_vectors == "embed"
    assert parser.parse_args(["query", "--no-keep"]).keep is False
    query = commands.choices["query"]
    assert isinstance(query.formatter_class, type)
    assert issubclass(query.formatter_class, argparse.RawDescriptionHelpFormatter)
    assert "mathsearch bench query --sizes 2000" in query.format_help()
    assert args.max_df is None
    assert parser.parse_args(["query", "--max-df", "0.2"]).max_df == 0.2
    assert "--max-df F" in query.format_help()
    assert args.depth is None  # the default search profile's
    assert parser.parse_args(["query", "--depth", "30"]).depth == 30


def test_wired_into_mathsearch_bench() -> None:
    args = _parser().parse_args(["bench", "query", "--sizes", "10000", "--modes", "rrf-client"])
    assert (args.command, args.bench_command) == ("bench", "query")
    assert _check(args) == ([10000], ["rrf-client"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--sizes", "10k"], "is not a list of integers"),
        (["--modes", "fusion,hybrid"], "unknown mode(s) hybrid"),
        (["--sizes", "0"], "--sizes must be positive"),
        (["--queries", "0"], "--queries must be >= 1"),
        (["--max-df", "1.5"], "--max-df must lie in (0, 1]"),
        (["--depth", "0"], "--depth must be >= 1"),
    ],
)
def test_bad_arguments_fail_before_any_work(capsys, argv: list[str], message: str) -> None:
    args = _parser().parse_args(["bench", "query", *argv])
    assert run_bench_query(args) == 1
    assert message in capsys.readouterr().err
