"""What every ``mathsearch`` subcommand prints: results on stdout, one-line errors on stderr."""

from __future__ import annotations

import argparse
import sys

#: The help formatter of every subcommand (keeps the examples' line breaks).
RAW_HELP = argparse.RawDescriptionHelpFormatter


def emit(text: str) -> None:
    """Write one result block to stdout."""
    sys.stdout.write(text + "\n")


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
