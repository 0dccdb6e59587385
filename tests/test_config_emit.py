"""Writing a plan back in a framework's format: emit, read back, the same scenario; and the CLI's
--from and --emit end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trainplan.inputs.configs import EMIT_FORMATS, emit, reader, scenario_from_config
from trainplan.interfaces.cli.main import app
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import scenario_from_mapping
from trainplan.specs.stages import resolved_loss

FIXTURES = Path(__file__).parent / "fixtures" / "configs"
SUFFIX = {"yaml": ".yaml", "toml": ".toml", "json": ".json"}

PLANS: list[dict[str, Any]] = [
    # full fine-tune, FSDP / ZeRO-3 over 8 GPUs
    {
        "method": "full",
        "gpus": 8,
        "zero_stage": 3,
        "micro_batch": 2,
        "grad_accum": 4,
        "activation_checkpointing": "full",
        "optimizer": "adamw-fused",
        "precision": "bf16-mixed",
    },
    # LoRA on one GPU, pure bf16, no checkpointing, fused loss
    {
        "method": "lora",
        "micro_batch": 4,
        "grad_accum": 2,
        "activation_checkpointing": "none",
        "optimizer": "adamw-8bit",
        "precision": "bf16",
        "loss": "fused",
    },
    # QLoRA on 2 GPUs, ZeRO-2 with the optimizer on the CPU, offloaded checkpoints
    {
        "method": "qlora",
        "gpus": 2,
        "zero_stage": 2,
        "offload": "optimizer",
        "micro_batch": 1,
        "grad_accum": 16,
        "activation_checkpointing": "full",
        "activation_offload": True,
        "optimizer": "paged-adamw-8bit",
        "precision": "bf16",
    },
    # full, 16 GPUs with TP 2 and every model state on the CPU
    {
        "method": "full",
        "gpus": 16,
        "tensor_parallel": 2,
        "zero_stage": 3,
        "offload": "optimizer+params",
        "micro_batch": 1,
        "grad_accum": 8,
        "activation_checkpointing": "full",
        "optimizer": "adamw",
        "precision": "amp-bf16",
        "compile": True,
    },
    # torchtitan-style: op-level SAC, fp8, pipeline parallel
    {
        "method": "full",
        "gpus": 32,
        "tensor_parallel": 4,
        "pipeline_parallel": 2,
        "zero_stage": 3,
        "micro_batch": 2,
        "grad_accum": 2,
        "activation_checkpointing": "op",
        "optimizer": "adamw-fused",
        "precision": "fp8-torchao",
    },
]


def _not_written(notes: list[str]) -> set[str]:
    return {note.removeprefix("not written: ").split(" ", 1)[0] for note in notes}


@pytest.mark.parametrize("kind", sorted(EMIT_FORMATS))
@pytest.mark.parametrize("plan", range(len(PLANS)))
def test_emit_then_read_back_gives_the_same_scenario(tmp_path: Path, kind: str, plan: int) -> None:
    scenario = scenario_from_mapping({"model": "Llama-3.1-8B", **PLANS[plan]})
    module = reader(EMIT_FORMATS[kind])
    text, comments = emit(scenario, kind, ["trainplan plan: a test"])
    path = tmp_path / f"fragment{SUFFIX[module.SYNTAX]}"
    path.write_text(text)
    notes = [line for line in (comments or text.splitlines()) if "not written" in line]
    skipped = _not_written([note.lstrip("# ") for note in notes])
    back = scenario_from_mapping(scenario_from_config([path]).mapping)
    compared = [name for name in module.EMITS if name not in skipped]
    assert compared, "every field was left out"
    for name in compared:
        if name == "loss":  # unset means the stage's default: compare the loss that applies
            assert resolved_loss(back) == resolved_loss(scenario), (kind, text)
            continue
        assert getattr(back, name) == getattr(scenario, name), (kind, name, text)


def test_yaml_and_toml_fragments_carry_the_header() -> None:
    scenario = scenario_from_mapping({"model": "Llama-3.1-8B", **PLANS[0]})
    text, comments = emit(scenario, "torchtitan", ["trainplan plan: header line"])
    assert text.startswith("# trainplan plan: header line\n") and comments == []
    text, comments = emit(scenario, "deepspeed", ["trainplan plan: header line"])
    assert (
        json.loads(text)["zero_optimization"] == {"stage": 3} and comments[0] == "trainplan plan: header line"
    )
    with pytest.raises(InputError, match="allowed: axolotl"):
        emit(scenario, "megatron", [])


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_estimate_from_a_config_shows_where_each_field_came_from() -> None:
    result = invoke(
        "estimate", "--from", str(FIXTURES / "axolotl/llama3-lora-8b.yml"), "--micro-batch", "1", "--json"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["scenario"]["micro_batch"] == 1 and data["scenario"]["lora"]["rank"] == 32
    provenance = {item["field"]: item for item in data["config"]["provenance"]}
    assert provenance["micro_batch"]["setting"] == "given: flag or scenario file"
    assert provenance["lora.rank"]["setting"] == "axolotl lora_r"
    assert {"setting": "learning_rate", "reason": "irrelevant to memory and time"}.items() <= next(
        item for item in data["config"]["ignored"] if item["setting"] == "learning_rate"
    ).items()
    text = invoke("estimate", "--from", str(FIXTURES / "axolotl/llama3-lora-8b.yml"))
    assert "micro_batch = 2 (axolotl micro_batch_size, per GPU)" in text.output.replace("\n", " ")


def test_estimate_with_two_files_and_a_bad_one() -> None:
    ok = invoke(
        "estimate",
        "--from",
        str(FIXTURES / "hf/trl_sft_lora.yaml"),
        "--from",
        str(FIXTURES / "accelerate/fsdp_full_shard.yaml"),
        "--json",
    )
    assert ok.exit_code == 0, ok.output
    scenario = json.loads(ok.output)["scenario"]
    assert (scenario["gpus"], scenario["zero_stage"], scenario["precision"]) == (8, 3, "bf16-mixed")
    bad = CliRunner().invoke(
        app,
        [
            "estimate",
            "--from",
            str(FIXTURES / "deepspeed/zero2.json"),
            "--from",
            str(FIXTURES / "hf/fsdp_args.yaml"),
        ],
    )
    assert bad.exit_code == 2 and "both shard the model" in bad.output and "Traceback" not in bad.output


def test_plan_emit_writes_a_fragment_that_reads_back(tmp_path: Path) -> None:
    result = invoke(
        "plan",
        "--from",
        str(FIXTURES / "torchtune/8B_lora_single_device.yaml"),
        "--gpu-types",
        "H100-SXM",
        "--max-gpus",
        "8",
        "--emit",
        "torchtune",
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("# trainplan plan: Llama-3.1-8B, lora")
    (tmp_path / "plan.yaml").write_text(result.output)
    back = scenario_from_config([tmp_path / "plan.yaml"])
    assert back.files[0][1] == "torchtune" and back.mapping["micro_batch"] >= 1


def test_plan_from_config_is_the_flag_twin() -> None:
    """--from gives the same plan as typing the same fields as flags."""
    common = ["--gpu-types", "A100-80GB", "--max-gpus", "4", "--json"]
    from_file = json.loads(invoke("plan", "--from", str(FIXTURES / "deepspeed/zero2.json"), *common).output)
    flags = json.loads(
        invoke(
            "plan",
            "--recipe",
            "deepspeed",
            "--micro-batch",
            "4",
            "--grad-accum",
            "8",
            "--optimizer",
            "adamw-fused",
            "--precision",
            "bf16-mixed",
            "--zero-stage",
            "2",
            "--method",
            "lora",
            *common,
        ).output
    )
    assert from_file["plans"], from_file
    assert from_file["plans"][0]["scenario"] == flags["plans"][0]["scenario"]


@pytest.mark.parametrize(
    "kind", ["axolotl", "torchtune", "torchtitan", "llama-factory", "accelerate", "deepspeed"]
)
def test_plan_emit_searches_only_what_the_format_writes(kind: str) -> None:
    """Every plan `--emit FORMAT` ranks is one that format writes whole: its layout axes are the
    format's, and the winner's fragment names no layout setting it could not write."""
    from trainplan.engine.plan import plan
    from trainplan.engine.plan_request import request_from_options
    from trainplan.inputs.configs import emit, emit_axes
    from trainplan.specs.scenario import scenario_from_mapping

    base = scenario_from_mapping({"model": "Llama-3.1-70B", "method": "full"})
    options = {"methods": "full", "max_gpus": "64", "gpu_types": "H100-SXM", "top_k": "20"}
    request = request_from_options(base, {**options, "target_global_sequences": "64"})
    axes = emit_axes(kind)
    result = plan(request.narrowed(axes, f"a {kind} config"))
    assert result.plans, result.rejected
    for found in result.plans:
        values = {
            "tensor_parallel": found.scenario.tensor_parallel,
            "pipeline_parallel": found.scenario.pipeline_parallel,
            "context_parallel": found.scenario.context_parallel,
            "zero_stages": found.scenario.zero_stage,
            "checkpointing": found.scenario.activation_checkpointing,
            "offloads": found.scenario.offload,
            "methods": found.scenario.method,
        }
        assert all(values[name] in allowed for name, allowed in axes.items()), (kind, values)
        _, notes = emit(found.scenario, kind, [])
        layout = ("tensor_parallel", "pipeline_parallel", "context_parallel", "zero_stage", "offload")
        assert not [note for note in notes if note.startswith(tuple(f"not written: {n}" for n in layout))], (
            notes
        )
    # without --emit, the best plans use tensor and pipeline parallelism, which axolotl cannot write
    if kind == "axolotl":
        best = plan(request).plans[0].scenario
        assert best.tensor_parallel > 1 and best.pipeline_parallel > 1


def test_plan_emit_refuses_a_method_the_format_cannot_train() -> None:
    result = invoke(
        "plan", "--model", "Llama-3.1-8B", "--methods", "lora", "--max-gpus", "8", "--emit", "torchtitan"
    )
    assert result.exit_code == 2
    assert (
        "methods (--methods): a torchtitan config runs none of the methods searched (lora)" in result.output
    )


def test_a_dualpipev_plan_round_trips_through_torchtitan(tmp_path: Path) -> None:
    """torchtitan names the schedule DualPipeV (torch get_schedule_class) and runs it with 2
    stages a rank: written, then read back, the schedule and the chunks are the plan's."""
    plan = {
        "model": "Llama-3.1-8B", "method": "full", "gpus": 8, "pipeline_parallel": 4, "zero_stage": 3,
        "micro_batch": 1, "grad_accum": 8, "activation_checkpointing": "none",
        "pipeline_schedule": "dualpipev", "virtual_stages": 2,
    }  # fmt: skip
    text, _ = emit(scenario_from_mapping(plan), "torchtitan", ["trainplan plan: a test"])
    assert 'pipeline_parallel_schedule = "DualPipeV"' in text
    path = tmp_path / "job.toml"
    path.write_text(text)
    back = scenario_from_mapping(scenario_from_config([path]).mapping)
    assert (back.pipeline_schedule, back.virtual_stages, back.grad_accum) == ("dualpipev", 2, 8)
