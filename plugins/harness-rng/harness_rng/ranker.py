"""RnG-KBQA's logical-form ranker: a cross-encoder over (question, linearised form) pairs.

RnG's ranker is BERT reading ``[CLS] question [SEP] form``, a linear layer on ``[CLS]`` giving one
logit, trained with a contrastive loss: the softmax over a question's ground-truth form and its
sampled negatives. Here the encoder is a sentence-transformers ``CrossEncoder`` (one label)
initialised from a packaged model (MiniLM by default, resolved by harness-dense), and since
the gold forms are unknown (the training queries carry answers, not forms) the target of the
softmax is spread over the forms whose execution holds a gold answer, in proportion to their F1
(see :func:`group_loss`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import harness

__all__ = ["Ranker", "group_loss"]

_LAYER = "encoder.layer."


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """transformers warns that the classification head is new (it is: fit trains it) and, loading
    a saved ranker, that its layers are not sharded for tensor parallelism (nothing is)."""
    loggers = [logging.getLogger(f"transformers.{name}") for name in ("modeling_utils", "integrations.tensor_parallel")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


class Ranker:
    """A cross-encoder scoring (query, form) pairs with one logit each.

    Args:
        path: a sentence-transformers model directory (a bi-encoder base: its classification
            head starts untrained) or a ranker saved by :meth:`save`.
        max_length: tokens of each pair the encoder reads.
        batch_size: pairs per forward pass when scoring.
        device: "cpu" or "cuda".
        train_layers: fine-tune only the head and the last ``train_layers`` transformer layers
            (None: every weight, as RnG does).
    """

    def __init__(
        self, path: Path, max_length: int, batch_size: int, device: str, train_layers: int | None = None
    ) -> None:
        from sentence_transformers import CrossEncoder

        with _quiet():
            self.cross = CrossEncoder(
                str(path), num_labels=1, max_length=max_length, device=device, local_files_only=True
            )
        self.network, self.tokenizer = self.cross.model, self.cross.tokenizer
        self.max_length, self.batch_size, self.device = max_length, batch_size, device
        self._freeze(train_layers)

    def _freeze(self, train_layers: int | None) -> None:
        if train_layers is None:
            return
        names = [name for name, _ in self.network.named_parameters()]
        layers = sorted({int(n.split(_LAYER, 1)[1].split(".", 1)[0]) for n in names if _LAYER in n})
        if not layers:
            raise harness.HarnessError(
                "rng-kbqa: train_layers needs a BERT-style encoder (parameters named encoder.layer.N); "
                "use train_layers: null to fine-tune every weight"
            )
        kept = set(layers[len(layers) - train_layers :]) if train_layers else set()
        for name, parameter in self.network.named_parameters():
            layer = int(name.split(_LAYER, 1)[1].split(".", 1)[0]) if _LAYER in name else None
            head = layer is None and ("classifier" in name or "pooler" in name)
            parameter.requires_grad_(head or (layer is not None and layer in kept))

    def trainable(self) -> list[Any]:
        return [p for p in self.network.parameters() if p.requires_grad]

    def logits(self, query: str | Sequence[str], forms: Sequence[str]) -> Any:
        """One logit per pair (a tensor, with gradients when training)."""
        queries = [query] * len(forms) if isinstance(query, str) else list(query)
        encoded = self.tokenizer(
            queries, list(forms), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        ).to(self.device)
        return self.network(**encoded).logits.squeeze(-1)

    def scores(self, queries: Sequence[str], forms: Sequence[str]) -> np.ndarray:
        """Logits of the pairs ``(queries[i], forms[i])`` (eval mode, no gradients)."""
        import torch

        self.network.eval()
        out = []
        with torch.no_grad():
            for start in range(0, len(forms), self.batch_size):
                chunk = slice(start, start + self.batch_size)
                out.append(self.logits(queries[chunk], forms[chunk]).float().cpu().numpy())
        return np.concatenate(out).astype(np.float64) if out else np.zeros(0)

    def save(self, directory: Path) -> None:
        self.cross.save(str(directory))

    def state(self) -> dict[str, Any]:
        """The trainable weights (what an epoch checkpoint keeps; the frozen ones are the base's)."""
        return {n: p.detach().cpu().clone() for n, p in self.network.named_parameters() if p.requires_grad}

    def load_state(self, state: dict[str, Any]) -> None:
        missing = set(state) - {n for n, _ in self.network.named_parameters()}
        if missing:
            raise ValueError(f"unknown weights {sorted(missing)[:3]}")
        self.network.load_state_dict(state, strict=False)


def group_loss(logits: Any, target: Any) -> Any:
    """RnG's contrastive loss over one query's group of forms, with a soft target: ``-Σ q_i log
    softmax(s)_i``, ``q`` the forms' F1 normalised to sum 1 (one gold form: RnG's loss exactly)."""
    import torch

    return -(target * torch.log_softmax(logits, dim=-1)).sum()
