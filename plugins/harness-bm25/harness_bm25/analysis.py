"""Lucene's English analysis in Python, so bm25s scores the very tokens Lucene would.

Anserini's default analyzer (what Pyserini indexes and searches with) is Lucene's
StandardTokenizer (Unicode word boundaries, UAX #29, tokens of at most 255 characters) →
EnglishPossessiveFilter → LowerCaseFilter → StopFilter (Lucene's 33 English stopwords) →
PorterStemFilter. Two ways to the same tokens:

- ASCII text (nearly every document in practice): one ``bytes.translate`` lower-cases it and
  blanks every character that is never part of an ASCII word, so ``split()`` cuts it into chunks
  that each hold whole words. A chunk's tokens (UAX #29 words within it, possessive, stopwords,
  stem) are worked out the first time it is seen and kept, so a document then costs one dict
  lookup per chunk, all in C loops.
- Other text, line by line (a line break always ends a word): ASCII lines as above, the others
  with word boundaries from the ``regex`` package's UAX #29 mode, segment by segment,
  lower-cased as Java does (no final sigma; ``İ`` → ``i``).

Lucene's scanner reads at most 255 UTF-16 characters at a time: a longer word becomes the
longest token that fits, then scanning starts afresh after it (so ``x…x's`` cut before ``'s``
gives a token ``s``). The stemmer is Lucene's Porter (:mod:`harness_bm25.porter`), run once per
distinct word.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from itertools import chain
from typing import Any

from harness_bm25.porter import stem as porter_stem

__all__ = ["ANALYZER_VERSION", "LUCENE_STOPWORDS", "LuceneEnglishAnalyzer"]

#: Changes whenever the tokens this module produces may change (part of index cache keys).
ANALYZER_VERSION = "2"

# org.apache.lucene.analysis.en.EnglishAnalyzer.ENGLISH_STOP_WORDS_SET
LUCENE_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)
_POSSESSIVE = ("'s", "'S", "’s", "’S", "＇s", "＇S")  # EnglishPossessiveFilter's three apostrophes
_MAX_TOKEN = 255  # StandardTokenizer's default maximum token length, in UTF-16 characters
_CACHE_LIMIT = 1 << 20  # distinct chunks (or words) remembered before the caches start afresh

# ASCII bytes: upper case → lower case; letters, digits, '_' and the characters that can join
# them (':' '.' "'" between letters, ',' ';' '.' "'" between digits) kept; all else → space.
_KEPT = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_:.',;")
_ASCII_TABLE = bytes(c + 32 if 65 <= c <= 90 else c if c in _KEPT else 32 for c in range(256))

# A UAX #29 word in lower-case ASCII: letters, digits and '_' (ExtendNumLet joins anything),
# with MidLetter/MidNumLet (':' '.' "'") only between two letters and MidNum/MidNumLet
# (',' ';' '.' "'") only between two digits.
_ASCII_WORD = re.compile(r"[a-z0-9_]+(?:(?:(?<=[a-z])[:.'](?=[a-z])|(?<=[0-9])[,;.'](?=[0-9]))[a-z0-9_]+)*")


def _java_lower(word: str) -> str:
    """``word`` lower-cased code point by code point, as Java's ``Character.toLowerCase``."""
    if "Σ" not in word and "İ" not in word:
        return word.lower()
    return "".join("i" if c == "İ" else c.lower() for c in word)  # one by one: no final sigma


def _java_length(word: str) -> int:
    return len(word) if word.isascii() else len(word) + sum(c >= "\U00010000" for c in word)


def _java_prefix(word: str, units: int) -> str:
    """The longest prefix of ``word`` that fits in ``units`` UTF-16 characters."""
    if word.isascii():
        return word[:units]
    end = 0
    for c in word:
        units -= 2 if c >= "\U00010000" else 1
        if units < 0:
            break
        end += 1
    return word[:end]


def _split_long(word: str, first_token: Callable[[str], str]) -> list[str]:
    """Lucene's tokens for a word longer than its scanner's window: at each position, the first
    token of the next 255 characters when one starts there (``first_token``), else skip one."""
    pieces = []
    start = 0
    while start < len(word):
        token = first_token(_java_prefix(word[start : start + _MAX_TOKEN], _MAX_TOKEN))
        if token:
            pieces.append(token)
            start += len(token)
        else:
            start += 1
    return pieces


def _first_ascii_token(window: str) -> str:
    match = _ASCII_WORD.match(window)
    return match.group() if match is not None and match.group().strip("_") else ""


class _Chunks(dict[bytes, Any]):
    """ASCII chunk → its analyzed tokens: a str for one, None for none, a tuple for several."""

    def __init__(self, analyzer: LuceneEnglishAnalyzer) -> None:
        super().__init__()
        self._analyzer = analyzer

    def __missing__(self, chunk: bytes) -> Any:
        core = chunk.strip(b":.',;")  # joiners at either end join nothing
        value: str | tuple[str, ...] | None
        if core.isalnum() and len(core) <= _MAX_TOKEN:  # one plain word (most chunks)
            word = core.decode("ascii")
            value = None if word in LUCENE_STOPWORDS else self._analyzer.stem(word)
        else:
            stem = self._analyzer.stem
            words = self._analyzer._ascii_words(chunk.decode("ascii"))
            tokens = tuple(stem(w) for w in words if w not in LUCENE_STOPWORDS)
            value = tokens[0] if len(tokens) == 1 else tokens or None
        self[chunk] = value
        return value


class LuceneEnglishAnalyzer:
    """Tokenize text as Anserini's default English analyzer does."""

    def __init__(self) -> None:
        self._boundaries: Any = None  # the regex package's patterns, compiled on first non-ASCII text
        self._is_token: Any = None
        self._stems: dict[str, str] = {}
        self._chunks = _Chunks(self)

    def __call__(self, text: str) -> list[str]:
        """The tokens Lucene indexes for ``text``: stopwords dropped, words stemmed."""
        if text.isascii():
            return self._ascii_tokens(text)
        # A line break always ends a word (UAX #29 WB3a/b), so each line is analyzed alone:
        # its ASCII lines take the ASCII path.
        tokens, stem = [], self.stem
        for line in text.split("\n"):
            if line.isascii():
                tokens += self._ascii_tokens(line)
            else:
                tokens += [stem(w) for w in self.words_unicode(line) if w not in LUCENE_STOPWORDS]
        return tokens

    def _ascii_tokens(self, text: str) -> list[str]:
        chunks = self._chunks
        if len(chunks) > _CACHE_LIMIT:  # bounded memory on corpora with millions of distinct words
            chunks.clear()
        tokens = list(filter(None, map(chunks.__getitem__, text.encode("ascii").translate(_ASCII_TABLE).split())))
        if tuple in map(type, tokens):  # a chunk with several tokens (rare): flatten
            tokens = list(chain.from_iterable((t,) if type(t) is str else t for t in tokens))
        return tokens

    def analyze_all(self, texts: Iterable[str]) -> list[list[str]]:
        return [self(text) for text in texts]

    def stem(self, word: str) -> str:
        """Lucene's Porter stem of a lower-case word (remembered)."""
        stem = self._stems.get(word)
        if stem is None:
            if len(self._stems) > _CACHE_LIMIT:
                self._stems.clear()
            stem = self._stems[word] = porter_stem(word)
        return stem

    def words(self, text: str) -> list[str]:
        """Tokens before stopping and stemming (tokenizer, possessive and lower-case filters)."""
        if text.isascii():
            return self._ascii_words(text.encode("ascii").translate(_ASCII_TABLE).decode("ascii"))
        words = []
        for line in text.split("\n"):  # as in __call__
            words += self.words(line) if line.isascii() else self.words_unicode(line)
        return words

    def _ascii_words(self, text: str) -> list[str]:
        """:meth:`words` of lower-case ASCII text."""
        words = []
        for segment in _ASCII_WORD.findall(text):
            for piece in _split_long(segment, _first_ascii_token) if len(segment) > _MAX_TOKEN else (segment,):
                if piece.endswith("'s"):
                    piece = piece[:-2]
                if piece.strip("_"):  # a run of underscores alone is not a token
                    words.append(piece)
        return words

    def words_unicode(self, text: str) -> list[str]:
        """:meth:`words` for any text, from the ``regex`` package's UAX #29 word boundaries (the
        general path: :meth:`words` takes it for text that is not ASCII)."""
        if self._boundaries is None:
            import regex

            self._boundaries = regex.compile(r"\b", flags=regex.WORD | regex.V1)
            # A segment between two boundaries is a token when it holds a letter, a digit or an
            # emoji (Lucene emits those); runs of punctuation or spaces are not.
            self._is_token = regex.compile(r"[\p{L}\p{Nd}\p{Extended_Pictographic}]", flags=regex.V1)
        words = []
        # After a line break, as Lucene, not at the start: there ``regex`` joins a leading
        # combining mark (or other Extend/Format character) to the word after it.
        for segment in self._boundaries.split("\n" + text):
            if not self._token_segment(segment):
                continue
            segment = segment.lstrip("'’")  # a leading quote is not part of the word for Lucene
            long = len(segment) > _MAX_TOKEN // 2 and _java_length(segment) > _MAX_TOKEN
            for piece in _split_long(segment, self._first_unicode_token) if long else (segment,):
                if piece[-2:] in _POSSESSIVE:
                    piece = piece[:-2]
                if piece:
                    words.append(_java_lower(piece))
        return words

    def _token_segment(self, segment: str) -> bool:
        # (the two str checks skip the regex for most segments)
        return not segment.isspace() and (
            segment.isalpha() or segment.isdecimal() or bool(self._is_token.search(segment))
        )

    def _first_unicode_token(self, window: str) -> str:
        first = next(s for s in self._boundaries.split("\n" + window) if s and s != "\n")  # "\n": as above
        return first if first[0] not in "'’" and self._token_segment(first) else ""
