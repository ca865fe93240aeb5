"""Context shift (issue 32): when a chat outgrows its context, the session drops its oldest whole turns (never the
system prompt, so the first tokens, the attention sinks, stay) and, instead of prefilling the shortened conversation
again, moves the kept turns' keys and values down inside the KV cache and re-rotates the keys' RoPE to their new
positions. Only the new turn is then prefilled.

Cuts fall on turn boundaries only: the shortened conversation is rendered with the chat template afresh, and the
kept block is the longest run of the cache's tokens equal to that render's (token for token), so the cache then
holds exactly a prefix of what a fresh render gives. The kept rows' keys are what a fresh prefill of those tokens at
the new positions would store in the first layer (a rotation by the difference of the two positions' float32
angles); in later layers they still carry what the dropped turns contributed, as in llama.cpp's context shift.

Where a shift cannot be exact the session re-prefills the shortened conversation instead and `shift_refusal` says
why: a recurrent state (Mamba, hybrids), latent attention's compressed cache (MLA: decoupled RoPE keys inside the
latent rows), learned absolute positions (GPT-2), a RoPE whose frequencies change with the length reached (dynamic
NTK, longrope) or of a kind other than the plain table (M-RoPE and the families' own), RoPE applied before a key
norm that a rotation does not pass through (one with a weight per value: Hunyuan), DeepSeek's sparse attention
indexer (its keys carry a RoPE of their own inside the rows) and a family's own attention layer. Layers without
RoPE (NoPE, ALiBi: a bias on the distance, which the move keeps) only move. Sliding-window layers shift too:
Petit's cache keeps every position (the window only limits what a query reads), so the moved rows sit where a
fresh prefill puts them. Latent attention (MLA) shifts its rows, whose RoPE part
(the first rope-dim values) turns and whose latent part moves.
"""
from __future__ import annotations

import numpy as np

from petit.cache import KVCache

SHIFTABLE_SCALINGS = ("default", "linear", "llama3", "yarn")     # frequencies independent of the length reached


def shift_refusal(model, cache) -> str | None:
    """None when the model's cache can be shifted exactly; otherwise the reason, in a few words."""
    from petit.models.blocks.decoder import Layer
    from petit.models.blocks.rope import ProportionalRope, Rope
    net = getattr(model, "net", None)
    if type(cache) is not KVCache:
        return "the model keeps a recurrent state"
    if net is None or getattr(net, "pos_embed", None) is not None:
        return "the model adds learned absolute positions"
    layers = getattr(net, "layers", None)
    if layers is None or len(layers) != cache.layout[0]:
        return "the cache's layers are not the model's"
    for i, layer in enumerate(layers):
        if type(layer) is not Layer:
            return f"layer {i} is a family's own attention"
        mla = getattr(layer, "mla", None)
        if mla is not None and mla.dsa is not None:
            return f"layer {i}'s sparse attention indexer keeps keys of its own RoPE in the latent rows"
        if (mla is not None) != cache.values_are_keys:
            return f"layer {i}'s cache rows are not its keys'"
        if mla is not None and mla.row != cache.layout[3]:     # Dots 3 (issue 36, fam36k): rows of other widths
            return f"layer {i}'s latent rows are narrower than the cache's (its layers' rows differ)"
        rope = layer.rope
        if rope is None:
            continue
        if type(rope) not in (Rope, ProportionalRope) or rope.kind not in SHIFTABLE_SCALINGS:
            return f"layer {i}'s RoPE ({type(rope).__name__}, {rope.kind}) depends on more than the position"
        if layer.norm_after_rope and not _turns_with_rope(layer.k_norm, net.arch.qk_norm_per_head):
            return f"layer {i} normalizes its keys after RoPE"
    return None


def _turns_with_rope(norm, per_head: bool) -> bool:
    """A key norm after RoPE that a rotation passes through (issue 36, fam36h): an RMS norm of each whole head, no
    bias, one weight for every value (a weightless norm, Dory's L2 norm), so the stored key turned is the
    key of the new position."""
    if norm is None:
        return True
    w = None if norm.w is None else norm.w.a
    return per_head and norm.kind == "rms" and norm.b is None and (w is None or bool(np.all(w == w.flat[0])))


def find_kept(cached, ids, keep: int) -> tuple[int, int] | None:
    """(dropped, kept): cached[keep:keep + dropped] is what the shortened render left out and cached[keep + dropped:
    keep + dropped + kept] equals ids[keep:keep + kept], the longest such run; None when nothing after the common
    prefix is found again."""
    if keep >= len(ids) or keep >= len(cached):
        return None
    c = np.asarray(cached, np.int64)
    want = np.asarray(ids, np.int64)
    best = None
    for start in np.flatnonzero(c[keep + 1:] == want[keep]) + keep + 1:
        n = min(len(c) - start, len(want) - keep)
        diff = np.flatnonzero(c[start:start + n] != want[keep:keep + n])
        run = int(diff[0]) if len(diff) else int(n)
        if best is None or run > best[1]:
            best = (int(start - keep), run)
    return best


def _angles(rope, positions: np.ndarray, n_ctx: int) -> np.ndarray:
    """float32 RoPE angles [len(positions), dim/2], as the tables compute them (position * inv_freq in float32)."""
    inv, _ = rope.inv_freq(n_ctx)
    return positions.astype(np.float32)[:, None] * inv[None, :]


def rerotate(keys: np.ndarray, rope, old: np.ndarray, new: np.ndarray, n_ctx: int) -> None:
    """Rotate keys [n_kv, n, head_dim] (float32, in place), stored at positions `old`, to positions `new`."""
    c, s = turn_tables(rope, old, new, n_ctx)
    c, s = c[None], s[None]
    half = rope.dim // 2
    if rope.interleaved:
        x, y = keys[..., 0:rope.dim:2].copy(), keys[..., 1:rope.dim:2].copy()
        keys[..., 0:rope.dim:2], keys[..., 1:rope.dim:2] = x * c - y * s, y * c + x * s
    else:
        x, y = keys[..., :half].copy(), keys[..., half:rope.dim].copy()
        keys[..., :half], keys[..., half:rope.dim] = x * c - y * s, y * c + x * s


def _quantize_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 rows as the cache stores them (q = round(x * 127 / amax), scale = amax / 127)."""
    amax = np.abs(x).max(axis=-1)
    scale = (amax / np.float32(127.0)).astype(np.float32)
    inv = np.divide(np.float32(1.0), scale, out=np.zeros_like(scale), where=scale != 0)
    return np.rint(x * inv[..., None]).astype(np.int8), scale


def _check(cache, keep: int, dropped: int, kept: int) -> None:
    if not (0 <= keep and dropped > 0 and kept >= 0 and keep + dropped + kept <= cache.pos):
        raise ValueError(f"cannot shift {kept} positions from {keep + dropped} to {keep}: the cache holds "
                         f"{cache.pos}")


def turn_tables(rope, old: np.ndarray, new: np.ndarray, n_ctx: int) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin [n, dim/2] float32 of the rotation from each `old` position to its `new` one."""
    delta = _angles(rope, new, n_ctx).astype(np.float64) - _angles(rope, old, n_ctx).astype(np.float64)
    return np.ascontiguousarray(np.cos(delta), np.float32), np.ascontiguousarray(np.sin(delta), np.float32)


def shift(model, cache: KVCache, keep: int, dropped: int, kept: int) -> None:
    """Move the cache's positions [keep + dropped, keep + dropped + kept) to [keep, keep + kept), keys re-rotated,
    and set its position to keep + kept (check `shift_refusal` first). One call into C per layer
    (kernels/kvshift.c: pt_kv_shift, pt_kv_shift_q8), the heads in parallel."""
    from petit.native import ffi, lib
    _check(cache, keep, dropped, kept)
    if kept:
        old, new = np.arange(keep + dropped, keep + dropped + kept), np.arange(keep, keep + kept)
        n_kv, n_ctx, hd = cache.layout[1:]
        tables: dict[int, tuple] = {}
        for i, layer in enumerate(model.net.layers):
            rope = layer.rope
            if rope is None:
                c = s = ffi.NULL
                rot, inter = 0, 0
            else:
                if id(rope) not in tables:
                    tables[id(rope)] = turn_tables(rope, old, new, n_ctx)
                cos, sin = tables[id(rope)]
                c, s = ffi.cast("float *", ffi.from_buffer(cos)), ffi.cast("float *", ffi.from_buffer(sin))
                rot, inter = rope.dim, int(rope.interleaved)
            args = (n_kv, n_ctx, hd, keep + dropped, keep, kept, rot, c, s, inter)
            if cache.kv_type == "int8":
                v, vs = (ffi.NULL, ffi.NULL) if cache.values_are_keys else (cache.v_ptr[i], cache.vs_ptr[i])
                rc = lib.pt_kv_shift_q8(cache.k_ptr[i], cache.ks_ptr[i], v, vs, *args)
            else:
                rc = lib.pt_kv_shift(cache.k_ptr[i], ffi.NULL if cache.values_are_keys else cache.v_ptr[i], *args)
            if rc:
                raise ValueError(f"layer {i}: the context shift's arguments were refused ({rc})")
    cache.rewind(keep + kept)


def shift_reference(model, cache: KVCache, keep: int, dropped: int, kept: int) -> None:
    """`shift` in numpy, the reference the C kernel (kernels/kvshift.c) is checked against."""
    _check(cache, keep, dropped, kept)
    src, dst = slice(keep + dropped, keep + dropped + kept), slice(keep, keep + kept)
    old = np.arange(src.start, src.stop)
    new = np.arange(dst.start, dst.stop)
    int8 = cache.kv_type == "int8"
    key_bufs = (cache.k, cache.k_scale) if int8 else (cache.k,)
    value_bufs = () if cache.values_are_keys else (cache.v, cache.v_scale) if int8 else (cache.v,)
    for i, layer in enumerate(model.net.layers):
        for buf in value_bufs + (key_bufs if layer.rope is None else ()):   # rows that only move
            buf[i][:, dst] = buf[i][:, src]
        if layer.rope is None:
            continue
        keys = cache.k[i][:, src].astype(np.float32)
        if int8:
            keys *= cache.k_scale[i][:, src, None]
        rerotate(keys, layer.rope, old, new, cache.n_ctx)
        if int8:
            cache.k[i][:, dst], cache.k_scale[i][:, dst] = _quantize_rows(keys)
        else:
            cache.k[i][:, dst] = keys
    cache.rewind(keep + kept)
