"""`harness import tables` at scale: 1M nodes and 5M edges of CSV into an SKB, against pyarrow
and pandas reading the same files.

    python bench/bench_import_tables.py [--nodes 1000000] [--edges 5000000] [--repeat 3] [--dir DIR]

The tables are synthetic and written once (``--dir`` keeps them for another invocation): nodes
``id,type,name,abstract`` (four types, a quoted name holding a comma, an abstract of 8-15 words
from a 5,000-word vocabulary, so that compression meets text, not a repeated pattern), edges
``src,dst,type`` (four relations, uniform random ends) and 1,000 queries. Each timed run is a
fresh process, alternated with the references:

* the harness: ``harness import tables --nodes --edges --queries --out NEW`` end to end
  (interpreter start, reading, checking every row, the SKB, its fingerprint, the files);
* pyarrow: ``pyarrow.csv.read_csv`` of both tables, every column as text (what the importer
  parses with, without the checks, the graph or the writing): the floor of reading;
* pandas: ``read_csv(engine="pyarrow", dtype=str)`` of both tables.

Printed: seconds (wall) and CPU seconds of each process, its peak resident memory (VmHWM), the
ratios; goals: the import in <= 180 s and <= 2 GiB.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import timing

GOAL_SECONDS = 180.0
GOAL_MIB = 2048.0


def generate(folder: Path, nodes: int, edges: int, seed: int = 0) -> None:
    """The three tables, written in blocks (numpy picks, Python formats)."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = ["".join(rng.choice(letters, rng.integers(3, 10))) for _ in range(5000)]
    types = np.array(["paper", "author", "venue", "topic"])
    block = 100_000
    with (folder / "nodes.csv").open("w", encoding="utf-8", newline="") as out:
        out.write("id,type,name,abstract\n")
        for start in range(0, nodes, block):
            ids = range(start, min(nodes, start + block))
            kinds = types[rng.choice(4, len(ids), p=[0.7, 0.2, 0.05, 0.05])]
            words = rng.integers(0, len(vocabulary), (len(ids), 17)).tolist()
            lengths = rng.integers(8, 16, len(ids)).tolist()
            out.writelines(
                f'n{i},{kind},"{vocabulary[w[0]].title()}, {vocabulary[w[1]]}",'
                f"{' '.join(vocabulary[x] for x in w[2 : 2 + length])}\n"
                for i, kind, w, length in zip(ids, kinds.tolist(), words, lengths, strict=True)
            )
    relations = np.array(["cites", "written_by", "published_in", "about"])
    with (folder / "edges.csv").open("w", encoding="utf-8", newline="") as out:
        out.write("src,dst,type\n")
        for start in range(0, edges, 5 * block):
            count = min(edges, start + 5 * block) - start
            src, dst = rng.integers(0, nodes, count).tolist(), rng.integers(0, nodes, count).tolist()
            kinds = relations[rng.integers(0, 4, count)].tolist()
            out.writelines(f"n{a},n{b},{kind}\n" for a, b, kind in zip(src, dst, kinds, strict=True))
    with (folder / "queries.csv").open("w", encoding="utf-8", newline="") as out:
        out.write("id,query,answer_ids,split\n")
        answers = rng.integers(0, nodes, (1000, 2)).tolist()
        out.writelines(f"{q},query {q},n{a};n{b},{'test' if q % 2 else 'val'}\n" for q, (a, b) in enumerate(answers))


# -- what the child processes run ----------------------------------------------------------------


def child_import(folder: str, out: str) -> dict[str, Any]:
    from harness.cli import main

    tables = Path(folder)
    argv = ["import", "tables", "--nodes", str(tables / "nodes.csv"), "--edges", str(tables / "edges.csv")]
    argv += ["--queries", str(tables / "queries.csv"), "--out", out, "--format", "json"]
    try:
        main(argv)
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    return {}


def child_pyarrow(folder: str) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rows = 0
    for name, columns in (("nodes.csv", ["id", "type", "name", "abstract"]), ("edges.csv", ["src", "dst", "type"])):
        convert = pacsv.ConvertOptions(column_types=dict.fromkeys(columns, pa.string()), strings_can_be_null=False)
        parse = pacsv.ParseOptions(newlines_in_values=True)
        rows += pacsv.read_csv(Path(folder) / name, parse_options=parse, convert_options=convert).num_rows
    return {"rows": rows}


def child_pandas(folder: str) -> dict[str, Any]:
    import pandas as pd

    frames = [pd.read_csv(Path(folder) / name, engine="pyarrow", dtype=str) for name in ("nodes.csv", "edges.csv")]
    return {"rows": sum(len(frame) for frame in frames)}


timing.child_main({"import": child_import, "pyarrow": child_pyarrow, "pandas": child_pandas})


def timed(argv: list[str]) -> timing.Sample:
    """A child process: wall seconds (the sample), its CPU seconds and peak memory (info)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sample = timing.run_child(argv, timing.environment())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    sample.info["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--edges", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each, alternated")
    parser.add_argument("--dir", type=Path, help="keep the generated tables here (reused when present)")
    args = parser.parse_args()
    work, cleanup = timing.workdir(None, "bench-import-")
    tables = args.dir or work / "tables"
    marker = tables / f".generated-{args.nodes}-{args.edges}"
    try:
        if not marker.exists():
            print(f"writing {args.nodes:,} nodes and {args.edges:,} edges to {tables}", file=sys.stderr)
            generate(tables, args.nodes, args.edges)
            marker.touch()
        size = sum((tables / n).stat().st_size for n in ("nodes.csv", "edges.csv")) / 1e6
        script = str(Path(__file__).resolve())

        def harness_import() -> timing.Sample:
            out = timing.fresh_dir(work, "out") / "imported"  # a new --out every run
            try:
                return timed([script, "--child", "import", str(tables), str(out)])
            finally:
                shutil.rmtree(out.parent, ignore_errors=True)

        series = timing.alternate(
            {
                "harness import tables": harness_import,
                "pyarrow read_csv": lambda: timed([script, "--child", "pyarrow", str(tables)]),
                "pandas read_csv (pyarrow)": lambda: timed([script, "--child", "pandas", str(tables)]),
            },
            args.repeat,
        )
    finally:
        cleanup()
    print(f"\n{args.nodes:,} nodes + {args.edges:,} edges, {size:,.0f} MB of CSV")
    print(f"{'':28} {'runs':>4} {'min s':>8} {'median s':>9} {'CPU s':>8} {'peak MiB':>9}")
    for s in series.values():
        print(
            f"{s.label:28} {len(s.samples):>4} {s.min:8.2f} {s.median:9.2f} {s.info('cpu'):8.2f} "
            f"{max(x.info['peak_mib'] for x in s.samples):9,.0f}"
        )
    ours, arrow, pandas = series.values()
    print(timing.ratio_line(ours, arrow))
    print(timing.ratio_line(ours, pandas))
    goals = timing.Goals()
    met = ours.median <= GOAL_SECONDS
    goals.check("import wall time (median)", f"{ours.median:.1f} s", f"<= {GOAL_SECONDS:g} s", met)
    peak = max(x.info["peak_mib"] for x in ours.samples)
    goals.check("import peak memory (max)", f"{peak:,.0f} MiB", f"<= {GOAL_MIB:g} MiB", peak <= GOAL_MIB)
    goals.summary()


if __name__ == "__main__":
    main()
