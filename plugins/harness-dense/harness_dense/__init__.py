"""Dense retrieval for stark-harness.

* ``dense`` — one vector per document from a local sentence-transformers model or a hosted
  API (``provider: openai | voyage``, :mod:`harness_dense.api`); exact top-k
  by chunked matrix products (torch, fp16 on GPU), or a FAISS index for large SKBs.
* ``multi-vector`` — documents split into overlapping chunks, each embedded; a document
  scores the max, mean or top-n mean of its chunks' similarities (STaRK's multi-VSS; the
  paper found the top-3 mean best).
* ``dense-ft`` — ``dense`` on a model fine-tuned on the dataset's train split (DPR-style:
  in-batch and BM25 hard negatives, sentence-transformers' trainer; :mod:`harness_dense.finetune`).
* ``hybrid`` — fuses any registered retrievers by reciprocal-rank fusion or by min-max
  normalised, weighted scores.

Document embeddings are cached on disk by the model's content (every file's bytes) and
settings and by the exact text, so a second run encodes nothing. Importing this module loads
no model library: torch, sentence-transformers, FAISS and the API SDKs load when used.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import harness


@harness.hookimpl
def register_retrievers(register: harness.Register) -> None:
    register("harness_dense.retrievers:DenseRetriever", name="dense")
    register("harness_dense.retrievers:MultiVectorRetriever", name="multi-vector")
    register("harness_dense.hybrid:HybridRetriever", name="hybrid")
    register("harness_dense.finetune:FineTunedDenseRetriever", name="dense-ft")


@harness.hookimpl
def register_presets(register: Callable[[Path | str], None]) -> None:
    register(Path(__file__).with_name("presets.yaml"))
