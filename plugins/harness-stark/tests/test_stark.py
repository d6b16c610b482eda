"""The STaRK dataset plugin: official-format SKBs, documents equal to the official loader's,
query sets in the official layout, local copies, downloads from a hub, and clear errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import harness_stark
from harness import HarnessError
from harness.testing import hub_server, invoke, plugin_manager
from harness_stark.datasets import StarkAmazon, StarkMag, StarkPrime
from harness_stark.testing import random_prime, stark_data_dir, write_all, write_files

REPO = Path(__file__).resolve().parents[3]
#: skip unless $STARK_DATA_DIR holds the real STaRK query sets
needs_stark_data = pytest.mark.skipif(stark_data_dir() is None, reason="set STARK_DATA_DIR to the STaRK files")

#: the official query files of each dataset, a slice of each (tests/test_queries.py reads them too)
SLICE_ROOT = REPO / "tests" / "data" / "stark"
HUMAN_SPLIT = "human-generated"


@pytest.fixture(scope="module")
def official_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_all(tmp_path_factory.mktemp("stark"))


def test_names_and_counts(official_files: Path) -> None:
    prime = StarkPrime(data_dir=str(official_files)).load_skb()
    assert prime.names[2] == "Lepirudin" and prime.node_type(2) == "drug"
    counts = StarkAmazon(data_dir=str(official_files)).load_skb().counts()
    assert counts["nodes_by_type"] == {"product": 3, "brand": 2, "category": 3, "color": 2}
    assert counts["candidates"] == 3


def test_node_type_ids_missing_from_the_dictionary_are_refused(tmp_path: Path) -> None:
    files = random_prime(7, num_nodes=40)
    files.node_types[5] = 12  # PrimeKG's dictionary names 0..9
    write_files(tmp_path, "prime", files)
    with pytest.raises(HarnessError, match=r"node 5 .*type id\(s\) \[12\] that node_type_dict"):
        StarkPrime(data_dir=str(tmp_path)).load_skb()


@pytest.mark.parametrize("zipped", [False, True])
def test_copies_with_equal_file_sizes_and_times_do_not_share_a_cache(
    tmp_path: Path, zipped: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two copies of an SKB that differ only in content (same sizes, same modification times)
    each load as themselves: neither the unpacked archive nor the node store is shared."""
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    roots = []
    for name in ("first", "other"):
        files = random_prime(8, num_nodes=40)
        files.node_info[0]["name"] = name
        write_files(tmp_path / name, "prime", files, zipped=zipped)
        roots.append(tmp_path / name)
    paths = [sorted(p for p in (root / "skb").rglob("*") if p.is_file()) for root in roots]
    assert [p.stat().st_size for p in paths[0]] == [p.stat().st_size for p in paths[1]]
    for path in paths[0] + paths[1]:
        os.utime(path, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    for root in roots:
        assert StarkPrime(data_dir=str(root)).load_skb().document(0).startswith(f"- name: {root.name}\n")


def test_query_slice_in_official_layout() -> None:
    queries = StarkPrime(data_dir=str(SLICE_ROOT)).load_queries()
    assert set(queries.split_names) == {"train", "val", "test", HUMAN_SPLIT}
    assert queries.counts()[HUMAN_SPLIT] == 10


def _harness(*args: str) -> Any:
    """``harness ARGS --format json`` in this process; its JSON output."""
    result = invoke(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _row(*args: str) -> dict[str, Any]:
    """The row of one ``harness run ARGS`` on the CPU."""
    (outcome,) = _harness("run", *args, "--device", "cpu")
    return outcome["row"]


@needs_stark_data
def test_describe_reports_queries_and_missing_skb_files() -> None:
    info = _harness("describe", "stark-prime", "--data-dir", str(stark_data_dir()))
    assert info["queries"] == {"test": 2801, "train": 6162, "val": 2241, HUMAN_SPLIT: 109}
    assert info["skb_missing"][0] == "skb/prime/processed.zip"
    assert "skb/prime/processed/node_info.pkl" in info["skb_missing"]
    amazon = _harness("describe", "stark-amazon", "--data-dir", str(stark_data_dir()))
    assert "skb/amazon/processed/cache/brand-category-color/node_info.pkl" in amazon["skb_missing"]


def test_parameters_are_declared_once_and_shared(official_files: Path) -> None:
    """The three datasets take the same location parameters; Amazon adds its document cap,
    which changes the documents and therefore the fingerprint."""
    for dataset in (StarkMag, StarkPrime):
        assert dataset().params == {"data_dir": None, "revision": None}
    assert StarkAmazon().params == {"data_dir": None, "revision": None, "max_entries": 25}
    with pytest.raises(HarnessError, match="max_entries: not a parameter"):
        StarkPrime(max_entries=3)
    with pytest.raises(HarnessError, match="max_entries: Input should be greater than or equal to 0"):
        StarkAmazon(max_entries=-1)
    default = StarkAmazon(data_dir=str(official_files)).load_skb()
    capped = StarkAmazon(data_dir=str(official_files), max_entries=0).load_skb()
    assert capped.max_entries == 0 and default.max_entries == 25
    assert capped.fingerprint != default.fingerprint
    assert StarkAmazon(data_dir=str(official_files), max_entries=25).load_skb().fingerprint == default.fingerprint


def test_presets_name_the_three_datasets() -> None:
    manager = plugin_manager(harness_stark)
    (registry,) = [fragment for _, fragment in manager.presets()]
    assert not manager.failures
    assert {name: entry.plugin for name, entry in registry.datasets.items()} == {
        "stark-amazon": "stark-amazon",
        "stark-mag": "stark-mag",
        "stark-prime": "stark-prime",
    }
    assert all(entry.description and entry.splits == ["test", HUMAN_SPLIT] for entry in registry.datasets.values())
    assert not registry.defaults.model_fields_set  # the default dataset is Debian's to name


def test_local_copy_without_skb_names_the_files() -> None:
    dataset = StarkMag(data_dir=str(SLICE_ROOT))
    with pytest.raises(HarnessError, match=r"need skb/mag/processed\.zip"):
        dataset.load_skb()
    with pytest.raises(HarnessError, match="does not exist"):
        StarkMag(data_dir="/nonexistent/stark").load_queries()


def test_bm25_runs_on_a_stark_skb(official_files: Path) -> None:
    qa = official_files / "qa" / "prime"
    (qa / "stark_qa").mkdir(parents=True, exist_ok=True)
    (qa / "split").mkdir(exist_ok=True)
    (qa / "stark_qa" / "stark_qa.csv").write_text(
        'id,query,answer_ids\n0,"Which drug is a direct thrombin inhibitor?",[2]\n'
        '1,"genes with an ankyrin repeat","[1, 1]"\n2,"What pathway involves PHYHIP?",[4]\n'
    )
    (qa / "split" / "test.index").write_text("0\n1\n2")
    row = _row("--retriever", "bm25", "--dataset", "stark-prime", "--split", "test", "--data-dir", str(official_files))
    assert row["num_queries"] == 3 and row["metrics"]["hit@1"] >= 2 / 3


# -- downloads ------------------------------------------------------------------------------


@pytest.fixture
def fake_hub(official_files: Path, tmp_path: Path) -> Iterator[str]:
    repo = tmp_path / "repo"
    shutil.copytree(SLICE_ROOT / "qa", repo / "qa")
    (repo / "skb" / "prime").mkdir(parents=True)
    with zipfile.ZipFile(repo / "skb" / "prime" / "processed.zip", "w") as bundle:
        for file in (official_files / "skb" / "prime" / "processed").iterdir():
            bundle.write(file, f"processed/{file.name}")
    commit = "0123456789abcdef0123456789abcdef01234567"
    with hub_server({"dataset:snap-stanford/stark": {"main": (commit, repo), commit: (commit, repo)}}) as (url, _):
        yield url


def _python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env}, timeout=300
    )


LOAD = (
    "import json\nfrom harness_stark.datasets import StarkPrime\nd = StarkPrime()\n"
    "print(json.dumps({'queries': d.load_queries().counts(), 'doc': d.load_skb().document(2, True)}))"
)


def test_download_from_a_hub_then_offline_from_its_cache(fake_hub: str, official_files: Path, tmp_path: Path) -> None:
    env = {
        "HF_ENDPOINT": fake_hub,
        "HF_HOME": str(tmp_path / "hf"),
        "HARNESS_CACHE": str(tmp_path / "cache"),
        "STARK_DATA_DIR": "",
        "HF_HUB_DISABLE_XET": "1",
    }
    first = _python(LOAD, env)
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout.splitlines()[-1])
    expected = StarkPrime(data_dir=str(official_files)).load_skb().document(2, True)  # test_stark_official checks it
    assert data["queries"]["test"] == 21 and data["doc"] == expected
    assert list((tmp_path / "hf").rglob("processed.zip"))
    again = _python(LOAD, {**env, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.splitlines()[-1]) == data
    # no network and nobody said so: the probe finds the hub out of reach, the cache serves
    started = time.perf_counter()
    unsaid = _python(LOAD, {**env, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": ""})
    assert unsaid.returncode == 0, unsaid.stderr
    assert json.loads(unsaid.stdout.splitlines()[-1]) == data
    assert time.perf_counter() - started < 15 and "Retrying" not in unsaid.stderr


def test_offline_without_a_local_copy_is_one_clear_error(tmp_path: Path) -> None:
    env = {
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "HARNESS_CACHE": str(tmp_path / "cache"),
        "STARK_DATA_DIR": "",
    }
    result = subprocess.run(
        [str(Path(sys.executable).with_name("harness")), "describe", "stark-mag"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: cannot get qa/mag/stark_qa/stark_qa.csv from the Hugging Face hub")
    assert "--data-dir" in result.stderr and "STARK_DATA_DIR" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").rglob("*"))


def test_corrupt_archive_is_refused_and_nothing_half_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))  # other tests unpack archives too
    (tmp_path / "skb" / "prime").mkdir(parents=True)
    (tmp_path / "skb" / "prime" / "processed.zip").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(HarnessError, match=r"cannot unpack .*processed\.zip"):
        StarkPrime(data_dir=str(tmp_path)).load_skb()
    assert not list((Path(os.environ["HARNESS_CACHE"]) / "stark").glob("prime-*"))


def test_answers_outside_the_candidates_are_kept_and_dropped_by_the_metrics(official_files: Path) -> None:
    """MAG's human-generated set lists a few answers that are not papers: they stay in the
    queries (counts match the release), the metrics drop them, and the row counts queries
    left with no candidate answer."""
    qa = official_files / "qa" / "mag" / "stark_qa"
    qa.mkdir(parents=True, exist_ok=True)
    (qa / "stark_qa.csv").write_text("id,query,answer_ids\n")
    (qa / "stark_qa_human_generated_eval.csv").write_text(
        "id,query,answer_ids,answer_ids_source\n"
        '0,"papers on computable numbers","[7, 2]",[7]\n'  # 2 is an author
        '1,"who wrote about analytical engines","[0]",[0]\n'  # only an author: no candidate left
    )
    queries = StarkMag(data_dir=str(official_files)).load_queries().split(HUMAN_SPLIT)
    assert [q.answer_ids for q in queries] == [(7, 2), (0,)]
    row = _row(
        *("--retriever", "bm25", "--dataset", "stark-mag", "--split", HUMAN_SPLIT, "--metrics", "recall@5"),
        *("--data-dir", str(official_files)),
    )
    assert row["num_queries"] == 2 and row["queries_without_candidate_answers"] == 1
    assert row["metrics"]["recall@5"] == pytest.approx(0.5)  # query 0 finds its one paper; query 1 scores 0


@pytest.mark.parametrize(
    "node_info",
    [
        {i: {"title": f"t{i}", "review": [{"text": "x" * 100, "vote": None}], "n": i} for i in range(2500)},
        {1: {"name": "b"}, 0: {"name": "a"}, 2: {"name": "c"}},  # ids out of order
        (lambda shared: {0: {"tags": shared}, 1: {"tags": shared}})(["a" * 100, "b" * 100]),  # shared objects
        {},
    ],
)
@pytest.mark.parametrize("whole_below", [0, 1 << 30], ids=["streamed", "read-whole"])
def test_node_store_equals_pickle(
    node_info: dict, whole_below: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pickle

    import harness_stark.store as store_module
    from harness_stark.store import build_store

    monkeypatch.setattr(store_module, "WHOLE_BELOW", whole_below)
    source = tmp_path / "node_info.pkl"
    source.write_bytes(pickle.dumps(node_info, protocol=4))
    store = build_store(source, tmp_path / "store")
    assert len(store) == len(node_info)
    assert {i: store[i] for i in range(len(store))} == node_info
    again = build_store(source, tmp_path / "store")  # a second call opens the cached copy
    assert again.objects is None  # read from the file this time
    assert {i: again[i] for i in range(len(again))} == node_info


def test_node_store_rejects_bad_files(tmp_path: Path) -> None:
    import pickle

    from harness_stark.store import build_store

    (tmp_path / "gaps.pkl").write_bytes(pickle.dumps({0: {}, 5: {}}))
    with pytest.raises(HarnessError, match=r"node ids are not 0\.\.1"):
        build_store(tmp_path / "gaps.pkl", tmp_path / "a")
    (tmp_path / "cut.pkl").write_bytes(pickle.dumps({i: {"x": i} for i in range(100)})[:300])
    with pytest.raises(HarnessError, match="cannot read"):
        build_store(tmp_path / "cut.pkl", tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_node_store_streams_without_reading_the_whole_pickle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle

    import harness_stark.store as store

    def whole(*args: object) -> None:
        raise AssertionError("fell back to reading the whole pickle")

    monkeypatch.setattr(store, "_whole", whole)
    monkeypatch.setattr(store, "WHOLE_BELOW", 0)  # stream even these small files
    node_info = {i: {"title": f"title {i}", "review": [{"reviewText": "w" * (80 + i % 13)}]} for i in range(3000)}
    for protocol in (2, 4, 5):
        source = tmp_path / f"p{protocol}.pkl"
        source.write_bytes(pickle.dumps(node_info, protocol=protocol))
        built = store.build_store(source, tmp_path / f"s{protocol}")
        assert [built[i] for i in range(3000)] == list(node_info.values())


def test_node_store_streams_shared_constants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Values shared by every entry (one string object, pickled once) are kept, not refetched."""
    import pickle

    import harness_stark.store as store

    monkeypatch.setattr(store, "_whole", lambda *a: (_ for _ in ()).throw(AssertionError("fell back")))
    monkeypatch.setattr(store, "WHOLE_BELOW", 0)
    shared = "10 x 5 x 2 inches ; 1 pounds" * 3
    node_info = {i: {"details": {"dimensions": shared}, "text": "t" * (70 + i % 5) + str(i)} for i in range(5000)}
    source = tmp_path / "n.pkl"
    source.write_bytes(pickle.dumps(node_info, protocol=4))
    built = store.build_store(source, tmp_path / "s")
    assert [built[i] for i in range(5000)] == list(node_info.values())


def _snapshot(skb: Any) -> tuple[Any, ...]:
    documents = [skb.document(int(i), with_relations=True) for i in skb.candidate_ids]
    return documents, skb.counts(), [e.name for e in skb.edge_types]


def test_the_cached_graph_follows_the_type_dictionaries(
    official_files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MAG's relations come from the class, not the files: renumbering them must not reuse a
    graph cached as positions in the old numbering (a warm load equals a cold one)."""
    from harness_stark.skb import MagSKB

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "warm"))
    StarkMag(data_dir=str(official_files)).load_skb()  # caches the graph under the shipped numbering
    reordered = dict(reversed(list(MagSKB.default_edge_types.items())))
    monkeypatch.setattr(MagSKB, "default_edge_types", reordered)
    warm = _snapshot(StarkMag(data_dir=str(official_files)).load_skb())
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cold"))
    assert warm == _snapshot(StarkMag(data_dir=str(official_files)).load_skb())


def test_a_damaged_node_store_is_converted_again_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pickle

    from harness_stark.store import build_store

    node_info = {i: {"name": f"node {i}", "text": "x" * (20 + i)} for i in range(50)}
    source = tmp_path / "node_info.pkl"
    source.write_bytes(pickle.dumps(node_info))
    build_store(source, tmp_path / "store")
    with (tmp_path / "store" / "blobs.bin").open("r+b") as handle:  # same size, other bytes
        handle.seek(40)
        handle.write(b"\xff\xff\xff")
    again = build_store(source, tmp_path / "store")
    assert "is damaged (blobs.bin does not match its digest)" in capsys.readouterr().err
    assert [again[i] for i in range(len(again))] == list(node_info.values())


def test_type_ids_are_looked_up_alike_by_table_and_by_search() -> None:
    """``_positions`` uses a table for many small ids, a binary search otherwise: the same answers."""
    import numpy as np

    from harness_stark.skb import _positions

    rng = np.random.default_rng(0)
    for _ in range(200):
        keys = rng.choice(np.arange(-3, 40), size=int(rng.integers(1, 20)), replace=False)
        values = rng.integers(-5, 45, size=int(rng.integers(1001, 3000)))
        expected = [list(keys).index(v) if v in keys else -1 for v in values.tolist()]
        assert _positions(values, keys).tolist() == expected
        assert _positions(values[:900], keys).tolist() == expected[:900]  # the search path
