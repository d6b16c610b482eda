"""The BM25 retriever: bm25s with Lucene's scoring and, by default, Lucene's English analysis.

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
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

import harness
from harness_bm25.analysis import ANALYZER_VERSION, LuceneEnglishAnalyzer
from harness_bm25.norms import rescore_like_lucene
from harness_bm25.saved import SavedIndex

__all__ = ["BM25Retriever"]

#: What the cached index depends on of this code; ``BM25Retriever.version`` also counts search
#: changes (version 5 changed only the selection: the indexes of version 4 stay valid).
INDEX_VERSION = "4"


class BM25Retriever(harness.Retriever):
    """Lucene-style BM25 over the SKB's candidate documents.

    With ``zero_scores: drop`` (the default) every ranking is the top k by (-score, index
    position): ties are in index order (ascending candidate id), as Lucene breaks them. With
    ``keep`` the top k is bm25s's own selection (``bm25s.selection.topk``, what
    ``BM25.retrieve`` and so stark_qa's BM25 return), zero-score fill and ties included.
    """

    name = "bm25"
    # 4: zero_scores; ties at the k-th rank broken by index position. 5 (zero_scores 'keep' only,
    # set per instance below): bm25s's own top k, its fill and tie order; 'drop' is unchanged
    version = "4"
    batch_size = 16

    class Options(harness.Options):
        k1: float = Field(0.9, ge=0, description="BM25 term-frequency saturation (Lucene/Pyserini default)")
        b: float = Field(0.4, ge=0, le=1, description="BM25 length normalization (Lucene/Pyserini default)")
        method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = Field(
            "lucene", description="bm25s scoring variant"
        )
        analyzer: Literal["lucene", "bm25s"] = Field(
            "lucene",
            description="'lucene': Lucene's English analyzer (UAX #29 words, possessives, its 33 stopwords, "
            "Porter); 'bm25s': bm25s's tokenizer with `stopwords` and `stemmer`",
        )
        stopwords: str | None = Field(
            None,
            description="with analyzer 'bm25s': a bm25s stopword language, or null for none ('en' and "
            "'english' are Lucene's 33 words, which bm25s.tokenize removes unless told otherwise)",
        )
        stemmer: str | None = Field(
            None, description="with analyzer 'bm25s': a PyStemmer language ('english'), or null for none"
        )
        length_norms: Literal["lucene", "exact"] = Field(
            "lucene",
            description="'lucene': document lengths as Lucene stores them (one byte, see harness_bm25.norms), "
            "so rankings match Lucene's; 'exact': bm25s's own scoring",
        )
        with_relations: bool = Field(False, description="index documents with their relations linearized")
        zero_scores: Literal["drop", "keep"] = Field(
            "drop",
            description="'drop': only documents scoring above 0 (as Lucene returns only documents matching "
            "a query term); 'keep': bm25s's own top k, filled with documents scoring 0 in its order (as "
            "stark_qa's BM25 returns them)",
        )

        @model_validator(mode="after")
        def _consistent(self) -> BM25Retriever.Options:
            if self.analyzer == "lucene" and (self.stopwords is not None or self.stemmer is not None):
                raise ValueError("stopwords and stemmer apply to analyzer 'bm25s'; 'lucene' has its own")
            if self.length_norms == "lucene" and self.method != "lucene":
                raise ValueError(f"length_norms 'lucene' needs method 'lucene'; use 'exact' with {self.method!r}")
            if self.stemmer is not None:
                import Stemmer  # PyStemmer: a small C extension

                try:
                    Stemmer.Stemmer(self.stemmer)
                except KeyError:
                    raise ValueError(f"stemmer: unknown PyStemmer language {self.stemmer!r}") from None
            return self

    options: Options

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if self.options.zero_scores == "keep":
            self.version = "5"  # type: ignore[misc]  # the rows of 'drop' stay current
        self._analyzer: LuceneEnglishAnalyzer | None = None
        self._index: Any = None
        self._stemmer_instance: Any = None
        self._ids: np.ndarray | None = None

    def _lucene(self) -> LuceneEnglishAnalyzer | None:
        """The Lucene-style analyzer, built on first use (the runner constructs retrievers just
        to read ``uses()``)."""
        if self.options.analyzer != "lucene":
            return None
        if self._analyzer is None:
            self._analyzer = LuceneEnglishAnalyzer()
        return self._analyzer

    def _stemmer(self) -> Any:
        """One stemmer per retriever (PyStemmer keeps a cache of stems; search reuses it)."""
        if self.options.stemmer is None:
            return None
        if self._stemmer_instance is None:
            import Stemmer

            self._stemmer_instance = Stemmer.Stemmer(self.options.stemmer)  # a known language: Options checked
        return self._stemmer_instance

    def _tokenize(self, texts: list[str], show_progress: bool = False) -> Any:
        lucene = self._lucene()
        if lucene is not None:
            return lucene.analyze_all(texts)
        import bm25s

        return bm25s.tokenize(
            texts, stopwords=self.options.stopwords, stemmer=self._stemmer(), show_progress=show_progress
        )

    def cache_key(self, skb: harness.SKB) -> str:
        """Every input of the index: the documents (SKB fingerprint and the variant), every
        parameter, and the versions of the code that analyzes and indexes them."""
        p = self.params
        return harness.stable_hash(
            {
                "documents": harness.documents_identity(skb, p["with_relations"], compact=False),
                "params": p,
                "version": INDEX_VERSION,
                "bm25s": importlib.metadata.version("bm25s"),
                "analyzer": (
                    # regex: the Unicode tables non-ASCII word boundaries come from
                    {"lucene-english": ANALYZER_VERSION, **_versions(("regex",))}
                    if p["analyzer"] == "lucene"
                    else _versions(("PyStemmer",))
                ),
                "layout": 2,  # a digest manifest, checked before loading
            }
        )

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        directory = Path(context.cache_dir) / "bm25" / f"{skb.name}-{self.cache_key(skb)}"
        with harness.entry_lock(directory, "building the BM25 index"):  # one process builds, the others load
            self._build(skb, context, directory)

    def _build(self, skb: harness.SKB, context: harness.BuildContext, directory: Path) -> None:
        ids = skb.candidate_ids
        if harness.verified_entry(directory):
            try:
                # read without bm25s where it can be (no scipy import on a warm run), else by bm25s
                index: Any = SavedIndex.load(directory) or _bm25s().BM25.load(str(directory))
                stored = np.load(directory / "node_ids.npy")
                if np.array_equal(stored, ids):
                    self._index, self._ids = index, stored
                    return
                harness.discard_entry(directory, "its node ids are not this SKB's candidates")
            except Exception as exc:
                harness.discard_entry(directory, f"cannot be loaded: {type(exc).__name__}: {exc}")
        bm25s = _bm25s()
        lucene = self._lucene()
        with context.task("bm25: read + analyze documents", len(ids)) as task:
            corpus: list[Any] = []  # each document's tokens (Lucene's analysis), else the document
            for document in skb.documents(ids, with_relations=self.options.with_relations):
                corpus.append(lucene(document) if lucene is not None else document)
                task.advance()
        with context.task("bm25: index", None):
            tokens = corpus if lucene is not None else self._tokenize(corpus)
            del corpus
            options = self.options
            index = bm25s.BM25(method=options.method, k1=options.k1, b=options.b)
            index.index(tokens, show_progress=False)
            if options.length_norms == "lucene":
                if isinstance(tokens, list):
                    token_ids = [[index.vocab_dict[t] for t in doc] for doc in tokens]
                else:
                    token_ids = tokens.ids
                rescore_like_lucene(index.scores, token_ids, options.k1, options.b)
        with harness.atomic_dir(directory) as tmp:
            index.save(str(tmp))
            np.save(tmp / "node_ids.npy", ids)
            harness.write_manifest(tmp)  # last: the digests every later load checks first
        self._index, self._ids = index, ids

    def search(
        self, queries: Sequence[harness.Query], k: int, top_ranked: Sequence[harness.Ranking] | None = None
    ) -> list[harness.Ranking]:
        if self._index is None or self._ids is None:
            raise harness.HarnessError("bm25: search() before build()")
        tokens = self._tokenize([q.text for q in queries])
        if self._lucene() is None:  # bm25s's analysis (which imported bm25s already): its tokens as strings
            bm25s = _bm25s()
            if isinstance(tokens, bm25s.tokenization.Tokenized):
                tokens = bm25s.tokenization.convert_tokenized_to_string_list(tokens)
        depth = min(k, len(self._ids))
        rankings = []
        for query_tokens in tokens:
            # The scores bm25s's retrieve() ranks (unknown terms left out; none: all 0); 'drop'
            # selects them here (bm25s breaks ties at the k-th rank arbitrarily), 'keep' as bm25s.
            ids = self._index.get_tokens_ids(query_tokens)
            if ids:
                scores = self._index.get_scores_from_ids(ids)
                if not np.isfinite(scores).all():  # a damaged index: never ranked silently
                    raise harness.HarnessError(f"bm25: the index scores query {query_tokens!r} with NaN or inf")
            else:
                scores = np.zeros(len(self._ids), dtype=self._index.dtype)
            if self.options.zero_scores == "keep":
                positions = _bm25s_top_k(scores, depth)
            else:
                positions = _top_k(scores, depth)
                positions = positions[scores[positions] > 0]  # Lucene returns only documents matching a term
            rankings.append(harness.Ranking(self._ids[positions], scores[positions]))
        return rankings


def _bm25s() -> Any:
    import bm25s  # imports scipy.sparse: only to build an index, or to analyze with bm25s's tokenizer

    return bm25s


def _versions(packages: tuple[str, ...]) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for package in packages:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
    return found


def _bm25s_top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of bm25s's top ``k``, best first, as ``BM25.retrieve`` selects them with its
    defaults (backend "auto": jax's top_k where jax is installed, else numpy's argpartition and
    argsort). Which documents fill the places below the matches, and the order of ties, are
    bm25s's (neither index order nor stable): taken from bm25s, not imitated."""
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    from bm25s.selection import topk  # imports bm25s (and scipy): only for zero_scores 'keep'

    _, positions = topk(scores, k, backend="auto", sorted=True)
    return np.asarray(positions, dtype=np.int64)


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` best scores ordered by (-score, position): ties in index order,
    as Lucene breaks them, including ties across the k-th rank."""
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    positive = np.flatnonzero(scores > 0)
    if len(positive) == len(scores) or not (scores.min() >= 0):  # negatives or NaN: the general path
        return _top_k_of_all(scores, k)
    # BM25 scores only the documents holding a query term above 0: select among those, then
    # fill with documents scoring 0, in index order (the order ties take).
    top = positive[_top_k_of_all(scores[positive], k)]
    if len(top) < k:
        top = np.concatenate([top, np.flatnonzero(scores == 0)[: k - len(top)]])
    return top


def _top_k_of_all(scores: np.ndarray, k: int) -> np.ndarray:
    n = len(scores)
    if k >= n:
        return np.argsort(-scores, kind="stable")
    threshold = np.partition(scores, n - k)[n - k]  # the k-th largest score
    above = np.flatnonzero(scores > threshold)
    tied = np.flatnonzero(scores == threshold)[: k - len(above)]
    chosen = np.concatenate([above, tied])  # each part in index order; `tied` scores lowest
    return chosen[np.argsort(-scores[chosen], kind="stable")]
