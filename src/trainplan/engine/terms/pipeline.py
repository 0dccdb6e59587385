"""Pipeline schedules: the micro-batches in flight on the busiest stage, and the bubble.

Each rank r of p holds its own count; the first holds the most, as it runs the most forwards
before its first backward. Counts are in micro-batches of one stage's activations (a chunk of an
interleaved stage holds 1 / v of them), read from torch 2.13 distributed/pipelining/schedules.py,
the schedules torchtitan's `pipeline_parallel_schedule` names:

- 1F1B (Schedule1F1B; Narayanan et al. 2021, sec. 2.2.1): rank r runs min(p - r, m) warm-up
  forwards ("last stage has 1 warmup, ... first stage num_stages"), then a backward before each
  forward.
- GPipe (ScheduleGPipe; Huang et al. 2019): every micro-batch's forward before any backward: m.
- Interleaved 1F1B (ScheduleInterleaved1F1B, `_get_warmup_ops`): rank r's warm-up is
  (v - 1) x m_round + 2 (p - 1 - r) chunk forwards (m_round = m / max(1, m // p) micro-batches
  a round), capped at m x v, and the steady state adds one forward before the first backward.
- Zero bubble ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", sec. 3.1): 1F1B's
  order with each backward split into its input and weight gradients, the weight gradients
  filling the bubble; the same peak memory as 1F1B (p - r micro-batches) and, with equal
  forward, input-gradient and weight-gradient times, a third of its bubble.
- ZB-V (ScheduleZBVZeroBubble; Qi et al. 2023, arXiv 2401.10241, sec. 6): 2 chunks a rank in
  a V (as DualPipeV below places them), the backward split into input and weight gradients; its
  action list holds min(2p, m + 1 + r, 2m) chunks on rank r at the peak (a chunk counted from
  its forward to its weight gradient), and run with equal forward, input- and weight-gradient
  times its bubble is max(p - 1, 2 (2p - 1 - m)) chunk steps: (p - 1) / (6 m) of the compute,
  half ZB-H1's, from m >= (3p - 1) / 2 micro-batches.
- DualPipeV (ScheduleDualPipeV, DeepSeek's DualPipe cut in half; DeepSeek-V3 report, arXiv
  2412.19437, sec. 3.2.1): 2 chunks a rank in a V (rank r holds chunks r and 2p - 1 - r, so rank
  0 holds the embedding and the head), forwards overlapped with backwards; its action list holds
  2p + 1 chunks on every rank at the peak (a chunk counted from its forward to its full or
  weight backward; (2p + 1) / 2 stage micro-batches), and with equal forward, input- and
  weight-gradient times and no overlap credit its bubble is 2 (p - 1) chunk steps, ZB-H1's
  (p - 1) / (3 m) (DeepSeek's (PP/2 - 1)(F&B + B - 3W) with PP = 2p stages, F&B = F + B).

Bubbles: (p - 1) / m of the compute for 1F1B and GPipe, / (m v) interleaved (Narayanan et al.
2021, sec. 2.2.2), / (3 m) for ZB-H1 and DualPipeV, ZB-V's as above.
"""

from __future__ import annotations

from typing import Any

from trainplan.engine.scalar_or_array import maximum, minimum, where

SCHEDULE_CODES = {
    "1f1b": 0,
    "gpipe": 1,
    "interleaved-1f1b": 2,
    "zero-bubble": 3,
    "dualpipev": 4,
    "zero-bubble-v": 5,
}


def interleaved_warmup(pipeline_parallel: Any, micro_batches: Any, virtual_stages: Any, rank: Any = 0) -> Any:
    """Rank `rank`'s warm-up forwards of interleaved 1F1B, in chunks (torch's
    `_get_warmup_ops`: microbatches_per_round = m // max(1, m // p), two more per hop from the
    last rank)."""
    rounds = maximum(micro_batches // pipeline_parallel, 1)
    per_round = micro_batches // rounds
    warmup = (virtual_stages - 1) * per_round + 2 * (pipeline_parallel - 1 - rank)
    return minimum(warmup, micro_batches * virtual_stages)


def pipeline_in_flight(
    schedule: Any, pipeline_parallel: Any, micro_batches: Any, virtual_stages: Any, rank: Any = 0
) -> Any:
    """Micro-batches of a stage's activations that pipeline rank `rank` (0: the first) holds at
    its peak (numbers or arrays)."""
    one_f_one_b = minimum(pipeline_parallel - rank, micro_batches)
    chunks = minimum(
        interleaved_warmup(pipeline_parallel, micro_batches, virtual_stages, rank) + 1,
        micro_batches * virtual_stages,
    )
    interleaved = chunks / virtual_stages
    dual = (2 * pipeline_parallel + 1) / 2
    zbv = minimum(minimum(2 * pipeline_parallel, micro_batches + 1 + rank), 2 * micro_batches) / 2
    held = where(
        schedule == 2, interleaved, where(schedule == 4, dual, where(schedule == 5, zbv, one_f_one_b))
    )
    return where(schedule == 1, micro_batches, held)


def head_rank(schedule: Any, pipeline_parallel: Any) -> Any:
    """The pipeline rank that runs the head and the loss: the last chunk's, which is the last
    rank's, but rank 0's in a V (DualPipeV, ZB-V)."""
    return where((schedule == 4) | (schedule == 5), 0, pipeline_parallel - 1)


def pipeline_bubble_seconds(
    compute: Any, pipeline_parallel: Any, micro_batches: Any, virtual_stages: Any = 1, schedule: Any = 0
) -> Any:
    """The bubble: (p - 1) / m of the ideal compute time for 1F1B and GPipe, / (m v) for
    interleaved 1F1B with v chunks a GPU, / (3 m) for ZB-H1 and DualPipeV, and for ZB-V
    max(p - 1, 2 (2p - 1 - m)) steps of a chunk's forward, a sixth of a micro-batch's compute."""
    divisor = where(schedule == 2, virtual_stages, where((schedule == 3) | (schedule == 4), 3, 1))
    steps = maximum(pipeline_parallel - 1, 2 * (2 * pipeline_parallel - 1 - micro_batches))
    zbv = compute * steps / (6 * micro_batches)
    return where(schedule == 5, zbv, compute * (pipeline_parallel - 1) / (micro_batches * divisor))
