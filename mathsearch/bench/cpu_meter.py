"""CPU time a load run costs, by process: the server's, the local OpenSearch nodes', the load's.

``bench serve`` answers "how many queries a second"; this answers "what each one costs", which
is what an operator sizes a machine with. :class:`CpuMeter` reads the CPU seconds (user +
system, every thread) of three groups of processes from ``/proc``, before and after a run:

* ``server``: the ``mathsearch serve`` process the bench spawned and its worker processes
  (``serve --workers``); unknown (None) for a server given by ``--url``;
* ``opensearch``: every OpenSearch node running on this machine (the JVMs with OpenSearch's main
  class on their command line), counted only when the configured node is on loopback;
* ``load``: this process, the load generator (it shares the machine in a bench, never in a
  deployment).

:func:`cpu_per_query` turns two samples into milliseconds of CPU per answered query per group,
the share of the machine's cores the run kept busy, and ``ceiling_per_s``: the queries per
second at which the server and OpenSearch alone would keep every core busy
(``cores * 1000 / (server + opensearch ms)``). A deployment cannot reach it (queueing bounds the
latency first), but no tuning of the limits goes past it: only less CPU per query or more cores.

Outside Linux (no ``/proc``) every group reads None and the report leaves the figures out.

Example::

    meter = CpuMeter(server_pid=process.pid, opensearch=True)
    before = meter.sample()
    ...  # the load
    cpu = cpu_per_query(before, meter.sample(), answered=800, wall_s=20.0, cores=2)
    cpu["ms"]["server"], cpu["ceiling_per_s"]
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from mathsearch.stack.node import MAIN_CLASS

logger = logging.getLogger(__name__)

__all__ = [
    "GROUPS",
    "CpuMeter",
    "cpu_per_query",
    "cpu_seconds",
    "is_loopback",
    "node_is_local",
    "opensearch_pids",
    "process_tree",
]

#: The groups of processes a sample reads, in report order.
GROUPS = ("server", "opensearch", "load")
PROC = Path("/proc")


def _ticks_per_second() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):  # not a POSIX system
        return 100


TICKS = _ticks_per_second()


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (which may hold spaces)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process, every thread included; None when it is gone
    or there is no ``/proc``."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 13:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15)


def process_tree(pid: int) -> list[int]:
    """``pid`` and every live process below it (by parent pid), ``pid`` first."""
    children: dict[int, list[int]] = {}
    try:
        entries = [p for p in PROC.iterdir() if p.name.isdigit()]
    except OSError:
        return [pid]
    for entry in entries:
        fields = _stat_fields(int(entry.name))
        if fields is not None and len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def opensearch_pids() -> list[int]:
    """The OpenSearch nodes (JVMs with :data:`mathsearch.stack.node.MAIN_CLASS` on their command
    line, as the stack finds its own) running on this machine."""
    found = []
    try:
        entries = [p for p in PROC.iterdir() if p.name.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            if MAIN_CLASS in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return sorted(found)


def is_loopback(url: str) -> bool:
    """Whether ``url`` names this machine.

    >>> is_loopback("http://127.0.0.1:9200"), is_loopback("https://search.example.org")
    (True, False)
    """
    host = urlparse(url).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


class CpuMeter:
    """Samples of the CPU seconds of the server's process tree, the local OpenSearch nodes and
    this process (see the module docstring).

    Args:
        server_pid: the spawned server's pid (its worker processes are found below it); None
            when the server is not this bench's.
        opensearch: whether to read the local OpenSearch nodes (the configured node is on this
            machine).
    """

    def __init__(self, server_pid: int | None = None, *, opensearch: bool = True) -> None:
        self.server_pid = server_pid
        self.opensearch = opensearch
        self.available = PROC.is_dir()

    def sample(self) -> dict[str, float | None]:
        """``{group: CPU seconds so far}`` (None: not measured)."""
        if not self.available:
            return dict.fromkeys(GROUPS)
        server = None
        if self.server_pid is not None:
            times = [cpu_seconds(pid) for pid in process_tree(self.server_pid)]
            server = sum(t for t in times if t is not None) if times[0] is not None else None
        nodes = None
        if self.opensearch:
            node_times = [cpu_seconds(pid) for pid in opensearch_pids()]
            nodes = sum(t for t in node_times if t is not None) if node_times else None
        return {"server": server, "opensearch": nodes, "load": time.process_time()}


def cpu_per_query(
    before: Mapping[str, float | None],
    after: Mapping[str, float | None],
    *,
    answered: int,
    wall_s: float,
    cores: int,
) -> dict[str, Any] | None:
    """Milliseconds of CPU per answered query by group, the cores' busy share and the ceiling
    (see the module docstring); None when nothing was answered or nothing measured.

    A group measured in neither sample, or whose processes changed between them (a worker
    restarted: its time went backwards), reads None and is left out of the sums.

    >>> cpu_per_query({"server": 1.0, "opensearch": 5.0, "load": 0.5},
    ...               {"server": 9.0, "opensearch": 13.0, "load": 1.5},
    ...               answered=800, wall_s=20.0, cores=2)
    ... # doctest: +NORMALIZE_WHITESPACE
    {'ms': {'server': 10.0, 'opensearch': 10.0, 'load': 1.25}, 'busy': 0.425,
     'ceiling_per_s': 100.0}
    """
    if answered <= 0:
        return None
    ms: dict[str, float | None] = {}
    for group in GROUPS:
        start, end = before.get(group), after.get(group)
        spent = None if start is None or end is None or end < start else end - start
        ms[group] = None if spent is None else round(spent * 1000 / answered, 2)
    if all(value is None for value in ms.values()):
        return None
    total = sum(value for value in ms.values() if value is not None) / 1000 * answered
    busy = round(total / (wall_s * cores), 3) if wall_s > 0 and cores > 0 else None
    serving = sum(value for g in ("server", "opensearch") if (value := ms[g]) is not None)
    ceiling = round(cores * 1000 / serving, 1) if serving > 0 else None
    return {"ms": ms, "busy": busy, "ceiling_per_s": ceiling}


def node_is_local(settings: Any) -> bool:
    """Whether the configured OpenSearch nodes (``settings.urls``, else ``settings.url``) are all
    on this machine."""
    urls = list(getattr(settings, "urls", None) or [getattr(settings, "url", "")])
    return bool(urls) and all(is_loopback(str(url or "")) for url in urls)
