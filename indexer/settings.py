"""Settings of the indexer package, read from ``MATHSEARCH_*`` environment variables.

==================================  =============================================  =============
variable                            meaning                                        default
==================================  =============================================  =============
MATHSEARCH_CONVERTER                LaTeX -> MathML backend: ``python`` or         python
                                    ``katex`` (npm katex under node, batched)
MATHSEARCH_MAX_EQUATION_CHARS       longer LaTeX / MathML becomes a failure        20000
                                    record (reason ``too-large``)
MATHSEARCH_MAX_DEPTH                deepest MathML tree / LaTeX group nesting      128
MATHSEARCH_MAX_NODES                most graph nodes per equation                  4096
MATHSEARCH_MAX_DOCUMENT_BYTES       largest source document read (tex, JATS)       50000000
MATHSEARCH_MAX_MACRO_EXPANSIONS     macro expansions per equation (loops stop)     2000
MATHSEARCH_CONTEXT_CHARS            characters of text kept each side of an eq.    400
MATHSEARCH_SYMPY_TIMEOUT            seconds for one SymPy parse                    2.0
MATHSEARCH_CANONICAL_FORM           ``canon_tokens`` (see                          fast
                                    :mod:`mathsearch.indexer.canonical_form`)
                                    ``fast``: logic and polynomial readers only
                                    (~1 µs on a formula they do not take);
                                    ``sympy``: then SymPy's LaTeX parser too (up to
                                    the SymPy timeout per formula); ``off``
MATHSEARCH_KATEX_DIR                where the npm katex package is installed       CACHE_DIR/katex
MATHSEARCH_NODE                     the node executable for the KaTeX backend      node
==================================  =============================================  =============
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mathsearch.core.env import cache_dir_from_env, env_float
from mathsearch.core.env import env_int as core_env_int
from mathsearch.indexer.errors import IndexerError


class SettingsError(IndexerError):
    """A ``MATHSEARCH_*`` variable has a value the indexer cannot use."""

    reason = "configuration"


def env_int(name: str, default: int, minimum: int = 1) -> int:
    """The integer in environment variable ``name`` (``default`` when unset or empty).

    Raises:
        SettingsError: not an integer, or below ``minimum``.
    """
    return core_env_int(name, default, minimum, error=SettingsError)


def _env_float(name: str, default: float) -> float:
    value = env_float(name, default, error=SettingsError)
    if value <= 0:
        raise SettingsError(f"{name}={os.environ.get(name)!r} must be positive")
    return value


CANONICAL_MODES = ("fast", "sympy", "off")


def _canonical_mode(raw: str | None) -> str:
    value = (raw or "").strip().lower()
    value = {"": "fast", "1": "fast", "on": "fast", "0": "off", "false": "off"}.get(value, value)
    if value not in CANONICAL_MODES:
        raise SettingsError(
            f"MATHSEARCH_CANONICAL_FORM={raw!r}: use one of {', '.join(CANONICAL_MODES)}"
        )
    return value


CONVERTERS = ("python", "katex")


@dataclass(frozen=True)
class IndexerSettings:
    """Limits and backends of extraction and featurisation (see the module docstring)."""

    converter: str = "python"
    max_equation_chars: int = 20_000
    max_depth: int = 128
    max_nodes: int = 4096
    max_document_bytes: int = 50_000_000
    max_macro_expansions: int = 2000
    context_chars: int = 400
    sympy_timeout: float = 2.0
    canonical_form: str = "fast"
    katex_dir: Path | None = None
    node: str = "node"

    @classmethod
    def from_env(cls) -> IndexerSettings:
        env = os.environ
        converter = (env.get("MATHSEARCH_CONVERTER") or cls.converter).lower()
        if converter not in CONVERTERS:
            raise SettingsError(
                f"MATHSEARCH_CONVERTER={converter!r}: use one of {', '.join(CONVERTERS)}"
            )
        katex_dir = env.get("MATHSEARCH_KATEX_DIR")
        return cls(
            converter=converter,
            max_equation_chars=env_int("MATHSEARCH_MAX_EQUATION_CHARS", cls.max_equation_chars),
            max_depth=env_int("MATHSEARCH_MAX_DEPTH", cls.max_depth),
            max_nodes=env_int("MATHSEARCH_MAX_NODES", cls.max_nodes),
            max_document_bytes=env_int("MATHSEARCH_MAX_DOCUMENT_BYTES", cls.max_document_bytes),
            max_macro_expansions=env_int(
                "MATHSEARCH_MAX_MACRO_EXPANSIONS", cls.max_macro_expansions
            ),
            context_chars=env_int("MATHSEARCH_CONTEXT_CHARS", cls.context_chars, minimum=0),
            sympy_timeout=_env_float("MATHSEARCH_SYMPY_TIMEOUT", cls.sympy_timeout),
            canonical_form=_canonical_mode(env.get("MATHSEARCH_CANONICAL_FORM")),
            katex_dir=Path(katex_dir) if katex_dir else cache_dir_from_env() / "katex",
            node=env.get("MATHSEARCH_NODE") or cls.node,
        )
