"""What the runner checks at the plugin boundary and on disk: rankings as retrievers return
them (``check_rankings``, ``clean_ranking``; ``CheckedRetriever`` for what a composite
uses), the resume log (``read_results``) and what a run spent (``read_usage``)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.errors import HarnessError
from harness.io import atomic_write
from harness.queries import Query
from harness.retriever import BuildContext, Ranking, Retriever
from harness.skb import SKB

if TYPE_CHECKING:
    from harness.run.resolve import Component


def candidate_mask(skb: SKB) -> np.ndarray:
    """Boolean array over node ids: True for the nodes a retriever may return."""
    mask = np.zeros(skb.num_nodes, dtype=bool)
    mask[skb.candidate_ids] = True
    return mask


def check_rankings(name: str, batch: Sequence[Query], rankings: Any, k: int) -> list[Ranking]:
    if not isinstance(rankings, Sequence) or len(rankings) != len(batch):
        count = len(rankings) if isinstance(rankings, Sequence) else type(rankings).__name__
        raise HarnessError(f"retriever {name!r} returned {count} rankings for {len(batch)} queries")
    for query, ranking in zip(batch, rankings, strict=True):
        if not isinstance(ranking, Ranking):
            raise HarnessError(f"retriever {name!r} returned {type(ranking).__name__}, not a Ranking")
        if len(ranking.ids) > k:
            raise HarnessError(
                f"retriever {name!r}, query {query.id}: {len(ranking.ids)} results, asked for at most {k}"
            )
        if ranking.details is not None:
            check_details(name, query, ranking.details)
    return list(rankings)


def check_details(name: str, query: Query, details: Any) -> None:
    """A ranking's diagnostics must be a JSON object of plain values (they go to the resume log
    and ``per_query.jsonl``, and must read back the same)."""
    where = f"retriever {name!r}, query {query.id}: details"
    if not isinstance(details, dict) or not all(isinstance(key, str) for key in details):
        raise HarnessError(f"{where} must be a dict with string keys, got {type(details).__name__}")
    try:
        text = json.dumps(details, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise HarnessError(f"{where} are not JSON values ({exc}); convert numpy values with .tolist()") from None
    if json.loads(text) != details:
        raise HarnessError(f"{where} do not read back the same from JSON (tuples or non-string keys inside?)")


#: The largest score magnitude a ranking may carry: 32-bit floats reach 3.4e38, and ties are
#: written one float32 step apart, so scores stay clear of the top of that range.
MAX_SCORE = 1e37


def clean_ranking(
    name: str, query: Query, ranking: Ranking, is_candidate: np.ndarray, dropped: dict[str, int]
) -> Ranking:
    """A retriever's ranking as the harness records it, or one clear error.

    The order is the retriever's, so its scores must be finite and never increase (equal
    scores keep the retriever's order: that is the tie rule everywhere in the harness). Ids
    must be nodes. Non-candidate ids and repeats are dropped here, counted in ``dropped``,
    so that the metrics, the per-query file and the TREC run all see the same list.
    """
    ids, scores = ranking.ids, ranking.scores
    where = f"retriever {name!r}, query {query.id}"
    bad = np.flatnonzero(~np.isfinite(scores))
    if len(bad):
        raise HarnessError(f"{where}: score {float(scores[bad[0]])!r} at rank {bad[0] + 1} is not a finite number")
    huge = np.flatnonzero(np.abs(scores) > MAX_SCORE)
    if len(huge):
        raise HarnessError(
            f"{where}: score {float(scores[huge[0]])!r} at rank {huge[0] + 1} is beyond ±{MAX_SCORE:g}: run files "
            "carry scores as 32-bit floats (trec_eval reads them so); leave out masked candidates instead"
        )
    rising = np.flatnonzero(np.diff(scores) > 0)
    if len(rising):
        i = int(rising[0])
        raise HarnessError(
            f"{where}: scores must not increase down a ranking (best first), but rank {i + 1} has "
            f"{float(scores[i])!r} and rank {i + 2} has {float(scores[i + 1])!r}"
        )
    outside = np.flatnonzero((ids < 0) | (ids >= len(is_candidate)))
    if len(outside):
        raise HarnessError(f"{where}: id {ids[outside[0]]} is not a node of the SKB (0..{len(is_candidate) - 1})")
    keep = is_candidate[ids]
    dropped["non-candidate"] += int((~keep).sum())
    _, first = np.unique(ids, return_index=True)
    unique = np.zeros(len(ids), dtype=bool)
    unique[first] = True
    dropped["repeated"] += int((keep & ~unique).sum())
    keep &= unique
    return ranking if keep.all() else Ranking(ids[keep], scores[keep], ranking.details)


def read_build_seconds(path: Path) -> float:
    """The recorded index build time; a file cut short by an interruption counts as unknown (0)."""
    try:
        seconds = json.loads(path.read_text(encoding="utf-8"))["seconds"]
        return float(seconds) if isinstance(seconds, int | float) and seconds >= 0 else 0.0
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def _valid_record(record: Any) -> bool:
    """One resume-log line as the runner writes it (anything else is not trusted)."""
    if not isinstance(record, dict) or not isinstance(record.get("qid"), int):
        return False
    ids, scores = record.get("ids"), record.get("scores")
    # exact type tests (a bool is an int, and must not pass as an id); JSON gives no subclasses
    if not isinstance(ids, list) or any(type(i) is not int for i in ids):
        return False
    if not isinstance(scores, list) or len(scores) != len(ids):
        return False
    if any(type(v) is not float and type(v) is not int for v in scores) or not all(map(math.isfinite, scores)):
        return False
    if not isinstance(record.get("details", {}), dict):
        return False
    latency = record.get("latency_ms")
    return isinstance(latency, int | float) and not isinstance(latency, bool) and latency >= 0


def read_results(path: Path, wanted: set[int], notes: list[str] | None = None) -> dict[int, dict[str, Any]]:
    """Completed queries from the resume log. The log is cut at the first line that is torn
    (an interruption) or not what the runner writes; what followed is searched again.

    The runner logs a query once. A query logged twice with another record is an error naming
    both lines (which ranking counts cannot be decided, and neither line may silently win); the
    same record twice (a log copied or concatenated onto itself) is tolerated, counted once, noted
    and removed from the log (so that the next resume neither keeps nor notes it again)."""
    if not path.exists():
        return {}
    logged: dict[int, tuple[int, dict[str, Any]]] = {}  # qid → (its line, its record)
    repeated: set[int] = set()  # numbers of the lines that repeat an earlier one word for word
    good_bytes = good_lines = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.endswith(b"\n"):
                break
            try:
                record = json.loads(raw)
            except ValueError:
                break
            if not _valid_record(record):
                break  # from here on the log is not the runner's: those queries are searched again
            qid = record["qid"]
            if qid in logged:
                first, earlier = logged[qid]
                if earlier != record:
                    raise HarnessError(
                        f"{path}, line {number}: query {qid} is answered a second time, unlike on line {first} "
                        "(another ranking, scores, details or latency): a resume log holds one record per query, "
                        f"and which one this run should use cannot be decided. Delete the wrong line ({first} or "
                        f"{number}) to keep the other's results, or delete {path} (or run with --fresh) to search "
                        "every query again"
                    )
                repeated.add(number)
            else:
                logged[qid] = (number, record)
            good_bytes, good_lines = good_bytes + len(raw), number
    results = {qid: record for qid, (_, record) in logged.items() if qid in wanted}
    if repeated and notes is not None:
        said = "1 line repeated" if len(repeated) == 1 else f"{len(repeated)} lines repeated"
        notes.append(f"{path}: {said} an earlier line word for word, removed; each query counted once")
    cut = good_bytes != path.stat().st_size
    if cut and notes is not None:
        notes.append(f"{path}: cut at byte {good_bytes} (a torn or foreign line); those queries run again")
    if repeated:
        with path.open("rb") as source, atomic_write(path, "wb") as kept:
            kept.writelines(
                raw for number, raw in enumerate(source, 1) if number <= good_lines and number not in repeated
            )
    elif cut:
        with path.open("r+b") as handle:
            handle.truncate(good_bytes)
    return results


def read_usage(path: Path) -> dict[str, Any]:
    """What earlier sessions of a run spent; unreadable counts as nothing (with the run's own log
    cut back, the queries they answered are searched, and paid for, again)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def add_usage(before: dict[str, Any], spent: dict[str, Any]) -> dict[str, Any]:
    """Counts and costs summed; anything else (a model name) as last reported. A cost that was
    unknown (None) in either session stays unknown: a sum of the known part would understate it."""
    total = dict(before)
    for key, value in spent.items():
        old = total.get(key)
        numbers = [isinstance(v, int | float) and not isinstance(v, bool) for v in (old, value)]
        if key in total and any(numbers) and (old is None or value is None):
            total[key] = None
        else:
            total[key] = old + value if all(numbers) else value
    return total


def subtract_usage(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """What was spent between two reports of the same objects (counts and costs differenced)."""
    spent = dict(after)
    for key, value in before.items():
        now = spent.get(key)
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in (now, value)):
            spent[key] = now - value
    return spent


class CheckedRetriever(Retriever):
    """A retriever as another one receives it from ``context.retriever``: its rankings are
    checked and cleaned exactly as the runner checks the main retriever's."""

    def __init__(self, component: Component, is_candidate: np.ndarray, dropped: dict[str, int]) -> None:
        self.component, self.inner = component, component.instance
        # class attributes Retriever defines would otherwise hide the inner retriever's values (they
        # are ClassVars there, which mypy lets no instance set: this one mirrors another's)
        inner = self.inner
        self.name, self.regime, self.batch_size = component.name, inner.regime, inner.batch_size  # type: ignore[misc]
        self.version, self.reranks, self.options = inner.version, inner.reranks, inner.options  # type: ignore[misc]
        self._is_candidate, self._dropped = is_candidate, dropped

    def build(self, skb: SKB, context: BuildContext) -> None:
        raise HarnessError(f"retriever {self.name!r} is already built")

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        if top_ranked is not None and not self.inner.reranks:
            raise HarnessError(f"retriever {self.name!r} searches every candidate; it cannot rerank given ones")
        try:
            rankings = (
                self.inner.search(queries, k, top_ranked) if top_ranked is not None else self.inner.search(queries, k)
            )
        except HarnessError:
            raise
        except Exception as exc:
            raise HarnessError(
                f"retriever {self.name!r} failed on queries {[q.id for q in queries][:5]}: {type(exc).__name__}: {exc}"
            ) from exc
        checked = check_rankings(self.name, queries, rankings, k)
        return [
            clean_ranking(self.name, q, r, self._is_candidate, self._dropped)
            for q, r in zip(queries, checked, strict=True)
        ]

    def usage(self) -> dict[str, Any]:
        return self.inner.usage()

    def uses(self) -> list[str]:
        return self.inner.uses()

    def __getattr__(self, name: str) -> Any:
        # anything else a composite needs from what it uses (e.g. an encoder's model); not
        # dunders, and nothing before __init__ ran (copy and pickle probe a bare instance)
        inner = self.__dict__.get("inner")
        if inner is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(inner, name)


def check_answers(skb: SKB, queries: Sequence[Query], where: str) -> int:
    """Refuse answer ids that are not nodes; return how many queries have no candidate answer."""
    bad = [(q.id, a) for q in queries for a in q.answer_ids if not 0 <= a < skb.num_nodes]
    if bad:
        shown = ", ".join(f"query {qid}: {aid}" for qid, aid in bad[:5])
        raise HarnessError(f"{where}: {len(bad)} answer ids are not nodes of SKB {skb.name!r} ({shown})")
    answers = np.fromiter((a for q in queries for a in q.answer_ids), dtype=np.int64)
    owner = np.repeat(np.arange(len(queries)), [len(q.answer_ids) for q in queries])
    with_candidate = np.zeros(len(queries), dtype=bool)
    with_candidate[owner[skb.is_candidate(answers)]] = True
    return int((~with_candidate).sum())
