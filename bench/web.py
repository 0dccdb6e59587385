"""`make bench` (web part): API latency under concurrent load and page load to first result.

Starts `trainplan serve` on a free loopback port in a subprocess, then
- sends POST /api/estimate from several concurrent clients for a few seconds (bounded in count
  and time), with and without hints, and prints p50/p99 latency and throughput;
- times the same work in process (what the server itself adds, without HTTP and the client);
- sends a few POST /api/plan requests one after another (small search spaces) and prints
  their latency with the number of candidates each searched;
- loads the page in headless Chromium (Debian's, when present) and prints the time from
  navigation start to the first rendered result.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
BODIES: list[dict[str, Any]] = [
    {"model": "Llama-3.1-8B"},
    {"model": "Llama-3.1-8B", "method": "qlora", "micro_batch": 2, "seq_len": 4096},
    {"model": "Llama-3.1-70B", "method": "full", "gpus": 64, "zero_stage": 3},
    {"model": "Qwen3-30B-A3B", "method": "lora", "lora": {"targets": "all-linear"}},
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_server(port: int) -> subprocess.Popen[bytes]:
    trainplan = str(Path(sys.executable).with_name("trainplan"))
    process = subprocess.Popen(
        [trainplan, "serve", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("server did not start")


async def load(base: str, query: str, clients: int, seconds: float, cap: int) -> tuple[list[float], float]:
    """`clients` concurrent loops for `seconds` (at most `cap` requests); latencies and wall time."""
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def worker(index: int, client: httpx.AsyncClient) -> None:
        turn = index
        while time.perf_counter() < stop and len(latencies) < cap:
            body = BODIES[turn % len(BODIES)]
            turn += 1
            start = time.perf_counter()
            response = await client.post(f"{base}/api/estimate{query}", json=body)
            latencies.append(time.perf_counter() - start)
            response.raise_for_status()

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        for body in BODIES:  # warm the catalogs and caches
            (await client.post(f"{base}/api/estimate{query}", json=body)).raise_for_status()
        begin = time.perf_counter()
        await asyncio.gather(*(worker(i, client) for i in range(clients)))
        return latencies, time.perf_counter() - begin


PLAN_BODIES: list[tuple[str, dict[str, Any]]] = [
    ("Qwen2.5-0.5B lora, max 8 GPUs", {"model": "Qwen2.5-0.5B", "plan": {"max_gpus": 8}}),
    ("Llama-3.1-8B lora, max 64 GPUs (default)", {"model": "Llama-3.1-8B", "plan": {}}),
    (
        "Llama-3.1-70B any method, max 16 GPUs",
        {"model": "Llama-3.1-70B", "plan": {"methods": "any", "objective": "cost", "max_gpus": 16}},
    ),
]


def plan_latency(base: str, repeats: int = 5) -> None:
    """POST /api/plan, one request at a time (the page sends one per click)."""
    with httpx.Client(timeout=60) as client:
        for label, body in PLAN_BODIES:
            client.post(f"{base}/api/plan", json=body).raise_for_status()  # warm
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                response = client.post(f"{base}/api/plan", json=body)
                times.append(time.perf_counter() - start)
                response.raise_for_status()
            searched = response.json()["candidates_evaluated"]
            name = f"POST /api/plan, {label}"
            print(
                f"{name:<60} median {statistics.median(times) * 1e3:7.0f} ms  max {max(times) * 1e3:7.0f} ms"
                f"  ({searched:,} candidates, {repeats} requests)"
            )


def percentile(ordered: list[float], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report_load(name: str, latencies: list[float], wall: float) -> None:
    ordered = sorted(latencies)
    p50, p99 = statistics.median(ordered) * 1e3, percentile(ordered, 0.99) * 1e3
    print(
        f"{name:<44} p50 {p50:7.2f} ms  p99 {p99:7.2f} ms"
        f"  {len(ordered) / wall:6.0f} req/s  ({len(ordered)} requests)"
    )


WRK_SCRIPT = """
local bodies = {%(bodies)s}
local fresh = %(fresh)s
local n = 0
function init(args)
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16) %% 100000)
end
function request()
  n = n + 1
  local body = bodies[(n %% #bodies) + 1]
  if fresh then
    body = '{"model":"Llama-3.1-8B","micro_batch":' .. math.random(1, 64) ..
           ',"seq_len":' .. math.random(256, 1000000) .. '}'
  end
  return wrk.format("POST", "%(path)s", {["Content-Type"] = "application/json"}, body)
end
"""


def wrk_load(base: str, query: str, clients: int, seconds: int, fresh: bool) -> str:
    """A run of wrk (a C load generator, so the client is not the bottleneck): req/s and
    p50/p99 latency. `fresh`: every body is new (no kept answer can serve it)."""
    if shutil.which("wrk") is None:
        return "skipped (wrk is absent: apt-get install wrk)"
    bodies = ", ".join("[[" + json.dumps(body) + "]]" for body in BODIES)
    script = WRK_SCRIPT % {
        "bodies": bodies,
        "fresh": "true" if fresh else "false",
        "path": f"/api/estimate{query}",
    }
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
    threads = min(clients, 2)
    command = ["wrk", f"-t{threads}", f"-c{clients}", f"-d{seconds}s", "--latency", "-s", handle.name, base]
    output = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 30).stdout
    Path(handle.name).unlink()
    rate = re.search(r"Requests/sec:\s+([\d.]+)", output)
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)", output)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", output)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    if not (rate and p50 and p99):
        return f"could not read wrk's output: {output[-300:]}"
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}
    return (
        f"p50 {float(p50[1]) * scale[p50[2]]:7.2f} ms  p99 {float(p99[1]) * scale[p99[2]]:7.2f} ms"
        f"  {float(rate[1]):6.0f} req/s" + (f"  ({errors[1]} non-2xx)" if errors else "")
    )


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident memory (VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def page_load(base: str, repeats: int = 5) -> list[float] | None:
    """Milliseconds from navigation start until the first result (figures and chart) is on screen,
    each in a fresh browser context (empty cache)."""
    if not CHROMIUM.exists():
        print("page load to first result: skipped (/usr/bin/chromium is absent)")
        return None
    from playwright.sync_api import sync_playwright

    args = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ]  # fmt: skip
    times: list[float] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=args)
        for _ in range(repeats + 1):
            context = browser.new_context()
            page = context.new_page()
            page.goto(f"{base}/?model=Llama-3.1-8B&method=qlora")
            page.wait_for_function("() => performance.getEntriesByName('trainplan:first-result').length > 0")
            mark = "performance.getEntriesByName('trainplan:first-result')[0].startTime"
            times.append(float(page.evaluate(mark)))
            context.close()
        browser.close()
    return times[1:]  # the first load warms the browser itself


def in_process(repeats: int = 300) -> None:
    """The server's own work per request (body to JSON text), without HTTP."""
    from trainplan.interfaces.web.inputs import engine_inputs
    from trainplan.interfaces.web.routes import estimate_payload, json_response

    for hints in (False, True):
        times = []
        for index in range(repeats):
            start = time.perf_counter()
            json_response(estimate_payload(engine_inputs(BODIES[index % len(BODIES)]), hints))
            times.append(time.perf_counter() - start)
        ordered = sorted(times)
        label = f"request handling in process, {'with' if hints else 'without'} hints"
        p50, p99 = statistics.median(ordered) * 1e3, percentile(ordered, 0.99) * 1e3
        print(f"{label:<44} p50 {p50:7.2f} ms  p99 {p99:7.2f} ms")


def main() -> None:
    in_process()
    port = free_port()
    server = start_server(port)
    base = f"http://127.0.0.1:{port}"
    try:
        for query, label in (("?hints=false", "without hints"), ("", "with hints (what the page asks)")):
            latencies, wall = asyncio.run(load(base, query, clients=8, seconds=3.0, cap=20000))
            report_load(f"POST /api/estimate, 8 clients, {label}", latencies, wall)
        for clients, fresh in ((8, False), (32, False), (8, True)):
            kind = "every body new" if fresh else "4 bodies repeated"
            label = f"wrk: POST /api/estimate with hints, {clients} connections, {kind}"
            print(f"{label:<72} {wrk_load(base, '', clients, 5, fresh)}")
        plan_latency(base)
        print(f"{'server peak memory (VmHWM), loads and plans':<72} {peak_rss_mib(server.pid):7.0f} MiB")
        times = page_load(base)
        if times:
            label = "page load to first result (figures + chart)"
            print(
                f"{label:<44} median {statistics.median(times):7.1f} ms  "
                f"max {max(times):7.1f} ms  ({len(times)} fresh loads)"
            )
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
