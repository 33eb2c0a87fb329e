"""The ``--grid`` of ``mathsearch tune``: parameter values in, distinct search configurations out.

A grid names values per parameter, as ``KEY=V1,V2`` tokens, ``KEY=START:STOP:STEP`` for an
inclusive numeric range, or a JSON file (an object of key to list, value or range string)::

    mode=fusion,rrf,rescore alpha=0.1:0.9:0.1 normalization=min_max,l2,z_score
    combination=arithmetic_mean,geometric_mean window=50,100 k=10,100 depth=100 rank_constant=60

Keys: ``mode`` (or ``all``), ``alpha``, ``normalization``, ``combination``, ``window``, ``k``,
``depth``, ``rank_constant``, ``max_df``, ``max_terms`` (0: every token), ``rerank_window`` and
``rerank_alpha`` (the second stage of a base profile with ``rerank`` encoders; 0: off). A key left
out takes one value: the default grid's ``k``/``window``/``depth`` (100), the ``base`` profile's
``max_df``/``max_terms``/``rerank_window``/``rerank_alpha`` (``mathsearch tune`` and ``eval
retrieval`` pass the shipped default profile, so a grid is tuned with the query tokens and the
second stage users get), or
:class:`~mathsearch.opensearch.search_profile.SearchProfile`'s default (mode fusion, alpha 0.5,
min_max, arithmetic_mean, rank constant 60, every query token). Each mode combines only the
parameters it uses (those of :meth:`SearchRequest.parameters`: alpha for rescore, knn-rescore and
fusion; window for the rescore modes; depth, normalisation and combination for fusion; depth and
rank constant for rrf), a window or depth below k is raised to k, and configurations that rank
identically are kept once.

Without ``--grid`` (:data:`DEFAULT_GRID`): every mode, alpha 0.1 .. 0.9 step 0.1, min_max + l2 +
z_score, arithmetic_mean, window 100, k 100 - 48 configurations.

Example::

    grid = parse_grid(["mode=fusion,rrf", "alpha=0.2:0.4:0.1", "normalization=l2"])
    [c.name for c in expand(grid)]
    # ['fusion-a0.2-d100-l2-arithmetic_mean-k100', ..., 'rrf-d100-rc60-k100']
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from mathsearch.core.errors import ConfigurationError, QueryError
from mathsearch.opensearch.fusion import Combination, Normalization
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.search_profile import SearchProfile

logger = logging.getLogger(__name__)

#: Grid key -> one parameter's values.
Grid = dict[str, tuple[Any, ...]]

FLOAT_KEYS = ("alpha", "max_df", "rerank_alpha")
INT_KEYS = ("window", "k", "depth", "rank_constant", "max_terms", "rerank_window")
ENUM_KEYS = {"mode": Mode, "normalization": Normalization, "combination": Combination}
KEYS: tuple[str, ...] = ("mode", "alpha", "normalization", "combination", "window", "k", "depth")
KEYS += ("rank_constant", "max_df", "max_terms", "rerank_window", "rerank_alpha")

#: Values of the keys a grid leaves out (tuning evaluates 100 results deep by default).
BASE: dict[str, Any] = {f.name: f.default for f in fields(SearchProfile) if f.name in KEYS}
BASE.update(k=100, window=100, depth=100)

DEFAULT_GRID: Grid = {
    "mode": tuple(Mode),
    "alpha": tuple(round(0.1 * i, 10) for i in range(1, 10)),
    "normalization": (Normalization.MIN_MAX, Normalization.L2, Normalization.Z_SCORE),
    "combination": (Combination.ARITHMETIC_MEAN,),
    "window": (100,),
    "k": (100,),
}

_SHORT = {"alpha": "a", "window": "w", "depth": "d", "rank_constant": "rc", "max_df": "df"}
_SHORT.update(max_terms="mt", rerank_window="rw", rerank_alpha="ra")


@dataclass(frozen=True)
class Configuration:
    """One point of the grid: a file-safe name and the profile it searches with."""

    name: str
    profile: SearchProfile

    @property
    def mode(self) -> Mode:
        return self.profile.mode

    def parameters(self) -> dict[str, Any]:
        """The parameters that shape this configuration's ranking (mode first)."""
        return {"mode": self.profile.mode.value, **self.profile.request("x").parameters()}


def parse_grid(specs: Sequence[str]) -> Grid:
    """Parse ``KEY=VALUES`` tokens (a token may hold several, space separated) or one JSON path.

    Raises:
        ConfigurationError: unknown key, a value a key does not take, a key given twice, an
            unreadable JSON file.
    """
    tokens = [token for spec in specs for token in spec.split()]
    if not tokens:
        raise ConfigurationError("empty grid: give KEY=V1,V2 tokens or a JSON file")
    if len(tokens) == 1 and "=" not in tokens[0]:
        return _grid_from_json(Path(tokens[0]))
    grid: Grid = {}
    for token in tokens:
        key, sep, values = token.partition("=")
        if not sep or not values:
            raise ConfigurationError(f"grid entry {token!r} must look like KEY=V1,V2 or KEY=A:B:S")
        key = key.strip().replace("-", "_")
        if key in grid:
            raise ConfigurationError(f"grid key {key!r} given twice")
        grid[key] = _values(key, values.split(",") if ":" not in values else [values])
    return grid


#: The keys a ``base`` profile gives :func:`expand` when the grid leaves them out: the query-token
#: selection, which every mode shares and which the shipped profile fixes.
BASE_KEYS = ("max_df", "max_terms", "rerank_window", "rerank_alpha")


def expand(grid: Grid, base: SearchProfile | None = None) -> list[Configuration]:
    """Every distinct configuration of ``grid``, in grid order (modes as listed).

    ``base`` (e.g. the shipped default profile) gives the query-token keys (:data:`BASE_KEYS`)
    that ``grid`` leaves out, so that the grid is tuned with the query tokens users get;
    without it they take :class:`SearchProfile`'s defaults (every token). Every configuration
    searches ``base``'s encoders (none: the index's default field), and its hybrid modes
    re-rank with ``base``'s second stage (``rerank``: the window and alpha are grid keys too).
    """
    unknown = sorted(set(grid) - set(KEYS))
    if unknown:
        raise ConfigurationError(f"unknown grid keys {unknown}; keys: {', '.join(KEYS)}")
    fallback = dict(BASE)
    if base is not None:
        fallback.update({key: getattr(base, key) for key in BASE_KEYS})
    encoders = base.encoders if base is not None else ()
    rerank = base.rerank if base is not None else ()
    values = {key: tuple(grid.get(key) or (fallback[key],)) for key in KEYS}
    seen: set[tuple[Any, ...]] = set()
    out: list[Configuration] = []
    for mode in values["mode"]:
        used = _used(Mode(mode))
        axes = [values[key] if key in used else (fallback[key],) for key in KEYS[1:]]
        for combo in itertools.product(*axes):
            chosen = dict(zip(KEYS[1:], combo, strict=True))
            profile = SearchProfile(mode=Mode(mode), encoders=encoders, rerank=rerank, **chosen)
            config = _grid_point(profile, f"grid point {mode} {chosen}")
            key = tuple(
                (name, tuple(v) if isinstance(v, list) else v)
                for name, v in sorted(config.parameters().items())
            )
            if key not in seen:
                seen.add(key)
                out.append(config)
    logger.info("grid: %d configurations", len(out))
    return out


def baseline_configuration(profile: SearchProfile, k: int = BASE["k"]) -> Configuration:
    """``profile`` (say, the profile users search with now) as a grid point: evaluated at least
    ``k`` deep like the grid's points, its window and depth raised to that k as :func:`expand`
    raises them, named like a grid point. Its ``source`` is kept (it names where it came from).

    Raises:
        ConfigurationError: the profile's parameters do not make a valid request.
    """
    return _grid_point(replace(profile, k=max(profile.k, k)), "baseline profile")


def _grid_point(profile: SearchProfile, what: str) -> Configuration:
    """``profile`` with its window and depth raised to its k, validated and named.

    Raises:
        ConfigurationError: the parameters do not make a valid request (``what`` says whose).
    """
    k = profile.k
    point = replace(profile, window=max(profile.window, k), depth=max(profile.depth, k))
    try:
        point.request("x").validate()
    except QueryError as exc:
        raise ConfigurationError(f"{what}: {exc}") from exc
    return Configuration(name=config_name(point), profile=point)


def with_baseline(
    configs: Sequence[Configuration], baseline: Configuration
) -> tuple[list[Configuration], str]:
    """``configs`` plus ``baseline`` unless a configuration already ranks the same (same mode
    and parameters), and the name the baseline goes by among them."""
    wanted = baseline.parameters()
    for config in configs:
        if config.parameters() == wanted:
            return list(configs), config.name
    return [*configs, baseline], baseline.name


def config_name(profile: SearchProfile) -> str:
    """A short, file-safe name of a profile's ranking parameters.

    >>> config_name(SearchProfile(mode=Mode.RRF, k=100, depth=200))
    'rrf-d200-rc60-k100'
    """
    parts = [profile.mode.value]
    for key, value in profile.request("x").parameters().items():
        if key in ("k", "rerank"):  # the encoders: every point of a grid shares its base's
            continue
        parts.append(f"{value}" if key in ENUM_KEYS else f"{_SHORT.get(key, key)}{value:g}")
    parts.append(f"k{profile.k}")
    return "-".join(parts)


def _used(mode: Mode) -> set[str]:
    """The grid keys that shape ``mode``'s ranking."""
    probe = SearchProfile(mode=mode, max_df=0.5, max_terms=1, rerank=("gcn",))
    params = probe.request("x").parameters()
    return set(params) | {"k"}


def _grid_from_json(path: Path) -> Grid:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(
            f"grid {str(path)!r} is neither KEY=VALUES nor a readable JSON file ({exc.strerror})"
        ) from exc
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"grid file {path} is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"grid file {path} must hold a JSON object of key -> values")
    grid: Grid = {}
    for name, raw in data.items():
        key = str(name).replace("-", "_")
        items = raw if isinstance(raw, list) else [raw]
        grid[key] = _values(key, [str(item) for item in items])
    return grid


def _values(key: str, items: list[str]) -> tuple[Any, ...]:
    if key not in KEYS:
        raise ConfigurationError(f"unknown grid key {key!r}; keys: {', '.join(KEYS)}")
    items = [item.strip() for item in items if item.strip()]
    if not items:
        raise ConfigurationError(f"grid key {key!r} has no values")
    parsed: list[Any] = []
    for item in items:
        parsed.extend(_value(key, item))
    return tuple(dict.fromkeys(parsed))


def _value(key: str, item: str) -> list[Any]:
    if key in ENUM_KEYS:
        enum = ENUM_KEYS[key]
        if key == "mode" and item == "all":
            return list(Mode)
        try:
            return [enum(item)]
        except ValueError as exc:
            choices = ", ".join(member.value for member in enum)
            raise ConfigurationError(f"{key} {item!r} is not one of {choices}") from exc
    number = float if key in FLOAT_KEYS else int
    try:
        values = _range(item, number) if ":" in item else [number(item)]
    except ValueError as exc:
        kind = "a number" if number is float else "an integer"
        raise ConfigurationError(f"{key} {item!r} is not {kind} or START:STOP:STEP") from exc
    if key == "alpha" and not all(0.0 <= v <= 1.0 for v in values):
        raise ConfigurationError(f"alpha {item!r} must lie in [0, 1]")
    if key == "max_df" and not all(0.0 < v <= 1.0 for v in values):
        raise ConfigurationError(f"max_df {item!r} must lie in (0, 1]")
    if key == "max_terms" and not all(v >= 0 for v in values):
        raise ConfigurationError(f"max_terms {item!r} must be >= 0 (0: every token)")
    if key == "rerank_alpha" and not all(0.0 <= v <= 1.0 for v in values):
        raise ConfigurationError(f"rerank_alpha {item!r} must lie in [0, 1]")
    if key == "rerank_window" and not all(0 <= v <= 1000 for v in values):
        raise ConfigurationError(f"rerank_window {item!r} must lie in [0, 1000] (0: off)")
    positive = key not in ("max_terms", "rerank_window")
    if key in INT_KEYS and positive and not all(v >= 1 for v in values):
        raise ConfigurationError(f"{key} {item!r} must be a positive integer")
    return values


def _range(item: str, number: type) -> list[Any]:
    """``START:STOP:STEP``, STOP included (rounded so 0.1 steps stay exact)."""
    parts = item.split(":")
    if len(parts) != 3:
        raise ValueError(item)
    start, stop, step = (number(part) for part in parts)
    if step <= 0 or stop < start:
        raise ValueError(item)
    count = int(round((stop - start) / step, 9)) + 1
    return [number(round(start + i * step, 10)) for i in range(count)]
