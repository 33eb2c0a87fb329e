"""Pinned Maven Central artifacts of the local node, fetched with Maven and checked by SHA-256."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from xml.sax.saxutils import escape

from mathsearch.core.errors import ArtifactError

logger = logging.getLogger(__name__)

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

#: The lock's member holding plugins only some profiles install (the secure profile's security
#: plugin). It must be the last member: the base digest, the default home's cache key, is the
#: SHA-256 of the text without it, so adding an optional plugin never rebuilds the default node.
OPTIONAL_MEMBER = ',\n  "optional_plugins"'

#: The default lock (the node ``mathsearch stack up`` builds without ``--version``). Every other
#: OpenSearch version the project can build has a lock ``artifacts-<version>.json`` beside it.
DEFAULT_LOCK = "artifacts.json"


@dataclass(frozen=True)
class Artifact:
    """One pinned file: ``group:artifact:version:type`` and its SHA-256."""

    coordinates: str
    sha256: str

    @property
    def parts(self) -> tuple[str, str, str, str]:
        pieces = self.coordinates.split(":")
        if len(pieces) != 4 or not all(pieces):
            raise ArtifactError(
                f"bad coordinates {self.coordinates!r}: want group:artifact:ver:type"
            )
        return pieces[0], pieces[1], pieces[2], pieces[3]

    @property
    def filename(self) -> str:
        _, artifact, version, kind = self.parts
        return f"{artifact}-{version}.{kind}"


@dataclass(frozen=True)
class ModuleSpec:
    """A module folder (e.g. lang-painless) made of jars plus a generated descriptor."""

    name: str
    classname: str
    description: str
    jars: tuple[Artifact, ...]
    security_policy: tuple[str, ...]


@dataclass(frozen=True)
class PluginSpec:
    name: str
    artifact: Artifact


@dataclass(frozen=True)
class ArtifactLock:
    """The content of ``artifacts.json``: every file the node is built from."""

    opensearch_version: str
    java_min: int
    java_max: int
    distribution: Artifact
    modules: tuple[ModuleSpec, ...]
    plugins: tuple[PluginSpec, ...]
    digest: str
    optional_plugins: tuple[PluginSpec, ...] = ()

    def optional(self, name: str) -> PluginSpec:
        """The optional plugin ``name`` (e.g. ``opensearch-security``)."""
        for plugin in self.optional_plugins:
            if plugin.name == name:
                return plugin
        raise ArtifactError(f"the artifact lock pins no optional plugin {name!r}")

    @property
    def all_artifacts(self) -> list[Artifact]:
        found = [self.distribution]
        for module in self.modules:
            found.extend(module.jars)
        found.extend(plugin.artifact for plugin in self.plugins)
        return found

    @classmethod
    def parse(cls, text: str) -> ArtifactLock:
        """Parse the lock file's JSON text, raising :class:`ArtifactError` when malformed."""
        try:
            raw = json.loads(text)
            lock = cls(
                opensearch_version=raw["opensearch_version"],
                java_min=int(raw["java"]["min"]),
                java_max=int(raw["java"]["max"]),
                distribution=Artifact(**raw["distribution"]),
                modules=tuple(
                    ModuleSpec(
                        name=name,
                        classname=spec["classname"],
                        description=spec["description"],
                        jars=tuple(Artifact(**jar) for jar in spec["jars"]),
                        security_policy=tuple(spec.get("security_policy", ())),
                    )
                    for name, spec in raw["modules"].items()
                ),
                plugins=tuple(
                    PluginSpec(name=p["name"], artifact=Artifact(p["coordinates"], p["sha256"]))
                    for p in raw["plugins"]
                ),
                digest=hashlib.sha256(_base_text(text, raw).encode("utf-8")).hexdigest(),
                optional_plugins=tuple(
                    PluginSpec(name=p["name"], artifact=Artifact(p["coordinates"], p["sha256"]))
                    for p in raw.get("optional_plugins", ())
                ),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(f"malformed artifact lock: {exc!r}") from exc
        for artifact in [*lock.all_artifacts, *(p.artifact for p in lock.optional_plugins)]:
            artifact.parts  # noqa: B018 - validates the coordinates
            if len(artifact.sha256) != 64:
                raise ArtifactError(f"{artifact.coordinates}: sha256 must be 64 hex digits")
        return lock

    @classmethod
    def load(cls, version: str | None = None) -> ArtifactLock:
        """The lock shipped with the package for OpenSearch ``version`` (None: the default).

        Raises :class:`ArtifactError` naming the shipped versions when none pins ``version``.
        """
        name = lock_name(version)
        if name is None:
            raise ArtifactError(
                f"no pinned artifact lock for OpenSearch {version}; "
                f"this mathsearch builds {', '.join(shipped_versions())} "
                "(a version needs the distribution, opensearch-knn and neural-search on Maven "
                "Central)"
            )
        lock = cls.parse(_package_files().joinpath(name).read_text("utf-8"))
        if version is not None and lock.opensearch_version != version:
            raise ArtifactError(
                f"{name} pins OpenSearch {lock.opensearch_version}, not the {version} its name says"
            )
        return lock


def _package_files() -> Traversable:
    """The folder of the shipped locks (``mathsearch/stack``)."""
    return resources.files("mathsearch.stack")


def lock_file_name(version: str) -> str:
    """The file name of the lock of a non-default OpenSearch ``version``."""
    return f"artifacts-{version}.json"


def default_version() -> str:
    """The OpenSearch version of the default lock (``artifacts.json``)."""
    text = _package_files().joinpath(DEFAULT_LOCK).read_text("utf-8")
    try:
        return str(json.loads(text)["opensearch_version"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactError(f"malformed artifact lock {DEFAULT_LOCK}: {exc!r}") from exc


def shipped_versions() -> list[str]:
    """Every OpenSearch version with a lock, the default first, then oldest to newest."""
    prefix, suffix = lock_file_name("|").split("|")
    others = [
        entry.name[len(prefix) : -len(suffix)]
        for entry in _package_files().iterdir()
        if entry.name.startswith(prefix) and entry.name.endswith(suffix)
    ]
    default = default_version()
    return [default, *sorted((v for v in others if v != default), key=version_key)]


def lock_name(version: str | None) -> str | None:
    """The lock file pinning ``version`` (None or the default version: ``artifacts.json``), or
    None when the package ships no lock for it."""
    if version is None or version == default_version():
        return DEFAULT_LOCK
    name = lock_file_name(version)
    return name if _package_files().joinpath(name).is_file() else None


def version_key(version: str) -> tuple[int, ...]:
    """``"3.10.0"`` -> ``(3, 10, 0)`` (non-numeric parts count as 0), for sorting versions."""
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))


def major_version(version: str) -> int:
    """The major version of an OpenSearch version string (``"3.6.0"`` -> 3)."""
    return version_key(version)[0]


def _base_text(text: str, raw: dict) -> str:
    """The lock text without its last member ``optional_plugins`` (see OPTIONAL_MEMBER)."""
    if "optional_plugins" not in raw:
        return text
    if list(raw)[-1] != "optional_plugins":
        raise ArtifactError('"optional_plugins" must be the last member of the artifact lock')
    start = text.find(OPTIONAL_MEMBER)
    return text if start < 0 else text[:start] + "\n}\n"  # reformatted: a key of its own


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def render_fetch_pom(artifacts: list[Artifact]) -> str:
    """A throw-away pom whose dependencies are exactly ``artifacts`` (no transitive ones)."""
    rows = []
    for artifact in artifacts:
        group, name, version, kind = artifact.parts
        rows.append(
            f"    <dependency><groupId>{escape(group)}</groupId>"
            f"<artifactId>{escape(name)}</artifactId>"
            f"<version>{escape(version)}</version><type>{escape(kind)}</type></dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>mathsearch.local</groupId><artifactId>opensearch-fetch</artifactId>"
        "<version>1</version><packaging>pom</packaging>\n"
        "  <dependencies>\n" + "\n".join(rows) + "\n  </dependencies>\n</project>\n"
    )


def verify(path: Path, artifact: Artifact) -> None:
    """Raise :class:`ArtifactError` unless ``path`` has the pinned SHA-256."""
    actual = sha256_of(path)
    if actual != artifact.sha256:
        raise ArtifactError(
            f"{artifact.coordinates}: checksum mismatch for {path} "
            f"(expected {artifact.sha256}, got {actual}); refusing to use it"
        )


def fetch(
    lock: ArtifactLock, download_dir: Path, extra: tuple[Artifact, ...] = ()
) -> dict[str, Path]:
    """Make every artifact of ``lock`` (plus ``extra``) present and verified in ``download_dir``.

    Files already there with the right checksum are reused; the rest are fetched from Maven
    Central by ``mvn dependency:copy-dependencies`` in one run (Maven keeps its own cache in
    ``~/.m2``). Returns coordinates -> path.
    """
    download_dir.mkdir(parents=True, exist_ok=True)
    wanted = [*lock.all_artifacts, *extra]
    missing = []
    for artifact in wanted:
        path = download_dir / artifact.filename
        if not path.is_file() or sha256_of(path) != artifact.sha256:
            missing.append(artifact)
    if missing:
        mvn = shutil.which("mvn")
        if mvn is None:
            raise ArtifactError(
                "Maven (mvn) is needed to fetch OpenSearch from Maven Central; "
                "install it (apt-get install maven) or put mvn on PATH"
            )
        logger.info(
            "fetching %d artifact(s) from Maven Central: %s",
            len(missing),
            ", ".join(a.coordinates for a in missing),
        )
        with tempfile.TemporaryDirectory(prefix="mathsearch-mvn-") as tmp:
            pom = Path(tmp) / "pom.xml"
            pom.write_text(render_fetch_pom(missing), encoding="utf-8")
            command = [
                mvn,
                "-B",
                "-q",
                "-f",
                str(pom),
                f"{DEPENDENCY_PLUGIN}:copy-dependencies",
                "-DexcludeTransitive=true",
                f"-DoutputDirectory={download_dir}",
            ]
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                tail = (result.stdout + result.stderr).strip().splitlines()[-15:]
                raise ArtifactError(
                    "mvn could not fetch the OpenSearch artifacts:\n  "
                    + " ".join(command)
                    + "\n"
                    + "\n".join(tail)
                )
    paths = {}
    for artifact in wanted:
        path = download_dir / artifact.filename
        if not path.is_file():
            raise ArtifactError(f"{artifact.coordinates}: mvn finished but {path} is missing")
        verify(path, artifact)
        paths[artifact.coordinates] = path
    return paths
