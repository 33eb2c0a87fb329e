"""Where a source checkout keeps what the commands look for beside the code.

``SOURCE_ROOT`` is the folder that holds the ``mathsearch/`` folder: the clone in a checkout
(``pip install -e .``), ``site-packages`` in an installed wheel. The shared data of the project
(``../shared/data`` beside the clone), the test resources and the superseded models (``models/``)
exist only in a checkout; callers check that a path exists (and fall back to the bundled sample
where there is one).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ARCHIVED_MODELS", "SHARED_DATA", "SOURCE_ROOT", "TEST_RESOURCES"]

SOURCE_ROOT = Path(__file__).resolve().parents[2]
#: ``../shared/data`` beside the clone.
SHARED_DATA = SOURCE_ROOT.parent / "shared" / "data"
#: ``tests/resources`` of the clone.
TEST_RESOURCES = SOURCE_ROOT / "tests" / "resources"
#: ``models/`` of the clone: the superseded models, out of the wheel (models/README.md).
ARCHIVED_MODELS = SOURCE_ROOT / "models"
