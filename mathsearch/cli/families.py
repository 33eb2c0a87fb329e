"""Command-line plug-ins of the encoder families, read from the one family registry
(:data:`mathsearch.runtime.families.FAMILY_REGISTRY`).

``mathsearch train``, ``mathsearch eval`` and ``mathsearch export`` keep one parser each; every
family adds its sub-commands from its own modules, so that each family's code stays in one
place and ``mathsearch --help`` imports no torch:

* ``train <family>``: the family's ``cli_train`` module (``mathsearch.cli.train_<family>``) with
  ``register(kinds)`` (adds the ``<family>`` sub-parser to ``train``'s sub-parsers) and
  ``run(args) -> int``; the graph CNN's ``train gcn`` is one of them;
* ``eval <name>``: the family's ``cli_eval`` module, and the plug-ins over every family in
  :data:`GENERAL_EVALS`, same two functions (a module may register several sub-commands);
* ``export CHECKPOINT``: the family named by the checkpoint's top-level ``"family"`` entry
  (:func:`checkpoint_family`) goes to its ``cli_export`` module's ``run_export(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
from pathlib import Path
from types import ModuleType
from typing import Any

from mathsearch.runtime.families import FAMILY_REGISTRY

logger = logging.getLogger(__name__)

__all__ = [
    "GENERAL_EVALS",
    "checkpoint_family",
    "eval_module",
    "export_module",
    "register_evals",
    "register_trainers",
    "train_module",
]

#: ``eval`` plug-ins that belong to no one family (modules of :mod:`mathsearch.cli`).
GENERAL_EVALS = ("eval_exact_knn", "eval_compare", "eval_library")


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:  # the plug-in exists but one of its imports does not
            raise
        return None


def train_module(family: str) -> ModuleType | None:
    """The plug-in module that trains ``family`` (None when there is no such family)."""
    entry = FAMILY_REGISTRY.get(family)
    return None if entry is None else _module(entry.module("cli_train"))


def export_module(family: str) -> ModuleType | None:
    """The plug-in module that exports ``family``'s checkpoints (None when there is none)."""
    entry = FAMILY_REGISTRY.get(family)
    return None if entry is None else _module(entry.module("cli_export"))


def eval_module(args: argparse.Namespace) -> ModuleType | None:
    """The plug-in module of the parsed ``eval`` sub-command (None for a built-in one)."""
    name = getattr(args, "eval_plugin", None)
    return _module(name) if name else None


def register_trainers(kinds: Any) -> None:
    """Add every family's ``train`` sub-command, in the registry's order."""
    for family in FAMILY_REGISTRY:
        module = train_module(family)
        if module is not None:
            module.register(kinds)


def _eval_plugins() -> list[str]:
    families = [f.module("cli_eval") for f in FAMILY_REGISTRY.values() if f.cli_eval]
    return [*families, *(f"mathsearch.cli.{name}" for name in GENERAL_EVALS)]


def register_evals(kinds: Any) -> None:
    """Add every plug-in ``eval`` sub-command; each parser it adds remembers its module."""
    for module_name in dict.fromkeys(_eval_plugins()):
        module = _module(module_name)
        if module is None:
            continue
        before = set(kinds.choices)
        module.register(kinds)
        for command in set(kinds.choices) - before:
            kinds.choices[command].set_defaults(eval_plugin=module_name)


def checkpoint_family(path: str | Path) -> str:
    """The ``family`` a checkpoint was written for: its top-level ``"family"`` entry, ``gcn``
    when it has none (the graph CNN's checkpoints predate the key). Needs torch.
    """
    from mathsearch.encoders.torch_setup import checkpoint_family as read_family

    return read_family(path)


def run_plugin(module: ModuleType, args: argparse.Namespace) -> int:
    """Run a plug-in's handler."""
    return int(module.run(args))
