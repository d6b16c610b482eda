"""Faults of ``harness import tables`` and ``harness export`` (harness-formats): a writer killed
by SIGKILL mid-write, two writers of one ``--out``, targets that cannot be written. Whatever
happens, ``--out`` is whole or absent, a later run cleans what a killed one left, and a refusal
is one error line naming the path and the cause."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import harness
from harness.testing import invoke

HARNESS = [sys.executable, "-c", "import sys; from harness.cli import main; main(sys.argv[1:])"]


def write_tables(folder: Path, nodes: int, edges: int) -> list[str]:
    """A synthetic graph as CSV (papers and authors, quoted names); the import's arguments."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "nodes.csv").open("w", encoding="utf-8") as out:
        out.write("id,type,name,abstract\n")
        out.writelines(
            f'n{i},{"paper" if i % 4 else "author"},"Node {i}, {i % 97}",words {i % 13} and {i % 31} of node {i}\n'
            for i in range(nodes)
        )
    with (folder / "edges.csv").open("w", encoding="utf-8") as out:
        out.write("src,dst,type\n")
        out.writelines(f"n{(i * 7919) % nodes},n{(i * 104729) % nodes},r{i % 3}\n" for i in range(edges))
    (folder / "queries.csv").write_text("id,query,answer_ids,split\n1,node one,n1,test\n2,node two,n2;n3,test\n")
    return ["--nodes", str(folder / "nodes.csv"), "--edges", str(folder / "edges.csv"),
            "--queries", str(folder / "queries.csv")]  # fmt: skip


def staged(folder: Path, name: str) -> list[str]:
    """What a writer of ``folder/name`` leaves beside it: staged directories and its lock."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(f".{name}.") or p.name.startswith(f"..{name}."))


def start_import(args: list[str], out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*HARNESS, "import", "tables", *args, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_staging(process: subprocess.Popen[str], folder: Path, name: str, timeout: float = 120) -> bool:
    """Until ``process`` writes its staged directory; False if it ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if any(n.endswith(".staged") for n in staged(folder, name)):
            return True
        time.sleep(0.005)
    return False


def test_an_import_killed_mid_write_leaves_no_data_and_the_next_run_cleans_up(tmp_path: Path) -> None:
    args = write_tables(tmp_path / "in", 60_000, 200_000)
    out = tmp_path / "graph"
    process = start_import(args, out)
    try:
        assert wait_for_staging(process, tmp_path, "graph"), process.communicate()
        process.send_signal(signal.SIGKILL)  # no handler, no cleanup: what a power cut or the OOM killer does
    finally:
        process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    assert not out.exists()  # nothing a later run could take for an import
    assert any(n.endswith(".staged") for n in staged(tmp_path, "graph"))  # only the hidden debris
    code, _, err = _run("run", "-r", "bm25", "-d", "local", "--data-dir", str(out))
    assert code == 2 and f"dataset 'local': {out} does not exist" in err

    done = subprocess.run([*HARNESS, "import", "tables", *args, "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert staged(tmp_path, "graph") == []  # the killed run's staging, and our own lock, are gone
    skb = harness.SKB.load(out / "skb")
    assert (skb.num_nodes, skb.num_edges) == (60_000, 200_000)


def test_a_second_writer_of_one_out_is_refused_and_the_first_completes(tmp_path: Path) -> None:
    args = write_tables(tmp_path / "in", 60_000, 200_000)
    out = tmp_path / "graph"
    first = start_import(args, out)
    try:
        assert wait_for_staging(first, tmp_path, "graph"), first.communicate()
        code, printed, err = _run("import", "tables", *args, "--out", str(out), "--force")
        assert (code, printed) == (2, "")
        assert err == (
            f"error: {out} is being written by another import or export (it holds {tmp_path / '.graph.lock'}); "
            "wait for it to finish, or choose another --out\n"
        )
        code, _, err = _run("export", "-d", "tiny", "--to", "trec", "--out", str(out), "--force")
        assert code == 2 and err.startswith(f"error: {out} is being written by another import or export")
    finally:
        _, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr  # its staging was not touched by the refused ones
    assert harness.SKB.load(out / "skb").num_nodes == 60_000
    assert staged(tmp_path, "graph") == []


def test_stale_staging_of_earlier_versions_and_dead_processes_is_cleaned(tmp_path: Path) -> None:
    args = write_tables(tmp_path / "in", 50, 100)
    leftovers = [".graph.4194304.staged", "..graph.4194304.staged.4194304.x1y2.tmp"]
    for name in leftovers:
        (tmp_path / name / "skb").mkdir(parents=True)
    (tmp_path / ".graph.lock").write_text("")  # a killed writer's lock file: nobody holds it
    (tmp_path / ".graph2.7.staged").mkdir()  # another target's: not ours to touch
    code, _, err = _run("import", "tables", *args, "--out", str(tmp_path / "graph"))
    assert code == 0, err
    assert staged(tmp_path, "graph") == [] and (tmp_path / ".graph2.7.staged").is_dir()


def _run(*args: str) -> tuple[int, str, str]:
    result = invoke(*args, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


# -- export onto a target it cannot have -------------------------------------------------------


def _hold(lock: Path) -> int:
    """The lock another writer of the target would hold (a second open file: flock refuses it
    to this process too)."""
    handle = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


@pytest.mark.parametrize("case", ["file", "not empty", "busy", "read-only"])
def test_export_onto_a_target_it_cannot_have_is_one_line_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "out"
    handle = None
    if case == "file":
        target.write_text("in the way")
        expected = "error: --out out is a file, not a directory\n"
    elif case == "not empty":
        target.mkdir()
        (target / "theirs.txt").write_text("theirs")
        expected = "error: --out out exists and is not empty; give --force to replace it\n"
    elif case == "busy":
        handle = _hold(tmp_path / ".out.lock")
        expected = (
            f"error: {target} is being written by another import or export (it holds {tmp_path / '.out.lock'}); "
            "wait for it to finish, or choose another --out\n"
        )
    else:
        import harness_formats.staging as staging

        def read_only(path: Path) -> None:
            raise PermissionError(13, "Permission denied", str(path))

        monkeypatch.setattr(staging, "_lock", read_only)  # root writes anywhere: the refusal, as a user gets it
        expected = f"error: cannot write {target}: Permission denied (in {tmp_path})\n"
    before = {p.name for p in tmp_path.iterdir()}
    try:
        force = ["--force"] if case == "busy" else []  # busy: even --force waits for no one
        code, printed, err = _run("export", "-d", "tiny", "--to", "beir", "--out", "out", *force)
    finally:
        if handle is not None:
            os.close(handle)
    assert (code, printed, err) == (2, "", expected)
    assert {p.name for p in tmp_path.iterdir()} == before  # no staged directory, no new lock
    if case == "not empty":
        assert [p.name for p in target.iterdir()] == ["theirs.txt"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_export_into_a_read_only_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        code, printed, err = _run("export", "-d", "tiny", "--to", "trec", "--out", str(folder / "out"))
        assert (code, printed) == (2, "")
        assert err == f"error: cannot write {folder / 'out'}: Permission denied (in {folder})\n"
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o755)
