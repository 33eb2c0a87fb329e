"""Inputs of ``mathsearch eval``: JSON files, the train/test split of a run, formulas to graphs.

Every problem with an input is an :class:`EvalInputError` with a one-line message naming the
file (missing, not JSON, wrong shape); a formula that cannot be featurised is not an error but a
failure record (:func:`featurise_formulas`), so one bad formula never stops an evaluation.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.indexer.parse import Featuriser
from mathsearch.indexer.records import EquationRecord, Failure

logger = logging.getLogger(__name__)

__all__ = [
    "EvalInputError",
    "featurise_formulas",
    "load_categories",
    "load_queries",
    "load_relevance",
    "read_json",
    "split_settings",
]


class EvalInputError(ValueError):
    """An evaluation input (file, JSON shape, checkpoint, option) is unusable."""


# --- inputs ------------------------------------------------------------------------------------


def read_json(path: str | Path, what: str) -> Any:
    """The parsed JSON of ``path``; ``what`` names the file in the error message."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise EvalInputError(f"{what} file {path} does not exist") from exc
    except json.JSONDecodeError as exc:
        raise EvalInputError(f"{what} file {path} is not valid JSON: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalInputError(f"cannot read the {what} file {path}: {exc}") from exc


def _str_map(data: Any, path: str | Path, what: str, shape: str) -> dict[str, Any]:
    if not isinstance(data, dict) or not data:
        raise EvalInputError(f"{what} file {path} must be a non-empty JSON object {shape}")
    return data


def load_categories(path: str | Path) -> dict[str, list[str]]:
    """``{category: [formula, ...]}`` from a JSON file (formulas: LaTeX or MathML strings)."""
    data = _str_map(read_json(path, "categories"), path, "categories", "{category: [formula]}")
    for name, formulas in data.items():
        if not isinstance(formulas, list) or not all(isinstance(f, str) for f in formulas):
            raise EvalInputError(f"categories file {path}: {name!r} must be a list of strings")
    return data


def load_queries(path: str | Path) -> dict[str, str]:
    """``{query_id: latex}`` from a JSON file."""
    data = _str_map(read_json(path, "queries"), path, "queries", "{query_id: latex}")
    bad = [key for key, value in data.items() if not isinstance(value, str)]
    if bad:
        raise EvalInputError(f"queries file {path}: {bad[0]!r} is not a LaTeX string")
    return data


def load_relevance(path: str | Path) -> dict[str, list[str]]:
    """``{query_id: [eq_id, ...]}`` from a JSON file."""
    data = _str_map(read_json(path, "relevance"), path, "relevance", "{query_id: [eq_id]}")
    for key, ids in data.items():
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise EvalInputError(f"relevance file {path}: {key!r} must be a list of eq_id strings")
    return data


def split_settings(
    metadata: dict[str, Any], test_fraction: float | None, seed: int | None, limit: int | None
) -> dict[str, Any]:
    """The train/test split of a training run: flags, else the checkpoint's, else defaults.

    Looked up in the checkpoint: ``split`` ({test_fraction, seed, limit}; ``train gcn`` writes it
    into ``train_config``), then top-level
    ``test_fraction`` / ``split_seed`` / ``limit``, then ``train_config`` (``mathsearch train
    gcn`` splits with its ``--seed``, the ``seed`` of ``train_config``).
    """
    config = metadata.get("train_config") or {}
    split = metadata.get("split") or config.get("split") or {}
    if not isinstance(split, dict):
        split = {}
    found = {
        "test_fraction": split.get(
            "test_fraction", metadata.get("test_fraction", config.get("test_fraction"))
        ),
        "seed": split.get("seed", metadata.get("split_seed", config.get("seed"))),
        "limit": split.get("limit", metadata.get("limit")),
    }
    flags = {"test_fraction": test_fraction, "seed": seed, "limit": limit}
    defaults = {"test_fraction": 0.2, "seed": 0, "limit": None}
    out: dict[str, Any] = {}
    for key, flag in flags.items():
        if flag is not None:
            out[key], origin = flag, "flag"
        elif found[key] is not None:
            out[key], origin = found[key], "checkpoint"
        else:
            out[key], origin = defaults[key], "default"
        out[f"{key}_from"] = origin
    if not 0.0 < float(out["test_fraction"]) < 1.0:
        raise EvalInputError(f"test fraction must be in (0, 1), not {out['test_fraction']}")
    return out


def featurise_formulas(
    featuriser: Featuriser, items: Sequence[tuple[str, str]]
) -> tuple[list[EquationGraph], list[int], list[dict[str, Any]]]:
    """Featurise ``(id, formula)`` pairs: MathML when the text starts with ``<``, else LaTeX.

    Returns the graphs of the ones that worked, their indices into ``items``, and one JSON-able
    failure record per formula that did not (never raises for a bad formula).
    """
    records = []
    for eq_id, formula in items:
        text = formula.strip()
        is_mathml = text.startswith("<")
        records.append(
            EquationRecord(
                eq_id=eq_id,
                doc_id="",
                position=0,
                latex=None if is_mathml else text,
                mathml=text if is_mathml else None,
            )
        )
    graphs: list[EquationGraph] = []
    kept: list[int] = []
    failures: list[dict[str, Any]] = []
    for index, item in enumerate(featuriser.parse_batch(records)):
        if isinstance(item, Failure):
            failures.append(
                {
                    "id": item.eq_id,
                    "stage": item.stage,
                    "reason": item.reason,
                    "detail": item.detail,
                    "excerpt": item.excerpt,
                }
            )
        else:
            graphs.append(item.graph)
            kept.append(index)
    return graphs, kept, failures
