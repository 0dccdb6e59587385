"""The pipeline schedules a scenario can name, and which of them run several chunks a GPU."""

from __future__ import annotations

PIPELINE_SCHEDULES = ("1f1b", "gpipe", "interleaved-1f1b", "zero-bubble", "zero-bubble-v", "dualpipev")
#: The schedules that place two model chunks a GPU in a V (torch's stage mapping style "v"), and
#: the torch class of each (torch/distributed/pipelining/schedules.py)
V_CLASSES = {"zero-bubble-v": "ScheduleZBVZeroBubble", "dualpipev": "ScheduleDualPipeV"}
V_SCHEDULES = tuple(V_CLASSES)
#: The schedules that run several model chunks a GPU (virtual_stages > 1)
MULTI_CHUNK_SCHEDULES = ("interleaved-1f1b", *V_SCHEDULES)
