"""The natural-language Debian v2 train split's core: drafts, written texts and their check.

The commands are :mod:`harness_debian.train_nl`'s (``draft``, ``check``, ``merge``, ``stats``);
merging is :mod:`harness_debian.train_nl_merge`'s. A **draft** (:class:`Drafter`,
:func:`draft_all`) is a requirement and its answers, all derived by code from the SKB: a
``where`` spec of one of :data:`SHAPES`, grounded from a gold package that answers no evaluation
query (:func:`evaluation`), 0–2 properties narrowing the candidates to at most
:data:`MAX_ANSWERS`, and the answers. :func:`check` holds every written text
(``train-nl/texts/part-KK.yaml``, :func:`load_texts`) against its draft
(:mod:`harness_debian.train_nl_check`).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from harness import SKB, HarnessError, Query, load_stark_layout
from harness_debian.queries_v2 import RELATIONS, Graph, hops, named_values
from harness_debian.train_nl_check import content, relations, text_problems

FIRST_ID = 200_000
MAX_ANSWERS = 10
MAX_CANDIDATES = 1000
KIND = "natural-language"  # statistics.json's "kind": what tells this split from the templated one
# (clauses, weight): a clause is a relation from the gold to a named neighbour, or ``key>inner``
# (two-hop: the gold's neighbour through ``key`` described by its own neighbour through ``inner``)
SHAPES: list[tuple[tuple[str, ...], int]] = [
    (("maintained_by", "tagged"), 4),
    (("maintained_by", "in_section"), 3),
    (("in_section", "tagged"), 3),
    (("depends", "maintained_by"), 3),
    (("depends", "in_section"), 3),
    (("required_by",), 2),
    (("recommended_by",), 2),
    (("recommends", "in_section"), 1),
    (("suggested_by",), 1),
    (("same_source", "tagged"), 1),
    (("depends>maintained_by", "in_section"), 8),
    (("depends>maintained_by", "tagged"), 5),
    (("maintained_by>maintains",), 4),
    (("in_section", "maintained_by>maintains"), 4),
    (("depends>same_source", "in_section"), 3),
    (("depends>in_section", "maintained_by"), 3),
    (("depends>tagged", "in_section"), 2),
    (("required_by>in_section", "tagged"), 2),
    (("required_by>maintained_by", "in_section"), 2),
    (("in_section", "recommends>tagged"), 2),
    (("in_section", "recommended_by>maintained_by"), 2),
    (("suggested_by>tagged",), 2),
    (("in_section", "same_source>tagged"), 2),
    (("depends>maintained_by", "maintained_by"), 2),
    (("depends", "maintained_by>maintains"), 1),
]
# the side of an edge the described node is on (RELATIONS) -> the direction to its neighbours
_DIRECTIONS: dict[str, Literal["out", "in", "both"]] = {"src": "out", "dst": "in", "both": "both"}
_READ = {
    "depends": "depends on",
    "required_by": "is a dependency of",
    "recommends": "recommends",
    "recommended_by": "is recommended by",
    "suggests": "suggests",
    "suggested_by": "is suggested by",
    "maintained_by": "is maintained by",
    "maintains": "maintains",
    "in_section": "is in the section",
    "tagged": "is tagged",
    "same_source": "is built from the same source as",
}
_STOP = frozenset(
    "the and for with from that this into which their there than then also are can its all any such you your "
    "other more most used using use based some nice very well many several various new simple small just etc "
    "provide provides provided providing include includes including contains containing allows allowing along "
    "adding make makes making able easy good way set current appropriate like has have been being will may "
    "should could would does not only one two both each own same".split()
)
_JOIN = frozenset("of for and to in on with from the a an".split())  # may sit inside a phrase
# package name patterns that are mostly not what a user asks for directly (documentation, data, debug)
_MINOR = re.compile(r"-(?:doc|dbg|dbgsym|data|common|l10n|locale|examples)$")
_LIBRARY = re.compile(r"^(?:lib|python3-|r-cran-|r-bioc-|golang-|node-|ruby-|php-)|-(?:dev|perl|java)$")
# request_problem's words that never count as a property's (labels, the question's frame)
_FRAME = frozenset(
    "summary description version homepage section package name which what that does have been with from "
    "this they them their there were also some other into work packages".split()
)


def default_root() -> Path:
    from harness_debian.dataset import VERSIONS

    return VERSIONS["2"]


def reading(where: Mapping[str, Any], what: str = "a package") -> str:
    """``where`` in plain words, for writers ("a package that depends on a package that …")."""
    parts = []
    for key, values in where.items():
        for value in values if isinstance(values, list) else [values]:
            inner = "a maintainer" if key == "maintained_by" else "a package"
            target = f"({reading(value, inner)})" if isinstance(value, Mapping) else value
            parts.append(f"{_READ.get(key, key)} {target}")
    return f"{what} that " + " and ".join(parts)


class Drafter:
    """What drafting needs once: the SKB, its graph, the golds allowed, normalised documents."""

    def __init__(self, skb: SKB, forbidden: set[int]) -> None:
        self.skb, self.graph, self.forbidden = skb, Graph(skb), forbidden
        golds = [
            int(n)
            for n in skb.candidate_ids
            if int(n) not in forbidden
            and len(str(skb.fields[int(n)].get("description", ""))) >= 80
            and not _MINOR.search(skb.names[int(n)])
        ]
        # programs are drawn more often than libraries (as in the evaluation queries)
        self.programs = [n for n in golds if not _LIBRARY.search(skb.names[n])]
        self.libraries = [n for n in golds if _LIBRARY.search(skb.names[n])]
        self._normal: dict[int, str] = {}

    def normal(self, node: int) -> str:
        if node not in self._normal:
            self._normal[node] = " ".join(re.sub(r"[\"'`‘’“”]", "", self.skb.document(node)).lower().split())
        return self._normal[node]

    def _pick(self, rng: random.Random, node: int, key: str, avoid: set[int], itself: bool = False) -> int | None:
        relation, side = RELATIONS[key]
        direction: Literal["out", "in", "both"] = _DIRECTIONS[side]
        options = sorted(
            {int(i) for i in self.skb.neighbors(node, relation, direction)} | ({node} if itself else set())
        )
        options = [n for n in options if n not in avoid]
        return rng.choice(options) if options else None

    def clause(self, rng: random.Random, gold: int, kind: str) -> tuple[str, Any] | None:
        key, _, inner = kind.partition(">")
        near = self._pick(rng, gold, key, {gold})
        if near is None or not inner:
            return None if near is None else (key, self.skb.names[near])
        # the neighbour's own neighbour names it; same_source is reflexive (it may name itself)
        far = self._pick(rng, near, inner, {gold}, itself=inner == "same_source")
        return None if far is None else (key, {inner: self.skb.names[far]})

    def phrases(self, gold: int, avoid: set[str]) -> list[str]:
        """Short phrases of the gold's summary and description a user might ask for: 2–4 words
        within a clause, starting and ending with a content word, two of them not in ``avoid``."""
        fields = self.skb.fields[gold]
        summary = str(fields.get("summary", ""))
        text = f"{summary}\n{str(fields.get('description', ''))[:600]}"
        found = []
        for segment in re.split(r"[,.;:()\[\]!?\"'`\n]|\s-\s", text):
            tokens = segment.split()
            for size in (2, 3, 4):
                for i in range(len(tokens) - size + 1):
                    part = tokens[i : i + size]
                    if any(not re.fullmatch(r"[\w+#/-]+", t) for t in part):
                        continue
                    lowered = [t.lower() for t in part]
                    if any(len(w) < 3 or w in _STOP or w in _JOIN for w in (lowered[0], lowered[-1])):
                        continue
                    if any(w in _STOP or (len(w) < 3 and w not in _JOIN) for w in lowered):
                        continue
                    strong = [w for w in (t.lower() for t in part) if len(w) >= 4 and w not in _FRAME | avoid]
                    if len(strong) >= 2:
                        found.append(" ".join(part))
        return list(dict.fromkeys(found))

    def narrow(
        self, rng: random.Random, gold: int, candidates: list[int], avoid: set[str]
    ) -> tuple[list[str], list[int]] | None:
        """0–2 properties of the gold and the answers they leave (at most :data:`MAX_ANSWERS`)."""
        from harness_synthesis.requests import property_holds, property_problem

        if len(candidates) == 1 and rng.random() < 0.3:
            return [], candidates  # a single candidate: the need may be any of its own
        document = self.skb.document(gold)
        phrases = [p for p in self.phrases(gold, avoid) if property_problem(p) is None and property_holds(document, p)]
        if not phrases:
            return None
        hits = {p: {c for c in candidates if p.lower() in self.normal(c)} for p in phrases}
        chosen: list[str] = []
        few = [p for p in phrases if len(hits[p]) <= MAX_ANSWERS]
        # a phrase of the summary (what the package is for) where one narrows enough
        own = [p for p in few if p.lower() in self.skb.fields[gold].get("summary", "").lower()]
        pool = own if own and rng.random() < 0.7 else few
        chosen.append(rng.choice(pool) if pool else min(phrases, key=lambda p: (len(hits[p]), p)))
        left = hits[chosen[0]]
        if len(left) > MAX_ANSWERS or rng.random() < 0.15:  # a second property, also for variety
            others = [p for p in phrases if not set(p.lower().split()) & set(chosen[0].lower().split())]
            if others:
                second = min(others, key=lambda p: (len(left & hits[p]), rng.random()))
                chosen.append(second)
        answers = [c for c in candidates if all(property_holds(self.skb.document(c), p) for p in chosen)]
        return (chosen, answers) if 1 <= len(answers) <= MAX_ANSWERS else None

    def draft(self, rng: random.Random, shape: tuple[str, ...], gold: int) -> dict[str, Any] | None:
        where: dict[str, Any] = {}
        for kind in shape:
            clause = self.clause(rng, gold, kind)
            if clause is None:
                return None
            where[clause[0]] = clause[1]
        candidates = self.graph.candidates(where, "draft")
        if not 1 <= len(candidates) <= MAX_CANDIDATES:
            return None
        names = [name for _, _, name in named_values(where)]
        avoid = {w for name in names for w in re.findall(r"[a-z0-9]+", name.lower())}
        narrowed = self.narrow(rng, gold, candidates, avoid)
        if narrowed is None:
            return None
        properties, answers = narrowed
        # an evaluation answer, or an anchor that answers its own query, makes no training query
        if set(answers) & self.forbidden or {self.skb.names[a] for a in answers} & set(names):
            return None
        fields = self.skb.fields[gold]
        return {
            "shape": "+".join(shape),
            "hops": hops(where),
            "where": where,
            "reading": reading(where),
            "names": [{"kind": kind, "name": name} for _, kind, name in named_values(where)],
            "relations": relations(where),
            "properties": properties,
            "candidates": len(candidates),
            "answers": [{"id": a, "name": self.skb.names[a]} for a in answers],
            "gold": {"id": gold, "name": self.skb.names[gold]},
            "excerpt": f"{fields.get('summary', '')} | {' '.join(str(fields.get('description', '')).split())[:400]}",
        }


def evaluation(root: Path) -> list[Query]:
    """The evaluation queries: val, test and their variants (``test-paraphrased``)."""
    shipped = load_stark_layout(root / "qa")
    return [q for name in shipped.split_names if name.split("-")[0] in ("val", "test") for q in shipped.split(name)]


def draft_all(skb: SKB, forbidden: set[int], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` drafts, the shapes in proportion to their weights (a shape no gold grounds within
    300 tries is skipped that round); each gold once; deterministic in ``seed``."""
    rng = random.Random(seed)
    drafter = Drafter(skb, forbidden)
    schedule = [shape for shape, weight in SHAPES for _ in range(weight)]
    used: set[int] = set()
    records: list[dict[str, Any]] = []
    round_ = 0
    while len(records) < n:
        shape = schedule[round_ % len(schedule)]
        round_ += 1
        if round_ > 20 * n:
            raise HarnessError(f"only {len(records)} drafts after {round_} rounds")
        for _ in range(300):
            gold = rng.choice(drafter.programs if rng.random() < 0.7 else drafter.libraries)
            record = None if gold in used else drafter.draft(rng, shape, gold)
            if record is not None:
                used.add(gold)
                records.append({"id": FIRST_ID + len(records), **record})
                break
    return records


def part_paths(nl: Path, kind: str, part: str | None = None) -> list[Path]:
    suffix = "jsonl" if kind == "drafts" else "yaml"
    return sorted((nl / kind).glob(f"part-{part or '*'}.{suffix}"))


def load_drafts(nl: Path, part: str | None = None) -> dict[int, dict[str, Any]]:
    drafts = {}
    for path in part_paths(nl, "drafts", part):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                drafts[record["id"]] = {**record, "part": path.stem.removeprefix("part-")}
    if not drafts:
        raise HarnessError(f"{nl / 'drafts'}: no drafts{f' of part {part}' if part else ''}")
    return drafts


def load_texts(nl: Path, part: str | None = None) -> tuple[dict[int, dict[str, Any]], list[str]]:
    """Every written text, ``{id: {"text", "by", "part"}}``, and problems of the files' form."""
    texts: dict[int, dict[str, Any]] = {}
    problems = []
    for path in part_paths(nl, "texts", part):
        entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
        for n, entry in enumerate(entries if isinstance(entries, list) else [None]):
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), int) or not entry.get("text"):
                problems.append(f"{path}: entry {n}: expected {{id: N, text: ..., by: ...}}")
            elif entry["id"] in texts:
                problems.append(f"{path}: query {entry['id']}: written twice")
            else:
                by = str(entry.get("by", "unrecorded"))
                texts[entry["id"]] = {"text": " ".join(str(entry["text"]).split()), "by": by, "part": path.stem[5:]}
    return texts, problems


def check(root: Path, part: str | None = None, full: bool = False) -> tuple[list[str], list[dict[str, Any]]]:
    """Every problem of the written texts (of one part), and the checked records (draft + text).
    ``full`` also recomputes every draft's candidates and answers from the SKB."""
    from harness_synthesis.requests import property_holds

    nl = root / "train-nl"
    drafts = load_drafts(nl, part)
    texts, problems = load_texts(nl, part)
    skb = SKB.load(root / "skb")
    graph = Graph(skb)
    queries = evaluation(root)
    forbidden = {a for q in queries for a in q.answer_ids}
    others = [(q.id, content(q.text)) for q in queries]
    seen: dict[str, int] = {}
    records = []
    for qid in sorted(set(drafts) | set(texts)):
        draft, written = drafts.get(qid), texts.get(qid)
        if draft is None:
            problems.append(f"query {qid}: a text without a draft (part {written and written['part']})")
            continue
        if written is None and not full:
            continue
        candidates = graph.candidates(draft["where"], f"query {qid}: where")
        answers = [a["id"] for a in draft["answers"]]
        if full and answers != [
            c for c in candidates if all(property_holds(skb.document(c), p) for p in draft["properties"])
        ]:
            problems.append(f"query {qid}: its answers are not what the SKB gives (candidates and properties)")
        if set(answers) & forbidden:
            problems.append(f"query {qid}: answers {sorted(set(answers) & forbidden)} answer evaluation queries")
        if written is None:
            continue
        if written["part"] != draft["part"]:
            problems.append(f"query {qid}: written in part {written['part']}, drafted in part {draft['part']}")
        normal = " ".join(re.findall(r"[a-z0-9]+", written["text"].lower()))
        if normal in seen:
            problems.append(f"query {qid}: the same text as query {seen[normal]}")
        seen[normal] = qid
        found = text_problems(written["text"], draft, (skb.document(c) for c in candidates), others)
        problems.extend(f"query {qid}: {problem}" for problem in found)
        records.append({**draft, "text": written["text"], "by": written["by"]})
    return problems, records
