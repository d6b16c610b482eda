"""A cluster-wide bound on API requests in flight: one named Ray actor holds the slots.

An API encoder on each of N workers with ``concurrency: 4`` would otherwise send 4 × N requests at
once; the provider's limits are per key, not per process. The actor is a token bucket whose
tokens come back when a request ends (``with limiter:``), so at most ``slots`` requests are in
flight across the cluster. A slot is a lease: one held by a worker that died returns after
``lease`` seconds. Outside a Ray worker (no Ray connection) the bound is this process's own.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import harness


class Slots:
    """The actor: ``slots`` leases, handed out in order of asking."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.leases: dict[str, float] = {}
        self.changed = asyncio.Condition()

    def _expire(self) -> None:
        now = time.monotonic()
        for token in [t for t, until in self.leases.items() if until < now]:
            del self.leases[token]

    async def acquire(self, lease: float) -> str:
        async with self.changed:
            while True:
                self._expire()
                if len(self.leases) < self.slots:
                    token = uuid.uuid4().hex
                    self.leases[token] = time.monotonic() + lease
                    return token
                try:  # woken by a release, or in a second to expire a dead worker's lease
                    await asyncio.wait_for(self.changed.wait(), timeout=1.0)
                except TimeoutError:
                    pass

    async def release(self, token: str) -> None:
        async with self.changed:
            self.leases.pop(token, None)
            self.changed.notify()

    async def in_flight(self) -> int:
        self._expire()
        return len(self.leases)


class RayLimiter(harness.Limiter):
    """``with limiter:`` holds one of the cluster's ``slots`` for ``key`` while the block runs."""

    def __init__(self, key: str, slots: int, lease: float = 600.0) -> None:
        super().__init__(slots)
        self.key, self.lease = key, lease
        self._actor: Any = None
        self._tokens = threading.local()

    def __getstate__(self) -> dict[str, Any]:  # a handle goes to the workers; each finds the actor itself
        return {"key": self.key, "slots": self.slots, "lease": self.lease}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["key"], state["slots"], state["lease"])  # type: ignore[misc]

    def _handle(self) -> Any:
        import ray

        if not ray.is_initialized():
            return None
        if self._actor is None:
            # detached: runs of several drivers share it (a provider's limit is per key); no CPU of its own
            self._actor = (
                ray.remote(Slots)
                .options(
                    name=f"harness-limiter-{self.key}-{self.slots}",
                    namespace="harness",
                    get_if_exists=True,
                    lifetime="detached",
                    num_cpus=0,
                    max_concurrency=1000,
                )
                .remote(self.slots)
            )
        return self._actor

    def __enter__(self) -> RayLimiter:
        actor = self._handle()
        if actor is None:
            return super().__enter__()  # type: ignore[return-value]
        import ray

        self._tokens.value = ray.get(actor.acquire.remote(self.lease))
        return self

    def __exit__(self, *exc: object) -> None:
        token = getattr(self._tokens, "value", None)
        if token is None:
            super().__exit__(*exc)
            return
        self._tokens.value = None
        self._handle().release.remote(token)
