"""From names to a run: every name looked up once, every component constructed once.

``resolve`` turns the command line (or a condition) into a :class:`RunSpec`: the dataset and
the retriever with every retriever it ``uses()``, recursively, each constructed once with its
validated parameters. The runner builds and searches exactly these objects, and the row
records exactly their parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from harness.dataset import Dataset
from harness.errors import HarnessError
from harness.metrics import DEFAULT_METRICS, parse_metrics
from harness.options import did_you_mean, parse_options
from harness.plugins import get_plugin_manager, using
from harness.retriever import Reranker, Retriever
from harness.run.record import ComponentInfo
from harness.run.registry import Condition, DatasetEntry, Registry, RetrieverEntry, load_registry
from harness.run.secrets import check_no_secrets, redacted


@dataclass
class Component:
    """A dataset or retriever as a run uses it: its name, the object, what the row records."""

    name: str
    instance: Any
    info: ComponentInfo


@dataclass
class RunSpec:
    """A fully resolved run: every name looked up, every default filled in."""

    retriever: str
    #: the retriever first, then every retriever it uses (depth first), each once
    retrievers: dict[str, Component]
    dataset: str
    dataset_component: Component
    split: str
    k: int
    metrics: list[str]
    sample: float | None = None
    seed: int = 0
    #: the seed of the sample when it is not ``seed`` (``--seeds``: each seed trains its own
    #: model on the same sampled queries)
    sample_seed: int | None = None
    condition: Condition | None = None
    #: default metrics left out because their cut-off is deeper than the ranking can be
    dropped_metrics: list[str] = field(default_factory=list)

    @property
    def main(self) -> Component:
        return self.retrievers[self.retriever]

    @property
    def uses(self) -> list[Component]:
        return [c for name, c in self.retrievers.items() if name != self.retriever]

    def describe(self) -> str:
        instance = self.main.instance
        chain = self.retriever
        if isinstance(instance, Reranker):  # its Options have first_stage (not necessarily Reranker.Options)
            chain = f"{instance.options.first_stage} → {self.retriever}"  # type: ignore[attr-defined]
        extra = f", {self.sample:.0%} sample" if self.sample else ""
        if self.sample_seed is not None:
            extra += f", seed {self.seed}"
        return f"{chain} on {self.dataset}/{self.split} (k={self.k}{extra})"

    @property
    def seed_of_sample(self) -> int:
        return self.seed if self.sample_seed is None else self.sample_seed


def _entry(kind: str, entries: dict[str, Any], entry_type: type[Any], plugins: Any, name: str) -> Any:
    """A registry entry by name, else a plugin component of that name with default parameters."""
    components = plugins.components
    if name in entries:
        components.get(kind, entries[name].plugin)  # its plugin must be installed
        return entries[name]
    if name in components.by_kind.get(kind, {}) or (kind, name) in components.clashes:
        components.get(kind, name)  # a clash is reported here
        return entry_type(plugin=name)
    names = sorted(set(entries) | set(components.by_kind.get(kind, {})))
    known = ", ".join(names) or "none"
    raise HarnessError(f"unknown {kind} {name!r}{did_you_mean(name, names)}; known: {known}{components.failure_hint()}")


def construct(
    plugins: Any, kind: str, name: str, plugin: str, params: dict[str, Any], origin: str | None = None
) -> Component:
    """The component ``plugin`` constructed with ``params`` (validated by its ``Options`` first);
    ``origin``, the registry file of the entry, prefixes any error."""
    components = plugins.components
    cls = components.get(kind, plugin)
    what = f"{origin}: {kind} {name!r}" if origin else f"{kind} {name!r}"
    check_no_secrets(params, what)
    options = getattr(cls, "Options", None)
    try:
        with using(plugins):  # what the component looks up while validating comes from this manager
            if isinstance(options, type) and issubclass(options, BaseModel):
                # every value checked against its declared type before the component's own code
                # sees it (a constructor comparing `k1: fast` with a number fails unreadably)
                parse_options(options, params, what)
            instance = cls(**params)
    except HarnessError as exc:
        message = str(exc)
        raise HarnessError(
            message if message.startswith(what) else message.replace(f"{kind} {plugin!r}", what, 1)
        ) from None
    except TypeError as exc:
        raise HarnessError(f"{what}: bad parameters {params}: {exc}") from exc
    full = instance.params
    info = ComponentInfo(
        name=name,
        plugin=plugin,
        params=redacted(full),  # what is recorded: credentials inside values as ***
        version=str(getattr(instance, "version", "0")),  # the instance's: a parameter may choose it
        package=plugins.distributions.get(components.owner.get((kind, plugin), "")),
    )
    if info.params != full:
        info._runtime_params = full
    return Component(name, instance, info)


def adopt(kind: str, instance: Any, plugins: Any) -> Component:
    """A component the caller constructed (``harness.evaluate(MyRetriever(...))``), recorded as
    constructing it by name would be: its ``name``, every parameter that runs, its version, and
    where its class comes from. A class a plugin registers under that name is recorded as that
    plugin's (its distribution too), exactly as resolving the name would record it; any other
    class by its import path (``plugin: "__main__:Mine"``), so that a notebook's class is never
    taken for a plugin's of the same name (another configuration, never its results)."""
    name = getattr(instance, "name", None)
    if not isinstance(name, str) or not name:
        raise HarnessError(f"{type(instance).__name__}: a {kind} needs a class attribute `name`")
    cls = type(instance)
    components = plugins.components
    registered = components.by_kind.get(kind, {})
    try:
        is_plugins = name in registered and (kind, name) not in components.clashes and registered[name] is cls
    except HarnessError:  # the plugin's class does not load: this one is not it
        is_plugins = False
    full = instance.params
    check_no_secrets(full, f"{kind} {name!r}")
    info = ComponentInfo(
        name=name,
        plugin=name if is_plugins else f"{cls.__module__}:{cls.__qualname__}",
        params=redacted(full),
        version=str(getattr(instance, "version", "0")),
        package=(plugins.distributions.get(components.owner.get((kind, name), "")) if is_plugins else None),
    )
    if info.params != full:
        info._runtime_params = full
    return Component(name, instance, info)


def resolve_retrievers(
    registry: Registry,
    plugins: Any,
    name: str,
    overrides: dict[str, Any] | None = None,
    given: Component | None = None,
) -> dict[str, Component]:
    """``name`` and every retriever it uses, recursively, each constructed once (cycles are
    errors). ``overrides`` replace parameters of ``name``'s entry (``harness run -p``);
    ``given``, a retriever the caller constructed, stands for ``name``."""
    found: dict[str, Component] = {}

    def visit(current: str, path: tuple[str, ...]) -> None:
        if current in path:
            raise HarnessError(f"retriever {path[-1]!r} uses {current!r} in a cycle ({' → '.join((*path, current))})")
        if current in found:
            return
        if given is not None and current == name:
            found[current] = given
        else:
            entry = _entry("retriever", registry.retrievers, RetrieverEntry, plugins, current)
            origin = registry.origin("retriever", current)
            params = {**entry.params, **(overrides or {})} if current == name else entry.params
            found[current] = construct(plugins, "retriever", current, entry.plugin, params, origin)
        for used in found[current].instance.uses():
            visit(used, (*path, current))

    visit(name, ())
    return found


def resolve_dataset(registry: Registry, plugins: Any, name: str, params: dict[str, Any] | None = None) -> Component:
    """The dataset ``name`` constructed; ``params`` override its entry's (``--data-dir``)."""
    entry: DatasetEntry = _entry("dataset", registry.datasets, DatasetEntry, plugins, name)
    origin = registry.origin("dataset", name)
    return construct(plugins, "dataset", name, entry.plugin, {**entry.params, **(params or {})}, origin)


def resolve(
    registry: Registry,
    plugins: Any,
    retriever: str | Retriever | None = None,
    dataset: str | Dataset | None = None,
    split: str | None = None,
    k: int | None = None,
    metrics: Sequence[str] | None = None,
    sample_fraction: float | None = None,
    seed: int = 0,
    dataset_params: dict[str, Any] | None = None,
    train_split: str = "train",
    retriever_params: dict[str, Any] | None = None,
) -> RunSpec:
    """Fill in defaults from the registry, check every name, construct every component.
    ``plugins`` is the :class:`harness.plugins.PluginManager`; ``dataset_params`` override the
    dataset entry's parameters (``--data-dir`` sets ``data_dir``), ``retriever_params`` the
    retriever's (``-p KEY=VALUE``). ``retriever`` and ``dataset`` may be objects the caller
    constructed (a notebook's retriever); what they ``uses()`` is resolved by name as usual."""
    given = adopt("retriever", retriever, plugins) if isinstance(retriever, Retriever) else None
    given_dataset = adopt("dataset", dataset, plugins) if isinstance(dataset, Dataset) else None
    if given is not None and retriever_params:
        raise HarnessError("retriever parameters go to the retriever's constructor when it is given constructed")
    named = None if isinstance(retriever, Retriever) else retriever  # from here on, names
    named_dataset = None if isinstance(dataset, Dataset) else dataset
    retriever = given.name if given is not None else (named or registry.defaults.retriever)
    dataset = given_dataset.name if given_dataset is not None else (named_dataset or registry.defaults.dataset)
    if retriever is None:
        raise HarnessError("no retriever given and the registry names no default (--retriever NAME)")
    if dataset is None:
        raise HarnessError("no dataset given and the registry names no default (--dataset NAME)")
    split = split or registry.defaults.split
    # every name first: a typo is reported before anything is constructed or read
    if given is None:
        _entry("retriever", registry.retrievers, RetrieverEntry, plugins, retriever)
    if given_dataset is None:
        _entry("dataset", registry.datasets, DatasetEntry, plugins, dataset)
    # a condition's expected scores belong to the entry's parameters, not to overridden ones
    # a condition's scores are for the entries' components, not for objects the caller constructed
    given_any = given is not None or given_dataset is not None
    condition = None if retriever_params or given_any else registry.condition_for(retriever, dataset, split)
    k = k if k is not None else (condition.k if condition else registry.defaults.k)
    if k <= 0:
        raise HarnessError(f"k must be a positive integer, got {k}")
    if metrics is not None and not list(metrics):
        raise HarnessError("no metrics requested: give --metrics NAME[,NAME…], or leave it out for the defaults")
    if sample_fraction is not None and not 0 < sample_fraction <= 1:
        raise HarnessError(f"--sample must be a fraction in (0, 1], got {sample_fraction}")
    metric_names = list(metrics or registry.defaults.metrics or DEFAULT_METRICS)
    parsed = parse_metrics(metric_names, plugins.components.by_kind.get("metric", {}))  # fail early on typos
    if sample_fraction is None and condition is not None:
        sample_fraction = condition.sample
    if condition is not None and (condition.k, condition.sample) != (k, sample_fraction):
        condition = None  # another depth or sample is not the condition: its scores do not apply
    if condition is not None and condition.expected:
        try:  # a misspelt expected metric would otherwise show as "missing" only after the run
            parse_metrics(list(condition.expected), plugins.components.by_kind.get("metric", {}))
        except HarnessError as exc:
            where = registry.origin("condition", condition.name) or registry.source
            raise HarnessError(f"{where}: condition {condition.name!r}, expected: {exc}") from None
    retrievers = resolve_retrievers(registry, plugins, retriever, retriever_params, given)
    main: Retriever = retrievers[retriever].instance
    depth, why = k, f"k={k}"
    if isinstance(main, Reranker) and not main.fills and main.options.candidates < k:  # type: ignore[attr-defined]
        candidates = main.options.candidates  # type: ignore[attr-defined]
        depth, why = candidates, f"{retriever!r} reranks {candidates} candidates"
    deeper = [m.name for m in parsed if m.k is not None and m.k > depth]
    dropped: list[str] = []
    if deeper and metrics is None:
        # the default set: leave out what a ranking this deep cannot measure, rather than report it
        metric_names, dropped = [m.name for m in parsed if m.name not in deeper], deeper
    elif deeper:
        raise HarnessError(
            f"{', '.join(deeper)}: a cut-off deeper than the ranking ({why}) cannot be measured; "
            + (
                f"run with --k {max(m.k or 0 for m in parsed)} or drop {'it' if len(deeper) == 1 else 'them'}"
                if depth == k
                else f"drop {'it' if len(deeper) == 1 else 'them'} or rerank more candidates"
            )
        )
    if given_dataset is not None and dataset_params:
        raise HarnessError("dataset parameters go to the dataset's constructor when it is given constructed")
    dataset_component = given_dataset or resolve_dataset(registry, plugins, dataset, dataset_params)
    # the split last: the dataset tells its splits from file names (STaRK may probe the hub),
    # never by loading its SKB or queries, so a wrong split costs no work
    try:
        dataset_component.instance.check_split(split)
    except HarnessError as exc:
        plugin_name = f"dataset {dataset_component.info.plugin!r}"
        raise HarnessError(str(exc).replace(plugin_name, f"dataset {dataset!r}", 1)) from None
    known = dataset_component.instance.known_splits()
    for component in retrievers.values():
        if component.instance.regime != "trained":
            continue
        if known is not None and train_split not in known:
            # what the runner would find after loading the SKB
            raise HarnessError(
                f"retriever {component.name!r} trains on split {train_split!r}; {dataset!r} has none "
                f"(has: {', '.join(known) or 'none'})"
            )
        if train_split == split:
            raise HarnessError(
                f"retriever {component.name!r} would train on split {split!r}, the split being evaluated; "
                "evaluate another split or train on another (--train-split)"
            )
    return RunSpec(
        retriever=retriever,
        retrievers=retrievers,
        dataset=dataset,
        dataset_component=dataset_component,
        split=split,
        k=k,
        metrics=metric_names,
        sample=sample_fraction,
        seed=seed,
        condition=condition,
        dropped_metrics=dropped,
    )


def load_dataset(name: str, data_dir: str | None = None, registry_path: str | None = None) -> Dataset:
    """The dataset plugin instance for a registry (or plugin) name, with ``data_dir`` if given:
    what commands use to reach a dataset's SKB and queries outside a run."""

    plugins = get_plugin_manager()
    params = {"data_dir": data_dir} if data_dir else None
    dataset: Dataset = resolve_dataset(load_registry(registry_path, plugins), plugins, name, params).instance
    return dataset


def dataset_from_row(info: ComponentInfo, data_dir: str | None = None) -> Dataset:
    """The dataset a leaderboard row was evaluated on, rebuilt from its plugin and parameters
    (``data_dir`` overrides where the files are)."""

    params = {**info.params, **({"data_dir": data_dir} if data_dir else {})}
    dataset: Dataset = construct(get_plugin_manager(), "dataset", info.name, info.plugin, params).instance
    return dataset
