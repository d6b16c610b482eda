"""Lucene's English analysis in pure Python, so bm25s scores the very tokens Lucene would.

Anserini's default analyzer (what Pyserini indexes and searches with) is Lucene's
StandardTokenizer (Unicode word boundaries, UAX #29) → EnglishPossessiveFilter →
LowerCaseFilter → StopFilter (Lucene's 33 English stopwords) → PorterStemFilter.
Here the word boundaries come from the ``regex`` package's UAX #29 mode and the stemmer
is NLTK's Porter in Martin Porter's own variant, which is the one Lucene ports (short
words untouched, ``-bli`` → ``-ble``, ``-logi`` → ``-log``; Snowball's "porter" differs on
these). On the Debian SKB's 63,436 documents this gives Lucene's tokens exactly.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["LUCENE_STOPWORDS", "LuceneEnglishAnalyzer"]

# org.apache.lucene.analysis.en.EnglishAnalyzer.ENGLISH_STOP_WORDS_SET
LUCENE_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)
_POSSESSIVE = ("'s", "'S", "’s", "’S")
_MAX_TOKEN = 255  # StandardTokenizer's default maximum token length


class LuceneEnglishAnalyzer:
    """Tokenize text as Anserini's default English analyzer does."""

    def __init__(self) -> None:
        import regex
        from nltk.stem.porter import PorterStemmer

        self._boundaries: Any = regex.compile(r"\b", flags=regex.WORD | regex.V1)
        # A segment between two boundaries is a token when it holds a letter, a digit or an
        # emoji (Lucene emits those); runs of punctuation or spaces are not.
        self._is_token: Any = regex.compile(r"[\p{L}\p{Nd}\p{Extended_Pictographic}]", flags=regex.V1)
        self._porter = PorterStemmer(mode=PorterStemmer.MARTIN_EXTENSIONS)
        self._stems: dict[str, str] = {}

    def words(self, text: str) -> list[str]:
        """Tokens before stopping and stemming (tokenizer, possessive and lower-case filters)."""
        words = []
        for segment in self._boundaries.split(text):
            if segment.isspace() or not (segment.isalpha() or segment.isdecimal() or self._is_token.search(segment)):
                continue  # (the two str checks skip the regex for most segments)
            segment = segment.lstrip("'’")  # a leading quote is not part of the word for Lucene
            for start in range(0, len(segment), _MAX_TOKEN):
                piece = segment[start : start + _MAX_TOKEN]
                if piece[-2:] in _POSSESSIVE:
                    piece = piece[:-2]
                if piece:
                    words.append(piece.lower())
        return words

    def stem(self, word: str) -> str:
        stem = self._stems.get(word)
        if stem is None:
            stem = self._stems[word] = self._porter.stem(word, to_lowercase=False)
        return stem

    def __call__(self, text: str) -> list[str]:
        return [self.stem(w) for w in self.words(text) if w not in LUCENE_STOPWORDS]

    def analyze_all(self, texts: Iterable[str]) -> list[list[str]]:
        return [self(text) for text in texts]
