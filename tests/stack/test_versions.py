"""Choosing the OpenSearch version of the local node: one pinned lock per version."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import zipfile
from pathlib import Path

import pytest

from mathsearch.cli.main import _parser, main
from mathsearch.core.errors import ArtifactError, StackError
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.stack import artifacts as artifacts_mod
from mathsearch.stack import node as node_mod
from mathsearch.stack import stack as stack_mod
from mathsearch.stack.artifacts import (
    ArtifactLock,
    default_version,
    lock_file_name,
    major_version,
    shipped_versions,
    version_key,
)
from mathsearch.stack.assemble import home_dir, module_descriptor
from mathsearch.stack.stack import Stack, cluster_dirname

STACK_DIR = Path(__file__).parents[2] / "mathsearch" / "stack"
#: The module (``mathsearch.stack.assemble`` the attribute is the function it re-exports).
assemble_mod = importlib.import_module("mathsearch.stack.assemble")


def _stack(tmp_path: Path, **changes: object) -> Stack:
    settings = OpenSearchSettings(
        url="http://127.0.0.1:9210", cache_dir=tmp_path / "cache", state_dir=tmp_path / "state"
    )
    return Stack(dataclasses.replace(settings, **changes), "redis://127.0.0.1:6389/0")


# -- the locks ----------------------------------------------------------------------------------
def test_every_shipped_lock_parses_and_pins_a_whole_node() -> None:
    versions = shipped_versions()
    assert versions[0] == default_version() == "2.19.1"
    assert "3.6.0" in versions
    for version in versions:
        lock = ArtifactLock.load(version)
        assert lock.opensearch_version == version
        group, name, dist_version, kind = lock.distribution.parts
        assert (group, name, dist_version, kind) == (
            "org.opensearch.distribution.integ-test-zip",
            "opensearch",
            version,
            "zip",
        )
        assert {p.name for p in lock.plugins} == {"opensearch-knn", "opensearch-neural-search"}
        for plugin in lock.plugins:  # plugin and server versions must match exactly
            assert plugin.artifact.parts[2] == f"{version}.0"
        for artifact in lock.all_artifacts:
            assert len(artifact.sha256) == 64
            int(artifact.sha256, 16)


def test_the_3x_lock_needs_java_21_and_adds_no_module() -> None:
    lock = ArtifactLock.load("3.6.0")
    assert (lock.java_min, lock.java_max) == (21, 25)
    assert lock.modules == ()  # the 3.x integ-test-zip bundles lang-painless itself
    assert lock.optional_plugins == ()
    coords = {p.artifact.coordinates for p in lock.plugins}
    assert coords == {
        "org.opensearch.plugin:opensearch-knn:3.6.0.0:zip",
        "org.opensearch.plugin:neural-search:3.6.0.0:zip",
    }


def test_the_default_lock_is_artifacts_json_whatever_it_is_called() -> None:
    default = ArtifactLock.load()
    assert ArtifactLock.load(default.opensearch_version) == default
    text = (STACK_DIR / "artifacts.json").read_text()
    assert default == ArtifactLock.parse(text)
    assert not (STACK_DIR / lock_file_name(default.opensearch_version)).exists()


def test_each_version_gets_its_own_home(tmp_path: Path) -> None:
    old, new = ArtifactLock.load(), ArtifactLock.load("3.6.0")
    assert old.digest != new.digest
    assert home_dir(tmp_path, old).parent == home_dir(tmp_path, new).parent
    assert home_dir(tmp_path, new).name == f"3.6.0-{new.digest[:12]}"


def test_an_unknown_version_names_the_shipped_ones() -> None:
    with pytest.raises(ArtifactError, match=r"OpenSearch 3\.5\.0.*2\.19\.1, 3\.6\.0"):
        ArtifactLock.load("3.5.0")


def test_a_lock_must_pin_the_version_its_name_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("artifacts.json", "artifacts-3.6.0.json"):
        (tmp_path / name).write_text((STACK_DIR / name).read_text())
    raw = json.loads((STACK_DIR / "artifacts-3.6.0.json").read_text())
    raw["opensearch_version"] = "3.6.1"
    (tmp_path / "artifacts-3.7.0.json").write_text(json.dumps(raw))
    monkeypatch.setattr(artifacts_mod, "_package_files", lambda: tmp_path)
    assert shipped_versions() == ["2.19.1", "3.6.0", "3.7.0"]
    with pytest.raises(ArtifactError, match=r"pins OpenSearch 3\.6\.1, not the 3\.7\.0"):
        ArtifactLock.load("3.7.0")


def test_versions_sort_numerically() -> None:
    assert sorted(["3.10.0", "3.6.0", "2.19.1"], key=version_key) == ["2.19.1", "3.6.0", "3.10.0"]
    assert major_version("3.6.0") == 3
    assert major_version("2.19.1") == 2


# -- descriptors and JVM options ---------------------------------------------------------------
def test_module_descriptor_follows_the_lock_java() -> None:
    module = ArtifactLock.load().modules[0]
    props = dict(
        line.split("=", 1)
        for line in module_descriptor(module, "3.6.0", java_version=21).strip().splitlines()
    )
    assert props["java.version"] == "21"
    assert props["opensearch.version"] == props["version"] == "3.6.0"
    # the 2.x default is unchanged
    assert "java.version=11\n" in module_descriptor(module, "2.19.1")


def test_jvm_options_use_the_agent_when_the_home_ships_it(tmp_path: Path) -> None:
    old_home, new_home = tmp_path / "2x", tmp_path / "3x"
    old_home.mkdir()
    (new_home / "agent").mkdir(parents=True)
    (new_home / "agent" / "opensearch-agent.jar").write_bytes(b"jar")
    old = node_mod.jvm_options(old_home, tmp_path / "logs", "512m")
    new = node_mod.jvm_options(new_home, tmp_path / "logs", "1g")
    assert "18-:-Djava.security.manager=allow" in old
    assert "-javaagent" not in old
    assert f"-javaagent:{new_home / 'agent' / 'opensearch-agent.jar'}\n" in new
    assert "security.manager" not in new
    assert "SecuredForkJoinWorkerThreadFactory" not in new
    assert "-Xms1g\n-Xmx1g\n" in new
    assert "${OPENSEARCH_TMPDIR}" in new


def test_assemble_refuses_a_module_the_distribution_bundles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = tmp_path / "opensearch-9.0.0.zip"
    with zipfile.ZipFile(dist, "w") as archive:
        archive.writestr("opensearch-9.0.0/modules/lang-painless/plugin-descriptor.properties", "")
    raw = json.loads((STACK_DIR / "artifacts.json").read_text())
    raw.pop("optional_plugins")
    raw["opensearch_version"] = "9.0.0"
    raw["plugins"] = []
    raw["distribution"] = {
        "coordinates": "org.opensearch.distribution.integ-test-zip:opensearch:9.0.0:zip",
        "sha256": hashlib.sha256(dist.read_bytes()).hexdigest(),
    }
    lock = ArtifactLock.parse(json.dumps(raw))
    monkeypatch.setattr(
        assemble_mod,
        "fetch",
        lambda *_: dict.fromkeys([a.coordinates for a in lock.all_artifacts], dist),
    )
    monkeypatch.setattr(assemble_mod, "find_java_home", lambda *_: tmp_path)
    with pytest.raises(StackError, match="already bundles the lang-painless module"):
        assemble_mod.assemble(tmp_path / "cache", lock)
    assert not home_dir(tmp_path / "cache", lock).exists()


# -- the stack ----------------------------------------------------------------------------------
def test_cluster_folders_are_per_major_version() -> None:
    assert cluster_dirname(1, None) == "cluster-1"  # state files from before versions
    assert cluster_dirname(1, "2.19.1") == "cluster-1"
    assert cluster_dirname(3, "3.6.0") == "cluster-3-os3"


def test_version_precedence_flag_then_env_then_default(tmp_path: Path) -> None:
    assert _stack(tmp_path).lock().opensearch_version == "2.19.1"
    pinned = _stack(tmp_path, opensearch_version="3.6.0")
    assert pinned.lock().opensearch_version == "3.6.0"
    assert pinned.lock("2.19.1").opensearch_version == "2.19.1"


def test_settings_read_the_version_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATHSEARCH_OPENSEARCH_VERSION", "3.6.0")
    assert OpenSearchSettings.from_env().opensearch_version == "3.6.0"
    monkeypatch.setenv("MATHSEARCH_OPENSEARCH_VERSION", "")
    assert OpenSearchSettings.from_env().opensearch_version is None


def test_state_files_without_a_version_are_the_default_node(tmp_path: Path) -> None:
    stack = _stack(tmp_path)
    assert stack.running() is None
    stack.settings.state_dir.mkdir(parents=True)
    stack.state_file.write_text(json.dumps({"nodes": 2, "home": "/h"}))
    assert stack.running() == stack_mod.RunningStack(2, "/h", None)
    assert stack.node_settings().url == "http://127.0.0.1:9210,http://127.0.0.1:9211"
    assert stack._node(2).folder == tmp_path / "state" / "cluster-2" / "node-2"
    stack.state_file.write_text(json.dumps({"nodes": 1, "home": "/h3", "version": "3.6.0"}))
    assert stack.running_version() == "3.6.0"
    assert stack._node(1).folder == tmp_path / "state" / "cluster-1-os3" / "node-1"


def test_up_with_another_version_stops_the_running_one_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = _stack(tmp_path)
    stack.settings.state_dir.mkdir(parents=True)
    stack.state_file.write_text(json.dumps({"nodes": 1, "home": "/h"}))
    stopped: list[tuple[int, str | None]] = []
    started: list[Path] = []
    home = tmp_path / "home"
    monkeypatch.setattr(
        Stack, "stop_nodes", lambda _, size, version=None: stopped.append((size, version))
    )
    monkeypatch.setattr(Stack, "java", lambda *_: tmp_path / "jdk")
    monkeypatch.setattr(Stack, "wait_health", lambda *_: {})
    monkeypatch.setattr(stack_mod, "assemble", lambda *_: home)
    monkeypatch.setattr(node_mod, "ensure_system_user", lambda _: None)
    monkeypatch.setattr(node_mod, "start", lambda spec, *_: started.append(spec.folder))
    monkeypatch.setattr(node_mod, "wait_http", lambda *_: None)

    messages = stack.up(1, with_redis=False, version="3.6.0")
    assert stopped == [(1, None)]  # the 2.19 node of the old state file
    assert started == [tmp_path / "state" / "cluster-1-os3" / "node-1"]
    assert messages[0].startswith("OpenSearch 3.6.0: 1 node(s) at http://127.0.0.1:9210")
    assert json.loads(stack.state_file.read_text()) == {
        "nodes": 1,
        "home": str(home),
        "version": "3.6.0",
    }
    stack.up(1, with_redis=False, version="3.6.0")  # same topology: nothing stopped
    assert stopped == [(1, None)]


# -- the CLI ------------------------------------------------------------------------------------
def test_cli_takes_a_version_for_up_and_assemble() -> None:
    args = _parser().parse_args(["stack", "up", "--version", "3.6.0", "--no-redis"])
    assert args.opensearch_version == "3.6.0"
    assert _parser().parse_args(["stack", "up"]).opensearch_version is None
    args = _parser().parse_args(["stack", "assemble", "--version", "3.6.0"])
    assert args.opensearch_version == "3.6.0"


def test_cli_refuses_the_secure_profile_with_a_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["-q", "stack", "up", "--secure", "--version", "3.6.0"]) == 1
    assert "drop --version" in capsys.readouterr().err


def test_cli_assemble_names_the_shipped_versions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-q", "stack", "assemble", "--version", "3.5.0"]) == 1
    assert "2.19.1, 3.6.0" in capsys.readouterr().err
