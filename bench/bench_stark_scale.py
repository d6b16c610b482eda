"""Loading an SKB of STaRK-Amazon's size in the official processed format: time and peak memory.

    python bench/bench_stark_scale.py [--root DIR] [--products 957192] [--meta 78350] [--edges 9443802]
                                      [--words-per-node 600] [--repeat 3] [--no-official]

STaRK-Amazon has 1,035,542 nodes (957,192 products; brands, categories and colours), 9.4M edge
entries and about 592M tokens of text. ``--root`` holds such a release (``stark_synthetic``
writes a synthetic one there when it holds none; at full size that is about 4 GiB of
``node_info.pkl`` and a few minutes). Every timed load is a fresh process, alternated:

* harness, cold: ``StarkAmazon(data_dir=root).load_skb()`` with an empty ``HARNESS_CACHE`` (the
  first load converts the release), then documents with relations for 20,000 products;
* harness, warm: the same with the cache a cold load left;
* ``pickle.load`` of ``node_info.pkl`` alone: the floor any reader of the official format pays;
* the official loader: ``stark_qa.skb.AmazonSKB(root, download_processed=False)`` (its peak is
  several times the pickle's; ``--no-official`` leaves it out).

Goal: the harness's peak memory below 2 GiB, cold and warm.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import timing
from timing import Goals, Sample

GOAL_MIB = 2048
DOCUMENTS = 20_000


def harness_child(root: str) -> dict[str, Any]:
    clock = timing.Clock()
    from harness_stark.datasets import StarkAmazon

    clock.lap("import")
    skb = StarkAmazon(data_dir=root).load_skb()
    clock.lap("load")
    for _ in skb.documents(skb.candidate_ids[:DOCUMENTS], with_relations=True):
        pass
    clock.lap("documents")
    return {"phases": clock.phases, "nodes": skb.num_nodes, "edges": skb.num_edges}


def pickle_child(path: str) -> dict[str, Any]:
    import pickle

    clock = timing.Clock()
    with open(path, "rb") as handle:
        pickle.load(handle)
    clock.lap("load")
    return {"phases": clock.phases}


def official_child(root: str) -> dict[str, Any]:
    clock = timing.Clock()
    from references import stark_qa

    stark_qa()
    from stark_qa.skb import AmazonSKB

    clock.lap("import")
    AmazonSKB(str(Path(root) / "skb" / "amazon"), download_processed=False)
    clock.lap("load")
    return {"phases": clock.phases}


def load(script: str, name: str, arg: str, cache: Path | None = None) -> Sample:
    """A load in a child process, compared by its load phase."""
    sample = timing.run_child([script, "--child", name, arg], timing.environment(cache=cache))
    return timing.of_phases(sample, ("load",))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=None, help="the release (written when missing; default: temp)")
    parser.add_argument("--products", type=int, default=957_192)
    parser.add_argument("--meta", type=int, default=78_350)
    parser.add_argument("--edges", type=int, default=9_443_802)
    parser.add_argument("--words-per-node", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=3, help="timed loads of each kind, alternated")
    parser.add_argument("--no-official", action="store_true", help="leave the official loader out")
    args = parser.parse_args()
    from stark_synthetic import AMAZON_VARIANT

    root, cleanup = timing.workdir(args.root, "bench-stark-scale-")
    work, cleanup_work = timing.workdir(None, "bench-stark-scale-caches-")
    try:
        directory = root / "skb" / "amazon" / "processed" / "cache" / AMAZON_VARIANT
        started = time.perf_counter()
        if not (directory / "node_types.pt").exists():  # written by a child: this process stays small
            writer = [str(Path(__file__).with_name("stark_synthetic.py")), "amazon", str(root)]
            writer += ["--nodes", str(args.products), "--meta", str(args.meta), "--edges", str(args.edges)]
            timing.run_child([*writer, "--words-per-node", str(args.words_per_node)], timing.environment())
        size = sum(f.stat().st_size for f in directory.iterdir()) / 2**30
        print(f"release {directory} ({size:.1f} GiB), ready in {time.perf_counter() - started:.0f} s")
        script = str(Path(__file__).resolve())
        harness = timing.ColdWarm(work, lambda cache: load(script, "harness", str(root), cache))
        runs: dict[str, Any] = {
            "harness cold": harness.cold,
            "pickle.load(node_info.pkl)": lambda: load(script, "pickle", str(directory / "node_info.pkl")),
            "harness warm": harness.warm,
        }
        if not args.no_official:
            runs["official AmazonSKB"] = lambda: load(script, "official", str(root))
        series = timing.alternate(runs, args.repeat)
    finally:
        cleanup_work()
        cleanup()
    cold, warm = series["harness cold"], series["harness warm"]
    info = cold.samples[0].info
    print(f"\n{info['nodes']:,} nodes, {info['edges']:,} edges; compared: the load phase (peak: the process's)")
    timing.table(series.values(), ("import", "load", "documents"))
    for s in series.values():
        print(f"  {s.label}: peak {max(x.info['peak_mib'] for x in s.samples) / 1024:.2f} GiB")
    for s in (cold, warm):
        print(f"  {s.label}: documents with relations {1e3 * s.phase('documents') / DOCUMENTS:.3f} ms/document")
    for s in series.values():
        if s is not cold:
            print(timing.ratio_line(cold, s))
    print()
    goals = Goals()
    for s, what in ((cold, "first load, converting the release"), (warm, "later loads, from the cache")):
        peak = max(x.info["peak_mib"] for x in s.samples)
        goals.check(f"{s.label} peak memory ({what})", f"{peak / 1024:.2f} GiB", "< 2 GiB", peak < GOAL_MIB)
    goals.summary()


if __name__ == "__main__":
    timing.child_main({"harness": harness_child, "pickle": pickle_child, "official": official_child})
    main()
