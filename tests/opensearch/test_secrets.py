"""The OpenSearch password never leaks: not in logs, reprs, exception messages, CLI output or files.

The secure node runs with a unique random password (tests/opensearch/secure_node.py); every path
that handles it - connect, a refused login, a password inside the URL, settings reprs, the CLI at
debug level, every file the secure stack wrote - is searched for that string.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mathsearch.core.errors import ConfigurationError
from mathsearch.core.redact import redact_url
from mathsearch.opensearch import OpenSearchSettings, connect
from mathsearch.stack import security
from mathsearch.stack.stack import ClusterAuthenticationError, cluster_status
from mathsearch.workers.settings import WorkerSettings

from .secure_node import SecureNode, secure_node_fixture  # noqa: F401 - the fixture

REPO = Path(__file__).resolve().parents[2]


def test_settings_reprs_hide_the_password(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret = "repr-secret-8c1f0e"
    password_file = tmp_path / "pw"
    password_file.write_text(secret + "\n", encoding="utf-8")
    monkeypatch.setenv("MATHSEARCH_OPENSEARCH_PASSWORD_FILE", str(password_file))
    settings = OpenSearchSettings.from_env()
    assert settings.password == secret  # the file's newline is stripped
    assert secret not in repr(settings) and secret not in str(settings)
    admin = security.AdminPassword(secret, "test", password_file)
    assert secret not in repr(admin)
    monkeypatch.setenv("MATHSEARCH_REDIS_URL", f"redis://:{secret}@127.0.0.1:6379/0")
    assert secret not in repr(WorkerSettings.from_env())
    monkeypatch.setenv("MATHSEARCH_REDIS_URL", f"http://:{secret}@127.0.0.1:6379/0")
    with pytest.raises(ConfigurationError) as caught:
        WorkerSettings.from_env()
    assert secret not in str(caught.value)


def test_redact_url_masks_passwords_of_every_url() -> None:
    assert redact_url("https://u:p4ss@h:9200,https://u:p4ss@g:9200") == (
        "https://u:***@h:9200,https://u:***@g:9200"
    )
    assert redact_url("rediss://:p4ss@h:6380/1") == "rediss://:***@h:6380/1"
    assert redact_url("https://user@h:9200") == "https://user@h:9200"


def test_a_generated_password_file_is_private_and_reused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("MATHSEARCH_OPENSEARCH_PASSWORD", raising=False)
    monkeypatch.delenv("MATHSEARCH_OPENSEARCH_PASSWORD_FILE", raising=False)
    first = security.admin_password(tmp_path)
    assert first.file == tmp_path / security.PASSWORD_FILE_NAME
    assert stat.S_IMODE(first.file.stat().st_mode) == 0o600
    assert len(first.value) >= 24 and first.source == "generated"
    assert security.admin_password(tmp_path).value == first.value


@pytest.mark.services
def test_no_log_record_or_error_holds_the_password(
    secure_node: SecureNode, caplog: pytest.LogCaptureFixture
) -> None:
    secret = secure_node.password
    caplog.set_level(logging.DEBUG)
    base = secure_node.stack.client_settings(security.AdminPassword(secret, "test", None))
    messages = []
    assert cluster_status(base)["health"] == "green"
    connect(base).indices.exists(index="mathsearch-secret-probe")
    for settings in (
        dataclasses.replace(base, user="nobody"),  # the right password for another user
        dataclasses.replace(base, url=base.url.replace("https://", f"https://nobody:{secret}@")),
    ):
        with pytest.raises(ClusterAuthenticationError) as caught:
            cluster_status(settings)
        messages += [str(caught.value), repr(caught.value), repr(settings)]
    for record in caplog.records:
        text = record.getMessage() + (record.exc_text or "")
        if record.exc_info:
            text += logging.Formatter().formatException(record.exc_info)
        messages.append(text)
    assert len(caplog.records) > 0
    assert not [m for m in messages if secret in m]


@pytest.mark.services
def test_the_cli_never_prints_the_password(secure_node: SecureNode, tmp_path: Path) -> None:
    secret = secure_node.password
    outputs = ["\n".join(secure_node.up_lines)]
    env = {**os.environ, **secure_node.env, "PYTHONPATH": str(REPO)}
    env.pop("MATHSEARCH_OPENSEARCH_PASSWORD", None)
    runs = [
        (env, ["-v", "stack", "status", "--json"]),
        ({**env, "MATHSEARCH_OPENSEARCH_USER": "nobody"}, ["-v", "stack", "status"]),
        (
            {**env, "MATHSEARCH_OPENSEARCH_URL": f"https://admin:{secret}@127.0.0.1:1"},
            ["-v", "stack", "status"],
        ),
    ]
    for run_env, args in runs:
        result = subprocess.run(
            [sys.executable, "-m", "mathsearch.cli.main", *args],
            capture_output=True,
            text=True,
            env=run_env,
            cwd=REPO,
            timeout=120,
            check=False,
        )
        outputs += [result.stdout, result.stderr]
    assert '"health": "green"' in outputs[1]
    assert "refused the credentials of user nobody" in outputs[4]
    assert "admin:***@127.0.0.1:1" in outputs[6]
    assert not [text for text in outputs if secret in text]


@pytest.mark.services
def test_no_file_of_the_stack_holds_the_password(secure_node: SecureNode) -> None:
    secret = secure_node.password.encode()
    state = secure_node.stack.state_dir
    files = [path for path in state.rglob("*") if path.is_file()]
    assert any(path.name.endswith(".log") for path in files)  # the node's logs are searched
    leaking = [path for path in files if secret in path.read_bytes()]
    assert leaking == []
    users = secure_node.stack.spec().folder / "conf" / "opensearch-security" / "internal_users.yml"
    assert '  hash: "$2y$12$' in users.read_text(encoding="utf-8")
    pki = secure_node.stack.pki
    for key in (pki.ca_key, pki.node_key, pki.admin_key, users.parent.parent / "node-key.pem"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
    assert stat.S_IMODE(pki.folder.stat().st_mode) == 0o700
