"""RnG-KBQA's generator, with an LLM for T5: it reads the question and the ranker's top-k forms
and writes the final form, which may copy one, correct a relation or join two with AND.

RnG decodes the top-k forms by beam search and executes them in turn until one answers
(execution-augmented inference), else takes the ranker's top form. Here the LLM answers once
(temperature 0, one form a line, best first); each line is parsed, checked against the SKB's
schema and executed in turn, and the first that answers is the form; when none does, the
ranker's top form is (see :func:`choose`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

import harness
from harness_rng.forms import Anchor, Candidate, Form, Forms

__all__ = ["Generated", "choose", "prompt"]

_FENCE = re.compile(r"^```\w*$")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.):]|form\s*\d*\s*:|answer\s*:|logical form\s*:)\s*", re.IGNORECASE)
_NUMBER = re.compile(r"^\W*(\d+)\W*$")


def prompt(forms: Forms, query: str, top: Sequence[Candidate]) -> list[tuple[str, str]]:
    """The generator's chat messages (role, content): the schema, the language, the query and
    the ranked candidates."""
    listing = "\n".join(f"{i + 1}. {c.form}" for i, c in enumerate(top))
    schema = "\n".join(forms.schema())
    answers = " or ".join(forms.skb.candidate_types)
    return [
        (
            "system",
            "You write logical forms: queries over a knowledge graph that select the nodes answering a question.",
        ),
        (
            "user",
            f"The knowledge graph's relations (source type -relation-> target type):\n{schema}\n\n"
            'A form starts at a named entity and follows one or two relations: "NAME" type -relation-> type '
            "follows a relation forwards, <-relation- backwards, each step naming the type reached. "
            f"Two such paths joined by AND select the nodes both reach. A form must end at a {answers}.\n\n"
            f"Question: {query}\n\nCandidate forms, best first:\n{listing}\n\n"
            "Write the form that best answers the question: copy the best candidate, or correct it (another "
            "relation, or a second path joined by AND). Reply with the form only, on one line.",
        ),
    ]


@dataclass
class Generated:
    """What the generator's answer led to. ``source``: "generator" (a line of the answer parsed,
    checked and answered), "ranker" (none did: the top-ranked form); ``error``: why the first
    line failed, when none succeeded."""

    form: Form
    ids: np.ndarray
    source: str
    line: str | None = None
    error: str | None = None


def _lines(answer: str) -> list[str]:
    lines = []
    for raw in answer.splitlines():
        line = raw.strip().strip("`").strip()
        if not line or _FENCE.match(raw.strip()):
            continue
        # "2." or "2)" is a candidate's number, not an empty numbered item
        lines.append(line if _NUMBER.match(line) else _BULLET.sub("", line, count=1).strip())
    return lines


def choose(forms: Forms, answer: str, top: Sequence[Candidate], known: Sequence[Anchor]) -> Generated:
    """The first line of ``answer`` that is an executable form answering some candidate node
    (a bare number picks that candidate), else the top-ranked candidate."""
    error = None
    for line in _lines(answer):
        number = _NUMBER.match(line)
        if number and 1 <= int(number.group(1)) <= len(top):
            chosen = top[int(number.group(1)) - 1]
            return Generated(chosen.form, chosen.ids, "generator", line)
        copied = next((c for c in top if str(c.form) == line), None)
        if copied is not None:
            return Generated(copied.form, copied.ids, "generator", line)
        try:
            form = forms.parse(line, known)
        except harness.HarnessError as exc:
            error = error or str(exc)
            continue
        ids = forms.execute(form)
        if ids is None:
            error = error or f"form {line!r} passes through more than {forms.max_answers} nodes"
        elif not len(ids):
            error = error or f"form {line!r} answers nothing"
        else:
            return Generated(form, ids, "generator", line)
    return Generated(top[0].form, top[0].ids, "ranker", None, error or "the answer holds no form")
