"""What every ``mathsearch`` subcommand prints: results on stdout, one-line errors on stderr."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

#: The help formatter of every subcommand (keeps the examples' line breaks).
RAW_HELP = argparse.RawDescriptionHelpFormatter


def emit(text: str) -> None:
    """Write one result block to stdout."""
    sys.stdout.write(text + "\n")


def emit_report(
    args: argparse.Namespace, report: Mapping[str, Any], text: Callable[[Any], str]
) -> None:
    """Write ``report`` as JSON to ``--report`` when given; print it as JSON (``--json``) or as
    ``text(report)``."""
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    emit(json.dumps(report, indent=2) if args.json else text(report))


def fail(message: str) -> int:
    """Write ``mathsearch: error: message`` to stderr; return the exit status 1."""
    sys.stderr.write(f"mathsearch: error: {message}\n")
    return 1


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, not {value}")
    return value


def unit_fraction(text: str) -> float:
    """argparse type: a fraction in [0, 1)."""
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), not {value}")
    return value
