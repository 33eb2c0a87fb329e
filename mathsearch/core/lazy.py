"""Lazy re-exports for a package's ``__init__`` (PEP 562): a name is imported from its module on
first use, so importing the package stays cheap.

>>> __getattr__ = lazy_exports("mathsearch.example", {"sqrt": "math"})
>>> __getattr__("sqrt")(4.0)
2.0
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package`` that loads ``names`` (name -> module)."""

    def lazy_getattr(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return lazy_getattr
