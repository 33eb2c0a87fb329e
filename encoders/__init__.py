"""PyTorch encoders of mathsearch (graph CNN, bitmap CNN, seq2seq, figure encoder).

Needs the ``train`` extra (torch, torch-geometric). Nothing outside ``encoders/`` and ``export/``
imports torch. The names below are re-exported lazily, so importing :mod:`mathsearch.encoders` (as
the
``mathsearch`` command line does for ``train`` and ``eval``) does not load torch.
"""

from __future__ import annotations

from mathsearch.core.lazy import lazy_exports

_LAZY = {
    "GCNConfig": "mathsearch.encoders.gcn",
    "GraphCNN": "mathsearch.encoders.gcn",
    "MaskingHeads": "mathsearch.encoders.masking",
    "mask_nodes": "mathsearch.encoders.masking",
    "permute_identifiers": "mathsearch.encoders.augment",
    "crop_tree": "mathsearch.encoders.subformula_crop",
    "mine_lexical_negatives": "mathsearch.encoders.lexical_negatives",
    "LexicalPrior": "mathsearch.encoders.lexical_prior",
    "collate": "mathsearch.encoders.graph_data",
    "to_data": "mathsearch.encoders.graph_data",
    "HistogramLoss": "mathsearch.encoders.losses",
    "TripletLoss": "mathsearch.encoders.losses",
    "histogram_loss_fn": "mathsearch.encoders.losses",
    "triplet_loss_fn": "mathsearch.encoders.losses",
    "masked_feature_loss_fn": "mathsearch.encoders.losses",
    "InfoNCELoss": "mathsearch.encoders.losses",
    "info_nce_loss_fn": "mathsearch.encoders.losses",
    "PackedCorpus": "mathsearch.encoders.packed_corpus",
    "shared_training_corpus": "mathsearch.encoders.shared_corpus",
    "EquationCorpus": "mathsearch.encoders.corpus",
    "TripletSampler": "mathsearch.encoders.sampler",
    "holdout_triplets": "mathsearch.encoders.sampler",
    "TrainConfig": "mathsearch.encoders.train_config",
    "train": "mathsearch.encoders.training",
    "BatchPrefetcher": "mathsearch.encoders.prefetch",
    "load_model": "mathsearch.encoders.checkpoints",
    "soup_checkpoints": "mathsearch.encoders.model_soup",
    "GCNEnsemble": "mathsearch.encoders.gcn_ensemble",
    "ensemble_concat": "mathsearch.encoders.gcn_ensemble",
    "ensemble_embed": "mathsearch.encoders.gcn_ensemble",
    "fit_projection": "mathsearch.encoders.gcn_ensemble",
    "ensemble_checkpoints": "mathsearch.encoders.ensemble_checkpoint",
    "soup_state": "mathsearch.encoders.model_soup",
    "ranking_score": "mathsearch.encoders.evaluation",
    "ranking_confidence_bound": "mathsearch.encoders.evaluation",
    "one_nn_accuracy": "mathsearch.encoders.evaluation",
    "loo_ranking_score": "mathsearch.encoders.evaluation",
    "precision_at_k": "mathsearch.encoders.evaluation",
    "umap": "mathsearch.encoders.evaluation",
    "ExpEmb": "mathsearch.encoders.seq2seq",
    "ExpEmbConfig": "mathsearch.encoders.seq2seq",
    "TokenVocabulary": "mathsearch.encoders.seq2seq_data",
    "beam_search": "mathsearch.encoders.beam_search",
    "score_k": "mathsearch.encoders.seq2seq_eval",
    "train_expemb": "mathsearch.encoders.seq2seq_training",
    "optimise_step": "mathsearch.encoders.seq2seq_training",
    "all_class_pairs": "mathsearch.encoders.seq2seq_data",
    "EncodedPairs": "mathsearch.encoders.seq2seq_data",
    "load_expemb": "mathsearch.encoders.seq2seq_training",
    "FigureEncoder": "mathsearch.encoders.figure_encoder",
    "FigureEncoderConfig": "mathsearch.encoders.figure_encoder",
    "FigureCorpus": "mathsearch.encoders.figure_data",
    "FigureTrainConfig": "mathsearch.encoders.figure_training",
    "train_figure_encoder": "mathsearch.encoders.figure_training",
    "load_figure_checkpoint": "mathsearch.encoders.figure_training",
    "pair_mse_loss": "mathsearch.encoders.figure_training",
    "BitmapCNN": "mathsearch.encoders.bitmap_cnn",
    "BitmapCNNConfig": "mathsearch.encoders.bitmap_cnn",
    "BitmapCorpus": "mathsearch.encoders.bitmap_data",
    "BitmapTrainConfig": "mathsearch.encoders.bitmap_training",
    "train_bitmap": "mathsearch.encoders.bitmap_training",
    "load_bitmap_model": "mathsearch.encoders.bitmap_training",
    "CropAugment": "mathsearch.encoders.bitmap_augment",
    "project_targets": "mathsearch.encoders.bitmap_teacher",
    "build_steps": "mathsearch.encoders.bitmap_steps",
    "bench_train_bitmap": "mathsearch.encoders.bench_train_bitmap",
    "labelled_metrics": "mathsearch.encoders.bitmap_eval",
    "holdout_metrics": "mathsearch.encoders.bitmap_eval",
    "SiameseLoss": "mathsearch.encoders.losses.siamese_loss",
    "siamese_loss_fn": "mathsearch.encoders.losses.siamese_loss",
}


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = sorted(_LAZY)  # noqa: PLE0605
