"""The Ray driver: a child process of the harness that connects to the cluster and runs maps.

Messages from the harness: ``("map", factory, count, num_gpus, description)``, then items as
``("item", index, item)`` when asked for (``("more", n)``), and ``("exit",)``. Answers:
``("ready", cluster)`` or ``("error", message)`` once connected; per map, ``("result", index,
result)`` as items complete, then ``("done",)``, ``("error", message)`` or ``("raise", exception)``.

Workers are actors, one pool per GPU shape, kept for the driver's life: each builds the worker of
the map it serves once (``factory()``) and keeps the last one only (a GPU holds one model at a
time). Ray restarts an actor whose process died (``max_restarts``) and runs its item again
(``max_task_retries``); the harness is told (``("restarted", n)``: what a dead worker spent is
lost to the row's usage) and skips an index it already has.
"""

from __future__ import annotations

import gc
import logging
import os
import pickle
import signal
import sys
import tempfile
import uuid
from collections import deque
from pathlib import Path
from typing import Any


def no_cluster(address: str, detail: str) -> str:
    return (
        f"--executor ray: no Ray cluster reachable at --address {address} ({detail}). Start one on this machine "
        "with `ray start --head` (then --address auto finds it), or pass the cluster's address: --address HOST:6379 "
        "from a node of the cluster, --address ray://HOST:10001 from outside it"
    )


#: items the driver holds beyond those its workers run (so a free worker never waits on the pipe)
_AHEAD = 2


class Worker:
    """A Ray actor's body: the worker of the map it serves, built on its first item."""

    def __init__(self) -> None:
        self.key: str | None = None
        self.worker: Any = None

    def run(self, key: str, factory: Any, item: Any) -> Any:
        if key != self.key:
            self.key, self.worker = None, None
            gc.collect()
            torch = sys.modules.get("torch")
            if torch is not None and torch.cuda.is_available():
                torch.cuda.empty_cache()  # the last map's model leaves the GPU before the next one loads
            self.worker = factory()
            self.key = key
        return os.getpid(), self.worker(item)

    def pid(self) -> int:
        return os.getpid()


def serve(conn: Any, options: dict[str, Any], env: dict[str, str]) -> None:
    # Ctrl-C reaches this process too (one process group): the harness decides, and closes us
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    address = options["address"]
    if _on_loopback(address):
        # before Ray is imported (it reads this then): else Ray swaps 127.0.0.1 for the machine's
        # outward address, which a loopback-only head does not listen on
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        conn.send(("error", "--executor ray needs Ray, which is not installed: pip install 'stark-harness-ray'"))
        return
    try:
        ray.init(
            address=address,
            namespace="harness",
            runtime_env={"env_vars": env} if env else None,
            log_to_driver=False,
            logging_level=logging.ERROR,
        )
    except ConnectionError as exc:
        conn.send(("error", no_cluster(address, _first_line(exc))))
        return
    except Exception as exc:
        conn.send(("error", no_cluster(address, f"{type(exc).__name__}: {_first_line(exc)}")))
        return
    try:
        resources = ray.cluster_resources()
        cluster = {
            "address": ray.get_runtime_context().gcs_address,
            "ray": ray.__version__,
            "nodes": sum(1 for node in ray.nodes() if node.get("Alive")),
            "cpus": resources.get("CPU", 0),
            "gpus": resources.get("GPU", 0),
        }
        conn.send(("ready", cluster))
        Driver(ray, conn, options).loop()
    finally:
        ray.shutdown()


class Driver:
    def __init__(self, ray: Any, conn: Any, options: dict[str, Any]) -> None:
        self.ray, self.conn, self.options = ray, conn, options
        self.pools: dict[float, list[Any]] = {}
        #: the process id each actor last answered from: another one means Ray restarted it
        self.pids: dict[Any, int] = {}

    def loop(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                return  # the harness is gone
            if message[0] == "exit":
                return
            _, factory, count, num_gpus, description = message
            try:
                self.map(factory, count, num_gpus, description)
            except _Stop:
                return

    def pool(self, num_gpus: float) -> list[Any]:
        """The actors for workers holding ``num_gpus`` GPUs each, started on first use."""
        if num_gpus not in self.pools:
            o, ray = self.options, self.ray
            # one pool at a time: idle workers of another shape (CPU ones sized to every CPU)
            # would hold what this pool needs
            for actors in self.pools.values():
                for actor in actors:
                    ray.kill(actor)
            self.pools.clear()
            resources = ray.cluster_resources()
            if num_gpus:
                size = int(resources.get("GPU", 0) // num_gpus)
                if size == 0:
                    raise _Failure(
                        f"the Ray cluster has {resources.get('GPU', 0):g} GPUs, fewer than --num-gpus-per-worker "
                        f"{num_gpus:g}"
                    )
            else:
                size = max(1, int(resources.get("CPU", 1) // o["cpus_per_worker"]))
            if o["workers"]:
                size = o["workers"]
            actor = ray.remote(Worker).options(
                num_cpus=o["cpus_per_worker"],
                num_gpus=num_gpus,
                max_restarts=o["max_restarts"],
                max_task_retries=o["max_restarts"],
                max_concurrency=1,
            )
            actors = [actor.remote() for _ in range(size)]
            # a worker the cluster has no room for (another run holds its CPUs) would hold its
            # shards forever: the run goes on with those that start
            started = {actor.pid.remote(): actor for actor in actors}
            timeout = o["worker_start_timeout"]
            ready, waiting = ray.wait(list(started), num_returns=len(started), timeout=timeout)
            for ref in waiting:
                ray.kill(started[ref])
            if not ready:
                raise _Failure(
                    f"no Ray worker could start within {timeout:g} s (worker_start_timeout): the cluster's "
                    f"{'GPUs' if num_gpus else 'CPUs'} are taken (another run?), or the machine is too busy to "
                    "start one; see `ray status`"
                )
            self.pools[num_gpus] = [started[ref] for ref in ready]
            for ref in ready:
                self.pids[started[ref]._actor_id] = ray.get(ref)
        return self.pools[num_gpus]

    def map(self, factory: Any, count: int, num_gpus: float, description: str) -> None:
        ray = self.ray
        try:
            actors = self.pool(num_gpus)[:count]
        except _Failure as exc:
            self.conn.send(("error", str(exc)))
            return
        key = uuid.uuid4().hex
        ref = ray.put(factory)
        buffer: deque[tuple[int, Any]] = deque()
        asked = received = completed = 0
        idle, running = list(actors), {}

        def ask(n: int) -> None:
            nonlocal asked
            n = min(n, count - asked)
            if n > 0:
                self.conn.send(("more", n))
                asked += n

        def take() -> None:
            nonlocal received
            buffer.append(self._item())
            received += 1

        ask(len(actors) + _AHEAD)
        while completed < count:
            while received < asked and self.conn.poll(0):  # what has arrived, without waiting
                take()
            while idle and buffer:
                index, item = buffer.popleft()
                actor = idle.pop()
                running[actor.run.remote(key, ref, item)] = (index, actor)
                ask(1)
            if not running:
                take()  # every worker is free: wait for the next item
                continue
            # with a free worker and items on the way, look at the pipe again soon
            ready, _ = ray.wait(list(running), num_returns=1, timeout=0.05 if idle and received < asked else None)
            for done in ready:
                index, actor = running.pop(done)
                try:
                    result = ray.get(done)
                except Exception as exc:
                    self.conn.send(self._failure(exc, description))
                    while received < asked:  # the harness answers every ask before it reads the failure
                        take()
                    return
                pid, result = result
                if self.pids.get(actor._actor_id, pid) != pid:
                    self.conn.send(("restarted", 1))  # its earlier process died (and what it spent with it)
                self.pids[actor._actor_id] = pid
                self.conn.send(("result", index, result))
                completed += 1
                idle.append(actor)
        self.conn.send(("done",))

    def _item(self) -> tuple[int, Any]:
        try:
            message = self.conn.recv()
        except (EOFError, OSError):
            raise _Stop from None
        if message[0] != "item":
            raise _Stop
        return message[1], message[2]

    def _failure(self, exc: BaseException, description: str) -> tuple[str, Any]:
        """What a failed item tells the harness: a worker's own error as it was raised there
        (a ``HarnessError`` keeps its one message), a worker that kept dying, a cluster gone."""
        ray = self.ray
        if isinstance(exc, ray.exceptions.RayTaskError):
            cause = exc.cause
            from harness import HarnessError

            if isinstance(cause, HarnessError):
                return ("error", str(cause))
            if cause is not None:
                try:
                    pickle.dumps(cause)
                    return ("raise", cause)
                except Exception:
                    return ("error", f"{description}: {type(cause).__name__}: {_first_line(cause)}")
        if isinstance(exc, ray.exceptions.RayActorError):
            return (
                "error",
                f"{description}: a Ray worker died and was restarted {self.options['max_restarts']} times without "
                f"finishing its shard (last: {_first_line(exc)}); what finished is kept",
            )
        return ("error", f"{description}: the Ray cluster failed ({type(exc).__name__}: {_first_line(exc)})")


class _Failure(Exception):
    pass


class _Stop(Exception):
    """The harness went away or ended the map."""


def _on_loopback(address: str) -> bool:
    """Whether ``address`` (``auto``: ``$RAY_ADDRESS``, else the cluster `ray start` last started
    here) is a head on 127.0.0.1, ``localhost`` or ::1."""
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS", "")
        current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
        if not address and current.is_file():
            address = current.read_text().strip()
    host = address.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
