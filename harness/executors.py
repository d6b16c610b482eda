"""Where work runs: in this process (the default), or on workers an executor plugin provides (Ray).

The harness does no scheduling of its own. It cuts work into items (shards of documents to
encode, of queries to search) and merges what comes back; placing items on workers, retrying
an item whose worker died, and starting the workers are the executor's. One call does it::

    for index, result in executor.map(factory, items, description="encode documents"):
        ...

``factory`` is a picklable zero-argument callable that builds the stateful worker — the model,
the built retriever — once per worker process; each item is then ``worker(item)``. Results come
back as ``(index, result)`` in the order items complete, so the caller writes each one (into a
content-keyed cache, the resume log) as it arrives and a killed run loses only unfinished items.

Executors come from plugins (``register_executors``; ``harness.make_executor`` finds one by name,
``harness.plugins.executors``); :class:`LocalExecutor` is built in: one
worker in this process, items in input order, and nothing else imported.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar, TypeVar

from harness.machine import resolve_device
from harness.options import Options, parse_options

Item = TypeVar("Item")
Result = TypeVar("Result")


class Limiter:
    """A bound on work in flight (API requests) shared by every worker of one executor: ``with
    limiter:`` holds one slot. This one is the in-process kind (a semaphore); a cluster
    executor hands out one that holds its slots cluster-wide."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._semaphore = threading.BoundedSemaphore(slots)

    def __enter__(self) -> Limiter:
        self._semaphore.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._semaphore.release()


class Executor(ABC):
    """Base class of executors. Subclass, set ``name``, declare ``Options``, implement ``map``.

    Class attributes:
        name: what users type (``--executor NAME``).
        local: whether work runs in this process (the runner then searches as it always has,
            and retrievers build for searching here).
        Options: the parameters (``--address``, ``--workers``, ...), validated into ``self.options``.
    """

    name: ClassVar[str]
    local: ClassVar[bool] = False
    Options: ClassVar[type[Options]] = Options

    def __init__(self, **params: Any) -> None:
        self.options = parse_options(type(self).Options, params, f"executor {getattr(self, 'name', '?')!r}")

    @abstractmethod
    def map(
        self,
        factory: Callable[[], Callable[[Item], Result]],
        items: Iterable[Item],
        *,
        description: str,
        num_gpus: float | None = None,
    ) -> Iterator[tuple[int, Result]]:
        """``worker(item)`` for every item, with ``worker = factory()`` built once per worker;
        yields ``(index, result)`` as items complete. ``num_gpus``: what each worker needs
        (None: the executor's own setting; 0 for work that needs none, such as API calls).
        A worker's :class:`HarnessError` reaches the caller as a ``HarnessError``; a failure of
        the executor itself (no cluster, a cluster that died) is one ``HarnessError`` saying so."""

    def worker_device(self, device: str) -> str:
        """The device workers run models on, given ``--device`` (``auto``, ``cpu``, ``cuda``)."""
        return resolve_device(device)

    def limiter(self, key: str, slots: int) -> Limiter:
        """A bound of ``slots`` shared by every worker that uses ``key`` (one API model's requests in flight)."""
        return Limiter(slots)

    def worker_executor(self) -> Executor:
        """The executor a worker's own builds get (picklable, ``local``): they map in the
        worker's process, and take this executor's limiters, so that a bound holds across workers."""
        return LocalExecutor()

    def describe(self) -> dict[str, Any]:
        """What rows record of where a run ran (not part of the configuration: results are identical)."""
        return {"name": self.name, **self.options.model_dump(mode="json")}

    def take_notes(self) -> list[str]:
        """What a run's results should say about how its work ran since the last call (workers
        that died and were restarted, so that some spending went unreported); emptied."""
        return []

    def close(self) -> None:  # noqa: B027
        """Release the workers (and the connection to a cluster)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalExecutor(Executor):
    """In this process: the worker built once, items in input order."""

    name = "local"
    local = True

    def map(
        self,
        factory: Callable[[], Callable[[Item], Result]],
        items: Iterable[Item],
        *,
        description: str,
        num_gpus: float | None = None,
    ) -> Iterator[tuple[int, Result]]:
        worker: Callable[[Item], Result] | None = None
        for index, item in enumerate(items):
            if worker is None:  # no items, no worker (no model loaded for nothing)
                worker = factory()
            yield index, worker(item)
