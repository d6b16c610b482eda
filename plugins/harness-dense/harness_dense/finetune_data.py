"""What ``dense-ft`` trains on, made before the trainer starts: the examples mined from the
train split (hard negatives from the first stage), the validation pool, and the batches that
keep false negatives apart. Separate from ``finetune_training`` (which imports
sentence-transformers' trainer) so that neither imports the retriever's module."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Self

import numpy as np

import harness


def _answers(skb: harness.SKB, query: harness.Query) -> list[int]:
    """The query's answers that are candidates (only those can be retrieved), in order."""
    ids = np.asarray(query.answer_ids, dtype=np.int64)
    return sorted(set(ids[skb.is_candidate(ids)].tolist())) if len(ids) else []


def _top(first_stage: Any, queries: Sequence[harness.Query], depth: Sequence[int]) -> Iterator[list[int]]:
    """The first stage's top ``depth[i]`` ids of each query, searched in batches of 64."""
    for start in range(0, len(queries), 64):
        batch = queries[start : start + 64]
        k = max(depth[start : start + 64])
        for ranking in first_stage.search(batch, k):
            yield ranking.ids.tolist()


@dataclass
class Examples:
    """The training examples: one row per (query, answer), each with the query's hard negatives,
    and what the batch sampler needs to keep false negatives out of a batch."""

    anchors: list[str]
    positives: list[str]
    negatives: list[list[str]]  # hard_negatives columns of len(anchors) texts
    groups: list[tuple[int, frozenset[int], frozenset[int]]]  # (query, its documents, its answers) per row
    queries: int
    skipped: int

    @classmethod
    def mine(cls, retriever: harness.Retriever, skb: harness.SKB, train: Sequence[Any], context: Any) -> Self:
        o: Any = retriever.options  # a FineTuneOptions
        answered = [(q, a) for q in train if (a := _answers(skb, q))]
        if not answered:
            raise harness.HarnessError(
                f"dense-ft: none of the {len(train)} training queries has an answer among the candidates"
            )
        candidates = skb.candidate_ids
        rng = np.random.default_rng(context.seed)
        negatives: list[list[int]] = [[] for _ in answered]
        if o.hard_negatives:
            first_stage = context.retriever(o.first_stage)
            depth = [o.hard_negatives + len(a) for _, a in answered]
            with context.task(f"dense-ft: mine hard negatives ({o.first_stage})", len(answered)) as task:
                for i, top in enumerate(_top(first_stage, [q for q, _ in answered], depth)):
                    wrong = set(answered[i][1])
                    negatives[i] = [n for n in top if n not in wrong][: o.hard_negatives]
                    task.advance()
            for i, (_, right) in enumerate(answered):  # too few first-stage hits: random non-answers fill in
                while len(negatives[i]) < o.hard_negatives and len(candidates) > len(right):
                    pick = int(candidates[rng.integers(len(candidates))])
                    if pick not in right:
                        negatives[i].append(pick)
        usable = [i for i in range(len(answered)) if len(negatives[i]) == o.hard_negatives]
        needed = sorted({n for i in usable for n in [*answered[i][1], *negatives[i]]})
        text = dict(zip(needed, skb.documents(needed, o.with_relations, o.compact), strict=True))
        rows = cls([], [], [[] for _ in range(o.hard_negatives)], [], len(usable), len(answered) - len(usable))
        for i in usable:
            query, right = answered[i]
            documents = frozenset([*right, *negatives[i]])
            for answer in right:
                rows.anchors.append(o.query_prefix + query.text)
                rows.positives.append(o.document_prefix + text[answer])
                for column, negative in zip(rows.negatives, negatives[i], strict=True):
                    column.append(o.document_prefix + text[negative])
                rows.groups.append((i, documents, frozenset(right)))
        return rows

    def dataset(self) -> Any:
        from datasets import Dataset

        columns = {"anchor": self.anchors, "positive": self.positives}
        columns.update({f"negative_{j + 1}": column for j, column in enumerate(self.negatives)})
        return Dataset.from_dict(columns)


@dataclass
class Validation:
    """Validation queries and the candidates they are ranked among."""

    queries: list[str]
    answers: list[frozenset[int]]
    ids: np.ndarray
    documents: list[str]
    metric: harness.Metric

    @classmethod
    def pool(
        cls,
        retriever: harness.Retriever,
        skb: harness.SKB,
        queries: Sequence[harness.Query],
        metric: harness.Metric,
        context: Any,
    ) -> Self | None:
        o: Any = retriever.options  # a FineTuneOptions
        answered = [(q, a) for q in queries if (a := _answers(skb, q))]
        if not answered:
            return None  # no validation: every epoch trains, the last one is kept
        if o.eval_pool is None:
            ids = skb.candidate_ids
        else:
            pooled = {n for _, a in answered for n in a}
            first_stage = context.retriever(o.first_stage)
            for top in _top(first_stage, [q for q, _ in answered], [o.eval_pool] * len(answered)):
                pooled.update(top)
            ids = np.array(sorted(pooled), dtype=np.int64)
        texts = [o.document_prefix + d for d in skb.documents(ids, o.with_relations, o.compact)]
        return cls(
            [o.query_prefix + q.text for q, _ in answered], [frozenset(a) for _, a in answered], ids, texts, metric
        )

    def score(self, model: Any, batch_size: int) -> float:
        """The metric of ``model``'s ranking of the pool, averaged over the queries."""
        encode = {"batch_size": batch_size, "normalize_embeddings": True, "convert_to_numpy": True}
        queries = model.encode(self.queries, show_progress_bar=False, **encode)
        documents = model.encode(self.documents, show_progress_bar=False, **encode)
        order = np.argsort(-(queries @ documents.T), axis=1, kind="stable")
        ranked = self.ids[order]
        hits = np.array([np.isin(row, list(answers)) for row, answers in zip(ranked, self.answers, strict=True)])
        relevant = np.array([len(answers) for answers in self.answers])
        return float(np.mean(self.metric.per_query(hits, relevant)))


def batches(
    groups: Sequence[tuple[int, frozenset[int], frozenset[int]]], order: Sequence[int], size: int, drop_last: bool
) -> list[list[int]]:
    """Rows in ``order`` cut into exactly ``ceil(n / size)`` batches (``floor`` with
    ``drop_last``), a row deferred to a later batch while it would meet, in its batch, a row of
    the same query, a row whose documents answer its query, or one whose query its documents
    answer. What no batch could take without a conflict fills the batches with room last. The
    count never depends on the order: the trainer counts steps per epoch before it iterates."""
    count = len(order) // size if drop_last else math.ceil(len(order) / size)
    pending, out = deque(order), []
    for _ in range(count):
        batch: list[int] = []
        queries: set[int] = set()
        documents: set[int] = set()
        answers: set[int] = set()
        deferred = []
        while pending and len(batch) < size:
            row = pending.popleft()
            query, docs, right = groups[row]
            if query in queries or not docs.isdisjoint(answers) or not right.isdisjoint(documents):
                deferred.append(row)
                continue
            batch.append(row)
            queries.add(query)
            documents.update(docs)
            answers.update(right)
        pending.extendleft(reversed(deferred))  # the deferred go first into the next batch
        out.append(batch)
    for batch in out:
        while pending and len(batch) < size:
            batch.append(pending.popleft())
    return out
