"""``mathsearch serve --workers N``: N processes, each with its own app, answering on one port."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from mathsearch.bench.serve import ServeProcess, serve_env
from mathsearch.core.errors import ConfigurationError
from mathsearch.serve.http_api import APP_ENV, app_from_env
from tests.process_tree import live_children


@pytest.mark.parametrize("value", [None, "not json", json.dumps({"profile": None})])
def test_a_worker_without_the_serve_commands_choices_is_a_configuration_error(
    monkeypatch, value: str | None
) -> None:
    monkeypatch.delenv(APP_ENV, raising=False)
    if value is not None:
        monkeypatch.setenv(APP_ENV, value)
    with pytest.raises(ConfigurationError, match=APP_ENV):
        app_from_env()


async def _searches(url: str, count: int) -> list[httpx.Response]:
    body = {"latex": r"\frac{a}{b} + c^2", "mode": "rrf", "k": 3}
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        return await asyncio.gather(*(http.post("/search", json=body) for _ in range(count)))


@pytest.mark.services
def test_two_worker_processes_serve_one_port(equation_alias: str, tmp_path: Any) -> None:
    # the sample index has no second-stage fields, so the default profile embeds each query's
    # 50 candidates on the CPU (0.35-0.7 s cold, docs/research/2026-12-06-tuning-record.md) and
    # twelve searches at once outlast the default 1 s queue: this test is about two processes on
    # one port, not about shedding load
    server = ServeProcess(
        equation_alias,
        env=serve_env(rate=0, workers=2, queue_timeout=60),
        log_path=tmp_path / "serve.log",
    )
    with server as url:
        assert server.process is not None
        assert len(live_children(server.process.pid, b"spawn_main")) == 2, server.log
        answers = asyncio.run(_searches(url, 12))
        assert [r.status_code for r in answers] == [200] * 12
        ids = {tuple(h["eq_id"] for h in r.json()["hits"]) for r in answers}
        assert len(ids) == 1 and len(next(iter(ids))) == 3  # every process ranks alike
        assert httpx.get(f"{url}/health", timeout=10).json()["status"] == "ok"
    assert not server.alive
