"""TLS certificates, the admin password and the security plugin's configuration of the secure node.

Everything is generated once into the secure profile's state folder and kept:

``pki/``             root CA (``root-ca.pem`` + key), node certificate (SAN ``127.0.0.1`` and
                     ``localhost``, server + client auth) and admin certificate (client auth, the
                     ``plugins.security.authcz.admin_dn``), made with the ``openssl`` command;
                     private keys are mode 0600 and the folder 0700.
``admin-password``   the admin password, 0600, random (``secrets.token_urlsafe``) unless
                     ``MATHSEARCH_OPENSEARCH_PASSWORD`` or ``..._PASSWORD_FILE`` gives one.

The node's ``conf/`` gets copies of the node certificate, its key and the root CA (owned by the
node's user, key 0600), the plugin's default security configuration with ``internal_users.yml``
replaced by a single ``admin`` user whose bcrypt hash comes from the plugin's own
``tools/hash.sh -env`` (the password travels in the child's environment, never on a command line).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from mathsearch.core.errors import ConfigurationError, StackError

logger = logging.getLogger(__name__)

ADMIN_USER = "admin"
PASSWORD_FILE_NAME = "admin-password"
PLUGIN = "opensearch-security"
_HASH_ENV = "MATHSEARCH_HASH_INPUT"
_DAYS = "3650"

#: The subjects of the generated certificates (O and OU keep them apart from any real PKI).
CA_SUBJECT = "/O=mathsearch/OU=local-secure-profile/CN=mathsearch-root-ca"
NODE_SUBJECT = "/O=mathsearch/OU=local-secure-profile/CN=localhost"
ADMIN_SUBJECT = "/O=mathsearch/OU=local-secure-profile/CN=mathsearch-admin"

NODE_EXTENSIONS = (
    "basicConstraints=CA:FALSE\n"
    "keyUsage=critical,digitalSignature,keyEncipherment\n"
    "extendedKeyUsage=serverAuth,clientAuth\n"
    "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
)
ADMIN_EXTENSIONS = (
    "basicConstraints=CA:FALSE\n"
    "keyUsage=critical,digitalSignature,keyEncipherment\n"
    "extendedKeyUsage=clientAuth\n"
)


@dataclass(frozen=True)
class Pki:
    """The certificate files of the secure profile (see the module docstring)."""

    folder: Path

    @property
    def ca(self) -> Path:
        return self.folder / "root-ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.folder / "root-ca-key.pem"

    @property
    def node(self) -> Path:
        return self.folder / "node.pem"

    @property
    def node_key(self) -> Path:
        return self.folder / "node-key.pem"

    @property
    def admin(self) -> Path:
        return self.folder / "admin.pem"

    @property
    def admin_key(self) -> Path:
        return self.folder / "admin-key.pem"

    @property
    def complete(self) -> bool:
        files = (self.ca, self.ca_key, self.node, self.node_key, self.admin, self.admin_key)
        return all(path.is_file() for path in files)


@dataclass(frozen=True)
class AdminPassword:
    """The admin password and where it came from (``file`` is None for the env variable)."""

    value: str = field(repr=False)
    source: str
    file: Path | None


def _openssl(*args: str, cwd: Path) -> str:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise StackError("the openssl command is needed for the secure profile's certificates")
    result = subprocess.run(
        [openssl, *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120
    )
    if result.returncode != 0:
        raise StackError(f"openssl {args[0]} failed: {result.stderr.strip()[-500:]}")
    return result.stdout


def _signed(pki: Pki, name: str, subject: str, extensions: str) -> None:
    """A 2048-bit RSA key (PKCS#8, unencrypted) and a certificate signed by the root CA."""
    folder = pki.folder
    (folder / f"{name}.ext").write_text(extensions, encoding="utf-8")
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
             "-out", f"{name}-key.pem", cwd=folder)  # fmt: skip
    (folder / f"{name}-key.pem").chmod(0o600)
    _openssl("req", "-new", "-key", f"{name}-key.pem", "-subj", subject,
             "-out", f"{name}.csr", cwd=folder)  # fmt: skip
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", pki.ca.name, "-CAkey", pki.ca_key.name,
             "-set_serial", f"0x{secrets.token_hex(16)}", "-days", _DAYS, "-sha256",
             "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=folder)  # fmt: skip
    (folder / f"{name}.csr").unlink()
    (folder / f"{name}.ext").unlink()


def ensure_pki(folder: Path) -> Pki:
    """The root CA, node and admin certificates in ``folder``, generated on the first call."""
    pki = Pki(folder)
    if pki.complete:
        return pki
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    logger.info("generating a root CA, node and admin certificates in %s", folder)
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
             "-out", pki.ca_key.name, cwd=folder)  # fmt: skip
    pki.ca_key.chmod(0o600)
    _openssl("req", "-x509", "-new", "-key", pki.ca_key.name, "-subj", CA_SUBJECT, "-days", _DAYS,
             "-sha256", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", pki.ca.name,
             cwd=folder)  # fmt: skip
    _signed(pki, "node", NODE_SUBJECT, NODE_EXTENSIONS)
    _signed(pki, "admin", ADMIN_SUBJECT, ADMIN_EXTENSIONS)
    return pki


def subject_dn(certificate: Path) -> str:
    """The certificate's subject in RFC 2253 form, as the security plugin compares DNs."""
    out = _openssl("x509", "-in", str(certificate), "-noout", "-subject", "-nameopt", "RFC2253",
                   cwd=certificate.parent)  # fmt: skip
    return out.strip().removeprefix("subject=").strip()


def _write_private(path: Path, text: str) -> None:
    """Create ``path`` with mode 0600 before any byte of ``text`` is written."""
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)


def admin_password(state_dir: Path) -> AdminPassword:
    """The admin password: MATHSEARCH_OPENSEARCH_PASSWORD, ``..._PASSWORD_FILE`` or generated.

    Without either variable a random password is written once to ``state_dir/admin-password``
    (0600) and reused on later calls.
    """
    env = os.environ
    if env.get("MATHSEARCH_OPENSEARCH_PASSWORD_FILE"):
        path = Path(env["MATHSEARCH_OPENSEARCH_PASSWORD_FILE"])
        try:
            value = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigurationError(
                f"MATHSEARCH_OPENSEARCH_PASSWORD_FILE: cannot read {path}: {exc.strerror}"
            ) from exc
        source, file = "MATHSEARCH_OPENSEARCH_PASSWORD_FILE", path
    elif env.get("MATHSEARCH_OPENSEARCH_PASSWORD"):
        value, source, file = env["MATHSEARCH_OPENSEARCH_PASSWORD"], "environment", None
    else:
        path = state_dir / PASSWORD_FILE_NAME
        if not path.is_file():
            state_dir.mkdir(parents=True, exist_ok=True)
            _write_private(path, secrets.token_urlsafe(24) + "\n")
            logger.info("generated a random admin password into %s (mode 0600)", path)
        value, source, file = path.read_text(encoding="utf-8").strip(), "generated", path
    if len(value) < 8:
        raise ConfigurationError(f"the admin password from {source} is shorter than 8 characters")
    return AdminPassword(value, source, file)


def hash_password(home: Path, java_home: Path, password: AdminPassword) -> str:
    """The bcrypt hash of ``password`` by the plugin's ``tools/hash.sh`` (Java, no new package)."""
    script = home / "plugins" / PLUGIN / "tools" / "hash.sh"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "OPENSEARCH_JAVA_HOME": str(java_home),
        _HASH_ENV: password.value,
    }
    result = subprocess.run(
        ["bash", str(script), "-env", _HASH_ENV],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    hashes = [line for line in result.stdout.splitlines() if line.startswith("$2")]
    if result.returncode != 0 or not hashes:
        raise StackError(f"{script} failed (exit {result.returncode}): {result.stderr[-300:]}")
    return hashes[-1]


def internal_users_yml(bcrypt_hash: str) -> str:
    """The only internal user: ``admin`` (backend role ``admin`` -> role ``all_access``)."""
    return (
        "---\n"
        "_meta:\n"
        '  type: "internalusers"\n'
        "  config_version: 2\n"
        f"{ADMIN_USER}:\n"
        f'  hash: "{bcrypt_hash}"\n'
        "  reserved: true\n"
        '  backend_roles: ["admin"]\n'
        '  description: "mathsearch admin (password from the secure profile state folder or '
        'MATHSEARCH_OPENSEARCH_PASSWORD[_FILE])"\n'
    )


def security_yml(admin_dn: str, node_dn: str) -> tuple[str, ...]:
    """opensearch.yml lines: TLS on transport and HTTP, the admin and node DNs, basic auth."""
    lines = []
    for layer in ("transport", "http"):
        lines += [
            f"plugins.security.ssl.{layer}.pemcert_filepath: node.pem",
            f"plugins.security.ssl.{layer}.pemkey_filepath: node-key.pem",
            f"plugins.security.ssl.{layer}.pemtrustedcas_filepath: root-ca.pem",
        ]
    return (
        *lines,
        "plugins.security.ssl.transport.enforce_hostname_verification: false",
        "plugins.security.ssl.http.enabled: true",
        "plugins.security.allow_default_init_securityindex: true",
        f"plugins.security.authcz.admin_dn: ['{admin_dn}']",
        f"plugins.security.nodes_dn: ['{node_dn}']",
        "plugins.security.restapi.roles_enabled: ['all_access']",
        "plugins.security.audit.type: noop",
        "plugins.security.system_indices.enabled: true",
    )


def write_node_config(conf: Path, home: Path, pki: Pki, bcrypt_hash: str) -> None:
    """Certificates and the security plugin's configuration into the node's ``conf/``."""
    security = conf / "opensearch-security"
    security.mkdir(parents=True, exist_ok=True)
    for source in sorted((home / "config" / "opensearch-security").glob("*.yml")):
        if source.name != "internal_users.yml":
            shutil.copy2(source, security / source.name)
    _write_private(security / "internal_users.yml", internal_users_yml(bcrypt_hash))
    for source, name in ((pki.node, "node.pem"), (pki.ca, "root-ca.pem")):
        shutil.copy2(source, conf / name)
    _write_private(conf / "node-key.pem", pki.node_key.read_text(encoding="utf-8"))
