"""Command-line plug-ins of the encoder families beyond the graph CNN.

``mathsearch train``, ``mathsearch eval`` and ``mathsearch export`` keep one parser each; every
other family adds its sub-commands from its own module, so that each family's code stays in one
place and ``mathsearch --help`` imports no torch:

* ``train <family>``: module ``mathsearch.cli.train_<family>`` with ``register(kinds)``
  (adds the
  ``<family>`` sub-parser to ``train``'s sub-parsers) and ``run(args) -> int``;
* ``eval <name>``: the modules in :data:`EVAL_MODULES`, same two functions;
* ``export``: a checkpoint whose top-level ``"family"`` entry is not ``gcn`` goes to
  ``mathsearch.cli.export_<family>.run_export(args) -> int`` (see :func:`checkpoint_family`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
from pathlib import Path
from types import ModuleType
from typing import Any

from mathsearch.export.families import FAMILY_REGISTRY

logger = logging.getLogger(__name__)

__all__ = [
    "EVAL_MODULES",
    "TRAIN_FAMILIES",
    "checkpoint_family",
    "eval_module",
    "register_evals",
    "register_trainers",
    "train_module",
]

#: Families trained by a plug-in module ``mathsearch.cli.train_<family>``: every family of the
#: registry but the graph CNN, whose ``train gcn`` is built in.
TRAIN_FAMILIES = tuple(name for name in FAMILY_REGISTRY if name != "gcn")
#: ``eval`` sub-commands from plug-in modules (name -> module).
EVAL_MODULES: dict[str, str] = {
    "score-k": "mathsearch.cli.eval_seq2seq",
    "generation": "mathsearch.cli.eval_seq2seq",
    "analogies": "mathsearch.cli.eval_seq2seq",
    "class-split": "mathsearch.cli.eval_seq2seq",
    "bitmap": "mathsearch.cli.eval_bitmap",
    "figure": "mathsearch.cli.eval_figure",
    "exact-knn": "mathsearch.cli.eval_exact_knn",
    "compare": "mathsearch.cli.eval_compare",
    "library": "mathsearch.cli.eval_library",
}


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:  # the plug-in exists but one of its imports does not
            raise
        return None


def train_module(family: str) -> ModuleType | None:
    """The plug-in module that trains ``family`` (None when there is none)."""
    return _module(f"mathsearch.cli.train_{family}")


def eval_module(command: str) -> ModuleType | None:
    """The plug-in module of ``eval <command>`` (None when there is none)."""
    return _module(EVAL_MODULES[command]) if command in EVAL_MODULES else None


def register_trainers(kinds: Any) -> None:
    """Add every plug-in family to ``train``'s sub-parsers."""
    for family in TRAIN_FAMILIES:
        module = train_module(family)
        if module is not None:
            module.register(kinds)


def register_evals(kinds: Any) -> None:
    """Add every plug-in ``eval`` sub-command (a module registering several adds them once)."""
    done: set[str] = set()
    for module_name in dict.fromkeys(EVAL_MODULES.values()):
        module = _module(module_name)
        if module is not None and module_name not in done:
            module.register(kinds)
            done.add(module_name)


def checkpoint_family(path: str | Path) -> str:
    """The ``family`` a checkpoint was written for: its top-level ``"family"`` entry, ``gcn``
    when it has none (the graph CNN's checkpoints predate the key). Needs torch.
    """
    from mathsearch.encoders.torch_setup import checkpoint_family as read_family

    return read_family(path)


def run_plugin(module: ModuleType, args: argparse.Namespace) -> int:
    """Run a plug-in's handler."""
    return int(module.run(args))
