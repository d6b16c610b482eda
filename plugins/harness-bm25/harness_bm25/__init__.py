"""BM25 for stark-harness: bm25s with Lucene's scoring (k1=0.9, b=0.4), pure Python.

By default text is analyzed as Lucene's English analyzer does (see ``analysis``), so the
scores are Lucene's without a JVM; ``analyzer: bm25s`` uses bm25s's own tokenizer with
optional stopwords and a Snowball stemmer instead (STaRK's baseline uses it with bm25s's
default English stopwords and no stemmer).

Documents are the SKB's candidate documents (without relations by default, as STaRK's
BM25 baseline). The index is cached under the harness cache directory, keyed by the SKB
fingerprint with the document variant, the parameters and the versions of bm25s and the
analyzer, so a second run loads it instead of rebuilding. A manifest of SHA-256 digests,
written last, is checked before loading: a damaged index is rebuilt with a warning naming
it. One process builds an index at a time; another waits, then loads it.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import HarnessError
from harness.io import (
    atomic_dir,
    discard_entry,
    documents_identity,
    entry_lock,
    stable_hash,
    verified_entry,
    write_manifest,
)
from harness.plugins.hookspecs import hookimpl
from harness.queries import Query
from harness.retriever import BuildContext, Ranking, Retriever
from harness.skb import SKB
from harness_bm25.analysis import LuceneEnglishAnalyzer
from harness_bm25.norms import rescore_like_lucene

__all__ = ["BM25Retriever"]


class BM25Retriever(Retriever):
    """Lucene-style BM25 over the SKB's candidate documents.

    Parameters:
        k1, b: BM25 parameters (Lucene/Pyserini defaults 0.9 and 0.4).
        method: bm25s scoring variant ("lucene", "robertson", "atire", "bm25l", "bm25+").
        analyzer: "lucene" (Lucene's English analyzer: UAX #29 words, possessives, its 33
            stopwords, Porter) or "bm25s" (bm25s's tokenizer with the two options below).
        stopwords: with analyzer "bm25s", a bm25s stopword language or null (none). "en" and
            "english" name the same 33 words (Lucene's list), which ``bm25s.tokenize`` removes
            when not told otherwise; STaRK's baseline relies on that default.
        stemmer: with analyzer "bm25s", a PyStemmer language ("english") or null.
        length_norms: "lucene" scores with document lengths as Lucene stores them (one byte,
            see ``norms``), so rankings match Lucene's; "exact" is bm25s's own scoring.
        with_relations: index documents with their relations linearized.
        zero_scores: "drop" returns only documents that score above 0 (as Lucene returns only
            documents matching a query term); "keep" fills the ranking up to k with
            documents scoring 0, as bm25s's top-k does and STaRK's baseline reports them.

    Every ranking is the top k by (-score, index position): ties, zero-score fill
    included, are in index order (ascending candidate id), so results are deterministic.
    """

    name = "bm25"
    version = "4"  # 4: zero_scores; ties at the k-th rank broken by index position
    batch_size = 16

    def __init__(
        self,
        k1: float = 0.9,
        b: float = 0.4,
        method: str = "lucene",
        analyzer: str = "lucene",
        stopwords: str | None = None,
        stemmer: str | None = None,
        length_norms: str = "lucene",
        with_relations: bool = False,
        zero_scores: str = "drop",
    ) -> None:
        super().__init__(
            k1=k1,
            b=b,
            method=method,
            analyzer=analyzer,
            stopwords=stopwords,
            stemmer=stemmer,
            length_norms=length_norms,
            with_relations=with_relations,
            zero_scores=zero_scores,
        )
        if k1 < 0 or not 0 <= b <= 1:
            raise HarnessError(f"bm25: need k1 ≥ 0 and 0 ≤ b ≤ 1, got k1={k1}, b={b}")
        if analyzer not in ("lucene", "bm25s"):
            raise HarnessError(f"bm25: analyzer must be 'lucene' or 'bm25s', got {analyzer!r}")
        if analyzer == "lucene" and (stopwords is not None or stemmer is not None):
            raise HarnessError("bm25: stopwords and stemmer apply to analyzer 'bm25s'; 'lucene' has its own")
        if length_norms not in ("lucene", "exact"):
            raise HarnessError(f"bm25: length_norms must be 'lucene' or 'exact', got {length_norms!r}")
        if length_norms == "lucene" and method != "lucene":
            raise HarnessError(f"bm25: length_norms 'lucene' needs method 'lucene'; use 'exact' with {method!r}")
        if zero_scores not in ("drop", "keep"):
            raise HarnessError(f"bm25: zero_scores must be 'drop' or 'keep', got {zero_scores!r}")
        self._analyzer: LuceneEnglishAnalyzer | None = None
        self._index: Any = None
        self._stemmer_instance: Any = None
        self._ids: np.ndarray | None = None

    def _lucene(self) -> LuceneEnglishAnalyzer | None:
        """The Lucene-style analyzer, built on first use (importing NLTK takes seconds, and the
        runner constructs retrievers just to read ``uses()``)."""
        if self.params["analyzer"] != "lucene":
            return None
        if self._analyzer is None:
            self._analyzer = LuceneEnglishAnalyzer()
        return self._analyzer

    def _stemmer(self) -> Any:
        """One stemmer per retriever (PyStemmer keeps a cache of stems; search reuses it)."""
        if self.params["stemmer"] is None:
            return None
        if self._stemmer_instance is not None:
            return self._stemmer_instance
        import Stemmer

        try:
            self._stemmer_instance = Stemmer.Stemmer(self.params["stemmer"])
            return self._stemmer_instance
        except KeyError:
            raise HarnessError(f"bm25: unknown stemmer language {self.params['stemmer']!r}") from None

    def _tokenize(self, texts: list[str], show_progress: bool = False) -> Any:
        lucene = self._lucene()
        if lucene is not None:
            return lucene.analyze_all(texts)
        import bm25s

        return bm25s.tokenize(
            texts, stopwords=self.params["stopwords"], stemmer=self._stemmer(), show_progress=show_progress
        )

    def cache_key(self, skb: SKB) -> str:
        """Every input of the index: the documents (SKB fingerprint and the variant), every
        parameter, and the versions of the code that analyzes and indexes them."""
        p = self.params
        return stable_hash(
            {
                "documents": documents_identity(skb, p["with_relations"], compact=False),
                "params": p,
                "version": self.version,
                "bm25s": importlib.metadata.version("bm25s"),
                "analyzer": _versions(("nltk",) if p["analyzer"] == "lucene" else ("PyStemmer",)),
                "layout": 2,  # a digest manifest, checked before loading
            }
        )

    def build(self, skb: SKB, context: BuildContext) -> None:
        directory = Path(context.cache_dir) / "bm25" / f"{skb.name}-{self.cache_key(skb)}"
        with entry_lock(directory, "building the BM25 index"):  # one process builds, the others load
            self._build(skb, context, directory)

    def _build(self, skb: SKB, context: BuildContext, directory: Path) -> None:
        import bm25s

        ids = skb.candidate_ids
        if verified_entry(directory):
            try:
                index = bm25s.BM25.load(str(directory))
                stored = np.load(directory / "node_ids.npy")
                if np.array_equal(stored, ids):
                    self._index, self._ids = index, stored
                    return
                discard_entry(directory, "its node ids are not this SKB's candidates")
            except Exception as exc:
                discard_entry(directory, f"cannot be loaded: {type(exc).__name__}: {exc}")
        lucene = self._lucene()
        with context.task("bm25: read + analyze documents", len(ids)) as task:
            corpus = []
            for document in skb.documents(ids, with_relations=self.params["with_relations"]):
                corpus.append(lucene(document) if lucene is not None else document)
                task.advance()
        with context.task("bm25: index", None):
            tokens = corpus if lucene is not None else self._tokenize(corpus)
            del corpus
            index = bm25s.BM25(method=self.params["method"], k1=self.params["k1"], b=self.params["b"])
            index.index(tokens, show_progress=False)
            if self.params["length_norms"] == "lucene":
                if isinstance(tokens, list):
                    token_ids = [[index.vocab_dict[t] for t in doc] for doc in tokens]
                else:
                    token_ids = tokens.ids
                rescore_like_lucene(index.scores, token_ids, self.params["k1"], self.params["b"])
        with atomic_dir(directory) as tmp:
            index.save(str(tmp))
            np.save(tmp / "node_ids.npy", ids)
            write_manifest(tmp)  # last: the digests every later load checks first
        self._index, self._ids = index, ids

    def search(self, queries: Sequence[Query], k: int) -> list[Ranking]:
        if self._index is None or self._ids is None:
            raise HarnessError("bm25: search() before build()")
        import bm25s

        tokens = self._tokenize([q.text for q in queries])
        if isinstance(tokens, bm25s.tokenization.Tokenized):
            tokens = bm25s.tokenization.convert_tokenized_to_string_list(tokens)
        depth = min(k, len(self._ids))
        rankings = []
        for query_tokens in tokens:
            # The scores bm25s's retrieve() ranks (unknown terms left out; none: all 0), but
            # selected here: its top-k breaks ties at the k-th rank arbitrarily.
            ids = self._index.get_tokens_ids(query_tokens)
            if ids:
                scores = self._index.get_scores_from_ids(ids)
            else:
                scores = np.zeros(len(self._ids), dtype=self._index.dtype)
            positions = _top_k(scores, depth)
            row_scores = scores[positions]
            if self.params["zero_scores"] == "drop":
                keep = row_scores > 0  # Lucene returns only documents that match a query term
                positions, row_scores = positions[keep], row_scores[keep]
            rankings.append(Ranking(self._ids[positions], row_scores))
        return rankings


def _versions(packages: tuple[str, ...]) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for package in packages:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
    return found


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` best scores ordered by (-score, position): ties in index order,
    as Lucene breaks them, including ties across the k-th rank."""
    n = len(scores)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k >= n:
        return np.argsort(-scores, kind="stable")
    threshold = np.partition(scores, n - k)[n - k]  # the k-th largest score
    above = np.flatnonzero(scores > threshold)
    tied = np.flatnonzero(scores == threshold)[: k - len(above)]
    chosen = np.concatenate([above, tied])  # each part in index order; `tied` scores lowest
    return chosen[np.argsort(-scores[chosen], kind="stable")]


@hookimpl
def register_retrievers(register: Any) -> None:
    register(BM25Retriever)
