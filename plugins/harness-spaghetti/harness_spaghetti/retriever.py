"""The ``spaghetti`` retriever: SPAGHETTI (hybrid retrieval + semantic parsing + verification)
adapted to ranking SKB nodes.

Per batch of queries, in parallel (the LLM's work on a worker thread while the text
retrievers search):

* **kb** — semantic parsing: the query's linked entities and the SKB's schema go to an LLM,
  which writes anchored typed relation paths (:mod:`harness_spaghetti.parsing`); they are
  checked, resolved and executed, and a failure's message is fed back once for a second try;
* **text** — a text retriever over node documents (``text``, bm25 by default);
* **tables** — a retriever over documents with their relations linearized (``tables``,
  ``bm25-relations`` by default): SPAGHETTI's linearized tables and infoboxes;
* **llm** (off by default) — the LLM names answers from its own knowledge, linked by exact name
  (SPAGHETTI's LLM-generated claims, kept only if verified).

The candidate lists are fused (``concat``, as SPAGHETTI pools its evidence, or ``rrf``) into at
most ``candidates`` nodes, which an LLM verifies: each candidate's document (with relations)
and the query, answered yes or no (``yes-no``), or harness-llm's reranker (STaRK's pointwise
0–1 score, or listwise). Verified candidates come first, in fused order; the fused lists' other
nodes follow, up to ``k``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, Self

import numpy as np
from pydantic import Field, model_validator

import harness
from harness import SKB, BuildContext, HarnessError, Query, Ranking
from harness_llm.api import LLM, Completion, Message, check_llm, get_llm
from harness_llm.options import LLMSpec, UsesLLM
from harness_llm.rerank import LLMReranker
from harness_spaghetti.parsing import LinkedEntity, Schema, execute, normalize, read_answer

__all__ = ["SpaghettiRetriever", "fuse", "parse_verdict"]

Source = Literal["kb", "text", "tables", "llm"]
#: SPAGHETTI's evidence order (knowledge base, text, tables), the LLM's own claims last
ORDER: tuple[str, ...] = ("kb", "text", "tables", "llm")
_VERDICT = re.compile(r"\b(yes|no|true|false)\b", re.I)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


def _default_sources() -> list[Source]:
    return ["kb", "text", "tables"]


def parse_verdict(answer: str) -> bool | None:
    """The first yes/no (or true/false) in ``answer``; None when there is none."""
    match = _VERDICT.search(answer)
    return None if match is None else match.group(1).lower() in ("yes", "true")


def fuse(
    lists: dict[str, np.ndarray], method: str, per_source: int, rrf_k: int = 60
) -> tuple[list[int], dict[int, str]]:
    """Every node of ``lists`` (source name → ids, best first) in one order, and the source that
    put each one in.

    ``concat`` (SPAGHETTI pools each source's evidence, knowledge base first): each source in
    turn adds its first ``per_source`` nodes not already in; the rest follow, one from each
    source in turn. ``rrf``: reciprocal rank fusion, ties in first-appearance order; a node's
    source is the one that ranks it best."""
    order: list[int] = []
    origin: dict[int, str] = {}
    if method == "rrf":
        scores: dict[int, float] = {}
        best: dict[int, tuple[int, str]] = {}
        for name, ids in lists.items():
            for rank, node in enumerate(ids.tolist()):
                scores[node] = scores.get(node, 0.0) + 1.0 / (rrf_k + rank + 1)
                if node not in best or rank < best[node][0]:
                    best[node] = (rank, name)
        order = sorted(scores, key=lambda n: -scores[n])  # stable: first appearance breaks ties
        return order, {n: best[n][1] for n in order}
    queues = {name: ids.tolist() for name, ids in lists.items()}
    read = dict.fromkeys(queues, 0)  # how far each list has been read

    def take(name: str) -> bool:
        """Add the next node of ``name``'s list that is not in yet; False when it has none."""
        queue = queues[name]
        while read[name] < len(queue):
            node = queue[read[name]]
            read[name] += 1
            if node not in origin:
                origin[node] = name
                order.append(node)
                return True
        return False

    for name in queues:
        for _ in range(per_source):
            if not take(name):
                break
    while any([take(name) for name in queues]):  # a list, not a generator: every source takes its turn
        pass
    return order, origin


class SpaghettiRetriever(harness.Retriever):
    """SPAGHETTI over an SKB: semantic parsing, text and linearized-relation retrieval, fused and verified by an LLM."""

    name = "spaghetti"
    version = "2"
    regime = "llm-at-query-time"
    batch_size = 8

    class Options(UsesLLM):
        # required, as harness-llm's reranker's: a run never pays an API model nobody named
        llm: LLMSpec = Field(
            description="provider:model (required), e.g. openai:gpt-5.4-mini, or openai:smollm2 with "
            "llm_params.base_url of a local server",
        )
        sources: list[Source] = Field(
            default_factory=_default_sources,
            description="kb: the LLM's structured query, executed; text: the text retriever; tables: the "
            "retriever over linearized relations; llm: answers the LLM names itself",
        )
        text: str = Field("bm25", description="the text retriever (registry entry or plugin)")
        tables: str = Field(
            "bm25-relations", description="the retriever over documents with their relations linearized"
        )
        depth: int = Field(100, gt=0, description="results read from each retriever (the fused list's length)")
        candidates: int = Field(20, gt=0, description="fused candidates the LLM verifies")
        per_source: int | None = Field(
            None, gt=0, description="concat: each source's share of the candidates (default: an equal share)"
        )
        fusion: Literal["concat", "rrf"] = Field(
            "concat", description="concat: each source's share in turn (SPAGHETTI's pooling); rrf: reciprocal ranks"
        )
        rrf_k: int = Field(60, gt=0, description="rrf's rank constant")
        verifier: Literal["yes-no", "pointwise", "listwise", "none"] = Field(
            "yes-no",
            description="yes-no: does the candidate meet the query (verified first); pointwise/listwise: "
            "harness-llm's reranker prompts (STaRK's 0-1 score, or one ordering); none: fused order",
        )
        verify_weight: float = Field(
            0.1, ge=0, description="weight of the fused rank in a verified score (STaRK's sim_weight)"
        )
        doc_chars: int = Field(2000, gt=0, description="characters of each document (with relations) verified")
        verify_max_tokens: int = Field(8, gt=0, description="the answer budget of a yes-no verdict")
        max_entities: int = Field(10, ge=0, description="linked entities shown to the parser")
        max_ngram: int = Field(5, gt=0, description="node names of more words are never linked")
        max_constraints: int = Field(3, gt=0, description="anchored paths in one structured query (intersected)")
        max_execution: int = Field(
            10_000, gt=0, description="a path whose frontier passes this many nodes is refused (a hub)"
        )
        feedback: bool = Field(True, description="feed a failed query's error back to the parser once")
        parse_max_tokens: int = Field(128, gt=0, description="the answer budget of the structured query")
        claims: int = Field(5, gt=0, description="llm source: answers the LLM is asked to name")

        @model_validator(mode="after")
        def _consistent(self) -> Self:
            if not self.sources or len(set(self.sources)) != len(self.sources):
                raise ValueError(f"sources must be distinct and not empty (got {self.sources})")
            self.sources = [s for s in ORDER if s in self.sources]  # the evidence order, whatever was written
            if self.candidates < len(self.sources):
                raise ValueError(f"candidates ({self.candidates}) must be at least one per source ({self.sources})")
            if self.per_source is None:  # resolved here, so rows record (and hash) what runs
                self.per_source = self.candidates // len(self.sources)
            if self.per_source * len(self.sources) > self.candidates:
                raise ValueError(
                    f"per_source ({self.per_source}) × {len(self.sources)} sources exceeds "
                    f"candidates ({self.candidates})"
                )
            return self

    options: Options

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        # a missing key fails here, as the run resolves, not after the SKB is loaded
        check_llm(self.options.llm, self.options.llm_params, f"retriever {self.name!r}")
        self._skb: SKB | None = None
        self._schema: Schema | None = None
        self._linker: harness.EntityLinker | None = None
        self._llm: LLM | None = None
        self._reranker: LLMReranker | None = None
        self._retrievers: dict[str, harness.Retriever] = {}
        self._lock = threading.Lock()
        self._counts: dict[str, float] = {}
        self._cost: float | None = 0.0

    def uses(self) -> list[str]:
        used = [getattr(self.options, s) for s in ("text", "tables") if s in self.options.sources]
        return list(dict.fromkeys(used))

    # -- health: whether the structured query and the verifier ran, from each ranking's details
    @classmethod
    def health(cls, details: dict[str, Any] | None) -> dict[str, float]:
        details = details or {}
        counters: dict[str, float] = {"linked": float(bool(details.get("linked")))}  # an anchor found in the text
        if "parse" in details:
            counters["parsed"] = float(bool(details["parse"].get("ok")))
            counters["executed"] = float(details.get("execution_size", 0) > 0)
            counters["kb_fallback"] = float("fallback" in details)
        said = [c["verdict"] for c in details.get("candidates", []) if isinstance(c.get("verdict"), str)]
        if said:
            counters["verdicts"] = float(len(said))
            for value in ("yes", "no", "unreadable"):
                counters[f"verdict_{value}"] = float(said.count(value))
        return counters

    @classmethod
    def health_checks(cls, params: dict[str, Any]) -> list[harness.HealthCheck]:
        checks = []
        if "kb" in params.get("sources", ()):
            checks.append(harness.HealthCheck("executed", "a structured query executed on the knowledge base"))
        if params.get("verifier") == "yes-no":
            # a verifier that says the same thing of every candidate only reorders by its tie-break
            checks.append(harness.HealthCheck("verdict_yes", "the verifier said yes", at_least=0.02, per="verdicts"))
            checks.append(harness.HealthCheck("verdict_no", "the verifier said no", at_least=0.02, per="verdicts"))
        return checks

    def build(self, skb: SKB, context: BuildContext) -> None:
        options = self.options
        self._skb, self._schema = skb, Schema.of(skb)
        self._linker = harness.EntityLinker(skb.names, max_ngram=options.max_ngram)
        if skb.num_nodes:
            skb.neighbors(0)  # both adjacency directions built now, not on the parsing thread
        used = [s for s in ("text", "tables") if s in options.sources]
        self._retrievers = {s: context.retriever(getattr(options, s)) for s in used}
        params = dict(options.llm_params)
        if "device" in params and params["device"] is None:  # a local model runs where the run does
            params["device"] = context.device
        self._llm = get_llm(options.llm, **params)
        if options.verifier in ("pointwise", "listwise"):
            # harness-llm's reranker, its prompts and parsers; handed the fused candidates directly
            self._reranker = LLMReranker(
                first_stage=self.name,
                candidates=options.candidates,
                llm=options.llm,
                llm_params=params,
                mode=options.verifier,
                first_stage_weight=options.verify_weight,
                doc_chars=options.doc_chars,
            )
            inner = BuildContext(cache_dir=context.cache_dir, device=context.device, build_retriever=lambda _: self)
            self._reranker.build(skb, inner)

    # -- accounting --------------------------------------------------------------------------
    def _ask(self, stage: str, prompts: Sequence[Sequence[Message]], max_tokens: int) -> list[Completion]:
        assert self._llm is not None
        if not prompts:
            return []
        answers = self._llm.complete_many(list(prompts), max_tokens=max_tokens)
        with self._lock:
            for answer in answers:
                self._add(f"{stage}_calls", 1)
                self._add(f"{stage}_input_tokens", answer.input_tokens)
                self._add(f"{stage}_output_tokens", answer.output_tokens)
                self._cost = None if self._cost is None or answer.cost_usd is None else self._cost + answer.cost_usd
        return answers

    def _add(self, key: str, amount: float) -> None:
        self._counts[key] = self._counts.get(key, 0) + amount

    def usage(self) -> dict[str, Any]:
        """The provider's calls, tokens and cost (the verifier's LLM included), and per stage
        (parse, verify, claims) the calls and tokens this retriever asked for."""
        with self._lock:
            mine: dict[str, Any] = {key: int(value) for key, value in sorted(self._counts.items())}
            cost = self._cost
        reports = [self._llm.usage()] if self._llm is not None else []
        if self._reranker is not None:
            reports.append({k: v for k, v in self._reranker.usage().items() if k != "malformed_answers"})
        total: dict[str, Any] = {}
        for report in reports:
            for key, value in report.items():
                old = total.get(key)
                if isinstance(value, int | float) and not isinstance(value, bool) and key in total:
                    total[key] = None if old is None else old + value
                elif key not in total or value is None:
                    total[key] = value
        if not any(reports) and self._llm is not None:  # a provider that keeps no accounts: what it answered
            stages = ("parse", "verify", "claims")
            total = {
                "llm": self._llm.label,
                "calls": sum(mine.get(f"{s}_calls", 0) for s in stages),
                "input_tokens": sum(mine.get(f"{s}_input_tokens", 0) for s in stages),
                "output_tokens": sum(mine.get(f"{s}_output_tokens", 0) for s in stages),
                "cost_usd": cost,
            }
        return {**total, **mine}

    # -- search ------------------------------------------------------------------------------
    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        if self._skb is None or self._llm is None:
            raise HarnessError("spaghetti: search() before build()")
        options = self.options
        linked = [self._link(q.text) for q in queries]
        depth = max(options.depth, options.candidates)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="spaghetti-llm") as pool:
            asked = pool.submit(self._llm_sources, queries, linked)  # the LLM works while the retrievers search
            found = {name: retriever.search(queries, depth) for name, retriever in self._retrievers.items()}
            parses, claims = asked.result()
        fused: list[tuple[list[int], dict[int, str], dict[str, Any]]] = []
        for i in range(len(queries)):
            lists = {name: found[name][i].ids for name in found}
            details: dict[str, Any] = {"linked": [e.as_json() for e in linked[i]]}
            if "kb" in options.sources:
                record, executed = parses[i]
                lists["kb"] = _by_text(executed, list(lists.values()))
                details["parse"] = record
                details["execution_size"] = len(executed)
                if not len(executed):
                    why = record.get("skipped") or "no execution"
                    details["fallback"] = f"the other sources only: the knowledge base added nothing ({why})"
            if "llm" in options.sources:
                record, named = claims[i]
                lists["llm"] = named
                details["claims"] = record
            lists = {name: lists[name] for name in ORDER if name in lists}
            order, origin = fuse(lists, options.fusion, options.per_source or 1, options.rrf_k)
            details["retrieved"] = {name: len(ids) for name, ids in lists.items()}
            chosen = order[: options.candidates]
            details["contributed"] = {name: sum(origin[n] == name for n in chosen) for name in lists}
            fused.append((order, origin, details))
        scores = self._verify(queries, [order[: options.candidates] for order, _, _ in fused])
        rankings = []
        for (order, origin, details), (ranked, verdicts) in zip(fused, scores, strict=True):
            chosen = order[: options.candidates]
            details["verifier"] = options.verifier
            details["candidates"] = [
                {"id": n, "from": origin[n], **({"verdict": verdicts[n]} if n in verdicts else {})} for n in chosen
            ]
            tail = order[options.candidates :]
            ids = [n for n, _ in ranked] + tail
            # verified candidates score above 1, the rest of the fused list below it
            values = [1.0 + s for _, s in ranked] + [1.0 - (j + 1) / (len(tail) + 1) for j in range(len(tail))]
            rankings.append(Ranking(np.asarray(ids[:k], dtype=np.int64), np.asarray(values[:k]), details))
        return rankings

    def _link(self, text: str) -> list[LinkedEntity]:
        assert self._linker is not None and self._skb is not None
        skb = self._skb
        entities: list[LinkedEntity] = []
        for mention, nodes in self._linker.mentions(text):
            for node in nodes:
                if len(entities) < self.options.max_entities:
                    entities.append(LinkedEntity(mention, node, str(skb.names[node]), skb.node_type(node)))
        return entities

    # -- the LLM's sources: the structured query (kb) and its own answers (llm) --------------
    def _llm_sources(
        self, queries: Sequence[Query], linked: list[list[LinkedEntity]]
    ) -> tuple[list[tuple[dict[str, Any], np.ndarray]], list[tuple[dict[str, Any], np.ndarray]]]:
        parses = self._parse(queries, linked) if "kb" in self.options.sources else []
        claims = self._claims(queries) if "llm" in self.options.sources else []
        return parses, claims

    def _parse_prompt(self, query: Query, linked: list[LinkedEntity]) -> list[Message]:
        """The schema and the format, a worked example as an earlier turn (small models follow a
        demonstrated answer better than a description), then the query and its entities."""
        schema = self._schema
        assert schema is not None
        wanted = " or ".join(schema.candidate_types)
        relations = "\n".join(f"  {line}" for line in schema.lines())
        messages = [
            Message(
                "system",
                f"You translate search queries into structured queries over the knowledge graph {schema.name!r}.\n"
                f"Node types: {', '.join(schema.node_types)}\n"
                f"Relations (an edge goes source -relation-> target):\n{relations}\n\n"
                f"A structured query finds the {wanted} nodes a search query asks for. Each constraint starts "
                f"at one entity named in the search query and follows relations to a {wanted}:\n"
                "ANCHOR: <the entity's name, as listed>\n"
                "PATH: <the entity's type> -relation-> <type> ... (-relation-> goes from source to target, "
                "<-relation- from target back to source)\n"
                f"Give 1 to {self.options.max_constraints} constraints, an ANCHOR line and a PATH line each; the "
                "answers meet all of them. Reply with those lines only.",
            )
        ]
        example = schema.example
        if example is not None:
            messages += [
                Message("user", f"Search query: {example.query}\nEntities: {example.anchor} ({example.anchor_type})"),
                Message("assistant", f"ANCHOR: {example.anchor}\nPATH: {example.path}"),
            ]
        entities = "; ".join(f"{e.name} ({e.node_type})" for e in linked)
        return [*messages, Message("user", f"Search query: {query.text}\nEntities: {entities}")]

    def _interpret(self, answer: str, linked: list[LinkedEntity]) -> tuple[dict[str, Any], np.ndarray, str | None]:
        """One attempt: what it said, the constraints read, and the executed nodes or the error."""
        assert self._skb is not None and self._schema is not None and self._linker is not None
        attempt: dict[str, Any] = {"answer": answer}
        try:
            constraints = read_answer(answer, self.options.max_constraints)
            attempt["constraints"] = [{"anchor": c.anchor, "path": c.path} for c in constraints]
            run = execute(self._skb, self._schema, constraints, linked, self._linker, self.options.max_execution)
        except HarnessError as exc:
            attempt["error"] = str(exc)
            return attempt, np.zeros(0, dtype=np.int64), str(exc)
        attempt["anchors"], attempt["reached"] = run.anchors, run.reached
        return attempt, run.ids, None

    def _parse(
        self, queries: Sequence[Query], linked: list[list[LinkedEntity]]
    ) -> list[tuple[dict[str, Any], np.ndarray]]:
        empty = np.zeros(0, dtype=np.int64)
        results: list[tuple[dict[str, Any], np.ndarray]] = [({"skipped": "no entity linked"}, empty) for _ in queries]
        asked = [i for i in range(len(queries)) if linked[i]]  # nothing to anchor a path at: no call
        prompts = {i: self._parse_prompt(queries[i], linked[i]) for i in asked}
        errors: dict[int, str] = {}
        first = self._ask("parse", [prompts[i] for i in asked], self.options.parse_max_tokens)
        for i, answer in zip(asked, first, strict=True):
            attempt, ids, error = self._interpret(answer.text, linked[i])
            results[i] = ({"attempts": [attempt], "retried": False}, ids)
            if error is not None:
                errors[i] = error
        again = [i for i in errors if self.options.feedback]
        feedback = [
            [
                *prompts[i],
                Message("assistant", results[i][0]["attempts"][0]["answer"]),
                Message("user", f"That query fails: {errors[i]}\nWrite it again: ANCHOR and PATH lines only."),
            ]
            for i in again
        ]
        for i, answer in zip(again, self._ask("parse", feedback, self.options.parse_max_tokens), strict=True):
            attempt, ids, error = self._interpret(answer.text, linked[i])
            record = results[i][0]
            record["attempts"].append(attempt)
            record["retried"] = True
            results[i] = (record, ids)
            if error is None:
                errors.pop(i)
        with self._lock:
            self._add("parse_retries", len(again))
            self._add("parse_failures", len(errors))
            self._add("parse_executed", len(asked) - len(errors))
            self._add("parse_skipped", len(queries) - len(asked))
        for i in asked:
            results[i][0]["ok"] = i not in errors
        return results

    def _claims(self, queries: Sequence[Query]) -> list[tuple[dict[str, Any], np.ndarray]]:
        """SPAGHETTI's LLM-generated answer: the names the LLM gives, linked by exact name."""
        assert self._schema is not None and self._linker is not None and self._skb is not None
        wanted = " or ".join(self._schema.candidate_types)
        prompts = [
            [
                Message(
                    "user",
                    f"Name up to {self.options.claims} {wanted} entries of the knowledge graph "
                    f"{self._schema.name!r} that answer this search query. One exact name per line, nothing "
                    f"else.\n\nSearch query: {q.text}",
                )
            ]
            for q in queries
        ]
        results = []
        for answer in self._ask("claims", prompts, 16 * self.options.claims):
            names = [_BULLET.sub("", line).strip().strip("`'\"") for line in answer.text.splitlines()]
            names = [n for n in names if n][: self.options.claims]
            ids: list[int] = []
            for name in names:
                whole = normalize(name)
                for mention, nodes in self._linker.mentions(name):
                    if mention == whole:
                        ids.extend(n for n in nodes if n not in ids)
            kept = np.asarray(ids, dtype=np.int64)
            kept = kept[self._skb.is_candidate(kept)]
            results.append(({"answer": answer.text, "names": names, "linked": kept.tolist()}, kept))
        return results

    # -- verification ------------------------------------------------------------------------
    def _verify(
        self, queries: Sequence[Query], candidates: list[list[int]]
    ) -> list[tuple[list[tuple[int, float]], dict[int, Any]]]:
        """Per query: the candidates re-scored (best first) and each one's verdict."""
        mode, weight = self.options.verifier, self.options.verify_weight
        tie = [[weight * (len(c) - r) / len(c) for r in range(len(c))] for c in candidates]
        if mode == "none":
            return [(list(zip(c, t, strict=True)), {}) for c, t in zip(candidates, tie, strict=True)]
        if mode in ("pointwise", "listwise"):
            return self._rerank(queries, candidates)
        pairs = [(i, node) for i, nodes in enumerate(candidates) for node in nodes]
        prompts = [self._verify_prompt(queries[i], node) for i, node in pairs]
        answers = self._ask("verify", prompts, self.options.verify_max_tokens)
        verdicts = [parse_verdict(a.text) for a in answers]
        retry = [j for j, v in enumerate(verdicts) if v is None]
        reminder = Message("user", "Only yes or no, please.")
        again = [[*prompts[j], Message("assistant", answers[j].text), reminder] for j in retry]
        for j, answer in zip(retry, self._ask("verify", again, self.options.verify_max_tokens), strict=True):
            verdicts[j] = parse_verdict(answer.text)
        with self._lock:
            self._add("malformed_verdicts", sum(v is None for v in verdicts))
        out: list[tuple[list[tuple[int, float]], dict[int, Any]]] = [([], {}) for _ in candidates]
        for (i, node), verdict in zip(pairs, verdicts, strict=True):
            rank = len(out[i][0])
            out[i][0].append((node, (1.0 if verdict else 0.0) + tie[i][rank]))
            out[i][1][node] = {True: "yes", False: "no", None: "unreadable"}[verdict]
        return [(sorted(scored, key=lambda p: -p[1]), said) for scored, said in out]

    def _verify_prompt(self, query: Query, node: int) -> list[Message]:
        assert self._skb is not None
        kind = self._skb.node_type(node)
        document = self._skb.document(node, with_relations=True)
        if len(document) > self.options.doc_chars:
            document = document[: self.options.doc_chars] + " …"
        return [
            Message("system", f"You verify whether a {kind} from a knowledge base answers a search query."),
            Message(
                "user",
                f"Search query:\n{query.text}\n\nCandidate {kind}, with its properties and relations:\n{document}\n\n"
                f"Does the text show that this {kind} meets every requirement of the query? Answer yes or no.",
            ),
        ]

    def _rerank(
        self, queries: Sequence[Query], candidates: list[list[int]]
    ) -> list[tuple[list[tuple[int, float]], dict[int, Any]]]:
        assert self._reranker is not None
        before = self._reranker.usage()
        given = [Ranking(np.asarray(c, dtype=np.int64), np.ones(len(c))) for c in candidates]
        ranked = self._reranker.rerank(queries, given, self.options.candidates)
        after = self._reranker.usage()
        with self._lock:
            for key in ("calls", "cached", "input_tokens", "output_tokens"):
                self._add(f"verify_{key}", after.get(key, 0) - before.get(key, 0))
            self._add("malformed_verdicts", after.get("malformed_answers", 0) - before.get("malformed_answers", 0))
        out = []
        for ranking in ranked:
            pairs = list(zip(ranking.ids.tolist(), ranking.scores.tolist(), strict=True))
            out.append((pairs, {n: round(s, 4) for n, s in pairs}))
        return out


def _by_text(ids: np.ndarray, lists: list[np.ndarray]) -> np.ndarray:
    """Executed nodes (a set) in the order the retrievers rank them (best rank in any list),
    the ones none of them returned after, by id."""
    if not len(ids):
        return ids
    best: dict[int, int] = {}
    for ranked in lists:
        for rank, node in enumerate(ranked.tolist()):
            best[node] = min(best.get(node, rank), rank)
    unranked = len(best) + 1
    return np.asarray(sorted(ids.tolist(), key=lambda n: (best.get(n, unranked), n)), dtype=np.int64)
