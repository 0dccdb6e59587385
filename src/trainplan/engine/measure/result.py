"""The result of one measured training run: plain numbers, no torch types.

Kept free of torch so the core package (and JSON tooling) can read measurements without the extra.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: Breakdown categories, in the order they are reported. They partition the tracked bytes.
CATEGORIES: tuple[str, ...] = (
    "params",
    "buffers",
    "grads",
    "optimizer",
    "activations",
    "temporaries",
    "ema",
)


@dataclass(frozen=True)
class MeasuredStep:
    """Peak tracked GPU memory of `steps` emulated training steps, with its breakdown at the peak.

    Every byte count is a sum of live storages, each rounded up to 512 B (the CUDA caching allocator's
    block granularity), so `peak_bytes` is the analogue of `torch.cuda.max_memory_allocated()` on a
    GPU. Not included: CUDA context, cuBLAS/cuDNN workspaces, allocator fragmentation and reserved but
    unused memory, in-kernel scratch. Categories (they sum to `peak_bytes`):

    - params / buffers: model parameters and registered buffers (frozen base weights included).
    - grads: `.grad` of trainable parameters.
    - optimizer: tensors held in `optimizer.state` (moments, momentum, and device `step` counters of
      the fused AdamW; the foreach AdamW keeps `step` on the host, so it is not counted).
    - activations: tensors produced in forward that are still alive when backward starts (saved
      for backward, plus the loss), and tensors re-saved by activation-checkpoint recomputation.
    - temporaries: everything else (forward intermediates freed before backward, autocast weight
      copies not saved, fp32 logits copies, activation gradients, optimizer scratch).
    - ema: an exponential-moving-average copy of the trainable weights (diffusers' EMAModel shadow
      parameters; a JEPA's target encoder); 0 for language models.
    """

    peak_bytes: int
    peak_phase: str
    peak_step: int
    params_bytes: int
    buffers_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    temporaries_bytes: int
    #: Peak per phase and step, e.g. "step2.forward", "step2.backward", "step2.optimizer", plus the
    #: instant "step2.forward_end" (just before backward starts: the resident activation memory).
    phase_peaks_bytes: dict[str, int]
    #: Breakdown (category -> bytes) at each entry of `phase_peaks_bytes`.
    phase_breakdowns_bytes: dict[str, dict[str, int]]
    trainable_params: int
    total_params: int
    #: Low-precision (autocast) copies of fp32 weights alive at the peak, already counted inside
    #: activations (when saved for backward) or temporaries; 0 without autocast.
    weight_copies_bytes: int
    #: The same at each entry of `phase_peaks_bytes`.
    phase_weight_copies_bytes: dict[str, int]
    #: The aten op whose outputs set the peak, and where it ran (module path in forward, autograd
    #: node in backward, "optimizer.step" / "zero_grad" in the optimizer phase).
    peak_op: str
    peak_context: str
    #: The largest storages alive at the peak, as readable one-liners.
    peak_top_tensors: tuple[str, ...]
    # -- settings echoed back --
    model_type: str
    model_class: str
    method: str
    lora_rank: int
    lora_alpha: int
    lora_targets: tuple[str, ...]
    precision: str
    optimizer: str
    micro_batch: int
    seq_len: int
    gradient_checkpointing: bool
    attention: str
    steps: int
    #: How the run was emulated and where it may differ from a CUDA run.
    notes: tuple[str, ...] = field(default_factory=tuple)
    ema_bytes: int = 0
    #: Diffusion, video and JEPA samples: the traced geometry (width_px, height_px, frames,
    #: latent_width, latent_height, latent_frames, image_tokens, text_tokens); empty for text.
    sample: dict[str, int] = field(default_factory=dict)
    #: The EMA copy's dtype ("none", "fp32", "bf16") and, for a JEPA, each mask generator's ratio.
    ema: str = "none"
    mask_ratios: tuple[float, ...] = ()
    #: The caching allocator's reserved peak for the traced allocations and frees, by its rules
    #: (modelled, terms/allocator.py: fake tensors never reach the allocator), without and with
    #: `expandable_segments`; 0 in a trace recorded before they were kept.
    reserved_peak_bytes: int = 0
    reserved_peak_expandable_bytes: int = 0

    def breakdown(self) -> dict[str, int]:
        """Category -> bytes at the peak; the values sum to `peak_bytes`."""
        return {name: int(getattr(self, f"{name}_bytes")) for name in CATEGORIES}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples become lists)."""
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        return out
