"""Settings of the opensearch package, read from ``MATHSEARCH_*`` environment variables.

=================================  ==========================================  =====================
variable                           meaning                                     default
=================================  ==========================================  =====================
MATHSEARCH_OPENSEARCH_URL          cluster URL(s), comma-separated            http://127.0.0.1:9200
MATHSEARCH_OPENSEARCH_USER         basic-auth user                             (none)
MATHSEARCH_OPENSEARCH_PASSWORD     basic-auth password                         (none)
MATHSEARCH_OPENSEARCH_PASSWORD_FILE  file holding the password (preferred)     (none)
MATHSEARCH_OPENSEARCH_CA_FILE      PEM file of the CA that signed the cluster  (system CAs)
MATHSEARCH_OPENSEARCH_VERIFY_CERTS verify TLS certificates (1/0)               1
MATHSEARCH_OPENSEARCH_TIMEOUT      request timeout, seconds                    30
MATHSEARCH_INDEX_PREFIX            prefix of every index mathsearch creates    mathsearch
MATHSEARCH_CACHE_DIR               downloads, assembled OpenSearch, venv       see below
MATHSEARCH_STATE_DIR               local stack: node data, logs, pid files     see below
MATHSEARCH_OPENSEARCH_VERSION      OpenSearch version `stack up` builds        the default lock's
                                   (one with a lock: 2.19.1, 3.6.0)            (2.19.1)
MATHSEARCH_JAVA_HOME               JDK for the local node                      first JDK the
                                                                               lock allows (2.x:
                                                                               11-21, 3.x: 21-25)
MATHSEARCH_OPENSEARCH_HEAP         heap of each local node                     512m
MATHSEARCH_STACK_USER              system user the local node runs as (root)   mathsearch
MATHSEARCH_STACK_TIMEOUT           seconds to wait for a local node to start   240
MATHSEARCH_INDEX_SHARDS            primary shards of a new equation index      1
MATHSEARCH_INDEX_REPLICAS          replicas of a new equation index            0
MATHSEARCH_INDEX_CODEC             stored-fields codec of a new equation       default
                                   index: default (LZ4) or best_compression
                                   (DEFLATE; smaller, slower to fetch)
MATHSEARCH_HNSW_M                  HNSW graph degree (lucene ``m``)            16
MATHSEARCH_HNSW_EF_CONSTRUCTION    HNSW ``ef_construction``                    128
MATHSEARCH_BULK_CHUNK_DOCS         actions per bulk request                    500
MATHSEARCH_BULK_CHUNK_BYTES        bytes per bulk request                      10485760
MATHSEARCH_BULK_MAX_RETRIES        retries of a 429 / 5xx / unreachable write  8
MATHSEARCH_BULK_BACKOFF            first retry delay, seconds (doubles)        0.5
MATHSEARCH_BULK_MAX_BACKOFF        longest retry delay, seconds                30
MATHSEARCH_REFRESH                 after writing: false, wait_for, true, end   end
MATHSEARCH_SERVE_HOST              address ``mathsearch serve`` listens on     127.0.0.1
MATHSEARCH_SERVE_PORT              its port                                    8080
MATHSEARCH_SERVE_MAX_BODY          largest request body, bytes                 16384
MATHSEARCH_SERVE_MAX_LATEX         longest query LaTeX / words, characters     2000
MATHSEARCH_SERVE_MAX_K             most results one search may ask for         100
MATHSEARCH_SERVE_RATE              requests per second per client (0: off)     10
MATHSEARCH_SERVE_BURST             requests a client may send at once          20
MATHSEARCH_SERVE_MAX_INFLIGHT      API requests served at once (more wait)     8
MATHSEARCH_SERVE_QUEUE_TIMEOUT     seconds one waits for a slot, then 503      1.0
MATHSEARCH_SERVE_API_KEYS_FILE     API keys, one a line (#: comment); auth on  (none: no auth)
MATHSEARCH_SERVE_API_KEY           one API key (auth on), beside the file      (none)
MATHSEARCH_SERVE_WORKERS           server processes (``auto``: one per core)   1
MATHSEARCH_SERVE_LIBRARIES         library indexes POST /search may name       (none)
MATHSEARCH_RERANK_CACHE            (encoder, equation) vectors the second      50000
                                   stage keeps per searcher (0: none)
=================================  ==========================================  =====================

The cache and state folders default to ``/var/cache/mathsearch`` and ``/var/lib/mathsearch``
when run as root (the node's non-root user must be able to read them) and to
``$XDG_CACHE_HOME/mathsearch`` and ``$XDG_STATE_HOME/mathsearch`` otherwise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from urllib.parse import urlsplit

from mathsearch.core.env import (
    cache_dir_from_env,
    default_cache_dir,
    default_state_dir,
)
from mathsearch.core.env import env_bool as _env_bool
from mathsearch.core.env import env_float as _env_float
from mathsearch.core.env import env_int as _env_int
from mathsearch.core.errors import ConfigurationError
from mathsearch.core.redact import redact_url

__all__ = [
    "REFRESH_MODES",
    "OpenSearchSettings",
    "cache_dir_from_env",
    "default_cache_dir",
    "default_state_dir",
    "parse_serve_workers",
]


#: Values of ``MATHSEARCH_REFRESH``: per bulk request (``false`` / ``wait_for`` / ``true``) or
#: one refresh when the writer finishes (``end``).
REFRESH_MODES = ("false", "wait_for", "true", "end")
#: Stored-fields codecs every OpenSearch 2.x / 3.x node has (Lucene's own).
INDEX_CODECS = ("default", "best_compression")
#: Values of ``MATHSEARCH_VECTOR_SOURCE``: ``derived`` (k-NN's derived source: vectors kept only
#: in the vector files and put back into ``_source`` when read) or ``stored`` (in ``_source`` too).
VECTOR_SOURCES = ("derived", "stored")


def parse_serve_workers(value: str | None, source: str = "MATHSEARCH_SERVE_WORKERS") -> int:
    """``MATHSEARCH_SERVE_WORKERS`` (or ``source``): a count of at least 1, or ``auto`` (one
    per core); unset is 1."""
    if value is None or not value.strip():
        return 1
    if value.strip().lower() == "auto":
        return max(1, os.cpu_count() or 1)
    try:
        workers = int(value)
    except ValueError:
        workers = 0
    if workers < 1:
        raise ConfigurationError(f"{source}={value!r} must be a count of at least 1 or auto")
    return workers


@dataclass(frozen=True)
class OpenSearchSettings:
    """Connection to the cluster and the local stack's layout (see the module docstring)."""

    url: str = "http://127.0.0.1:9200"
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: Path | None = None
    verify_certs: bool = True
    timeout: float = 30.0
    index_prefix: str = "mathsearch"
    cache_dir: Path = field(default_factory=default_cache_dir)
    state_dir: Path = field(default_factory=default_state_dir)
    java_home: Path | None = None
    opensearch_version: str | None = None
    heap: str = "512m"
    stack_user: str = "mathsearch"
    stack_timeout: float = 240.0
    shards: int = 1
    replicas: int = 0
    index_codec: str = "default"
    vector_source: str = "derived"
    hnsw_m: int = 16
    hnsw_ef_construction: int = 128
    bulk_chunk_docs: int = 500
    bulk_chunk_bytes: int = 10 * 1024 * 1024
    bulk_max_retries: int = 8
    bulk_backoff: float = 0.5
    bulk_max_backoff: float = 30.0
    refresh: str = "end"
    serve_host: str = "127.0.0.1"
    serve_port: int = 8080
    serve_max_body: int = 16384
    serve_max_latex: int = 2000
    serve_max_k: int = 100
    serve_rate: float = 10.0
    serve_burst: int = 20
    serve_max_inflight: int = 8
    serve_queue_timeout: float = 1.0
    serve_api_keys_file: Path | None = None
    serve_api_key: str | None = field(default=None, repr=False)
    serve_workers: int = 1
    #: library indexes (enriched with ``math.*``) that ``POST /search`` may name beside the
    #: served equation index (``MATHSEARCH_SERVE_LIBRARIES``, comma-separated; ``serve --library``)
    serve_libraries: tuple[str, ...] = ()
    #: (encoder, equation) vectors a searcher's second stage keeps (``window_rerank``)
    rerank_cache: int = 50_000

    def __repr__(self) -> str:
        """The generated repr, with ``password`` left out and any ``user:pass@`` in URLs masked."""
        shown = (f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        return f"OpenSearchSettings({', '.join(shown)})".replace(
            repr(self.url), repr(redact_url(self.url)), 1
        )

    @classmethod
    def from_env(cls) -> OpenSearchSettings:
        """Read every ``MATHSEARCH_*`` variable of the module docstring."""
        env = os.environ
        password = env.get("MATHSEARCH_OPENSEARCH_PASSWORD") or None
        password_file = env.get("MATHSEARCH_OPENSEARCH_PASSWORD_FILE")
        if password_file:
            try:
                password = Path(password_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigurationError(
                    f"MATHSEARCH_OPENSEARCH_PASSWORD_FILE: cannot read {password_file}: "
                    f"{exc.strerror}"
                ) from exc
        ca_file = env.get("MATHSEARCH_OPENSEARCH_CA_FILE")
        if ca_file and not Path(ca_file).is_file():
            raise ConfigurationError(f"MATHSEARCH_OPENSEARCH_CA_FILE: no such file {ca_file}")
        java_home = env.get("MATHSEARCH_JAVA_HOME")
        settings = cls(
            url=env.get("MATHSEARCH_OPENSEARCH_URL") or cls.url,
            user=env.get("MATHSEARCH_OPENSEARCH_USER") or None,
            password=password,
            ca_file=Path(ca_file) if ca_file else None,
            verify_certs=_env_bool("MATHSEARCH_OPENSEARCH_VERIFY_CERTS", True),
            timeout=_env_float("MATHSEARCH_OPENSEARCH_TIMEOUT", cls.timeout),
            index_prefix=env.get("MATHSEARCH_INDEX_PREFIX") or cls.index_prefix,
            cache_dir=cache_dir_from_env(),
            state_dir=Path(env["MATHSEARCH_STATE_DIR"])
            if env.get("MATHSEARCH_STATE_DIR")
            else default_state_dir(),
            java_home=Path(java_home) if java_home else None,
            opensearch_version=env.get("MATHSEARCH_OPENSEARCH_VERSION") or None,
            heap=env.get("MATHSEARCH_OPENSEARCH_HEAP") or cls.heap,
            stack_user=env.get("MATHSEARCH_STACK_USER") or cls.stack_user,
            stack_timeout=_env_float("MATHSEARCH_STACK_TIMEOUT", cls.stack_timeout),
            shards=_env_int("MATHSEARCH_INDEX_SHARDS", cls.shards, minimum=1),
            replicas=_env_int("MATHSEARCH_INDEX_REPLICAS", cls.replicas),
            index_codec=env.get("MATHSEARCH_INDEX_CODEC") or cls.index_codec,
            vector_source=env.get("MATHSEARCH_VECTOR_SOURCE") or cls.vector_source,
            hnsw_m=_env_int("MATHSEARCH_HNSW_M", cls.hnsw_m, minimum=2),
            hnsw_ef_construction=_env_int(
                "MATHSEARCH_HNSW_EF_CONSTRUCTION", cls.hnsw_ef_construction, minimum=2
            ),
            bulk_chunk_docs=_env_int("MATHSEARCH_BULK_CHUNK_DOCS", cls.bulk_chunk_docs, minimum=1),
            bulk_chunk_bytes=_env_int(
                "MATHSEARCH_BULK_CHUNK_BYTES", cls.bulk_chunk_bytes, minimum=1024
            ),
            bulk_max_retries=_env_int("MATHSEARCH_BULK_MAX_RETRIES", cls.bulk_max_retries),
            bulk_backoff=_env_float("MATHSEARCH_BULK_BACKOFF", cls.bulk_backoff),
            bulk_max_backoff=_env_float("MATHSEARCH_BULK_MAX_BACKOFF", cls.bulk_max_backoff),
            refresh=env.get("MATHSEARCH_REFRESH") or cls.refresh,
            serve_host=env.get("MATHSEARCH_SERVE_HOST") or cls.serve_host,
            serve_port=_env_int("MATHSEARCH_SERVE_PORT", cls.serve_port),
            serve_max_body=_env_int("MATHSEARCH_SERVE_MAX_BODY", cls.serve_max_body, minimum=256),
            serve_max_latex=_env_int("MATHSEARCH_SERVE_MAX_LATEX", cls.serve_max_latex, minimum=1),
            serve_max_k=_env_int("MATHSEARCH_SERVE_MAX_K", cls.serve_max_k, minimum=1),
            serve_rate=_env_float("MATHSEARCH_SERVE_RATE", cls.serve_rate),
            serve_burst=_env_int("MATHSEARCH_SERVE_BURST", cls.serve_burst, minimum=1),
            serve_max_inflight=_env_int(
                "MATHSEARCH_SERVE_MAX_INFLIGHT", cls.serve_max_inflight, minimum=1
            ),
            serve_queue_timeout=_env_float(
                "MATHSEARCH_SERVE_QUEUE_TIMEOUT", cls.serve_queue_timeout
            ),
            serve_api_keys_file=Path(env["MATHSEARCH_SERVE_API_KEYS_FILE"])
            if env.get("MATHSEARCH_SERVE_API_KEYS_FILE")
            else None,
            serve_api_key=env.get("MATHSEARCH_SERVE_API_KEY") or None,
            serve_workers=parse_serve_workers(env.get("MATHSEARCH_SERVE_WORKERS")),
            serve_libraries=tuple(
                name.strip()
                for name in env.get("MATHSEARCH_SERVE_LIBRARIES", "").split(",")
                if name.strip()
            ),
            rerank_cache=_env_int("MATHSEARCH_RERANK_CACHE", cls.rerank_cache),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        """Raise :class:`ConfigurationError` for a URL, refresh mode, codec or heap that cannot
        work."""
        for url in self.urls:
            parts = urlsplit(url)
            if parts.scheme not in {"http", "https"} or not parts.hostname:
                raise ConfigurationError(
                    f"MATHSEARCH_OPENSEARCH_URL={self.url!r} must look like http(s)://host:port "
                    "(several nodes: comma-separated)"
                )
        if self.refresh not in REFRESH_MODES:
            raise ConfigurationError(
                f"MATHSEARCH_REFRESH={self.refresh!r} must be one of {', '.join(REFRESH_MODES)}"
            )
        if self.index_codec not in INDEX_CODECS:
            raise ConfigurationError(
                f"MATHSEARCH_INDEX_CODEC must be one of {', '.join(INDEX_CODECS)}, "
                f"not {self.index_codec!r}"
            )
        if self.vector_source not in VECTOR_SOURCES:
            raise ConfigurationError(
                f"MATHSEARCH_VECTOR_SOURCE must be one of {', '.join(VECTOR_SOURCES)}, "
                f"not {self.vector_source!r}"
            )
        if not self.heap[:-1].isdigit() or self.heap[-1].lower() not in {"m", "g"}:
            raise ConfigurationError(
                f"MATHSEARCH_OPENSEARCH_HEAP={self.heap!r} must look like 512m or 1g"
            )

    @property
    def urls(self) -> list[str]:
        """Every node URL; the client spreads requests over them and skips dead ones."""
        return [url.strip() for url in self.url.split(",") if url.strip()]

    @property
    def host(self) -> str:
        return urlsplit(self.urls[0]).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        """Port of the first URL: the local stack's base port."""
        parts = urlsplit(self.urls[0])
        return parts.port or (443 if parts.scheme == "https" else 9200)

    @property
    def is_local(self) -> bool:
        """True when the first URL is plain http on loopback, so that `stack up` may manage it."""
        first = urlsplit(self.urls[0])
        return first.scheme == "http" and self.host in {"127.0.0.1", "localhost", "::1"}
