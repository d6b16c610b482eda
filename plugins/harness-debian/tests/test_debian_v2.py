"""Groundwork for Debian SKB v2 and evaluation queries v2, on a small archive written here."""

from __future__ import annotations

import json
import lzma
import re
import statistics
import subprocess
import sys
import types
import unicodedata
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml

import harness
from harness import SKB
from harness_debian import build as build_module
from harness_debian.build import build
from harness_debian.dataset import VERSIONS, DebianDataset
from harness_debian.qa_v2 import run
from harness_debian.queries import split_ids
from harness_debian.queries_v2 import hops

REPO = Path(__file__).resolve().parents[3]
# the last commit that changed the builder before v2: what built the shipped data/v1/skb
V1_BUILDER_COMMIT = "bc160cc8f6cf180c32871674678101a1f0b987dd"
V1_BUILDER_PATH = "plugins/harness-debian/harness_debian/build.py"

GURKAN_NFD = unicodedata.normalize("NFD", "Gürkan Myczko")
# an e-mail address as a reader would spot one, written independently of build.ADDRESS
ADDRESS_LIKE = re.compile(r"[^\s<>()\[\]\"',;:/&]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b", re.IGNORECASE)

PACKAGES = f"""\
Package: python3-foo
Version: 1.2-1
Maintainer: Debian Python Team <team+python@tracker.debian.org>
Depends: python3 (>= 3.11~), libfoo1 (>= 1.2)
Description: Python bindings for foo
Description-md5: aaa1
Tag: devel::lang:python, role::shared-lib
Section: python

Package: python3-bar
Version: 0.9
Maintainer: Debian Python Team <python-team@lists.debian.org>
Depends: python3:any
Description: bar for Python
Description-md5: aaa2
Section: python

Package: libfoo1
Source: foo
Version: 1.2-1
Maintainer: Gürkan Myczko <gurkan@phys.example.org>
Depends: libc6 (>= 2.34) | libc6-udeb
Description: foo shared library
Description-md5: aaa3
Section: libs

Package: foo-tools
Source: foo (1.2-1)
Version: 1.2-1+b1
Maintainer: {GURKAN_NFD} <tar@debian.example.org>
Depends: libfoo1 (= 1.2-1), missing-pkg | python3-foo | python3-bar
Description: command-line tools for foo
Description-md5: aaa4
Tag: interface::commandline, role::program
Section: utils

Package: python3
Version: 3.11.2
Maintainer: Matthias Klose <doko@example.org>
Description: interactive high-level object-oriented language
Description-md5: aaa5
Section: python

Package: cli-app
Version: 2
Maintainer: Jane Doe <jane@example.org>
Depends: python3-bar, virtual-thing
Description: naïve café manager
 Keeps the café's orders in a plain text file.
 .
 Works without a display.
Tag: interface::commandline, role::program
Section: utils

Package: gui-app
Version: 3
Maintainer: Jane Doe <jane@example.org>
Depends: python3-foo
Recommends: cli-app
Description: graphical foo front end
Description-md5: aaa7
Tag: interface::x11, role::program
Section: x11

Package: anon-pkg
Version: 1
Maintainer: <anon@example.org>
Depends: libfoo1
Description: maintained by an address only
Description-md5: aaa8
Section: misc

Package: bare-pkg
Version: 1
Maintainer: bare@example.org
Suggests: gui-app
Description: maintained by a bare address
Description-md5: aaa9
Section: misc

Package: meta-pkg
Version: 1
Maintainer: "Doe, Jane" <jane.doe@example.org>
Depends: foo-tools, anon-pkg
Description: installs the foo tools
Description-md5: aaa0
Section: metapackages
"""

TRANSLATIONS = """\
Package: python3-foo
Description-md5: aaa1
Description-en: Python bindings for foo
 This package provides the Python 3 bindings for libfoo.
 .
 It is pure Python.

Package: python3-bar
Description-md5: aaa2
Description-en: bar for Python
 Bar parses command lines.

Package: libfoo1
Description-md5: aaa3
Description-en: foo shared library
 The foo library reads Ærø maps.

Package: foo-tools
Description-md5: aaa4
Description-en: command-line tools for foo
 Tools to convert foo files.
 .
 Includes foo-convert and foo-check.

Package: python3
Description-md5: aaa5
Description-en: interactive high-level object-oriented language
 Python is an interpreted language.

Package: gui-app
Description-md5: aaa7
Description-en: graphical foo front end
 A GTK front end that draws foo maps.

Package: anon-pkg
Description-md5: aaa8
Description-en: maintained by an address only
 Nothing to see.

Package: bare-pkg
Description-md5: aaa9
Description-en: maintained by a bare address
 Nothing either.

Package: meta-pkg
Description-md5: aaa0
Description-en: installs the foo tools
 A metapackage.
"""


def _archive(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "Packages").write_text(PACKAGES, encoding="utf-8")
    (tmp_path / "Translation-en").write_text(TRANSLATIONS, encoding="utf-8")
    return tmp_path / "Packages", tmp_path / "Translation-en"


def _saved(skb: SKB, directory: Path) -> dict[str, object]:
    """Everything a saved SKB holds, decoded (the compressed bytes depend on the xz build)."""
    skb.save(directory)
    with np.load(directory / "edges.npz") as arrays:
        edges = {k: arrays[k].tolist() for k in arrays.files}
    with lzma.open(directory / "nodes.jsonl.xz", "rt", encoding="utf-8") as rows:
        nodes = rows.read()
    return {"meta": (directory / "skb.json").read_text(encoding="utf-8"), "nodes": nodes, "edges": edges}


def _v1_builder() -> types.ModuleType:
    try:
        source = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{V1_BUILDER_COMMIT}:{V1_BUILDER_PATH}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("the pre-v2 builder is read from git history; not a git checkout")
    module = types.ModuleType("harness_debian_build_pre_v2")
    module.__file__ = str(REPO / V1_BUILDER_PATH)
    exec(compile(source, f"{V1_BUILDER_COMMIT[:10]}:{V1_BUILDER_PATH}", "exec"), module.__dict__)
    return module


def test_version_1_build_is_what_the_pre_v2_builder_builds_without_addresses(tmp_path: Path) -> None:
    packages, translations = _archive(tmp_path)
    old = _v1_builder().build(packages, translations, "test")
    maintainer = old.node_type_names.index("maintainer")
    assert any("email" in old.fields[n] for n in np.flatnonzero(old.node_types == maintainer))
    # the pre-v2 builder's SKB with the maintainers' e-mail field removed, and nothing else
    for node in np.flatnonzero(old.node_types == maintainer):
        old.fields[int(node)].pop("email", None)
    old._fingerprint = None
    new = build(packages, translations, "test")  # version 1 is the default
    assert _saved(new, tmp_path / "new") == _saved(old, tmp_path / "old")
    assert new.fingerprint == old.fingerprint
    # the same through the command line
    build_module.main(["--packages", str(packages), "--translations", str(translations), "--release", "test",
                       "--version", "1", "--out", str(tmp_path / "cli")])  # fmt: skip
    assert SKB.load(tmp_path / "cli").fingerprint == old.fingerprint


def test_version_2_keeps_no_email_address(tmp_path: Path) -> None:
    packages, translations = _archive(tmp_path)
    build_module.main(["--packages", str(packages), "--translations", str(translations), "--release", "test",
                       "--version", "2", "--out", str(tmp_path / "v2")])  # fmt: skip
    saved = _saved(SKB.load(tmp_path / "v2"), tmp_path / "resaved")
    assert "@" not in saved["nodes"] and "@" not in saved["meta"] and '"email"' not in saved["nodes"]
    skb = SKB.load(tmp_path / "v2")
    v1 = build(packages, translations, "test", version=1)
    maintainers = sorted(skb.names[i] for i in skb.nodes_of_type("maintainer"))
    # one node per display name: the team's two addresses and the NFC/NFD spellings merge
    assert maintainers == ["Debian Python Team", "Doe, Jane", "Gürkan Myczko", "Jane Doe", "Matthias Klose"]
    assert all(skb.fields[i] == {} for i in skb.nodes_of_type("maintainer"))
    assert len(v1.nodes_of_type("maintainer")) == 8  # v1: one per address, the bare one included
    pid = {skb.names[i]: int(i) for i in skb.candidate_ids}

    def maintainer(package: str) -> list[str]:
        return [skb.names[i] for i in skb.neighbors(pid[package], "maintained_by", "out")]

    assert maintainer("python3-foo") == maintainer("python3-bar") == ["Debian Python Team"]
    assert maintainer("libfoo1") == maintainer("foo-tools") == ["Gürkan Myczko"]
    assert maintainer("anon-pkg") == maintainer("bare-pkg") == []  # no name: no maintainer edge
    # everything but the maintainers is v1's
    assert skb.names[: len(pid)] == v1.names[: len(pid)] and list(skb.fields[: len(pid)]) == list(v1.fields[: len(pid)])
    for name in ("depends", "recommends", "suggests", "same_source", "in_section", "tagged"):
        for package, node in pid.items():
            ours = sorted(skb.names[i] for i in skb.neighbors(node, name, "out"))
            theirs = sorted(v1.names[i] for i in v1.neighbors(node, name, "out"))
            assert ours == theirs, (name, package)
    assert (
        skb.fields[pid["cli-app"]]["description"]
        == "Keeps the café's orders in a plain text file.\nWorks without a display."
    )
    assert (
        skb.fields[pid["foo-tools"]]["description"]
        == "Tools to convert foo files.\nIncludes foo-convert and foo-check."
    )


def test_version_2_redacts_email_addresses_in_package_texts(tmp_path: Path) -> None:
    """Addresses quoted in summaries, descriptions and homepages become ``<e-mail removed>`` in
    v2 (v1 keeps them); an ``@`` that is no address (Perl's ``@ISA``, ``SETI@home``) stays."""
    packages, translations = _archive(tmp_path)
    quoting = (
        "Package: quoting\nVersion: 1\nMaintainer: Jane Doe <jane@example.org>\n"
        "Homepage: http://www.example.net/~jdoe@example.net/\nDescription: mail jdoe@example.net\n"
        "Description-md5: bbb1\nSection: misc\n"
    )
    packages.write_text(PACKAGES + "\n" + quoting, encoding="utf-8")
    body = (
        "Written by J. Doe <j.doe@mail.example.co.uk> and &lt;x.y@example.org&gt;; list: dev@lists.example.org.\n"
        " Sets @ISA and runs SETI@home work units.\n"
    )
    translations.write_text(
        TRANSLATIONS + "\nPackage: quoting\nDescription-md5: bbb1\nDescription-en: mail jdoe@example.net\n " + body,
        encoding="utf-8",
    )
    build_module.main(["--packages", str(packages), "--translations", str(translations), "--release", "test",
                       "--version", "2", "--out", str(tmp_path / "v2")])  # fmt: skip
    skb = SKB.load(tmp_path / "v2")
    node = skb.names.index("quoting")
    assert skb.fields[node]["summary"] == "mail <e-mail removed>"
    assert skb.fields[node]["homepage"] == "http://www.example.net/~<e-mail removed>/"
    assert skb.fields[node]["description"] == (
        "Written by J. Doe <e-mail removed> and <e-mail removed>; list: <e-mail removed>. "
        "Sets @ISA and runs SETI@home work units."
    )
    saved = _saved(skb, tmp_path / "resaved")["nodes"]
    assert not ADDRESS_LIKE.search(saved), ADDRESS_LIKE.search(saved)
    v1 = build(packages, translations, "test", version=1)
    assert "j.doe@mail.example.co.uk" in v1.fields[v1.names.index("quoting")]["description"]


def test_the_default_output_is_the_shipped_directory_of_the_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packages, translations = _archive(tmp_path)
    monkeypatch.setattr(build_module, "DATA", tmp_path / "data")  # not the shipped data
    build_module.main(["--packages", str(packages), "--translations", str(translations), "--version", "2"])
    assert SKB.load(tmp_path / "data" / "v2" / "skb").counts()["candidates"] == PACKAGES.count("Package: ")


# -- queries v2 -------------------------------------------------------------------------

QUERIES = [
    {"id": 1, "query": "What depends on a package the Debian Python Team maintains and converts foo files?",
     "where": {"depends": {"maintained_by": "Debian Python Team"}}, "textual": "converts foo files"},
    {"id": 2, "query": "Something from whoever packages libfoo1 that has command-line tools?",
     "where": {"maintained_by": {"maintains": "libfoo1"}}},
    {"id": 3, "query": "A Python library a program tagged interface::commandline relies on, to parse command lines.",
     "where": {"required_by": {"tagged": "interface::commandline"}}},
    {"id": 4, "query": "Which package built from the same source as libfoo1 comes from the packager of foo-tools?",
     "where": {"same_source": "libfoo1", "maintained_by": {"maintains": ["foo-tools"]}}},
    {"id": 5, "query": "A metapackage pulling in something that uses a library from Gürkan Myczko.",
     "where": {"depends": {"depends": {"maintained_by": "Gürkan Myczko"}}}},
    {"id": 6, "query": "Which program (tagged role::program) needs both libfoo1 and a Debian Python Team package?",
     "where": {"depends": [{"maintained_by": "Debian Python Team"}, "libfoo1"], "tagged": "role::program"}},
]  # fmt: skip

JUDGEMENTS = {
    1: {"foo-tools": True, "cli-app": False, "gui-app": {"answer": False, "reason": "draws maps, converts nothing"}},
    2: {"libfoo1": False, "foo-tools": True},
    3: {"python3-bar": True, "libfoo1": False, "python3-foo": {"answer": False, "reason": "bindings, no parser"}},
    4: {"foo-tools": True, "libfoo1": {"answer": False, "reason": "named by the query"}},
    5: {"meta-pkg": True, "foo-tools": False, "gui-app": False},
    6: {"foo-tools": True},
}


def _is_yes(judgement: object) -> bool:
    return judgement is True or (isinstance(judgement, dict) and judgement["answer"] is True)


@pytest.fixture
def v2_dir(tmp_path: Path) -> Path:
    packages, translations = _archive(tmp_path)
    root = tmp_path / "data"
    build(packages, translations, "test", version=2).save(root / "skb")
    (root / "queries.yaml").write_text(yaml.safe_dump(QUERIES, allow_unicode=True), encoding="utf-8")
    (root / "judgements.yaml").write_text(yaml.safe_dump(JUDGEMENTS, allow_unicode=True), encoding="utf-8")
    return root


def _independent_candidates(skb: SKB) -> dict[int, set[str]]:
    """Each query's relational candidates by plain set logic over the edge list."""
    rel = {e.name: i for i, e in enumerate(skb.edge_types)}
    edges: dict[str, set[tuple[int, int]]] = {name: set() for name in rel}
    for s, d, t in zip(skb.src.tolist(), skb.dst.tolist(), skb.edge_type.tolist(), strict=True):
        edges[skb.edge_types[t].name].add((s, d))
    named = {n: {i for i in range(skb.num_nodes) if skb.names[i] == n} for n in set(skb.names)}
    packages = set(skb.candidate_ids.tolist())
    python_team_pkgs = {s for s, d in edges["maintained_by"] if d in named["Debian Python Team"]}
    libfoo_maintainers = {d for s, d in edges["maintained_by"] if s in named["libfoo1"]}
    cli_tagged = {s for s, d in edges["tagged"] if d in named["interface::commandline"]}
    foo_tools_maintainers = {d for s, d in edges["maintained_by"] if s in named["foo-tools"]}
    libfoo_siblings = (
        {d for s, d in edges["same_source"] if s in named["libfoo1"]}
        | {s for s, d in edges["same_source"] if d in named["libfoo1"]}
        | named["libfoo1"]  # a package is built from its own source
    )
    gurkan_pkgs = {s for s, d in edges["maintained_by"] if d in named["Gürkan Myczko"]}
    depends_on_gurkan = {s for s, d in edges["depends"] if d in gurkan_pkgs}
    programs = {s for s, d in edges["tagged"] if d in named["role::program"]}
    result = {
        1: {s for s, d in edges["depends"] if d in python_team_pkgs},
        2: {s for s, d in edges["maintained_by"] if d in libfoo_maintainers},
        3: {d for s, d in edges["depends"] if s in cli_tagged},
        4: libfoo_siblings & {s for s, d in edges["maintained_by"] if d in foo_tools_maintainers},
        5: {s for s, d in edges["depends"] if d in depends_on_gurkan},
        6: {s for s, d in edges["depends"] if d in python_team_pkgs}
        & {s for s, d in edges["depends"] if d in named["libfoo1"]}
        & programs,
    }
    return {q: {skb.names[i] for i in ids & packages} for q, ids in result.items()}


def test_two_hop_candidates_equal_an_independent_computation(v2_dir: Path) -> None:
    skb = SKB.load(v2_dir / "skb")
    expected = _independent_candidates(skb)
    run(v2_dir, split_ids, check=False, review_id=None, stats=False)
    rows = {r["id"]: r for r in map(json.loads, (v2_dir / "qa" / "requirements.jsonl").read_text().splitlines())}
    from harness_debian.queries_v2 import Graph

    graph = Graph(skb)
    for spec in QUERIES:
        got = {skb.names[i] for i in graph.candidates(spec["where"], "test")}
        assert got == expected[spec["id"]], spec["id"]
        assert got == set(JUDGEMENTS[spec["id"]])  # the fixture's judgements cover exactly the candidates
        assert rows[spec["id"]]["candidates"] == len(got) and rows[spec["id"]]["where"] == spec["where"]
    assert expected[4] == {"foo-tools", "libfoo1"}  # same_source is reflexive: libfoo1 itself
    assert expected[1] == {"foo-tools", "cli-app", "gui-app"} and expected[5] == {
        "meta-pkg",
        "foo-tools",
        "gui-app",
    }  # not vacuous
    assert [rows[q]["hops"] for q in sorted(rows)] == [2, 2, 2, 2, 3, 2]
    assert hops({"tagged": "role::program"}) == 1


def test_v2_compiles_to_a_loadable_query_set(v2_dir: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "harness_debian.queries", "--version", "2", "--data", str(v2_dir)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    dataset = DebianDataset(data_dir=str(v2_dir))
    queries = dataset.load_queries()
    skb = dataset.load_skb()
    rows = {q.id: q for split in queries for q in queries.split(split)}
    yes = {qid: {p for p, v in j.items() if _is_yes(v)} for qid, j in JUDGEMENTS.items()}
    assert {qid: {skb.names[i] for i in q.answer_ids} for qid, q in rows.items()} == yes
    assert {s: [q.id for q in queries.split(s)] for s in queries} == split_ids(sorted(rows))
    check = subprocess.run(
        [sys.executable, "-m", "harness_debian.queries", "--version", "2", "--data", str(v2_dir), "--check"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0 and "6 v2 queries up to date" in check.stdout, check.stderr


def _write_judgements(root: Path, judgements: dict[int, dict[str, object]]) -> None:
    (root / "judgements.yaml").write_text(yaml.safe_dump(judgements, allow_unicode=True), encoding="utf-8")


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "harness_debian.queries", "--version", "2", "--data", str(root), "--check"]
    return subprocess.run(command, capture_output=True, text=True)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda j: j[1].pop("cli-app"), "query 1: candidate 'cli-app' has no judgement"),
        (lambda j: j[3].update({"gui-app": True}), "query 3: 'gui-app' is not a relational candidate"),
        (lambda j: j[2].update({"foo-tools": False}), "query 2: no candidate is judged yes (no answer)"),
        (lambda j: j.update({99: {"libfoo1": True}}), "query 99: judged but not in queries.yaml"),
        (lambda j: j[4].update({"foo-tools": "maybe"}), "query 4: package 'foo-tools': expected yes, no"),
    ],
)
def test_check_names_the_query_and_package_at_fault(
    v2_dir: Path, change: Callable[[dict[int, dict[str, object]]], None], message: str
) -> None:
    run(v2_dir, split_ids, check=False, review_id=None, stats=False)
    judgements = json.loads(json.dumps(JUDGEMENTS))  # a deep copy, keys back to ints below
    judgements = {int(k): v for k, v in judgements.items()}
    change(judgements)
    _write_judgements(v2_dir, judgements)
    result = _check(v2_dir)
    assert result.returncode != 0
    assert message in result.stderr and "judgements.yaml" in result.stderr, result.stderr


def test_check_fails_on_stale_qa_and_bad_specs(v2_dir: Path) -> None:
    result = _check(v2_dir)  # never compiled
    assert result.returncode != 0 and "is out of date" in result.stderr
    run(v2_dir, split_ids, check=False, review_id=None, stats=False)
    judgements = {k: dict(v) for k, v in JUDGEMENTS.items()}
    judgements[2]["libfoo1"] = True  # changes query 2's answers: qa/ is now stale
    _write_judgements(v2_dir, judgements)
    result = _check(v2_dir)
    assert result.returncode != 0 and "out of date (queries [2])" in result.stderr
    bad = [*QUERIES, {"id": 7, "query": "x y z w", "where": {"depends": {"maintaned_by": "X"}}}]
    (v2_dir / "queries.yaml").write_text(yaml.safe_dump(bad), encoding="utf-8")
    result = _check(v2_dir)
    assert "query 7: where.depends: unknown relation 'maintaned_by'" in result.stderr
    bad[-1]["where"] = {"depends": {"maintained_by": "Nobody Team"}}
    (v2_dir / "queries.yaml").write_text(yaml.safe_dump(bad), encoding="utf-8")
    assert "query 7: where.depends.maintained_by: no node named 'Nobody Team'" in _check(v2_dir).stderr
    bad[-1]["where"] = {"tagged": "role::program", "in_section": "python"}  # no package is both
    (v2_dir / "queries.yaml").write_text(yaml.safe_dump(bad), encoding="utf-8")
    assert "query 7: no package satisfies where (no answer)" in _check(v2_dir).stderr


@pytest.mark.parametrize(
    ("qid", "text", "message"),
    [
        (3, "A Python library that a command-line program relies on, for parsing command lines.",
         "query 3: the text does not name where.required_by.tagged: tag 'interface::commandline'"),
        (6, "Which program needs both libfoo1 and a Debian Python Team package?",
         "query 6: the text does not name where.tagged: tag 'role::program'"),
        (1, "What depends on a package the Python team maintains and converts foo files?",
         "query 1: the text does not name where.depends.maintained_by: maintainer 'Debian Python Team'"),
        (4, "Which package built from the same source as libfoo1 comes from that packager?",
         "query 4: the text does not name where.maintained_by.maintains: package 'foo-tools'"),
        (2, "Something from whoever packages libfoo1-dev that has command-line tools?",  # another package
         "query 2: the text does not name where.maintained_by.maintains: package 'libfoo1'"),
    ],
)  # fmt: skip
def test_check_refuses_a_requirement_the_text_does_not_name(v2_dir: Path, qid: int, text: str, message: str) -> None:
    """Every tag, section, maintainer and package of ``where``, at any depth, must be named in
    the query text: a hidden debtag makes untagged packages that fit the text non-answers."""
    run(v2_dir, split_ids, check=False, review_id=None, stats=False)
    specs = [{**q, "query": text} if q["id"] == qid else q for q in QUERIES]
    (v2_dir / "queries.yaml").write_text(yaml.safe_dump(specs, allow_unicode=True), encoding="utf-8")
    result = _check(v2_dir)
    assert result.returncode != 0 and message in result.stderr and "queries.yaml" in result.stderr, result.stderr
    with pytest.raises(harness.HarnessError, match=re.escape(message)):  # compiling refuses it too
        run(v2_dir, split_ids, check=False, review_id=None, stats=False)


def test_unstated_requirements_are_listed_all_at_once(v2_dir: Path) -> None:
    """A nested section stated only by paraphrase ("a library", "utilities") is not named; every
    unnamed value of every query is one line of the same error."""
    specs = [dict(q) for q in QUERIES]
    specs[0] = {**specs[0], "where": {"depends": {"maintained_by": "Debian Python Team", "in_section": "python"}}}
    specs[2] = {**specs[2], "query": "A Python library that some program relies on, for parsing command lines."}
    (v2_dir / "queries.yaml").write_text(yaml.safe_dump(specs, allow_unicode=True), encoding="utf-8")
    result = _check(v2_dir)
    assert "query 1: the text does not name where.depends.in_section: section 'python'" in result.stderr
    assert "query 3: the text does not name where.required_by.tagged: tag 'interface::commandline'" in result.stderr
    assert "2 problem(s)" in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("text", "kind", "name", "named"),
    [
        ("tools in the utils section", "section", "utils", True),
        ("utils-section tools", "section", "utils", True),
        ("from Debian's section utils", "section", "utils", True),
        ("which utilities", "section", "utils", False),
        ("a library that the team packages", "section", "libs", False),
        ("the text editor", "section", "text", False),  # the word, not the section
        ("tagged Security::Forensics", "tag", "security::forensics", True),
        ("forensics tools", "tag", "security::forensics", False),
        ("the gpg-agent daemon", "package", "gpg", False),  # another package's name
        ("built from the same source as gpg.", "package", "gpg", True),
        ("linked against libocct-foundation-7.6 itself", "package", "libocct-foundation-7.6", True),
        ("the Debian GNOME team", "maintainer", "Debian GNOME Maintainers", False),
    ],
)
def test_names_in_text(text: str, kind: str, name: str, named: bool) -> None:
    from harness_debian.queries_v2 import names_in_text

    assert names_in_text(text, kind, name) is named


def test_the_shipped_queries_name_every_requirement() -> None:
    """The shipped v2 texts name every value of their ``where`` (what ``--check`` enforces), and
    ``same_source`` is reflexive on the shipped SKB: claws-mail is built from its own source."""
    from harness_debian.queries_v2 import Graph, load_specs, unstated

    specs = load_specs(VERSIONS["2"] / "queries.yaml")
    assert {spec.id: unstated(spec) for spec in specs if unstated(spec)} == {}
    skb = DebianDataset().load_skb()
    siblings = {skb.names[i] for i in Graph(skb).candidates({"same_source": "claws-mail"}, "t")}
    assert "claws-mail" in siblings and "claws-mail-spamassassin" in siblings


def test_review_prints_every_candidate_with_its_full_description(v2_dir: Path) -> None:
    text = run(v2_dir, split_ids, check=False, review_id=1, stats=False)
    skb = SKB.load(v2_dir / "skb")
    for package in ("foo-tools", "cli-app", "gui-app"):
        node = skb.names.index(package)
        assert f"== {package} [" in text
        for paragraph in skb.fields[node]["description"].splitlines():
            assert paragraph in text
    assert "[no (draws maps, converts nothing)]" in text and "\n1:\n" in text
    with pytest.raises(harness.HarnessError, match="no query with id 42"):
        run(v2_dir, split_ids, check=False, review_id=42, stats=False)


def test_stats_describe_the_answer_sets(v2_dir: Path) -> None:
    output = run(v2_dir, split_ids, check=False, review_id=None, stats=True)
    stats = json.loads(output[output.index("{") :])
    answers = [sum(map(_is_yes, j.values())) for j in JUDGEMENTS.values()]
    candidates = [len(j) for j in JUDGEMENTS.values()]
    assert stats["queries"] == len(QUERIES)
    assert stats["answers"] == {
        "min": min(answers), "median": float(np.median(answers)), "mean": round(float(np.mean(answers)), 2),
        "max": max(answers),
    }  # fmt: skip
    assert stats["candidates"]["max"] == max(candidates) and stats["candidates"]["mean"] == round(
        np.mean(candidates), 2
    )
    nested = [any(isinstance(v, dict) or (isinstance(v, list) and dict in map(type, v)) for v in q["where"].values())
              for q in QUERIES]  # fmt: skip
    assert stats["two_hop_share"] == round(sum(nested) / len(QUERIES), 4) == 1.0
    assert stats["splits"] == {k: len(v) for k, v in split_ids([q["id"] for q in QUERIES]).items()}
    assert statistics.median(answers) == stats["answers"]["median"]


def test_the_graph_is_vectorized_on_the_shipped_skb() -> None:
    """Two-hop candidates on the 66k-node shipped SKB agree with plain set logic over its edges."""
    skb = DebianDataset().load_skb()
    from harness_debian.queries_v2 import Graph

    graph = Graph(skb)
    got = {skb.names[i] for i in graph.candidates({"depends": {"maintained_by": "Debian Games Team"}}, "t")}
    depends, maintained = skb.relation("depends"), skb.relation("maintained_by")
    team = {i for i in skb.nodes_of_type("maintainer").tolist() if skb.names[i] == "Debian Games Team"}
    src, dst, typ = skb.src.tolist(), skb.dst.tolist(), skb.edge_type.tolist()
    team_pkgs = {s for s, d, t in zip(src, dst, typ, strict=True) if t == maintained and d in team}
    expected = {skb.names[s] for s, d, t in zip(src, dst, typ, strict=True) if t == depends and d in team_pkgs}
    assert got == expected and len(expected) > 100


def test_the_cards_hop_counts_are_the_queries_depths(tmp_path: Path) -> None:
    """`compare --by hops` groups by the queries' depths; `--check` holds the card to the same counts."""
    from harness_debian.qa_v2 import hops_line, hops_problems
    from harness_debian.queries_v2 import compile_v2, load_judgements, load_specs

    root = VERSIONS["2"]
    compiled = compile_v2(
        SKB.load(root / "skb"),
        load_specs(root / "queries.yaml"),
        load_judgements(root / "judgements.yaml"),
        root / "judgements.yaml",
        root / "queries.yaml",
    )
    assert hops_problems(root / "README.md", compiled) == []
    assert hops_line(compiled).endswith("three-hop") and hops_line(compiled).startswith(
        f"{sum(c.hops == 1 for c in compiled)} queries one-hop"
    )
    card = tmp_path / "README.md"
    card.write_text((root / "README.md").read_text().replace(hops_line(compiled), "312 queries of one or two hops"))
    [problem] = hops_problems(card, compiled)
    assert "three-hop" in problem
