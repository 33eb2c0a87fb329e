"""PyTorch encoders of mathsearch (graph CNN, bitmap CNN, seq2seq, figure encoder).

Needs the ``train`` extra (torch, torch-geometric). Nothing outside ``encoders/`` and ``export/``
imports torch.
"""

from __future__ import annotations

__all__: list[str] = []
