"""PPO as TRL's PPOTrainer runs it (huggingface/trl@f2cd5771 trl/experimental/ppo/, the last TRL
with a PPO trainer): the value and reward models beside the policy, the generated logits the
trainer keeps, the scoring forwards, the rules on the fields and the reader.

Model shapes are from each model's config.json on the Hub (Qwen/Qwen2.5-0.5B: 24 layers, hidden
896, 2 KV heads of 64, vocab 151,936, tied embeddings, 494,032,768 parameters; EleutherAI/pythia-1b:
16 layers, hidden 2048, 8 heads of 256, vocab 50,304, untied, 1,011,781,632 parameters, Pythia
paper Table 1). TRL's defaults are PPOConfig's at f2cd5771 (ppo_config.py: response_length 53,
num_ppo_epochs 4, local_rollout_forward_batch_size 64).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainplan import InputError, estimate
from trainplan.engine.per_replica import coefficients
from trainplan.inputs.catalogs.gpus import find_gpu
from trainplan.inputs.resolve import resolve_model
from trainplan.specs.scenario import scenario_from_mapping
from trainplan.specs.stages import resolved_loss

QWEN = "Qwen2.5-0.5B"
QWEN_PARAMS = 494_032_768
# the value model: the embedding untied from the LM head, which becomes a 896 x 1 score head
VALUE_PARAMS = QWEN_PARAMS + 896
VOCAB = 151_936
PPO: dict[str, Any] = {
    "model": QWEN,
    "stage": "ppo",
    "method": "full",
    "precision": "bf16-mixed",
    "micro_batch": 4,
    "grad_accum": 4,
    "seq_len": 512,
    "gpus": 1,
    "gpu": "H100 SXM",
    "activation_checkpointing": "none",
}
FIXTURES = Path(__file__).parent / "fixtures" / "configs"


def _states(result: Any) -> dict[str, float]:
    return {state.name: state.value for state in result.states}


def _phase(result: Any, name: str) -> dict[str, float]:
    phase = next(p for p in result.phases if p.name == name)
    return {term.name: term.value for term in phase.terms}


def test_trls_ppo_defaults() -> None:
    """One completion per prompt of 53 tokens, trained 4 times, generated 64 prompts at a time;
    the reference a frozen copy for a full fine-tune, the adapter-disabled policy for LoRA
    (PPOTrainer.__init__: create_reference_model unless peft), the loss TRL's full logits."""
    result = estimate(PPO)
    settings = result.to_dict()["memory"]["rollout"]
    assert (settings["completion_len"], settings["num_iterations"], settings["forward_batch"]) == (53, 4, 64)
    assert settings["generations"] == 1 and settings["engine"] == "hf"
    assert result.assumptions["reference"] == "model"
    assert resolved_loss(scenario_from_mapping(PPO)) == "selective"
    assert (
        result.assumptions["value_model"]
        == result.assumptions["reward_model"]
        == "Qwen2.5-0.5B, one-score head"
    )
    assert estimate({**PPO, "method": "lora"}).assumptions["reference"] == "adapter"


def test_four_models_on_every_gpu() -> None:
    """bf16-mixed full fine-tune on one GPU: the policy, its frozen copy, the value model and the
    reward model in bf16 (2 bytes a parameter); the policy's and the value model's bf16
    gradients, fp32 masters and AdamW's two fp32 moments (12 bytes); one optimizer over both."""
    result = estimate(PPO)
    states = _states(result)
    assert states["weights"] == 2 * (2 * QWEN_PARAMS + 2 * VALUE_PARAMS)
    assert states["gradients"] == 2 * (QWEN_PARAMS + VALUE_PARAMS)
    assert states["optimizer"] == 12 * (QWEN_PARAMS + VALUE_PARAMS)
    assert states["reference"] == 2 * QWEN_PARAMS
    assert states["reward_model"] == 2 * VALUE_PARAMS
    assert states["critic"] == (2 + 2 + 12) * VALUE_PARAMS
    assert states["critic_gradients"] == 2 * VALUE_PARAMS


def test_a_lora_policy_trains_a_full_value_model() -> None:
    """get_peft_model wraps the policy alone: the value model keeps every weight trainable, in
    the dtype PPO's script loads every model in, the base's bf16: bf16 weights, gradients and
    AdamW moments (2 + 2 + 4 bytes); the reward model (no reference copy: the adapters are
    disabled) is frozen in bf16."""
    states = _states(estimate({**PPO, "method": "lora"}))
    assert "reference" not in states
    assert states["critic"] == (2 + 2 + 4) * VALUE_PARAMS
    assert states["reward_model"] == 2 * VALUE_PARAMS
    # over an fp32 base under autocast: fp32 weights, gradients and moments
    fp32 = _states(estimate({**PPO, "method": "lora", "base_weights": "fp32", "precision": "amp-bf16"}))
    assert fp32["critic"] == (4 + 4 + 8) * VALUE_PARAMS


def test_zero3_shards_the_value_and_reward_models() -> None:
    one = _states(estimate({**PPO, "micro_batch": 2, "grad_accum": 1, "gpus": 1}))
    eight = _states(estimate({**PPO, "micro_batch": 2, "grad_accum": 1, "gpus": 8, "zero_stage": 3}))
    for name in ("critic", "reward_model", "critic_gradients"):
        assert eight[name] == pytest.approx(one[name] / 8, rel=1e-12)


def test_the_generated_logits_are_kept_through_training() -> None:
    """`logitss`: 4 x 4 prompts' 53 steps of fp32 scores over the vocabulary, bound through
    scoring and training; while the next batch generates, the previous one, the chunks and their
    padded copy (3 x) or, larger here, the last chunk stacked beside the previous ones and the
    previous batch's (3 x, the whole batch being one chunk) with the chunk's KV cache (24 layers
    x 2 heads x 128 x 2 bytes a token, 512 tokens of 16 sequences) and generate's fp32 logits and
    scores. After backward the policy's bf16 logits of its 4 x 512 tokens, its 25 hidden states
    and its KV cache stay referenced through the optimizer step."""
    result = estimate(PPO)
    scores = 16 * 53 * VOCAB * 4
    kv = 16 * 512 * 24 * 2 * 128 * 2
    generate = 16 * VOCAB * 4 * 2
    assert _phase(result, "scoring")["logits"] == scores
    generation = _phase(result, "generation")
    assert (generation["logits"], generation["rollout"]) == (3 * scores, kv + generate)
    outputs = 4 * 512 * (VOCAB * 2 + 25 * 896 * 2 + 24 * 2 * 128 * 2)
    assert _phase(result, "optimizer")["logits"] == scores + outputs
    rounds = result.to_dict()["memory"]["rollout"]["rounds"]
    assert rounds["training"]["roles"]["engine_bytes"] == scores
    assert rounds["rollout"]["roles"]["engine_bytes"] == 3 * scores + kv + generate


def test_scoring_holds_every_hidden_state_and_the_references_logits() -> None:
    """The scoring forwards run output_hidden_states=True on 16 sequences of 512 tokens at once
    (the whole generation batch, under the forward batch of 64): 25 hidden states of 896 and the
    reference's logits over every position, in bf16."""
    tokens = 16 * 512
    expected = 25 * tokens * 896 * 2 + tokens * VOCAB * 2
    assert _phase(estimate(PPO), "scoring")["temporaries"] == expected


def test_a_smaller_forward_batch_shrinks_the_cache_and_scoring_not_the_logits() -> None:
    small = estimate({**PPO, "rollout_forward_batch": 4})
    scores = 16 * 53 * VOCAB * 4
    assert _phase(small, "scoring")["temporaries"] == 25 * 4 * 512 * 896 * 2 + 4 * 512 * VOCAB * 2
    assert _phase(small, "scoring")["logits"] == scores
    engine = small.to_dict()["memory"]["rollout"]["engine_memory"]
    assert (engine["concurrent_sequences"], engine["waves"]) == (4, 4)


def test_the_rounds_split_into_five_roles() -> None:
    rollout = estimate({**PPO, "method": "lora"}).to_dict()["memory"]["rollout"]
    for name, phase in rollout["rounds"].items():
        roles = phase["roles"]
        assert set(roles) == {
            "policy_bytes",
            "reference_bytes",
            "engine_bytes",
            "critic_bytes",
            "reward_model_bytes",
        }
        assert sum(roles.values()) == pytest.approx(phase["total_bytes"], rel=1e-12), name
    # zero_grad frees the value model's gradients before the next generation
    assert rollout["rounds"]["rollout"]["roles"]["critic_bytes"] == (2 + 4) * VALUE_PARAMS


def test_the_value_model_trains_in_the_same_step() -> None:
    """The value model's forward and backward add to the policy's compute, and its scoring
    forward and the reward model's to the reference's: per trained token, each generation batch
    scored once and trained num_ppo_epochs times."""
    spec = resolve_model(QWEN, False, None)
    c = coefficients(spec, scenario_from_mapping(PPO))
    assert c.critic is not None
    flops, value = c.work.flops, c.critic.work.flops
    forward = flops.matmul_forward + flops.attention_forward + flops.head_forward
    scorers = 2 * (flops.matmul_forward + flops.attention_forward)
    assert c.reference.flops_per_token == pytest.approx((forward + scorers) / 4, rel=1e-12)
    # the value model is the policy less its LM head, plus a one-score head
    assert value.matmul_forward == pytest.approx(flops.matmul_forward, rel=1e-12)
    one = estimate({**PPO, "num_iterations": 1}).time
    four = estimate(PPO).time
    assert one is not None and four is not None
    assert one.step.reference_forward == pytest.approx(4 * four.step.reference_forward, rel=1e-12)
    assert one.step.generation == pytest.approx(4 * four.step.generation, rel=1e-12)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"generations": 4}, "generations"),
        ({"rollout_engine": "vllm"}, "rollout_engine"),
        ({"steps_per_generation": 2}, "steps_per_generation"),
        ({"tensor_parallel": 2, "gpus": 2}, "tensor_parallel"),
        ({"pipeline_parallel": 2, "gpus": 2}, "pipeline_parallel"),
        ({"method": "qlora"}, "method"),
        ({"reference": "precomputed"}, "reference"),
        ({"reference": "none"}, "reference"),
        ({"loss": "logprob"}, "loss"),
        ({"completion_len": 512}, "completion_len"),
    ],
)
def test_ppo_rules_name_the_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as error:
        estimate({**PPO, **changes})
    assert error.value.field == field


def test_the_forward_batch_is_ppos_alone() -> None:
    with pytest.raises(InputError) as error:
        estimate({**PPO, "stage": "grpo", "rollout_forward_batch": 8})
    assert error.value.field == "rollout_forward_batch"


def test_trls_ppo_example_is_read_as_trl_runs_it() -> None:
    """docs/source/ppo_trainer.md at f2cd5771, "Get started": examples/scripts/ppo/ppo.py with
    its command-line settings as a config file (hf/trl_ppo_pythia.yaml): the policy from
    sft_model_path (model_name_or_path names the tokenizer), PPOConfig's response_length and
    forward batch defaults, num_ppo_epochs 1; bf16 amp over the fp32 weights TRL loads without a
    dtype; gradient checkpointing left off, as PPOTrainer never enables it."""
    from trainplan.inputs.configs import scenario_from_config

    reading = scenario_from_config([FIXTURES / "hf" / "trl_ppo_pythia.yaml"])
    mapping = reading.mapping
    expected = {
        "stage": "ppo",
        "model": "Pythia-1B",  # the catalog's record of the same shapes
        "micro_batch": 64,
        "grad_accum": 1,
        "num_iterations": 1,
        "method": "full",
        "loss": "selective",
        "activation_checkpointing": "none",
    }
    assert {key: mapping.get(key) for key in expected} == expected
    result = estimate(scenario_from_mapping(mapping))
    assert result.model_name == "Pythia-1B"
    settings = result.to_dict()["memory"]["rollout"]
    assert (settings["completion_len"], settings["forward_batch"]) == (53, 64)
    # 64 prompts' 53 steps of fp32 scores over Pythia's 50,304 tokens
    assert _phase(result, "scoring")["logits"] == 64 * 53 * 50_304 * 4


def test_gradient_checkpointing_is_ignored_under_ppo(tmp_path: Path) -> None:
    from trainplan.inputs.configs import scenario_from_config

    path = tmp_path / "ppo.yaml"
    path.write_text(
        "model_name_or_path: Qwen/Qwen2.5-0.5B\nnum_ppo_epochs: 2\nresponse_length: 128\n"
        "local_rollout_forward_batch_size: 16\ngradient_checkpointing: true\nnum_mini_batches: 2\n"
    )
    reading = scenario_from_config([path])
    mapping = reading.mapping
    assert mapping["stage"] == "ppo"
    assert (mapping["num_iterations"], mapping["completion_len"], mapping["rollout_forward_batch"]) == (
        2,
        128,
        16,
    )
    assert mapping["activation_checkpointing"] == "none"
    ignored = reading.to_dict()["ignored"] if hasattr(reading, "to_dict") else None
    assert ignored is None or any("gradient_checkpointing" in str(item) for item in ignored)


def test_the_planner_searches_ppo_with_transformers_generate() -> None:
    from trainplan.engine.plan import plan
    from trainplan.engine.plan_request import PlanRequest

    base = scenario_from_mapping({**PPO, "method": "lora"})
    result = plan(PlanRequest(base=base, gpu_types=("H100 SXM",), max_gpus=2))
    assert result.plans
    for found in result.plans:
        assert found.scenario.stage == "ppo" and found.scenario.rollout_engine is None
        direct = estimate(found.scenario)
        assert direct.total_bytes == found.estimate.total_bytes


def test_the_padded_attention_and_the_policys_cache_per_token() -> None:
    """Qwen2.5-0.5B (24 layers, 14 query and 2 KV heads of 64) under SDPA with PPO's padding
    mask: each layer saves the bf16 additive mask (1,024 keys x 2 bytes a query token) and the
    keys and values repeated to the 14 heads (12 more heads x 128 x 2 bytes); the policy's KV
    cache keeps fp32 post-rotary keys and bf16 values under autocast (2 heads x (64 x 4 + 64 x 2)
    a layer: 18,432 bytes a token, the traced figure), bf16 both in a bf16 run."""
    from trainplan.engine.terms.memory import padded_sdpa_bytes_per_token, ppo_cache_bytes_per_token

    spec = resolve_model(QWEN, False, None)
    assert padded_sdpa_bytes_per_token(spec, 1024, 2) == 24 * (1024 * 2 + 12 * 128 * 2)
    assert ppo_cache_bytes_per_token(spec, 2, upcast=True) == 18_432
    assert ppo_cache_bytes_per_token(spec, 2, upcast=False) == 24 * 2 * 128 * 2


def test_flash_attention_saves_no_padding_mask() -> None:
    """HF's flash-attention path unpads a padded batch (no mask tensor, no repeated heads): the
    step under flash holds less than under SDPA by exactly both models' padded-attention bytes."""
    from trainplan.engine.terms.memory import padded_sdpa_bytes_per_token

    sdpa = estimate({**PPO, "attention": "sdpa"})
    flash = estimate({**PPO, "attention": "flash"})
    spec = resolve_model(QWEN, False, None)
    padded = 2 * padded_sdpa_bytes_per_token(spec, 512, 2) * 4 * 512  # two models, 4 x 512 tokens
    assert _phase(sdpa, "backward")["activations"] - _phase(flash, "backward")[
        "activations"
    ] == pytest.approx(padded, rel=1e-9)


def test_checkpointing_under_ppo_is_warned_of() -> None:
    """TRL's PPOTrainer never checkpoints: a scenario that asks is estimated as asked (the policy
    checkpointed, the value model not), with a warning naming the field."""
    checkpointed = estimate({**PPO, "activation_checkpointing": "full"})
    assert any("activation_checkpointing full" in w and "never enables" in w for w in checkpointed.warnings)
    assert not any("never enables" in w for w in estimate(PPO).warnings)
    assert checkpointed.allocated_peak_bytes < estimate(PPO).allocated_peak_bytes


def test_the_hints_offer_a_smaller_forward_batch_not_checkpointing() -> None:
    """PPO's own saver where the rollout sets the peak (a LoRA policy's 64 prompts of 1,024 tokens
    generated at once): generating and scoring 8 at a time (the cache and the scoring forward
    shrink); no checkpointing saver, which TRL's PPOTrainer would not apply."""
    from trainplan.interfaces.text.hints import hints

    fields = {
        **PPO,
        "model": "Pythia-1B",
        "method": "lora",
        "grad_accum": 16,
        "seq_len": 1024,
        "gpu": "T4",
    }
    scenario = scenario_from_mapping(fields)
    found = {hint.id: hint for hint in hints(scenario, estimate(scenario))}
    assert estimate(scenario).peak.name in ("generation", "scoring")
    assert "rollout_forward_batch" in found
    assert not {"checkpointing", "op_checkpointing"} & set(found)
    saver = found["rollout_forward_batch"]
    assert saver.change == {"rollout_forward_batch": 8}
    smaller = estimate({**fields, "rollout_forward_batch": 8})
    assert saver.total_bytes == smaller.total_bytes < estimate(scenario).total_bytes


def test_offload_moves_and_steps_the_value_model_too() -> None:
    """Under ZeRO-Offload the value model's gradients come down and its weights go up with the
    policy's, and the host steps both: beside a LoRA policy (its adapters are 0.5M parameters)
    the transfer is the value model's half on each of the two GPUs, bf16 gradients down and bf16
    weights up (2 + 2 bytes a parameter) over the GPU's host link."""
    from trainplan.inputs.catalogs.cost_inputs import host_link_bytes_per_s

    lora = {**PPO, "method": "lora", "gpus": 2, "zero_stage": 2, "offload": "optimizer"}
    result = estimate(lora)
    assert result.time is not None and result.time.step.host_optimizer > 0
    value = VALUE_PARAMS / 2 * 4 / host_link_bytes_per_s(find_gpu("H100 SXM"))
    adapters = estimate({**lora, "stage": "sft", "reference": None}).time
    assert adapters is not None
    assert result.time.step.offload == pytest.approx(adapters.step.offload + value, rel=1e-9)


def test_the_planner_shrinks_the_forward_batch_to_fit() -> None:
    """A LoRA Pythia-1B PPO step of 64 prompts of 1,024 tokens on one T4: generating all 64 at
    once does not fit, so the planner tries TRL's default first and then smaller forward
    batches; it never turns checkpointing on (PPOTrainer would not)."""
    from trainplan.engine.plan import plan
    from trainplan.engine.plan_request import PlanRequest
    from trainplan.engine.plan_rollout import PPO_FORWARD_BATCHES

    fields = {**PPO, "model": "Pythia-1B", "method": "lora", "grad_accum": 16, "seq_len": 1024, "gpu": "T4"}
    assert not estimate(fields).fits
    result = plan(PlanRequest(base=scenario_from_mapping(fields), gpu_types=("T4",), max_gpus=1))
    assert result.plans
    for found in result.plans:
        assert found.estimate.fits and found.scenario.activation_checkpointing == "none"
        assert found.scenario.rollout_forward_batch in PPO_FORWARD_BATCHES[1:]
        assert estimate(found.scenario).total_bytes == found.estimate.total_bytes


# meta-llama/Llama-3.2-1B: 1,235,814,400 parameters with the embedding tied to the head; as a value
# or reward model the head gives way to a 2,048 x 1 score
SMALL_VALUE_PARAMS = 1_235_814_400 + 2_048


def test_a_smaller_value_and_reward_model_beside_an_8b_policy() -> None:
    """critic_model and reward_model name their own architectures (TRL's reward_model_path): a
    full 8B policy under ZeRO-3 on 8 GPUs trains a Llama-3.2-1B value model, each GPU an eighth
    of its bf16 weights and gradients, fp32 master and two AdamW moments (16 bytes), and holds an
    eighth of the frozen 1B reward model in bf16; the scoring forward's hidden states are the
    larger model's, the reference's (the policy's) logits beside them."""
    fields = {
        **PPO,
        "model": "Llama-3.1-8B",
        "critic_model": "Llama-3.2-1B",
        "reward_model": "Llama-3.2-1B",
        "gpus": 8,
        "zero_stage": 3,
        "micro_batch": 2,
        "grad_accum": 8,
        "seq_len": 1024,
    }
    result = estimate(fields)
    states = _states(result)
    assert states["critic"] == pytest.approx(16 * SMALL_VALUE_PARAMS / 8, rel=1e-12)
    assert states["reward_model"] == pytest.approx(2 * SMALL_VALUE_PARAMS / 8, rel=1e-12)
    assert result.assumptions["value_model"] == "Llama-3.2-1B, one-score head"
    same = _states(estimate({**fields, "critic_model": None, "reward_model": None}))
    assert same["critic"] > 6 * states["critic"]
    # 16 sequences of 1,024 scored at once (on one GPU, without ZeRO-3's gathered layers):
    # Llama-3.1-8B's 33 hidden states of 4,096 and logits over 128,256 tokens, in bf16
    tokens = 16 * 1024
    one = estimate({**fields, "gpus": 1, "zero_stage": 0})
    assert _phase(one, "scoring")["temporaries"] == pytest.approx(
        33 * tokens * 4096 * 2 + tokens * 128_256 * 2, rel=1e-12
    )


@pytest.mark.parametrize("field", ["critic_model", "reward_model"])
def test_a_value_or_reward_model_that_does_not_resolve_names_its_field(field: str) -> None:
    with pytest.raises(InputError) as error:
        estimate({**PPO, field: "no-such-model-anywhere"})
    assert error.value.field == field
    with pytest.raises(InputError) as error:
        estimate({**PPO, field: "SDXL-base-1.0"})
    assert error.value.field == field and "language model" in error.value.message


def test_trls_reward_model_path_names_both_models(tmp_path: Path) -> None:
    """examples/scripts/ppo/ppo.py at f2cd5771 loads the value model and the reward model from
    reward_model_path: a Qwen2.5-0.5B reward model beside a Qwen2.5-1.5B policy."""
    from trainplan.inputs.configs import scenario_from_config

    path = tmp_path / "ppo.yaml"
    path.write_text(
        "model_name_or_path: Qwen/Qwen2.5-1.5B\nsft_model_path: Qwen/Qwen2.5-1.5B\n"
        "reward_model_path: Qwen/Qwen2.5-0.5B\nnum_ppo_epochs: 1\n"
    )
    mapping = scenario_from_config([path]).mapping
    assert (mapping["critic_model"], mapping["reward_model"]) == ("Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-0.5B")
    result = estimate(scenario_from_mapping(mapping))
    assert result.assumptions["reward_model"] == "Qwen2.5-0.5B, one-score head"
