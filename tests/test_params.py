"""Parameter counts: hand-derived cases and the LoRA arithmetic."""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.engine.terms.params import count_params, module_names
from trainplan.inputs.hf import spec_from_config
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import LoraSettings


def test_llama_8b_total_by_hand(llama8b_config: dict[str, Any]) -> None:
    # per layer: q 4096*4096 + k,v 2*4096*1024 + o 4096*4096          = 41,943,040
    #            gate, up, down 3*4096*14336                           = 176,160,768
    #            two RMSNorm weights 2*4096                            = 8,192
    # 32 layers                                                        = 6,979,584,000
    # embedding + untied head 2*128256*4096                            = 1,050,673,152
    # final norm 4096                                    total        = 8,030,261,248
    spec = spec_from_config(llama8b_config, "l8b")
    counts = count_params(spec, "full", LoraSettings())
    assert counts.total == 8_030_261_248
    assert counts.trainable == counts.total
    assert counts.embedding == 128256 * 4096


def test_lora_qv_by_hand(llama8b_config: dict[str, Any]) -> None:
    # q: r*(4096+4096) = 16*8192 = 131,072; v: r*(4096+1024) = 16*5120 = 81,920
    # per layer 212,992; 32 layers = 6,815,744 (the seed page shows 6.8M, 0.08% of base)
    spec = spec_from_config(llama8b_config, "l8b")
    counts = count_params(spec, "lora", LoraSettings(rank=16, targets="qv"))
    assert counts.trainable == 6_815_744
    assert counts.trainable_fraction == pytest.approx(6_815_744 / 8_030_261_248)
    assert round(counts.trainable_fraction * 100, 2) == 0.08


def test_lora_all_linear_and_dora(llama8b_config: dict[str, Any]) -> None:
    spec = spec_from_config(llama8b_config, "l8b")
    # all-linear adds k (16*5120), o (16*8192), gate/up (16*(4096+14336)) x2, down (same)
    per_layer = 16 * (8192 + 5120 + 5120 + 8192 + 3 * (4096 + 14336))
    lora = count_params(spec, "lora", LoraSettings(rank=16, targets="all-linear"))
    assert lora.trainable == 32 * per_layer
    # DoRA adds one magnitude per output feature of each targeted matrix: q 4096 + v 1024
    dora = count_params(spec, "lora", LoraSettings(rank=16, targets="qv", dora=True))
    assert dora.trainable == 6_815_744 + 32 * (4096 + 1024)


def test_explicit_module_list(llama8b_config: dict[str, Any]) -> None:
    spec = spec_from_config(llama8b_config, "l8b")
    counts = count_params(spec, "lora", LoraSettings(rank=8, targets=("down_proj",)))
    assert counts.trainable == 32 * 8 * (14336 + 4096)
    with pytest.raises(InputError, match=r"lora\.targets.*q_proj"):
        count_params(spec, "lora", LoraSettings(targets=("nonexistent",)))
    assert module_names(spec)[:4] == ["q_proj", "k_proj", "v_proj", "o_proj"]


def test_gpt2_small_by_hand() -> None:
    # wte 50257*768 + wpe 1024*768 = 39,383,808
    # per layer: ln 2*(2*768) + c_attn 768*2304+2304 + c_proj 768*768+768
    #            + c_fc 768*3072+3072 + c_proj 3072*768+768 = 7,087,872; x12 = 85,054,464
    # final ln 1,536; tied head -> 124,439,808 (GPT-2 small)
    cfg = {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
           "vocab_size": 50257}  # fmt: skip
    counts = count_params(spec_from_config(cfg, "gpt2"), "full", LoraSettings())
    assert counts.total == 124_439_808


def test_qwen2_biases_and_tied() -> None:
    # Qwen2.5-0.5B: h 896, 24 layers, 14 heads (64), 2 kv heads, f 4864, V 151936, tied,
    # q/k/v biases. Published: 494,032,768 (Qwen2.5-0.5B model card, 0.49B)
    cfg = {"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
           "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
           "vocab_size": 151936, "tie_word_embeddings": True}  # fmt: skip
    spec = spec_from_config(cfg, "qwen")
    per_layer = (896 * 896 + 896) + 2 * (896 * 128 + 128) + 896 * 896 + 3 * 896 * 4864 + 2 * 896
    assert count_params(spec, "full", LoraSettings()).total == 24 * per_layer + 151936 * 896 + 896
    assert count_params(spec, "full", LoraSettings()).total == 494_032_768


def test_moe_active_params() -> None:
    # Mixtral-8x7B: 8 experts, top-2; each expert 3*4096*14336 per layer
    cfg = {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
           "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
           "vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2}  # fmt: skip
    counts = count_params(spec_from_config(cfg, "mixtral"), "full", LoraSettings())
    expert = 3 * 4096 * 14336
    assert counts.total - counts.active == 32 * 6 * expert
    assert counts.total == 46_702_792_704  # Mixtral-8x7B published 46.7B


def test_missing_mlp_width_is_flagged() -> None:
    cfg = {"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 8,
           "num_hidden_layers": 2, "vocab_size": 1000}  # fmt: skip
    spec = spec_from_config(cfg, "x")
    assert spec.blocks[0].mlp.intermediate_size == 3584
    assert spec.approximations and "3.5 x hidden" in spec.approximations[0]


@pytest.mark.parametrize(
    ("config", "experts_adapted"),
    [
        ({"model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2}, True),
        ({"model_type": "qwen3_moe", "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 96,
          "head_dim": 16}, True),
        ({"model_type": "qwen2_moe", "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 96,
          "shared_expert_intermediate_size": 128}, False),
        ({"model_type": "gpt_oss", "num_local_experts": 4, "num_experts_per_tok": 2, "head_dim": 16,
          "layer_types": ["full_attention", "full_attention"]}, False),
    ],
)  # fmt: skip
def test_moe_adapters_are_peft_s(config: dict[str, Any], experts_adapted: bool) -> None:
    # transformers 5 stores routed experts as fused 3-D parameters; peft's all-linear reaches them
    # only for the architectures its MoE conversion maps (mixtral and qwen2_moe patterns): there
    # gate and up are one gate_up parameter at twice the rank, and the router's weight is adapted
    # too; a gpt-oss LoRA adapts the attention alone. The count is peft's own, on the model
    # transformers builds.
    pytest.importorskip("peft")
    transformers = pytest.importorskip("transformers")
    import warnings
    from dataclasses import replace

    from peft import LoraConfig, get_peft_model

    from trainplan.engine.terms.params import lora_params
    from trainplan.inputs.hf import spec_from_config
    from trainplan.specs.scenario import LoraSettings

    full = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 128, **config}  # fmt: skip
    model_type = full.pop("model_type")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        built = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.for_model(model_type, **full)
        )
        peft_model = get_peft_model(built, LoraConfig(r=4, target_modules="all-linear"))
    peft_count = sum(p.numel() for n, p in peft_model.named_parameters() if "lora_" in n)
    spec = spec_from_config({"model_type": model_type, **full}, model_type)
    ours = lora_params(spec, LoraSettings(rank=4, targets="all-linear"))
    assert ours == peft_count
    # the routed experts' adapters, against the same count with them left out
    frozen = lora_params(replace(spec, blocks=tuple(
        replace(b, mlp=replace(b.mlp, expert_adapters=False)) if b.mlp else b for b in spec.blocks)),
        LoraSettings(rank=4, targets="all-linear"))  # fmt: skip
    assert (ours > frozen) == experts_adapted
