from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mathsearch.core.errors import ArtifactError
from mathsearch.stack.artifacts import (
    Artifact,
    ArtifactLock,
    render_fetch_pom,
    sha256_of,
    verify,
)
from mathsearch.stack.assemble import home_dir, module_descriptor, module_policy


def test_shipped_lock_pins_every_artifact() -> None:
    lock = ArtifactLock.load()
    coords = [a.coordinates for a in lock.all_artifacts]
    assert coords[0].startswith("org.opensearch.distribution.integ-test-zip:opensearch:")
    assert {p.name for p in lock.plugins} == {"opensearch-knn", "opensearch-neural-search"}
    assert any(m.name == "lang-painless" for m in lock.modules)
    for artifact in lock.all_artifacts:
        int(artifact.sha256, 16)  # hex
        assert len(artifact.sha256) == 64
    # plugin versions must match the server exactly
    for plugin in lock.plugins:
        assert plugin.artifact.parts[2].startswith(lock.opensearch_version + ".")


def test_fetch_pom_lists_exactly_the_artifacts() -> None:
    lock = ArtifactLock.load()
    pom = ET.fromstring(render_fetch_pom(lock.all_artifacts))
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    deps = pom.findall("m:dependencies/m:dependency", ns)
    assert len(deps) == len(lock.all_artifacts)
    rendered = {
        ":".join(
            d.find(f"m:{tag}", ns).text for tag in ("groupId", "artifactId", "version", "type")
        )
        for d in deps
    }
    assert rendered == {a.coordinates for a in lock.all_artifacts}


def test_verify_refuses_a_file_with_another_checksum(tmp_path: Path) -> None:
    path = tmp_path / "x.jar"
    path.write_bytes(b"not the pinned bytes")
    good = Artifact("g:a:1:jar", sha256_of(path))
    verify(path, good)
    with pytest.raises(ArtifactError, match="checksum mismatch"):
        verify(path, Artifact("g:a:1:jar", "0" * 64))


def test_malformed_locks_are_refused() -> None:
    raw = json.loads(
        (Path(__file__).parents[2] / "mathsearch" / "stack" / "artifacts.json").read_text()
    )
    raw["plugins"][0]["coordinates"] = "org.opensearch.plugin:opensearch-knn"
    with pytest.raises(ArtifactError, match="bad coordinates"):
        ArtifactLock.parse(json.dumps(raw))
    with pytest.raises(ArtifactError, match="malformed"):
        ArtifactLock.parse("{}")


def test_home_is_keyed_by_the_lock_digest(tmp_path: Path) -> None:
    lock = ArtifactLock.load()
    text = (Path(__file__).parents[2] / "mathsearch" / "stack" / "artifacts.json").read_text()
    other = ArtifactLock.parse(text.replace('"comment": "', '"comment": "changed '))
    assert home_dir(tmp_path, lock) != home_dir(tmp_path, other)
    assert home_dir(tmp_path, lock).name.startswith(lock.opensearch_version + "-")


def test_lang_painless_module_descriptor_and_policy() -> None:
    lock = ArtifactLock.load()
    module = next(m for m in lock.modules if m.name == "lang-painless")
    props = dict(
        line.split("=", 1) for line in module_descriptor(module, "2.19.1").strip().splitlines()
    )
    assert props["classname"] == "org.opensearch.painless.PainlessPlugin"
    assert props["opensearch.version"] == "2.19.1"
    assert props["name"] == "lang-painless"
    policy = module_policy(module)
    assert policy.startswith("grant {") and '"createClassLoader"' in policy
