"""The secure profile's node for the security tests: started once per session, stopped at its end.

Both test_secure_cluster.py and test_secrets.py import :func:`secure_node_fixture`; the node is
started by the first of them (``SecureStack.up``, real OpenSearch + security plugin) on its own
port and state folder, with a unique random admin password given through
MATHSEARCH_OPENSEARCH_PASSWORD_FILE, and stopped when the session ends.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mathsearch.opensearch import OpenSearchSettings
from mathsearch.stack.secure_stack import SecureStack

PORT = 9250


@dataclass
class SecureNode:
    stack: SecureStack
    password: str
    password_file: Path
    up_lines: list[str]
    up_seconds: float

    @property
    def env(self) -> dict[str, str]:
        """The variables `stack up --secure` told the user to export."""
        return {
            "MATHSEARCH_OPENSEARCH_URL": self.stack.url,
            "MATHSEARCH_OPENSEARCH_USER": "admin",
            "MATHSEARCH_OPENSEARCH_PASSWORD_FILE": str(self.password_file),
            "MATHSEARCH_OPENSEARCH_CA_FILE": str(self.stack.pki.ca),
        }


_started: list[SecureNode] = []


@pytest.fixture(scope="session", name="secure_node")
def secure_node_fixture(
    settings: OpenSearchSettings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SecureNode]:
    if _started:
        yield _started[0]
        return
    state = settings.state_dir / "test-secure"
    shutil.rmtree(state, ignore_errors=True)
    secret_dir = tmp_path_factory.mktemp("secret")
    password = f"Pw-{secrets.token_urlsafe(18)}-{os.getpid()}"
    password_file = secret_dir / "opensearch-password"
    password_file.write_text(password + "\n", encoding="utf-8")
    password_file.chmod(0o600)
    stack = SecureStack(dataclasses.replace(settings, state_dir=state), port=PORT)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.delenv("MATHSEARCH_OPENSEARCH_PASSWORD", raising=False)
            patch.setenv("MATHSEARCH_OPENSEARCH_PASSWORD_FILE", str(password_file))
            started = time.monotonic()
            lines = stack.up()
            node = SecureNode(stack, password, password_file, lines, time.monotonic() - started)
        _started.append(node)
        yield node
    finally:
        stack.down()
        shutil.rmtree(state, ignore_errors=True)
