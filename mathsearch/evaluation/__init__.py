"""Evaluation and tuning: topics, qrels and runs (TREC files), IR metrics, the retrieval
evaluation of every mode beside Approach Zero, paired tests between systems, the tuning grid and
its reports.

Room above the pipeline (see docs/architecture.md); names load on first use.
"""

from __future__ import annotations

from mathsearch.core.lazy import lazy_exports

_LAZY = {
    "Topic": "mathsearch.evaluation.trec_files",
    "read_topics": "mathsearch.evaluation.trec_files",
    "write_topics": "mathsearch.evaluation.trec_files",
    "read_qrels": "mathsearch.evaluation.trec_files",
    "write_qrels": "mathsearch.evaluation.trec_files",
    "read_run": "mathsearch.evaluation.trec_files",
    "write_run": "mathsearch.evaluation.trec_files",
    "search_topics": "mathsearch.evaluation.topic_runs",
    "Evaluation": "mathsearch.evaluation.ir_metrics",
    "evaluate": "mathsearch.evaluation.ir_metrics",
    "PairedComparison": "mathsearch.evaluation.paired_test",
    "paired_t_test": "mathsearch.evaluation.paired_test",
    "compare_per_topic": "mathsearch.evaluation.paired_test",
    "parse_grid": "mathsearch.evaluation.tuning_grid",
    "expand": "mathsearch.evaluation.tuning_grid",
    "index_with_pya0": "mathsearch.evaluation.pya0_peer",
    "Pya0Result": "mathsearch.evaluation.pya0_peer",
    "fragment_tree": "mathsearch.evaluation.fragment_queries",
    "fragment_scores": "mathsearch.evaluation.fragment_queries",
}

__all__ = [
    "Evaluation",
    "PairedComparison",
    "Pya0Result",
    "Topic",
    "compare_per_topic",
    "evaluate",
    "expand",
    "fragment_scores",
    "fragment_tree",
    "index_with_pya0",
    "paired_t_test",
    "parse_grid",
    "read_qrels",
    "read_run",
    "read_topics",
    "search_topics",
    "write_qrels",
    "write_run",
    "write_topics",
]

__getattr__ = lazy_exports(__name__, _LAZY)
