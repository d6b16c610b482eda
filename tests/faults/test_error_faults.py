"""Fast fault tests of errors that name their cause (issue 32): a full disk, an empty ``--metrics``,
servers that would listen on the network.

- A full disk is the real thing: writes go to ``/dev/full`` (every write fails with ``ENOSPC``),
  through the same calls a full file system fails in (``write``/``flush``/``fsync``, numpy's
  ``tofile`` with its bare "N requested and M written"). The command says "no space left on
  device" and the path in one line, exit status 2, no traceback.
- ``--metrics ''`` (or blanks) is refused like ``--metrics ,`` by every command that takes it.
- No server the project starts binds every interface (``""``, ``0.0.0.0``, ``::``)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness
from harness import HarnessError
from harness.testing import Components, OverlapRetriever, TinyDataset, installed_plugins, invoke, require

ROOT = Path(__file__).resolve().parents[2]
FULL = Path("/dev/full")
pytestmark = pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full (Linux)")


def _one_error_line(output: str) -> str:
    """The command's one ``error:`` line; no traceback around it."""
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    return errors[0]


# -- a full disk -------------------------------------------------------------------------------
@pytest.fixture
def full_under(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """Temporary files made under any of the yielded directories are ``/dev/full``: the disk
    they are written to is full (the atomic writers' temporary files, where every write lands)."""
    real = tempfile.mkstemp
    roots: list[Path] = []

    def mkstemp(*args: Any, **kwargs: Any) -> tuple[int, str]:
        fd, name = real(*args, **kwargs)
        if any(Path(name).resolve().is_relative_to(root) for root in roots):
            os.close(fd)
            os.unlink(name)
            os.symlink(FULL, name)
            fd = os.open(name, os.O_WRONLY)
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    yield roots


def test_a_full_disk_under_the_run_directory_is_one_line_naming_the_file(
    tmp_path: Path, full_under: list[Path]
) -> None:
    installed_plugins(Components([OverlapRetriever], [TinyDataset]))
    runs = (tmp_path / "runs").resolve()
    full_under.append(runs)
    result = invoke(
        "run", "-r", "overlap", "-d", "tiny", "-s", "test", "--output", str(runs),
        env={"HARNESS_CACHE": str(tmp_path / "cache")},
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.output)
    assert re.fullmatch(rf"error: no space left on device while writing {re.escape(str(runs))}/\S+", line), line
    assert ".tmp" not in line  # the file the user knows, not the temporary one
    assert not [p for p in runs.rglob("*") if p.is_symlink()], "a temporary file was left behind"


class _FillsTheDisk(OverlapRetriever):
    """Saves its index into a cache directory whose file system is full, the way numpy does."""

    name = "fills-the-disk"
    how = "np.save"

    def build(self, skb: Any, context: Any) -> None:
        with harness.atomic_dir(Path(context.cache_dir) / "full-index") as tmp:
            (tmp / "ids.npy").symlink_to(FULL)
            if self.how == "np.save":
                np.save(tmp / "ids.npy", np.arange(100_000))
            else:  # tofile after the header went out: numpy's bare "N requested and M written"
                with open(tmp / "ids.npy", "wb") as handle:
                    np.arange(100_000).tofile(handle)


class _TofileFillsTheDisk(_FillsTheDisk):
    name = "tofile-fills-the-disk"
    how = "tofile"


class _RawShortWrite(OverlapRetriever):
    """Writes past the atomic writers (a plugin's own file): the command still names the cause."""

    name = "raw-short-write"

    def build(self, skb: Any, context: Any) -> None:
        with open(FULL, "wb") as handle:
            np.arange(100_000).tofile(handle)


class _ReadOnly(OverlapRetriever):
    name = "read-only"

    def build(self, skb: Any, context: Any) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(Path(context.cache_dir) / "index"))


#: numpy's short write, in words
_SHORT = r"no space left on device \(100000 items requested, 0 written\)"
_FULL_INDEX = r"no space left on device while writing {cache}/full-index"


@pytest.mark.parametrize(
    "retriever, expected",
    [
        ("fills-the-disk", _FULL_INDEX),
        ("tofile-fills-the-disk", _FULL_INDEX + r" \(100000 items requested, 0 written\)"),
        ("raw-short-write", r"retriever 'raw-short-write' failed to build: " + _SHORT),
        ("read-only", r"retriever 'read-only' failed to build: read-only file system: {cache}/index"),
    ],
)  # fmt: skip
def test_file_system_errors_from_a_plugin_are_one_line_with_the_cause(
    tmp_path: Path, retriever: str, expected: str
) -> None:
    installed_plugins(Components([_FillsTheDisk, _TofileFillsTheDisk, _RawShortWrite, _ReadOnly], [TinyDataset]))
    cache = tmp_path / "cache"
    result = invoke("run", "-r", retriever, "-d", "tiny", "-s", "test", env={"HARNESS_CACHE": str(cache)})
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.output)
    # the plugin's own file/line is no help here: the cause is the file system's
    assert re.fullmatch("error: " + expected.format(cache=re.escape(str(cache))) + r"\S*", line), line


def test_the_full_disk_error_is_still_an_oserror_for_caches_that_give_up(tmp_path: Path) -> None:
    """Caches that carry on uncached on a full disk (``except OSError``) keep doing so."""
    with pytest.raises(OSError) as caught, harness.atomic_dir(tmp_path / "entry") as tmp:
        (tmp / "data.bin").symlink_to(FULL)
        with open(tmp / "data.bin", "w") as out:
            out.write("x" * 10_000)
    assert isinstance(caught.value, HarnessError) and caught.value.errno == errno.ENOSPC
    assert str(caught.value) == f"no space left on device while writing {tmp_path / 'entry'}"
    assert list(tmp_path.iterdir()) == [], "the half-written entry was left behind"


def test_a_rust_writers_full_disk_is_the_same_error(tmp_path: Path) -> None:
    """safetensors (Rust) raises its own type with the OS's words; it is recognised all the same."""

    class SafetensorError(Exception):
        pass

    rust = 'IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'
    with pytest.raises(HarnessError) as caught, harness.atomic_dir(tmp_path / "model"):
        raise SafetensorError(f"Error while serializing: {rust}")
    assert str(caught.value) == f"no space left on device while writing {tmp_path / 'model'}"
    with pytest.raises(SafetensorError), harness.atomic_dir(tmp_path / "model"):
        raise SafetensorError("header too large")  # any other error stays what it is


@pytest.fixture
def full_fs(tmp_path: Path) -> Iterator[Path]:
    """A directory on a file system that is full: a 1 MiB tmpfs filled to the last block (a
    mount needs root: skipped without it; the /dev/full tests above run everywhere)."""
    mount = tmp_path / "full"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        with contextlib.suppress(OSError), open(mount / "filler", "wb") as filler:
            while True:
                filler.write(b"\0" * 4096)
                filler.flush()
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _epoch_loop(work: Path, state: dict[str, Any]) -> None:
    torch = require("torch", install="pip install torch (see the README)")
    context = harness.TrainContext(cache_dir=work, seed=0, work_dir=work, checkpoint_dir=work / "checkpoint")
    tensors = {name: torch.as_tensor(value) for name, value in state.items()}
    loop = harness.EpochLoop(context, 1, state=lambda: tensors, restore=lambda saved: None)
    for epoch in loop:
        loop.end(epoch, loss=1.0)  # logs the curve's point, then saves the epoch's checkpoint


@pytest.mark.parametrize("disk", ["/dev/full", "tmpfs"])
def test_a_full_disk_while_saving_an_epoch_checkpoint_names_the_file(
    tmp_path: Path, request: pytest.FixtureRequest, disk: str
) -> None:
    """torch.save onto a full file system raises "[enforce fail at inline_container.cc] unexpected
    pos": the loop's own write says what happened and where."""
    if disk == "tmpfs":
        work = request.getfixturevalue("full_fs") / "work"
        filler = work.parent / "filler"
        os.truncate(filler, filler.stat().st_size - 64 * 1024)  # room for the curve, not for the checkpoint
    else:
        work = tmp_path / "work"
        request.getfixturevalue("full_under").append(work.resolve())
    work.mkdir()
    with pytest.raises(HarnessError) as caught:
        _epoch_loop(work, {"weights": np.zeros(50_000)})
    assert isinstance(caught.value, OSError) and caught.value.errno == errno.ENOSPC
    assert str(caught.value) == f"no space left on device while writing {work}/epochs/epoch-001/state.pt"
    assert not list((work / "epochs").iterdir()), "a half-written checkpoint was left behind"


_NODES = "id,type,name\n" + "".join(f"n{i},paper,Paper number {i} of many\n" for i in range(2000))


@pytest.mark.parametrize(
    "command",
    [["import", "tables"], ["export", "-d", "tiny", "--to", "beir"], ["export", "-d", "tiny", "--to", "hf"]],
)
def test_a_full_disk_under_out_is_one_line_naming_out(full_fs: Path, tmp_path: Path, command: list[str]) -> None:
    """Not the hidden staged directory beside --out, not a bare "no space left on device"."""
    installed_plugins(Components([OverlapRetriever], [TinyDataset]))
    if command[0] == "import":
        (tmp_path / "nodes.csv").write_text(_NODES)
        (tmp_path / "edges.csv").write_text("src,dst,type\nn1,n2,cites\n")
        (tmp_path / "queries.csv").write_text("id,query,answer_ids,split\n1,paper one,n1,test\n")
        command = [*command, *(f"--{name}={tmp_path / name}.csv" for name in ("nodes", "edges", "queries"))]
    out = full_fs / "out"
    result = invoke(*command, "--out", str(out))
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.output)
    assert re.fullmatch(rf"error: no space left on device while writing {re.escape(str(out))}(/\S+)?", line), line
    assert sorted(p.name for p in full_fs.iterdir()) == ["filler"], "a staged directory or a lock was left behind"


def test_a_setting_from_the_environment_that_is_no_number_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    require("harness_ray", install="pip install 'stark-harness-ray'")
    monkeypatch.setenv("HARNESS_RAY_WORKER_START_TIMEOUT", "soon")
    installed_plugins(Components([OverlapRetriever], [TinyDataset]))
    result = invoke("run", "-r", "overlap", "-d", "tiny", "--executor", "ray", "--dry-run")
    assert result.exit_code == 2, result.output
    assert (
        _one_error_line(result.output) == "error: $HARNESS_RAY_WORKER_START_TIMEOUT='soon' is not a number of seconds"
    )


# -- --metrics that names no metric ----------------------------------------------------------
@pytest.mark.parametrize("metrics", ["", " ", ",", " , "])
@pytest.mark.parametrize("command", ["run", "evaluate", "leaderboard show", "leaderboard publish"])
def test_metrics_naming_none_are_refused_by_every_command(tmp_path: Path, command: str, metrics: str) -> None:
    installed_plugins(Components([OverlapRetriever], [TinyDataset]))
    run_file, qrels = tmp_path / "run.trec", tmp_path / "qrels.trec"
    run_file.write_text("1 Q0 2 1 1.0 x\n")
    qrels.write_text("1 0 2 1\n")
    (tmp_path / "board").mkdir()
    site = tmp_path / "site"
    args = {
        "run": ["run", "-r", "overlap", "-d", "tiny", "--dry-run"],
        "evaluate": ["evaluate", "--run", str(run_file), "--qrels", str(qrels)],
        "leaderboard show": ["leaderboard", "show", str(tmp_path / "board")],
        "leaderboard publish": ["leaderboard", "publish", "--from", str(tmp_path / "board"), "--out", str(site)],
    }[command]  # fmt: skip
    result = invoke(*args, "--metrics", metrics)
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.output)
    assert line.startswith("error: no metrics requested: --metrics ") and "leave the option out" in line, line
    assert not site.exists()


# -- servers listen on loopback only -------------------------------------------------------------
#: a server or socket bound to every interface: ("", port), ("0.0.0.0", …), ("::", …), host="0.0.0.0"
_ALL_INTERFACES = re.compile(
    r"""(?:Server|bind)\(\s*\(\s*(?:""|''|"0\.0\.0\.0"|'0\.0\.0\.0'|"::"|'::')\s*,"""
    r"""|\bhost\s*=\s*["'](?:0\.0\.0\.0|::)["']"""
    r"""|--(?:node-ip-address|dashboard-host|host)[= ](?:0\.0\.0\.0|::)\b"""
)


def test_no_server_in_the_project_binds_every_interface() -> None:
    bad = ['HTTPServer(("", 0), H)', "TCPServer(('0.0.0.0', 80), H)", 'sock.bind(("::", 0))', 'host="0.0.0.0"']
    assert all(_ALL_INTERFACES.search(text) for text in [*bad, "ray start --head --dashboard-host=0.0.0.0"])
    assert not _ALL_INTERFACES.search('ThreadingHTTPServer(("127.0.0.1", 0), H)')
    sources = [
        path
        for folder in ("harness", "plugins", "tests", "bench", "docs")
        for path in (ROOT / folder).rglob("*")
        if path.suffix in (".py", ".md", ".sh", ".yaml") and ".venv" not in path.parts and path != Path(__file__)
    ]
    sources += [ROOT / "conftest.py", ROOT / "README.md"]
    found = [
        f"{path.relative_to(ROOT)}:{text[: m.start()].count(chr(10)) + 1}: {m.group(0)}"
        for path in sources
        for text in [path.read_text(encoding="utf-8", errors="replace")]
        for m in _ALL_INTERFACES.finditer(text)
    ]
    assert found == []


def test_the_test_servers_listen_on_loopback_only() -> None:
    from harness.testing import JSONHandler, hub_server, serve

    with serve(JSONHandler) as url:
        assert url.startswith("http://127.0.0.1:"), url
    with hub_server({}) as (hub, _):
        assert hub.startswith("http://127.0.0.1:"), hub
