"""The embedded Debian SKB: its contents, its v1 queries (answers re-derived by code), its builder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import harness
import harness_debian
from harness import SKB
from harness.testing import plugin_manager, tiny_skb
from harness_debian.build import build, long_description
from harness_debian.dataset import VERSIONS, DebianDataset
from harness_debian.queries import SPEC, compile_queries


@pytest.fixture(scope="module")
def dataset() -> DebianDataset:
    """v1, whose queries these tests re-derive (v2's: test_debian_v2.py, test_debian_versions.py)."""
    return DebianDataset(version="1")


def test_skb_is_the_main_archive(dataset: DebianDataset) -> None:
    skb = dataset.load_skb()
    counts = skb.counts()
    assert counts["nodes_by_type"]["package"] >= 60_000
    assert counts["candidate_types"] == ["package"]
    assert counts["edges_by_type"]["depends"] > 200_000
    numpy_id = skb.names.index("python3-numpy")
    doc = skb.document(numpy_id, with_relations=True)
    assert "- summary: Fast array facility to the Python 3 language" in doc
    assert "- depends on: " in doc and "libblas3" in doc and "- section: python" in doc
    assert "- required by: " in doc and "(and " in doc  # capped neighbour list
    assert skb.nodes_of_type("maintainer").size > 1000


def test_version_and_data_dir_are_the_parameters(tmp_path: Path) -> None:
    """Another copy in the same layout is read from ``data_dir``; other names are refused."""
    assert DebianDataset().params == {"version": "2", "data_dir": None}
    tiny_skb().save(tmp_path / "skb")
    harness.write_stark_csv(tmp_path / "qa" / "stark_qa" / "stark_qa.csv", [harness.Query(0, "a red kettle", (0,))])
    (tmp_path / "qa" / "split").mkdir()
    (tmp_path / "qa" / "split" / "test.index").write_text("0\n")
    copy = DebianDataset(data_dir=str(tmp_path))
    assert copy.params == {"version": "2", "data_dir": str(tmp_path)}
    assert copy.load_skb().fingerprint == tiny_skb().fingerprint
    assert copy.load_queries().counts() == {"test": 1}
    with pytest.raises(harness.HarnessError, match="datadir: not a parameter"):
        DebianDataset(datadir=str(tmp_path))
    assert DebianDataset(version=1).version == "1"  # a registry entry's `version: 1`
    with pytest.raises(harness.HarnessError, match="version: "):
        DebianDataset(version="3")


def test_presets_name_the_dataset_and_make_it_the_default() -> None:
    manager = plugin_manager(harness_debian)
    (registry,) = [fragment for _, fragment in manager.presets()]
    assert not manager.failures
    assert registry.defaults.dataset == "debian"
    for name, version in (("debian", "2"), ("debian-v1", "1")):
        entry = registry.datasets[name]
        assert entry.plugin == DebianDataset.name and entry.splits == ["val", "test"] and entry.description
        assert DebianDataset(**entry.params).version == version


def test_queries_are_many_split_and_answerable(dataset: DebianDataset) -> None:
    skb, queries = dataset.load_skb(), dataset.load_queries()
    val, test = queries.split("val"), queries.split("test")
    assert len(val) + len(test) >= 150
    assert not {q.id for q in val} & {q.id for q in test}
    for query in val + test:
        assert query.answer_ids and skb.is_candidate(np.asarray(query.answer_ids)).all()
        assert len(query.text.split()) >= 4


@pytest.mark.slow
def test_shipped_answers_equal_what_the_specifications_derive(dataset: DebianDataset) -> None:
    import yaml

    skb, queries = dataset.load_skb(), dataset.load_queries()
    derived = {q.id: q for q in compile_queries(skb, yaml.safe_load(SPEC.read_text()))}
    shipped = {q.id: q for split in queries for q in queries.split(split)}
    assert derived == shipped


def test_query_compiler_check_mode() -> None:
    result = subprocess.run([sys.executable, "-m", "harness_debian.queries", "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "up to date" in result.stdout


def test_dataset_cards_are_shipped() -> None:
    for root in VERSIONS.values():
        card = (root / "README.md").read_text()
        for word in ("bookworm", "Packages", "Translation-en", "licen", "python -m harness_debian.build"):
            assert word in card, (root, word)


PACKAGES = """\
Package: alpha
Version: 1.0
Maintainer: Team A <a@example.org>
Depends: libbeta1 (>= 2), missing-pkg | gamma, libc6
Recommends: delta
Description: the alpha tool
Description-md5: 111
Tag: role::program, use::editing,
 works-with::text
Section: editors

Package: libbeta1
Source: beta
Version: 2.0
Maintainer: Team A <A@example.org>
Description: beta library
Description-md5: 222
Section: libs

Package: beta-utils
Source: beta (2.0)
Version: 2.0
Maintainer: Bob <bob@example.org>
Description: beta tools
Description-md5: 333
Section: utils

Package: gamma
Version: 3
Maintainer: Team A <a@example.org>
Description: gamma
Description-md5: 444
Section: utils
"""

TRANSLATIONS = """\
Package: alpha
Description-md5: 111
Description-en: the alpha tool
 Alpha edits text.
 .
 It is fast.

Package: libbeta1
Description-md5: 222
Description-en: beta library
 Shared library for beta.
"""


def test_builder_on_a_small_archive(tmp_path: Path) -> None:
    (tmp_path / "Packages").write_text(PACKAGES)
    (tmp_path / "Translation-en").write_text(TRANSLATIONS)
    skb = build(tmp_path / "Packages", tmp_path / "Translation-en", "test")
    names = list(skb.names)
    pid = {n: names.index(n) for n in ("alpha", "libbeta1", "beta-utils", "gamma")}
    assert [names[i] for i in skb.candidate_ids] == ["alpha", "beta-utils", "gamma", "libbeta1"]
    # the first alternative that names a real package is kept; unknown packages are skipped
    assert sorted(names[i] for i in skb.neighbors(pid["alpha"], "depends", "out")) == ["gamma", "libbeta1"]
    assert skb.neighbors(pid["alpha"], "recommends", "out").size == 0  # delta is not in the archive
    assert skb.neighbors(pid["libbeta1"], "same_source").tolist() == [pid["beta-utils"]]
    # maintainers are one node per e-mail address, whatever its case
    team = skb.neighbors(pid["alpha"], "maintained_by", "out")
    assert skb.neighbors(pid["libbeta1"], "maintained_by", "out").tolist() == team.tolist()
    assert sorted(names[i] for i in skb.neighbors(pid["alpha"], "tagged", "out")) == [
        "role::program",
        "use::editing",
        "works-with::text",
    ]
    assert skb.fields[pid["alpha"]]["description"] == "Alpha edits text.\nIt is fast."
    assert skb.fields[pid["gamma"]]["summary"] == "gamma"  # no translation: the Packages summary
    skb.save(tmp_path / "skb")
    assert SKB.load(tmp_path / "skb").document(pid["alpha"]) == skb.document(pid["alpha"])


def test_long_description_paragraphs() -> None:
    assert long_description(" one\n two\n .\n three") == "one two\nthree"
