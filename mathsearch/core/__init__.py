"""The shared core at the bottom of every layer: environment settings helpers and the cache
folder, redaction of secrets in URLs, the typed errors of the OpenSearch side, and the CPU
description the benchmarks report (see docs/architecture.md). Imports nothing of mathsearch."""
