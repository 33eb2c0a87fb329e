"""Assemble a runnable OpenSearch home from the pinned Maven Central artifacts.

The 2.x integ-test-zip distribution holds only the transport module; we add the lang-painless
module (its jar, its runtime jars, a generated descriptor and security policy) and install the
k-NN and neural-search plugins with ``opensearch-plugin install --batch``. The 3.x integ-test-zip
already bundles lang-painless and the other modules, so its lock lists no module. The result lives
in ``CACHE/opensearch/<version>-<lock digest>/`` and is reused until the lock changes; each
OpenSearch version (``mathsearch stack up --version``) has a lock and so a home of its own.

A profile may add optional plugins of the lock (the secure profile adds opensearch-security): it
gets its own home, ``<version>-<lock digest>-<plugin>-<plugin sha256[:8]>``, and the default home
is untouched.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from mathsearch.core.errors import StackError
from mathsearch.stack.artifacts import ArtifactLock, ModuleSpec, PluginSpec, fetch
from mathsearch.stack.java import find_java_home

logger = logging.getLogger(__name__)

COMPLETE_MARKER = ".mathsearch-complete"


def home_dir(cache_dir: Path, lock: ArtifactLock, extra: tuple[PluginSpec, ...] = ()) -> Path:
    """The cached home of ``lock`` (plus ``extra`` plugins), keyed by version and lock digest."""
    name = f"{lock.opensearch_version}-{lock.digest[:12]}"
    for plugin in extra:
        name += f"-{plugin.name}-{plugin.artifact.sha256[:8]}"
    return cache_dir / "opensearch" / name


def module_descriptor(module: ModuleSpec, opensearch_version: str, java_version: int = 11) -> str:
    """The ``plugin-descriptor.properties`` of a module we build from jars.

    ``java.version`` is the Java the module was built for (the lock's minimum Java: 11 for 2.x,
    21 for 3.x); 2.x and 3.x read the same keys.
    """
    return (
        f"description={module.description}\n"
        f"version={opensearch_version}\n"
        f"name={module.name}\n"
        f"classname={module.classname}\n"
        f"java.version={java_version}\n"
        f"opensearch.version={opensearch_version}\n"
        "custom.foldername=\n"
        "extended.plugins=\n"
        "has.native.controller=false\n"
    )


def module_policy(module: ModuleSpec) -> str:
    """The module's ``plugin-security.policy`` (its permissions in one grant block)."""
    lines = "\n".join(f"  {line}" for line in module.security_policy)
    return f"grant {{\n{lines}\n}};\n"


def _make_readable(root: Path) -> None:
    """The node runs as another user: everything must be world-readable (dirs traversable)."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        path.chmod(mode | (0o555 if path.is_dir() or mode & 0o111 else 0o444))


def _unpack_distribution(zip_path: Path, dest: Path) -> Path:
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(dest)
        for info in archive.infolist():  # zipfile drops the executable bits
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                (dest / info.filename).chmod(mode)
    tops = [p for p in dest.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise StackError(f"{zip_path} does not hold exactly one top folder")
    return tops[0]


def assemble(
    cache_dir: Path,
    lock: ArtifactLock | None = None,
    java_home: Path | None = None,
    extra_plugins: tuple[PluginSpec, ...] = (),
) -> Path:
    """Return the OpenSearch home for ``lock``, building it first when the cache lacks it.

    ``extra_plugins`` (optional plugins of the lock) are installed after the lock's own plugins,
    into a home of their own (see :func:`home_dir`).

    Safe to call from several processes at once (a file lock serialises the build) and after a
    crash (the home is built in a temporary folder and renamed into place when complete).
    """
    lock = lock or ArtifactLock.load()
    target = home_dir(cache_dir, lock, extra_plugins)
    if (target / COMPLETE_MARKER).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".assemble.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        if (target / COMPLETE_MARKER).is_file():
            return target
        paths = fetch(lock, cache_dir / "downloads", tuple(p.artifact for p in extra_plugins))
        java = find_java_home(lock.java_min, lock.java_max, java_home)
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
        try:
            home = _unpack_distribution(paths[lock.distribution.coordinates], work)
            for module in lock.modules:
                folder = home / "modules" / module.name
                if folder.exists():
                    raise StackError(
                        f"the OpenSearch {lock.opensearch_version} distribution already bundles "
                        f"the {module.name} module; drop it from the artifact lock's modules"
                    )
                folder.mkdir(parents=True)
                for jar in module.jars:
                    shutil.copy2(paths[jar.coordinates], folder / jar.filename)
                (folder / "plugin-descriptor.properties").write_text(
                    module_descriptor(module, lock.opensearch_version, lock.java_min),
                    encoding="utf-8",
                )
                (folder / "plugin-security.policy").write_text(module_policy(module), "utf-8")
            env = {**os.environ, "OPENSEARCH_JAVA_HOME": str(java), "JAVA_HOME": str(java)}
            for plugin in (*lock.plugins, *extra_plugins):
                logger.info("installing plugin %s", plugin.name)
                command = [
                    str(home / "bin" / "opensearch-plugin"),
                    "install",
                    "--batch",
                    paths[plugin.artifact.coordinates].resolve().as_uri(),
                ]
                result = subprocess.run(
                    command, capture_output=True, text=True, env=env, check=False
                )
                if result.returncode != 0:
                    raise StackError(
                        f"installing {plugin.name} failed: {' '.join(command)}\n"
                        + (result.stdout + result.stderr).strip()[-2000:]
                    )
            (home / COMPLETE_MARKER).write_text(lock.digest + "\n", encoding="utf-8")
            _make_readable(home)
            if target.exists():
                shutil.rmtree(target)
            home.rename(target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    target.parent.chmod(0o755)
    logger.info("assembled OpenSearch %s at %s", lock.opensearch_version, target)
    return target
