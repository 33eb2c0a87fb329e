"""The README's quick starts run (services): every command of its three quick-start ``bash``
blocks runs, in the README's order, as a subprocess against the real stack, as a user types it,
with these changes only:

- the names are this test's: ``papers/`` is a folder of real hep-th documents in the working
  directory, ``papers`` a library index of the same documents (title, body), every other index
  name is put under an index prefix of this test (``MATHSEARCH_INDEX_PREFIX``, so the defaults are
  too) and everything under it is dropped afterwards; the queues have a prefix of their own and
  the ports are free ones;
- the heavy commands get smaller sizes appended (the last value of an option wins), and Approach
  Zero is left out of the evaluation;
- a command that runs until it is stopped (``worker ... &``, ``serve``) starts in the background,
  is checked serving (its ``/metrics``, ``/health``, a library search over HTTP) and is stopped
  at the end;
- ``bench query`` times the bundled sample (a user's run embeds ~100k equations with four
  models); what needs ``../shared/data`` (``--held-out``, ``eval library``) uses the bundled
  sample or is skipped, with the reason printed, when the clone has no shared data beside it.

A quick-start command that has no rule here fails the test, so the README cannot gain a command
that no test runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import httpx
import pytest
from opensearchpy import OpenSearch

from mathsearch.core.paths import SHARED_DATA
from mathsearch.opensearch import OpenSearchSettings
from tests.workers.conftest import free_port

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCUMENTS = REPO / "tests" / "resources" / "library" / "hepth-documents.jsonl"
SAMPLE = str(resources.files("mathsearch.indexer").joinpath("resources/hepth2003-sample.txt"))
SECTIONS = ("the digital library", "the search engineer", "operations")
#: The paper whose equation the library searches look for, and that equation.
TARGET = "0301085"

COMMENT = re.compile(r"\s#(?:\s|$)")
ENV = re.compile(r"^((?:[A-Z_][A-Z0-9_]*=\S*\s+)+)")
CONTINUATION = re.compile(r"\s*\\\n\s*")
BLOCK = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass
class Command:
    """One line of a quick start: its environment assignments, its argv, whether it ends in &."""

    line: str
    env: dict[str, str]
    argv: list[str]
    background: bool = False


def quick_start(title: str) -> list[Command]:
    """The commands of the first ``bash`` block of the README's section ``Quick start: title``."""
    text = README.read_text(encoding="utf-8")
    sections = re.split(r"(?=^## )", text, flags=re.MULTILINE)
    (section,) = [s for s in sections if s.lower().startswith(f"## quick start: {title}")]
    block = BLOCK.search(section)
    assert block, f"the quick start for {title} has no bash block"
    commands = []
    for raw in CONTINUATION.sub(" ", block.group(1)).splitlines():
        line = COMMENT.split(raw, 1)[0].strip()
        if not line:
            continue
        env: dict[str, str] = {}
        if match := ENV.match(line):
            env = dict(pair.split("=", 1) for pair in match.group(1).split())
            line = line[match.end() :]
        background = line.endswith("&")
        argv = shlex.split(line.rstrip("&").strip())
        assert argv[0] == "mathsearch", f"not a mathsearch command: {raw}"
        commands.append(Command(raw.strip(), env, argv, background))
    return commands


def _wait_for(url: str, proc: subprocess.Popen, log: Path, timeout: float = 180) -> None:
    """Until ``url`` answers 200; fails with the log when the process exits or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            pytest.fail(f"{proc.args} exited with {proc.returncode}:\n{_tail(log)}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        if time.monotonic() > deadline:
            pytest.fail(f"{url} never answered:\n{_tail(log)}")
        time.sleep(0.5)


def _tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


@dataclass
class World:
    """What the quick starts run in: the working folder, names, environment, background work."""

    client: OpenSearch
    cwd: Path
    prefix: str
    library: str
    env: dict[str, str]
    query: str
    background: list[tuple[subprocess.Popen, Path]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def name(self, token: str) -> str:
        """The test's name for an index name of the README."""
        if token == "papers":
            return self.library
        if token.startswith("papers-"):
            return f"{self.prefix}-{token}"
        if token.startswith("mathsearch-"):
            return f"{self.prefix}-{token.removeprefix('mathsearch-')}"
        return token

    def run(self, cmd: Command, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """``argv`` (the README's, adapted) in a subprocess; fails with its output unless it
        exits 0."""
        done = subprocess.run(
            [sys.executable, "-m", "mathsearch", *argv[1:]], check=False, cwd=self.cwd,
            env={**self.env, **cmd.env}, capture_output=True, text=True, timeout=1200,
        )  # fmt: skip
        if done.returncode != 0:
            pytest.fail(
                f"README: {cmd.line}\nran as: {shlex.join(argv)}\nexit {done.returncode}\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        return done

    def start(self, cmd: Command, argv: list[str]) -> tuple[subprocess.Popen, Path]:
        """``argv`` in the background, in its own process group; stopped by :meth:`stop_all`."""
        log = self.cwd / f"background-{len(self.background)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "mathsearch", *argv[1:]], cwd=self.cwd,
                env={**self.env, **cmd.env}, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.background.append((proc, log))
        return proc, log

    def stop_all(self) -> None:
        for proc, _ in reversed(self.background):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, _ in self.background:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)


def _adapt(world: World, cmd: Command) -> list[str]:
    """The README's argv with the test's names (options' values and positional names)."""
    return [cmd.argv[0], *(world.name(token) for token in cmd.argv[1:])]


def _worker(world: World, cmd: Command) -> None:
    port = free_port()
    argv = [*_adapt(world, cmd), "--concurrency", "1", "--metrics-port", str(port)]
    proc, log = world.start(cmd, argv)
    if cmd.env.get("MATHSEARCH_EMBED_DEVICE") == "cuda":
        # a GPU worker: it serves where CUDA loads; elsewhere it must refuse in one clear line
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=60)
        if proc.poll() is not None:
            out = _tail(log)
            assert proc.returncode != 0 and "CUDA" in out and "Traceback" not in out, out
            return
    _wait_for(f"http://127.0.0.1:{port}/metrics", proc, log)
    deadline = time.monotonic() + 180  # consuming: Celery's "celery@host ready."
    while not re.search(r"@\S+ ready\.", _tail(log, 100_000)):
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the worker never became ready:\n{_tail(log)}")
        time.sleep(0.5)


def _index(world: World, cmd: Command) -> None:
    done = world.run(cmd, _adapt(world, cmd))
    assert re.search(r"\bindexed [1-9]\d* of", done.stdout + done.stderr), done.stdout


def _search(world: World, cmd: Command) -> None:
    argv = _adapt(world, cmd)
    if "--index" not in argv:
        argv += ["--index", world.name("papers-equations")]
    done = world.run(cmd, argv)
    assert done.stdout.strip() and "no results" not in done.stdout, done.stdout


def _serve(world: World, cmd: Command) -> None:
    port = free_port()
    argv = [*_adapt(world, cmd), "--host", "127.0.0.1", "--port", str(port)]
    if "--index" not in argv:
        argv += ["--index", world.name("papers-equations")]
    proc, log = world.start(cmd, argv)
    base = f"http://127.0.0.1:{port}"
    _wait_for(f"{base}/health", proc, log)
    assert httpx.get(f"{base}/metrics", timeout=10).status_code == 200
    if "--library" in argv:
        body = {"latex": world.query, "index": world.library, "k": 5}
        response = httpx.post(f"{base}/search", json=body, timeout=120)
        assert response.status_code == 200, response.text
        hits = response.json()["hits"]
        assert hits and hits[0]["doc_id"] == TARGET, hits[:2]


def _eval_retrieval(world: World, cmd: Command) -> None:
    argv = _adapt(world, cmd)
    if not (SHARED_DATA / "hepth2003").is_dir() and "--held-out" in argv:
        argv = [a for a in argv if a != "--held-out"] + ["--source", SAMPLE]
        world.skipped.append(f"{cmd.line}: --held-out replaced by the bundled sample")
    argv += ["--papers", "4", "--topics", "24", "--no-pya0", "--no-progress"]
    argv += ["--grid", "mode=fusion", "alpha=0.3,0.5"]
    world.run(cmd, argv)
    out = world.cwd / argv[argv.index("-o") + 1]
    assert (out / "topics-tune.jsonl").is_file() and (out / "report.md").is_file()


def _tune(world: World, cmd: Command) -> None:
    argv = [*_adapt(world, cmd), "--grid", "mode=fusion", "alpha=0.3,0.5"]
    world.run(cmd, argv)
    assert (world.cwd / argv[argv.index("-o") + 1] / "best_profile.json").is_file()


def _eval_library(world: World, cmd: Command) -> None:
    if not (SHARED_DATA / "hepth2003").is_dir():
        world.skipped.append(f"{cmd.line}: needs ../shared/data (the held-out paper split)")
        return
    argv = [*_adapt(world, cmd), "--documents", "papers", "--per-paper", "4", "--no-progress"]
    argv += ["--json"]  # one of the twelve papers is held out: four of its equations are topics
    report = json.loads(world.run(cmd, argv).stdout)
    assert report["topics"] > 0, report


def _bench_query(world: World, cmd: Command) -> None:
    # the bundled sample as the corpus (a user's run embeds ~100k equations with four models)
    argv = [*_adapt(world, cmd), "--sizes", "100", "--queries", "5", "--warmup", "1"]
    argv += ["--held-out-queries", "40", "--no-progress", SAMPLE]
    done = world.run(cmd, argv)
    assert re.search(r"^\s*default\b", done.stdout, re.MULTILINE), done.stdout


def _failures(world: World, cmd: Command) -> None:
    world.run(cmd, _adapt(world, cmd))


def _drop(world: World, cmd: Command) -> None:
    argv = _adapt(world, cmd)
    world.run(cmd, argv)
    assert not world.client.indices.exists_alias(name=argv[2]), f"{argv[2]} is still there"


def _stack_status(world: World, cmd: Command) -> None:
    world.run(cmd, _adapt(world, cmd))


#: The rule of each command, by its first words.
RULES: dict[tuple[str, ...], Callable[[World, Command], None]] = {
    ("worker",): _worker,
    ("index",): _index,
    ("search",): _search,
    ("serve",): _serve,
    ("eval", "retrieval"): _eval_retrieval,
    ("tune",): _tune,
    ("eval", "library"): _eval_library,
    ("bench", "query"): _bench_query,
    ("failures",): _failures,
    ("drop",): _drop,
    ("stack", "status"): _stack_status,
}


def rule_of(cmd: Command) -> Callable[[World, Command], None]:
    for words in sorted(RULES, key=len, reverse=True):
        if tuple(cmd.argv[1 : 1 + len(words)]) == words:
            return RULES[words]
    pytest.fail(f"README quick start: no rule runs `{cmd.line}` - add one to {__file__}")


def test_every_quick_start_command_has_a_rule() -> None:
    commands = [cmd for title in SECTIONS for cmd in quick_start(title)]
    assert len(commands) >= 10
    for cmd in commands:
        assert rule_of(cmd)


@pytest.fixture
def world(client: OpenSearch, settings: OpenSearchSettings, tmp_path: Path) -> Iterator[World]:
    tag = uuid.uuid4().hex[:8]
    prefix = f"{settings.index_prefix}-test-qs-{tag}"
    library = f"{prefix}-papers"
    papers = tmp_path / "papers"
    papers.mkdir()
    client.indices.create(index=library, body={
        "settings": {"number_of_replicas": 0},
        "mappings": {"properties": {"title": {"type": "text"}, "body": {"type": "text"}}},
    })  # fmt: skip
    for line in DOCUMENTS.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        (papers / f"{doc['id']}.tex").write_text(doc["body"], encoding="utf-8")
        client.index(index=library, id=doc["id"], body={"title": doc["title"], "body": doc["body"]})
    client.indices.refresh(index=library)
    env = dict(os.environ, MATHSEARCH_INDEX_PREFIX=prefix, MATHSEARCH_METRICS_PORT="0")
    env["MATHSEARCH_QUEUE_PREFIX"] = f"qs{tag}-"
    state = World(client, tmp_path, prefix, library, env, query="")
    try:
        yield state
    finally:
        state.stop_all()
        for name in client.indices.get(index=f"{prefix}*", expand_wildcards="all"):
            client.indices.delete(index=name, ignore_unavailable=True)
        templates = client.indices.get_index_template(name=f"{prefix}*", ignore=404)
        for entry in templates.get("index_templates", []):
            client.indices.delete_index_template(name=entry["name"], ignore=404)


def _target_equation(world: World) -> str:
    """The longest of the target paper's first ten equations, from the equation index."""
    alias = world.name("papers-eq")
    world.client.indices.refresh(index=alias)
    hits = world.client.search(index=alias, body={
        "size": 10, "query": {"term": {"doc_id": TARGET}}, "sort": [{"position": "asc"}],
    })["hits"]["hits"]  # fmt: skip
    assert hits, f"no equation of {TARGET} in {alias}"
    return max((h["_source"]["latex"] for h in hits), key=len)


@pytest.mark.services
def test_the_quick_starts_run_as_written(world: World) -> None:
    ran = []
    for title in SECTIONS:
        for cmd in quick_start(title):
            run = rule_of(cmd)
            if run is _serve and "--library" in cmd.argv and not world.query:
                world.query = _target_equation(world)
            run(world, cmd)
            ran.append(cmd.line)
    print("ran:", *ran, "adapted or skipped:", *world.skipped, sep="\n  ")
    assert len(ran) >= 10
