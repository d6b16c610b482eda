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
searched again, and a line cut short by an interruption is discarded; a query logged twice
with different records is an error naming both lines (never the last one silently). A resumed run whose
retrievers resolve to something else than when it began (``Retriever.provenance``: a hub
branch that moved) is refused: its answers would come from two models.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from harness.dataset import Dataset
from harness.errors import HarnessError
from harness.executors import Executor, LocalExecutor
from harness.io import cache_root, exclusive, stable_hash, write_json
from harness.machine import hardware
from harness.metrics import METRICS_VERSION, evaluate, means, parse_metrics
from harness.plugins import using
from harness.queries import sample
from harness.retriever import ProgressFactory, ProgressTask
from harness.run.build import Builder, run_devices
from harness.run.checks import (
    add_usage,
    candidate_mask,
    check_answers,
    read_build_seconds,
    read_results,
    read_usage,
    subtract_usage,
)
from harness.run.health import summarize as summarize_health
from harness.run.outcome import CheckResult, RunInterrupted, RunOutcome
from harness.run.record import Latency, LeaderboardRow, queries_digest, versions
from harness.run.resolve import Component, RunSpec
from harness.run.rundir import (
    interrupted_message,
    provenance_changed,
    read_provenance,
    read_training,
    with_provenance,
    write_outputs,
)
from harness.run.scoring import hit_matrix
from harness.run.search import Search
from harness.training import (
    TrainingInfo,
    checkpoint_path,
    plot_curve,
)

_SYNC_SECONDS = 10.0


class Runner:
    """Executes :class:`RunSpec`s; holds loaded datasets so ``--all`` loads each once.

    ``progress(description, total)`` hands out the tasks retrievers advance; a factory with a
    ``phase(description, total)`` context manager too (the CLI's) also shows which phase the
    run is in, and ends the tasks started in a phase when it ends."""

    def __init__(
        self,
        plugins: Any,
        output_dir: str | os.PathLike[str] = "runs",
        device: str = "auto",
        batch_size: int | None = None,
        progress: ProgressFactory | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        fresh: bool = False,
        train_split: str = "train",
        validation_split: str | None = "val",
        allow_training: bool = True,
        executor: Executor | None = None,
        devices: Sequence[str] = (),
    ) -> None:

        self.plugins = plugins
        self.output_dir = Path(output_dir)
        # where work runs (--executor): with workers elsewhere, --device is theirs, and the
        # driver's build (filling the caches) is keyed for it
        self.executor: Executor = executor or LocalExecutor()
        self._fingerprint = ""  # the SKB's of the run under way (search workers check theirs)
        self.device, self.devices = run_devices(self.executor, device, devices)
        self.batch_size = batch_size
        self.progress: ProgressFactory = progress or (lambda description, total: ProgressTask())
        self.cache_dir = Path(cache_dir) if cache_dir else cache_root()
        self.fresh = fresh
        # trained retrievers: which splits they train and select on, and whether training may
        # happen here or a checkpoint must exist (`harness run --no-train`)
        self.train_split, self.validation_split, self.allow_training = train_split, validation_split, allow_training
        self.builder = Builder(
            cache_dir=self.cache_dir,
            device=self.device,
            devices=self.devices,
            executor=self.executor,
            progress=self.progress,
            train_split=train_split,
            validation_split=validation_split,
            allow_training=allow_training,
        )
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
            except KeyboardInterrupt as exc:  # a component's KeptWork says what it kept of its build
                raise RunInterrupted(self._interrupted(spec, since, getattr(exc, "kept", None))) from None

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

    def _interrupted(self, spec: RunSpec, since: float, kept: str | None = None) -> str:
        """What a Ctrl-C leaves behind: the answered queries a re-run resumes from, the caches."""
        return interrupted_message(spec.describe(), self._active, self.cache_dir, since, self._again, kept)

    def _run(self, spec: RunSpec) -> RunOutcome:
        started = time.perf_counter()
        phases = dict.fromkeys(("load", "build", "search", "evaluate", "write"), 0.0)
        with self._phase(f"load {spec.dataset}"):
            dataset = self.dataset(spec.dataset_component)
            queries = dataset.load_queries().split(spec.split)
            split_digest = queries_digest(queries)  # the split's, sampled or not: which rows compare
            if spec.sample:
                queries = sample(queries, spec.sample, spec.seed_of_sample)
            if not queries:
                raise HarnessError(f"dataset {spec.dataset!r}, split {spec.split!r} has no queries")
            skb = dataset.load_skb()
            self._fingerprint = skb.fingerprint  # what search workers must load too
            no_candidate_answer = check_answers(skb, queries, f"dataset {spec.dataset!r}, split {spec.split!r}")
        phases["load"] = time.perf_counter() - started

        retriever_info = spec.main.info
        uses = [component.info for component in spec.uses]
        dataset_info = spec.dataset_component.info
        self.builder.plans = self.builder.plan(spec, dataset, skb, spec.split)
        config = {
            "retriever": retriever_info.configuration(),
            "uses": [info.configuration() for info in uses],
            "dataset": dataset_info.configuration(),
            "skb": skb.fingerprint,
            # the evaluated queries themselves: an edited query must never reuse old results
            "queries": queries_digest(queries),
            "split": spec.split,
            "sample": spec.sample,
            "seed": spec.seed_of_sample if spec.sample else None,
            "k": spec.k,
            "metrics_version": METRICS_VERSION,
        }
        if self.builder.plans:  # another training set or seed is another model: never its results
            config["training"] = {name: plan.configuration() for name, plan in self.builder.plans.items()}
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
            provenance = read_provenance(build_path)
            training = read_training(build_path)
            # the row keeps what building the index cost; a resumed run's build (mostly a load
            # from the cache) is this invocation's phase, not that cost
            built_earlier = build_seconds > 0 and not self.fresh
            if spec.dropped_metrics:
                notes.append(f"left out {', '.join(spec.dropped_metrics)}: deeper than the ranking can be")
            if self.validation_split == spec.split and self.builder.plans:
                notes.append(
                    f"trained without early stopping: the validation split {spec.split!r} is the evaluated one"
                )
            usage_path = run_dir / "usage.json"
            if self.fresh:
                usage_path.unlink(missing_ok=True)
            usage = read_usage(usage_path)
            if pending:
                self.builder.dropped = {}
                # what earlier runs of these objects in this process spent is not this session's
                before = Builder.usage(spec)
                search = Search(spec, self.builder, self.executor, self.batch_size, self._again, self._fingerprint)
                self.executor.take_notes()  # what earlier runs of this executor left
                try:
                    with self._phase(f"index {spec.retriever}: build or load"):
                        retriever_obj, phases["build"] = self.builder.build_all(spec, skb, dataset)
                    built = Builder.provenance(spec)
                    if built_earlier and provenance is not None and built != provenance:
                        raise HarnessError(provenance_changed(run_dir, provenance, built, len(queries) - len(pending)))
                    if not built_earlier:
                        build_seconds = phases["build"]
                    provenance = built
                    # the main retriever's training, else that of a trained retriever it uses
                    trained = [
                        self.builder.trained[c.name] for c in [spec.main, *spec.uses] if c.name in self.builder.trained
                    ]
                    training = training if built_earlier and training else next(iter(trained), None)
                    write_json(
                        build_path,
                        {
                            "seconds": build_seconds,
                            "provenance": provenance,
                            "training": training.model_dump(mode="json") if training else None,
                        },
                    )
                    for name in self.builder.trained:
                        plot_curve(
                            checkpoint_path(self.cache_dir, name, self.builder.plans[name]),
                            run_dir / f"training-{name}.png",
                            f"{name} on {spec.dataset} ({self.builder.plans[name].split})",
                        )
                    began = time.perf_counter()
                    # the log holds what was read plus what this search appends (the lock is ours)
                    with self._phase(f"search {spec.retriever}", len(pending)) as task:
                        done.update(search.run(retriever_obj, pending, results_path, candidate_mask(skb), task))
                    phases["search"] = time.perf_counter() - began
                finally:
                    # added to what earlier sessions spent: a resumed row reports the whole run's
                    # tokens and cost, and a crash (in the build too) keeps what was spent before it
                    usage = add_usage(
                        add_usage(usage, subtract_usage(Builder.usage(spec), before)), search.remote_usage
                    )
                    executor_notes = self.executor.take_notes()
                    if executor_notes and len(usage) > 0:  # the row says its usage is a lower bound
                        usage["undercounted"] = " ".join(executor_notes)
                    write_json(usage_path, usage)
                notes += executor_notes
                # a cost the row cannot give (a model without a price) is said with the results
                notes += [f"cost unknown: {why}" for key, why in usage.items() if key.endswith("cost_unknown")]
                notes += [
                    f"dropped {count} {what} ids from {name!r}'s rankings (STaRK's evaluator ignores them)"
                    for name, counts in self.builder.dropped.items()
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
                health = summarize_health(
                    type(spec.main.instance),
                    retriever_info.params,
                    [r.get("details") for r in ordered],
                    [r["ids"] for r in ordered],
                    [q.answer_ids for q in queries],
                    mask,
                    training,
                )
                # a row whose own idea never ran is said at once, not only on the leaderboard
                notes += [f"flagged: {flag.component}: {flag.reason}" for flag in health.flags]
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
                write_outputs(run_dir, spec, queries, ordered, per_query, gold)

            latencies = np.asarray([r["latency_ms"] for r in ordered], dtype=np.float64)
            regime = spec.main.instance.regime
            if regime == "zero-shot" and training is not None:
                regime = "trained"  # a zero-shot composite of a trained retriever learned from the train split
            built_from = provenance or {}
            row = LeaderboardRow(
                retriever=with_provenance(retriever_info, built_from),
                uses=[with_provenance(info, built_from) for info in uses],
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
                health=health,
                hardware=self._hardware(),
                versions=versions(),
                config_hash=config_hash,
                timestamp=datetime.now(UTC),
                run_dir=os.path.relpath(run_dir) if not run_dir.is_absolute() else str(run_dir),
            )
            # The run directory is self-contained (row, configuration, per-query results, TREC run):
            # what `harness submit` bundles and `harness leaderboard validate` recomputes.
            write_json(run_dir / "row.json", row.model_dump(mode="json"))
            phases["write"] = time.perf_counter() - began
            checks = []
            if spec.condition is not None:
                for metric, expected in spec.condition.expected.items():
                    checks.append(CheckResult(metric, expected, row.metrics.get(metric), spec.condition.tolerance))
            resumed = len(queries) - len(pending)
            return RunOutcome(spec, row, run_dir, None, resumed, checks, notes, phases, built_earlier)

    def train(self, spec: RunSpec) -> dict[str, TrainingInfo]:
        """``harness train``: train (or find the checkpoint of) every trained retriever of
        ``spec``, on the runner's train split, without evaluating anything."""
        dataset = self.dataset(spec.dataset_component)
        skb = dataset.load_skb()
        builder = self.builder
        builder.plans = builder.plan(spec, dataset, skb, None)
        if not builder.plans:
            raise HarnessError(
                f"retriever {spec.retriever!r} is not trained (its regime is {spec.main.instance.regime!r})"
            )
        builder.dropped, builder.trained = {}, {}
        builder.fit_only = True  # the trained retrievers need no index to be trained
        try:
            builder.build_all(spec, skb, dataset)
        finally:
            builder.fit_only = False
        return dict(builder.trained)

    def _hardware(self) -> Any:
        """Where the run ran: this machine, or (another executor) the driver's CPU, the workers'
        device and what the executor says of itself."""
        if self.executor.local:
            return hardware(self.device)
        return hardware("cpu").model_copy(update={"device": self.device, "executor": self.executor.describe()})
