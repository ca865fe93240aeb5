"""LoRA adapters (issue 33): the GGUF adapter file llama.cpp's convert_lora_to_gguf.py writes and `llama-cli --lora`
loads, and their run-time application to a loaded model (`petit run / chat --lora FILE [--lora-scale S]`).

The file: general.architecture (llama.cpp's name of the base's architecture), general.type "adapter", adapter.type
"lora", adapter.lora.alpha; for each adapted matrix, `<its llama.cpp name>.lora_a` [rank, in] and `.lora_b`
[out, rank], float32 here (F16 / BF16 read too). The product of a matrix W becomes W x + scale * alpha / rank *
B (A x), llama.cpp's rule. For llama.cpp's Llama architecture the q / k rows are permuted for its adjacent-pair RoPE
(as its converters permute the base's): B's rows of q / k are written permuted when the model holds them in
rotate-half order (a Hugging Face folder) and as they are when it runs a GGUF's permuted rows (pairs).

At run time each adapted layer gets (A, B * scale * alpha / rank) as float32 matrices; the forward plan multiplies
A x into a small buffer and adds B times it into the target's output (petit/models/blocks/decoder.py, Layer.lora)."""
from __future__ import annotations

import os

import numpy as np

from petit.formats.gguf import GGUFError, GGUFFile, write_gguf
from petit.loading.gguf_export import ARCH_OF, _arch, _names, _pair_rows
from petit.native import Weight

TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
_HF = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
       "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}
_FLOAT = {"F32": np.float32, "F16": np.float16}


class Adapter:
    """One adapter: alpha, rank and {(layer, target): (A [r, in], B [out, r])} float32, in the model's row order."""

    def __init__(self, alpha: float, pairs: dict, metadata: dict | None = None):
        self.alpha, self.pairs, self.metadata = float(alpha), pairs, dict(metadata or {})
        ranks = {A.shape[0] for A, _ in pairs.values()}
        self.rank = max(ranks) if ranks else 0

    def scaling(self, scale: float = 1.0) -> dict:
        """{(layer, target): the factor of B A}: scale * alpha / rank (each pair's own rank)."""
        return {key: scale * self.alpha / A.shape[0] for key, (A, _) in self.pairs.items()}


def _layout(model, where: str):
    """(llama.cpp architecture name, {(layer, target): GGUF name of the matrix}, permute q/k rows, heads, kv, hd)."""
    c = model.config
    mt = c.model_type
    if mt not in ARCH_OF:
        raise ValueError(f"{where}: {mt} models have no GGUF adapter layout here")
    name = ARCH_OF[mt]
    arch = _arch(name, mt)
    n = len(model.net.layers)
    names = _names(arch, n, False)
    out = {}
    for i in range(n):
        for t in TARGETS:
            hf = f"model.layers.{i}.{_HF[t]}.weight"
            if hf in names:
                out[(i, t)] = names[hf][0]
    a = model.net.arch
    permute = arch.rope_pairs and not getattr(c, "rope_interleaved", False)
    return name, out, permute, a.num_attention_heads, a.num_key_value_heads, a.head_dim


def write_adapter(path, model, params: dict, alpha: float, metadata: dict | None = None) -> None:
    """Write adapters `params` (PEFT names: model.layers.{i}.self_attn.q_proj.lora_A.weight ...) as a GGUF LoRA file,
    atomically (a temporary name, then renamed)."""
    where = os.fspath(path)
    arch_name, gnames, permute, H, KV, hd = _layout(model, where)
    meta = {"general.architecture": arch_name, "general.type": "adapter", "general.name": "petit finetune",
            "adapter.type": "lora", "adapter.lora.alpha": float(alpha)}
    meta.update(metadata or {})
    tensors = {}
    for (i, t), gname in gnames.items():
        stem = f"model.layers.{i}.{_HF[t]}"
        A, B = params.get(stem + ".lora_A.weight"), params.get(stem + ".lora_B.weight")
        if A is None:
            continue
        A, B = np.ascontiguousarray(A, np.float32), np.ascontiguousarray(B, np.float32)
        if permute and t in ("q", "k"):
            B = _pair_rows(B, H if t == "q" else KV, hd)
        tensors[gname + ".lora_a"] = ("F32", A.shape, A)
        tensors[gname + ".lora_b"] = ("F32", B.shape, B)
    if not tensors:
        raise ValueError(f"{where}: no adapter tensors to write")
    write_gguf(where, meta, tensors)


def _unpair_rows(B: np.ndarray, heads: int, hd: int) -> np.ndarray:
    r = B.reshape(heads, hd // 2, 2, -1)
    return np.ascontiguousarray(r.transpose(0, 2, 1, 3)).reshape(B.shape)


def read_adapter(path, model) -> Adapter:
    """Read a GGUF LoRA file for `model`. Raises ValueError (GGUFError) naming the file and what does not fit: not an
    adapter, another architecture, a tensor that adapts no matrix of this model, a missing half, wrong shapes."""
    where = os.fspath(path)
    arch_name, gnames, permute, H, KV, hd = _layout(model, where)
    by_name = {g: key for key, g in gnames.items()}
    with GGUFFile(where) as f:
        kind, atype = f.get("general.type"), f.get("adapter.type")
        if kind != "adapter" or atype != "lora":
            raise GGUFError(f"{where}: not a LoRA adapter (general.type {kind!r}, adapter.type {atype!r})")
        if f.get("general.architecture") != arch_name:
            raise GGUFError(f"{where}: an adapter for a {f.get('general.architecture')!r} model, this model is "
                            f"{arch_name!r}")
        alpha = f.get("adapter.lora.alpha")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha > 0:
            raise GGUFError(f"{where}: adapter.lora.alpha must be a positive number, got {alpha!r}")
        halves: dict = {}
        for name, t in f.tensors.items():
            stem, _, half = name.rpartition(".")
            if half not in ("lora_a", "lora_b") or stem not in by_name:
                raise GGUFError(f"{where}: tensor {name!r} adapts no matrix of this model")
            if t.type not in _FLOAT or len(t.shape) != 2:
                raise GGUFError(f"{where}: tensor {name!r} is {t.type} of shape {t.shape}, expected a float matrix")
            a = np.frombuffer(f.raw(name), _FLOAT[t.type]).reshape(t.shape).astype(np.float32)
            if not np.isfinite(a).all():
                raise GGUFError(f"{where}: tensor {name!r} holds a NaN or an infinity")
            halves.setdefault(stem, {})[half] = a
        metadata = {k: v for k, v in f.metadata.items() if k.startswith("petit.")}
    pairs = {}
    for stem, h in halves.items():
        if set(h) != {"lora_a", "lora_b"}:
            raise GGUFError(f"{where}: {stem} has only its {next(iter(h))}")
        i, t = by_name[stem]
        A, B = h["lora_a"], h["lora_b"]
        W = getattr(model.net.layers[i], t)
        if W is None:
            raise GGUFError(f"{where}: {stem} adapts a matrix layer {i} of this model does not have")
        rows, cols = W.shape
        if A.shape[1] != cols or B.shape[0] != rows or A.shape[0] != B.shape[1]:
            raise GGUFError(f"{where}: {stem}: lora_a {A.shape} and lora_b {B.shape} do not fit a {rows}x{cols} "
                            f"matrix")
        if permute and t in ("q", "k"):
            B = _unpair_rows(B, H if t == "q" else KV, hd)
        pairs[(i, t)] = (A, B)
    if not pairs:
        raise GGUFError(f"{where}: the adapter has no tensors")
    return Adapter(float(alpha), pairs, metadata)


def attach(model, adapter: Adapter | str, scale: float = 1.0) -> Adapter:
    """Apply an adapter (or the file at that path) to `model` at run time, replacing any attached before; scale 0
    detaches it in effect. Returns the Adapter."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not np.isfinite(scale):
        raise ValueError(f"the adapter scale must be a finite number, got {scale!r}")
    if not isinstance(adapter, Adapter):
        adapter = read_adapter(adapter, model)
    net = model.net
    for L in net.layers:
        L.lora = None
    factors = adapter.scaling(scale)
    for (i, t), (A, B) in adapter.pairs.items():
        L = net.layers[i]
        L.lora = L.lora or {}
        L.lora[t] = (Weight.from_float(A, "f32"), Weight.from_float(B * np.float32(factors[(i, t)]), "f32"))
    net.arch.lora_rank = adapter.rank
    net._plan, net._scratch = None, None          # the plan is described again, over a scratch with buf["lora_x"]
    return adapter


def detach(model) -> None:
    """The model's own weights again, no run-time adapter (the plan is described again, without its scratch)."""
    for L in model.net.layers:
        L.lora = None
    model.net.arch.lora_rank = 0
    model.net._plan, model.net._scratch = None, None


def merge(model, adapter: Adapter | str, scale: float = 1.0) -> None:
    """W + scale * alpha / rank * B A into each adapted matrix, computed in float32 and stored back in the matrix's
    own type (exact for an f32 model). The reference the run-time adapter is held to."""
    if not isinstance(adapter, Adapter):
        adapter = read_adapter(adapter, model)
    factors = adapter.scaling(scale)
    new = {}
    for (i, t), (A, B) in adapter.pairs.items():
        W = getattr(model.net.layers[i], t)
        merged = W.dequantize() + np.float32(factors[(i, t)]) * (B @ A)
        new[id(W)] = Weight.from_float(merged, W.dtype if W.dtype in ("f32", "f16", "bf16", "q8_0", "q4_0") else "f32")
    model.net.replace_matrices(new)
