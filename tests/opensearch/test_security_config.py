"""The secure profile's pieces without a node: lock digest, home folder, certificates, config."""

from __future__ import annotations

import stat
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from mathsearch.core.errors import ArtifactError
from mathsearch.stack import security
from mathsearch.stack.artifacts import ArtifactLock
from mathsearch.stack.assemble import home_dir


def _lock_text() -> str:
    return resources.files("mathsearch.stack").joinpath("artifacts.json").read_text("utf-8")


def test_the_optional_security_plugin_leaves_the_default_cache_key_alone(tmp_path: Path) -> None:
    text = _lock_text()
    lock = ArtifactLock.parse(text)
    without = ArtifactLock.parse(text[: text.index(',\n  "optional_plugins"')] + "\n}\n")
    assert without.optional_plugins == ()
    assert lock.digest == without.digest
    plugin = lock.optional(security.PLUGIN)
    assert plugin.artifact.coordinates.startswith("org.opensearch.plugin:opensearch-security:")
    assert plugin.artifact not in lock.all_artifacts  # the default home never fetches it
    assert home_dir(tmp_path, lock) == home_dir(tmp_path, without)
    assert home_dir(tmp_path, lock, (plugin,)) != home_dir(tmp_path, lock)
    with pytest.raises(ArtifactError, match="no optional plugin"):
        lock.optional("nope")


def test_optional_plugins_must_be_the_last_member() -> None:
    text = _lock_text()
    start = text.index(',\n  "optional_plugins"')
    member = text[start + 2 : text.rindex("\n}")]
    moved = text[:1] + "\n" + member + "," + text[1:start] + "\n}\n"
    with pytest.raises(ArtifactError, match="last member"):
        ArtifactLock.parse(moved)


def test_certificates_chain_to_the_root_ca_with_loopback_sans(tmp_path: Path) -> None:
    pki = security.ensure_pki(tmp_path / "pki")
    assert pki.complete
    for key in (pki.ca_key, pki.node_key, pki.admin_key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        assert key.read_text().startswith("-----BEGIN PRIVATE KEY-----")  # PKCS#8
    for cert in (pki.node, pki.admin):
        verified = subprocess.run(
            ["openssl", "verify", "-CAfile", str(pki.ca), str(cert)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert verified.returncode == 0, verified.stderr
    text = subprocess.run(
        ["openssl", "x509", "-in", str(pki.node), "-noout", "-text"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "DNS:localhost" in text and "IP Address:127.0.0.1" in text
    admin_dn = "CN=mathsearch-admin,OU=local-secure-profile,O=mathsearch"
    assert security.subject_dn(pki.admin) == admin_dn
    before = pki.ca.read_bytes()
    assert security.ensure_pki(pki.folder).ca.read_bytes() == before  # generated once, kept


def test_security_settings_turn_tls_on_and_name_the_admin() -> None:
    lines = security.security_yml("CN=a,O=b", "CN=n,O=b")
    assert "plugins.security.ssl.http.enabled: true" in lines
    assert "plugins.security.authcz.admin_dn: ['CN=a,O=b']" in lines
    assert "plugins.security.nodes_dn: ['CN=n,O=b']" in lines
    assert "plugins.security.ssl.transport.pemkey_filepath: node-key.pem" in lines
    users = security.internal_users_yml("$2y$12$abc")
    assert 'hash: "$2y$12$abc"' in users and users.count("hash:") == 1
