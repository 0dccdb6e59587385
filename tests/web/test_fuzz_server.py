"""A seeded fuzz of a real `trainplan serve` process with what froze servers before: YAML alias,
mapping and merge-key bombs, nested bombs under any key, huge flat files, a 15,000-table TOML,
deep nesting, slow bodies and held connections (idle ones and unfinished headers), mixed with
normal estimates and plan searches, while a probe times `/healthz` throughout.

It holds: every request is answered (never a 5xx, never past its budget), `/healthz` answers
within 1 s at the 99th percentile the whole time, normal estimates within 2 s, and the server's
memory (its process and its workers) is back under 600 MB afterwards. `make test` runs it small;
`make bench` runs it large (FUZZ_SERVER_ROUNDS=400 FUZZ_SERVER_HELD=700).
"""

from __future__ import annotations

import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROUNDS = int(os.environ.get("FUZZ_SERVER_ROUNDS", "60"))
HELD = int(os.environ.get("FUZZ_SERVER_HELD", "200"))  # idle connections; a seventh of it unfinished
SEED = int(os.environ.get("FUZZ_SEED", "20261202"))
BUDGET_S = 15.0  # web/routes.py COMPUTE_BUDGET_S
ANSWER_WITHIN_S = BUDGET_S + 10  # the budget, a worker's start and a queue's wait
MEMORY_BOUND = 600 * 1024 * 1024


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[int, int]]:
    """`trainplan serve` in a process of its own: (pid, port)."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from trainplan.interfaces.cli.main import main; main()",
            "serve",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if get(port, "/healthz")[0] == 200:
                break
        except OSError:
            time.sleep(0.1)
    else:
        process.kill()
        raise RuntimeError("the server did not start")
    try:
        yield process.pid, port
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)  # it stops on SIGTERM, workers and all
        finally:
            process.kill()
            if process.stderr:
                process.stderr.close()


def get(port: int, path: str, timeout: float = 5) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path, headers={"Host": "localhost"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def post(port: int, path: str, body: bytes, timeout: float = ANSWER_WITHIN_S + 5) -> tuple[int, float]:
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", path, body, {"Host": "localhost", "Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        return response.status, time.perf_counter() - started
    finally:
        connection.close()


def alias_bomb(rng: random.Random) -> str:
    width = rng.randint(8, 12)
    lines = [f"a0: &a0 [{', '.join(['1'] * width)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, 9)]
    key = rng.choice(["micro_batch_size", "lora_r", "sequence_len", "datasets", "anything"])
    return "base_model: NousResearch/Meta-Llama-3.1-8B\n" + "\n".join(lines) + f"\n{key}: *a8\n"


def mapping_bomb(rng: random.Random) -> str:
    lines = ["m0: &m0 {a: 1, b: 1, c: 1, d: 1, e: 1, f: 1, g: 1, h: 1, i: 1}"]
    for level in range(1, 9):
        lines.append(f"m{level}: &m{level} {{" + ", ".join(f"k{j}: *m{level - 1}" for j in range(9)) + "}")
    key = rng.choice(["lora_r", "deepspeed", "fsdp_config", "zzz"])
    return "adapter: lora\n" + "\n".join(lines) + f"\n{key}: *m8\n"


def merge_bomb(rng: random.Random) -> str:
    lines = ["m0: &m0 {a: 1}"]
    lines += [f"m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * 9)}]}}" for i in range(1, 9)]
    return "micro_batch_size: 1\n" + "\n".join(lines) + "\n"


def huge_flat(rng: random.Random) -> str:
    """Thousands of keys: within the body limit (each read and listed as ignored), or past it."""
    keys = rng.choice([12_000, 30_000])
    head = "base_model: NousResearch/Meta-Llama-3.1-8B\nadapter: lora\nmicro_batch_size: 2\n"
    return head + "".join(f"k{i}: {i}\n" for i in range(keys))


def many_tables(rng: random.Random) -> str:
    head = '[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 1\nseq_len = 2048\n'
    return head + "".join(f"[t{i}]\na = 1\n" for i in range(15_000))


def deep(rng: random.Random) -> str:
    depth = rng.choice([65, 1000, 20_000])
    return "lora: " + "[" * depth + "]" * depth + "\n"


CONFIG_ATTACKS: dict[str, Callable[[random.Random], str]] = {
    "alias bomb": alias_bomb,
    "mapping bomb": mapping_bomb,
    "merge bomb": merge_bomb,
    "huge flat file": huge_flat,
    "15,000-table TOML": many_tables,
    "deep nesting": deep,
}
NORMAL_BODIES = [
    {"model": "Llama-3.1-8B", "method": "qlora", "micro_batch": 2, "seq_len": 4096},
    {"model": "Qwen2.5-0.5B"},
    {"model": "FLUX.1-dev", "method": "lora", "resolution": 512},
]


def attack(rng: random.Random) -> tuple[str, str, bytes]:
    """(kind, path, body) of one fuzzed request."""
    roll = rng.random()
    if roll < 0.55:
        kind = rng.choice(list(CONFIG_ATTACKS))
        name = "train.toml" if kind == "15,000-table TOML" else rng.choice(["qlora.yml", "config", "x.yaml"])
        files = [{"name": name, "text": CONFIG_ATTACKS[kind](rng)}]
        return kind, "/api/config", json.dumps({"files": files}).encode()
    if roll < 0.65:
        depth = rng.choice([65, 5_000, 60_000])
        return "deep JSON body", "/api/estimate", ("[" * depth + "]" * depth).encode()
    if roll < 0.8:
        body = {"model": "Qwen2.5-0.5B", "plan": {"max_gpus": rng.choice([1, 8, 64]), "methods": "any"}}
        return "plan search", "/api/plan", json.dumps(body).encode()
    return "normal estimate", "/api/estimate?hints=false", json.dumps(rng.choice(NORMAL_BODIES)).encode()


def slow_body(port: int) -> int:
    """A body that stops half-way: the server's 408 (its body deadline is 10 s)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            b"POST /api/config HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b'Content-Length: 5000\r\n\r\n{"files": [{"name": "x.yml", "text": "'
        )
        answer = sock.recv(4096)
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def hold(port: int, count: int) -> list[socket.socket]:
    """`count` connections that send nothing, and a seventh as many with unfinished headers."""
    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]
    for index in range(count // 7):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Unfinished-%d" % index)
        held.append(sock)
    return held


def tree_memory(pid: int) -> tuple[int, int]:
    """(resident bytes, proportional-share bytes) of process `pid` and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    rss = pss = 0
    stack = [pid]
    while stack:
        current = stack.pop()
        stack.extend(children.get(current, []))
        try:
            for line in Path(f"/proc/{current}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1]) * 1024
        except OSError:
            continue
    return rss, pss


@pytest.mark.slow
def test_hostile_inputs_never_stop_the_server(server: tuple[int, int]) -> None:
    pid, port = server
    rng = random.Random(SEED)
    health: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                status, _ = get(port, "/healthz", timeout=10)
                health.append(time.perf_counter() - started if status == 200 else 10.0)
            except OSError:
                health.append(10.0)
            time.sleep(0.05)

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    held = hold(port, HELD)
    statuses: Counter[tuple[str, int]] = Counter()
    slowest: dict[str, float] = {}
    normal: list[float] = []
    try:
        with ThreadPoolExecutor(max_workers=12) as pool:
            slow = [pool.submit(slow_body, port) for _ in range(3)]
            requests = [attack(rng) for _ in range(ROUNDS)]
            futures = [(kind, pool.submit(post, port, path, body)) for kind, path, body in requests]
            for kind, future in futures:
                status, elapsed = future.result()
                statuses[(kind, status)] += 1
                slowest[kind] = max(slowest.get(kind, 0.0), elapsed)
                if kind == "normal estimate" and status == 200:
                    normal.append(elapsed)
            slow_statuses = [future.result() for future in slow]
    finally:
        stop.set()
        prober.join(timeout=15)
        for sock in held:
            sock.close()
    summary = {f"{kind} {status}": count for (kind, status), count in sorted(statuses.items())}
    assert all(status < 500 or status == 503 for _, status in statuses), summary
    assert all(seconds < ANSWER_WITHIN_S for seconds in slowest.values()), slowest
    for kind in CONFIG_ATTACKS:  # every hostile file is refused with a clear 4xx (or read, if small)
        assert all(status in (200, 413, 422) for k, status in statuses if k == kind), summary
    assert slow_statuses == [408] * 3
    ordered = sorted(health)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    assert len(ordered) > 20 and p99 < 1.0, (p99, ordered[-5:])
    assert normal and max(normal) < 2.0, normal
    assert get(port, "/healthz")[0] == 200
    time.sleep(1.0)  # a worker that retired after a large search is gone
    rss, pss = tree_memory(pid)
    memory = f"RSS {rss / 2**20:.0f} MiB, PSS {pss / 2**20:.0f} MiB"
    print(f"\nserver fuzz: {summary}; /healthz p99 {p99 * 1e3:.0f} ms; {memory}")
    assert rss < MEMORY_BOUND, (rss, pss)
