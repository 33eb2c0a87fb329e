"""Load shedding of ``mathsearch serve``: the in-flight bound (pure, tiny timeouts), overloaded
clusters as 503 + Retry-After, and a real served process driven past its bound."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConnectionTimeout, TransportError

from mathsearch.bench.serve import ServeProcess, serve_env
from mathsearch.core.errors import QueryError
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.load_shedding import (
    ClusterBusyError,
    InflightLimiter,
    cluster_busy_reason,
)
from mathsearch.opensearch.search_calls import SearchCalls
from mathsearch.serve.http_api import create_app

REJECTED = {
    "error": {
        "root_cause": [{"type": "es_rejected_execution_exception", "reason": "queue full"}],
        "type": "search_phase_execution_exception",
    },
    "status": 429,
}


def test_slots_wait_in_order_shed_beyond_the_queue_and_time_out() -> None:
    async def scenario() -> dict[str, Any]:
        slots = InflightLimiter(limit=1, timeout=5.0, max_waiting=1)
        assert await slots.acquire()  # the only slot
        waiter = asyncio.ensure_future(slots.acquire())
        await asyncio.sleep(0)
        assert slots.waiting == 1
        assert not await slots.acquire()  # the queue is full: shed at once
        slots.release()  # the slot passes to the waiter, not back to the pool
        assert await waiter and slots.in_flight == 1 and slots.waiting == 0
        slots.release()
        return slots.snapshot()

    assert asyncio.run(scenario()) == {
        "limit": 1, "in_flight": 0, "waiting": 0, "shed": 1, "timed_out": 0,
    }  # fmt: skip


def test_a_wait_that_runs_out_is_refused_and_leaves_no_slot_behind() -> None:
    async def scenario() -> InflightLimiter:
        slots = InflightLimiter(limit=2, timeout=0.01)
        assert await slots.acquire() and await slots.acquire()
        assert not await slots.acquire()  # waited 10 ms in vain
        slots.release()
        assert await slots.acquire()  # the freed slot, nobody queued before it
        slots.release()
        slots.release()
        return slots

    slots = asyncio.run(scenario())
    assert (slots.in_flight, slots.waiting, slots.timed_out) == (0, 0, 1)
    assert InflightLimiter(limit=1, timeout=0).try_acquire()
    with pytest.raises(ValueError, match="at least 1"):
        InflightLimiter(limit=0, timeout=1)


def test_one_limiter_serves_several_event_loops() -> None:
    slots = InflightLimiter(limit=1, timeout=1.0)

    async def hold_and_release() -> bool:
        granted = await slots.acquire()
        slots.release()
        return granted

    assert all(asyncio.run(hold_and_release()) for _ in range(3))  # a new loop each time
    assert slots.in_flight == 0


@pytest.mark.parametrize(
    ("status", "info", "busy"),
    [
        (429, REJECTED, True),
        (503, {"error": "unavailable"}, True),
        (500, {"error": {"type": "x", "caused_by": {"type": "circuit_breaking_exception"}}}, True),
        (400, {"error": {"type": "parsing_exception", "reason": "bad"}}, False),
        (500, {"error": {"type": "script_exception"}}, False),
        (404, "N/A", False),
    ],
)
def test_overloaded_cluster_answers_are_recognised(status: int, info: Any, busy: bool) -> None:
    assert (cluster_busy_reason(status, info) is not None) is busy


class _Calls(SearchCalls):
    def __init__(self) -> None:
        self.index = "eq"


def _raises(exc: Exception) -> Any:
    def call() -> Any:
        raise exc

    return call


def test_search_calls_turn_overload_and_timeouts_into_cluster_busy() -> None:
    calls = _Calls()
    with pytest.raises(ClusterBusyError, match="overloaded"):
        calls.call(_raises(TransportError(429, "rejected", REJECTED)))
    with pytest.raises(ClusterBusyError, match="timed out"):
        calls.call(_raises(ConnectionTimeout("TIMEOUT", "read timed out", None)))
    with pytest.raises(QueryError, match="refused"):
        calls.call(_raises(TransportError(400, "parsing_exception", {"error": "bad"})))


class _Overloaded:
    """The real client, except that every search is refused as OpenSearch does when its search
    queue is full."""

    def __init__(self, inner: OpenSearch) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def search(self, **_: Any) -> Any:
        raise TransportError(429, "search_phase_execution_exception", REJECTED)

    def msearch(self, **_: Any) -> Any:
        return {"responses": [{"status": 429, **REJECTED}]}


@pytest.mark.services
@pytest.mark.parametrize("mode", ["bm25", "rrf"])
def test_an_overloaded_cluster_is_a_503_with_retry_after_not_a_500(
    settings: OpenSearchSettings, client: OpenSearch, equation_alias: str, mode: str
) -> None:
    app = create_app(replace(settings, serve_rate=0), equation_alias, client=_Overloaded(client))  # type: ignore[arg-type]
    response = TestClient(app).post("/search", json={"latex": "x^2", "mode": mode})
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) >= 1
    assert "overloaded" in response.json()["error"]["reason"]


async def _burst(url: str, count: int) -> list[httpx.Response]:
    body = {"latex": r"\sum_{n=1}^{\infty} \frac{1}{n^2}", "mode": "knn-rescore", "explain": True}
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        return await asyncio.gather(*(http.post("/search", json=body) for _ in range(count)))


@pytest.mark.services
def test_a_served_process_sheds_load_above_its_bound_and_keeps_serving(
    equation_alias: str, tmp_path: Any
) -> None:
    env = serve_env(rate=0, inflight=1, queue_timeout=0.05)
    server = ServeProcess(equation_alias, env=env, log_path=tmp_path / "serve.log")
    with server as url:
        answers = asyncio.run(_burst(url, 24))
        codes = [r.status_code for r in answers]
        assert 200 in codes and 503 in codes, codes
        assert set(codes) <= {200, 503}, codes  # no 500, no dropped connection
        shed = [r for r in answers if r.status_code == 503]
        assert all(int(r.headers["retry-after"]) >= 1 for r in shed)
        assert "busy" in shed[0].json()["error"]["reason"]
        health = httpx.get(f"{url}/health", timeout=10)
        assert health.status_code == 200
        assert health.json()["load"]["in_flight"] == 0 and health.json()["load"]["shed"] >= 1
        again = httpx.post(f"{url}/search", json={"latex": "x^2", "mode": "bm25"}, timeout=30)
        assert again.status_code == 200
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
        assert 'mathsearch_http_rejected_total{reason="busy"}' in metrics
        assert server.alive
