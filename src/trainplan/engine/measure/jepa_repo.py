# mypy: disable-error-code="no-untyped-call"
# (torch is only partly typed; its untyped calls are expected here.)
"""An I-JEPA or V-JEPA 1 pretraining step, on modules laid out as the original repos build them.

No library ships these models (transformers' IJepaModel is the encoder alone, without the
predictor, and with separate q/k/v), so the trace builds their layout here from the repos'
module trees: facebookresearch/ijepa src/models/vision_transformer.py and facebookresearch/jepa
src/models/utils/modules.py, src/models/vision_transformer.py, src/models/predictor.py. A block
is LayerNorm, one fused qkv linear reshaped to heads, attention (I-JEPA: `q @ k.T * scale`,
softmax, `@ v`; V-JEPA: F.scaled_dot_product_attention), the transpose back, proj, LayerNorm,
fc1, GELU, fc2; the encoder adds a fixed sin-cos table to its patch (or tubelet) embedding and
keeps the context tokens; the predictor maps them to its width, adds its own table, appends one
mask token per target position and projects the targets back.

The steps follow the repos' train.py: I-JEPA (src/train.py) runs the context encoder once on the
context block and the predictor once per target block (`x.repeat(len(masks), 1, 1)`), with
smooth L1 against the layer-normed target-encoder output; V-JEPA (app/vjepa/train.py) runs both
once per mask generator, with an L1 loss averaged over the generators. The EMA target encoder
runs under no_grad on all tokens, and moves with momentum after the optimizer step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from trainplan.engine.measure.denoiser import Batch, SampleStep, cast
from trainplan.engine.measure.jepa import MOMENTUM
from trainplan.engine.terms.geometry import TokenShape
from trainplan.inputs.hf.values import get_int


def _gather(x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The tokens `ids` of each row (the repos' apply_masks)."""
    return torch.gather(x, 1, ids.unsqueeze(-1).expand(-1, -1, x.size(-1)))


class _Attention(nn.Module):
    def __init__(self, width: int, heads: int, eager: bool) -> None:
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.heads, self.eager = heads, eager

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        if self.eager:
            scores = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
            out = scores.softmax(dim=-1) @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v)
        out_: torch.Tensor = self.proj(out.transpose(1, 2).reshape(b, n, c))
        return out_


class _Block(nn.Module):
    def __init__(self, width: int, heads: int, mlp_ratio: float, eager: bool) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width, eps=1e-6)
        self.attn = _Attention(width, heads, eager)
        self.norm2 = nn.LayerNorm(width, eps=1e-6)
        self.fc1 = nn.Linear(width, int(width * mlp_ratio))
        self.fc2 = nn.Linear(int(width * mlp_ratio), width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        out: torch.Tensor = x + self.fc2(F.gelu(self.fc1(self.norm2(x))))
        return out


def _run(blocks: nn.ModuleList, x: torch.Tensor, checkpointed: bool) -> torch.Tensor:
    for block in blocks:
        x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False) if checkpointed else block(x)
    return x


class _Encoder(nn.Module):
    def __init__(self, cfg: dict[str, Any], video: bool, eager: bool, tokens: int) -> None:
        super().__init__()
        width = get_int(cfg, "hidden_size")
        patch = get_int(cfg, "patch_size")
        channels = get_int(cfg, "in_chans", "num_channels", default=3)
        if video:
            tubelet = get_int(cfg, "tubelet_size", default=2)
            self.patch: nn.Module = nn.Conv3d(
                channels, width, (tubelet, patch, patch), (tubelet, patch, patch)
            )
        else:
            self.patch = nn.Conv2d(channels, width, patch, patch)
        ratio = float(cfg.get("mlp_ratio") or get_int(cfg, "intermediate_size", default=4 * width) / width)
        heads = get_int(cfg, "num_attention_heads")
        # the fixed sin-cos table: V-JEPA's a buffer; I-JEPA's a parameter, as transformers'
        # IJepaModel (whose count the catalog takes) keeps it
        self.pos: torch.Tensor
        if video:
            self.register_buffer("pos", torch.zeros(1, tokens, width))
        else:
            self.pos = nn.Parameter(torch.zeros(1, tokens, width))
        self.blocks = nn.ModuleList(
            _Block(width, heads, ratio, eager) for _ in range(get_int(cfg, "num_hidden_layers"))
        )
        self.norm = nn.LayerNorm(width, eps=1e-6)
        self.checkpointed = False

    def forward(self, x: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2) + self.pos
        if ids is not None:
            x = _gather(x, ids)
        out: torch.Tensor = self.norm(_run(self.blocks, x, self.checkpointed))
        return out


class _Predictor(nn.Module):
    def __init__(self, cfg: dict[str, Any], eager: bool, tokens: int, mask_tokens: int) -> None:
        super().__init__()
        width = get_int(cfg, "hidden_size")
        predictor = get_int(cfg, "pred_hidden_size", default=384)
        heads = get_int(cfg, "pred_num_attention_heads", "num_attention_heads")
        self.embed = nn.Linear(width, predictor)
        self.mask_tokens = nn.Parameter(torch.zeros(mask_tokens, predictor))
        self.pos: torch.Tensor
        self.register_buffer("pos", torch.zeros(1, tokens, predictor))
        depth = get_int(cfg, "pred_num_hidden_layers", default=12)
        self.blocks = nn.ModuleList(_Block(predictor, heads, 4.0, eager) for _ in range(depth))
        self.norm = nn.LayerNorm(predictor, eps=1e-6)
        self.proj = nn.Linear(predictor, width)
        self.checkpointed = False

    def forward(self, z: torch.Tensor, ids: torch.Tensor, targets: torch.Tensor, index: int) -> torch.Tensor:
        b = z.size(0)
        pos = self.pos.expand(b, -1, -1)
        x = self.embed(z) + _gather(pos, ids)
        passes = targets.size(0) // b
        x = x.repeat(passes, 1, 1)
        token = self.mask_tokens[index % self.mask_tokens.size(0)]
        queries = token + _gather(self.pos.expand(targets.size(0), -1, -1), targets)
        x = torch.cat([x, queries], dim=1)
        x = self.norm(_run(self.blocks, x, self.checkpointed))
        out: torch.Tensor = self.proj(x[:, ids.size(1) :])
        return out


class _Jepa(nn.Module):
    def __init__(self, encoder: _Encoder, predictor: _Predictor) -> None:
        super().__init__()
        self.encoder, self.predictor = encoder, predictor


def repo_jepa_step(
    config: dict[str, Any],
    shape: TokenShape,
    micro_batch: int,
    masks: Sequence[tuple[float, float, int]],
    dtype: torch.dtype,
    target_dtype: torch.dtype,
    amp: bool,
    gradient_checkpointing: bool,
) -> SampleStep:
    """The I-JEPA (`ijepa`) or V-JEPA (`vjepa`) step of `config` on `micro_batch` samples of
    `shape`, one mask generator per (context share, target share, predictor passes) of `masks`."""
    video = str(config.get("model_type")) == "vjepa"
    eager = not video  # I-JEPA's Attention computes the softmax itself
    tokens, b = shape.image_tokens, micro_batch
    encoder = _Encoder(config, video, eager, tokens)
    predictor = _Predictor(config, eager, tokens, get_int(config, "pred_num_mask_tokens", default=1))
    encoder.checkpointed = predictor.checkpointed = gradient_checkpointing
    model: Any = cast(_Jepa(encoder, predictor), dtype)
    target = cast(_Encoder(config, video, eager, tokens), target_dtype)
    target.requires_grad_(False)
    counts = [(round(c * tokens), round(t * tokens), p) for c, t, p in masks]
    channels = get_int(config, "in_chans", "num_channels", default=3)

    def make_batch() -> Batch:
        if video:
            x = torch.randn(b, channels, shape.frames, shape.height_px, shape.width_px)
        else:
            x = torch.randn(b, channels, shape.height_px, shape.width_px)
        batch = {"x": x}
        for i, (visible, hidden, passes) in enumerate(counts):
            order = torch.rand(b, tokens).argsort(dim=1)
            batch[f"context{i}"] = order[:, :visible].sort(dim=1).values
            rest = order[:, visible:]
            # each pass predicts `hidden` of the tokens outside the context (blocks may overlap)
            picks = [rest[:, torch.randperm(rest.size(1))[:hidden]] for _ in range(passes)]
            batch[f"target{i}"] = torch.cat(picks, dim=0).sort(dim=1).values
        return batch

    def loss_of(_model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        x = batch["x"]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            with torch.no_grad():
                h = target(x)
                h = F.layer_norm(h, (h.size(-1),))
            loss = torch.zeros((), dtype=torch.float32)
            for i, (_, _, passes) in enumerate(counts):
                ids, targets = batch[f"context{i}"], batch[f"target{i}"]
                prediction = model.predictor(model.encoder(x, ids), ids, targets, i)
                wanted = _gather(h.repeat(passes, 1, 1), targets)
                if video:
                    # app/vjepa/train.py loss_fn: mean(|z - h| ** loss_exp) / loss_exp, loss_exp 1.0
                    loss = loss + torch.mean(torch.abs(prediction - wanted) ** 1.0)
                else:
                    loss = loss + F.smooth_l1_loss(prediction, wanted)
        return loss / len(counts)

    weights: list[torch.Tensor] = list(target.parameters())
    sources: list[torch.Tensor] = list(encoder.parameters())

    def momentum_update() -> None:
        with torch.no_grad():
            torch._foreach_mul_(weights, MOMENTUM)
            for k, q in zip(weights, sources, strict=True):
                k.add_(q.to(k.dtype), alpha=1 - MOMENTUM)

    family = "V-JEPA" if video else "I-JEPA"
    notes = [
        f"{family} step on the repo's module layout: "
        + ", ".join(f"{v} context / {t} target tokens x {p} pass(es)" for v, t, p in counts)
        + f" of {tokens}; target encoder in {str(target_dtype).removeprefix('torch.')}"
    ]
    return SampleStep(model, family.lower(), make_batch, loss_of, notes, weights, momentum_update)
