"""Training a trained retriever: throughput and time to a checkpoint, against a raw
sentence-transformers fit of the same examples.

    python bench/bench_training.py [--retriever dense-ft] [--params '{"epochs": 1}'] [--data tiny,debian]
                                   [--queries 2000] [--repeat 1] [--threads default] [--device cpu]

Two data sets: ``tiny-train`` (the testing kit's 8 training queries on 7 nodes) and
``debian-synthetic``: the Debian SKB with ``--queries`` training queries made without an LLM,
each the first sentence of a sampled package's description (its answers: every package whose
description starts with that sentence), plus 100 validation and 100 test queries.

Every timed run is a fresh process with an empty cache, alternated:

* harness: ``harness train -r RETRIEVER -d DATA --validation-split none`` end to end (start,
  imports, SKB, the first stage's index and mining, training, the epoch checkpoints, the final
  model): the time to a checkpoint. Training throughput = examples x epochs / the seconds the
  trainer ran (``fit.json``; for a retriever that does not write one, the training queries and
  the whole of ``fit``).
* sentence-transformers alone (``dense-ft`` only): the same examples (mined beforehand by the
  harness's own code, with the same first stage and seed), ``SentenceTransformerTrainer`` with
  ``MultipleNegativesRankingLoss``, the same model, epochs, batch size, learning rate, warm-up
  and sequence length, its default batch sampler, no checkpoints, then ``model.save``.

``--retriever`` takes a registry entry or a plugin name; ``--params`` (JSON) overrides its
parameters (the default shortens ``dense-ft``'s to one epoch and 64 tokens).
"""

from __future__ import annotations

import argparse
import json
import pickle
import shutil
from pathlib import Path
from typing import Any

import timing
from timing import Sample, Series

ENTRY = "bench-train"
DATASETS = {"tiny": "tiny-train", "debian": "debian-synthetic"}
DENSE_FT = {"epochs": 1, "max_length": 64, "batch_size": 32}
PLUGIN = '''
"""The data sets bench_training.py trains on."""
import json
from pathlib import Path

import harness
from harness.testing import TinyTrainDataset

QUERIES = Path({queries!r})


class DebianSynthetic(harness.Dataset):
    name = "debian-synthetic"

    def load_skb(self):
        from harness_debian.dataset import DebianDataset

        return DebianDataset().load_skb()

    def load_queries(self):
        splits = json.loads(QUERIES.read_text())
        query = lambda q: harness.Query(q["id"], q["text"], tuple(q["answers"]))  # noqa: E731
        return harness.QuerySet(self.name, {{s: [query(q) for q in rows] for s, rows in splits.items()}})


@harness.hookimpl
def register_datasets(register):
    register(TinyTrainDataset)
    register(DebianSynthetic)
'''


def queries_child(count: str, out: str, seed: str) -> dict[str, Any]:
    """Debian queries from package descriptions: train (``count``), val and test (100 each)."""
    import numpy as np

    from harness_debian.dataset import DebianDataset

    skb = DebianDataset().load_skb()
    first: dict[int, str] = {}
    for node in skb.candidate_ids.tolist():
        description = str(skb.fields[node].get("description") or "").split("\n")[0]
        sentence = description.split(". ")[0].strip().rstrip(".")
        if 4 <= len(sentence.split()) <= 40:
            first[node] = sentence
    by_text: dict[str, list[int]] = {}
    for node, sentence in first.items():
        by_text.setdefault(sentence.lower(), []).append(node)
    texts = sorted(by_text)
    order = np.random.default_rng(int(seed)).permutation(len(texts))[: int(count) + 200]
    rows = [{"id": i, "text": first[by_text[texts[j]][0]], "answers": by_text[texts[j]]} for i, j in enumerate(order)]
    splits = {"train": rows[: int(count)], "val": rows[int(count) : int(count) + 100], "test": rows[int(count) + 100 :]}
    Path(out).write_text(json.dumps(splits))
    return {"queries": {s: len(q) for s, q in splits.items()}, "candidates": len(skb.candidate_ids)}


def plan_child(retriever: str, params: str, registry: str) -> dict[str, Any]:
    """The registry entry the runs train: ``retriever``'s plugin and parameters, ``params`` on top."""
    from harness.plugins import get_plugin_manager
    from harness.run import load_registry

    registry_ = load_registry(None, get_plugin_manager())
    entry = registry_.retrievers.get(retriever)
    plugin, base = (entry.plugin, dict(entry.params)) if entry else (retriever, {})
    overrides = json.loads(params) if params else (DENSE_FT if plugin == "dense-ft" else {})
    merged = {**base, **overrides}
    Path(registry).write_text(json.dumps({"retrievers": {ENTRY: {"plugin": plugin, "params": merged}}}))
    return {"plugin": plugin, "params": merged}


def examples_child(registry: str, dataset: str, out: str, device: str) -> dict[str, Any]:
    """``dense-ft``'s training examples for ``dataset``, mined as ``harness train`` mines them
    (same first stage, same seed), and the settings the reference trains with."""
    import tempfile

    from harness import BuildContext, TrainContext
    from harness.plugins import get_plugin_manager
    from harness.run import load_registry
    from harness.run.resolve import resolve_dataset, resolve_retrievers
    from harness.training import seed_everything
    from harness_dense.embeddings import resolve_model_path
    from harness_dense.finetune_data import Examples

    plugins = get_plugin_manager()
    registry_ = load_registry(registry, plugins)
    components = resolve_retrievers(registry_, plugins, ENTRY)
    retriever = components[ENTRY].instance
    data = resolve_dataset(registry_, plugins, dataset).instance
    skb, train = data.load_skb(), data.load_queries().split("train")
    cache = Path(tempfile.mkdtemp(prefix="bench-examples-"))
    try:
        built: dict[str, Any] = {}

        def build(name: str) -> Any:
            if name not in built:
                built[name] = components[name].instance
                built[name].build(skb, BuildContext(cache_dir=cache))
            return built[name]

        seed_everything(0)
        examples = Examples.mine(retriever, skb, train, TrainContext(cache_dir=cache, build_retriever=build))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    columns = {"anchor": examples.anchors, "positive": examples.positives}
    columns.update({f"negative_{j + 1}": column for j, column in enumerate(examples.negatives)})
    o = retriever.options
    settings = {
        "model": str(resolve_model_path(o.model)),
        "max_length": o.max_length,
        "epochs": o.epochs,
        "batch_size": o.batch_size,
        "learning_rate": o.learning_rate,
        "warmup": o.warmup,
        "device": device,
    }
    with open(out, "wb") as handle:
        pickle.dump({"columns": columns, "settings": settings}, handle)
    return {"examples": len(examples.anchors), "queries": examples.queries}


def sentence_transformers_child(inputs: str, out: str) -> dict[str, Any]:
    """A raw fit: sentence-transformers' trainer and loss on the examples, then save."""
    clock = timing.Clock()
    timing.pin_torch()
    import torch
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers import SentenceTransformerTrainingArguments as Arguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    clock.lap("import")
    with open(inputs, "rb") as handle:
        data = pickle.load(handle)
    settings = data["settings"]
    dataset = Dataset.from_dict(data["columns"])
    clock.lap("read")
    model = SentenceTransformer(settings["model"], device=settings["device"], local_files_only=True)
    if settings["max_length"]:
        model.max_seq_length = settings["max_length"]
    clock.lap("load")
    arguments = Arguments(
        output_dir=out,
        num_train_epochs=settings["epochs"],
        per_device_train_batch_size=settings["batch_size"],
        learning_rate=settings["learning_rate"],
        warmup_ratio=settings["warmup"],
        seed=0,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=settings["device"] != "cuda",
    )
    loss = MultipleNegativesRankingLoss(model)
    SentenceTransformerTrainer(model=model, args=arguments, train_dataset=dataset, loss=loss).train()
    clock.lap("train")
    model.save(str(Path(out) / "model"))
    clock.lap("save")
    epochs, examples = settings["epochs"], len(dataset)
    return {"phases": clock.phases, "examples": examples * epochs, "threads": torch.get_num_threads()}


class Bench:
    def __init__(self, work: Path, args: argparse.Namespace) -> None:
        self.work, self.args = work, args
        self.script = str(Path(__file__).resolve())
        self.plugins = work / "plugins"
        self.registry = work / "registry.json"

    def harness(self, dataset: str, threads: str) -> Sample:
        """``harness train`` in a fresh process with an empty cache: the time to a checkpoint."""
        cache = timing.fresh_dir(self.work / "caches", "cache")
        args = ["--plugins-dir", str(self.plugins), "train", "-r", ENTRY, "-d", dataset, "--validation-split", "none"]
        args += ["--device", self.args.device, "--registry", str(self.registry)]
        try:
            sample = timing.harness_cli(args, timing.environment(threads, cache=cache))
            [checkpoint] = [p for p in (cache / "checkpoints").glob(f"{ENTRY}-*") if not p.name.endswith(".work")]
            training = json.loads((checkpoint / "training.json").read_text())
            fit_path = checkpoint / "fit.json"
            fit = json.loads(fit_path.read_text()) if fit_path.exists() else {}
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        epochs = fit.get("epochs", 1)
        trained = fit.get("seconds", {}).get("train", training["seconds"])
        examples = fit.get("examples", training["queries"]) * epochs
        phases = {"fit": training["seconds"], "train": trained, "other": sample.seconds - training["seconds"]}
        if "prepare" in fit.get("seconds", {}):  # mining the hard negatives, pooling validation candidates
            phases["prepare"] = fit["seconds"]["prepare"]
        return Sample(sample.seconds, phases, {"examples": examples})

    def reference(self, inputs: Path, threads: str) -> Sample:
        out = timing.fresh_dir(self.work / "reference", "out")
        try:
            argv = [self.script, "--child", "st", str(inputs), str(out)]
            return timing.run_child(argv, timing.environment(threads))
        finally:
            shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--retriever", default="dense-ft", help="registry entry or plugin name of a trained retriever")
    parser.add_argument(
        "--params",
        default="",
        help=f"JSON parameters over the retriever's (default for dense-ft: {json.dumps(DENSE_FT)})",
    )
    parser.add_argument("--data", default="tiny,debian", help="tiny and/or debian")
    parser.add_argument("--queries", type=int, default=2000, help="training queries of debian-synthetic")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs of each kind, alternated")
    parser.add_argument(
        "--threads", default="default", help="thread settings (default, or a number), each run separately"
    )
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()

    work, cleanup = timing.workdir(args.workdir, "bench-training-")
    bench = Bench(work, args)
    try:
        bench.plugins.mkdir(exist_ok=True)
        queries = work / "debian-synthetic.json"
        (bench.plugins / "bench_datasets.py").write_text(PLUGIN.format(queries=str(queries)))
        env = timing.environment(HARNESS_PLUGINS_DIR=str(bench.plugins))
        plan = timing.run_child(
            [bench.script, "--child", "plan", args.retriever, args.params, str(bench.registry)], env
        )
        print(f"{args.retriever}: plugin {plan.info['plugin']}, params {json.dumps(plan.info['params'])}")
        print(f"device {args.device}; {args.repeat} run(s) of each kind, alternated, each a fresh process")
        for key in args.data.split(","):
            dataset = DATASETS[key]
            if key == "debian":
                made = timing.run_child([bench.script, "--child", "queries", str(args.queries), str(queries), "0"], env)
                print(f"\ndebian-synthetic: {made.info['queries']} queries over {made.info['candidates']:,} candidates")
            reference_inputs = None
            if plan.info["plugin"] == "dense-ft":
                reference_inputs = work / f"examples-{key}.pkl"
                argv = [bench.script, "--child", "examples", str(bench.registry), dataset, str(reference_inputs)]
                mined = timing.run_child([*argv, args.device], env)
                print(f"\n{dataset}: {mined.info['examples']:,} examples from {mined.info['queries']:,} queries")
            for threads in args.threads.split(","):
                runs = {f"harness train, threads={threads}": lambda d=dataset, t=threads: bench.harness(d, t)}
                if reference_inputs is not None:
                    label = f"sentence-transformers alone, threads={threads}"
                    runs[label] = lambda i=reference_inputs, t=threads: bench.reference(i, t)
                report(dataset, list(timing.alternate(runs, args.repeat).values()))
    finally:
        cleanup()


def report(dataset: str, series: list[Series]) -> None:
    print(f"\n{dataset}: seconds to a checkpoint (the whole process); fit: the harness's, imports included;")
    print("prepare: mining and pooling; train: the trainer alone, epoch checkpoints included")
    timing.table(series, ("import", "load", "fit", "prepare", "train", "save", "other"))
    for s in series:
        print(f"  {s.label}: {s.info('examples') / s.phase('train'):.1f} examples/s training")
    if len(series) == 2:
        harness, reference = series
        print(timing.ratio_line(harness, reference, " (time to a checkpoint)"))
        train = [Series(s.label, [Sample(x.phases["train"]) for x in s.samples]) for s in series]
        print(timing.ratio_line(train[0], train[1], " (training alone)"))


if __name__ == "__main__":
    timing.child_main(
        {
            "queries": queries_child,
            "plan": plan_child,
            "examples": examples_child,
            "st": sentence_transformers_child,
        }
    )
    main()
