"""Reproducing leaderboard rows from what they record (``harness leaderboard reproduce ROW``,
``harness leaderboard regenerate``): every row reproducible by one command.

A row records what its run was: the retriever and every retriever it uses (plugin, parameters,
version), the dataset with its parameters, the split, the sample, k, the metrics and, for a
trained retriever, the splits and seed it trained on (a sample's seed is in the run directory's
``config.json``). The components are constructed from those records, never looked up in the
registry (whose presets may have changed since), and run by the runner into a new run
directory; then each metric is compared with the row's. When the re-run's configuration hash
differs from the row's, what the installed code resolves is no longer what the row records (a
plugin's version, a parameter it added): the row is stale, whatever its metrics.

A row over training seeds (``harness run --seeds``) is re-run over its seeds on its sample (the
sample's seed is in each seed's ``config.json``): each metric's mean, std, min and max are
compared, and each seed's configuration hash. Every row of a leaderboard: :mod:`.regenerate`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.leaderboard.rows import LeaderboardRow, read_rows, row_path, run_dir_of
from harness.plugins import PluginManager, get_plugin_manager
from harness.retriever import ProgressFactory
from harness.run import Runner, RunSpec, load_registry, resolve
from harness.run.resolve import Component, construct
from harness.run.secrets import check_runnable
from harness.run.seeds import run_seeds

#: a deterministic zero-shot row reproduces to the last bits of its arithmetic
DEFAULT_TOLERANCE = 1e-9
#: differences of configuration listed at most
_MAX_CHANGES = 12


@dataclass
class MetricCheck:
    metric: str
    recorded: float
    reproduced: float | None
    tolerance: float
    #: of a row over seeds, which of the metric's statistics over them: mean, std, min or max
    statistic: str | None = None

    @property
    def label(self) -> str:
        return self.metric if self.statistic is None else f"{self.metric} {self.statistic}"

    @property
    def difference(self) -> float | None:
        return None if self.reproduced is None else self.reproduced - self.recorded

    @property
    def ok(self) -> bool:
        return self.difference is not None and abs(self.difference) <= self.tolerance


@dataclass
class Reproduction:
    """A row re-run: its metrics against the row's, and whether the configuration still hashes the same."""

    row: LeaderboardRow
    reproduced: LeaderboardRow
    run_dir: Path
    checks: list[MetricCheck]
    #: what differs between the row's configuration and the re-run's (empty when the hashes agree)
    changes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: ``harness run ...`` that runs the same configuration here, when the registry resolves one
    run_command: str | None = None

    @property
    def stale(self) -> bool:
        return self.reproduced.config_hash != self.row.config_hash

    @property
    def metrics_match(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def ok(self) -> bool:
        return self.metrics_match and not self.stale

    def verdict(self) -> str:
        """One line: reproduced, or what is not."""
        metrics = {c.metric for c in self.checks}
        failed = [c for c in self.checks if not c.ok]
        said = f"{len({c.metric for c in failed})} of {len(metrics)} metrics differ" if failed else ""
        said += f" ({', '.join(c.label for c in failed)})" if failed else f"{len(metrics)} metrics match"
        if self.row.seeds is not None and not failed:
            said += f" (mean, std, min, max over seeds {', '.join(map(str, self.row.seeds.values))})"
        if self.stale:
            return f"{said}; stale: configuration {self.reproduced.config_hash} ≠ the row's {self.row.config_hash}"
        return f"{'reproduced: ' if self.ok else ''}{said}, configuration {self.row.config_hash}"


@dataclass
class RowSource:
    """A row to reproduce, with where it was read and its run directory's ``config.json``."""

    row: LeaderboardRow
    file: Path
    config: dict[str, Any] | None
    #: the leaderboard whose ``rows/`` holds it, if one does
    leaderboard: Path | None = None
    #: the path it was read from, as given
    given: Path | None = None
    #: its run directory, where it is at hand (a seeded row's holds each seed's run)
    run_dir: Path | None = None

    def command(self) -> str:
        """The command that reproduces it from here: :func:`reproduce_command` for a leaderboard's
        row under the working directory, else the row's path as it was given."""
        where = os.path.relpath(self.leaderboard) if self.leaderboard is not None else ".."
        if not where.startswith(".."):
            return reproduce_command(self.row, where)
        return "harness leaderboard reproduce " + shlex.quote(str(self.given or self.file))


def load_row(path: str | Path) -> RowSource:
    """The row of ``path``: a row file (``leaderboard/rows/...json``) or a run directory with ``row.json``."""
    path = Path(path)
    file = path / "row.json" if path.is_dir() else path
    if not file.is_file():
        raise HarnessError(f"{path}: not a leaderboard row (a JSON file under rows/) nor a run directory with row.json")
    rows = read_rows(file)
    if len(rows) != 1:
        raise HarnessError(f"{file}: holds {len(rows)} rows; give one row's file (leaderboard/rows/<dataset>/...)")
    row = rows[0]
    # a leaderboard's row is rows/<dataset>/<split>/<name>.json, its run directory inside the leaderboard
    above = file.resolve().parents
    root = above[3] if not path.is_dir() and len(above) > 3 and above[2].name == "rows" else None
    if path.is_dir():
        run_dir: Path | None = path
    else:
        run_dir = run_dir_of(root, row.run_dir) if root else Path(row.run_dir) if row.run_dir else None
    config = _config(run_dir) if run_dir is not None else None
    return RowSource(row, file, config, root, path, run_dir if run_dir is not None and run_dir.is_dir() else None)


def _config(run_dir: Path) -> dict[str, Any] | None:
    """``run_dir/config.json``, or None where there is none."""
    if not (run_dir / "config.json").is_file():
        return None
    try:
        config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HarnessError(f"{run_dir / 'config.json'}: unreadable: {exc}") from None
    return config if isinstance(config, dict) else None


def sample_seed_of(source: RowSource) -> int | None:
    """The seed of the row's sample, from its run's ``config.json`` (a seeded row's: its first
    seed's run's, where every seed's run has the same sample), None where it is not at hand."""
    config, seeds = source.config or {}, source.row.seeds
    if seeds is not None:
        config = (_config(source.run_dir / seeds.runs[0]) if source.run_dir else None) or {}
    return config["seed"] if isinstance(config.get("seed"), int) else None


def seed_of(source: RowSource) -> int:
    """The seed the row's run used: its training's (not of a row over seeds: each seed's is its
    own), else its sample's, else 0."""
    if source.row.training is not None and source.row.seeds is None:
        return source.row.training.seed
    return sample_seed_of(source) or 0


def spec_from_row(row: LeaderboardRow, plugins: PluginManager, data_dir: str | None = None, seed: int = 0) -> RunSpec:
    """The run ``row`` records, every component constructed from its recorded plugin and
    parameters (as a search worker constructs the driver's); ``data_dir`` says where the
    dataset's files are here. Credentials the row records redacted are ``***`` here: enough to
    compare configurations (validation), not to run (:func:`reproduce` refuses those rows)."""
    retrievers: dict[str, Component] = {}
    for info in [row.retriever, *row.uses]:
        retrievers.setdefault(info.name, _construct(plugins, "retriever", info))
    for name, component in retrievers.items():
        missing = [used for used in component.instance.uses() if used not in retrievers]
        if missing:
            raise HarnessError(f"retriever {name!r} uses {missing[0]!r}, which the row does not record in `uses`")
    dataset = _construct(plugins, "dataset", row.dataset, {"data_dir": data_dir} if data_dir else None)
    dataset.instance.check_split(row.split)
    return RunSpec(
        retriever=row.retriever.name,
        retrievers=retrievers,
        dataset=row.dataset.name,
        dataset_component=dataset,
        split=row.split,
        k=row.k,
        metrics=list(row.metrics),
        sample=row.sample,
        seed=seed,
    )


def _construct(plugins: PluginManager, kind: str, info: Any, overrides: dict[str, Any] | None = None) -> Component:
    if ":" in info.plugin:  # adopted: a caller's class, recorded by its import path
        raise HarnessError(
            f"{kind} {info.name!r} was constructed by the caller ({info.plugin}), not by a plugin: "
            "the row cannot be re-run from what it records"
        )
    component = construct(plugins, kind, info.name, info.plugin, {**info.params, **(overrides or {})})
    if not overrides:
        return component
    # where the files are is not what was evaluated (the SKB's fingerprint and the queries'
    # digest are in the configuration): the row's record of it stays, so the hash can agree
    recorded = component.info.model_copy(
        update={"params": {**component.info.params, **{k: info.params.get(k) for k in overrides}}}
    )
    recorded._runtime_params = component.info.runtime_params
    return Component(component.name, component.instance, recorded)


def reproduce(
    path: str | Path | RowSource,
    out: str | Path = "runs",
    *,
    data_dir: str | None = None,
    tolerance: float | None = None,
    device: str = "auto",
    cache_dir: str | Path | None = None,
    plugins: PluginManager | None = None,
    progress: ProgressFactory | None = None,
) -> Reproduction:
    """Re-run the row of ``path`` (a row file or a run directory) into a new run directory under
    ``out`` and compare its metrics with the row's, each within ``tolerance`` (default
    :data:`DEFAULT_TOLERANCE`). Every query is searched again (a reproduction never resumes
    from an earlier log); indexes and checkpoints come from the cache (``cache_dir``, default
    ``$HARNESS_CACHE``): an empty one builds and trains everything again."""
    source = path if isinstance(path, RowSource) else load_row(path)
    row = source.row
    plugins = plugins or get_plugin_manager()
    tolerance = DEFAULT_TOLERANCE if tolerance is None else tolerance
    if tolerance < 0:
        raise HarnessError(f"--tolerance must be 0 or more, got {tolerance}")
    own = source.file.parent if source.file.name == "row.json" else None
    name = f"seeds-{row.config_hash}" if row.seeds else row.config_hash  # as harness.run.seeds names it
    target = Path(out) / f"{row.dataset.name}-{row.split}-{row.retriever.name}-{name}"
    if own is not None and target.resolve() == own.resolve():
        raise HarnessError(f"{own}: the re-run would overwrite the run it reproduces; give --out another directory")
    seed = seed_of(source)
    notes = []
    if row.sample and (row.training is None or row.seeds) and sample_seed_of(source) is None:
        notes.append("the sample's seed is not recorded beside the row (no config.json): assumed 0")
    for kind, info in [("retriever", row.retriever), *(("retriever", i) for i in row.uses), ("dataset", row.dataset)]:
        check_runnable(f"{kind} {info.name!r}", info.params)  # credentials recorded as *** cannot run
    spec = spec_from_row(row, plugins, data_dir, seed)
    training = row.training
    runner = Runner(
        plugins,
        output_dir=out,
        device=device,
        progress=progress,
        cache_dir=cache_dir,
        fresh=True,  # a resumed log would reproduce the scoring only, not the search
        train_split=training.split if training else "train",
        validation_split=training.validation_split if training else "val",
    )
    if row.seeds is not None:
        # every seed trains its own model on the one sample the row recorded
        outcome = run_seeds(runner, dataclasses.replace(spec, sample_seed=seed), row.seeds.values)
    else:
        outcome = runner.run(spec)
    new, equivalent = outcome.row, _run_equivalent(spec, plugins, seed, row)
    changes = [] if new.config_hash == row.config_hash else _changes(source, outcome.run_dir, new)
    checks = _checks(row, new, tolerance)
    return Reproduction(row, new, outcome.run_dir, checks, changes, notes + outcome.notes, equivalent)


def _checks(row: LeaderboardRow, new: LeaderboardRow, tolerance: float) -> list[MetricCheck]:
    """Each metric against the row's; of a row over seeds, its mean, std, min and max."""
    if row.seeds is None:
        return [MetricCheck(m, value, new.metrics.get(m), tolerance) for m, value in row.metrics.items()]
    checks = []
    for metric, value in row.metrics.items():
        checks.append(MetricCheck(metric, value, new.metrics.get(metric), tolerance, "mean"))
        spread, again = row.seeds.metrics.get(metric), new.seeds.metrics.get(metric) if new.seeds else None
        for statistic in ("std", "min", "max") if spread is not None else ():
            got = getattr(again, statistic) if again is not None else None
            checks.append(MetricCheck(metric, getattr(spread, statistic), got, tolerance, statistic))
    return checks


def _changes(source: RowSource, run_dir: Path, new: LeaderboardRow) -> list[str]:
    """What differs between the row's configuration and the re-run's: ``config.json`` against
    ``config.json`` when the row's is at hand, else what the two rows record; of a row over
    seeds, each seed's whose configuration hash differs, as ``seed 1: ...``."""
    found = []
    old, again = source.row.seeds, new.seeds
    if old is not None and again is not None and old.values == again.values:
        pairs = zip(old.values, old.runs, old.config_hashes, again.runs, again.config_hashes, strict=False)
        for seed, run, before, new_run, after in pairs:
            config = _config(source.run_dir / run) if source.run_dir else None
            said = _config_changes(config, source.row, run_dir / new_run, new) if before != after else []
            found += [f"seed {seed}: {change}" for change in said]
    found = found or _config_changes(source.config, source.row, run_dir, new)
    return found[:_MAX_CHANGES] + ([f"and {len(found) - _MAX_CHANGES} more"] if len(found) > _MAX_CHANGES else [])


def _config_changes(config: dict[str, Any] | None, row: LeaderboardRow, run: Path, new: LeaderboardRow) -> list[str]:
    after = _config(run)
    found = differences(config, after) if config and after else differences(_recorded(row), _recorded(new))
    return found or ["what the row does not record (its run directory's config.json is not at hand)"]


def _recorded(row: LeaderboardRow) -> dict[str, Any]:
    """What a row records of its configuration, named as ``config.json`` names it."""
    return {
        "retriever": row.retriever.configuration(),
        "uses": [info.configuration() for info in row.uses],
        "dataset": row.dataset.configuration(),
        "skb": row.dataset_fingerprint,
        "split queries": row.queries_digest,
        "split": row.split,
        "sample": row.sample,
        "k": row.k,
        "metrics_version": row.versions.metrics,
        "training": row.training.model_dump(mode="json", include={"split", "digest", "validation_split", "seed"})
        if row.training
        else None,
    }


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    """Each leaf that differs between two JSON values, as ``path: old → new``."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in [*old, *(k for k in new if k not in old)]:
            inner = f"{where}.{key}" if where else str(key)
            if key not in new:
                found.append(f"{inner}: {json.dumps(old[key])} → (unset)")
            elif key not in old:
                found.append(f"{inner}: (unset) → {json.dumps(new[key])}")
            else:
                found += differences(old[key], new[key], inner)
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True)) for d in differences(a, b, f"{where}[{i}]")]
    return [] if old == new else [f"{where}: {json.dumps(old)} → {json.dumps(new)}"]


def _run_equivalent(spec: RunSpec, plugins: PluginManager, seed: int, row: LeaderboardRow) -> str | None:
    """:func:`run_command` when ``harness run`` resolves the row's names to exactly the
    configuration reproduced (the presets and ``registry.yaml`` as installed here)."""
    training = row.training
    try:
        by_name = resolve(
            load_registry(None, plugins),
            plugins,
            retriever=row.retriever.name,
            dataset=row.dataset.name,
            split=row.split,
            k=row.k,
            metrics=list(row.metrics),
            sample_fraction=row.sample,
            seed=seed,
            train_split=training.split if training else "train",
        )
    except HarnessError:
        return None

    def configuration(s: RunSpec) -> list[Any]:
        parts = [c.info.configuration() for c in s.retrievers.values()]
        return [*parts, s.dataset_component.info.configuration(), s.metrics, s.k, s.sample]

    return run_command(row, seed) if configuration(by_name) == configuration(spec) else None


def reproduce_command(row: LeaderboardRow, leaderboard: str | Path = "leaderboard") -> str:
    """The one command that reproduces ``row`` of the curated ``leaderboard``:
    ``harness leaderboard reproduce leaderboard/rows/debian/test/bm25-<hash>.json``."""
    return "harness leaderboard reproduce " + shlex.quote(row_path(Path(leaderboard), row).as_posix())


def run_command(row: LeaderboardRow, seed: int | None = None) -> str:
    """``harness run ...`` naming ``row``'s retriever and dataset: the same run where the
    registry resolves those names to what the row records (``reproduce`` says whether it does
    here). ``seed``: a sample's (the row keeps a training's)."""
    words = ["harness", "run", "-r", row.retriever.name, "-d", row.dataset.name, "-s", row.split]
    words += ["--k", str(row.k), "-m", ",".join(row.metrics)]
    if row.sample:
        words += ["--sample", f"{row.sample:g}"]
    if row.training is not None:
        seed = row.training.seed if row.seeds is None else seed
        words += ["--train-split", row.training.split, "--validation-split", row.training.validation_split or "none"]
    if row.seeds is not None:  # --seed is then the sample's only
        words += ["--seeds", ",".join(map(str, row.seeds.values))]
    if seed and (row.sample or (row.training is not None and row.seeds is None)):
        words += ["--seed", str(seed)]
    return shlex.join(words)
