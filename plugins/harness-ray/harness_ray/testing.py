"""A Ray cluster of this machine, for tests and benchmarks of executors and of plugins on Ray::

    from harness_ray.testing import local_cluster

    with local_cluster(cpus=2) as address:          # `ray start --head` on 127.0.0.1
        harness.make_executor("ray", {"address": address})

The head runs with a temporary directory of its own (short: Ray's socket paths must fit in 107
bytes), which names every process it starts; leaving the block ends them by id, children first,
so nothing is left running and no other cluster on the machine is touched.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["local_cluster", "processes_of"]


@contextmanager
def local_cluster(cpus: int = 2, env: dict[str, str] | None = None, timeout: float = 180) -> Iterator[str]:
    """Start a Ray head of ``cpus`` logical CPUs (so that many 1-CPU workers) on 127.0.0.1 with
    ``env`` as its workers' environment (default: this process's, without ``RAY_ADDRESS``);
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
        f"--temp-dir={temp_dir}",
    ]
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    address = None
    try:
        started = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        match = re.search(r"--address='([^']+)'", started.stdout + started.stderr)
        if started.returncode != 0 or match is None:
            raise RuntimeError(f"ray start failed:\n{started.stdout}{started.stderr}")
        address = match.group(1)
        yield address
    finally:
        _stop(processes_of(temp_dir))
        # the file `--address auto` reads, when it names this cluster
        current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
        if address is not None and current.exists() and address.rsplit(":", 1)[-1] in current.read_text():
            current.unlink()


def processes_of(marker: str) -> list[Any]:
    """The processes with ``marker`` in their command line (a cluster's temp directory)."""
    import psutil

    return [p for p in psutil.process_iter(["cmdline"]) if any(marker in part for part in p.info["cmdline"] or ())]


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
