"""The ``rng-kbqa`` retriever: RnG-KBQA (Ye et al., ACL 2022) adapted to retrieval over an SKB.

Per query: link its mentions to SKB nodes; enumerate candidate logical forms (typed relation
paths of one or two hops from each entity, and intersections of two entities' paths), each
executed to its answer set; rank them with a cross-encoder over (query, linearised form)
trained contrastively on the train split; let the generator compose the final form from the
top-ranked ones (``generator: llm``, an LLM through harness-llm; ``top``: the top-ranked one,
RnG's rank-only ablation); execute it and order its answers by a text retriever's score
(``text_retriever``, bm25 by default), then that retriever's other results (``fill``). A query
that links nothing, or whose entities lead to no candidate-type node, is answered by the text
retriever alone (RnG falls back to the ranker's form, which always executes; a retriever also
needs an answer where the ranker has nothing to rank). Every ranking carries ``details``
(entities, top forms and scores, the chosen form, the generator's answer, the execution, the
fallback); ``usage()`` counts how often execution succeeded.
"""

from __future__ import annotations

import importlib.metadata
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self

import numpy as np
from pydantic import Field, model_validator

import harness
from harness_dense.embeddings import DEFAULT_MODEL, resolve_model
from harness_rng.forms import Candidate, Enumeration, Forms, f1
from harness_rng.generator import Generated, choose, prompt
from harness_rng.ranker import Ranker, group_loss

RANKER, META = "ranker", "rng.json"
FALLBACKS = ("no-linked-entity", "no-executable-form")


@dataclass
class Example:
    """A training (or validation) query made ready: its forms, linearised, and their F1."""

    text: str
    forms: list[str]
    f1: np.ndarray

    @property
    def covered(self) -> bool:
        return bool((self.f1 > 0).any())


class RnGRetriever(harness.Retriever):
    """Rank-and-generate over an SKB: enumerate forms, rank them, generate the final one, execute it."""

    name = "rng-kbqa"
    version = "2"
    regime = "trained"
    # how the trained ranker's choice is used: one trained ranker serves every value of these
    search_params = (
        "text_retriever",
        "text_depth",
        "fill",
        "form_weight",
        "generator",
        "top_k",
        "llm",
        "llm_params",
        "max_tokens",
        "score_batch_size",
    )
    batch_size = 16

    class Options(harness.Options):
        text_retriever: str = Field(
            "bm25",
            description="orders the executed form's answers, and answers alone where no form does (registry or plugin)",
        )
        text_depth: int = Field(
            1000, gt=0, description="results of the text retriever read to score answers (unless it reranks given ones)"
        )
        fill: bool = Field(True, description="after the form's answers, the text retriever's other results up to k")
        form_weight: float | None = Field(
            None,
            ge=0,
            description="null: the form's answers first (RnG: the answer is the execution); w: the text retriever's "
            "results and the answers together, by scaled text score + w for an answer (a soft filter)",
        )
        generator: Literal["top", "llm"] = Field(
            "top", description="top: the top-ranked form (RnG's rank-only ablation); llm: an LLM writes the final form"
        )
        top_k: int = Field(5, gt=0, description="ranked forms shown to the generator (RnG: 5)")
        llm: str | None = Field(None, description="provider:model of generator 'llm', e.g. openai:gpt-5.4-mini")
        llm_params: dict[str, Any] = Field(default_factory=dict, description="the LLM provider's parameters")
        max_tokens: int = Field(128, gt=0, description="the generator's answer budget")
        # enumeration
        max_entities: int = Field(5, gt=0, description="linked nodes per query (longest mentions first)")
        max_ngram: int = Field(5, gt=0, description="node names of more words are never linked")
        max_frontier: int = Field(2000, gt=0, description="a first hop reaching more nodes is not expanded (a hub)")
        max_answers: int = Field(5000, gt=0, description="forms answering more nodes are dropped")
        max_forms: int = Field(200, gt=0, description="one- and two-hop forms per query")
        conjunctions: bool = Field(True, description="also intersect two entities' forms (RnG's AND)")
        max_conjunctions: int = Field(100, ge=0, description="intersections per query")
        conjunction_parts: int = Field(20, gt=0, description="forms of each entity tried in intersections (its first)")
        # the ranker
        model: str = Field(
            DEFAULT_MODEL,
            description="the ranker's base: a sentence-transformers directory, an installed model package or a hub id",
        )
        max_length: int = Field(128, gt=8, description="tokens of each (query, form) pair the ranker reads")
        score_batch_size: int = Field(64, gt=0, description="pairs per forward pass when ranking")
        train_layers: int | None = Field(
            None, ge=0, description="fine-tune only the head and the last N transformer layers (null: all, as RnG)"
        )
        epochs: int = Field(3, ge=0, description="training epochs at most (RnG: 3 on GrailQA)")
        lr: float = Field(2e-5, gt=0, description="AdamW's learning rate (RnG: 1e-5 for BERT-base)")
        weight_decay: float = Field(0.01, ge=0)
        train_batch_size: int = Field(8, gt=0, description="queries per gradient step (RnG: 8)")
        negatives: int = Field(31, gt=0, description="negative forms per query and step (RnG: 96)")
        positives: int = Field(4, gt=0, description="answer-covering forms per query and step, the best F1 first")
        bootstrap: bool | None = Field(
            None,
            description="from the second epoch on, the negatives the ranker scores highest (RnG's bootstrap); "
            "null: whenever epochs > 1. Recorded as it runs: false with one epoch, where it cannot",
        )
        bootstrap_pool: int = Field(128, gt=0, description="negatives scored per query to pick the hard ones")
        patience: int = Field(2, gt=0, description="epochs without a better validation F1 before stopping")
        max_train_queries: int | None = Field(
            None,
            gt=0,
            description="train on a random sample of this many train-split queries, drawn with the training seed "
            "(null: all; a CPU budget)",
        )
        fail_at_epoch: int | None = Field(
            None, exclude=True, description="testing: fail when this epoch starts (a kill); not recorded, not keyed"
        )

        @model_validator(mode="after")
        def _consistent(self) -> Self:
            # what the row records is what ran: bootstrapping needs an epoch after the first
            if self.bootstrap and self.epochs < 2:
                raise ValueError(f"bootstrap runs from the second epoch on; with epochs: {self.epochs} it never would")
            if self.bootstrap is None:
                self.bootstrap = self.epochs > 1
            if self.generator == "llm" and self.llm is None:
                raise ValueError("generator 'llm' needs llm: provider:model (e.g. openai:gpt-5.4-mini)")
            if self.generator != "llm" and (self.llm is not None or self.llm_params):
                raise ValueError("llm and llm_params are read by generator 'llm' only; set generator: llm or drop them")
            if self.llm is not None:
                from harness_llm.api import llm_class, options_of, split_spec

                try:
                    provider, _ = split_spec(self.llm)
                except harness.HarnessError as exc:
                    raise ValueError(str(exc)) from None
                options = options_of(llm_class(provider))
                self.llm_params = harness.parse_options(options, self.llm_params, f"llm {self.llm!r}").model_dump(
                    mode="json"
                )
            return self

    options: Options

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if self.options.llm is not None:
            from harness_llm.api import check_llm

            check_llm(self.options.llm, self.options.llm_params, f"retriever {self.name!r}")
        self.ranker: Ranker | None = None
        self.meta: dict[str, Any] = {}
        self._checkpoint: Path | None = None
        self._forms: Forms | None = None
        self._ready_for: str | None = None
        self._snapshot: harness.HubSnapshot | None = None
        self._llm: Any = None
        self._counts = {"queries": 0, "linked": 0, "with_forms": 0, "executed": 0, "generated": 0, "changed": 0}
        self._counts.update({f"fallback_{reason}": 0 for reason in FALLBACKS})

    def uses(self) -> list[str]:
        return [self.options.text_retriever]

    # -- the lifecycle ---------------------------------------------------------------
    def training_identity(self) -> dict[str, Any]:
        path, self._snapshot = resolve_model(self.options.model)
        return {
            "ranker": harness.directory_digest(path),
            "sentence-transformers": _version("sentence-transformers"),
            "transformers": _version("transformers"),
        }

    def provenance(self) -> dict[str, Any]:
        return self._snapshot.provenance() if self._snapshot else {}

    def fit(self, skb: harness.SKB, train: Sequence[harness.Query], context: harness.TrainContext) -> None:
        import torch

        options = self.options
        started = time.perf_counter()
        forms = self._prepare(skb, context)
        base, self._snapshot = resolve_model(options.model)
        self.ranker = Ranker(base, options.max_length, options.score_batch_size, context.device, options.train_layers)
        if options.max_train_queries is not None and len(train) > options.max_train_queries:
            # a sample drawn before enumerating, which costs as much per query as training on it
            picked = np.random.default_rng([context.seed, len(train)]).choice(
                len(train), options.max_train_queries, replace=False
            )
            train = [train[i] for i in sorted(picked)]
            context.trains_on(train)  # the row records the sample next to the split
        examples = self._examples(forms, train, context, "training")
        covered = [e for e in examples if e.covered]
        usable = [e for e in covered if len(e.forms) > 1]
        if not covered:
            linked = sum(1 for e in examples if e.forms)
            raise harness.HarnessError(
                f"rng-kbqa: none of the {len(examples)} training queries has a form whose execution holds a gold "
                f"answer ({linked} have forms at all); nothing to train the ranker on"
            )
        validation = self._examples(forms, context.validation, context, "validation")
        prepared = time.perf_counter() - started
        optimizer = torch.optim.AdamW(self.ranker.trainable(), lr=options.lr, weight_decay=options.weight_decay)
        ranker = self.ranker

        def restore(saved: Mapping[str, Any]) -> None:
            ranker.load_state(saved["ranker"])
            optimizer.load_state_dict(saved["optimizer"])

        loop = harness.EpochLoop(
            context,
            options.epochs,
            state=lambda: {"ranker": ranker.state(), "optimizer": optimizer.state_dict()},
            restore=restore,
            metric="val_f1" if validation else None,
            patience=options.patience,
            fail_at=options.fail_at_epoch,
        )
        if loop.epoch == 0:  # the coverage, once (a resumed training logged it already)
            context.log(
                epoch=0,
                train_queries=len(examples),
                covered_queries=len(covered),
                usable_queries=len(usable),
                forms_per_query=float(np.mean([len(e.forms) for e in examples])) if examples else 0.0,
                **({"val_f1": self._val_f1(validation)} if validation else {}),
            )
        for epoch in loop:
            loss = self._epoch(usable, epoch, context, optimizer, loop.summary())
            loop.end(epoch, loss=loss, **({"val_f1": self._val_f1(validation)} if validation else {}))
        loop.restore_best()
        self.ranker.save(context.checkpoint_dir / RANKER)
        trained = {
            "epochs": loop.epoch,
            "best_epoch": loop.kept_epoch,
            "best_val_f1": loop.best,
            "train_queries": len(examples),
            # queries with a form whose execution holds a gold answer; usable: also another form to contrast
            "covered_queries": len(covered),
            "usable_queries": len(usable),
            "validation_queries": len(validation),
            "prepare_seconds": round(prepared, 3),
        }
        self.meta = {"options": self.params, "trained": trained}
        harness.write_json(context.checkpoint_dir / META, self.meta)
        loop.report(len(usable), prepared)

    def load_checkpoint(self, path: Path) -> None:
        self.meta = json.loads((path / META).read_text(encoding="utf-8"))
        if not (path / RANKER).is_dir():
            raise harness.HarnessError(f"rng-kbqa: checkpoint {path} has no {RANKER}/ directory")
        self._checkpoint = path / RANKER

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        options = self.options
        self.text = context.retriever(options.text_retriever)
        self._prepare(skb, context)
        if self._checkpoint is None:
            raise harness.HarnessError("rng-kbqa: build() before a checkpoint was loaded (the retriever trains first)")
        self.ranker = Ranker(self._checkpoint, options.max_length, options.score_batch_size, context.device)
        if options.generator == "llm":
            from harness_llm.api import get_llm

            params = dict(options.llm_params)
            if "device" in params and params["device"] is None:  # a local model runs where the run does
                params["device"] = context.device
            self._llm = get_llm(options.llm, **params)  # type: ignore[arg-type]

    def usage(self) -> dict[str, Any]:
        counts: dict[str, Any] = dict(self._counts)
        queries = counts["queries"]
        counts["execution_success_rate"] = round(counts["executed"] / queries, 4) if queries else None
        if self.options.generator == "llm":
            counts["generator_success_rate"] = (
                round(counts["generated"] / counts["with_forms"], 4) if counts["with_forms"] else None
            )
        return {**(self._llm.usage() if self._llm is not None else {}), **counts}

    # -- health: whether a logical form was ranked, chosen and executed (the system's idea)
    @classmethod
    def health(cls, details: dict[str, Any] | None) -> dict[str, float]:
        if not details or "executed" not in details:
            return {}
        counters = {
            "linked": float(bool(details.get("entities"))),
            "with_forms": float(details.get("forms", 0) > 0),
            "executed": float(details["executed"] > 0),
            "fallback": float(details.get("fallback") is not None),
        }
        if "generator_output" in details:
            counters["generated"] = float(details.get("chosen_by") == "generator")
        return counters

    @classmethod
    def health_checks(cls, params: dict[str, Any]) -> list[harness.HealthCheck]:
        checks = [harness.HealthCheck("executed", "a logical form executed on the knowledge base")]
        if params.get("generator") == "llm":
            checks.append(harness.HealthCheck("generated", "the generator's logical form chosen", at_least=0.01))
        return checks

    # -- search ----------------------------------------------------------------------
    def search(
        self, queries: Sequence[harness.Query], k: int, top_ranked: Sequence[harness.Ranking] | None = None
    ) -> list[harness.Ranking]:
        if self._forms is None or self.ranker is None:
            raise harness.HarnessError("rng-kbqa: search() before build()")
        forms, options = self._forms, self.options
        text = self.text.search(queries, max(k, options.text_depth))
        found = [forms.enumerate(forms.link(q.text)) for q in queries]
        ranked = self._rank([q.text for q in queries], found)
        generated: list[Generated | None] = [
            Generated(r[0][0].form, r[0][0].ids, "ranker") if r else None for r in ranked
        ]
        answers: list[str | None] = [None] * len(queries)
        if self._llm is not None:
            asking = [i for i, r in enumerate(ranked) if r]
            prompts = [self._messages(queries[i].text, [c for c, _ in ranked[i][: options.top_k]]) for i in asking]
            replies = self._llm.complete_many(prompts, max_tokens=options.max_tokens) if prompts else []
            for i, reply in zip(asking, replies, strict=True):
                answers[i] = reply.text
                top = [c for c, _ in ranked[i][: options.top_k]]
                known = found[i].anchors + [part.anchor for c in top for part in c.form.parts]
                generated[i] = choose(forms, reply.text, top, known)
        rankings = []
        for query, enumeration, scored, chosen, answer, first in zip(
            queries, found, ranked, generated, answers, text, strict=True
        ):
            rankings.append(self._answer(query, enumeration, scored, chosen, answer, first, k))
        return rankings

    def _messages(self, query: str, top: Sequence[Candidate]) -> list[Any]:
        from harness_llm.api import Message

        assert self._forms is not None
        return [Message(role, content) for role, content in prompt(self._forms, query, top)]  # type: ignore[arg-type]

    def _rank(self, texts: Sequence[str], found: Sequence[Enumeration]) -> list[list[tuple[Candidate, float]]]:
        """Each query's candidates with the ranker's scores, best first (ties: enumeration order)."""
        assert self.ranker is not None and self._forms is not None
        skb = self._forms.skb
        pairs_q = [t for t, e in zip(texts, found, strict=True) for _ in e.candidates]
        pairs_f = [c.form.linear(skb) for e in found for c in e.candidates]
        scores = self.ranker.scores(pairs_q, pairs_f)
        ranked, offset = [], 0
        for enumeration in found:
            mine = scores[offset : offset + len(enumeration.candidates)]
            offset += len(enumeration.candidates)
            order = np.argsort(-mine, kind="stable")
            ranked.append([(enumeration.candidates[i], float(mine[i])) for i in order])
        return ranked

    def _answer(
        self,
        query: harness.Query,
        enumeration: Enumeration,
        scored: list[tuple[Candidate, float]],
        chosen: Generated | None,
        answer: str | None,
        text: harness.Ranking,
        k: int,
    ) -> harness.Ranking:
        options = self.options
        self._counts["queries"] += 1
        self._counts["linked"] += bool(enumeration.anchors)
        details: dict[str, Any] = {
            "entities": [a.to_json() for a in enumeration.anchors],
            "forms": len(enumeration.candidates),
            "hubs_skipped": enumeration.hubs,
            "truncated": enumeration.truncated,
            "top_forms": [
                {"form": str(c.form), "score": round(s, 4), "answers": len(c.ids)} for c, s in scored[: options.top_k]
            ],
        }
        if chosen is None:
            reason = FALLBACKS[0] if not enumeration.anchors else FALLBACKS[1]
            self._counts[f"fallback_{reason}"] += 1
            details.update(chosen=None, executed=0, fallback=reason)
            if options.generator == "llm":
                details.update(generator_output=None)
            return harness.Ranking(text.ids[:k], text.scores[:k], details)
        self._counts["with_forms"] += 1
        self._counts["executed"] += 1
        details.update(chosen=str(chosen.form), chosen_by=chosen.source, executed=len(chosen.ids), fallback=None)
        if options.generator == "llm":
            self._counts["generated"] += chosen.source == "generator"
            self._counts["changed"] += str(chosen.form) != str(scored[0][0].form)
            details.update(generator_output=answer, generator_error=chosen.error)
        ids, scores = self._order(query, chosen.ids, text, k)
        return harness.Ranking(ids, scores, details)

    def _order(
        self, query: harness.Query, executed: np.ndarray, text: harness.Ranking, k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The executed nodes by text score (2 + the score min-max scaled to [0, 1]), then,
        with ``fill``, the text retriever's other results (the scaled score): one list, sorted.
        With ``form_weight`` w: the text results and the executed nodes, by scaled text score
        (an executed node the text list lacks: its own score if the retriever reranks, else 0)
        plus w for the executed ones."""
        if self.options.form_weight is not None:
            return self._soft(query, executed, text, k, self.options.form_weight)
        if getattr(self.text, "reranks", False):
            rescored = self.text.search([query], len(executed), [harness.Ranking(executed, np.zeros(len(executed)))])[0]
            inside_ids, inside_scores = rescored.ids, _scaled(rescored.scores)
        else:
            member = np.isin(text.ids, executed)
            inside_ids, inside_scores = text.ids[member], _scaled(text.scores)[member]
        rest = np.setdiff1d(executed, inside_ids)  # not reached by the text retriever: after, by id
        ids = np.concatenate([inside_ids, rest])
        scores = 2.0 + np.concatenate([inside_scores, np.zeros(len(rest))])
        if self.options.fill:
            outside = ~np.isin(text.ids, executed)
            ids = np.concatenate([ids, text.ids[outside]])
            scores = np.concatenate([scores, np.minimum(_scaled(text.scores)[outside], 1.0)])
        return ids[:k], scores[:k]

    def _soft(
        self, query: harness.Query, executed: np.ndarray, text: harness.Ranking, k: int, weight: float
    ) -> tuple[np.ndarray, np.ndarray]:
        scores = np.asarray(text.scores, dtype=np.float64)
        low, high = (float(scores.min()), float(scores.max())) if len(scores) else (0.0, 0.0)

        def scaled(values: np.ndarray) -> np.ndarray:
            return np.clip((values - low) / (high - low), 0, 1) if high > low else np.ones(len(values))

        extra = np.setdiff1d(executed, text.ids)
        extra_scores = np.zeros(len(extra))
        if len(extra) and getattr(self.text, "reranks", False):
            rescored = self.text.search([query], len(extra), [harness.Ranking(extra, np.zeros(len(extra)))])[0]
            found = dict(zip(rescored.ids.tolist(), scaled(rescored.scores).tolist(), strict=True))
            extra_scores = np.asarray([found.get(i, 0.0) for i in extra.tolist()])
        ids = np.concatenate([text.ids, extra])
        final = np.concatenate([scaled(scores), extra_scores]) + weight * np.isin(ids, executed)
        order = np.argsort(-final, kind="stable")[:k]  # ties: the text retriever's order, then by id
        return ids[order], final[order]

    # -- preparing queries -----------------------------------------------------------
    def _prepare(self, skb: harness.SKB, context: harness.BuildContext) -> Forms:
        if self._forms is None or self._ready_for != skb.fingerprint:
            options = self.options
            with context.task(f"rng-kbqa: indexing the names and relations of {skb.num_nodes} nodes"):
                self._forms = Forms(
                    skb,
                    max_entities=options.max_entities,
                    max_ngram=options.max_ngram,
                    max_frontier=options.max_frontier,
                    max_answers=options.max_answers,
                    max_forms=options.max_forms,
                    conjunctions=options.conjunctions,
                    max_conjunctions=options.max_conjunctions,
                    conjunction_parts=options.conjunction_parts,
                )
            self._ready_for = skb.fingerprint
        return self._forms

    def _examples(
        self, forms: Forms, queries: Sequence[harness.Query], context: harness.BuildContext, what: str
    ) -> list[Example]:
        skb = forms.skb
        examples = []
        for query in context.track(queries, f"rng-kbqa: enumerating the forms of {what} queries", len(queries)):
            gold = np.asarray(sorted(query.answer_ids), dtype=np.int64)
            gold = gold[skb.is_candidate(gold)]
            found = forms.enumerate(forms.link(query.text))
            examples.append(
                Example(
                    query.text,
                    [c.form.linear(skb) for c in found.candidates],
                    np.asarray([f1(c.ids, gold) for c in found.candidates], dtype=np.float64),
                )
            )
        return examples

    # -- training --------------------------------------------------------------------
    def _epoch(
        self, usable: Sequence[Example], epoch: harness.Epoch, context: harness.TrainContext, optimizer: Any, last: str
    ) -> float:
        import torch

        assert self.ranker is not None
        options = self.options
        groups = [self._group(e, epoch.rng, epoch.number > 1 and bool(options.bootstrap)) for e in usable]
        order = epoch.rng.permutation(len(groups))
        batches = [order[i : i + options.train_batch_size] for i in range(0, len(order), options.train_batch_size)]
        losses = []
        title = f"rng-kbqa: epoch {epoch.number}/{options.epochs} ({len(groups)} queries){last}"
        with context.task(title, len(batches)) as bar:
            for chosen in batches:
                self.ranker.network.train()
                optimizer.zero_grad()
                loss = torch.zeros(())
                for i in chosen:
                    example, picked, target = groups[i]
                    logits = self.ranker.logits(example.text, [example.forms[j] for j in picked]).float()
                    wanted = torch.as_tensor(target, dtype=torch.float32, device=logits.device)
                    loss = loss + group_loss(logits, wanted).cpu()
                loss = loss / len(chosen)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.ranker.trainable(), 1.0)
                optimizer.step()
                losses.append(float(loss.detach()))
                bar.advance()
        return float(np.mean(losses)) if losses else 0.0

    def _group(self, example: Example, rng: np.random.Generator, hard: bool) -> tuple[Example, list[int], np.ndarray]:
        """One query's forms for a step: its best-F1 positives and sampled negatives (the ones
        the ranker scores highest among a random pool, after the first epoch: RnG's bootstrap),
        with the soft target (F1 over the positives, normalised)."""
        assert self.ranker is not None
        options = self.options
        positive = np.flatnonzero(example.f1 > 0)
        positive = positive[np.argsort(-example.f1[positive], kind="stable")][: options.positives]
        negative = np.flatnonzero(example.f1 == 0)
        if hard and len(negative) > options.negatives:
            pool = rng.choice(negative, min(options.bootstrap_pool, len(negative)), replace=False)
            scores = self.ranker.scores([example.text] * len(pool), [example.forms[j] for j in pool])
            negative = pool[np.argsort(-scores, kind="stable")[: options.negatives]]
        elif len(negative) > options.negatives:
            negative = rng.choice(negative, options.negatives, replace=False)
        picked = [*positive.tolist(), *sorted(negative.tolist())]
        target = np.zeros(len(picked))
        target[: len(positive)] = example.f1[positive] / example.f1[positive].sum()
        return example, picked, target

    def _val_f1(self, validation: Sequence[Example]) -> float:
        """Mean F1 of the top-ranked form's answers (0 where a query has no form): RnG's F1."""
        assert self.ranker is not None
        with_forms = [e for e in validation if e.forms]
        queries = [e.text for e in with_forms for _ in e.forms]
        scores = self.ranker.scores(queries, [f for e in with_forms for f in e.forms])
        total, offset = 0.0, 0
        for example in with_forms:
            mine = scores[offset : offset + len(example.forms)]
            offset += len(example.forms)
            total += float(example.f1[int(np.argmax(mine))])
        return total / len(validation) if validation else 0.0


# -- helpers -------------------------------------------------------------------------
def _scaled(scores: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    if not len(scores):
        return scores
    low, high = float(scores.min()), float(scores.max())
    return (scores - low) / (high - low) if high > low else np.ones(len(scores))


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None
