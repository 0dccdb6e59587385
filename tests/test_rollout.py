"""GRPO's rollout: the engine's memory and time, hand-computed from the models' configs, vLLM's
and TRL's defaults, and the rules on the rollout fields.

Model shapes are from each model's config.json on the Hub (Qwen/Qwen2.5-1.5B:
num_hidden_layers 28, num_key_value_heads 2, hidden_size 1536, num_attention_heads 12 (head_dim
128), intermediate_size 8960, vocab_size 151936; meta-llama/Llama-3.1-8B: 32 layers, 8 KV heads
of 128; deepseek-ai/DeepSeek-V3: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64). TRL's
defaults are TRL 1.16.0's (trl/trainer/grpo_config.py, trl/generation/vllm_generation.py).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from trainplan import InputError, estimate
from trainplan.engine.terms.rollout import kv_bytes_per_token
from trainplan.inputs.catalogs.gpus import find_gpu
from trainplan.inputs.resolve import resolve_model
from trainplan.specs.rollout import rollout_data

QWEN = "Qwen2.5-1.5B"
GRPO: dict[str, Any] = {"model": QWEN, "stage": "grpo", "micro_batch": 8, "grad_accum": 1, "seq_len": 1024}
VLLM: dict[str, Any] = {**GRPO, "rollout_engine": "vllm", "gpu": "H100 SXM"}
H100 = find_gpu("H100 SXM")


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # 28 layers x 2 KV heads x (128 key + 128 value) x 2 bytes
        (QWEN, 28 * 2 * 256 * 2),
        # 32 x 8 x 256 x 2 = 128 KiB, vLLM's figure for Llama-3-8B in bf16
        ("Llama-3.1-8B", 128 * 1024),
        # MLA: vLLM caches the 512-wide latent and the 64-wide rope key of each of 61 layers
        ("DeepSeek-V3", 61 * (512 + 64) * 2),
    ],
)
def test_kv_cache_bytes_per_token(model: str, expected: int) -> None:
    assert kv_bytes_per_token(resolve_model(model, False, None), 2) == expected


def _rollout(result: Any) -> dict[str, Any]:
    rollout: dict[str, Any] = result.to_dict()["memory"]["rollout"]
    return rollout


def test_colocated_vllm_budget_and_its_split() -> None:
    """TRL's colocated engine takes 0.3 of the GPU (vllm_gpu_memory_utilization); its weights are
    the merged base in bf16; the profiling forward runs TRL's 4,096 batched tokens through the
    gated MLP (3 x 8,960) and four hidden-wide tensors in bf16, and the sampler's fp32 logits and
    probabilities over max_num_seqs = 8 x 1 x 1 sequences; the KV cache is the rest."""
    result = estimate(VLLM)
    engine = _rollout(result)["engine_memory"]
    budget = 0.3 * H100.memory_bytes
    assert engine["budget_bytes"] == pytest.approx(budget, rel=1e-12)
    params = result.params
    assert engine["weights_bytes"] == (params.total - params.lora) * 2
    activations = 4096 * (3 * 8960 + 4 * 1536) * 2 + 8 * 151936 * 4 * 2
    assert engine["activations_bytes"] == activations == 280_256_512
    kv = budget - engine["weights_bytes"] - activations
    assert engine["kv_cache_bytes"] == pytest.approx(kv, rel=1e-12)
    assert engine["kv_tokens"] == pytest.approx(kv / 28_672, rel=1e-12)
    # one sequence of 1,024 tokens is 64 blocks of 16
    assert engine["max_sequences"] == math.floor(kv / 28_672 / 1024)
    assert engine["max_num_seqs"] == 8 and engine["concurrent_sequences"] == 8 and engine["waves"] == 1
    assert engine["problem"] is None


def test_colocated_engine_is_resident_in_every_round_unless_it_sleeps() -> None:
    awake = _rollout(estimate(VLLM))
    budget = awake["engine_memory"]["budget_bytes"]
    assert {name: item["engine_bytes"] for name, item in awake["rounds"].items()} == {
        "rollout": budget,
        "scoring": budget,
        "training": budget,
    }
    asleep = estimate({**VLLM, "rollout_sleep": True})
    rounds = _rollout(asleep)["rounds"]
    assert rounds["rollout"]["engine_bytes"] == budget
    assert rounds["scoring"]["engine_bytes"] == rounds["training"]["engine_bytes"] == 0
    # asleep, the training round holds the trainer alone: as the same step with transformers'
    # generate, whose caches are gone by then
    alone = estimate({**GRPO, "gpu": "H100 SXM"})
    assert rounds["training"]["total_bytes"] == pytest.approx(
        _rollout(alone)["rounds"]["training"]["total_bytes"], rel=1e-12
    )
    # and the peak is the larger round
    assert asleep.total_bytes == max(item["total_bytes"] for item in rounds.values())


def test_each_catalog_gpu_is_fitted_with_its_own_engine_share() -> None:
    """A colocated engine takes 0.3 of whichever GPU it runs on: on every row of the fit table
    the trainer's part stays and the engine's share is that GPU's."""
    result = estimate(VLLM)
    budget = _rollout(result)["engine_memory"]["budget_bytes"]
    trainer = result.total_bytes - budget
    engine = _rollout(result)["engine_memory"]
    # vLLM starts where its share holds its weights, activations and one sequence's KV cache
    least = engine["weights_bytes"] + engine["activations_bytes"] + 1024 * 28_672
    for row in result.fit:
        total = trainer + 0.3 * row.memory_bytes
        assert row.free_bytes == pytest.approx(row.memory_bytes - total, rel=1e-9, abs=1.0)
        assert row.fits == (total <= row.memory_bytes and 0.3 * row.memory_bytes >= least)


def test_a_gpu_whose_share_cannot_hold_the_engine_does_not_fit() -> None:
    """Llama-3.1-8B's 16 GB of bf16 weights in 0.3 of a 24 GB card (7.7 GB): vLLM cannot start
    there, however little the trainer needs (the engine sleeps while it trains); 0.3 of an 80 GB
    H100 holds them."""
    full = estimate({**VLLM, "model": "Llama-3.1-8B", "rollout_sleep": True})
    rows = {row.gpu: row for row in full.fit}
    assert not rows["GeForce RTX 4090"].fits
    assert rows["H100 SXM 80GB"].fits


def test_transformers_generate_caches_every_sequence_of_the_generation_batch() -> None:
    """generate() on the policy: 8 completions x 1,024 tokens x 28,672 bytes of KV, and the last
    position's fp32 logits and scores (8 x 151,936 x 4 x 2)."""
    result = estimate({**GRPO, "gpu": "H100 SXM"})
    rollout = _rollout(result)
    engine = rollout["engine_memory"]
    assert engine["kv_cache_bytes"] == 8 * 1024 * 28_672 == 234_881_024
    assert engine["activations_bytes"] == 8 * 151_936 * 8
    assert (
        rollout["trainer_gpu"]["generation_bytes"] == engine["kv_cache_bytes"] + engine["activations_bytes"]
    )
    generation = next(phase for phase in result.phases if phase.name == "generation")
    assert generation.term("rollout").value == rollout["trainer_gpu"]["generation_bytes"]
    assert generation.term("gradients").value == 0


def test_separate_engine_takes_its_gpus_from_the_trainer() -> None:
    """trl vllm-serve on 1 of 4 GPUs: 3 training replicas, 24 completions = 3 prompts x 8; the
    cost and energy count all 4 GPUs; vllm-serve takes 0.9 of its GPU and, on an H100 (over 70
    GiB, not an A100), up to 1,024 sequences at once."""
    result = estimate({**VLLM, "rollout_placement": "separate", "gpus": 4})
    rollout = _rollout(result)
    assert result.batch.replicas == 3 and result.batch.global_sequences == 24
    assert result.batch.prompts_per_step == rollout["prompts_per_step"] == 3
    assert rollout["engine_memory"]["budget_bytes"] == pytest.approx(0.9 * H100.memory_bytes, rel=1e-12)
    assert rollout["engine_memory"]["max_num_seqs"] == 1024
    assert rollout["trainer_gpu"] == {
        "generation_bytes": 0.0,
        "training_bytes": 0.0,
        "generation_temporaries_bytes": 0.0,
    }
    assert result.time is not None
    assert result.time.gpu_hours == pytest.approx(result.time.total_s * 4 / 3600, rel=1e-12)


def test_decode_is_bound_by_memory_bandwidth() -> None:
    """Colocated vLLM, 8 completions of 512 tokens after 512-token prompts: each decode step
    reads the bf16 weights and the batch's KV at its mean length (512 + 256 tokens) at 0.7 of the
    H100's bandwidth; the prefill runs 8 x 512 tokens at the compute rate."""
    result = estimate(VLLM)
    assert result.time is not None
    engine = _rollout(result)["engine_memory"]
    _, rates = rollout_data()
    read = engine["weights_bytes"] + 8 * (512 + 256) * 28_672
    step = read / (H100.memory_bandwidth_bytes_per_s * rates["decode_bandwidth_efficiency"])
    flops = result.time.flops
    forward = flops.matmul_forward + flops.attention_forward + flops.head_forward
    compute = H100.dense_flops_per_s["bf16"] * result.time.efficiency
    assert 8 * forward / compute < step  # memory-bound at this batch
    expected = 8 * 512 * forward / compute + 512 * step
    assert result.time.step.generation == pytest.approx(expected, rel=1e-12)


def test_scoring_with_vllm_runs_the_old_log_probs() -> None:
    """With vLLM GRPOTrainer computes the policy's old log-probs for its importance-sampling
    correction: one no-grad forward of every trained token; with transformers' generate (TRL's
    default steps_per_generation) none; a reference (beta > 0) adds its own forward."""
    hf = estimate({**GRPO, "gpu": "H100 SXM"})
    vllm = estimate(VLLM)
    assert hf.time is not None and vllm.time is not None
    assert hf.time.step.reference_forward == 0
    assert vllm.time.step.reference_forward > 0
    with_reference = estimate({**VLLM, "reference": "adapter"})
    assert with_reference.time is not None
    assert with_reference.time.step.reference_forward == pytest.approx(
        2 * vllm.time.step.reference_forward, rel=1e-12
    )


def test_a_full_grpo_reference_is_a_frozen_copy() -> None:
    full = {**VLLM, "method": "full", "model": "Qwen2.5-0.5B"}
    without = estimate(full)
    copy = estimate({**full, "reference": "model"})
    reference = next(state.value for state in copy.states if state.name == "reference")
    assert reference == copy.params.total * 2  # bf16-mixed: the 16-bit load dtype
    assert copy.peak.term("weights").value == pytest.approx(without.peak.term("weights").value + reference)


def test_an_engine_that_cannot_start_does_not_fit() -> None:
    """Llama-3.1-8B's 16 GB of bf16 weights in 0.1 of an H100 (8.6 GB): vLLM has no room for a
    KV-cache block and refuses to start."""
    result = estimate({**VLLM, "model": "Llama-3.1-8B", "rollout_memory_fraction": 0.1})
    assert _rollout(result)["engine_memory"]["problem"] is not None
    assert not result.fits
    assert any("cannot start" in warning for warning in result.warnings)


def test_the_kv_cache_limits_the_batch_into_waves() -> None:
    result = estimate({**VLLM, "model": "Llama-3.1-8B", "rollout_memory_fraction": 0.2, "micro_batch": 16})
    engine = _rollout(result)["engine_memory"]
    assert 1 <= engine["max_sequences"] < 16
    assert engine["concurrent_sequences"] == engine["max_sequences"]
    assert engine["waves"] == math.ceil(16 / engine["max_sequences"])
    assert any("waves" in warning for warning in result.warnings)


@pytest.mark.parametrize(
    ("changes", "field", "phrase"),
    [
        ({"generations": 3}, "generations", "does not divide the 8 completions"),
        ({"completion_len": 1024}, "completion_len", "below seq_len"),
        ({"rollout_memory_fraction": 0.5}, "rollout_memory_fraction", "vLLM engine"),
        ({"rollout_sleep": True}, "rollout_sleep", "colocated vLLM"),
        ({"rollout_engine": "vllm", "rollout_gpus": 1}, "rollout_gpus", "separate"),
        ({"rollout_engine": "vllm", "rollout_placement": "separate"}, "rollout_gpus", "leave at least one"),
        (
            {"rollout_engine": "vllm", "rollout_tensor_parallel": 2},
            "rollout_tensor_parallel",
            "does not divide",
        ),
        ({"rollout_engine": "vllm", "rollout_memory_fraction": 1.5}, "rollout_memory_fraction", "between"),
        ({"reference": "precomputed"}, "reference", "generation batch"),
    ],
)
def test_rollout_rules_name_the_field(changes: dict[str, Any], field: str, phrase: str) -> None:
    with pytest.raises(InputError) as error:
        estimate({**GRPO, **changes})
    assert error.value.field == field
    assert phrase in str(error.value)


def test_trainer_gpus_must_divide_by_the_model_parallel_degree() -> None:
    with pytest.raises(InputError) as error:
        estimate({**VLLM, "rollout_placement": "separate", "gpus": 4, "tensor_parallel": 2})
    assert error.value.field == "gpus" and "3 trainer GPUs" in str(error.value)


def test_the_defaults_are_trls() -> None:
    assumptions = estimate(GRPO).assumptions
    assert assumptions["rollout_engine"] == "hf"  # use_vllm false
    assert assumptions["generations"] == 8  # num_generations
    assert assumptions["completion_len"] == 512  # max_completion_length
    assert assumptions["prompt_len"] == 512
    assert assumptions["reference"] == "none"  # beta 0
    assert estimate(VLLM).assumptions["rollout_memory_fraction"] == 0.3


def _plan_request(**options: Any) -> Any:
    from trainplan.engine.plan_request import PlanRequest
    from trainplan.specs.scenario import scenario_from_mapping

    base = scenario_from_mapping({**GRPO, "grad_accum": 2, "gpu": "H100 SXM"})
    return PlanRequest(base=base, gpu_types=("H100 SXM",), max_gpus=4, **options)


def test_the_rollout_planner_ranks_whole_estimates() -> None:
    """GRPO plans: every one fits, re-estimates to its own figures through the validating parser,
    trains the target's 16 completions per step (8 x 2, the base's), and comes ranked by time;
    the engine placements searched include both transformers' generate and vLLM, colocated and
    apart."""
    from trainplan.engine.plan import plan
    from trainplan.engine.plan_rollout import engines
    from trainplan.specs.scenario import scenario_from_mapping, scenario_to_mapping

    result = plan(_plan_request(objective="time", top_k=5))
    assert result.plans
    times = [p.total_s for p in result.plans]
    assert times == sorted(times)
    for chosen in result.plans:
        assert chosen.estimate.fits
        again = estimate(scenario_from_mapping(scenario_to_mapping(chosen.scenario)))
        assert again.time is not None and again.time.run_s == pytest.approx(chosen.total_s, rel=1e-12)
        assert again.batch.global_sequences == 16
    kinds = {(kind, placement) for kind, placement, *_ in engines(_plan_request().base, 4)}
    assert kinds == {("hf", "colocate"), ("vllm", "colocate"), ("vllm", "separate")}


def test_the_rollout_planner_beats_trls_defaults() -> None:
    """The fastest plan is no slower than TRL's own colocated defaults on the same four GPUs."""
    from trainplan.engine.plan import plan

    result = plan(_plan_request(objective="time"))
    trl = estimate({**GRPO, "grad_accum": 1, "micro_batch": 4, "gpus": 4, "rollout_engine": "vllm"})
    assert trl.time is not None
    assert result.plans[0].total_s <= trl.time.run_s


def test_the_rollout_planner_counts_its_rejections() -> None:
    from trainplan.engine.plan import plan
    from trainplan.engine.plan_rollout import ROLLOUT_REASONS

    result = plan(_plan_request(objective="cost"))
    assert set(result.rejected) <= set(ROLLOUT_REASONS)
    assert sum(result.rejected.values()) < result.candidates_evaluated


def test_an_engine_on_tensor_parallel_gpus_pays_two_all_reduces_a_layer() -> None:
    """A colocated engine of tensor parallel 2 over 2 GPUs: each decode step reads half the
    weights and its 16 sequences' KV (each GPU's half of the KV heads), and runs 2 x 28
    all-reduces of 16 x 1,536 bf16 values, each the stated latency plus a ring over NVLink."""
    from trainplan.engine.per_gpu import link_bytes_per_s
    from trainplan.engine.time_cost_energy import hardware_of

    result = estimate({**VLLM, "gpus": 2, "rollout_tensor_parallel": 2})
    assert result.time is not None
    engine = _rollout(result)["engine_memory"]
    assert engine["sequences"] == 16 and engine["kv_bytes_per_token"] == 28_672 / 2
    _, rates = rollout_data()
    read = engine["weights_bytes"] + 16 * (512 + 256) * 28_672 / 2
    memory_s = read / (H100.memory_bandwidth_bytes_per_s * rates["decode_bandwidth_efficiency"])
    flops = result.time.flops
    forward = flops.matmul_forward + flops.attention_forward + flops.head_forward
    compute = H100.dense_flops_per_s["bf16"] * result.time.efficiency * 2
    hardware = hardware_of(H100, result_precision(result), None)
    assert hardware is not None
    link = float(link_bytes_per_s(hardware, 2, False))
    ring = 2 * (2 - 1) / 2 * 16 * 1536 * 2 / link
    step = max(memory_s, 16 * forward / compute) + 2 * 28 * (rates["tp_allreduce_latency_s"] + ring)
    assert result.time.step.generation == pytest.approx(16 * 512 * forward / compute + 512 * step, rel=1e-12)


def result_precision(result: Any) -> Any:
    from trainplan.engine.terms.precisions import PRECISIONS

    return PRECISIONS[result.scenario.precision]


FIXTURES = Path(__file__).parent / "fixtures" / "configs"


def test_the_trl_docs_multi_node_layout() -> None:
    """TRL's docs run GRPO of Qwen2.5-72B on five nodes of 8: four train (per_device_train_batch_size
    4) and `trl vllm-serve --tensor_parallel_size 8` takes the fifth. The file names the
    server mode; the GPU counts are given beside it: 32 trainer replicas, 128 completions = 16
    prompts x 8; the engine's 72.7B bf16 weights split 8 ways in 0.9 of each H100; the weights
    reach it over the network (it is in another node)."""
    from trainplan.inputs.configs import scenario_from_config
    from trainplan.specs.scenario import scenario_from_mapping

    overrides = {
        "gpus": 40,
        "rollout_gpus": 8,
        "rollout_tensor_parallel": 8,
        "gpu": "H100 SXM",
        "zero_stage": 3,
    }
    reading = scenario_from_config([FIXTURES / "hf" / "trl_grpo_server.yaml"], overrides)
    mapping = reading.mapping
    assert {key: mapping[key] for key in ("stage", "rollout_engine", "rollout_placement", "micro_batch")} == {
        "stage": "grpo",
        "rollout_engine": "vllm",
        "rollout_placement": "separate",
        "micro_batch": 4,
    }
    result = estimate(scenario_from_mapping(mapping))
    assert result.batch.replicas == 32 and result.batch.global_sequences == 128
    assert result.batch.prompts_per_step == 16
    engine = _rollout(result)["engine_memory"]
    assert engine["weights_bytes"] == (result.params.total - result.params.lora) * 2 / 8
    assert engine["budget_bytes"] == pytest.approx(0.9 * H100.memory_bytes, rel=1e-12)
    assert engine["sequences"] == 128  # one engine (8 GPUs, tensor parallel 8) generates them all
    assert result.time is not None and result.time.step.weight_sync > 0


def test_a_server_mode_file_alone_asks_for_the_gpu_counts() -> None:
    from trainplan.inputs.configs import scenario_from_config
    from trainplan.specs.scenario import scenario_from_mapping

    with pytest.raises(InputError) as error:
        estimate(
            scenario_from_mapping(scenario_from_config([FIXTURES / "hf" / "trl_grpo_server.yaml"]).mapping)
        )
    assert error.value.field == "rollout_gpus" and "part of gpus" in str(error.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # GRPOConfig (trl/trainer/grpo_config.py at f2cd5771): colocated vLLM's share, its tensor
        # parallel and sleep mode; beta > 0 on a peft policy disables its adapters for the reference
        (
            "# trl grpo\nmodel_name_or_path: Qwen/Qwen2.5-1.5B\nuse_vllm: true\n"
            "vllm_gpu_memory_utilization: 0.5\nvllm_tensor_parallel_size: 1\nvllm_enable_sleep_mode: true\n"
            "beta: 0.04\nuse_peft: true\nmax_completion_length: 256\n",
            {
                "rollout_engine": "vllm",
                "rollout_memory_fraction": 0.5,
                "rollout_tensor_parallel": 1,
                "rollout_sleep": True,
                "reference": "adapter",
                "completion_len": 256,
                "seq_len": 768,
                "method": "lora",
            },
        ),
        # the keys alone say GRPO; TRL 0.26's max_prompt_length truncates the prompts
        (
            "model_name_or_path: Qwen/Qwen2.5-1.5B\nnum_generations: 4\nmax_prompt_length: 256\n"
            "max_completion_length: 128\nper_device_train_batch_size: 4\n",
            {"stage": "grpo", "generations": 4, "seq_len": 384, "completion_len": 128, "method": "full"},
        ),
        # server mode: the colocated settings are TRL's to ignore
        (
            "# trl grpo\nmodel_name_or_path: Qwen/Qwen2.5-1.5B\nuse_vllm: true\nvllm_mode: server\n"
            "vllm_gpu_memory_utilization: 0.5\n",
            {"rollout_placement": "separate"},
        ),
    ],
)
def test_grpo_configs_read_as_trl_reads_them(tmp_path: Path, text: str, expected: dict[str, Any]) -> None:
    from trainplan.inputs.configs import scenario_from_config

    path = tmp_path / "grpo.yaml"
    path.write_text(text)
    # a server-mode file needs the GPU counts beside it (the trainer's and the engine's)
    overrides = {"gpus": 2} if "vllm_mode: server" in text else None
    mapping = scenario_from_config([path], overrides).mapping
    assert {key: mapping.get(key) for key in expected} == expected
    if "vllm_mode: server" in text:
        assert "rollout_memory_fraction" not in mapping


def test_axolotl_hands_a_stated_colocate_engine_its_vllm_share(tmp_path: Path) -> None:
    """axolotl passes vllm.gpu_memory_utilization (VllmConfig's 0.9 by default) only with
    trl.vllm_mode colocate stated; left unset, TRL's own colocate default (0.3) applies."""
    from trainplan.inputs.configs import scenario_from_config

    base = (
        "base_model: Qwen/Qwen2.5-1.5B\nrl: grpo\nsequence_len: 1024\nmicro_batch_size: 8\n"
        "trl:\n  use_vllm: true\n"
    )
    stated = tmp_path / "stated.yaml"
    stated.write_text(base + "  vllm_mode: colocate\n")
    unset = tmp_path / "unset.yaml"
    unset.write_text(base)
    assert scenario_from_config([stated]).mapping["rollout_memory_fraction"] == 0.9
    assert "rollout_memory_fraction" not in scenario_from_config([unset]).mapping
    given = tmp_path / "given.yaml"
    given.write_text(base + "  vllm_mode: colocate\n  beta: 0.1\nvllm:\n  gpu_memory_utilization: 0.6\n")
    mapping = scenario_from_config([given]).mapping
    assert mapping["rollout_memory_fraction"] == 0.6
    assert mapping["reference"] == "model"  # beta 0.1 on a full fine-tune: a frozen copy


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        (
            "# trl grpo\nmodel_name_or_path: Qwen/Qwen2.5-1.5B\nuse_vllm: true\n"
            "vllm_gpu_memory_utilization: 1.5\n",
            "vllm_gpu_memory_utilization",
        ),
        ("# trl grpo\nmodel_name_or_path: Qwen/Qwen2.5-1.5B\nnum_generations: many\n", "num_generations"),
        (
            "# trl grpo\nmodel_name_or_path: Qwen/Qwen2.5-1.5B\nuse_vllm: true\nvllm_mode: remote\n",
            "vllm_mode",
        ),
        (
            "base_model: Qwen/Qwen2.5-1.5B\nrl: grpo\nsequence_len: 1024\ntrl:\n  use_vllm: true\n"
            "  vllm_mode: colocate\nvllm:\n  gpu_memory_utilization: lots\n",
            "vllm.gpu_memory_utilization",
        ),
    ],
)
def test_bad_rollout_settings_name_themselves(tmp_path: Path, text: str, setting: str) -> None:
    from trainplan.inputs.configs import scenario_from_config

    path = tmp_path / "grpo.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as error:
        scenario_from_config([path])
    assert setting in str(error.value)


def test_the_hints_offer_the_engines_savers() -> None:
    """A colocated vLLM engine that does not fit two A100 40GBs with its 8B LoRA policy: the hints
    offer its sleep mode, a smaller share and a GPU of its own, each re-estimated; the engine on
    a GPU of its own fits."""
    from trainplan.interfaces.text.hints import hints
    from trainplan.specs.scenario import scenario_from_mapping

    scenario = scenario_from_mapping({**VLLM, "model": "Llama-3.1-8B", "gpu": "A100 40GB SXM4", "gpus": 2})
    base = estimate(scenario)
    assert not base.fits
    found = {hint.id: hint for hint in hints(scenario, base)}
    assert {"rollout_sleep", "rollout_fraction", "rollout_separate"} <= set(found)
    assert found["rollout_separate"].fits
    asleep = estimate(
        {**VLLM, "model": "Llama-3.1-8B", "gpu": "A100 40GB SXM4", "gpus": 2, "rollout_sleep": True}
    )
    assert found["rollout_sleep"].total_bytes == asleep.total_bytes


def test_a_generation_batch_can_serve_several_steps() -> None:
    """TRL's steps_per_generation and num_iterations (GRPOConfig.__post_init__: generation_batch_size
    = per_device_train_batch_size x processes x steps_per_generation; GRPOTrainer generates every
    steps_per_generation x num_iterations micro-steps): a batch of 4 x 8 completions on one GPU,
    with vLLM's max_num_seqs = 4 x 1 x 8 (vllm_generation's LLM(max_num_seqs=...)), generated
    every 8 micro-steps: half a batch per optimizer step of 4; the old log-probs are scored once per
    batch, so num_iterations 2 halves them per trained token."""
    base = {**VLLM, "micro_batch": 4, "grad_accum": 4}
    default = estimate(base)
    larger = estimate({**base, "steps_per_generation": 8})
    reused = estimate({**base, "num_iterations": 2})
    engine = _rollout(larger)["engine_memory"]
    assert _rollout(larger)["generation_batch"] == 32 and engine["max_num_seqs"] == 32
    assert _rollout(larger)["generations_per_step"] == 0.5
    assert _rollout(default)["generation_batch"] == 16 and _rollout(default)["generations_per_step"] == 1
    assert default.time is not None and reused.time is not None and larger.time is not None
    # the same batch, half as often
    assert reused.time.step.generation == pytest.approx(default.time.step.generation / 2, rel=1e-12)
    assert reused.time.step.weight_sync == pytest.approx(default.time.step.weight_sync / 2, rel=1e-12)
    assert reused.time.step.reference_forward == pytest.approx(
        default.time.step.reference_forward / 2, rel=1e-12
    )
    # the trained batch is the optimizer step's either way
    assert larger.batch.global_sequences == default.batch.global_sequences == 16


def test_generations_divide_the_generation_batch() -> None:
    base = {**GRPO, "micro_batch": 4, "grad_accum": 2, "generations": 16}
    with pytest.raises(InputError) as error:
        estimate(base)  # 4 x 2 = 8 completions a batch
    assert error.value.field == "generations" and "generation batch" in str(error.value)
    assert estimate({**base, "steps_per_generation": 4}).batch.global_sequences == 8


def test_trl_reads_the_generation_cadence(tmp_path: Path) -> None:
    from trainplan.inputs.configs import scenario_from_config

    path = tmp_path / "grpo.yaml"
    path.write_text(
        "# trl grpo\nmodel_name_or_path: Qwen/Qwen2.5-1.5B\nper_device_train_batch_size: 4\n"
        "gradient_accumulation_steps: 2\nsteps_per_generation: 4\nnum_iterations: 2\n"
    )
    mapping = scenario_from_config([path]).mapping
    assert (mapping["steps_per_generation"], mapping["num_iterations"]) == (4, 2)


def test_axolotl_gdpo_is_grpos_trainer(tmp_path: Path) -> None:
    """axolotl's rl: gdpo runs GRPO's trainer with another advantage normalisation
    (core/builders/rl.py at 067b021c: GRPOStrategy for {GRPO, GDPO}, multi_objective_aggregation
    normalize_then_sum): stage grpo; its examples/llama-3/qlora-1b-gdpo.yaml (no adapter, trl.beta
    0.001) trains the full model against a frozen reference copy."""
    from trainplan.inputs.configs import scenario_from_config

    path = tmp_path / "gdpo.yaml"
    path.write_text(
        "base_model: meta-llama/Llama-3.2-1B-Instruct\nrl: gdpo\nsequence_len: 512\n"
        "gradient_accumulation_steps: 8\nmicro_batch_size: 1\ntrl:\n  beta: 0.001\n"
        "  max_completion_length: 128\n  num_generations: 2\n  use_vllm: false\n"
        "  multi_objective_aggregation: normalize_then_sum\n"
    )
    mapping = scenario_from_config([path]).mapping
    expected = {
        "stage": "grpo",
        "reference": "model",
        "method": "full",
        "generations": 2,
        "completion_len": 128,
    }
    assert {key: mapping[key] for key in expected} == expected


def test_each_round_splits_into_its_roles() -> None:
    """A full GRPO fine-tune of Qwen2.5-0.5B with a frozen bf16 reference copy beside a colocated
    engine: each round's roles sum to its total, the reference's is the copy (every parameter in
    bf16), the engine's its budget; the peak names the round and its largest role."""
    result = estimate({**VLLM, "model": "Qwen2.5-0.5B", "method": "full", "reference": "model"})
    rollout = _rollout(result)
    for item in rollout["rounds"].values():
        roles = item["roles"]
        assert sum(roles.values()) == pytest.approx(item["total_bytes"], rel=1e-12)
        assert roles["reference_bytes"] == result.params.total * 2
        assert roles["engine_bytes"] == rollout["engine_memory"]["budget_bytes"]
    peak = rollout["rounds"][rollout["peak_round"]]
    assert peak["total_bytes"] == result.total_bytes
    assert rollout["peak_role"] == max(peak["roles"], key=peak["roles"].get).removesuffix("_bytes")


@pytest.mark.parametrize("engine", ["hf", "vllm"])
def test_the_step_and_the_generation_batch_are_counted_apart(engine: str) -> None:
    """4 x 2 completions trained per optimizer step (2 prompts of 4), a generation batch of 4 x 4
    serving two steps: with either engine, memory.rollout says both, and the batch agrees."""
    result = estimate(
        {
            **GRPO,
            "micro_batch": 4,
            "grad_accum": 2,
            "generations": 4,
            "steps_per_generation": 4,
            "rollout_engine": engine,
        }
    )
    rollout = _rollout(result)
    assert (rollout["completions_per_step"], rollout["prompts_per_step"]) == (8, 2)
    assert rollout["generation_batch"] == 16 and rollout["generations_per_step"] == 0.5
    assert result.batch.global_sequences == 8 and result.batch.prompts_per_step == 2
    if engine == "hf":  # transformers' generate caches the whole generation batch
        assert rollout["engine_memory"]["kv_cache_bytes"] == 16 * 1024 * 28_672


def test_vllm_serve_shares_a_prompts_blocks_among_its_completions() -> None:
    """vllm-serve runs a prompt's 8 completions as one request (n = 8): they share the prompt's
    32 full blocks of 16 (512 tokens), each keeps its own 32 completion blocks. A group of 8 then
    takes 512 + 8 x 512 tokens, where 8 lone sequences would take 8 x 1,024; the cache holds
    whole groups."""
    result = estimate({**VLLM, "rollout_placement": "separate", "gpus": 2, "rollout_memory_fraction": 0.9})
    engine = _rollout(result)["engine_memory"]
    groups = engine["kv_tokens"] // (512 + 8 * 512)
    assert engine["max_sequences"] == groups * 8
    assert engine["max_sequences"] > engine["kv_tokens"] // 1024


def test_the_longest_grpo_sequence_keeps_its_completion() -> None:
    """--max seq_len for GRPO searches sequences longer than the completion (512 by default) and
    --max micro_batch the micro-batches whose generation batch 8 generations divide (with
    steps_per_generation 1 on one GPU: multiples of 8)."""
    from trainplan.engine.largest_fit import largest_that_fits
    from trainplan.specs.scenario import scenario_from_mapping

    scenario = scenario_from_mapping({**GRPO, "gpu": "RTX-4090", "micro_batch": 8})
    longest = largest_that_fits(scenario, "seq_len")
    assert longest.value > 512 and longest.estimate.fits
    over = estimate({**GRPO, "gpu": "RTX-4090", "micro_batch": 8, "seq_len": longest.exact + 1})
    assert over.total_bytes > 0.95 * over.chosen_fit.memory_bytes
    widest = largest_that_fits(
        scenario_from_mapping({**GRPO, "gpu": "RTX-4090", "micro_batch": 8, "steps_per_generation": 1}),
        "micro_batch",
    )
    assert widest.value % 8 == 0 and widest.value >= 8


def test_measured_mode_keeps_a_grpo_steps_generation_batch() -> None:
    """A trace runs one micro-batch a step: the generation batch (2 x 4 completions, which 8
    generations divide) stays as the run has it, so the comparison is of the same scenario."""
    pytest.importorskip("torch")
    pytest.importorskip("trl")
    from trainplan.engine.measure.compare import measure_scenario
    from trainplan.specs.scenario import scenario_from_mapping

    scenario = scenario_from_mapping(
        {
            "model": "Qwen2.5-0.5B",
            "stage": "grpo",
            "micro_batch": 2,
            "grad_accum": 4,
            "seq_len": 512,
            "completion_len": 256,
            "activation_checkpointing": "full",
        }
    )
    comparison = measure_scenario(scenario)
    assert comparison.estimate is not None
    assert comparison.estimate.rollout is not None
    assert comparison.estimate.rollout.generation_batch == 8
    assert abs(comparison.estimate.allocated_peak_bytes / comparison.measured.peak_bytes - 1) < 0.10


def test_a_false_sleep_mode_is_read_as_no_sleep(tmp_path: Path) -> None:
    """vllm_enable_sleep_mode: false (GRPOConfig's default written out) leaves the engine awake,
    in a TRL config and an axolotl one alike."""
    from trainplan.inputs.configs import scenario_from_config

    trl = tmp_path / "trl.yaml"
    trl.write_text(
        "# trl grpo\nmodel_name_or_path: Qwen/Qwen2.5-1.5B\nuse_vllm: true\nvllm_enable_sleep_mode: false\n"
    )
    axolotl = tmp_path / "axolotl.yaml"
    axolotl.write_text(
        "base_model: Qwen/Qwen2.5-1.5B\nrl: grpo\nsequence_len: 1024\nmicro_batch_size: 8\ntrl:\n"
        "  use_vllm: true\n  vllm_mode: colocate\n  vllm_enable_sleep_mode: false\n"
    )
    for path in (trl, axolotl):
        mapping = scenario_from_config([path]).mapping
        assert mapping["rollout_engine"] == "vllm" and mapping.get("rollout_sleep") is None
