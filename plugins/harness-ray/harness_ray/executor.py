"""``--executor ray``: the harness's side of the Ray executor.

Ray's driver runs in a child process (:mod:`harness_ray.driver`): when a Ray cluster dies, Ray
ends its driver's process at once, and here that is the child, not the harness. The harness
sees the child go and says so in one error; the resume log and the caches keep what finished.
Items go to the child a few at a time (as workers take them), results come back as they complete.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import pickle
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from pydantic import Field

import harness
from harness_ray.driver import no_cluster, serve

Item = TypeVar("Item")
Result = TypeVar("Result")

INSTALL = "pip install 'stark-harness-ray'"
#: what the workers need of this process's environment: which plugins load, where the hub is
#: (API keys are not sent: set them where the workers run, as for `ray start`)
FORWARDED = (
    "HARNESS_PLUGINS",
    "HARNESS_PLUGINS_DIR",
    "HF_HUB_OFFLINE",
    "HF_ENDPOINT",
    "HF_HOME",
    "TRANSFORMERS_OFFLINE",
)
#: seconds between checks that the driver process still runs while waiting for a result
_POLL = 0.5


def _seconds_from_env(name: str, default: float) -> float:
    """``$name`` as seconds, else ``default``; anything else is one error naming the variable."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return float(value)
    except ValueError:
        raise harness.HarnessError(f"${name}={value!r} is not a number of seconds") from None


class RayExecutor(harness.Executor):
    """Work on a Ray cluster's workers: actors holding the worker a factory builds (a model, a
    built retriever), restarted and their item retried when a worker process dies."""

    name = "ray"

    class Options(harness.Options):
        address: str = Field(
            "auto",
            description="the cluster: auto (the one `ray start` started on this machine, or $RAY_ADDRESS), "
            "HOST:PORT, or ray://HOST:PORT (Ray Client)",
        )
        num_gpus_per_worker: float = Field(
            0, ge=0, description="GPUs each worker holds (0: CPU workers); workers then encode on cuda"
        )
        workers: int | None = Field(
            None,
            gt=0,
            description="worker processes (default: the cluster's CPUs / cpus_per_worker, or its GPUs / "
            "num_gpus_per_worker)",
        )
        cpus_per_worker: float = Field(1, gt=0, description="CPUs each worker holds (its torch threads)")
        max_restarts: int = Field(
            3, ge=0, description="times a worker that died is restarted, its item run again, before the run fails"
        )
        connect_timeout: float = Field(60.0, gt=0, description="seconds to wait for the cluster to answer")
        worker_start_timeout: float = Field(
            default_factory=lambda: _seconds_from_env("HARNESS_RAY_WORKER_START_TIMEOUT", 120.0),
            gt=0,
            description="seconds to wait for the workers of a map to start, the run going on with those that did "
            "(default: $HARNESS_RAY_WORKER_START_TIMEOUT, else 120; a busy machine starts them slowly)",
        )

    options: Options

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if importlib.util.find_spec("ray") is None:
            raise harness.HarnessError(f"--executor ray needs Ray, which is not installed: {INSTALL}")
        self._process: Any = None
        self._conn: Any = None
        self._sender: _Sender | None = None
        self.cluster: dict[str, Any] = {}
        #: workers Ray restarted after their process died, since the last take_notes()
        self.restarted = 0

    # -- the driver process ------------------------------------------------------------
    def _start(self) -> None:
        if self._process is not None and self._process.is_alive():
            return
        context = multiprocessing.get_context("spawn")  # no fork of a process holding threads and models
        ours, theirs = context.Pipe()
        env = {name: os.environ[name] for name in FORWARDED if name in os.environ}
        options = self.options.model_dump()
        process = context.Process(target=serve, args=(theirs, options, env), name="harness-ray-driver", daemon=True)
        process.start()
        theirs.close()
        self._process, self._conn = process, ours
        message = self._receive("connecting", timeout=self.options.connect_timeout)
        if message is None:
            self.close(wait=0)  # still trying to connect: nothing to finish
            raise harness.HarnessError(
                no_cluster(self.options.address, f"no answer in {self.options.connect_timeout:g} s")
            )
        if message[0] == "error":
            self.close()
            raise harness.HarnessError(message[1])
        self.cluster = message[1]

    def _receive(self, what: str, timeout: float | None = None) -> Any:
        """The driver's next message; None after ``timeout``; one error if the driver is gone."""
        waited = 0.0
        while True:
            try:
                if self._conn.poll(_POLL) or (not self._process.is_alive() and self._conn.poll(0)):
                    return self._conn.recv()
            except (EOFError, OSError):
                pass
            else:
                if self._sender is not None and self._sender.error:
                    raise harness.HarnessError(f"{what}: {self._sender.error}")
                if self._process.is_alive():
                    waited += _POLL
                    if timeout is not None and waited >= timeout:
                        return None
                    continue
            self._process.join(5)
            code = self._process.exitcode
            self._process = self._conn = None
            if what == "connecting":
                raise harness.HarnessError(no_cluster(self.options.address, f"Ray's driver ended, exit status {code}"))
            raise harness.HarnessError(
                f"the Ray cluster at {self.cluster.get('address') or self.options.address} went away while "
                f"{what} (Ray ended its driver, exit status {code}). What finished is kept (the run's resume log, "
                "the caches): start the cluster again (`ray start --head`) and run the same command to go on"
            )

    def close(self, wait: float = 30) -> None:
        """Stop the driver: its workers go with it (Ray ends the actors a driver owns)."""
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if process is None:
            return
        if self._sender is None or not self._sender.is_alive():  # else a write is under way: no message between
            try:
                conn.send(("exit",))
            except (OSError, ValueError):
                pass
            process.join(wait)
        if process.is_alive():
            process.kill()
            process.join(5)
        conn.close()

    # -- the executor interface ----------------------------------------------------------
    def map(
        self,
        factory: Callable[[], Callable[[Item], Result]],
        items: Iterable[Item],
        *,
        description: str,
        num_gpus: float | None = None,
    ) -> Iterator[tuple[int, Result]]:
        items = list(items)
        if not items:
            return
        self._start()
        gpus = self.options.num_gpus_per_worker if num_gpus is None else num_gpus
        try:
            self._conn.send(("map", factory, len(items), gpus, description))
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise harness.HarnessError(f"{description}: the work cannot be sent to Ray workers ({exc})") from exc
        # items go out from a thread of their own: a large item written while the driver writes a
        # large result would otherwise leave both processes waiting for the other to read
        self._sender = sender = _Sender(self._conn, items)
        sender.start()
        finished = False
        seen: set[int] = set()
        try:
            while True:
                message = self._receive(description)
                kind = message[0]
                if kind == "more":  # the driver has room for more items
                    sender.requests.put(message[1])
                elif kind == "restarted":
                    self.restarted += message[1]
                elif kind == "result":
                    if message[1] not in seen:  # an item delivered twice counts once
                        seen.add(message[1])
                        yield message[1], message[2]
                elif kind == "done":
                    finished = True
                    return
                elif kind == "raise":
                    finished = True
                    raise message[1]
                else:
                    finished = True
                    raise harness.HarnessError(message[1])
        finally:
            sender.requests.put(None)
            sender.join(5)
            if not finished and self._process is not None:
                # left midway (an error here, Ctrl-C): the driver may be writing a result nobody
                # reads, so it is stopped at once; its workers stop with it
                self.close(wait=0)
            if not sender.is_alive():  # else close() must not write between its messages
                self._sender = None

    def take_notes(self) -> list[str]:
        restarted, self.restarted = self.restarted, 0
        if not restarted:
            return []
        return [
            f"{restarted} Ray worker(s) died mid-shard and were restarted, their shards run again (no query lost "
            "or counted twice); what they spent before dying (LLM calls, API requests) is not in the usage"
        ]

    def worker_device(self, device: str) -> str:
        gpus = self.options.num_gpus_per_worker
        if device == "cuda" and not gpus:
            raise harness.HarnessError(
                "--device cuda with --executor ray: give the GPUs each worker holds (--num-gpus-per-worker 1)"
            )
        if device == "cpu" and gpus:
            raise harness.HarnessError(
                "--device cpu with --num-gpus-per-worker: workers would hold GPUs they never use"
            )
        if device not in ("auto", "cpu", "cuda"):
            raise harness.HarnessError(f"--device must be auto, cpu or cuda, not {device!r}")
        return "cuda" if gpus else "cpu"

    def limiter(self, key: str, slots: int) -> harness.Limiter:
        from harness_ray.limiter import RayLimiter

        return RayLimiter(key, slots)

    def worker_executor(self) -> harness.Executor:
        return RayWorkerExecutor()

    def describe(self) -> dict[str, Any]:
        described = super().describe()
        described.pop("connect_timeout", None)
        described.pop("worker_start_timeout", None)  # waiting longer changes no result
        if self.cluster:
            described["cluster"] = {k: v for k, v in self.cluster.items() if k != "address"}
        return described


class RayWorkerExecutor(harness.LocalExecutor):
    """What a build on a Ray worker gets: maps in the worker's own process, and the cluster's
    limiters (an API encoder on every worker shares one bound on requests in flight)."""

    name = "ray-worker"

    def limiter(self, key: str, slots: int) -> harness.Limiter:
        from harness_ray.limiter import RayLimiter

        return RayLimiter(key, slots)


class _Sender(threading.Thread):
    """Writes items to the driver as it asks for them (``requests``: how many more; None: stop)."""

    def __init__(self, conn: Any, items: list[Any]) -> None:
        super().__init__(name="harness-ray-items", daemon=True)
        self.conn, self.items, self.sent = conn, items, 0
        self.requests: queue.Queue[int | None] = queue.Queue()
        self.error: str | None = None

    def run(self) -> None:
        while (count := self.requests.get()) is not None:
            try:
                for _ in range(min(count, len(self.items) - self.sent)):
                    self.conn.send(("item", self.sent, self.items[self.sent]))
                    self.sent += 1
            except (OSError, ValueError):
                return  # the driver is gone: the harness's side says so
            except Exception as exc:  # an item that cannot be pickled
                self.error = f"item {self.sent} cannot be sent to Ray workers ({type(exc).__name__}: {exc})"
                return
