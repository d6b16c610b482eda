"""Whether a hand-written train text states its draft's whole requirement, and nothing it must not.

A draft (:mod:`harness_debian.train_nl`) records the ``where`` spec, its anchor names, its
properties and its answers (derived by code). Its text is refused (:func:`text_problems`,
every reason at once) when it:

* does not name an anchor of ``where`` as the SKB writes it (``queries_v2.names_in_text``: a
  section as "the utils section", a tag, team or package verbatim);
* has no cue word for a relation of ``where`` (:data:`CUES`: "depends on" may read "needs",
  "built on", "uses"; "maintained by" may read "packaged by", "looked after by");
* loses a property, states too little, talks about the task or loops
  (``harness_synthesis.requests.request_problem``: two content words of every property);
* carries a field label ("summary:", "It should have:") or names one of its own answers;
* copies a run of more than :data:`MAX_COPY` words from a relational candidate's document;
* is a near-duplicate of an evaluation text (word-set Jaccard of at least :data:`NEAR`) or of
  another train text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness_debian.queries_v2 import named_values, names_in_text

MAX_COPY = 5  # the longest run of words a text may share with a candidate's document
NEAR = 0.5  # word-set Jaccard from which a text is a near-duplicate of an evaluation text
# a relation is stated when one of its cues (a regular expression) starts a word of the text
CUES: dict[str, str] = {
    "depends": r"depend|need|requir|rel(?:y|ies|ying)\b|built (?:on|against)|build on|us(?:e|es|ed|ing)\b|link|pull"
    r"|on top of",
    "recommends": r"recommend",
    "suggests": r"suggest",
    "maintained_by": r"maintain|packag|look(?:s|ed)? after|care of|by\b|from\b|team'?s\b",
    "in_section": r"section",
    "tagged": r"tag|debtag",
    "same_source": r"source",
}
for _forward, _reverse in (
    ("depends", "required_by"),
    ("recommends", "recommended_by"),
    ("suggests", "suggested_by"),
    ("maintained_by", "maintains"),
    ("in_section", "section_of"),
    ("tagged", "tag_of"),
):
    CUES[_reverse] = CUES[_forward]
_LABEL = re.compile(
    r"\b(?:summary|description|version|homepage|package|section|tags?|maintainer)\s*:(?!:)|it should have\s*:",
    re.IGNORECASE,
)
_STOP = frozenset(
    "the a an and or of for to in on with that which what is are be it its by from as at this these those any "
    "some can i me my we our you your want need looking something package packages one".split()
)


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def content(text: str) -> set[str]:
    """The words that say what a text is about (no stop words), for near-duplicate checks."""
    return {w for w in words(text) if len(w) >= 3 and w not in _STOP}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def relations(where: Any) -> list[str]:
    """Every relation key of a spec, at any depth, once each, in order."""
    found: list[str] = []
    if isinstance(where, Mapping):
        for key, values in where.items():
            found.append(key)
            for value in values if isinstance(values, list) else [values]:
                found.extend(relations(value))
    return list(dict.fromkeys(found))


def _cued(text: str, cue: str) -> bool:
    return re.search(rf"\b(?:{cue})", " ".join(re.findall(r"[a-z0-9']+", text.lower()))) is not None


def grams(tokens: Sequence[str], n: int = MAX_COPY + 1) -> list[str]:
    """Every run of ``n`` words, in the text's order (the first copied one is reported)."""
    return list(dict.fromkeys(" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)))


def copied(text: str, documents: Iterable[str]) -> str | None:
    """The first run of more than :data:`MAX_COPY` words of ``text`` that a document has."""
    wanted = grams(words(text))
    if not wanted:
        return None
    for document in documents:
        joined = " " + " ".join(words(document)) + " "
        for gram in wanted:
            if " " + gram + " " in joined:
                return gram
    return None


def text_problems(
    text: str,
    draft: dict[str, Any],
    documents: Iterable[str],
    evaluation: Sequence[tuple[int, set[str]]] = (),
) -> list[str]:
    """Why ``text`` does not state ``draft``'s requirement as a natural request (empty: it does).
    ``documents``: its relational candidates' documents; ``evaluation``: (id, :func:`content`)
    of every evaluation text."""
    from harness_synthesis.requests import request_problem

    if not text.strip():
        return ["empty"]
    where = draft["where"]
    problems = [
        f"does not name the {kind} {name!r}"
        for _, kind, name in named_values(where)
        if not names_in_text(text, kind, name)
    ]
    problems += [
        f"no word for the relation {key!r} (e.g. {CUES[key].split('|')[0]!r})"
        for key in relations(where)
        if not _cued(text, CUES[key])
    ]
    # the anchors it names: their words do not count as a property's
    names = [name for _, _, name in named_values(where) if name.lower() in text.lower()]
    stated = request_problem(text, "", names, draft["properties"])
    if stated:
        problems.append(stated)
    label = _LABEL.search(text)
    if label:
        problems.append(f"a field label ({label.group(0)!r})")
    for answer in draft["answers"]:
        if answer["name"] not in names and names_in_text(text, "package", answer["name"]):
            problems.append(f"names its answer {answer['name']!r}")
    run = copied(text, documents)
    if run:
        problems.append(f"copies {MAX_COPY + 1}+ words from a candidate's document ({run!r})")
    mine = content(text)
    for qid, theirs in evaluation:
        score = jaccard(mine, theirs)
        if score >= NEAR:
            problems.append(f"a near-duplicate of evaluation query {qid} (Jaccard {score:.2f})")
    return problems
