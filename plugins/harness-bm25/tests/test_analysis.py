"""Lucene's English analysis: the Porter stemmer against NLTK's Martin-Porter mode and against
Lucene's own ``PorterStemFilter``, and the ASCII path (ASCII documents, ASCII lines of the others)
against the general UAX #29 path on every Debian document. (The whole analyzer against Lucene's:
harness-lucene's tests.)"""

from __future__ import annotations

import importlib
import os
import random
import subprocess
import sys
import types
from collections.abc import Callable

import pytest

from harness_bm25 import analysis
from harness_bm25.analysis import LUCENE_STOPWORDS, LuceneEnglishAnalyzer
from harness_bm25.porter import stem
from harness_debian.dataset import DebianDataset

# Texts where the ASCII path has a choice to make: joiners between letters or digits or neither,
# underscores, quotes and possessives, tokens around the 255-character limit.
EDGE_TEXTS = [
    "a:b 1.5 1,000.5 o'neil's a_b __ x.y.z 3a a3 rock'n'roll trailing's' '' 'em ''a a'' it's. JOHN'S",
    "1:2 a,b 1;2 a;b 1'2 a'1 1.a a.1 a3.5 a3.b _a a_ _1_ 1_a a_.b a._b e.g., U.S.A. x...y a..b 1..2 1,,2",
    "http://x.org/a?b=c foo@bar.com JOHN'S'S a's's x's as is The grokking possibly biology (see: foo)",
    "x" * 254 + "'s tail " + "x" * 253 + "'s " + "x" * 255 + "'s " + "x" * 254 + ".y" + "z" * 10,
    "_" * 300 + "a " + "a" + "_" * 300 + " " + "1" * 254 + ",5 " + "x" * 250 + "'y'z'w'q" + "r" * 10,
    "ab" * 200 + "'s " + "1" * 300 + " " + "x" * 510 + "ing " + "y" * 300 + ":" + "q" * 5,
    "tab\tnew\nline\r\nform\x0cfeed\x0bvt\x1fus\x00nul",
]

# Every suffix the algorithm looks at, after stems of each shape (short, vowel-less, y-ending,
# doubled consonants, cvc endings) and alone.
SUFFIXES = (
    "s sses ies ss eed ed ing ated bled ized hopped filled fizzed hissed ing y ational tional enci anci izer bli "
    "alli entli eli ousli ization ation ator alism iveness fulness ousness aliti iviti biliti logi icate ative "
    "alize iciti ical ful ness al ance ence er ic able ible ant ement ment ent sion tion ion ou ism ate iti ous "
    "ive ize e ll ale ole"
).split()
STEMS = ["", *"b tr a y by bay oy yy sky hop fil gener rel cond troubl grok xyz happ wax bow ye mess rat zz".split()]


def tricky_words() -> list[str]:
    letters = "aeiouybcdlmnrstwxz"
    words = [a + b for a in letters for b in letters] + list(letters)
    words += [s + suffix for s in STEMS for suffix in SUFFIXES]
    rng = random.Random(14)
    words += ["".join(rng.choice(letters) for _ in range(rng.randint(3, 12))) for _ in range(20000)]
    return sorted(set(words) - {""})


def reference(module: str) -> types.ModuleType:
    """A reference implementation: skipped when missing, unless HARNESS_REQUIRE_REFERENCES=1."""
    try:
        return importlib.import_module(module)
    except ImportError:
        message = f"the reference {module} is not installed"
        if os.environ.get("HARNESS_REQUIRE_REFERENCES") == "1":
            pytest.fail(message + "; HARNESS_REQUIRE_REFERENCES=1 requires every reference implementation")
        pytest.skip(message)


@pytest.fixture(scope="module")
def debian_documents() -> list[str]:
    return list(DebianDataset().load_skb().documents())


@pytest.fixture(scope="module")
def debian_words(debian_documents: list[str]) -> list[str]:
    """Every distinct word the Debian documents give the stemmer."""
    analyzer, words = LuceneEnglishAnalyzer(), set()
    for document in debian_documents:
        words.update(analyzer.words(document))
    return sorted(words - LUCENE_STOPWORDS)


def test_porter_equals_nltks_martin_porter(debian_words: list[str]) -> None:
    nltk_porter = reference("nltk.stem.porter")
    porter = nltk_porter.PorterStemmer(mode=nltk_porter.PorterStemmer.MARTIN_EXTENSIONS)
    words = debian_words + tricky_words()
    assert len(debian_words) > 100_000
    # NLTK counts a character outside the BMP as one, Java (and Lucene) as two: the Lucene test checks those.
    words = [w for w in words if max(w) < "\U00010000"]
    mismatched = [(w, porter.stem(w, to_lowercase=False), stem(w)) for w in words]
    mismatched = [m for m in mismatched if m[1] != m[2]]
    assert not mismatched, mismatched[:20]


def lucene_stemmer() -> Callable[[list[str]], list[str]]:
    """Lucene's PorterStemFilter alone (after a whitespace tokenizer), through Pyserini."""
    reference("pyserini")
    from harness_lucene.retriever import start_jvm

    start_jvm()
    from pyserini.analysis import Analyzer  # starts the JVM, with Lucene on its class path

    autoclass = importlib.import_module("jnius").autoclass
    custom = autoclass("org.apache.lucene.analysis.custom.CustomAnalyzer")
    analyzer = Analyzer(custom.builder().withTokenizer("whitespace").addTokenFilter("porterStem").build())

    def stems(words: list[str]) -> list[str]:
        out: list[str] = []
        for start in range(0, len(words), 2000):  # a batch per call: the JNI round trip dominates
            out += analyzer.analyze(" ".join(words[start : start + 2000]))
        assert len(out) == len(words)
        return out

    return stems


def test_porter_equals_lucenes(debian_words: list[str]) -> None:
    beyond_bmp = ["𝒳s", "a𝒳s", "𝒳ies", "𝒳ing", "y𝒳ed", "𝒳", "𝒳𝒳", "𝐚𝐛ing", "🚀s", "é𝒳y", "über", "naïve"]
    words = debian_words + tricky_words() + beyond_bmp
    mismatched = [(w, r, stem(w)) for w, r in zip(words, lucene_stemmer()(words), strict=True) if r != stem(w)]
    assert not mismatched, mismatched[:20]


@pytest.mark.slow
def test_the_ascii_path_equals_the_general_path(debian_documents: list[str]) -> None:
    """On every Debian document (and the edge cases), the words and tokens of the ASCII path
    (for ASCII documents, and the ASCII lines of the others) are those of the ``regex`` UAX #29
    path over the whole text."""
    analyzer, general = LuceneEnglishAnalyzer(), LuceneEnglishAnalyzer()
    mixed = ["café's x.org\n1,000.5 o'neil's\r\nΟΔΟΣ a:b\n\u0301abc\n" + EDGE_TEXTS[3], "\n".join(EDGE_TEXTS) + "\né"]
    texts = debian_documents + EDGE_TEXTS + mixed
    assert sum(t.isascii() for t in texts) > 60_000 and sum(not t.isascii() for t in texts) > 1000
    mismatched = []
    for text in texts:
        words = general.words_unicode(text)
        tokens = [general.stem(w) for w in words if w not in LUCENE_STOPWORDS]
        if analyzer.words(text) != words or analyzer(text) != tokens:
            mismatched.append(text)
    assert not mismatched, mismatched[:3]


def test_tokens_are_the_stems_of_the_words_in_every_path(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [*EDGE_TEXTS, "Ünïcödé text's ΟΔΟΣ İstanbul straße 𝒳s", "", "   ", "the a an"]
    analyzer = LuceneEnglishAnalyzer()
    expected = [[analyzer.stem(w) for w in analyzer.words(t) if w not in LUCENE_STOPWORDS] for t in texts]
    assert analyzer.analyze_all(texts) == expected
    assert analyzer.analyze_all(texts) == expected  # again, from the chunk cache
    monkeypatch.setattr(analysis, "_CACHE_LIMIT", 3)
    assert analyzer.analyze_all(texts) == expected  # the caches emptied on the way
    assert len(analyzer._chunks) < 100 and len(analyzer._stems) < 100


def test_words_are_lower_cased_as_java_does() -> None:
    analyzer = LuceneEnglishAnalyzer()
    assert analyzer.words("ΟΔΟΣ İSTANBUL John＇s") == ["οδοσ", "istanbul", "john"]  # no final sigma; U+0130 → i


def test_importing_the_analyzer_loads_no_heavy_package() -> None:
    code = (
        "import sys, harness_bm25.analysis as a; a.LuceneEnglishAnalyzer()('plain ascii text');"
        "print(sorted(m for m in ('nltk', 'regex') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
