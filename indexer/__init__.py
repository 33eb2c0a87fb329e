"""From source documents to featurised equations (no torch here), and the command line.

Extraction (:func:`extract` and the per-format readers) yields :class:`EquationRecord` or
:class:`Failure`; :class:`Featuriser` turns records into :class:`ParsedEquation` (MathML tree,
KDD 2020 graph, BoW vector, math tokens, symbols) with the same code for training, indexing and
querying.
"""

from __future__ import annotations

#: Re-exported lazily: they pull in matplotlib, SymPy or opensearch-py, which most callers
#: never need.
from mathsearch.core.lazy import lazy_exports
from mathsearch.indexer.converters import (
    Converted,
    KatexBatchConverter,
    PythonConverter,
    make_converter,
)
from mathsearch.indexer.display_math import DisplayMath, find_display_math
from mathsearch.indexer.errors import (
    ConversionError,
    ExtractionError,
    IndexerError,
    LimitExceeded,
    MathMLError,
    UnknownFormat,
    VocabularyError,
)
from mathsearch.indexer.extract import extract
from mathsearch.indexer.formats import (
    FORMAT_REGISTRY,
    FORMATS,
    SourceFormat,
    guess_format,
    register_format,
)
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth, read_records
from mathsearch.indexer.jats_source import iter_jats
from mathsearch.indexer.jsonl_source import iter_jsonl, write_jsonl
from mathsearch.indexer.latex_macros import collect_macros, expand_macros
from mathsearch.indexer.latex_to_mathml import Conversion, latex_to_mathml
from mathsearch.indexer.lexical import bow_vector, math_tokens, symbol_keywords, symbols
from mathsearch.indexer.mathml_graph import EquationGraph, build_graph
from mathsearch.indexer.mathml_reader import parse_mathml
from mathsearch.indexer.mathml_tree import MathNode, to_mathml
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.query_variables import (
    QVAR_TAG,
    Pattern,
    QueryVariableError,
    find_variables,
    has_variables,
    parse_pattern,
    to_qvar_syntax,
)
from mathsearch.indexer.records import EquationRecord, Failure, make_eq_id
from mathsearch.indexer.report import CoverageReport
from mathsearch.indexer.settings import IndexerSettings
from mathsearch.indexer.tex_source import iter_tex
from mathsearch.indexer.unify import Match, equal_trees, match, subtree_latex, unify
from mathsearch.indexer.vocabulary import Vocabulary, default_vocabulary

_LAZY = {
    "iter_opensearch_index": "mathsearch.indexer.opensearch_source",
    "render_bitmap": "mathsearch.indexer.bitmap",
    "render_batch": "mathsearch.indexer.bitmap",
    "centre_crop": "mathsearch.indexer.bitmap",
    "RenderError": "mathsearch.indexer.bitmap",
    "latex_to_prefix": "mathsearch.indexer.prefix",
    "PrefixError": "mathsearch.indexer.prefix",
    "canonical_tokens": "mathsearch.indexer.canonical_form",
    "CanonicalFormError": "mathsearch.indexer.canonical_form",
    "truth_table": "mathsearch.indexer.canonical_form",
    "FigureRecord": "mathsearch.indexer.figures",
    "extract_figures": "mathsearch.indexer.figures",
    "FigureVocabulary": "mathsearch.indexer.figure_features",
    "featurise_figures": "mathsearch.indexer.figure_features",
    "load_image": "mathsearch.indexer.figure_features",
    "tree_to_prefix": "mathsearch.indexer.semvec_prefix",
    "split_classes": "mathsearch.indexer.semvec_class_split",
    "write_class_split": "mathsearch.indexer.semvec_class_split",
    "rake_keywords": "mathsearch.indexer.rake",
}


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "FORMATS",
    "FORMAT_REGISTRY",
    "QVAR_TAG",
    "CanonicalFormError",
    "Conversion",
    "ConversionError",
    "Converted",
    "CoverageReport",
    "DisplayMath",
    "EquationGraph",
    "EquationRecord",
    "ExtractionError",
    "Failure",
    "Featuriser",
    "FigureRecord",
    "FigureVocabulary",
    "IndexerError",
    "IndexerSettings",
    "KatexBatchConverter",
    "LimitExceeded",
    "Match",
    "MathMLError",
    "MathNode",
    "ParsedEquation",
    "Pattern",
    "PrefixError",
    "PythonConverter",
    "QueryVariableError",
    "RenderError",
    "SourceFormat",
    "UnknownFormat",
    "Vocabulary",
    "VocabularyError",
    "bow_vector",
    "build_graph",
    "bundled_sample_lines",
    "canonical_tokens",
    "centre_crop",
    "collect_macros",
    "default_vocabulary",
    "equal_trees",
    "expand_macros",
    "extract",
    "extract_figures",
    "featurise_figures",
    "find_display_math",
    "find_variables",
    "guess_format",
    "has_variables",
    "iter_hepth",
    "iter_jats",
    "iter_jsonl",
    "iter_opensearch_index",
    "iter_tex",
    "latex_to_mathml",
    "latex_to_prefix",
    "load_image",
    "make_converter",
    "make_eq_id",
    "match",
    "math_tokens",
    "parse_mathml",
    "parse_pattern",
    "rake_keywords",
    "read_records",
    "register_format",
    "render_batch",
    "render_bitmap",
    "split_classes",
    "subtree_latex",
    "symbol_keywords",
    "symbols",
    "to_mathml",
    "to_qvar_syntax",
    "tree_to_prefix",
    "truth_table",
    "unify",
    "write_class_split",
    "write_jsonl",
]
