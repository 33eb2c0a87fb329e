"""Celery tasks: thin wrappers over plain functions, JSON arguments, ids not objects."""

from __future__ import annotations

from workers.app import app
from workers.health import describe_worker
from workers.parsing import parse_records


@app.task(name="mathsearch.ping", acks_late=True)
def ping(payload: dict) -> dict:
    """Round-trip check: returns the payload and the worker's pid and host."""
    return describe_worker(payload)


@app.task(name="mathsearch.parse.records", acks_late=True)
def parse(records: list[dict]) -> list[dict]:
    """Featurise equation records (JSON dicts); see :func:`workers.parsing.parse_records`."""
    return parse_records(records)
