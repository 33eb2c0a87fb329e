"""The live child processes of a process, read from /proc (for tests that kill or count them)."""

from __future__ import annotations

from pathlib import Path


def live_children(pid: int, cmdline_part: bytes | None = None) -> list[int]:
    """Children of ``pid`` that are not zombies (a killed child stays one until its parent reaps
    it), optionally only those whose command line contains ``cmdline_part``."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes() if cmdline_part else b""
        except OSError:
            continue
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if int(parent) == pid and state != "Z" and (cmdline_part or b"") in cmdline:
            children.append(int(entry.name))
    return children
