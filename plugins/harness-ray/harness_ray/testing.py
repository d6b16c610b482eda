"""A Ray cluster of this machine, for tests and benchmarks of executors and of plugins on Ray::

    from harness_ray.testing import local_cluster

    with local_cluster(cpus=2) as address:          # `ray start --head` on 127.0.0.1
        harness.make_executor("ray", {"address": address})

The head runs with a temporary directory of its own (short: Ray's socket paths must fit in 107
bytes), which names every process it starts; leaving the block ends them by id, children first,
so nothing is left running and no other cluster on the machine is touched.

Every port it opens listens on loopback only: Ray turns ``--node-ip-address=127.0.0.1`` into the
machine's outward address (and then listens on all interfaces) unless
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (a single-node cluster) is in the head's environment,
which its workers inherit; a driver connecting to a loopback address sets it too
(:mod:`harness_ray.driver`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["LOOPBACK_ENV", "cluster_processes", "listening", "local_cluster", "processes_of"]

#: what keeps a Ray node on 127.0.0.1 (Ray otherwise swaps it for the machine's outward address)
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
#: the temp directory of each running cluster local_cluster started, by address
_TEMP_DIRS: dict[str, str] = {}


@contextmanager
def local_cluster(cpus: int = 2, env: dict[str, str] | None = None, timeout: float = 180) -> Iterator[str]:
    """Start a Ray head of ``cpus`` logical CPUs (so that many 1-CPU workers) on 127.0.0.1 only
    with ``env`` as its workers' environment (default: this process's, without ``RAY_ADDRESS``);
    yield its address; stop it."""
    temp_dir = tempfile.mkdtemp(prefix="hray", dir="/tmp")
    command = [
        str(Path(sys.executable).with_name("ray")),
        "start",
        "--head",
        "--port=0",
        f"--num-cpus={cpus}",
        "--include-dashboard=false",
        "--disable-usage-stats",
        "--node-ip-address=127.0.0.1",
        "--dashboard-host=127.0.0.1",  # Ray's default too; said here, in case a dashboard is turned on
        f"--temp-dir={temp_dir}",
    ]
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env = {**env, **LOOPBACK_ENV}
    address = None
    try:
        started = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        current = Path(temp_dir) / "ray_current_cluster"  # GCS's HOST:PORT (a single-node head prints none)
        if started.returncode != 0 or not current.is_file():
            raise RuntimeError(f"ray start failed:\n{started.stdout}{started.stderr}")
        address = current.read_text().strip()
        _TEMP_DIRS[address] = temp_dir
        yield address
    finally:
        _TEMP_DIRS.pop(address or "", None)
        _stop(processes_of(temp_dir))
        # the file `--address auto` reads, when it names this cluster
        current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
        if address is not None and current.exists() and address.rsplit(":", 1)[-1] in current.read_text():
            current.unlink()


def processes_of(marker: str) -> list[Any]:
    """The processes with ``marker`` in their command line (a cluster's temp directory)."""
    import psutil

    return [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.pid != os.getpid() and any(marker in part for part in p.info["cmdline"] or ())
    ]


def cluster_processes(address: str) -> list[Any]:
    """The processes of the cluster :func:`local_cluster` started at ``address`` (its head's and
    its workers': those it started, not a driver)."""
    return processes_of(_TEMP_DIRS[address])


def listening(processes: list[Any]) -> list[tuple[str, int, str]]:
    """``(address, port, process name)`` of every TCP socket that ``processes`` and their
    children listen on (to check that a cluster stays on loopback)."""
    import psutil

    family: dict[int, Any] = {}
    for root in processes:
        try:
            family.update({p.pid: p for p in [root, *root.children(recursive=True)]})
        except psutil.NoSuchProcess:
            pass
    found = []
    for connection in psutil.net_connections("tcp"):
        if connection.status == psutil.CONN_LISTEN and connection.pid in family:
            try:
                name = family[connection.pid].name()
            except psutil.NoSuchProcess:
                name = "?"
            found.append((connection.laddr.ip, connection.laddr.port, name))
    return found


def _stop(processes: list[Any]) -> None:
    import psutil

    everything = {}
    for root in processes:
        try:
            family = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            family = [root]
        everything.update({p.pid: p for p in family})
    for process in everything.values():
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(list(everything.values()), timeout=5)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
