"""PyTorch encoders of mathsearch (graph CNN, bitmap CNN, seq2seq, figure encoder).

Needs the ``train`` extra (torch, torch-geometric). Nothing outside ``encoders/`` and ``export/``
imports torch. The names below are re-exported lazily, so importing :mod:`encoders` (as the
``mathsearch`` command line does for ``train`` and ``eval``) does not load torch.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "GCNConfig": "encoders.gcn",
    "GraphCNN": "encoders.gcn",
    "MaskingHeads": "encoders.masking",
    "mask_nodes": "encoders.masking",
    "permute_identifiers": "encoders.augment",
    "collate": "encoders.graph_data",
    "to_data": "encoders.graph_data",
    "HistogramLoss": "encoders.losses",
    "TripletLoss": "encoders.losses",
    "histogram_loss_fn": "encoders.losses",
    "triplet_loss_fn": "encoders.losses",
    "masked_feature_loss_fn": "encoders.losses",
    "InfoNCELoss": "encoders.losses",
    "info_nce_loss_fn": "encoders.losses",
    "PackedCorpus": "encoders.packed_corpus",
    "shared_training_corpus": "encoders.shared_corpus",
    "bench_train": "encoders.bench_train",
    "bench_train_seq2seq": "encoders.bench_train_seq2seq",
    "EquationCorpus": "encoders.corpus",
    "TripletSampler": "encoders.sampler",
    "holdout_triplets": "encoders.sampler",
    "TrainConfig": "encoders.train_config",
    "train": "encoders.training",
    "load_model": "encoders.checkpoints",
    "ranking_score": "encoders.evaluation",
    "ranking_confidence_bound": "encoders.evaluation",
    "one_nn_accuracy": "encoders.evaluation",
    "loo_ranking_score": "encoders.evaluation",
    "precision_at_k": "encoders.evaluation",
    "umap": "encoders.evaluation",
    "ExpEmb": "encoders.expemb",
    "ExpEmbConfig": "encoders.expemb",
    "TokenVocabulary": "encoders.expemb_data",
    "beam_search": "encoders.beam_search",
    "score_k": "encoders.expemb_eval",
    "train_expemb": "encoders.expemb_training",
    "optimise_step": "encoders.expemb_training",
    "all_class_pairs": "encoders.expemb_data",
    "load_expemb": "encoders.expemb_training",
    "FigureEncoder": "encoders.figure_encoder",
    "FigureEncoderConfig": "encoders.figure_encoder",
    "FigureCorpus": "encoders.figure_data",
    "FigureTrainConfig": "encoders.figure_training",
    "train_figure_encoder": "encoders.figure_training",
    "load_figure_checkpoint": "encoders.figure_training",
    "pair_mse_loss": "encoders.figure_training",
    "BitmapCNN": "encoders.bitmap_cnn",
    "BitmapCNNConfig": "encoders.bitmap_cnn",
    "BitmapCorpus": "encoders.bitmap_data",
    "BitmapTrainConfig": "encoders.bitmap_training",
    "train_bitmap": "encoders.bitmap_training",
    "load_bitmap_model": "encoders.bitmap_training",
    "labelled_metrics": "encoders.bitmap_eval",
    "holdout_metrics": "encoders.bitmap_eval",
    "SiameseLoss": "encoders.losses.siamese_loss",
    "siamese_loss_fn": "encoders.losses.siamese_loss",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'encoders' has no attribute {name!r}")


__all__ = sorted(_LAZY)  # noqa: PLE0605
