"""Find a JDK that the pinned OpenSearch version runs on."""

from __future__ import annotations

import logging
import os
import re
import subprocess
from pathlib import Path

from mathsearch.core.errors import StackError

logger = logging.getLogger(__name__)

_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def java_major(java_home: Path) -> int | None:
    """The major version of ``java_home/bin/java``, or None when it does not run."""
    java = java_home / "bin" / "java"
    if not java.is_file():
        return None
    try:
        out = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _VERSION.search(out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def candidate_homes(explicit: Path | None) -> list[Path]:
    homes: list[Path] = []
    if explicit:
        return [explicit]
    for name in ("OPENSEARCH_JAVA_HOME", "JAVA_HOME"):
        if os.environ.get(name):
            homes.append(Path(os.environ[name]))
    jvm = Path("/usr/lib/jvm")
    if jvm.is_dir():
        homes.extend(sorted(p for p in jvm.iterdir() if p.is_dir() and not p.is_symlink()))
    return homes


def find_java_home(minimum: int, maximum: int, explicit: Path | None = None) -> Path:
    """The first JDK whose major version lies in ``[minimum, maximum]``.

    ``explicit`` (MATHSEARCH_JAVA_HOME) is the only candidate when given.
    """
    seen = []
    for home in candidate_homes(explicit):
        major = java_major(home)
        seen.append(f"{home} ({major or 'not a JDK'})")
        if major is not None and minimum <= major <= maximum:
            logger.debug("using Java %s at %s", major, home)
            return home
    if minimum <= 17 <= maximum:
        how = "apt-get install openjdk-17-jre-headless"
    else:  # Debian 12 packages no JDK 21+ (Debian 13 has openjdk-21; Temurin has 21 and 25)
        how = f"a JDK {minimum}+: openjdk-{minimum}-jre-headless on Debian 13+, or Temurin"
    raise StackError(
        f"no Java {minimum}-{maximum} found for OpenSearch "
        f"(looked at: {', '.join(seen) or 'none'}); install one ({how}) or set "
        "MATHSEARCH_JAVA_HOME"
    )
