"""The Porter stemmer exactly as Lucene's ``PorterStemFilter`` applies it.

Lucene ports Martin Porter's own C/Java release of the algorithm, which departs from the 1980
paper in a few places: ``-bli`` → ``-ble`` (not ``-abli`` → ``-able``), ``-logi`` → ``-log``, and
words shorter than three characters are left alone. Any doubled consonant but l, s and z loses
a letter after ``-ed``/``-ing`` is removed (``grokking`` → ``grok``; Snowball's "porter" keeps
``grokk``), and a ``y`` after a consonant counts as a vowel. Lengths and positions are Java's:
a character outside the Basic Multilingual Plane counts as two (a surrogate pair), so ``𝒳s``
is three characters long and loses its ``s``.

The word is not lower-cased: Lucene's analysis lower-cases before stemming, and an upper-case
letter is a consonant here, as in Lucene.

Every test "is there a vowel", "measure m" and "consonant-vowel-consonant ending" reads a string
of ``c``/``v`` marks, one per character (``cv`` below), so each is one C-level string operation.
"""

from __future__ import annotations

__all__ = ["stem"]

# One mark per ASCII character: a, e, i, o, u are vowels; y is decided by its left neighbour.
_MARKS = str.maketrans(
    "".join(map(chr, range(128))),
    "".join("v" if c in "aeiou" else "y" if c == "y" else "c" for c in map(chr, range(128))),
)

# Steps 2, 3 and 4 of the paper (Lucene's step3, step4 and step5), keyed by the letter that
# picks the rule group; within a group the first suffix that matches decides, even when its
# condition then fails. Each rule: (suffix, replacement, marks of the replacement).
_DOUBLE_SUFFIXES: dict[str, tuple[tuple[str, str], ...]] = {  # keyed by the next-to-last letter
    "a": (("ational", "ate"), ("tional", "tion")),
    "c": (("enci", "ence"), ("anci", "ance")),
    "e": (("izer", "ize"),),
    "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
    "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
    "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
    "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
    "g": (("logi", "log"),),
}
_ENDINGS: dict[str, tuple[tuple[str, str], ...]] = {  # keyed by the last letter
    "e": (("icate", "ic"), ("ative", ""), ("alize", "al")),
    "i": (("iciti", "ic"),),
    "l": (("ical", "ic"), ("ful", "")),
    "s": (("ness", ""),),
}
_REMOVABLE: dict[str, tuple[str, ...]] = {  # keyed by the next-to-last letter; removed when m > 1
    "a": ("al",),
    "c": ("ance", "ence"),
    "e": ("er",),
    "i": ("ic",),
    "l": ("able", "ible"),
    "n": ("ant", "ement", "ment", "ent"),
    "o": ("ion", "ou"),  # -ion only after s or t
    "s": ("ism",),
    "t": ("ate", "iti"),
    "u": ("ous",),
    "v": ("ive",),
    "z": ("ize",),
}


def _with_marks(rules: dict[str, tuple[tuple[str, str], ...]]) -> dict[str, tuple[tuple[str, str, str], ...]]:
    # The replacements hold no y, so their marks do not depend on what precedes them.
    return {key: tuple((s, r, r.translate(_MARKS)) for s, r in group) for key, group in rules.items()}


_STEP2 = _with_marks(_DOUBLE_SUFFIXES)
_STEP3 = _with_marks(_ENDINGS)


def _marks(word: str) -> str:
    """``c``/``v`` for each character of ``word``: a, e, i, o, u are vowels, y is one after a
    consonant (not at the start, not after a vowel), anything else is a consonant."""
    if word.isascii():
        marks = word.translate(_MARKS)
        if "y" not in marks:
            return marks
    else:
        marks = "".join("v" if c in "aeiou" else "y" if c == "y" else "c" for c in word)
        if "y" not in marks:
            return marks
    out = list(marks)
    position = marks.find("y")
    while position >= 0:
        out[position] = "c" if position == 0 or out[position - 1] == "v" else "v"
        position = marks.find("y", position + 1)
    return "".join(out)


def stem(word: str) -> str:
    """Lucene's Porter stem of ``word`` (expected lower-case; other characters are consonants)."""
    if word.isascii() or max(word) < "\U00010000":
        if len(word) <= 2:
            return word
        return _stem(word, _marks(word))
    # Java sees a surrogate pair as two characters: stem those, then join the pairs again.
    units = "".join(
        c if c < "\U00010000" else chr(0xD800 + ((ord(c) - 0x10000) >> 10)) + chr(0xDC00 + ((ord(c) - 0x10000) & 0x3FF))
        for c in word
    )
    if len(units) <= 2:
        return word
    return _stem(units, _marks(units)).encode("utf-16-le", "surrogatepass").decode("utf-16-le")


def _stem(w: str, cv: str) -> str:
    # m (the paper's measure) of the first n characters is cv.count("vc", 0, n): the number of
    # vowel-to-consonant changes.

    # Step 1a: plurals.
    if w[-1] == "s":
        if w.endswith("sses") or w.endswith("ies"):  # -sses → -ss, -ies → -i
            w, cv = w[:-2], cv[:-2]
        elif w[-2] != "s":
            w, cv = w[:-1], cv[:-1]

    # Step 1b: -eed, -ed, -ing.
    if w.endswith("eed"):
        if cv.count("vc", 0, len(w) - 3):
            w, cv = w[:-1], cv[:-1]
    elif w[-1] in "dg":
        n = len(w) - 2 if w.endswith("ed") else len(w) - 3 if w.endswith("ing") else -1
        if n >= 0 and "v" in cv[:n]:
            w, cv = w[:n], cv[:n]
            if w.endswith(("at", "bl", "iz")):
                w, cv = w + "e", cv + "v"
            elif n >= 2 and w[-1] == w[-2] and cv[-1] == "c":
                if w[-1] not in "lsz":
                    w, cv = w[:-1], cv[:-1]
            elif cv[-3:] == "cvc" and w[-1] not in "wxy" and cv.count("vc") == 1:
                w, cv = w + "e", cv + "v"

    # Step 1c: y → i when the stem holds a vowel.
    if w[-1] == "y" and "v" in cv[:-1]:
        w, cv = w[:-1] + "i", cv[:-1] + "v"

    # Step 2: double suffixes → single ones, when m > 0 before the suffix.
    if len(w) > 1:
        for suffix, replacement, marks in _STEP2.get(w[-2], ()):
            if w.endswith(suffix):
                n = len(w) - len(suffix)
                if cv.count("vc", 0, n):
                    w, cv = w[:n] + replacement, cv[:n] + marks
                break

    # Step 3: -ic-, -full, -ness..., when m > 0 before the suffix.
    for suffix, replacement, marks in _STEP3.get(w[-1], ()):
        if w.endswith(suffix):
            n = len(w) - len(suffix)
            if cv.count("vc", 0, n):
                w, cv = w[:n] + replacement, cv[:n] + marks
            break

    # Step 4: -ant, -ence... removed when m > 1 before the suffix.
    if len(w) > 1:
        for suffix in _REMOVABLE.get(w[-2], ()):
            if w.endswith(suffix):
                n = len(w) - len(suffix)
                if (suffix != "ion" or (n > 0 and w[n - 1] in "st")) and cv.count("vc", 0, n) > 1:
                    w, cv = w[:n], cv[:n]
                break

    # Step 5: a final -e when m > 1, or m = 1 and the rest does not end consonant-vowel-consonant;
    # -ll → -l when m > 1.
    m = cv.count("vc")
    if w[-1] == "e" and (m > 1 or (m == 1 and not (cv[-4:-1] == "cvc" and w[-2] not in "wxy"))):
        w, cv = w[:-1], cv[:-1]
    if m > 1 and w.endswith("ll"):
        w = w[:-1]
    return w
