"""Work that outlives its budget is stopped: config readings and plan searches run in worker
processes, and a request that gets its 504 leaves no process running."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest
from conftest import run_async
from fastapi.testclient import TestClient

from trainplan.interfaces.web import routes
from trainplan.interfaces.web.app import create_app
from trainplan.interfaces.web.workers import Workers


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not running
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_job_past_its_budget_is_killed_and_the_next_gets_a_fresh_worker() -> None:
    workers = Workers(1, budget_s=0.5)

    async def scenario() -> tuple[list[int], float, tuple[int, bytes], list[int]]:
        started = time.perf_counter()
        task = asyncio.ensure_future(workers.run(time.sleep, 30))
        while not workers.pids():
            await asyncio.sleep(0.01)
        first = workers.pids()
        with pytest.raises(TimeoutError):
            await task
        elapsed = time.perf_counter() - started
        answer = await workers.run(max, [3, 1, 2])  # a builtin is a job like any other
        return first, elapsed, answer, workers.pids()

    try:
        first, elapsed, answer, after = run_async(scenario())
    finally:
        workers.close()
    assert elapsed < 5  # the budget, plus the worker's start
    assert not running(first[0])  # killed, not left sleeping
    assert answer == (200, b"3")
    assert after and after != first


def test_a_worker_past_its_memory_bound_is_replaced_after_answering() -> None:
    async def pids(workers: Workers) -> list[int]:
        return [int((await workers.run(os.getpid))[1]) for _ in range(2)]

    kept, recycled = Workers(1, budget_s=30), Workers(1, budget_s=30, recycle_bytes=0)
    try:
        same, fresh = run_async(pids(kept)), run_async(pids(recycled))
    finally:
        kept.close()
        recycled.close()
    assert same[0] == same[1]  # a worker is reused
    assert fresh[0] != fresh[1] and not running(fresh[0])  # past 0 bytes: replaced after its answer
    assert os.getpid() not in same + fresh


def test_a_user_error_in_a_worker_is_its_4xx(client: TestClient) -> None:
    response = client.post(
        "/api/config", json={"files": [{"name": "x.yml", "text": "micro_batch_size: 0\n"}]}
    )
    assert response.status_code == 422
    data = response.json()
    assert data["field"] and data["message"]


def test_a_config_reading_past_the_budget_is_a_504_that_leaves_nothing_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(routes, "COMPUTE_BUDGET_S", 0.001)  # no config is read in a millisecond
    app = create_app()
    text = "base_model: NousResearch/Meta-Llama-3.1-8B\nadapter: qlora\nload_in_4bit: true\n" + "".join(
        f"key_{i}: {i}\n" for i in range(5000)
    )
    with TestClient(app, base_url="http://localhost") as client:
        response = client.post("/api/config", json={"files": [{"name": "qlora.yml", "text": text}]})
        assert response.status_code == 504, response.text
        assert "took longer than" in response.json()["message"]
        assert app.state.workers.pids() == []  # the worker that ran it was killed
        monkeypatch.setattr(app.state.workers, "budget_s", 30.0)
        again = client.post("/api/config", json={"files": [{"name": "qlora.yml", "text": text}]})
    assert again.status_code == 200, again.text
    assert again.json()["scenario"]["method"] == "qlora"


def test_a_plan_search_runs_in_a_worker(client: TestClient) -> None:
    body = {"model": "GPT-2", "plan": {"max_gpus": 2, "gpu_types": "RTX-4090", "top_k": 1}}
    response = client.post("/api/plan", json=body)
    assert response.status_code == 200, response.text
    assert json.loads(response.content)["candidates_evaluated"] > 0
    assert client.app.state.workers.pids()  # type: ignore[attr-defined]
