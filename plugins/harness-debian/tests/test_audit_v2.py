"""The second audit pass of the v2 queries (data/v2/AUDIT.md): its judgements cover exactly the
extras it reads, and none is an answer the query misses."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml

from harness_debian.audit_v2 import FIRST_AUDIT, QUERIES, V2, relaxations


def test_relaxations_drop_one_tag_or_section_at_any_depth() -> None:
    where = {
        "tagged": ["a::b", "c::d"],
        "in_section": "utils",
        "depends": {"maintained_by": "Team", "in_section": "libs"},
        "same_source": "x",
    }
    got = {label: relaxed for label, relaxed in relaxations(where)}
    assert set(got) == {
        "where.tagged=a::b",
        "where.tagged=c::d",
        "where.in_section=utils",
        "where.depends.in_section=libs",
    }
    assert got["where.tagged=a::b"]["tagged"] == "c::d" and got["where.tagged=a::b"]["in_section"] == "utils"
    assert got["where.depends.in_section=libs"]["depends"] == {"maintained_by": "Team"}
    assert where["depends"] == {"maintained_by": "Team", "in_section": "libs"}  # the spec is not changed
    assert list(relaxations({"depends": {"in_section": "libs"}})) == []  # nothing would be left of the nested spec


def test_the_shipped_audit_checks() -> None:
    """`python -m harness_debian.audit_v2` recomputes every relaxation of the audited queries
    and finds audit.yaml complete; every judgement agrees with `where` (no missing answer)."""
    result = subprocess.run([sys.executable, "-m", "harness_debian.audit_v2"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    head = result.stdout.splitlines()[0]
    audit = yaml.safe_load((V2 / "audit.yaml").read_text(encoding="utf-8"))
    judged = sum(len(entries) for entries in audit.values())
    assert f"{judged} of {judged} judgements agree with where" in head and "0 missing answer(s)" in head, head
    assert f"identical to the judged ones for {len(QUERIES)} of {len(QUERIES)}" in head
    near = sum(v["textual"] and not v["answer"] for entries in audit.values() for v in entries.values())
    assert re.search(rf"\b{near} near misses", head), head
    assert set(FIRST_AUDIT) <= set(QUERIES) and set(audit) <= set(QUERIES)
    # the card and the audit report quote the same totals
    report = (V2 / "AUDIT.md").read_text(encoding="utf-8")
    assert head in report, "AUDIT.md does not quote the audit's current summary line"
