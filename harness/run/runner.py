"""Running a retriever on a dataset split: resolve, build, search, evaluate, record.

A run lives in its own directory, named by the hash of its configuration::

    results.jsonl    one line per query as it completes (the resume log)
    build.json       index build time, and what the build resolved (each retriever's provenance)
    usage.json       tokens, calls and cost so far (summed over resumed sessions)
    config.json      the configuration its name hashes
    per_query.jsonl  per-query metrics, written at the end
    run.trec         the rankings as a TREC run file
    qrels.trec       the answers as trec_eval reads them (``trec_eval -c qrels.trec run.trec``)
    row.json         the leaderboard row

Re-running the same configuration resumes: queries already in ``results.jsonl`` are not
searched again, and a line cut short by an interruption is discarded. A resumed run whose
retrievers resolve to something else than when it began (``Retriever.provenance``: a hub
branch that moved) is refused: its answers would come from two models.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from harness.dataset import Dataset
from harness.errors import HarnessError
from harness.executors import Executor, LocalExecutor
from harness.io import atomic_write, exclusive, leaderboard_lock, stable_hash, write_json
from harness.metrics import METRICS_VERSION, evaluate, means, parse_metrics
from harness.plugins import using
from harness.queries import Query, sample
from harness.retriever import BuildContext, ProgressFactory, ProgressTask, Retriever
from harness.run.checks import (
    CheckedRetriever,
    add_usage,
    candidate_mask,
    check_rankings,
    clean_ranking,
    read_build_seconds,
    read_results,
    read_usage,
    subtract_usage,
)
from harness.run.record import ComponentInfo, Latency, LeaderboardRow, hardware, queries_digest, versions
from harness.run.resolve import Component, RunSpec, resolve_device
from harness.run.scoring import hit_matrix
from harness.skb import SKB
from harness.training import (
    TrainingInfo,
    TrainingPlan,
    checkpoint_path,
    ensure_trained,
    plan_training,
    plot_curve,
    training_configuration,
)
from harness.trec import write_qrels, write_run

_SYNC_SECONDS = 10.0


@dataclass
class CheckResult:
    metric: str
    expected: float
    actual: float | None
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.actual is not None and abs(self.actual - self.expected) <= self.tolerance + 1e-12


@dataclass
class RunOutcome:
    spec: RunSpec
    row: LeaderboardRow
    run_dir: Path
    row_path: Path | None
    resumed_queries: int
    checks: list[CheckResult] = field(default_factory=list)
    #: What the runner healed and the user should know (ids dropped from rankings, ...).
    notes: list[str] = field(default_factory=list)
    #: Seconds spent in each phase of this invocation: load (queries and SKB), build (fit and
    #: index, 0 when every query was already done), search, evaluate, write.
    phases: dict[str, float] = field(default_factory=dict)
    #: The row's ``index_build_seconds`` were measured by an earlier invocation on this run
    #: directory (this one resumed it, and built or loaded the index in ``phases["build"]``).
    built_earlier: bool = False


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run; ``message`` says what was kept and how to resume."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


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


class Runner:
    """Executes :class:`RunSpec`s; holds loaded datasets so ``--all`` loads each once.

    ``progress(description, total)`` hands out the tasks retrievers advance; a factory with a
    ``phase(description, total)`` context manager too (the CLI's) also shows which phase the
    run is in, and ends the tasks started in a phase when it ends."""

    def __init__(
        self,
        plugins: Any,
        output_dir: str | Path = "runs",
        leaderboard_dir: str | Path | None = None,
        device: str = "auto",
        batch_size: int | None = None,
        progress: ProgressFactory | None = None,
        cache_dir: str | Path | None = None,
        fresh: bool = False,
        train_split: str = "train",
        validation_split: str | None = "val",
        allow_training: bool = True,
        executor: Executor | None = None,
        devices: Sequence[str] = (),
    ) -> None:
        from harness.io import cache_root

        self.plugins = plugins
        self.output_dir = Path(output_dir)
        self.leaderboard_dir = Path(leaderboard_dir) if leaderboard_dir is not None else None
        if self.leaderboard_dir is not None and (self.leaderboard_dir / "CHANGELOG.md").exists():
            raise HarnessError(
                f"{self.leaderboard_dir} is a curated leaderboard (it has a CHANGELOG.md): it changes only through "
                f"`harness submit RUN_DIR -o run.tar.gz` and `harness leaderboard merge run.tar.gz --into "
                f"{self.leaderboard_dir}`"
            )
        # where work runs (--executor): with workers elsewhere, --device is theirs, and the
        # driver's build (filling the caches) is keyed for it
        self.executor: Executor = executor or LocalExecutor()
        self._fingerprint = ""  # the SKB's of the run under way (search workers check theirs)
        self.device, self.devices = _devices(self.executor, device, devices)
        self.batch_size = batch_size
        self.progress: ProgressFactory = progress or (lambda description, total: ProgressTask())
        self.cache_dir = Path(cache_dir) if cache_dir else cache_root()
        self.fresh = fresh
        # trained retrievers: which splits they train and select on, and whether training may
        # happen here or a checkpoint must exist (`harness run --no-train`)
        self.train_split, self.validation_split, self.allow_training = train_split, validation_split, allow_training
        self._plans: dict[str, TrainingPlan] = {}
        self._trained: dict[str, TrainingInfo] = {}
        self._fit_only = False
        self._datasets: dict[str, Dataset] = {}
        if batch_size is not None and batch_size <= 0:
            raise HarnessError(f"--batch-size must be positive, got {batch_size}")

    # -- components ------------------------------------------------------------------
    def dataset(self, component: Component) -> Dataset:
        """The spec's dataset; with ``--all``, the first object of equal configuration is reused,
        so each dataset is loaded once."""
        key = stable_hash([component.info.plugin, component.info.params])
        return self._datasets.setdefault(key, component.instance)

    # -- running ---------------------------------------------------------------------
    def run(self, spec: RunSpec) -> RunOutcome:
        self._active: tuple[Path, set[int]] | None = None
        since = time.time()
        with using(self.plugins):  # components look others up (an LLM provider) in this manager
            try:
                return self._run(spec)
            except KeyboardInterrupt:
                raise RunInterrupted(self._interrupted(spec, since)) from None

    @contextmanager
    def _phase(self, description: str, total: int | None = None) -> Iterator[ProgressTask]:
        """A status line (a bar with ``total``) while a phase of the run lasts."""
        phase = getattr(self.progress, "phase", None)
        if phase is None:
            yield self.progress(description, total)
            return
        with phase(description, total) as task:
            yield task

    @property
    def _again(self) -> str:
        # --fresh discards the resume log: repeating it would search everything again
        return "run the same command again without --fresh" if self.fresh else "run the same command again"

    def _interrupted(self, spec: RunSpec, since: float) -> str:
        """What a Ctrl-C leaves behind: the answered queries a re-run resumes from, the caches."""
        lines = [f"interrupted: {spec.describe()}"]
        if self._active is not None:
            run_dir, wanted = self._active
            kept = _answered(run_dir / "results.jsonl", wanted)
            if kept:
                lines.append(
                    f"kept: {kept} of {len(wanted)} queries answered, in {run_dir / 'results.jsonl'}; "
                    f"{self._again} to resume (they are not searched again)"
                )
            else:
                lines.append(f"no query was answered yet; {self._again} to start ({run_dir})")
        else:
            lines.append(f"no query was answered yet; {self._again} to start")
        written = _written_since(self.cache_dir, since)
        if written:
            shown = ", ".join(written[:6]) + (f" and {len(written) - 6} more" if len(written) > 6 else "")
            lines.append(
                f"cached by this run under {self.cache_dir}: {shown} (the next run reuses what was finished; "
                "an entry left unfinished is built again)"
            )
        else:
            lines.append(f"nothing new was cached by this run; earlier caches stay under {self.cache_dir}")
        return "\n".join(lines)

    def _run(self, spec: RunSpec) -> RunOutcome:
        started = time.perf_counter()
        phases = dict.fromkeys(("load", "build", "search", "evaluate", "write"), 0.0)
        with self._phase(f"load {spec.dataset}"):
            dataset = self.dataset(spec.dataset_component)
            queries = dataset.load_queries().split(spec.split)
            split_digest = queries_digest(queries)  # the split's, sampled or not: which rows compare
            if spec.sample:
                queries = sample(queries, spec.sample, spec.seed)
            if not queries:
                raise HarnessError(f"dataset {spec.dataset!r}, split {spec.split!r} has no queries")
            skb = dataset.load_skb()
            self._fingerprint = skb.fingerprint  # what search workers must load too
            no_candidate_answer = check_answers(skb, queries, f"dataset {spec.dataset!r}, split {spec.split!r}")
        phases["load"] = time.perf_counter() - started

        retriever_info = spec.main.info
        uses = [component.info for component in spec.uses]
        dataset_info = spec.dataset_component.info
        self._plans = self.plan_training(spec, dataset, skb, spec.split)
        config = {
            "retriever": retriever_info.configuration(),
            "uses": [info.configuration() for info in uses],
            "dataset": dataset_info.configuration(),
            "skb": skb.fingerprint,
            # the evaluated queries themselves: an edited query must never reuse old results
            "queries": queries_digest(queries),
            "split": spec.split,
            "sample": spec.sample,
            "seed": spec.seed if spec.sample else None,
            "k": spec.k,
            "metrics_version": METRICS_VERSION,
        }
        if self._plans:  # another training set or seed is another model: never its results
            config["training"] = {name: plan.configuration() for name, plan in self._plans.items()}
        config_hash = stable_hash(config)
        run_dir = self.output_dir / f"{spec.dataset}-{spec.split}-{spec.retriever}-{config_hash}"
        run_dir.mkdir(parents=True, exist_ok=True)
        # One process per configuration: a second run of it waits, then resumes from the first's
        # results instead of searching the same queries into the same log.
        with exclusive(run_dir / ".lock", f"another process is running {run_dir.name}; waiting for it"):
            write_json(run_dir / "config.json", config)
            results_path = run_dir / "results.jsonl"
            if self.fresh and results_path.exists():
                results_path.unlink()
            notes: list[str] = []
            done = read_results(results_path, {q.id for q in queries}, notes)
            pending = [q for q in queries if q.id not in done]

            self._active = (run_dir, {q.id for q in queries})
            build_path = run_dir / "build.json"
            build_seconds = read_build_seconds(build_path)
            provenance = _read_provenance(build_path)
            training = _read_training(build_path)
            # the row keeps what building the index cost; a resumed run's build (mostly a load
            # from the cache) is this invocation's phase, not that cost
            built_earlier = build_seconds > 0 and not self.fresh
            if spec.dropped_metrics:
                notes.append(f"left out {', '.join(spec.dropped_metrics)}: deeper than the ranking can be")
            if self.validation_split == spec.split and self._plans:
                notes.append(
                    f"trained without early stopping: the validation split {spec.split!r} is the evaluated one"
                )
            usage_path = run_dir / "usage.json"
            if self.fresh:
                usage_path.unlink(missing_ok=True)
            usage = read_usage(usage_path)
            if pending:
                self._dropped = {}
                # what earlier runs of these objects in this process spent is not this session's
                before = self._usage(spec)
                self._remote_usage: dict[str, Any] = {}  # what the executor's workers spent
                self.executor.take_notes()  # what earlier runs of this executor left
                try:
                    with self._phase(f"index {spec.retriever}: build or load"):
                        retriever_obj, phases["build"] = self._build_all(spec, skb, dataset)
                    built = self._provenance(spec)
                    if built_earlier and provenance is not None and built != provenance:
                        raise HarnessError(_provenance_changed(run_dir, provenance, built, len(queries) - len(pending)))
                    if not built_earlier:
                        build_seconds = phases["build"]
                    provenance = built
                    # the main retriever's training, else that of a trained retriever it uses
                    trained = [self._trained[c.name] for c in [spec.main, *spec.uses] if c.name in self._trained]
                    training = training if built_earlier and training else next(iter(trained), None)
                    write_json(
                        build_path,
                        {
                            "seconds": build_seconds,
                            "provenance": provenance,
                            "training": training.model_dump(mode="json") if training else None,
                        },
                    )
                    for name in self._trained:
                        plot_curve(
                            checkpoint_path(self.cache_dir, name, self._plans[name]),
                            run_dir / f"training-{name}.png",
                            f"{name} on {spec.dataset} ({self._plans[name].split})",
                        )
                    began = time.perf_counter()
                    # the log holds what was read plus what this search appends (the lock is ours)
                    with self._phase(f"search {spec.retriever}", len(pending)) as task:
                        done.update(self._search(spec, retriever_obj, pending, results_path, candidate_mask(skb), task))
                    phases["search"] = time.perf_counter() - began
                finally:
                    # added to what earlier sessions spent: a resumed row reports the whole run's
                    # tokens and cost, and a crash (in the build too) keeps what was spent before it
                    usage = add_usage(add_usage(usage, subtract_usage(self._usage(spec), before)), self._remote_usage)
                    executor_notes = self.executor.take_notes()
                    if executor_notes and len(usage) > 0:  # the row says its usage is a lower bound
                        usage["undercounted"] = " ".join(executor_notes)
                    write_json(usage_path, usage)
                notes += executor_notes
                # a cost the row cannot give (a model without a price) is said with the results
                notes += [f"cost unknown: {why}" for key, why in usage.items() if key.endswith("cost_unknown")]
                notes += [
                    f"dropped {count} {what} ids from {name!r}'s rankings (STaRK's evaluator ignores them)"
                    for name, counts in self._dropped.items()
                    for what, count in counts.items()
                    if count
                ]

            missing = [q.id for q in queries if q.id not in done]
            if missing:
                raise HarnessError(f"run {run_dir}: {len(missing)} queries have no results (first: {missing[:5]})")
            ordered = [done[q.id] for q in queries]
            began = time.perf_counter()
            with self._phase(f"evaluate {len(queries)} queries"):
                metric_objs = parse_metrics(spec.metrics, self.plugins.components.by_kind["metric"])
                mask = candidate_mask(skb)
                hits, n_relevant = hit_matrix(
                    [np.asarray(r["ids"], dtype=np.int64) for r in ordered], [q.answer_ids for q in queries], mask
                )
                per_query = evaluate(metric_objs, hits, n_relevant)
                gold = [
                    (
                        sorted({int(a) for a in q.answer_ids if mask[a]}),
                        sorted({int(a) for a in q.answer_ids if not mask[a]}),
                    )
                    for q in queries
                ]
            phases["evaluate"] = time.perf_counter() - began
            began = time.perf_counter()
            with self._phase("write the run files"):
                self._write_outputs(run_dir, spec, queries, ordered, per_query, gold)

            latencies = np.asarray([r["latency_ms"] for r in ordered], dtype=np.float64)
            regime = spec.main.instance.regime
            if regime == "zero-shot" and training is not None:
                regime = "trained"  # a zero-shot composite of a trained retriever learned from the train split
            built_from = provenance or {}
            row = LeaderboardRow(
                retriever=_with_provenance(retriever_info, built_from),
                uses=[_with_provenance(info, built_from) for info in uses],
                dataset=dataset_info,
                dataset_fingerprint=skb.fingerprint,
                split=spec.split,
                queries_digest=split_digest,
                num_queries=len(queries),
                queries_without_candidate_answers=no_candidate_answer,
                sample=spec.sample,
                k=spec.k,
                metrics=means(per_query),
                latency=Latency(
                    mean_ms=float(latencies.mean()),
                    p50_ms=float(np.percentile(latencies, 50)),
                    p95_ms=float(np.percentile(latencies, 95)),
                    batch_size=int(ordered[0].get("batch_size", 1)),
                ),
                index_build_seconds=round(build_seconds, 4),
                total_seconds=round(time.perf_counter() - started, 4),
                regime=regime,
                training=training,
                usage=usage,
                hardware=self._hardware(),
                versions=versions(),
                config_hash=config_hash,
                timestamp=datetime.now(UTC),
                run_dir=os.path.relpath(run_dir) if not run_dir.is_absolute() else str(run_dir),
            )
            # The run directory is self-contained (row, configuration, per-query results, TREC run):
            # what `harness submit` bundles and `harness leaderboard validate` recomputes.
            write_json(run_dir / "row.json", row.model_dump(mode="json"))
            path = None
            if self.leaderboard_dir is not None:
                # the lock `harness leaderboard merge` takes: a merge never swaps in a copy without this row
                with exclusive(leaderboard_lock(self.leaderboard_dir), "waiting for a merge into the leaderboard"):
                    from harness.leaderboard.rows import write_row

                    path = write_row(self.leaderboard_dir, row)
            phases["write"] = time.perf_counter() - began
            checks = []
            if spec.condition is not None:
                for metric, expected in spec.condition.expected.items():
                    checks.append(CheckResult(metric, expected, row.metrics.get(metric), spec.condition.tolerance))
            resumed = len(queries) - len(pending)
            return RunOutcome(spec, row, run_dir, path, resumed, checks, notes, phases, built_earlier)

    def plan_training(
        self, spec: RunSpec, dataset: Dataset, skb: SKB, evaluated: str | None
    ) -> dict[str, TrainingPlan]:
        """A plan for every trained retriever of ``spec`` (the main one and those it uses);
        refuses training on ``evaluated``, the split the run evaluates."""
        trained = [c for c in [spec.main, *spec.uses] if c.instance.regime == "trained"]
        if not trained:
            return {}
        queries = dataset.load_queries()
        splits = {name: queries.split(name) for name in queries.split_names}
        return {
            c.name: plan_training(
                c.name,
                c.instance,
                # the retrievers it uses (hard negatives, candidates) are part of what it learns from
                {
                    "self": training_configuration(c.instance, c.info.configuration()),
                    "uses": [u.info.configuration() for u in spec.uses if u is not c],
                },
                skb,
                splits,
                evaluated,
                self.train_split,
                self.validation_split,
                spec.seed,
                self.device,
            )
            for c in trained
        }

    def train(self, spec: RunSpec) -> dict[str, TrainingInfo]:
        """``harness train``: train (or find the checkpoint of) every trained retriever of
        ``spec``, on the runner's train split, without evaluating anything."""
        dataset = self.dataset(spec.dataset_component)
        skb = dataset.load_skb()
        self._plans = self.plan_training(spec, dataset, skb, None)
        if not self._plans:
            raise HarnessError(
                f"retriever {spec.retriever!r} is not trained (its regime is {spec.main.instance.regime!r})"
            )
        self._dropped, self._trained = {}, {}
        self._fit_only = True  # the trained retrievers need no index to be trained
        try:
            self._build_all(spec, skb, dataset)
        finally:
            self._fit_only = False
        return dict(self._trained)

    def _build_all(self, spec: RunSpec, skb: SKB, dataset: Dataset) -> tuple[Retriever, float]:
        """Build the retriever; what a retriever uses is built when it first asks
        ``context.retriever`` (for a name its own ``uses()`` declares), each once, and handed
        over checked (its rankings pass the same checks as the main one's)."""
        base = BuildContext(
            cache_dir=self.cache_dir,
            device=self.device,
            progress=self.progress,
            executor=self.executor,
            devices=self.devices,
        )
        built: dict[str, Retriever] = {}
        mask = candidate_mask(skb)

        def build(component: Component) -> None:
            declared = component.instance.uses()

            def fetch(name: str) -> Retriever:
                if name not in declared:
                    raise HarnessError(
                        f"retriever {component.name!r} asked for {name!r}, which it does not name in uses() "
                        f"({', '.join(declared) or 'none'})"
                    )
                if name not in built:
                    build(spec.retrievers[name])
                    counts = self._dropped.setdefault(name, {"non-candidate": 0, "repeated": 0})
                    built[name] = CheckedRetriever(spec.retrievers[name], mask, counts)
                return built[name]

            self._build(component, skb, dataset, dataclasses.replace(base, build_retriever=fetch))

        started = time.perf_counter()
        build(spec.main)
        return spec.main.instance, time.perf_counter() - started

    @staticmethod
    def _usage(spec: RunSpec) -> dict[str, Any]:
        """What the spec's objects report having spent, the used ones' keys prefixed by name.
        A report that fails is recorded as such, never allowed to hide the run's own error."""
        spent: dict[str, Any] = {}
        for component in spec.retrievers.values():
            try:
                reported = component.instance.usage()
            except Exception as exc:
                reported = {"usage_error": f"{type(exc).__name__}: {exc}"}
            prefix = "" if component.name == spec.retriever else f"{component.name}."
            for key, value in reported.items():
                spent.setdefault(f"{prefix}{key}", value)
        return spent

    @staticmethod
    def _provenance(spec: RunSpec) -> dict[str, dict[str, Any]]:
        """Each built retriever's ``provenance()`` by name (JSON, checked now: it goes into files)."""
        found: dict[str, dict[str, Any]] = {}
        for name, component in spec.retrievers.items():
            try:
                reported = component.instance.provenance()
                json.dumps(reported, allow_nan=False)
            except Exception as exc:
                raise HarnessError(
                    f"retriever {name!r}: provenance() failed ({type(exc).__name__}: {exc}); it must return a dict "
                    "of JSON values"
                ) from exc
            if not isinstance(reported, dict):
                raise HarnessError(f"retriever {name!r}: provenance() returned {type(reported).__name__}, not a dict")
            if reported:
                found[name] = reported
        return found

    def _build(self, component: Component, skb: SKB, dataset: Dataset, context: BuildContext) -> None:
        retriever: Retriever = component.instance
        try:
            if component.name in self._plans:
                self._trained[component.name] = ensure_trained(
                    component.name, retriever, skb, self._plans[component.name], context, self.allow_training
                )
                if self._fit_only:
                    return
            retriever.build(skb, context)
        except HarnessError:
            raise
        except Exception as exc:
            raise HarnessError(f"retriever {component.name!r} failed to build: {type(exc).__name__}: {exc}") from exc

    def _search(
        self,
        spec: RunSpec,
        retriever: Retriever,
        pending: list[Query],
        results_path: Path,
        is_candidate: np.ndarray,
        task: ProgressTask,
    ) -> dict[int, dict[str, Any]]:
        """Search ``pending`` in batches, here or in shards on the executor's workers; check,
        clean and append each batch's results to the log here as it completes; return them. A
        query already logged (a shard Ray ran again after its worker died) is never logged twice."""
        batch_size = self.batch_size or retriever.batch_size
        then = f" Completed queries are kept in {results_path}; {self._again} to resume."
        where = self._batches_here if self.executor.local else self._batches_on_workers
        found: dict[int, dict[str, Any]] = {}
        dropped = self._dropped.setdefault(spec.retriever, {"non-candidate": 0, "repeated": 0})
        synced = time.monotonic()
        with results_path.open("a", encoding="utf-8") as log:
            try:
                for batch, rankings, seconds in where(spec, retriever, pending, batch_size, then):
                    rankings = check_rankings(spec.retriever, batch, rankings, spec.k)
                    per_query_ms = 1000 * seconds / len(batch)
                    for query, ranking in zip(batch, rankings, strict=True):
                        if query.id in found:
                            continue
                        ranking = clean_ranking(spec.retriever, query, ranking, is_candidate, dropped).top(spec.k)
                        record = _record(query, ranking, per_query_ms, len(batch))
                        log.write(json.dumps(record) + "\n")
                        found[query.id] = record
                    # Flushed per batch: a killed process loses no finished query. Synced to disk at
                    # most every few seconds and at the end: a power loss costs a few seconds' work.
                    log.flush()
                    if time.monotonic() - synced > _SYNC_SECONDS:
                        os.fsync(log.fileno())
                        synced = time.monotonic()
                    task.advance(len(batch))
            finally:
                log.flush()
                os.fsync(log.fileno())
        return found

    @staticmethod
    def _batches_here(
        spec: RunSpec, retriever: Retriever, pending: list[Query], batch_size: int, then: str
    ) -> Iterator[tuple[list[Query], list[Any], float]]:
        """(batch, rankings as returned, seconds) of each batch, searched in this process."""
        for start in range(0, len(pending), batch_size):
            batch = pending[start : start + batch_size]
            began = time.perf_counter()
            rankings = search_batch(spec, retriever, batch, then)
            yield batch, rankings, time.perf_counter() - began

    def _batches_on_workers(
        self, spec: RunSpec, retriever: Retriever, pending: list[Query], batch_size: int, then: str
    ) -> Iterator[tuple[list[Query], list[Any], float]]:
        """The same, searched by the executor's workers: shards of whole batches go out, each
        worker holding the retriever built once; batches come back as their shard completes,
        with what the worker spent (tokens, cost) and dropped (the rankings of what it uses)."""
        from harness.run.shards import ShardSearch, shard_size

        size = shard_size(len(pending), batch_size)
        shards = [pending[start : start + size] for start in range(0, len(pending), size)]
        factory = ShardSearch.of(
            spec,
            self._plans,
            self.cache_dir,
            self.device,
            batch_size,
            self.executor.worker_executor(),
            self._fingerprint,
        )
        try:
            for index, result in self.executor.map(factory, shards, description=f"search {spec.retriever}"):
                self._remote_usage = add_usage(self._remote_usage, result["usage"])
                for name, counts in result["dropped"].items():
                    total = self._dropped.setdefault(name, {"non-candidate": 0, "repeated": 0})
                    for what, count in counts.items():
                        total[what] = total.get(what, 0) + count
                position = 0
                for count, rankings, seconds in result["batches"]:
                    yield shards[index][position : position + count], rankings, seconds
                    position += count
        except HarnessError as exc:
            raise HarnessError(f"{str(exc).rstrip('.')}.{then}") from exc

    def _hardware(self) -> Any:
        """Where the run ran: this machine, or (another executor) the driver's CPU, the workers'
        device and what the executor says of itself."""
        if self.executor.local:
            return hardware(self.device)
        return hardware("cpu").model_copy(update={"device": self.device, "executor": self.executor.describe()})

    def _write_outputs(
        self,
        run_dir: Path,
        spec: RunSpec,
        queries: list[Query],
        ordered: list[dict[str, Any]],
        per_query: dict[str, np.ndarray],
        qrels: list[tuple[list[int], list[int]]],
    ) -> None:
        with atomic_write(run_dir / "per_query.jsonl") as out:
            for i, query in enumerate(queries):
                values = {name: float(v[i]) for name, v in per_query.items()}
                line = {"qid": query.id, "latency_ms": ordered[i]["latency_ms"], "metrics": values}
                if "details" in ordered[i]:
                    line["details"] = ordered[i]["details"]
                out.write(json.dumps(line) + "\n")
        with atomic_write(run_dir / "run.trec") as out:
            for query, result in zip(queries, ordered, strict=True):
                write_run(out, str(query.id), map(str, result["ids"]), result["scores"], spec.retriever)
        # The gold answers as trec_eval reads them — candidates relevant (each once), other
        # answers judged not relevant so that a query without a candidate answer still counts —
        # so that `trec_eval -c qrels.trec run.trec` reproduces the row from the run directory.
        with atomic_write(run_dir / "qrels.trec") as out:
            write_qrels(
                out,
                [
                    (str(q.id), map(str, relevant), map(str, other))
                    for q, (relevant, other) in zip(queries, qrels, strict=True)
                ],
            )


def search_batch(spec: RunSpec, retriever: Retriever, batch: list[Query], then: str = "") -> list[Any]:
    """``retriever.search`` of one batch; a failure other than a :class:`HarnessError` becomes
    one naming the retriever and the queries (``then``: what the message says next)."""
    try:
        return retriever.search(batch, spec.k)
    except HarnessError:
        raise
    except Exception as exc:
        raise HarnessError(
            f"retriever {spec.retriever!r} failed on queries {[q.id for q in batch][:5]}: "
            f"{type(exc).__name__}: {exc}.{then}"
        ) from exc


def _record(query: Query, ranking: Any, per_query_ms: float, batch_size: int) -> dict[str, Any]:
    """One resume-log line."""
    record = {
        "qid": query.id,
        "ids": ranking.ids.tolist(),
        # full precision: rounding would turn distinct scores into ties
        "scores": ranking.scores.tolist(),
        "latency_ms": per_query_ms,
        "batch_size": batch_size,
    }
    if ranking.details is not None:
        record["details"] = ranking.details
    return record


def _devices(executor: Executor, device: str, devices: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """The run's device and its encoding devices (``--devices cuda:0,cuda:1``), checked."""
    if not devices:
        return (resolve_device(device) if executor.local else executor.worker_device(device)), ()
    if not executor.local:
        raise HarnessError(
            f"--devices runs several encoding processes on this machine; with --executor {executor.name} "
            "the workers have the devices (--num-gpus-per-worker)"
        )
    if len(devices) < 2:
        raise HarnessError(f"--devices {','.join(devices)}: name two or more devices (one device: --device)")
    if any(d.startswith("cuda") for d in devices) and len(set(devices)) != len(devices):
        raise HarnessError(f"--devices {','.join(devices)}: each GPU once")
    kinds = {d.split(":", 1)[0] for d in devices}
    bad = [d for d in devices if d.split(":", 1)[0] not in ("cpu", "cuda") or (d.startswith("cpu:"))]
    if bad or len(kinds) != 1:
        raise HarnessError(
            f"--devices {','.join(devices)}: give devices of one kind, cuda:0,cuda:1,… (or cpu,cpu for several CPU "
            "processes)"
        )
    kind = kinds.pop()
    if device not in ("auto", kind):
        raise HarnessError(f"--device {device} and --devices {','.join(devices)} disagree")
    return resolve_device(kind), tuple(devices)


def _read_training(path: Path) -> TrainingInfo | None:
    """The training ``build.json`` recorded (a resumed run's row keeps it), or None."""
    try:
        recorded = json.loads(path.read_text(encoding="utf-8")).get("training")
        return TrainingInfo.model_validate(recorded) if recorded else None
    except (OSError, ValueError, AttributeError):
        return None


def _read_provenance(path: Path) -> dict[str, dict[str, Any]] | None:
    """The provenance ``build.json`` recorded, or None when it recorded none (no build yet, a
    run directory of an older harness, a file cut short)."""
    try:
        recorded = json.loads(path.read_text(encoding="utf-8")).get("provenance")
    except (OSError, ValueError, AttributeError):
        return None
    return recorded if isinstance(recorded, dict) else None


def _provenance_changed(
    run_dir: Path, before: dict[str, dict[str, Any]], now: dict[str, dict[str, Any]], answered: int
) -> str:
    changes = []
    for name in sorted(before.keys() | now.keys()):
        old, new = before.get(name, {}), now.get(name, {})
        keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        changes += [f"{name}: {key} {old.get(key, '(none)')} → {new.get(key, '(none)')}" for key in keys]
    return (
        f"run {run_dir}: the model changed since this run began ({'; '.join(changes)}; a hub branch moved, or "
        f"another copy is cached), and its {answered} answered queries came from the old one. Run again with "
        "--fresh to start over with the model as it is now (pin a revision, org/name@COMMIT, to keep runs from moving)"
    )


def _with_provenance(info: ComponentInfo, provenance: dict[str, dict[str, Any]]) -> ComponentInfo:
    found = provenance.get(info.name)
    return info.model_copy(update={"provenance": found}) if found else info


def _answered(path: Path, wanted: set[int]) -> int:
    """How many of ``wanted`` the resume log answers (complete lines only; read, never cut)."""
    answered: set[int] = set()
    try:
        with path.open("rb") as log:
            for raw in log:
                if not raw.endswith(b"\n"):
                    break
                try:
                    qid = json.loads(raw).get("qid")
                except (ValueError, AttributeError):
                    break
                if qid in wanted:
                    answered.add(qid)
    except OSError:
        return 0
    return len(answered)


def _written_since(cache_dir: Path, since: float) -> list[str]:
    """The cache entries (directories, relative to ``cache_dir``) holding files written since
    ``since``: what this run added. Locks, digest memos and unfinished temporaries left out."""
    directories: set[Path] = set()
    for root, dirs, files in os.walk(cache_dir):
        relative = Path(root).relative_to(cache_dir)
        skipped = {"digests"} if relative == Path(".") else set()
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.endswith(".tmp") and d not in skipped]
        if len(relative.parts) >= 3:
            # entries live at most two levels down (<plugin>/<entry>); below that, the
            # directory's own time says enough, and a large answer cache is not walked file by file
            dirs[:] = []
            if os.stat(root).st_mtime >= since:
                directories.add(relative)
            continue
        for name in files:
            if name.startswith(".") or relative == Path("."):
                continue
            try:
                if os.stat(os.path.join(root, name)).st_mtime >= since:
                    directories.add(relative)
            except OSError:
                continue
    # an entry, not each subdirectory of it
    entries = [d for d in directories if not any(other in d.parents for other in directories)]
    return sorted(str(d) for d in entries)
