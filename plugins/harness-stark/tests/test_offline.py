"""STaRK without network: one quick probe of the hub per process, then one clear error per run,
before anything loads, without the hub library's half minute of retries per file."""

from __future__ import annotations

import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _harness(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    environ = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HARNESS_VERBOSE")}
    started = time.perf_counter()
    result = subprocess.run(
        [str(Path(sys.executable).with_name("harness")), *args],  # the command a user runs
        capture_output=True,
        text=True,
        env={**environ, **env},
        timeout=300,
    )
    return result, time.perf_counter() - started


def _env(tmp_path: Path, endpoint: str) -> dict[str, str]:
    return {
        "HF_ENDPOINT": endpoint,
        "HF_HOME": str(tmp_path / "hf"),
        "HARNESS_CACHE": str(tmp_path / "cache"),
        "STARK_DATA_DIR": "",
        "COLUMNS": "400",  # one line per message
    }


@pytest.fixture
def closed_port() -> str:
    """An endpoint nothing listens on: connections are refused, as with no network."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class _Hangup(socketserver.BaseRequestHandler):
    """Accepts a connection and closes it unanswered (a broken proxy, a captive portal)."""

    connections: list[int]

    def handle(self) -> None:
        self.connections.append(1)


@pytest.fixture
def counting_endpoint() -> Iterator[tuple[str, list[int]]]:
    connections: list[int] = []
    handler = type("Hangup", (_Hangup,), {"connections": connections})
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", connections
    server.shutdown()
    server.server_close()


def test_a_run_without_network_fails_at_once_with_where_to_put_the_files(tmp_path: Path, closed_port: str) -> None:
    result, seconds = _harness(["run", "-r", "bm25-stark", "-d", "stark-prime"], _env(tmp_path, closed_port))
    assert result.returncode == 2, result.stderr
    err = result.stderr.strip()
    assert err.startswith(
        "error: cannot get qa/prime/stark_qa/stark_qa.csv from the Hugging Face hub (snap-stanford/stark, "
        f"repo type dataset): {closed_port} cannot be reached"
    ), err
    for needed in ("--data-dir DIR", "STARK_DATA_DIR=DIR", "qa/<name>/split/{train,val,test}.index", "processed.zip"):
        assert needed in err
    assert "Retrying" not in result.stderr and "Traceback" not in result.stderr
    assert len(err.splitlines()) == 1, err
    # the hub library retries a refused connection for about 25 s per file (1+2+4+8+8 s of backoff)
    assert seconds < 15, seconds
    assert "running" not in result.stdout + result.stderr  # reported before the run started


def test_all_probes_the_hub_once_and_reports_every_stark_run_as_cannot_run(
    tmp_path: Path, counting_endpoint: tuple[str, list[int]]
) -> None:
    endpoint, connections = counting_endpoint
    result, seconds = _harness(["run", "--all", "--dry-run"], _env(tmp_path, endpoint))
    assert result.returncode == 2, result.stderr
    # one line per reason (a dataset's file), naming the runs it stops
    lines = result.stderr.splitlines()
    assert lines[0] == "error: 6 of 10 runs cannot run:"  # debian and debian-v1 (val, test) can
    stopped = [line.strip().split(": ", 1) for line in lines[1:]]
    assert [runs for runs, _ in stopped] == [
        f"stark-{name}/test, stark-{name}/human-generated" for name in ("amazon", "mag", "prime")
    ]
    assert all(f"{endpoint} cannot be reached" in reason for _, reason in stopped)
    assert "would run bm25 on debian/test" in result.stdout  # the runs that can run still do
    assert len(connections) == 1  # one probe for six runs
    assert seconds < 15, seconds


def test_hf_hub_offline_skips_the_probe(tmp_path: Path, counting_endpoint: tuple[str, list[int]]) -> None:
    endpoint, connections = counting_endpoint
    env = {**_env(tmp_path, endpoint), "HF_HUB_OFFLINE": "1"}
    result, _ = _harness(["run", "-r", "bm25-stark", "-d", "stark-mag", "-s", "human-generated"], env)
    assert result.returncode == 2
    assert "qa/mag/stark_qa/stark_qa.csv from the Hugging Face hub" in result.stderr
    assert "HF_HUB_OFFLINE is set" in result.stderr
    assert connections == []


def test_a_mistyped_split_is_named_even_offline(tmp_path: Path, closed_port: str) -> None:
    result, _ = _harness(["run", "-d", "stark-prime", "-s", "validation"], _env(tmp_path, closed_port))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: dataset 'stark-prime' has no split 'validation' (did you mean 'val'?); "
        "its splits: train, val, test, test-0.1, human-generated"
    )
