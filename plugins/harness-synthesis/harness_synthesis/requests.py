"""Whether an LLM-written request still states its relational requirement, and whether a
node has a textual property.

The fuse stage asks an LLM to combine a relational requirement ("Which packages does X
recommend?") with textual properties, then to rephrase the result. Small models drift: they
drop the relation ("David Rabel,"), answer instead of asking ("I'm sorry, but as a user…"),
or loop ("aes-key-wrap-aes-key-wrap-…"). A query whose text no longer states its requirement
is a wrong training example with exact-looking answers, so the stage keeps an LLM text only
when :func:`request_problem` finds nothing, and otherwise falls back to
:func:`template_request`, which states everything by construction.

:func:`property_holds` is the literal judge: a property an LLM copied from the gold's
document ("summary: GNU R toolkit for …", "version: 3.3.2-1") holds for a node exactly when the
node's document says the same. Small verifier models judge worse than chance; the literal judge
is exact for copied properties and refuses invented ones (the gold does not have them).

Light on purpose (no LLM imports): dataset tools re-check shipped queries with it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence

__all__ = [
    "FIELD_LABELS",
    "IDENTITY_LABELS",
    "MAX_WORDS",
    "clean_request",
    "property_holds",
    "property_problem",
    "relation_words",
    "request_problem",
    "template_request",
]

MAX_WORDS = 80
# Words of a requirement that name no relation: the answer type and the question's frame.
_FRAME = frozenset(
    "which what that does have been with from this they them their there were also some other into "
    "work package packages paper papers product products item items node nodes entity entities".split()
)
# An LLM talking about the task instead of writing the request.
_META = re.compile(
    r"i'?m sorry|i am sorry|as an ai|i'?m designed|i am designed|rewrite this|search request|"
    r"reply with|request only|can type\s*:|\bhere is|\bhere's|i can help|i'?m here to|please provide|"
    r"must also ask|short properties|(?:a|the|this) (?:debian )?user (?:can|could|might|would|is)|this user|"
    r"^\s*(?:this|it) (?:package|is|library|module|provides)\b",  # describes an answer instead of asking
    re.IGNORECASE,
)
# Field labels an extracted property may carry ("summary: …"): not what the property asks for.
_LABELS = frozenset("summary description version homepage section package name".split())


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _stem(word: str) -> str:
    # "maintained" ~ "maintainer", "depend" ~ "depends", "cited" ~ "cites"; "recommend" !~ "record"
    return word[: max(4, min(6, len(word) - 2))]


def _says(tokens: list[str], word: str) -> bool:
    stem = _stem(word)
    return any(t.startswith(stem) for t in tokens)


def clean_request(answer: str) -> str:
    """An LLM's answer as a request: its first paragraph, without quotes or a "Request:" label."""
    text = answer.strip().split("\n\n")[0].strip().strip('"').strip()
    return re.sub(r"^(?:request|query|question)\s*:\s*", "", text, flags=re.IGNORECASE)


def relation_words(requirement: str, names: Sequence[str]) -> list[str]:
    """The requirement's words that carry a relation: not a slot entity's, not the frame's."""
    named = {t for name in names for t in _tokens(name)}
    return [w for w in dict.fromkeys(_tokens(requirement)) if len(w) >= 4 and w not in _FRAME and w not in named]


#: words a natural request repeats without looping
_FUNCTION_WORDS = frozenset("the and for that with which what who this from are any one".split())


def request_problem(text: str, requirement: str, names: Sequence[str], properties: Sequence[str] = ()) -> str | None:
    """Why ``text`` does not state ``requirement`` (the filled template) and ``properties``, or None.

    ``names`` are the slot entities' names; each must appear verbatim (case aside). Every
    relation word of the requirement must appear (up to its ending), and a word of every
    property: a request without them has other answers than the ones recorded. The text must
    not talk about the task, must not repeat a word four or more times (loops), and must stay
    under ``MAX_WORDS`` words."""
    if not text.strip():
        return "empty"
    lowered = text.lower()
    missing = [name for name in names if name.lower() not in lowered]
    if missing:
        return f"does not name {missing[0]!r}"
    tokens = _tokens(text)
    lost = [w for w in relation_words(requirement, names) if not _says(tokens, w)]
    if lost:
        return f"lost the relation word {lost[0]!r}"
    named = {t for name in names for t in _tokens(name)}
    for prop in properties:
        words = [w for w in dict.fromkeys(_tokens(prop)) if (len(w) >= 4 or w.isdigit()) and w not in _LABELS | _FRAME]
        # a property stated only through a slot entity's name is not stated; two of its words
        # must be there (one may be chance)
        kept = [w for w in words if w not in named]
        said = sum(w in tokens if w.isdigit() else _says(tokens, w) for w in kept)
        if words and said < min(2, len(words)):
            return f"lost the property {prop!r}"
    if _META.search(text):
        return "talks about the task"
    # a loop repeats a content word; "the" four times in a long request is just English
    counts = Counter(t for t in tokens if len(t) >= 3 and t not in _FUNCTION_WORDS)
    word, count = counts.most_common(1)[0] if counts else ("", 0)
    if count >= 4:
        return f"repeats {word!r} {count} times"
    if len(text.split()) > MAX_WORDS:
        return f"longer than {MAX_WORDS} words"
    return None


def template_request(requirement: str, properties: Sequence[str]) -> str:
    """The requirement with the properties appended: states everything, reads stiffly."""
    return f"{requirement} It should have: {'; '.join(properties)}." if properties else requirement


# Fields that name the answer (or another node) rather than describe it: a property "package:
# openhpi" gives the answer away or points at the wrong package.
IDENTITY_LABELS = frozenset({"package", "name", "homepage", "url", "source", "title", "id"})
_QUOTES = re.compile(r"[\"'`\u2018\u2019\u201c\u201d]")


def _normal(text: str) -> str:
    return " ".join(_QUOTES.sub("", text).lower().split()).strip(" .;,")


# Field labels of documents: alone, or with words every document has, they state nothing.
FIELD_LABELS = frozenset({"summary", "description", "version", "homepage", "section", "tags", "maintainer"})
_BOILERPLATE = frozenset(
    "this that these the a an is are it its of for and or to in with package packages contains "
    "provides provided includes library files file data documentation program programs tool tools "
    "debian version".split()
)


def property_problem(prop: str, node_types: Collection[str] = ()) -> str | None:
    """Why ``prop`` cannot be a property of a query, or None. ``node_types``: the SKB's, whose
    names label a document's name line ("- package: aisleriot")."""
    label, sep, value = prop.partition(":")
    label = label.strip().lower()
    labelled = bool(sep) and " " not in label
    if labelled and label in IDENTITY_LABELS | {t.lower() for t in node_types}:
        return f"names the node ({label})"
    text = _normal(value if labelled else prop)
    if _normal(prop) in FIELD_LABELS:
        return "only a field label"
    if len(text) < 3:
        return "too short to ask for"
    if labelled and label == "version":
        return None  # a version string is specific by itself
    if not set(re.findall(r"[a-z0-9]+", text)) - _BOILERPLATE:
        return "only words every document has"
    return None


def property_holds(document: str, prop: str) -> bool:
    """Whether ``document`` says ``prop``: the property, normalised (case, spaces, quotes, end
    punctuation), appears in the normalised document as whole words (``version: 1.0`` does not
    hold for ``version: 1.0.2``; a property cut mid-word holds for nothing)."""
    wanted = _normal(prop)
    if len(wanted) < 3:
        return False
    # no part of a longer token on either side: "1.3.1" is not "1.3.1+dfsg-5", ".0+b1" not "2.0+b1"
    pattern = r"(?<![\w.+~-])" + re.escape(wanted) + r"(?![\w+~]|[.:/-]\w)"
    return re.search(pattern, _normal(document)) is not None
