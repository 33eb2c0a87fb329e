"""The CPU a benchmark ran on: its name, its logical CPUs and the vector and matrix units that
decide how fast the encoders' products run (docs/encoders.md, "Training speed"; docs/export.md,
"int8").

The same command gives figures several times apart on different machines of one cloud: float32
products at 40 GFLOP/s on a Zen 1 EPYC with AVX2, 90-150 on a Zen 4 EPYC with AVX-512, and
bf16 products at 240-290 GFLOP/s on that Zen 4 (AVX512-BF16) and 616 on a Xeon with AMX. So the
``bench`` reports carry :func:`describe_cpu`'s description of the machine beside the figures.

Read from ``/proc/cpuinfo`` (Linux): the first processor's ``model name``, ``vendor_id``,
``cpu family`` and ``model``, and the ``flags`` (x86) or ``Features`` (Arm) of every processor.
Where the file cannot be read the description keeps what :mod:`platform` and
:func:`os.cpu_count` know and says that the units are unknown.

Example::

    >>> cpu = describe_cpu("/nonexistent")
    >>> cpu.units is None
    True
"""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BF16_FLAGS",
    "INT8_DOT_FLAGS",
    "UNIT_FLAGS",
    "CpuDescription",
    "cpu_flags",
    "describe_cpu",
]

#: The flags that matter for the encoders' products, in the order a description lists them:
#: x86 (``/proc/cpuinfo`` ``flags``) then Arm (``Features``).
UNIT_FLAGS: tuple[str, ...] = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "amx_bf16",
    "amx_int8",
    "asimd",
    "asimddp",
    "i8mm",
    "bf16",
    "sve",
)
#: Units that multiply bf16 natively (oneDNN's bf16 kernels use them; without them autocast's
#: bf16 products are emulated).
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
#: Units that multiply int8 with int32 sums (the row-scaled int8 variant's speed-up).
INT8_DOT_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})

_FLAG_KEYS = frozenset({"flags", "features"})


def _read(cpuinfo: str | os.PathLike[str]) -> str | None:
    try:
        return Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _cpuinfo_fields(text: str) -> tuple[dict[str, str], set[str]]:
    """The first processor's ``key: value`` fields (lower-case keys) and every flag."""
    first: dict[str, str] = {}
    flags: set[str] = set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        if key in _FLAG_KEYS:
            flags.update(value.split())
        elif key not in first:
            first[key] = value.strip()
    return first, flags


def cpu_flags(cpuinfo: str | os.PathLike[str] = "/proc/cpuinfo") -> frozenset[str] | None:
    """Every ``flags`` / ``Features`` entry of ``cpuinfo``; ``None`` where the file cannot be
    read or lists none (not Linux, or a container that hides them).

    Example::

        >>> cpu_flags("/nonexistent") is None
        True
    """
    text = _read(cpuinfo)
    flags = _cpuinfo_fields(text)[1] if text is not None else set()
    return frozenset(flags) or None


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _logical_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True)
class CpuDescription:
    """What :func:`describe_cpu` found.

    Attributes:
        name: the ``model name`` (or :func:`platform.processor` / the machine's architecture).
        vendor: ``vendor_id`` (``AuthenticAMD``, ``GenuineIntel``), ``None`` where not given.
        family / model: x86 ``cpu family`` and ``model`` numbers, ``None`` elsewhere.
        logical_cpus: the CPUs this process may run on.
        units: the :data:`UNIT_FLAGS` present, in that order; ``None`` where the flags are
            unknown (an empty tuple is a CPU with none of them).
    """

    name: str
    vendor: str | None
    family: int | None
    model: int | None
    logical_cpus: int
    units: tuple[str, ...] | None

    @property
    def bf16_units(self) -> bool | None:
        """Whether bf16 products run natively here (``None``: unknown)."""
        return None if self.units is None else bool(BF16_FLAGS & set(self.units))

    @property
    def int8_dot(self) -> bool | None:
        """Whether int8 products sum in int32 here (``None``: unknown)."""
        return None if self.units is None else bool(INT8_DOT_FLAGS & set(self.units))

    def summary(self) -> str:
        """One line, e.g. ``AMD EPYC (family 25 model 17), 2 logical CPUs; units: avx2 fma
        avx512f avx512_vnni avx512_bf16``."""
        numbers = (
            f" (family {self.family} model {self.model})"
            if self.family is not None and self.model is not None
            else ""
        )
        if self.units is None:
            units = "unknown (no CPU flags readable)"
        else:
            units = " ".join(self.units) or "none of " + " ".join(UNIT_FLAGS[:8])
        return f"{self.name}{numbers}, {self.logical_cpus} logical CPUs; units: {units}"

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, with ``bf16_units``, ``int8_dot`` and ``summary``."""
        out = asdict(self)
        out["bf16_units"] = self.bf16_units
        out["int8_dot"] = self.int8_dot
        out["summary"] = self.summary()
        return out


def describe_cpu(cpuinfo: str | os.PathLike[str] = "/proc/cpuinfo") -> CpuDescription:
    """The CPU this process runs on (module docstring); never raises."""
    first, flags = _cpuinfo_fields(_read(cpuinfo) or "")
    name = (
        first.get("model name")
        or first.get("hardware")
        or platform.processor()
        or platform.machine()
        or "unknown CPU"
    )
    return CpuDescription(
        name=" ".join(name.split()),
        vendor=first.get("vendor_id"),
        family=_int_or_none(first.get("cpu family")),
        model=_int_or_none(first.get("model")),
        logical_cpus=_logical_cpus(),
        units=tuple(f for f in UNIT_FLAGS if f in flags) if flags else None,
    )
