# mypy: disable-error-code="no-untyped-call"
# (torch, transformers and peft are only partly typed; their untyped calls are expected here.)
"""Make a fake-CPU training step behave, memory-wise, like the same step on a CUDA GPU.

The trace runs on fake CPU tensors (a fake CUDA device needs a CUDA build of torch). Where CPU
kernels or CPU-specific code paths would allocate differently from CUDA, these patches restore the
CUDA behaviour; each is a context manager that undoes itself. docs/methodology.md ("Measured
mode") lists the effects and why they matter.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._pytree import tree_map_only

# CUDA autocast policy (aten/src/ATen/autocast_mode.h, torch 2.13: AT_FORALL_FP32 and
# AT_FORALL_FP32_SET_OPT_DTYPE). CPU autocast registers only some of these; the rest run in the
# input dtype (bf16) on CPU. We register the missing ones for AutocastCPU at run time.
_CUDA_FP32_OPS: tuple[str, ...] = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar",
    "softplus", "layer_norm", "native_layer_norm", "group_norm", "frobenius_norm.dim",
    "nuclear_norm", "nuclear_norm.dim", "cosine_similarity", "poisson_nll_loss",
    "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div",
    "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss",
    "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
)  # fmt: skip
_CUDA_FP32_SET_OPT_DTYPE_OPS: tuple[str, ...] = (
    "prod", "prod.dim_int", "softmax.int", "log_softmax.int", "cumprod", "cumsum",
    "linalg_vector_norm", "linalg_matrix_norm", "linalg_matrix_norm.str_ord", "sum",
    "sum.dim_IntList",
)  # fmt: skip

_LOW_PRECISION = (torch.bfloat16, torch.float16)


def _op(name: str) -> Any:
    """`torch.ops.aten.<packet>.<overload>` for "name" or "name.overload"."""
    packet, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def _eligible(t: Any) -> bool:
    """CUDA autocast's `is_eligible`: a floating tensor other than double."""
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64


def _fp32_kernel(op: Any) -> Callable[..., Any]:
    """Autocast kernel with CUDA's `fp32` policy: cast eligible inputs to fp32, then run."""
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)

    def cast(t: torch.Tensor) -> torch.Tensor:
        return t.float() if t.dtype in _LOW_PRECISION else t

    def kernel(*args: Any, **kwargs: Any) -> Any:
        with torch._C._ExcludeDispatchKeyGuard(keys):
            args, kwargs = tree_map_only(torch.Tensor, cast, (args, kwargs))
            return op(*args, **kwargs)

    return kernel


def _fp32_set_opt_dtype_kernel(op: Any) -> Callable[..., Any]:
    """Autocast kernel with CUDA's `fp32_set_opt_dtype` policy: run with dtype=fp32 unless given."""
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)
    arguments = list(op._schema.arguments)
    index = next(i for i, a in enumerate(arguments) if a.name == "dtype")
    kwarg_only = arguments[index].kwarg_only

    def kernel(*args: Any, **kwargs: Any) -> Any:
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        with torch._C._ExcludeDispatchKeyGuard(keys):
            if _eligible(first):
                if kwarg_only or index >= len(args):
                    if kwargs.get("dtype") is None:
                        kwargs = {**kwargs, "dtype": torch.float32}
                elif args[index] is None:
                    args = (*args[:index], torch.float32, *args[index + 1 :])
            return op(*args, **kwargs)

    return kernel


@contextlib.contextmanager
def cuda_autocast_policy() -> Iterator[list[str]]:
    """Register CUDA's fp32 autocast policy for ops that CPU autocast leaves in bf16.

    Yields the op names registered. CUDA's lower-precision list differs from CPU's only in ops
    (mv, addmv, addr, einsum, chain_matmul, multi_dot) that either decompose into CPU-autocast ops
    or do not occur in these models, and CUDA's `promote` list only adds small input casts; neither
    is emulated.
    """
    lib = torch.library.Library("aten", "IMPL")
    registered: list[str] = []
    try:
        for names, make in (
            (_CUDA_FP32_OPS, _fp32_kernel),
            (_CUDA_FP32_SET_OPT_DTYPE_OPS, _fp32_set_opt_dtype_kernel),
        ):
            for name in names:
                if torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "AutocastCPU"):
                    continue
                lib.impl(name, make(_op(name)), "AutocastCPU")
                registered.append(name)
        yield registered
    finally:
        lib._destroy()


@contextlib.contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    """Temporarily replace `owner.name`."""
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


def _cuda_dropout(original: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """`F.dropout` as on CUDA: the fused `native_dropout`, which saves a 1-byte bool mask.

    On CPU, `dropout` multiplies by a noise tensor in the input dtype and saves that instead.
    """

    def dropout(
        input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
    ) -> torch.Tensor:
        if training and 0.0 < p < 1.0 and not inplace and input.numel() > 0:
            return torch.native_dropout(input, p, True)[0]
        return original(input, p, training, inplace)

    return dropout


def _cuda_sdpa(original: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """SDPA that keeps the flash path with attention dropout, as CUDA flash attention does.

    CPU's dispatcher sends dropout_p > 0 to the math path (b*h*s*s scores, upcast to fp32); CUDA
    runs flash attention with dropout and saves only output + logsumexp (+ a tiny RNG state).
    Fake tensors only: the real CPU flash kernel rejects dropout.
    """
    from torch._subclasses.fake_tensor import is_fake

    def sdpa(
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
    ) -> torch.Tensor:
        same_heads = key.shape[-3] == query.shape[-3] or enable_gqa
        flash = dropout_p > 0.0 and attn_mask is None and same_heads and query.shape[-1] <= 256
        if flash and is_fake(query):
            if torch.is_autocast_enabled("cpu"):
                dtype = torch.get_autocast_dtype("cpu")
                query, key, value = (t.to(dtype) for t in (query, key, value))
            out: torch.Tensor = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                query, key, value, dropout_p, is_causal, scale=scale
            )[0]
            return out
        result: torch.Tensor = original(
            query,
            key,
            value,
            attn_mask=attn_mask,
            dropout_p=dropout_p,
            is_causal=is_causal,
            scale=scale,
            enable_gqa=enable_gqa,
        )
        return result

    return sdpa


class _FusedRMSNorm(torch.autograd.Function):  # type: ignore[misc, unused-ignore]
    """`F.rms_norm` as CUDA runs it when the weight has the input's dtype (or there is none): the
    fused `aten::_fused_rms_norm` kernel (torch 2.8+), whose autograd node keeps the input itself
    and the fp32 1/rms per row (`_fused_rms_norm_backward(grad, input, shape, rstd, weight)`).
    On CPU the op is decomposed, and autograd keeps the fp32 upcast of the input instead."""

    @staticmethod
    def forward(
        ctx: Any, input: torch.Tensor, shape: tuple[int, ...], weight: torch.Tensor | None, eps: float | None
    ) -> Any:
        output, rstd = torch.ops.aten._fused_rms_norm(input, list(shape), weight, eps)
        ctx.shape = list(shape)
        ctx.save_for_backward(input, rstd, weight)
        return output

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        from torch._decomp.decompositions import _fused_rms_norm_backward  # no CPU kernel

        input, rstd, weight = ctx.saved_tensors
        mask = [ctx.needs_input_grad[0], weight is not None and ctx.needs_input_grad[2]]
        grad_input, grad_weight = _fused_rms_norm_backward(grad, input, ctx.shape, rstd, weight, mask)
        return grad_input, None, grad_weight, None


def _cuda_rms_norm(original: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """`F.rms_norm` on CUDA's fused kernel where CUDA dispatches to it (matching dtypes)."""

    def rms_norm(
        input: torch.Tensor,
        normalized_shape: Any,
        weight: torch.Tensor | None = None,
        eps: float | None = None,
    ) -> torch.Tensor:
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        fused = weight is None or weight.dtype == input.dtype
        if fused and torch.is_grad_enabled() and input.is_floating_point():
            out: torch.Tensor = _FusedRMSNorm.apply(input, shape, weight, eps)
            return out
        return original(input, normalized_shape, weight, eps)

    return rms_norm


class _GroupedMM(torch.autograd.Function):  # type: ignore[misc, unused-ignore]
    """Grouped matmul with the allocations of torch's `_grouped_mm` autograd formula.

    Used for non-bf16 expert weights, whose grouped_mm has no fake kernel. HF's own fallback op
    always returns a weight gradient (a full experts-sized temporary even for frozen experts);
    torch's formula computes each gradient only when it is needed, and saves `input` only when
    the weight needs a gradient.
    """

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor, weight: torch.Tensor, offs: torch.Tensor) -> Any:
        ctx.offs = offs
        ctx.save_for_backward(input if ctx.needs_input_grad[1] else None, weight)
        return torch.ops.transformers.grouped_mm_fallback(input, weight, offs)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        input, weight = ctx.saved_tensors
        grad_input = grad_weight = None
        if ctx.needs_input_grad[1]:
            both = torch.ops.transformers.grouped_mm_fallback_backward(input, weight, ctx.offs, grad)
            grad_weight = both[1]
            grad_input = both[0] if ctx.needs_input_grad[0] else None
        elif ctx.needs_input_grad[0]:
            grad_input = torch.ops.transformers.grouped_mm_fallback(grad, weight.transpose(-2, -1), ctx.offs)
        return grad_input, grad_weight, None


@contextlib.contextmanager
def cuda_emulation(*, amp: bool) -> Iterator[list[str]]:
    """All patches together; yields notes describing what was emulated."""
    import transformers.integrations.moe as hf_moe
    import transformers.masking_utils as hf_masking

    notes = [
        "fake CPU device; HF packed-sequence check answered as for unpacked input (causal, no mask)",
        "dropout as CUDA native_dropout (bool mask); SDPA with dropout kept on the flash path",
        "F.rms_norm with matching dtypes as CUDA's fused kernel (keeps the input and 1/rms)",
    ]
    original_grouped_mm = hf_moe._grouped_mm

    def grouped_mm(input: torch.Tensor, weight: torch.Tensor, offs: torch.Tensor) -> Any:
        if weight.dtype == torch.bfloat16:
            return original_grouped_mm(input, weight, offs)
        return _GroupedMM.apply(input.to(weight.dtype), weight, offs)

    with contextlib.ExitStack() as stack:
        stack.enter_context(_patched(hf_masking, "find_packed_sequence_indices", lambda *_: None))
        stack.enter_context(
            _patched(torch.nn.functional, "dropout", _cuda_dropout(torch.nn.functional.dropout))
        )
        stack.enter_context(
            _patched(
                torch.nn.functional,
                "scaled_dot_product_attention",
                _cuda_sdpa(torch.nn.functional.scaled_dot_product_attention),
            )
        )
        stack.enter_context(_patched(hf_moe, "_grouped_mm", grouped_mm))
        stack.enter_context(
            _patched(torch.nn.functional, "rms_norm", _cuda_rms_norm(torch.nn.functional.rms_norm))
        )
        if amp:
            registered = stack.enter_context(cuda_autocast_policy())
            notes.append(f"CUDA autocast fp32 policy registered for {len(registered)} CPU ops")
        yield notes
