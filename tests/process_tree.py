"""The live child processes of a process (:func:`child_pids`), optionally by command line
(for tests that kill or count them)."""

from __future__ import annotations

from pathlib import Path

from mathsearch.workers.shutdown_watchdog import child_pids


def live_children(pid: int, cmdline_part: bytes | None = None) -> list[int]:
    """Children of ``pid`` that are not zombies (a killed child stays one until its parent reaps
    it), optionally only those whose command line contains ``cmdline_part``."""
    children = child_pids(pid)
    if not cmdline_part:
        return children
    found = []
    for child in children:
        try:
            if cmdline_part in (Path("/proc") / str(child) / "cmdline").read_bytes():
                found.append(child)
        except OSError:  # exited meanwhile
            continue
    return found
