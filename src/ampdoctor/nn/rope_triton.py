"""One Triton launch that rotates q and k by fp32 cos/sin rows gathered by position inside the kernel.

Imported only when a Triton path is asked for (CUDA tensors with triton installed, or ``backend="triton"``):
the CPU path and torch-less installs never import triton.

What the kernel does, per program (a block of tokens of one sequence and a slice of the heads):

- reads the positions of its tokens (``position_ids``, the offset within a packed sequence, or the token
  index) and gathers their cos/sin rows from the fp32 table `RotaryEmbedding` built in float64, so no
  ``[batch, seq, rotary_dim // 2]`` table is materialised and the host never reads a position;
- a position outside the table (negative, or past its end) cannot be bound-checked on the host without a
  synchronisation, so those rows come out NaN: loud in the loss, never a silent wrong angle;
- loads each pair of channels (``half``: i and i + r/2, NeoX/HF; ``interleaved``: 2i and 2i + 1, GPT-J/Meta)
  in fp32, rotates, and rounds once to the output dtype; channels past ``rotary_dim`` are copied (or, in
  place, left alone);
- any strides: q/k are addressed through their own four strides, so ``[b, h, s, d]``, a transposed
  ``[b, s, h, d]`` and sliced views need no ``.contiguous()`` copy.

The backward of a rotation is the rotation by the opposite angle (``conjugate``), run by the same kernel.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import triton
import triton.language as tl

QKFormat = Literal["bhsd", "bshd"]
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)

# The interpreter (TRITON_INTERPRET=1, how CI runs these kernels on CPU) rounds fp32 -> bf16 by truncation,
# not to nearest-even as the GPU's cvt.rn does; under it the kernel rounds in integer arithmetic instead.
_BF16_NAN = tl.constexpr(0x7FC0)


@triton.jit
def _round_to(value, dtype: tl.constexpr, MANUAL_BF16: tl.constexpr):
    """fp32 -> ``dtype``, round to nearest even."""
    if MANUAL_BF16 and dtype == tl.bfloat16:
        bits = value.to(tl.uint32, bitcast=True)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        rounded = tl.where(value != value, _BF16_NAN, rounded)
        return rounded.to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        return value.to(dtype)


@triton.jit
def _rotate_pairs(x1, x2, c, s, dtype: tl.constexpr, MANUAL_BF16: tl.constexpr):
    x1, x2 = x1.to(tl.float32), x2.to(tl.float32)
    return _round_to(x1 * c - x2 * s, dtype, MANUAL_BF16), _round_to(x2 * c + x1 * s, dtype, MANUAL_BF16)


@triton.jit
def _rotate_heads(
    x_ptr, o_ptr, h_lo, h_hi, batch,
    sxb, sxh, sxs, sxd, sob, soh, sos, sod,
    token, row_ok, c, s, col, col_ok, rest, rest_ok,
    HALF: tl.constexpr, INTERLEAVED: tl.constexpr, COPY_REST: tl.constexpr, MANUAL_BF16: tl.constexpr,
):
    """Rotate heads ``h_lo..h_hi-1`` of one tensor for the tokens of this program."""
    mask = row_ok[:, None] & col_ok[None, :]
    x_row = x_ptr + batch * sxb + token[:, None] * sxs
    o_row = o_ptr + batch * sob + token[:, None] * sos
    out_dtype: tl.constexpr = o_ptr.dtype.element_ty
    # Interleaved rows are read as one [tokens, 2 * pairs] tile and split in registers: a contiguous row stays
    # vector loads instead of two stride-2 loads.
    BLOCK_S: tl.constexpr = row_ok.shape[0]
    PAIRS: tl.constexpr = col.shape[0]
    chan = tl.arange(0, 2 * PAIRS)
    chan_mask = row_ok[:, None] & (chan < 2 * HALF)[None, :]
    for h in range(h_lo, h_hi):
        xh = x_row + h * sxh
        oh = o_row + h * soh
        if INTERLEAVED:
            row = tl.load(xh + chan[None, :] * sxd, mask=chan_mask, other=0.0)
            x1, x2 = tl.split(tl.reshape(row, (BLOCK_S, PAIRS, 2)))
            o1, o2 = _rotate_pairs(x1, x2, c, s, out_dtype, MANUAL_BF16)
            tl.store(oh + chan[None, :] * sod, tl.reshape(tl.join(o1, o2), (BLOCK_S, 2 * PAIRS)), mask=chan_mask)
        else:
            x1 = tl.load(xh + col[None, :] * sxd, mask=mask, other=0.0)
            x2 = tl.load(xh + (col[None, :] + HALF) * sxd, mask=mask, other=0.0)
            o1, o2 = _rotate_pairs(x1, x2, c, s, out_dtype, MANUAL_BF16)
            tl.store(oh + col[None, :] * sod, o1, mask=mask)
            tl.store(oh + (col[None, :] + HALF) * sod, o2, mask=mask)
        if COPY_REST:
            rest_mask = row_ok[:, None] & rest_ok[None, :]
            tail = tl.load(xh + (2 * HALF + rest[None, :]) * sxd, mask=rest_mask)
            tl.store(oh + (2 * HALF + rest[None, :]) * sod, tail.to(out_dtype), mask=rest_mask)


@triton.jit
def _rotary_qk_kernel(
    q_ptr, k_ptr, qo_ptr, ko_ptr, cos_ptr, sin_ptr, pos_ptr, cu_ptr,
    q_heads, k_heads, seqlen, table_len, q_per_group, k_per_group,
    sqb, sqh, sqs, sqd, sqob, sqoh, sqos, sqod,
    skb, skh, sks, skd, skob, skoh, skos, skod,
    spb, sps, stb, sts,
    HALF: tl.constexpr, REST: tl.constexpr, HALF_PAD: tl.constexpr, REST_PAD: tl.constexpr,
    BLOCK_S: tl.constexpr, INTERLEAVED: tl.constexpr, CONJUGATE: tl.constexpr, HAS_POS: tl.constexpr,
    VARLEN: tl.constexpr, COPY_REST: tl.constexpr, MANUAL_BF16: tl.constexpr,
):
    pid_s = tl.program_id(0)
    seq = tl.program_id(1).to(tl.int64)  # the batch row, or the packed sequence under VARLEN
    group = tl.program_id(2)
    rows = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    if VARLEN:
        start = tl.load(cu_ptr + seq).to(tl.int64)
        row_ok = rows < (tl.load(cu_ptr + seq + 1) - start)
        token = start + rows  # packed [1, heads, total, dim]: every sequence lives in batch row 0
        batch = seq * 0
        if HAS_POS:
            pos = tl.load(pos_ptr + token * sps, mask=row_ok, other=0)
        else:
            pos = rows
    else:
        row_ok = rows < seqlen
        token = rows.to(tl.int64)
        batch = seq
        if HAS_POS:
            pos = tl.load(pos_ptr + seq * spb + token * sps, mask=row_ok, other=0)
        else:
            pos = rows
    pos = pos.to(tl.int64)
    in_table = (pos >= 0) & (pos < table_len)
    col = tl.arange(0, HALF_PAD)
    col_ok = col < HALF
    table_row = tl.where(in_table, pos, 0) * sts + seq * stb
    table_mask = row_ok[:, None] & col_ok[None, :]
    c = tl.load(cos_ptr + table_row[:, None] + col[None, :], mask=table_mask, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + table_row[:, None] + col[None, :], mask=table_mask, other=0.0).to(tl.float32)
    # Out-of-table positions: NaN rows instead of a host-side check that would synchronise every call.
    c = tl.where(in_table[:, None], c, float("nan"))
    if CONJUGATE:
        s = -s
    rest = tl.arange(0, REST_PAD)
    rest_ok = rest < REST
    q_lo = group * q_per_group
    _rotate_heads(q_ptr, qo_ptr, q_lo, tl.minimum(q_lo + q_per_group, q_heads), batch,
                  sqb, sqh, sqs, sqd, sqob, sqoh, sqos, sqod, token, row_ok, c, s, col, col_ok, rest, rest_ok,
                  HALF, INTERLEAVED, COPY_REST, MANUAL_BF16)
    k_lo = group * k_per_group
    _rotate_heads(k_ptr, ko_ptr, k_lo, tl.minimum(k_lo + k_per_group, k_heads), batch,
                  skb, skh, sks, skd, skob, skoh, skos, skod, token, row_ok, c, s, col, col_ok, rest, rest_ok,
                  HALF, INTERLEAVED, COPY_REST, MANUAL_BF16)


# Decided when the kernels were decorated (triton reads TRITON_INTERPRET then), so decide it the same way.
_INTERPRETED = type(_rotary_qk_kernel).__name__ == "InterpretedFunction"


# Enough programs to fill an H100 (132 SMs) several times over; below that, heads are split across programs.
_TARGET_PROGRAMS = 2048


def _launch(q: torch.Tensor, k: torch.Tensor, q_out: torch.Tensor, k_out: torch.Tensor, cos: torch.Tensor,
            sin: torch.Tensor, positions: torch.Tensor | None, cu_seqlens: torch.Tensor | None, batch: int,
            seqlen: int, interleaved: bool, conjugate: bool) -> None:
    """q/k/outputs are [batch, heads, seq, dim] views (batch 1 and seq = total tokens under cu_seqlens);
    cos/sin are [table_len, r/2] or [batch, table_len, r/2] with unit stride along the last axis."""
    if batch == 0 or seqlen == 0:
        return
    half = cos.shape[-1]
    rest = q.shape[-1] - 2 * half
    half_pad = triton.next_power_of_2(half)
    # About 4096 rotated elements per head iteration: 32 tokens at head_dim 128.
    block_s = max(1, min(triton.next_power_of_2(max(seqlen, 1)), 2048 // half_pad))
    s_blocks = triton.cdiv(max(seqlen, 1), block_s)
    heads = max(q.shape[1], k.shape[1])
    groups = max(1, min(heads, triton.cdiv(_TARGET_PROGRAMS, s_blocks * batch)))
    table_batch_stride, table_row_stride = (cos.stride(0), cos.stride(1)) if cos.dim() == 3 else (0, cos.stride(0))
    pos_batch_stride, pos_stride = (0, 0)
    if positions is not None:
        pos_batch_stride = positions.stride(0) if positions.dim() == 2 and positions.shape[0] > 1 else 0
        pos_stride = positions.stride(-1)
    _rotary_qk_kernel[(s_blocks, batch, groups)](
        q, k, q_out, k_out, cos, sin,
        positions if positions is not None else cos, cu_seqlens if cu_seqlens is not None else cos,
        q.shape[1], k.shape[1], seqlen, cos.shape[-2], triton.cdiv(q.shape[1], groups), triton.cdiv(k.shape[1], groups),
        *q.stride(), *q_out.stride(), *k.stride(), *k_out.stride(),
        pos_batch_stride, pos_stride, table_batch_stride, table_row_stride,
        HALF=half, REST=rest, HALF_PAD=half_pad, REST_PAD=triton.next_power_of_2(max(rest, 1)),
        BLOCK_S=block_s, INTERLEAVED=interleaved, CONJUGATE=conjugate, HAS_POS=positions is not None,
        VARLEN=cu_seqlens is not None, COPY_REST=rest > 0 and q_out.data_ptr() != q.data_ptr(),
        MANUAL_BF16=_INTERPRETED, num_warps=4,
    )


class _RotaryQK(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, cos, sin, positions, cu_seqlens, batch, seqlen, interleaved, conjugate, inplace):  # type: ignore[override]
        ctx.save_for_backward(cos, sin, positions, cu_seqlens)
        ctx.config = (batch, seqlen, interleaved, conjugate)
        if inplace:
            q_out, k_out = q, k
            ctx.mark_dirty(q, k)
        else:
            q_out, k_out = torch.empty_like(q), torch.empty_like(k)
        _launch(q, k, q_out, k_out, cos, sin, positions, cu_seqlens, batch, seqlen, interleaved, conjugate)
        return q_out, k_out

    @staticmethod
    def backward(ctx, grad_q, grad_k):  # type: ignore[override]
        cos, sin, positions, cu_seqlens = ctx.saved_tensors
        batch, seqlen, interleaved, conjugate = ctx.config
        # The adjoint of a rotation is the opposite rotation: the same kernel with sin negated.
        grads = _RotaryQK.apply(grad_q, grad_k, cos, sin, positions, cu_seqlens, batch, seqlen, interleaved,
                                not conjugate, False)
        return (*grads, None, None, None, None, None, None, None, None, None)


def _as_bhsd(x: torch.Tensor, qk_format: QKFormat, varlen: bool) -> torch.Tensor:
    if varlen:  # [total, heads, dim] -> [1, heads, total, dim]
        return x.transpose(0, 1).unsqueeze(0)
    return x.transpose(1, 2) if qk_format == "bshd" else x


def _check(name: str, x: Any, dims: int) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != dims:
        raise ValueError(f"rotary_qk: {name} must be a {dims}-D tensor, got "
                         f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"rotary_qk: {name} must be fp16, bf16 or fp32 for the Triton kernel, got {x.dtype}")


def _check_table(cos: torch.Tensor, sin: torch.Tensor, rotary_dim: int) -> None:
    if cos.dtype != torch.float32 or sin.dtype != torch.float32:
        # A half-precision table has already lost the angle (incident 2): the kernel reads fp32 rows only.
        raise TypeError(f"rotary_qk: cos/sin tables must be fp32, got {cos.dtype}/{sin.dtype}")
    if cos.shape != sin.shape or cos.dim() not in (2, 3) or cos.stride(-1) != 1 or sin.stride() != cos.stride():
        raise ValueError(f"rotary_qk: cos/sin must be equal-shaped [len, r/2] or [batch, len, r/2] tables with unit "
                         f"last stride, got {tuple(cos.shape)} and {tuple(sin.shape)}")
    if not 0 < 2 * cos.shape[-1] <= rotary_dim:
        raise ValueError(f"rotary_qk: tables cover {2 * cos.shape[-1]} channels but head_dim is {rotary_dim}")


def _grid_shape(q4: torch.Tensor, cos: torch.Tensor, cu_seqlens: torch.Tensor | None, max_seqlen: int | None) -> tuple[int, int]:
    """(sequences, longest sequence) the kernel's grid covers: packed sequences under cu_seqlens, else q's batch and seq."""
    if cu_seqlens is not None:
        if cos.dim() == 3:
            raise ValueError("rotary_qk: per-batch tables do not combine with cu_seqlens")
        return cu_seqlens.numel() - 1, q4.shape[2] if max_seqlen is None else max_seqlen
    batch = q4.shape[0]
    if cos.dim() == 3 and cos.shape[0] not in (1, batch):
        raise ValueError(f"rotary_qk: table batch {cos.shape[0]} does not match q/k batch {batch}")
    return batch, q4.shape[2]


def _check_positions(position_ids: torch.Tensor | None, seq: int, varlen: bool) -> None:
    if position_ids is None:
        return
    if position_ids.is_floating_point() or position_ids.dtype == torch.bool:
        raise TypeError(f"rotary_qk: position_ids must be an integer tensor, got {position_ids.dtype}")
    if position_ids.shape[-1] != seq or position_ids.dim() > (1 if varlen else 2):
        raise ValueError(f"rotary_qk: position_ids of shape {tuple(position_ids.shape)} do not match seq {seq}")


def rotary_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    position_ids: torch.Tensor | None = None,
    *,
    layout: str = "half",
    qk_format: QKFormat = "bhsd",
    inplace: bool = False,
    cu_seqlens: torch.Tensor | None = None,
    max_seqlen: int | None = None,
    conjugate: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate ``q`` and ``k`` in one Triton launch; differentiable (the backward is the conjugate rotation).

    ``q``/``k``: ``[batch, heads, seq, head_dim]`` (``qk_format="bhsd"``) or ``[batch, seq, heads, head_dim]``
    (``"bshd"``), any strides, heads may differ (GQA), fp16/bf16/fp32; with ``cu_seqlens`` (int32/int64
    ``[n + 1]`` offsets of packed sequences) ``[total_tokens, heads, head_dim]``. ``cos``/``sin``: the fp32
    table ``[len, rotary_dim // 2]`` indexed by position (a ``RotaryEmbedding``'s), or ``[batch, seq, r/2]``
    rows already per token (then ``position_ids`` indexes within each batch row). ``position_ids``: integer
    ``[seq]`` or ``[batch, seq]`` (``[total_tokens]`` under ``cu_seqlens``); without it, the token's index in
    its sequence. Positions outside the table give NaN rows. The result has the input's dtype: fp32 math,
    one rounding. ``inplace=True`` writes into q and k and returns them. ``max_seqlen``: at least the longest
    packed sequence, which sizes the grid (without it, the packed total: correct, with idle programs).
    """
    varlen = cu_seqlens is not None
    _check("q", q, 3 if varlen else 4)
    _check("k", k, 3 if varlen else 4)
    if layout not in ("half", "interleaved"):
        raise ValueError(f"rotary_qk: unknown layout {layout!r}: expected 'half' or 'interleaved'")
    if qk_format not in ("bhsd", "bshd"):
        raise ValueError(f"rotary_qk: unknown qk_format {qk_format!r}: expected 'bhsd' or 'bshd'")
    q4, k4 = _as_bhsd(q, qk_format, varlen), _as_bhsd(k, qk_format, varlen)
    if q4.shape[0] != k4.shape[0] or q4.shape[2] != k4.shape[2] or q4.shape[3] != k4.shape[3]:
        raise ValueError(f"rotary_qk: q {tuple(q.shape)} and k {tuple(k.shape)} differ in batch, seq or head_dim")
    _check_table(cos, sin, q4.shape[3])
    batch, seqlen = _grid_shape(q4, cos, cu_seqlens, max_seqlen)
    _check_positions(position_ids, q4.shape[2], varlen)
    if cos.dim() == 3 and cos.shape[0] == 1:
        cos, sin = cos[0], sin[0]
    q_out, k_out = _RotaryQK.apply(q4, k4, cos, sin, position_ids, cu_seqlens, batch, seqlen, layout == "interleaved",
                                   conjugate, inplace)
    if varlen:
        return q_out[0].transpose(0, 1), k_out[0].transpose(0, 1)
    if qk_format == "bshd":
        return q_out.transpose(1, 2), k_out.transpose(1, 2)
    return q_out, k_out
