"""Training the ``qagnn`` retriever (harness-gnn): time to a checkpoint and training throughput,
against the same network's training steps alone.

    python bench/bench_gnn.py [--dataset debian] [--train-split val] [--epochs 5] [--repeat 3]
                              [--threads default,1] [--device cpu]

Every timed run is a fresh process, alternated, once per thread setting (torch's default, and
pinned to 1 thread):

* harness, cold: ``harness train -r qagnn -d DATASET --train-split SPLIT --validation-split none``
  with an empty cache: resolving, the BM25 first stage's index, entity linking, subgraphs, the
  frozen encoder embedding every node the subgraphs reach, the epochs, the checkpoint. Timed end
  to end (time to a checkpoint); its ``qagnn.json`` gives the preparation seconds and the
  training steps' examples per second.
* harness, warm: the same training with another seed on the cache a cold run left (BM25 index
  and node vectors cached): what a second model, or a hyper-parameter sweep, pays.
* torch alone: the same network (same options, same examples, made ready by the retriever
  beforehand from the cache a cold run left and batched once, outside the clock), trained for
  the same epochs with the same optimizer: forward, loss, backward, step. The floor of the training loop; the ratio of
  examples per second says what the harness's batching (vector look-ups, concatenation) costs.

Encoding the nodes dominates a cold run on a CPU (~10,000 Debian nodes, tens of minutes on 2
cores): ``--warm-cache DIR`` (a cache a cold run left, kept with ``--workdir``) skips the cold
runs. The default split is Debian's ``val`` (104 queries: a bench of throughput, so what it
trains on matters little); ``--train-split train`` trains on the 3,130-query train split.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import timing
from timing import Sample


def _registry(path: Path, epochs: int) -> Path:
    """A registry with a ``qagnn-bench`` entry: the ``qagnn`` preset with ``epochs`` and no early stop."""
    path.write_text(
        json.dumps(
            {
                "retrievers": {
                    "qagnn-bench": {
                        "plugin": "qagnn",
                        "params": {"first_stage": "bm25", "candidates": 20, "max_length": 128, "epochs": epochs},
                    }
                }
            }
        )
    )
    return path


def torch_child(dataset: str, split: str, epochs: str, device: str) -> dict[str, Any]:
    """The network's training steps alone, on batches made before the clock starts."""
    clock = timing.Clock()
    timing.pin_torch()
    import torch

    import harness
    from harness_gnn.model import set_loss
    from harness_gnn.retriever import QAGNNRetriever

    clock.lap("import")
    data = harness.load_dataset(dataset)
    skb, queries = data.load_skb(), data.load_queries().split(split)
    retriever = QAGNNRetriever(first_stage="bm25", candidates=20, max_length=128, epochs=int(epochs))
    from harness.plugins import get_plugin_manager
    from harness.run import load_registry, resolve

    plugins = get_plugin_manager()
    first = resolve(load_registry(None, plugins), plugins, "bm25", dataset).main.instance
    context = harness.BuildContext(cache_dir=harness.cache_root(), device=device)  # a cold run's: encoded
    first.build(skb, context)
    retriever._prepare(skb, context)
    retriever.first_stage = first
    usable = [e for e in retriever._examples(queries, None, None, None) if e.reachable]
    size = retriever.options.train_batch_size
    batches = [retriever._batch(usable[i : i + size], device) for i in range(0, len(usable), size)]
    network = retriever._network(skb).to(device)
    optimizer = torch.optim.Adam(network.parameters(), lr=retriever.options.lr)
    clock.lap("prepare")
    network.train()
    for _ in range(int(epochs)):
        for batch in batches:
            optimizer.zero_grad()
            loss = set_loss(network(batch).float(), batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(network.parameters(), 1.0)
            optimizer.step()
    if device == "cuda":
        torch.cuda.synchronize()
    clock.lap("steps")
    examples = len(usable) * int(epochs)
    return {"phases": clock.phases, "examples": examples, "per_second": examples / clock.phases["steps"]}


def _checkpoint_info(cache: Path) -> dict[str, Any]:
    [entry] = [p for p in (cache / "checkpoints").iterdir() if p.is_dir() and not p.name.endswith(".work")]
    trained = json.loads((entry / "qagnn.json").read_text())["trained"]
    fit = json.loads((entry / "training.json").read_text())["seconds"]
    return {**trained, "fit_seconds": fit}


def main() -> None:
    timing.child_main({"torch": torch_child})
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="debian")
    parser.add_argument("--train-split", default="val")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", default="default,1", help="comma-separated: default, or a thread count")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--workdir", type=Path, help="keep caches and runs here (default: a temporary directory)")
    parser.add_argument(
        "--warm-cache",
        type=Path,
        help="a harness cache a cold run left (e.g. under --workdir): no cold runs, the others use it",
    )
    args = parser.parse_args()
    work, cleanup = timing.workdir(args.workdir, "bench-gnn-")
    registry = _registry(work / "registry.json", args.epochs)
    seeds = iter(range(1, 1_000_000))  # every training another seed: never a cached checkpoint
    try:
        for threads in args.threads.split(","):
            print(f"\n== threads: {threads} ({args.dataset}/{args.train_split}, {args.epochs} epochs, {args.device})")

            def train(cache: Path, threads: str = threads) -> Sample:
                env = timing.environment(threads, cache)
                command = ["train", "-r", "qagnn-bench", "-d", args.dataset, "--train-split", args.train_split]
                command += ["--validation-split", "none", "--device", args.device, "--registry", str(registry)]
                sample = timing.harness_cli([*command, "--seed", str(next(seeds))], env)
                info = _checkpoint_info(cache)
                for old in (cache / "checkpoints").iterdir():  # the next warm run finds only its own
                    if old.is_dir():
                        shutil.rmtree(old)
                return Sample(sample.seconds, {}, info)

            runs = timing.ColdWarm(work / f"threads-{threads}", train)

            def alone(threads: str = threads, runs: timing.ColdWarm = runs) -> Sample:
                env = timing.environment(threads, args.warm_cache or runs.cache)  # the nodes encoded already
                argv = [__file__, "--child", "torch", args.dataset, args.train_split, str(args.epochs), args.device]
                return timing.run_child(argv, env)

            sides = {"harness train, cold": runs.cold, "harness train, warm": runs.warm, "torch steps alone": alone}
            if args.warm_cache:
                del sides["harness train, cold"]
                runs.cache = args.warm_cache
            series = timing.alternate(sides, args.repeat)
            if not args.warm_cache:
                runs.close()
            timing.table(series.values())
            warm, floor = series["harness train, warm"], series["torch steps alone"]
            if "harness train, cold" in series:
                cold = series["harness train, cold"]
                print(
                    f"time to a checkpoint, cold: {cold.median:.1f} s (fit {cold.info('fit_seconds'):.1f} s, of "
                    f"which preparing {cold.info('prepare_seconds'):.1f} s)"
                )
            print(
                f"time to a checkpoint, warm: {warm.median:.1f} s (fit {warm.info('fit_seconds'):.1f} s, of which "
                f"preparing {warm.info('prepare_seconds'):.1f} s)"
            )
            harness_rate = warm.info("examples_per_second")
            print(
                f"training steps: harness {harness_rate:.1f} examples/s, torch alone "
                f"{floor.info('per_second'):.1f} examples/s: "
                f"{floor.info('per_second') / harness_rate:.2f}x; "
                f"{int(warm.info('queries'))} queries used, {int(warm.info('unreachable'))} unreachable"
            )
    finally:
        cleanup()
    sys.exit(0)


if __name__ == "__main__":
    main()
