"""mypy over the whole package, as it installs: ``mathsearch.<package>`` from its own top-level
folder (pyproject.toml's ``package-dir``), which an editable install maps with an import hook that
mypy cannot follow. It links the folders into one ``mathsearch`` tree in a temporary folder,
checks it with the settings of ``[tool.mypy]`` and prints the errors with the repository's paths.

    python deploy/typecheck.py          # exit 0 when mypy finds no error

The test command (``./deploy/run.sh test``) runs it after ruff. mypy's cache lives in
``$MATHSEARCH_CACHE_DIR/mypy`` (outside the clone; mypy checks it against the sources itself).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    package_dirs: dict[str, str] = meta["tool"]["setuptools"]["package-dir"]
    mapped = {
        name.removeprefix("mathsearch."): folder
        for name, folder in package_dirs.items()
        if name.startswith("mathsearch.")
    }
    cache = Path(os.environ.get("MATHSEARCH_CACHE_DIR", Path.home() / ".cache" / "mathsearch"))
    with tempfile.TemporaryDirectory(prefix="mathsearch-typecheck-") as tmp:
        tree = Path(tmp) / "mathsearch"
        tree.mkdir()
        for entry in (REPO / package_dirs["mathsearch"]).iterdir():
            if entry.name != "__pycache__":
                (tree / entry.name).symlink_to(entry)
        for name, folder in mapped.items():
            (tree / name).symlink_to(REPO / folder)
        done = subprocess.run(
            [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
             "--cache-dir", str(cache / "mypy"), "-p", "mathsearch"],
            cwd=tmp, capture_output=True, text=True, check=False,
        )  # fmt: skip
    back = re.compile(rf"^mathsearch/({'|'.join(map(re.escape, mapped))})/", re.MULTILINE)
    output = back.sub(lambda m: f"{mapped[m.group(1)]}/", done.stdout)
    sys.stdout.write(output)
    sys.stderr.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
