# mypy: disable-error-code="no-untyped-call"
# (torch and transformers are only partly typed; their untyped calls are expected here.)
"""A V-JEPA 2 pretraining step on transformers' VJEPA2Model modules, as the V-JEPA 2 code runs it.

facebookresearch/vjepa2 app/vjepa/train.py: per clip and per mask generator, the context encoder
embeds the clip, keeps the visible tokens (`apply_masks`) and runs its blocks on them; the
predictor maps them to its width, appends one mask token per target position, sorts all tokens
by position, runs its blocks and projects the target positions back to the encoder width. The
target encoder, an EMA copy of the encoder, runs under no_grad on all tokens and its output is
layer-normed; the loss is mean(|prediction - target| ** 1) over the target tokens, averaged over
the generators. After the optimizer step the target encoder moves towards the encoder with
momentum m (`_foreach_mul_(k, m)`, `_foreach_add_(k, q, alpha=1 - m)`). The whole step runs under
bf16 autocast on fp32 weights (`mixed_precision: true`).

transformers' `VJEPA2Model.forward` runs its encoder on all tokens and predicts from a subset,
which is the inference path; the training path is composed here from its embeddings, layers and
norms. Its predictor sizes the mask tokens from a data-dependent maximum, which fake tensors
cannot answer; V-JEPA 2's own predictor repeats them over all patches and gathers, as here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from trainplan.engine.measure.denoiser import Batch, SampleStep, cast
from trainplan.engine.terms.geometry import TokenShape
from trainplan.inputs.hf.values import get_int

#: V-JEPA 2's EMA momentum (configs/train/vitl16/pretrain-256px-16f.yaml `ema: [0.99925, 0.99925]`).
MOMENTUM = 0.99925


def vjepa2_step(
    config: dict[str, Any],
    shape: TokenShape,
    micro_batch: int,
    mask_ratios: Sequence[float],
    dtype: torch.dtype,
    target_dtype: torch.dtype,
    amp: bool,
    gradient_checkpointing: bool,
) -> SampleStep:
    """The V-JEPA 2 step of `config` on `micro_batch` clips of `shape`, one mask generator per
    entry of `mask_ratios` (each hides that share of the patch tokens)."""
    from transformers import VJEPA2Config, VJEPA2Model
    from transformers.initialization import no_init_weights
    from transformers.models.vjepa2.modeling_vjepa2 import VJEPA2Encoder, apply_masks

    kwargs = {
        key: value for key, value in config.items() if key not in ("model_type", "torch_dtype", "dtype")
    }
    hf_config = VJEPA2Config(**kwargs)
    with no_init_weights():  # trunc_normal_ asks for values a fake tensor does not have
        model: Any = cast(VJEPA2Model(hf_config), dtype)
        target = cast(VJEPA2Encoder(hf_config), target_dtype)
    target.requires_grad_(False)
    if gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    b, tokens = micro_batch, shape.image_tokens
    channels = get_int(config, "in_chans", default=3)
    counts = [(tokens - round(r * tokens), round(r * tokens)) for r in mask_ratios]
    encoder: Any = model.encoder
    predictor: Any = model.predictor

    def make_batch() -> Batch:
        batch = {"clips": torch.randn(b, shape.frames, channels, shape.height_px, shape.width_px)}
        for i, (visible, _hidden) in enumerate(counts):
            order = torch.rand(b, tokens).argsort(dim=1)
            batch[f"context{i}"] = order[:, :visible].sort(dim=1).values
            batch[f"target{i}"] = order[:, visible:].sort(dim=1).values
        return batch

    def context(clips: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        z = apply_masks(encoder.embeddings(clips), [ids])
        for layer in encoder.layer:
            z = layer(z, ids)[0]
        out: torch.Tensor = encoder.layernorm(z)
        return out

    def predict(z: torch.Tensor, ids: torch.Tensor, targets: torch.Tensor, index: int) -> torch.Tensor:
        embed = predictor.embeddings
        mask = embed.mask_tokens[index % embed.num_mask_tokens].repeat(b, tokens, 1)
        x = torch.cat([embed.predictor_embeddings(z), apply_masks(mask, [targets])], dim=1)
        positions = torch.cat([ids, targets], dim=1)
        order = torch.argsort(positions, dim=1)
        x, positions = predictor.sort_tokens(x, positions, order)
        for layer in predictor.layer:
            x = layer(x, positions)[0]
        x = predictor.unsort_tokens(predictor.layernorm(x), order)
        out: torch.Tensor = predictor.proj(x[:, ids.shape[1] :])
        return out

    def loss_of(_model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        clips = batch["clips"]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            with torch.no_grad():
                h = target(pixel_values_videos=clips).last_hidden_state
                h = torch.nn.functional.layer_norm(h, (h.size(-1),))
            loss = torch.zeros((), dtype=torch.float32)
            for i in range(len(counts)):
                ids, targets = batch[f"context{i}"], batch[f"target{i}"]
                prediction = predict(context(clips, ids), ids, targets, i)
                loss = loss + torch.mean(torch.abs(prediction - apply_masks(h, [targets])) ** 1.0)
        return loss / len(counts)

    weights: list[torch.Tensor] = list(target.parameters())
    sources: list[torch.Tensor] = list(encoder.parameters())

    def momentum_update() -> None:
        with torch.no_grad():
            torch._foreach_mul_(weights, MOMENTUM)
            if target_dtype == dtype:
                torch._foreach_add_(weights, sources, alpha=1 - MOMENTUM)
            else:  # one cast of each encoder tensor at a time
                for k, q in zip(weights, sources, strict=True):
                    k.add_(q.to(k.dtype), alpha=1 - MOMENTUM)

    notes = [
        f"V-JEPA 2 step: {len(counts)} mask generator(s), visible/target tokens "
        + ", ".join(f"{v}/{t}" for v, t in counts)
        + f" of {tokens}; target encoder in {str(target_dtype).removeprefix('torch.')}, "
        f"EMA momentum {MOMENTUM}"
    ]
    return SampleStep(model, "vjepa2", make_batch, loss_of, notes, weights, momentum_update)
