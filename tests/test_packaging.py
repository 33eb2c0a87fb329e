"""The distribution: one ``mathsearch`` namespace, a light runtime, the shipped data inside."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from mathsearch.runtime.families import FAMILY_REGISTRY
from mathsearch.runtime.settings import DEFAULT_MODEL_PATH
from mathsearch.stack.demo import DEMO_SECOND_ENCODER

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "torch-geometric", "pya0", "onnxruntime-gpu", "pytest", "selenium")
#: The models the wheel ships: each family's default and the default profile's second stage.
SHIPPED = (
    "gcn-v7", "gcn-v8", "gcn-v9", "gcn-v10", "gcn-v9.int8", "gcn-v10.int8",
    "bitmap-v2", "seq2seq-v2", "figure-v2",
)  # fmt: skip
#: The superseded models: models/ of the repository, not the wheel (models/README.md).
SUPERSEDED = (*(f"gcn-v{n}" for n in range(1, 7)), "gcn-v11", "seq2seq-v1", "bitmap-v1")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    leftover = not (REPO / "build").exists()  # pip builds in the tree: remove what it leaves
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(REPO)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    if leftover:
        shutil.rmtree(REPO / "build", ignore_errors=True)
    (path,) = out.glob("mathsearch-*.whl")
    return zipfile.ZipFile(path)


def _metadata(wheel: zipfile.ZipFile) -> tuple[list[str], list[str]]:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    meta = Parser().parsestr(wheel.read(name).decode())
    requires = meta.get_all("Requires-Dist") or []
    return requires, meta.get_all("Provides-Extra") or []


def test_the_wheel_installs_one_top_level_package(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist()}
    assert tops == {"mathsearch", "mathsearch-0.1.0.dist-info"}
    packages = {name.rsplit("/", 1)[0] for name in wheel.namelist() if name.endswith(".py")}
    # every package folder of the repository (one with an __init__.py) lands in the wheel
    folders = {"indexer", "encoders", "export", "opensearch", "workers"}
    expected = {
        "/".join(["mathsearch", top, *init.parent.relative_to(REPO / top).parts])
        for top in folders
        for init in (REPO / top).rglob("__init__.py")
    }
    expected |= {
        "/".join(init.parent.relative_to(REPO).parts)
        for init in (REPO / "mathsearch").rglob("__init__.py")
    }
    assert {
        "mathsearch/opensearch/modes",
        "mathsearch/encoders/losses",
        "mathsearch/cli",
    } <= expected
    missing = sorted(expected - packages)
    assert not missing, f"package folders missing from the wheel (pyproject packages): {missing}"


def test_the_wheel_carries_the_default_models_and_resources(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    folder = "mathsearch/export/models/"
    # each family's default, the default profile's second stage and the demo's second field,
    # with their cards
    defaults = {DEFAULT_MODEL_PATH.stem}
    defaults |= {Path(family.default_model).stem for family in FAMILY_REGISTRY.values()}
    profile = json.loads((REPO / "opensearch" / "profiles" / "default.json").read_text())
    defaults |= {Path(name).stem for name in profile["rerank"]}
    # an int8 second-stage tower ships with the float32 file it was quantised from
    for name in profile["rerank"]:
        card = json.loads(
            (REPO / "export" / "models" / name.replace(".onnx", ".card.json")).read_text()
        )
        if card.get("precision") == "int8":
            defaults.add(Path(card["parity"]["reference"]).stem)
    defaults.add(Path(DEMO_SECOND_ENCODER).stem)  # the demo's second kNN field
    assert defaults == set(SHIPPED)
    for model in SHIPPED:
        assert f"{folder}{model}.onnx" in names and f"{folder}{model}.card.json" in names, model
    assert {f"{folder}seq2seq-v2.vocab.json", f"{folder}figure-v2.vocab.json"} <= names
    # the superseded models stay out of the wheel, in models/ of the repository
    shipped = {n.removeprefix(folder).split(".")[0] for n in names if n.startswith(folder)}
    stems = {model.split(".")[0] for model in SHIPPED}
    assert shipped == stems, sorted(shipped - stems)
    assert not {f"{folder}{model}.onnx" for model in SUPERSEDED} & names
    for model in SUPERSEDED:
        assert (REPO / "models" / f"{model}.onnx").is_file(), model
        assert (REPO / "models" / f"{model}.card.json").is_file(), model
    for name in (
        "mathsearch/indexer/resources/vocabulary-v1.json",
        "mathsearch/indexer/resources/katex/package-lock.json",
        "mathsearch/stack/artifacts.json",
        "mathsearch/serve/web/index.html",
    ):
        assert name in names, name
    (entry,) = [n for n in names if n.endswith("entry_points.txt")]
    assert "mathsearch = mathsearch.cli.main:main" in wheel.read(entry).decode()


def test_the_base_requirements_are_the_runtime_alone(wheel: zipfile.ZipFile) -> None:
    requires, extras = _metadata(wheel)
    base = [r.split(";")[0] for r in requires if "extra ==" not in r]
    names = {r.split("[")[0].split("<")[0].split(">")[0].split("=")[0].strip() for r in base}
    assert {"onnxruntime", "lxml", "opensearch-py", "celery", "redis", "fastapi"} <= names
    assert not names & set(HEAVY)
    assert {"gpu", "train", "bench", "research", "dev"} <= set(extras)
    gpu = [r for r in requires if 'extra == "gpu"' in r]
    assert gpu and all(r.startswith("onnxruntime-gpu[cuda,cudnn]") for r in gpu)


def test_import_mathsearch_is_light_and_names_the_public_api(tmp_path: Path) -> None:
    code = (
        "import sys, mathsearch;"
        "names = [mathsearch.Featuriser, mathsearch.extract, mathsearch.load_embedder,"
        " mathsearch.Searcher, mathsearch.SearchRequest, mathsearch.run_index];"
        "print(','.join(n.__module__ for n in names));"
        "print(any(m == 'torch' or m.startswith('torch.') for m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    modules, torch_loaded = result.stdout.split()
    assert all(m.startswith("mathsearch.") for m in modules.split(","))
    assert torch_loaded == "False"
    missing = subprocess.run(
        [sys.executable, "-c", "import mathsearch; mathsearch.nope"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert missing.returncode == 1 and "has no attribute 'nope'" in missing.stderr
