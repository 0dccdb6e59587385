"""Memory savers of the frameworks: hand-computed bytes, invariants and the refused combinations.

Llama-3.1-8B (tests/configs.py): hidden 4096, 32 layers, 32 heads of 128, 8 KV heads (k/v width
1024), MLP 14336, vocabulary 128256, untied head.
"""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.engine.estimate import estimate
from trainplan.engine.terms.memory import logits_bytes
from trainplan.engine.terms.savers import (
    checkpointed_layers,
    chunked_loss_bytes,
    lora_dropout_input_bytes,
    op_sac_saved,
)
from trainplan.inputs.hf import spec_from_config
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import Scenario, scenario_from_mapping

P = 8_030_261_248  # Llama-3.1-8B parameters (test_params.py)
LINEAR = 32 * (41_943_040 + 176_160_768)  # every matrix inside the layers
VOCAB, HIDDEN, LAYERS = 128256, 4096, 32
EMBEDDING = VOCAB * HIDDEN


def run(config: dict[str, Any], **fields: Any) -> Any:
    base = {"model": "x", "overhead_gib": 0.0, "cache_fraction": 0.0, "grad_accum": 1}
    return estimate(scenario_from_mapping({**base, **fields}), model=spec_from_config(config, "l8b"))


def term(result: Any, phase: str, name: str) -> float:
    return float(next(p for p in result.phases if p.name == phase).term(name).value)


# --- chunked cross-entropy -------------------------------------------------------------------


def test_chunked_loss_per_token_bytes() -> None:
    # bf16 logits of all chunks (2) + fp32 log-softmax of all chunks (4) + one chunk's fp32
    # upcast (4/8) while the loss runs; 4 held; backward: 4 + two fp32 chunk gradients (8/8)
    assert chunked_loss_bytes(1000, 2, 8) == (4000, 6500, 5000)
    # fp32 training has no upcast: 4 + 4 while the loss runs
    assert chunked_loss_bytes(1000, 4, 8) == (4000, 8000, 5000)


@pytest.mark.parametrize("activation_bytes", [2, 4])
def test_one_chunk_is_the_standard_loss(activation_bytes: int) -> None:
    assert chunked_loss_bytes(VOCAB, activation_bytes, 1) == logits_bytes(VOCAB, activation_bytes)


def test_chunked_loss_in_the_estimate(llama8b_config: dict[str, Any]) -> None:
    fields = {"method": "lora", "seq_len": 2048, "micro_batch": 1}
    standard = run(llama8b_config, **fields)
    chunked = run(llama8b_config, **fields, loss="chunked")
    tokens = 2048
    assert term(chunked, "forward", "logits") == 6.5 * VOCAB * tokens
    assert term(standard, "forward", "logits") == 10 * VOCAB * tokens
    assert chunked.total_bytes < standard.total_bytes
    more = run(llama8b_config, **fields, loss="chunked", loss_chunks=16)
    assert term(more, "forward", "logits") == (6 + 4 / 16) * VOCAB * tokens


def test_loss_chunks_without_chunked_loss_warns(llama8b_config: dict[str, Any]) -> None:
    result = run(llama8b_config, loss_chunks=4)
    assert any("loss_chunks has no effect" in w for w in result.warnings)


# --- LoRA dropout ----------------------------------------------------------------------------


def test_lora_dropout_bytes_per_module() -> None:
    # 16-bit stream: fp32 dropped copy (4) + bool mask (1); autocast: the bf16 copy lora_A keeps
    assert lora_dropout_input_bytes(2, False, 100) == 500
    assert lora_dropout_input_bytes(2, True, 100) == 300
    assert lora_dropout_input_bytes(4, False, 100) == 500


def test_lora_dropout_adds_a_mask_per_adapted_module(llama8b_config: dict[str, Any]) -> None:
    # q_proj and v_proj read the hidden state: on a bf16 stream each kept a 4-byte fp32 copy
    # without dropout, and keeps the 4-byte dropped copy plus a 1-byte mask with it
    fields = {"method": "lora", "activation_checkpointing": "none", "seq_len": 1024}
    plain = run(llama8b_config, **fields)
    dropped = run(llama8b_config, **fields, lora={"dropout": 0.05})
    delta = term(dropped, "forward", "activations") - term(plain, "forward", "activations")
    assert delta == LAYERS * 2 * HIDDEN * 1 * 1024


def test_lora_dropout_range() -> None:
    with pytest.raises(InputError) as error:
        scenario_from_mapping({"lora": {"dropout": 1.5}})
    assert error.value.field == "lora.dropout" and "0.99" in error.value.message


# --- optimizer in backward -------------------------------------------------------------------


def test_optimizer_in_backward_holds_one_gradient(llama8b_config: dict[str, Any]) -> None:
    fields = {"method": "full", "precision": "bf16", "optimizer": "adamw-fused"}
    plain = run(llama8b_config, **fields)
    stepped = run(llama8b_config, **fields, optimizer_in_backward=True)
    states = {t.name: t.value for t in stepped.states}
    # the largest tensor is the embedding (128256 x 4096), its bf16 gradient 2 bytes each
    assert states["gradients"] == 2 * EMBEDDING
    assert {t.name: t.value for t in plain.states}["gradients"] == 2 * P
    assert term(plain, "optimizer", "gradients") - term(stepped, "optimizer", "gradients") == 2 * (
        P - EMBEDDING
    )
    assert stepped.total_bytes <= plain.total_bytes


def test_optimizer_in_backward_steps_the_tied_embedding_after_the_sum() -> None:
    """At the end of backward a tied embedding's gradient is summed from the head's (waiting in
    autograd's input buffer) and the embedding's own: three head-sized tensors for a moment, one
    counted as the gradient present; the step's temporaries (foreach AdamW's state-sized
    sqrt(v), bf16) come once the two inputs are freed, beside the sum alone. Llama-3.2-1B's head:
    128256 x 2048 x 2 bytes (a traced step: +4.9% when the step was counted beside the sum, 0.0%
    after)."""
    from trainplan.engine.estimate import device_of, layout_of
    from trainplan.engine.per_gpu import memory
    from trainplan.engine.per_replica import coefficients
    from trainplan.inputs.resolve import chosen_gpu, resolve_model

    scenario = scenario_from_mapping(
        {"model": "Llama-3.2-1B", "method": "full", "precision": "bf16", "optimizer": "adamw",
         "optimizer_in_backward": True, "grad_accum": 1, "seq_len": 1024}
    )  # fmt: skip
    c = coefficients(resolve_model(scenario.model), scenario)
    end, _ = memory(c, layout_of(c, scenario, device_of(scenario, chosen_gpu(scenario)[0]))).moments[
        "backward end"
    ]
    head = 128256 * 2048 * 2
    assert end["gradients"] == head
    assert end["temporaries"] == 2 * head


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"grad_accum": 4}, "grad_accum"),
        ({"offload": "optimizer", "grad_accum": 1}, "offload"),
    ],
)
def test_optimizer_in_backward_refuses(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(InputError) as error:
        scenario_from_mapping({"method": "full", "optimizer_in_backward": True, **fields})
    assert error.value.field == "optimizer_in_backward" and named in error.value.message


# --- checkpointing: full:N and op-level SAC ---------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "parsed"), [("full:1", "full"), ("FULL:4", "full:4"), (" op ", "op"), ("full", "full")]
)
def test_checkpointing_values(raw: str, parsed: str) -> None:
    assert scenario_from_mapping({"activation_checkpointing": raw}).activation_checkpointing == parsed


@pytest.mark.parametrize("raw", ["full:0", "full:x", "full:-2", "partial"])
def test_checkpointing_errors(raw: str) -> None:
    with pytest.raises(InputError) as error:
        scenario_from_mapping({"activation_checkpointing": raw})
    assert error.value.field == "activation_checkpointing"


def test_every_nth_layer_is_checkpointed(llama8b_config: dict[str, Any]) -> None:
    spec = spec_from_config(llama8b_config, "l8b")
    assert checkpointed_layers(spec, 3) == [10]  # layers 3, 6, ..., 30
    assert checkpointed_layers(spec, 1) == [32]
    assert checkpointed_layers(spec, 64) == [0]


def test_full_n_interpolates_memory_and_recompute(llama8b_config: dict[str, Any]) -> None:
    fields = {"method": "full", "precision": "bf16", "optimizer": "adamw-fused", "seq_len": 2048}
    none, full, third = (
        run(llama8b_config, **fields, activation_checkpointing=mode) for mode in ("none", "full", "full:3")
    )
    # 10 of 32 layers keep only their input, 22 keep everything
    act = {
        name: term(r, "forward", "activations") for name, r in (("none", none), ("full", full), ("n", third))
    }
    assert act["n"] - act["full"] == pytest.approx(22 / 32 * (act["none"] - act["full"]), rel=1e-12)
    assert third.time.flops.recompute == pytest.approx(10 / 32 * full.time.flops.recompute, rel=1e-12)
    assert full.time.tokens_per_s < third.time.tokens_per_s < none.time.tokens_per_s


def test_op_sac_saves_every_second_matmul(llama8b_config: dict[str, Any]) -> None:
    spec = spec_from_config(llama8b_config, "l8b")
    saved, recomputed = op_sac_saved(spec.blocks[0], spec, 2)
    # matmuls in order q, k, v, o, gate, up, down: q, v, gate and down saved (bf16), plus the
    # SDPA output (bf16, 32 x 128) and its fp32 logsumexp (one per head)
    assert saved == 2 * (4096 + 1024 + 14336 + 4096) + 2 * 4096 + 4 * 32
    # k, o and up are recomputed
    assert recomputed == 4096 * 1024 + 4096 * 4096 + 4096 * 14336


def test_op_sac_between_full_and_none(llama8b_config: dict[str, Any]) -> None:
    fields = {"method": "full", "precision": "bf16", "optimizer": "adamw-fused", "seq_len": 2048}
    none, full, op = (
        run(llama8b_config, **fields, activation_checkpointing=mode) for mode in ("none", "full", "op")
    )
    spec = spec_from_config(llama8b_config, "l8b")
    saved, recomputed = op_sac_saved(spec.blocks[0], spec, 2)
    delta = term(op, "forward", "activations") - term(full, "forward", "activations")
    assert delta == LAYERS * saved * 2048
    assert op.time.flops.recompute == LAYERS * 2 * recomputed
    assert term(op, "forward", "activations") < term(none, "forward", "activations")
    assert full.time.tokens_per_s < op.time.tokens_per_s < none.time.tokens_per_s


# --- activation offloading ---------------------------------------------------------------------


def test_activation_offload_keeps_two_layers(llama8b_config: dict[str, Any]) -> None:
    # full checkpointing keeps each layer's bf16 input (2 x 4096 bytes per token); offloading
    # moves 30 of the 32 to CPU memory
    fields = {"method": "lora", "activation_checkpointing": "full", "seq_len": 4096}
    kept = run(llama8b_config, **fields)
    moved = run(llama8b_config, **fields, activation_offload=True)
    assert moved.cpu_offload_bytes == 30 * 2 * HIDDEN * 4096
    delta = term(kept, "forward", "activations") - term(moved, "forward", "activations")
    assert delta == moved.cpu_offload_bytes
    # 2 x 1 GiB over PCIe hides under a step of several seconds
    assert moved.time.step.offload == 0.0


# --- kbit upcast and paged optimizers -------------------------------------------------------


def test_kbit_upcast_casts_the_unquantised_rest(llama8b_config: dict[str, Any]) -> None:
    plain = run(llama8b_config, method="qlora")
    upcast = run(llama8b_config, method="qlora", kbit_upcast=True)
    delta = {t.name: t.value for t in upcast.states}["weights"] - {t.name: t.value for t in plain.states}[
        "weights"
    ]
    # embedding + head + 65 RMSNorm weights, bf16 (2) -> fp32 (4)
    assert delta == 2 * (P - LINEAR)
    assert term(upcast, "forward", "activations") > term(plain, "forward", "activations")


def test_kbit_upcast_needs_a_quantised_base() -> None:
    with pytest.raises(InputError) as error:
        scenario_from_mapping({"method": "lora", "kbit_upcast": True})
    assert error.value.field == "kbit_upcast" and "quantised base" in error.value.message
    assert scenario_from_mapping({"method": "lora", "base_weights": "nf4", "kbit_upcast": True}).kbit_upcast


def test_paged_optimizer_state_is_outside_the_resident_peak(llama8b_config: dict[str, Any]) -> None:
    """bitsandbytes' PagedAdamW8bit keeps its two 8-bit states (1 byte and a 4-byte absmax per
    256 values each) in unified memory, which the driver pages to the host under pressure and
    max_memory_allocated never counts: 8,030,261,248 x 2 x (1 + 4/256) bytes outside the peak,
    while the fp32 master copy (4 bytes each under bf16-mixed) stays resident. The warning says
    whether the states fit in what the peak leaves free, and how much pages out if not."""
    params = 8_030_261_248
    paged = run(llama8b_config, method="full", optimizer="paged-adamw-8bit", gpu="H100-SXM")
    plain = run(llama8b_config, method="full", optimizer="adamw-8bit", gpu="H100-SXM")
    assert paged.paged_bytes == params * 2 * (1 + 4 / 256)
    assert paged.peak.term("optimizer").value == 4 * params
    assert paged.peak.name == plain.peak.name == "backward"
    assert plain.total_bytes - paged.total_bytes == pytest.approx(paged.paged_bytes)
    assert plain.paged_bytes == 0 and not any(w.startswith("paged:") for w in plain.warnings)
    free = paged.chosen_fit.memory_bytes - paged.total_bytes
    assert paged.paged_bytes <= free
    (line,) = [w for w in paged.warnings if w.startswith("paged: ")]
    assert line.endswith(f"it fits in the {free / 2**30:.2f} GiB left free on H100 SXM 80GB")
    # 6 GiB more overhead leaves less free than the states need: the rest pages to the host
    tight = run(llama8b_config, method="full", optimizer="paged-adamw-8bit", gpu="H100-SXM", overhead_gib=8)
    free = tight.chosen_fit.memory_bytes - tight.total_bytes
    assert 0 < free < tight.paged_bytes and tight.fits
    (line,) = [w for w in tight.warnings if w.startswith("paged: ")]
    assert f"so {(tight.paged_bytes - free) / 2**30:.2f} GiB per GPU pages to the host" in line
    # a peak beyond the GPU's memory says so rather than what pages out
    short = run(llama8b_config, method="full", optimizer="paged-adamw-8bit", gpu="RTX 4090")
    (line,) = [w for w in short.warnings if w.startswith("paged: ")]
    assert line.endswith("the resident peak alone is more than the GeForce RTX 4090's memory")


def test_savers_round_trip() -> None:
    from trainplan.specs.scenario import scenario_to_mapping

    scenario = scenario_from_mapping(
        {
            "method": "qlora",
            "kbit_upcast": True,
            "loss": "chunked",
            "loss_chunks": 4,
            "activation_checkpointing": "full:2",
            "activation_offload": True,
            "lora": {"dropout": 0.1},
        }
    )
    assert scenario_from_mapping(scenario_to_mapping(scenario)) == scenario
    assert Scenario().lora.dropout == 0.0


# --- adapter dtype ---------------------------------------------------------------------------


def test_compute_dtype_adapters(llama8b_config: dict[str, Any]) -> None:
    # torchtune keeps adapters in bf16: 2 + 2 bytes of weight and gradient and 2 x 2 of AdamW
    # state per adapter parameter, against peft's fp32 4 + 4 + 8
    fields = {"method": "lora", "activation_checkpointing": "none", "seq_len": 1024}
    peft = run(llama8b_config, **fields)
    bf16 = run(llama8b_config, **fields, lora={"dtype": "compute"})
    adapters = peft.params.lora
    assert {t.name: t.value for t in bf16.states}["optimizer"] == 4 * adapters
    assert {t.name: t.value for t in peft.states}["optimizer"] == 8 * adapters
    # q_proj and v_proj read the same bf16 hidden state: kept once (2 bytes), not as two fp32
    # copies (2 x 4 bytes)
    delta = term(peft, "forward", "activations") - term(bf16, "forward", "activations")
    assert delta == LAYERS * (2 * 4 - 2) * HIDDEN * 1024
    with pytest.raises(InputError) as error:
        scenario_from_mapping({"lora": {"dtype": "fp8"}})
    assert error.value.field == "lora.dtype"
