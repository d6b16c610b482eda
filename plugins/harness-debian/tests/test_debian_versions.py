"""The two shipped versions of the Debian dataset: v2 (the default, `debian`) and v1
(`debian-v1`), loaded through the public API and the CLI, told apart in every row."""

from __future__ import annotations

import json
import lzma
import re
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from harness import SKB
from harness.testing import invoke
from harness_debian.dataset import LATEST, VERSIONS, DebianDataset
from harness_debian.qa_v2 import all_splits
from harness_debian.queries import split_ids
from harness_debian.queries_v2 import compile_v2, load_judgements, load_specs

V2 = VERSIONS["2"]
# an e-mail address as a reader would spot one (written independently of build.ADDRESS)
ADDRESS_LIKE = re.compile(r"[^\s<>()\[\]\"',;:/&]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b", re.IGNORECASE)


def test_both_versions_load_through_the_public_api() -> None:
    v2, v1 = harness.load_dataset("debian"), harness.load_dataset("debian-v1")
    assert (v2.version, v1.version, LATEST) == ("2", "1", "2")  # v2 is the default benchmark
    assert (v2.params["version"], v1.params["version"]) == ("2", "1")
    assert v2.load_skb().fingerprint != v1.load_skb().fingerprint
    v2_splits = ["test", "test-paraphrased", "train", "train-templated", "val"]
    for dataset, version, splits in ((v2, "2", v2_splits), (v1, "1", ["test", "val"])):
        on_disk = harness.load_stark_layout(VERSIONS[version] / "qa")
        assert dataset.load_queries().counts() == on_disk.counts()
        assert sorted(dataset.load_queries().counts()) == splits
    # the query sets differ: no v1 query text is a v2 one
    v1_texts, v2_texts = ({q.text for s in ("val", "test") for q in d.load_queries().split(s)} for d in (v1, v2))
    assert v1_texts and v2_texts and not v1_texts & v2_texts
    assert harness.load_dataset("debian", data_dir=str(VERSIONS["1"])).load_skb().fingerprint == (
        v1.load_skb().fingerprint
    )  # data_dir still chooses the directory


def test_the_shipped_v2_fingerprint_is_its_contents() -> None:
    """skb.json's fingerprint equals one computed afresh from the files (nodes and edges in file
    order), so caches and rows keyed on it change whenever the content does."""
    shipped = SKB.parse(V2 / "skb")
    fresh = SKB(
        name=shipped.name,
        node_type_names=shipped.node_type_names,
        node_types=shipped.node_types,
        names=shipped.names,
        fields=shipped.fields,
        edge_types=shipped.edge_types,
        src=shipped.src,
        dst=shipped.dst,
        edge_type=shipped.edge_type,
        candidate_types=shipped.candidate_types,
    )
    assert fresh.fingerprint == shipped.fingerprint
    assert json.loads((V2 / "skb" / "skb.json").read_text())["fingerprint"] == shipped.fingerprint


def test_the_shipped_v2_skb_holds_no_email_address() -> None:
    with lzma.open(V2 / "skb" / "nodes.jsonl.xz", "rt", encoding="utf-8") as rows:
        nodes = [json.loads(line) for line in rows]
    texts = [str(value) for _, name, fields in nodes for value in (name, *fields, *fields.values())]
    assert len(nodes) == json.loads((V2 / "skb" / "skb.json").read_text())["num_nodes"]
    found = [match[0] for text in texts for match in ADDRESS_LIKE.finditer(text)]
    assert found == []
    assert any("<e-mail removed>" in text for text in texts)  # redacted, not dropped
    assert not any("email" in fields for _, _, fields in nodes)  # v1's maintainer field
    assert "@" not in (V2 / "skb" / "skb.json").read_text()


def test_the_shipped_v2_queries_check() -> None:
    """`--version 2` defaults to the shipped data/v2; its qa/ is what the specs and judgements give."""
    result = subprocess.run(
        [sys.executable, "-m", "harness_debian.queries", "--version", "2", "--check", "--stats"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    specs = load_specs(V2 / "queries.yaml")
    assert f"{len(specs)} v2 queries up to date" in result.stdout
    stats = json.loads(result.stdout[result.stdout.index("{") :])
    assert stats["queries"] == len(specs) >= 300 and stats["two_hop_share"] >= 0.3
    assert stats["answers"]["min"] >= 1
    # the card quotes this output as it is
    card = (V2 / "README.md").read_text(encoding="utf-8")
    assert result.stdout.strip() in card


def test_the_card_counts_are_the_shipped_skb() -> None:
    card = (V2 / "README.md").read_text(encoding="utf-8")
    counts = DebianDataset().load_skb().counts()
    table = {
        match[0]: int(match[1].replace(",", ""))
        for match in re.findall(r"^\| `?([a-z_]+)`?[^|]*\|(?:[^|]*\|)? ([\d,]+) \|$", card, re.MULTILINE)
    }
    expected = {"nodes": counts["nodes"], "edges": counts["edges"], **counts["edges_by_type"]}
    expected |= {f"{t}s": n for t, n in counts["nodes_by_type"].items()}  # "packages", "maintainers", ...
    expected["debtags"] = expected.pop("tags")
    assert table == expected


def test_a_train_split_goes_into_qa_beside_the_evaluation_splits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook the train split will use: extra splits are compiled into qa/ and checked; an
    evaluation id in them is refused."""
    from harness_debian import qa_v2

    skb = SKB.load(V2 / "skb")
    specs = load_specs(V2 / "queries.yaml")[:6]
    judgements = load_judgements(V2 / "judgements.yaml")
    compiled = compile_v2(skb, specs, {s.id: judgements[s.id] for s in specs}, V2 / "judgements.yaml")
    train = [harness.Query(10_000 + i, f"synthesized query {i}", tuple(c.answers)) for i, c in enumerate(compiled)]
    monkeypatch.setattr(qa_v2, "extra_splits", lambda root: {"train": train})
    qa_v2.write_qa(tmp_path, compiled, split_ids)
    loaded = harness.load_stark_layout(tmp_path / "qa")
    assert loaded.split("train") == train
    assert loaded.counts() == {"train": len(train), **{k: len(v) for k, v in split_ids([s.id for s in specs]).items()}}
    assert qa_v2.stale(tmp_path, compiled, split_ids) == []
    monkeypatch.setattr(qa_v2, "extra_splits", lambda root: {"train": train[1:]})
    assert qa_v2.stale(tmp_path, compiled, split_ids) == [train[0].id]
    clash = [harness.Query(specs[0].id, "x", (1,))]
    monkeypatch.setattr(qa_v2, "extra_splits", lambda root: {"train": clash})
    with pytest.raises(harness.HarnessError, match=rf"split 'train' reuses evaluation query ids \[{specs[0].id}\]"):
        all_splits(tmp_path, compiled, split_ids)


def _row(output: str, *args: str) -> dict[str, object]:
    result = invoke("run", "-r", "bm25", *args, "--sample", "0.1", "--output", output)
    assert result.exit_code == 0, result.output
    (row,) = Path(output).glob("*/row.json")
    return json.loads(row.read_text())


def test_rows_name_the_version_and_never_mix() -> None:
    """`-d debian` runs v2 and `-d debian-v1` v1: each row names its version, SKB fingerprint
    and query set digest, and the two differ in all three."""
    v2 = _row("runs-v2", "-d", "debian")
    v1 = _row("runs-v1", "-d", "debian-v1")
    assert (v2["dataset"]["name"], v2["dataset"]["version"], v2["dataset"]["params"]["version"]) == (
        "debian",
        "2",
        "2",
    )
    assert (v1["dataset"]["name"], v1["dataset"]["version"], v1["dataset"]["params"]["version"]) == (
        "debian-v1",
        "1",
        "1",
    )
    assert v2["dataset_fingerprint"] == DebianDataset().load_skb().fingerprint
    assert v1["dataset_fingerprint"] == DebianDataset(version="1").load_skb().fingerprint
    assert v2["dataset_fingerprint"] != v1["dataset_fingerprint"]
    assert None not in (v2["queries_digest"], v1["queries_digest"]) and v2["queries_digest"] != v1["queries_digest"]
    assert v2["config_hash"] != v1["config_hash"]
