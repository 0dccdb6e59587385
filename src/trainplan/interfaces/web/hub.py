"""Hub lookups for the server: few at once, a short time limit, and failures remembered.

A Hub id in a request means a network call that may hang. Those calls run on a small thread pool
of their own (never the pool that computes estimates), at most HUB_SLOTS at a time; a request that
finds every slot busy gets a 503 at once rather than queueing. A lookup that has not answered in
HUB_WAIT_S is a 504 (its thread finishes on its own, bounded by the client's own timeout). A name
that failed is answered from a negative cache for FAILURE_TTL_S, so repeated requests for a missing
or unreachable model cost nothing. Several requests for one name share one lookup.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from trainplan.interfaces.web.inputs import BodyError
from trainplan.specs.errors import TrainplanError
from trainplan.specs.model import ModelSpec

HUB_SLOTS = 4
HUB_WAIT_S = 8.0
FAILURE_TTL_S = 300.0
MAX_REMEMBERED = 1024


class HubLookups:
    """The server's Hub lookups; `fetch` turns a Hub id into a spec (or raises a TrainplanError),
    called as fetch(hub_id, True) for a forced reading of a refused architecture."""

    def __init__(
        self,
        fetch: Callable[..., ModelSpec],
        slots: int = HUB_SLOTS,
        wait_s: float = HUB_WAIT_S,
        failure_ttl_s: float = FAILURE_TTL_S,
    ) -> None:
        self._fetch = fetch
        self._slots = slots
        self._wait_s = wait_s
        self._failure_ttl_s = failure_ttl_s
        self._pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="hub")
        self._lock = threading.Lock()
        self._running: dict[tuple[str, bool], Future[ModelSpec]] = {}
        self._failures: dict[tuple[str, bool], tuple[float, TrainplanError]] = {}

    async def spec(self, hub_id: str, force: bool = False) -> ModelSpec:
        """The spec of `hub_id` (read under `force`): a cached failure is raised again, a busy
        server is a 503."""
        future = self._start((hub_id, force))
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), self._wait_s)
        except TimeoutError:
            raise BodyError(
                504, f"the Hub did not answer within {self._wait_s:.0f} s; try again later", field="model"
            ) from None

    def _start(self, key: tuple[str, bool]) -> Future[ModelSpec]:
        with self._lock:
            failed = self._failures.get(key)
            if failed is not None and time.monotonic() - failed[0] < self._failure_ttl_s:
                raise failed[1]
            running = self._running.get(key)
            if running is not None:
                return running
            if len(self._running) >= self._slots:
                raise BodyError(
                    503, f"{self._slots} Hub lookups are already in flight; try again shortly", field="model"
                )
            future = self._pool.submit(self._run, key)
            self._running[key] = future
            return future

    def _run(self, key: tuple[str, bool]) -> ModelSpec:
        hub_id, force = key
        try:
            spec = self._fetch(hub_id, True) if force else self._fetch(hub_id)
        except TrainplanError as error:
            with self._lock:
                if len(self._failures) >= MAX_REMEMBERED:
                    self._failures.clear()
                self._failures[key] = (time.monotonic(), error)
            raise
        finally:
            with self._lock:
                self._running.pop(key, None)
        return spec

    def close(self) -> None:
        """Stop accepting lookups (threads already waiting on the network finish by themselves)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
