"""Building a run's retrievers: training plans, training (or finding the checkpoint), building
each retriever once, what they spent and what their builds resolved. The runner builds here,
and so does each search worker of an executor (``shards``), from the same code."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.dataset import Dataset
from harness.errors import HarnessError
from harness.executors import Executor, LocalExecutor
from harness.machine import resolve_device
from harness.queries import Query
from harness.retriever import BuildContext, ProgressFactory, ProgressTask, Retriever
from harness.run.checks import CheckedRetriever, candidate_mask
from harness.run.resolve import Component, RunSpec
from harness.run.secrets import redacted
from harness.skb import SKB
from harness.training import TrainingInfo, TrainingPlan, ensure_trained, plan_training, training_configuration


@dataclass
class Builder:
    """Builds the retrievers of a spec where the run is (``cache_dir``, ``device``, ...),
    training first what is trained. ``plans``, ``trained`` and ``dropped`` (ids the rankings of
    used retrievers lost to the checks, by retriever) are kept for the run to record."""

    cache_dir: Path
    device: str = "cpu"
    devices: tuple[str, ...] = ()
    executor: Executor = field(default_factory=LocalExecutor)
    progress: ProgressFactory = field(default=lambda description, total: ProgressTask())
    train_split: str = "train"
    validation_split: str | None = "val"
    allow_training: bool = True
    plans: dict[str, TrainingPlan] = field(default_factory=dict)
    trained: dict[str, TrainingInfo] = field(default_factory=dict)
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)
    #: train the trained retrievers, build nothing (``harness train``)
    fit_only: bool = False

    def plan(self, spec: RunSpec, dataset: Dataset, skb: SKB, evaluated: str | None) -> dict[str, TrainingPlan]:
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
                    # (a trained one with its own training identity: the base weights it trained from)
                    "uses": [_learned_from(u) for u in spec.uses if u is not c],
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

    def build_all(self, spec: RunSpec, skb: SKB, dataset: Dataset) -> tuple[Retriever, float]:
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
                    counts = self.dropped.setdefault(name, {"non-candidate": 0, "repeated": 0})
                    built[name] = CheckedRetriever(spec.retrievers[name], mask, counts)
                return built[name]

            self._build(component, skb, dataset, dataclasses.replace(base, build_retriever=fetch))

        started = time.perf_counter()
        build(spec.main)
        return spec.main.instance, time.perf_counter() - started

    @staticmethod
    def usage(spec: RunSpec) -> dict[str, Any]:
        """What the spec's objects report having spent, the used ones' keys prefixed by name.
        A report that fails is recorded as such, never allowed to hide the run's own error."""
        spent: dict[str, Any] = {}
        for component in spec.retrievers.values():
            try:
                reported = component.instance.usage()
            except Exception as exc:
                reported = {"usage_error": f"{type(exc).__name__}: {exc}"}
            prefix = "" if component.name == spec.retriever else f"{component.name}."
            for key, value in redacted(reported).items():  # recorded in usage.json and the row
                spent.setdefault(f"{prefix}{key}", value)
        return spent

    @staticmethod
    def provenance(spec: RunSpec) -> dict[str, dict[str, Any]]:
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
                found[name] = redacted(reported)  # recorded in build.json and the row: no credentials
        return found

    def _build(self, component: Component, skb: SKB, dataset: Dataset, context: BuildContext) -> None:
        retriever: Retriever = component.instance
        try:
            if component.name in self.plans:
                self.trained[component.name] = ensure_trained(
                    component.name, retriever, skb, self.plans[component.name], context, self.allow_training
                )
                if self.fit_only:
                    return
            retriever.build(skb, context)
        except HarnessError:
            raise
        except Exception as exc:
            raise HarnessError(f"retriever {component.name!r} failed to build: {type(exc).__name__}: {exc}") from exc


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


def run_devices(executor: Executor, device: str, devices: Sequence[str]) -> tuple[str, tuple[str, ...]]:
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


def _learned_from(component: Component) -> dict[str, Any]:
    """What a trained retriever learns from a retriever it uses: its configuration, and for a
    trained one its training identity too (its data and seed are the run's, already keyed)."""
    configuration = component.info.configuration()
    if component.instance.regime == "trained":
        configuration["training_identity"] = component.instance.training_identity()
    return configuration
