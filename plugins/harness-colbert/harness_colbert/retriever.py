"""The ColBERTv2 retriever: colbert-ai's PLAID indexing and late-interaction search.

Documents are the SKB's candidates in STaRK's compact form (one line, no relations by
default), as STaRK's ColBERTv2 baseline indexes them; positions in that list are ColBERT
passage ids, mapped back to node ids. The index lives in the harness cache, keyed by the
SKB fingerprint with the document variant, the parameters, the checkpoint's content (weights,
config and tokenizer) and the colbert-ai version; it is built under a temporary name, with a
manifest of SHA-256 digests written last and checked before every load (a damaged index is
rebuilt with a warning naming it), and moved into place only when complete. One process
builds an index at a time; another waits, then loads it. colbert-ai's own
messages go to ``colbert.log`` next to the index.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

import harness
from harness_colbert.checkpoint import COLBERTV2_URL, checkpoint_identity, locate_checkpoint

__all__ = ["ColBERTRetriever"]

_EXPERIMENT = "harness"
_LOGS = ("*.log",)  # colbert-ai's messages, appended to on every load: not part of the index


class ColBERTRetriever(harness.Retriever):
    """Late interaction (MaxSim over token embeddings) with a compressed PLAID index."""

    name = "colbertv2"
    version = "1"
    batch_size = 32

    class Options(harness.DocumentOptions):
        checkpoint: str = Field(
            "colbertv2.0",
            description="a ColBERT checkpoint directory, a Hugging Face hub id (org/name, org/name@revision, "
            "e.g. colbert-ir/colbertv2.0; downloaded into the hub's cache, the commit recorded), 'colbertv2.0' "
            "(the official weights, downloaded once from checkpoint_url) or 'minilm-untrained' (built from the "
            "packaged MiniLM: the real code path, far worse retrieval than ColBERTv2)",
        )
        checkpoint_url: str = Field(COLBERTV2_URL, description="where 'colbertv2.0' is downloaded from")
        nbits: Literal[1, 2, 4, 8] = Field(2, description="bits per residual dimension (STaRK: 2)")
        doc_maxlen: int = Field(180, ge=8, description="tokens kept per document (colbert-ai's default)")
        query_maxlen: int = Field(32, ge=4, description="tokens kept per query (colbert-ai's default)")
        kmeans_niters: int = Field(4, ge=0, description="k-means iterations for the centroids")
        compact: bool = Field(True, description="documents in STaRK's compact one-line form (STaRK: yes)")

    options: Options

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._searcher: Any = None
        self._ids: np.ndarray | None = None
        self._device = "cpu"
        self._snapshot: harness.HubSnapshot | None = None

    def provenance(self) -> dict[str, Any]:
        """For a checkpoint named by hub id, its repository and the commit that ran."""
        return self._snapshot.provenance("checkpoint") if self._snapshot is not None else {}

    def _config(self) -> Any:
        from colbert.infra import ColBERTConfig

        options = self.options
        return ColBERTConfig(
            nbits=options.nbits,
            doc_maxlen=options.doc_maxlen,
            query_maxlen=options.query_maxlen,
            kmeans_niters=options.kmeans_niters,
            avoid_fork_if_possible=True,
        )

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        try:
            import colbert  # noqa: F401
        except ImportError as exc:
            raise harness.HarnessError(
                f"colbertv2: cannot import colbert-ai ({exc}); install stark-harness-colbert"
            ) from exc
        cache = Path(context.cache_dir)
        with context.task("colbertv2: checkpoint", None) as task:
            checkpoint, self._snapshot = locate_checkpoint(
                self.options.checkpoint, cache, self.options.checkpoint_url, advance=task.advance
            )
        self._device = context.device
        p = self.params
        key = harness.stable_hash(
            {
                "documents": harness.documents_identity(skb, p["with_relations"], p["compact"]),
                "params": {k: v for k, v in p.items() if k not in ("checkpoint", "checkpoint_url")},
                "weights": checkpoint_identity(checkpoint),
                "colbert": importlib.metadata.version("colbert-ai"),
                "version": self.version,
                "layout": 2,  # a digest manifest, checked before loading
            }
        )
        directory = cache / "colbert" / "indexes" / f"{skb.name}-{key}"
        ids = skb.candidate_ids
        with harness.entry_lock(directory, "building the ColBERT index"):  # one process builds, the others load
            if not harness.verified_entry(directory):
                self._index(skb, ids, checkpoint, directory, context)
            try:
                self._searcher = self._load(skb, ids, checkpoint, directory)
            except Exception as exc:  # whatever colbert-ai raises, the entry is rebuilt
                harness.discard_entry(directory, f"cannot be loaded: {type(exc).__name__}: {exc}")
                self._index(skb, ids, checkpoint, directory, context)
                self._searcher = self._load(skb, ids, checkpoint, directory)
        self._ids = ids

    def _index(
        self, skb: harness.SKB, ids: np.ndarray, checkpoint: Path, directory: Path, context: harness.BuildContext
    ) -> None:
        from colbert import Indexer

        documents = [
            d.replace("\n", " ")  # one passage per line, as colbert-ai's collection format wants
            for d in context.track(
                skb.documents(ids, self.options.with_relations, self.options.compact),
                "colbertv2: documents",
                len(ids),
            )
        ]
        shutil.rmtree(directory, ignore_errors=True)  # stale or half-written
        with harness.atomic_dir(directory) as tmp, context.task("colbertv2: encode + index (colbert-ai)", None):
            with self._colbert(tmp) as run_config:
                from colbert.infra import Run

                with Run().context(run_config):
                    indexer = Indexer(checkpoint=str(checkpoint), config=self._config(), verbose=0)
                    try:
                        indexer.index(name=skb.name, collection=documents, overwrite=True)
                    except RuntimeError as exc:
                        if "Number of training points" not in str(exc):
                            raise
                        raise harness.HarnessError(
                            f"colbertv2: {len(documents)} documents are too few for colbert-ai's k-means "
                            "centroids (it needs several hundred); use another retriever for this SKB"
                        ) from None
            (tmp / "complete.json").write_text(json.dumps({"documents": len(ids)}))
            harness.write_manifest(tmp, ignore=_LOGS)  # last: the digests every later load checks first

    def _load(self, skb: harness.SKB, ids: np.ndarray, checkpoint: Path, directory: Path) -> Any:
        from colbert import Searcher

        with self._colbert(directory) as run_config:
            from colbert.infra import Run

            with Run().context(run_config):
                index = directory / _EXPERIMENT / "indexes" / skb.name
                # The searcher keeps a collection only to show passage texts, which the harness never
                # asks for, so a cached index is searched without building the documents again.
                return Searcher(
                    index=str(index),
                    checkpoint=str(checkpoint),
                    collection=[""] * len(ids),
                    config=self._config(),
                    verbose=0,
                )

    @contextlib.contextmanager
    def _colbert(self, root: Path) -> Iterator[Any]:
        """colbert-ai's run settings; its messages go to a log file; CPU unless told cuda."""
        from colbert.infra import RunConfig
        from colbert.infra.config.settings import RunSettings

        visible = RunSettings.total_visible_gpus
        if self._device == "cpu":
            RunSettings.total_visible_gpus = 0  # colbert-ai takes any visible GPU otherwise
        try:
            with _stdout_to(root / "colbert.log"):
                yield RunConfig(nranks=1, experiment=_EXPERIMENT, root=str(root), avoid_fork_if_possible=True)
        finally:
            RunSettings.total_visible_gpus = visible

    def search(
        self, queries: Sequence[harness.Query], k: int, top_ranked: Sequence[harness.Ranking] | None = None
    ) -> list[harness.Ranking]:
        if self._searcher is None or self._ids is None:
            raise harness.HarnessError("colbertv2: search() before build()")
        depth = min(k, len(self._ids))
        rankings = []
        with _stdout_to(Path(self._searcher.index) / "search.log"):
            for query in queries:
                pids, _ranks, scores = self._searcher.search(query.text, k=depth)
                rankings.append(
                    harness.Ranking(self._ids[np.asarray(pids, dtype=np.int64)], np.asarray(scores, np.float64))
                )
        return rankings


@contextlib.contextmanager
def _stdout_to(path: Path) -> Iterator[None]:
    """Send standard output to ``path``: colbert-ai prints progress, and faiss's k-means prints
    from C, which would corrupt ``--format json`` output on the terminal."""
    sys.stdout.flush()
    saved = os.dup(1)
    with path.open("a") as log:
        os.dup2(log.fileno(), 1)
        try:
            with contextlib.redirect_stdout(log):
                yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
