"""The ``mathsearch train`` command: one sub-command per encoder family, from the family
registry (:data:`mathsearch.runtime.families.FAMILY_REGISTRY`: ``train gcn``, ``train bitmap``,
...; each in its ``mathsearch.cli.train_<family>`` plug-in), plus ``train soup`` and ``train
ensemble`` over graph-CNN checkpoints.

Wired into the ``mathsearch`` parser by :func:`add_train`; :func:`run_train` is the handler.
This module imports no torch at import time, so ``mathsearch --help`` stays light: the training
stack (the ``train`` extra: torch, torch-geometric) is imported when the command runs.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["add_train", "run_train"]


def add_train(commands: Any) -> None:
    """Register ``train`` with every family's sub-command on the ``mathsearch`` parser."""
    train = commands.add_parser(
        "train",
        help="train an equation encoder (PyTorch; needs the train extra)",
        description="Train an equation encoder on extracted equations and write checkpoints.",
        epilog="examples:\n  mathsearch train gcn ../shared/data/hepth2003/*.txt --format hepth "
        "--out runs/gcn",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kinds = train.add_subparsers(dest="train_command", required=True, metavar="ENCODER")
    from mathsearch.cli import train_ensemble, train_soup
    from mathsearch.cli.families import register_trainers

    register_trainers(kinds)
    train_soup.register(kinds)
    train_ensemble.register(kinds)


def run_train(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch train``; 0 on success, 1 with a one-line reason otherwise."""
    if args.train_command == "soup":
        from mathsearch.cli import train_soup

        return train_soup.run(args)
    if args.train_command == "ensemble":
        from mathsearch.cli import train_ensemble

        return train_ensemble.run(args)
    from mathsearch.cli.families import train_module

    module = train_module(args.train_command)
    if module is None:
        sys.stderr.write(f"mathsearch: error: unknown encoder {args.train_command!r}\n")
        return 1
    return int(module.run(args))
