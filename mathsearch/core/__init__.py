"""The shared core at the bottom of every layer: environment settings helpers and the cache
folder, redaction of secrets in URLs, and the typed errors of the OpenSearch side (see
docs/architecture.md). Imports nothing of mathsearch."""
