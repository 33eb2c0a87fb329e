"""`mathsearch stack up|down|status --secure`: a local node with TLS and authentication.

The secure profile is one OpenSearch node assembled like the default one plus the pinned
``opensearch-security`` plugin (an optional plugin of ``artifacts.json``, in a home of its own),
with its own state folder (``STATE/secure``), cluster name and ports (HTTPS 9240, transport 9340),
so it runs beside the plain node. TLS is on for transport and HTTP with certificates from
:mod:`mathsearch.stack.security`; the only user is ``admin`` whose password is read from
``MATHSEARCH_OPENSEARCH_PASSWORD`` / ``..._PASSWORD_FILE`` or generated into a 0600 file.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from mathsearch.core.errors import ClusterUnavailableError, StackError
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.stack import node as node_mod
from mathsearch.stack import security
from mathsearch.stack.artifacts import ArtifactLock
from mathsearch.stack.assemble import assemble
from mathsearch.stack.java import find_java_home
from mathsearch.stack.stack import ClusterAuthenticationError, cluster_status

logger = logging.getLogger(__name__)

SECURE_PORT = 9240
SECURE_CLUSTER_NAME = "mathsearch-secure"


@dataclass
class SecureStack:
    """The secure node of ``settings`` (cache, state folder, heap, user) on ``port``."""

    settings: OpenSearchSettings
    port: int = SECURE_PORT

    @property
    def state_dir(self) -> Path:
        return self.settings.state_dir / "secure"

    @property
    def pki(self) -> security.Pki:
        return security.Pki(self.state_dir / "pki")

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def run_as(self) -> str | None:
        return self.settings.stack_user if os.geteuid() == 0 else None

    def spec(self, extra_yml: tuple[str, ...] = ()) -> node_mod.NodeSpec:
        return node_mod.NodeSpec(
            index=1,
            cluster_size=1,
            http_base=self.port,
            transport_base=self.port + 100,
            cluster_dir=self.state_dir,
            scheme="https",
            extra_yml=extra_yml,
            cluster_name=SECURE_CLUSTER_NAME,
        )

    def client_settings(self, password: security.AdminPassword) -> OpenSearchSettings:
        """What ``connect()`` needs to reach the secure node (https, CA file, admin, password)."""
        return dataclasses.replace(
            self.settings,
            url=self.url,
            user=security.ADMIN_USER,
            password=password.value,
            ca_file=self.pki.ca,
            verify_certs=True,
        )

    def env_lines(self, password: security.AdminPassword) -> list[str]:
        """The ``export`` lines that point every mathsearch command at the secure node."""
        lines = [
            f"export MATHSEARCH_OPENSEARCH_URL={self.url}",
            f"export MATHSEARCH_OPENSEARCH_USER={security.ADMIN_USER}",
        ]
        if password.file is not None:
            lines.append(f"export MATHSEARCH_OPENSEARCH_PASSWORD_FILE={password.file}")
        else:
            lines.append("# password: MATHSEARCH_OPENSEARCH_PASSWORD, already in your environment")
        lines.append(f"export MATHSEARCH_OPENSEARCH_CA_FILE={self.pki.ca}")
        return lines

    # -- commands -----------------------------------------------------------------------------
    def up(self) -> list[str]:
        """Assemble (first time), configure and start the secure node; wait until it is green."""
        started = time.monotonic()
        lock = ArtifactLock.load()
        plugin = lock.optional(security.PLUGIN)
        java = find_java_home(lock.java_min, lock.java_max, self.settings.java_home)
        home = assemble(self.settings.cache_dir, lock, java, (plugin,))
        if self.run_as:
            node_mod.ensure_system_user(self.run_as)
        pki = security.ensure_pki(self.pki.folder)
        password = security.admin_password(self.state_dir)
        dns = security.security_yml(security.subject_dn(pki.admin), security.subject_dn(pki.node))
        spec = self.spec(dns)
        running = node_mod.find_pid(spec) is not None
        bcrypt_hash = security.hash_password(home, java, password)
        security.write_node_config(spec.folder / "conf", home, pki, bcrypt_hash)
        if not running:
            node_mod.start(spec, home, java, self.settings.heap, self.run_as)
        deadline = time.monotonic() + self.settings.stack_timeout
        node_mod.wait_http(spec, deadline, ready=self._answers)
        self._wait_green(home, password, deadline)
        seconds = time.monotonic() - started
        where = f"password in {password.file}" if password.file else "password from the env"
        return [
            f"OpenSearch {lock.opensearch_version} with {security.PLUGIN} "
            f"{plugin.artifact.parts[2]}: 1 node at {self.url} (TLS on HTTP and transport, "
            f"user {security.ADMIN_USER}, {where}; "
            f"{'already running' if running else f'up in {seconds:.0f} s'}, home {home})",
            "point mathsearch at it with:",
            *self.env_lines(password),
        ]

    def down(self) -> list[str]:
        stopped = node_mod.stop(self.spec())
        return ["stopped the secure OpenSearch node" if stopped else "no secure node was running"]

    def status(self) -> dict:
        """`stack status` of the secure node, with the profile's own password and CA."""
        password = security.admin_password(self.state_dir)
        return cluster_status(self.client_settings(password))

    # -- helpers ------------------------------------------------------------------------------
    def _answers(self, url: str) -> bool:
        """True once the node answers HTTPS with our CA (any status: 401 and 503 count)."""
        if not self.pki.ca.is_file():
            return False
        context = ssl.create_default_context(cafile=str(self.pki.ca))
        try:
            with urllib.request.urlopen(url, timeout=2.0, context=context):
                return True
        except urllib.error.HTTPError:
            return True
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def _wait_green(self, home: Path, password: security.AdminPassword, deadline: float) -> None:
        """Wait for green/yellow; reload the users once when the index holds an older password."""
        reloaded = False
        last = "no answer"
        while time.monotonic() < deadline:
            try:
                health = self.status()["health"]
                if health in {"green", "yellow"}:
                    return
                last = health
            except ClusterAuthenticationError as exc:
                last = str(exc)
                if not reloaded:  # 401 (not 503) means the security index is initialised
                    self._reload_users(home)
                    reloaded = True
            except ClusterUnavailableError as exc:
                last = str(exc)
            time.sleep(1.0)
        raise StackError(f"the secure node did not become healthy in time (last: {last})")

    def _reload_users(self, home: Path) -> None:
        """Push ``internal_users.yml`` with the admin certificate (``securityadmin.sh``).

        The security index keeps the users of its first start; when the password changed since,
        the admin certificate (``plugins.security.authcz.admin_dn``) uploads the new hash.
        """
        pki = self.pki
        conf = self.spec().folder / "conf"
        java = find_java_home(*_java_range(), self.settings.java_home)
        script = home / "plugins" / security.PLUGIN / "tools" / "securityadmin.sh"
        logger.info("the admin password changed: reloading internal users with securityadmin")
        users = conf / "opensearch-security" / "internal_users.yml"
        command = ["bash", str(script), "-f", str(users), "-t", "internalusers", "-icl", "-nhnv",
                   "-h", "127.0.0.1", "-p", str(self.port), "-cacert", str(pki.ca),
                   "-cert", str(pki.admin), "-key", str(pki.admin_key)]  # fmt: skip
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "OPENSEARCH_JAVA_HOME": str(java)},
            check=False,
            timeout=180,
        )
        if result.returncode != 0:
            raise StackError(f"securityadmin failed: {(result.stdout + result.stderr)[-800:]}")


def _java_range() -> tuple[int, int]:
    lock = ArtifactLock.load()
    return lock.java_min, lock.java_max
