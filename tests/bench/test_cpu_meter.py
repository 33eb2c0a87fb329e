"""The CPU meter of ``bench serve``: the arithmetic (pure) and the /proc readings of real
processes (this one, a child it starts, the stack's OpenSearch node)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from mathsearch.bench.cpu_meter import (
    CpuMeter,
    cpu_per_query,
    cpu_seconds,
    is_loopback,
    node_is_local,
    opensearch_pids,
    process_tree,
)
from mathsearch.cli.bench_serve import cpu_brief, cpu_lines
from mathsearch.opensearch import OpenSearchSettings

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_cpu_per_query_splits_the_cost_by_group_and_sets_the_ceiling() -> None:
    before = {"server": 2.0, "opensearch": 10.0, "load": 1.0}
    after = {"server": 10.0, "opensearch": 18.0, "load": 2.2}
    cpu = cpu_per_query(before, after, answered=400, wall_s=10.0, cores=2)
    assert cpu == {
        "ms": {"server": 20.0, "opensearch": 20.0, "load": 3.0},
        "busy": round((8 + 8 + 1.2) / 20, 3),
        "ceiling_per_s": 50.0,  # 2 cores x 1000 ms / 40 ms: the load generator is not counted
    }
    lines = cpu_lines(cpu, 2)
    assert lines[0].startswith("cpu      a query: server 20 ms + OpenSearch 20 ms")
    assert "50 queries/s" in lines[1]
    assert cpu_brief(cpu) == ", cores 86% busy"


def test_unmeasured_or_restarted_groups_are_left_out() -> None:
    # a server given by --url (None) and a node restarted during the run (time went back)
    cpu = cpu_per_query(
        {"server": None, "opensearch": 50.0, "load": 1.0},
        {"server": None, "opensearch": 3.0, "load": 1.5},
        answered=100, wall_s=5.0, cores=4,
    )  # fmt: skip
    assert cpu is not None
    assert cpu["ms"] == {"server": None, "opensearch": None, "load": 5.0}
    assert cpu["ceiling_per_s"] is None
    assert not any(line.startswith("ceiling") for line in cpu_lines(cpu, 4))
    assert cpu_per_query({"load": 1.0}, {"load": 2.0}, answered=0, wall_s=1.0, cores=1) is None
    nothing = dict.fromkeys(("server", "opensearch", "load"))
    assert cpu_per_query(nothing, nothing, answered=10, wall_s=1.0, cores=1) is None
    assert cpu_lines(None, 2) == []


def test_loopback_nodes_are_local_and_remote_ones_are_not() -> None:
    assert is_loopback("http://127.0.0.1:9200") and is_loopback("https://localhost:9201")
    assert not is_loopback("https://search.example.org:9200")
    local = OpenSearchSettings(url="http://127.0.0.1:9200")
    assert node_is_local(local)
    assert not node_is_local(OpenSearchSettings(url="https://search.example.org:9200"))


@linux
def test_a_spinning_child_process_is_counted_in_its_parents_tree() -> None:
    spin = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"
    wrapper = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {spin!r}])\n"
    parent = subprocess.Popen([sys.executable, "-c", wrapper])
    try:
        meter = CpuMeter(parent.pid, opensearch=False)
        tree: list[int] = []
        deadline = time.monotonic() + 10
        while len(tree) < 2 and time.monotonic() < deadline:  # the child has started
            tree = process_tree(parent.pid)
        assert tree[0] == parent.pid and len(tree) == 2
        first = meter.sample()
        time.sleep(0.3)
        later = meter.sample()
        assert first["opensearch"] is None and first["server"] is not None
        assert later["server"] is not None and later["server"] > first["server"]
    finally:
        parent.wait(timeout=30)
    assert cpu_seconds(parent.pid) is None  # gone: nothing to read


@linux
def test_this_process_cpu_seconds_grow_with_work() -> None:
    import os

    start = cpu_seconds(os.getpid())
    end_at = time.process_time() + 0.2
    while time.process_time() < end_at:
        pass
    assert start is not None and (cpu_seconds(os.getpid()) or 0.0) >= start + 0.15


@linux
@pytest.mark.services
def test_the_stacks_node_is_found_and_its_cpu_read(client: object) -> None:
    pids = opensearch_pids()
    assert pids, "the stack's OpenSearch node runs on this machine"
    sample = CpuMeter(None, opensearch=True).sample()
    assert sample["server"] is None and (sample["opensearch"] or 0.0) > 0.0
