"""The ``test-paraphrased`` split of Debian v2: the test queries, reworded so that no requirement is named.

The v2 evaluation texts name every tag, section, maintainer and package of their ``where``
verbatim (:func:`harness_debian.queries_v2.unstated`), which makes them decidable and also lets a
lexical retriever match the pasted names. ``paraphrased.yaml`` rewrites each test query the way a
user would ask — a team by what it packages, a tag by what it means, a section by what it holds,
a package by what it is — and says, per named value, which phrase of the new text stands for it::

    - id: 2                 # the test query it rewrites
      query: Fast-paced action games from the people who package Debian's games, ...
      describes:            # every named value of the test query's where -> its phrase in query
        Debian Games Team: the people who package Debian's games
        game::arcade: Fast-paced action games
        Debian Multimedia Maintainers: ...
      where: {...}          # the test query's where and textual as the paraphrase was written for them
      textual: ...

The split reuses each test query's answers, so its answer sets are exactly ``test``'s; in
``qa/`` the paraphrase of test query N is query ``ID_OFFSET + N`` (STaRK's layout keeps one row
per id), with N's requirements and ``paraphrase_of: N`` in ``requirements.jsonl``.
:func:`problems` refuses, all at once: ids other than the test split's, a text that contains a
named value verbatim (as a whole word, case aside; for tags also any ``facet::value`` token; a
section's word only where the textual requirement does not use it), a
named value without a describing phrase found in the text, and an entry whose ``where`` or
``textual`` is no longer its test query's (the requirement changed since it was written).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from harness import HarnessError, Query

SPLIT = "test-paraphrased"
FILE = "paraphrased.yaml"
#: qa/ id of the paraphrase of test query N: N + ID_OFFSET (evaluation ids are small, train's from 100000)
ID_OFFSET = 10_000
# a debtags-like token ("game::card", "works-with::3dmodel"): none may be pasted into a paraphrase
TAG_TOKEN = re.compile(r"[\w-]+::[\w:-]+")


class Paraphrase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int
    query: str
    describes: dict[str, str]
    where: dict[str, Any]
    textual: str | None = None


def load_paraphrases(path: Path) -> list[Paraphrase]:
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    if not isinstance(raw, list):
        raise HarnessError(f"{path}: expected a list of paraphrases")
    result = []
    for n, entry in enumerate(raw):
        try:
            result.append(Paraphrase.model_validate(entry))
        except ValidationError as exc:
            first = exc.errors()[0]
            qid = entry.get("id") if isinstance(entry, dict) else "?"
            raise HarnessError(
                f"{path}: entry {n} (id {qid}): {'.'.join(map(str, first['loc']))}: {first['msg']}"
            ) from None
    return result


def verbatim(text: str, name: str) -> bool:
    """Whether ``text`` contains ``name`` between non-alphanumerics, case aside: stricter than
    :func:`~harness_debian.queries_v2.names_in_text`, so "games-section" or "git-svn" still name
    ``games`` and ``git``, and a section is refused in any wording ("card games" names ``games``)."""
    return re.search(rf"(?<![a-z0-9]){re.escape(name.lower())}(?![a-z0-9])", text.lower()) is not None


def problems(paraphrases: list[Paraphrase], specs: Mapping[int, Any], test_ids: list[int], path: Path) -> list[str]:
    """Every reason to refuse the paraphrases, one line each (``specs``: test id → its QuerySpec)."""
    from harness_debian.queries_v2 import named_values

    found: list[str] = []
    ids = [p.id for p in paraphrases]
    for qid in sorted({i for i in ids if ids.count(i) > 1}):
        found.append(f"{path}: query {qid} is paraphrased twice")
    for qid in sorted(set(ids) - set(test_ids)):
        found.append(f"{path}: query {qid} is not a test query")
    for qid in sorted(set(test_ids) - set(ids)):
        found.append(f"{path}: test query {qid} has no paraphrase")
    for p in paraphrases:
        spec = specs.get(p.id)
        if spec is None or p.id not in test_ids:
            continue
        label = f"{path}: query {p.id}"
        if p.where != spec.where or (p.textual or None) != (spec.textual or None):
            found.append(f"{label}: its where/textual is not the test query's (the requirement changed): rewrite it")
        pasted = TAG_TOKEN.findall(p.query)
        if pasted:
            found.append(f"{label}: names debtags verbatim ({', '.join(pasted)})")
        named = {name: kind for _, kind, name in named_values(spec.where)}
        for name, kind in named.items():
            # a section named like its packages' language ("python") may be said where the textual
            # requirement itself says it ("formats Python source code"): that word is the textual one
            textual_word = kind == "section" and verbatim(spec.textual or "", name)
            if verbatim(p.query, name) and not textual_word:
                found.append(f"{label}: names the {kind} {name!r} verbatim")
            phrase = p.describes.get(name, "").strip()
            if not phrase:
                found.append(f"{label}: no phrase describes the {kind} {name!r}")
            elif phrase.lower() not in p.query.lower():
                found.append(f"{label}: the phrase for {name!r} is not in the text: {phrase!r}")
        for name in sorted(set(p.describes) - set(named)):
            found.append(f"{label}: describes {name!r}, which its where does not name")
    return found


def paraphrased_split(root: Path, compiled: Mapping[int, Any], test_ids: list[int]) -> list[Query]:
    """The split's queries, test query N's answers under id ``ID_OFFSET + N`` (``compiled``: id →
    :class:`~harness_debian.queries_v2.Compiled`); none when ``root`` ships no paraphrases. Refuses
    with every problem listed."""
    path = root / FILE
    if not path.exists():
        return []
    paraphrases = load_paraphrases(path)
    found = problems(paraphrases, {qid: c.spec for qid, c in compiled.items()}, test_ids, path)
    if found:
        raise HarnessError(f"{len(found)} problem(s) with the paraphrased test queries:\n" + "\n".join(found))
    order = {qid: n for n, qid in enumerate(test_ids)}  # the test split's order
    return [
        Query(ID_OFFSET + p.id, " ".join(p.query.split()), tuple(compiled[p.id].answers))
        for p in sorted(paraphrases, key=lambda p: order[p.id])
    ]
