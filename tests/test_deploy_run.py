"""``deploy/run.sh``: two clones on one machine share the dependencies' virtualenv, each runs its
own code, a second run installs nothing, and the overlay of a clone that is gone is removed.

Real runs of the script (``shell -c``) on two copies of this checkout, with the cache the test
command itself uses; no services. The dependencies' venv of the full flavour exists whenever the
suite runs through ``./deploy/run.sh test``; elsewhere the first run builds it (minutes).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: What an editable install of a clone needs: the build file and the packages' folders.
PARTS = ("pyproject.toml", "README.md", "deploy", "mathsearch", "indexer", "encoders", "export")
PARTS += ("opensearch", "workers")
PROBE = 'python -c "import mathsearch; print(mathsearch.__file__)"; command -v mathsearch'


def _clone(target: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.onnx")
    target.mkdir()
    for part in PARTS:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, target / part, ignore=ignore)
        else:
            shutil.copy2(source, target / part)
    return target


def _run(clone: Path) -> tuple[str, str]:
    """(stdout lines after the script's own, stderr) of ``run.sh shell -c PROBE`` in ``clone``."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    done = subprocess.run(
        ["./deploy/run.sh", "shell", "-c", PROBE], check=False, cwd=clone, env=env,
        capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, done.stderr


def test_two_clones_run_their_own_code_and_install_once(tmp_path: Path) -> None:
    first, second = _clone(tmp_path / "first"), _clone(tmp_path / "second")

    out, _ = _run(first)
    assert str(first / "mathsearch" / "__init__.py") in out
    overlay = Path(out.strip().splitlines()[-1]).parents[1]  # <overlay>/bin/mathsearch
    assert (overlay / ".clone").read_text().strip() == str(first)
    # the dependencies' commands run the overlay's Python, which sees this clone's mathsearch
    assert (overlay / "bin" / "pytest").read_text().startswith(f"#!{overlay}/bin/python\n")

    out, _ = _run(second)
    assert str(second / "mathsearch" / "__init__.py") in out
    assert Path(out.strip().splitlines()[-1]).parents[1] != overlay

    out, _ = _run(first)  # the second clone did not re-point the first, nothing is installed
    assert str(first / "mathsearch" / "__init__.py") in out and "==> " not in out

    shutil.rmtree(first)
    _run(second)
    assert not overlay.exists(), "the overlay of a removed clone is still there"
