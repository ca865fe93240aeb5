"""The Llama model as a forward/backward pair over a dict of Hugging Face-named parameters.

The architecture is exactly the one the engine runs (``petit/models/families/dense/llama.py``): pre-norm RMSNorm blocks,
grouped-query attention with "rotate_half" RoPE, a SwiGLU MLP, a final RMSNorm and an LM head that may be
tied to the embedding. Weight matrices are stored as ``[out_features, in_features]`` and applied as
``x @ W.T``, so a checkpoint's tensors can be written to a ``.petit`` file as they are.

The model config is a plain dict with Hugging Face field names (see :func:`make_config`).
"""

from __future__ import annotations

import math

import numpy as np

from trainer.layers import (
    attention_backward, attention_forward, cross_entropy_backward, cross_entropy_forward,
    embedding_backward, embedding_forward, linear_backward, linear_forward, rmsnorm_backward,
    rmsnorm_forward, rope_backward, rope_forward, rope_tables, swiglu_backward, swiglu_forward,
)

_INT_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
             "num_key_value_heads", "head_dim", "max_position_embeddings")
_CONFIG_KEYS = ("model_type", *_INT_KEYS, "rms_norm_eps", "rope_theta", "rope_interleaved",
                "tie_word_embeddings")


def make_config(*, vocab_size, hidden_size=128, intermediate_size=384, num_hidden_layers=4,
                num_attention_heads=4, num_key_value_heads=2, head_dim=None, rms_norm_eps=1e-5,
                rope_theta=10000.0, max_position_embeddings=128, tie_word_embeddings=True) -> dict:
    """Return a validated llama config dict; ``head_dim`` defaults to hidden_size // num_attention_heads.

    Raises:
        ValueError: See :func:`validate_config`.
    """
    if head_dim is None and isinstance(hidden_size, int) and isinstance(num_attention_heads, int) \
            and num_attention_heads > 0:
        head_dim = hidden_size // num_attention_heads
    return validate_config({
        "model_type": "llama", "vocab_size": vocab_size, "hidden_size": hidden_size,
        "intermediate_size": intermediate_size, "num_hidden_layers": num_hidden_layers,
        "num_attention_heads": num_attention_heads, "num_key_value_heads": num_key_value_heads,
        "head_dim": head_dim, "rms_norm_eps": rms_norm_eps, "rope_theta": rope_theta, "rope_interleaved": False,
        "max_position_embeddings": max_position_embeddings, "tie_word_embeddings": tie_word_embeddings,
    })


def validate_config(config: dict) -> dict:
    """Check a llama config dict and return a normalised copy (plain int/float/bool values).

    Raises:
        ValueError: On a missing or unknown key, a non-positive size, heads that do not divide, an odd
            head_dim, a non-positive eps/theta, or rope_interleaved=True (the trainer only does rotate_half).
    """
    if not isinstance(config, dict):
        raise ValueError(f"model config must be a dict, got {type(config).__name__}")
    missing = [k for k in _CONFIG_KEYS if k not in config]
    unknown = sorted(set(config) - set(_CONFIG_KEYS))
    if missing or unknown:
        raise ValueError(f"model config: missing keys {missing}, unknown keys {unknown}")
    if config["model_type"] != "llama":
        raise ValueError(f"model_type must be 'llama', got {config['model_type']!r}")
    out = {"model_type": "llama"}
    for key in _INT_KEYS:
        value = config[key]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
            raise ValueError(f"{key} must be a positive integer, got {value!r}")
        out[key] = int(value)
    for key in ("rms_norm_eps", "rope_theta"):
        value = config[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{key} must be a positive number, got {value!r}")
        out[key] = float(value)
    for key in ("rope_interleaved", "tie_word_embeddings"):
        if not isinstance(config[key], bool):
            raise ValueError(f"{key} must be true or false, got {config[key]!r}")
        out[key] = config[key]
    if out["rope_interleaved"]:
        raise ValueError("rope_interleaved=True is not supported by the trainer (it uses rotate_half RoPE)")
    H, KV = out["num_attention_heads"], out["num_key_value_heads"]
    if H % KV:
        raise ValueError(f"num_attention_heads ({H}) must be a multiple of num_key_value_heads ({KV})")
    if out["head_dim"] % 2:
        raise ValueError(f"head_dim must be even for RoPE, got {out['head_dim']}")
    return out


def param_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """Hugging Face tensor name -> shape, in a fixed order (the order used for init and checkpoints)."""
    V, D, F = config["vocab_size"], config["hidden_size"], config["intermediate_size"]
    H, KV, hd = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    shapes = {"model.embed_tokens.weight": (V, D)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = (D,)
        shapes[p + "self_attn.q_proj.weight"] = (H * hd, D)
        shapes[p + "self_attn.k_proj.weight"] = (KV * hd, D)
        shapes[p + "self_attn.v_proj.weight"] = (KV * hd, D)
        shapes[p + "self_attn.o_proj.weight"] = (D, H * hd)
        shapes[p + "post_attention_layernorm.weight"] = (D,)
        shapes[p + "mlp.gate_proj.weight"] = (F, D)
        shapes[p + "mlp.up_proj.weight"] = (F, D)
        shapes[p + "mlp.down_proj.weight"] = (D, F)
    shapes["model.norm.weight"] = (D,)
    if not config["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (V, D)
    return shapes


def count_params(config: dict) -> int:
    """Number of trainable scalars (a tied head is counted once)."""
    return sum(math.prod(s) for s in param_shapes(config).values())


def init_params(config: dict, seed: int, dtype=np.float32) -> dict[str, np.ndarray]:
    """GPT-2 / nanoGPT init: N(0, 0.02) weights, residual projections (o_proj, down_proj) scaled by
    1/sqrt(2 * layers), norm weights 1. Deterministic for a given seed."""
    rng = np.random.default_rng(seed)
    residual_std = 0.02 / math.sqrt(2 * config["num_hidden_layers"])
    params = {}
    for name, shape in param_shapes(config).items():
        if len(shape) == 1:
            params[name] = np.ones(shape, dtype=dtype)
        else:
            std = residual_std if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
            params[name] = rng.normal(0.0, std, size=shape).astype(dtype)
    return params


def check_params(params: dict, config: dict) -> None:
    """Raise ValueError listing missing, unexpected and mis-shaped tensors together."""
    shapes = param_shapes(config)
    missing = [n for n in shapes if n not in params]
    unexpected = [n for n in params if n not in shapes]
    wrong = [f"{n}: expected {shapes[n]}, got {tuple(params[n].shape)}"
             for n in shapes if n in params and tuple(params[n].shape) != shapes[n]]
    if missing or unexpected or wrong:
        raise ValueError(f"parameters do not match the config: missing {missing}, unexpected {unexpected}, "
                         f"wrong shapes {wrong}")


def _head_weight(params, config):
    return params["model.embed_tokens.weight" if config["tie_word_embeddings"] else "lm_head.weight"]


def forward(params: dict, config: dict, ids) -> tuple[np.ndarray, dict]:
    """ids (B, T) int -> logits (B, T, V) in the parameters' dtype, plus the cache for :func:`backward`.

    Raises:
        ValueError: If ids is not 2-D or T exceeds max_position_embeddings.
    """
    ids = np.asarray(ids)
    if ids.ndim != 2:
        raise ValueError(f"ids must have shape (B, T), got {ids.shape}")
    B, T = ids.shape
    if T > config["max_position_embeddings"]:
        raise ValueError(f"sequence length {T} exceeds max_position_embeddings "
                         f"{config['max_position_embeddings']}")
    H, KV, hd = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    eps = config["rms_norm_eps"]

    x, c_embed = embedding_forward(ids, params["model.embed_tokens.weight"])  # (B, T, D)
    cos, sin = rope_tables(T, hd, config["rope_theta"], x.dtype)  # (T, hd) each
    layers = []
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        c = {}
        h, c["norm1"] = rmsnorm_forward(x, params[p + "input_layernorm.weight"], eps)  # (B, T, D)
        q, c["q"] = linear_forward(h, params[p + "self_attn.q_proj.weight"])  # (B, T, H*hd)
        k, c["k"] = linear_forward(h, params[p + "self_attn.k_proj.weight"])  # (B, T, KV*hd)
        v, c["v"] = linear_forward(h, params[p + "self_attn.v_proj.weight"])  # (B, T, KV*hd)
        q, c["rope_q"] = rope_forward(q.reshape(B, T, H, hd), cos, sin)  # (B, T, H, hd)
        k, c["rope_k"] = rope_forward(k.reshape(B, T, KV, hd), cos, sin)  # (B, T, KV, hd)
        a, c["attn"] = attention_forward(q, k, v.reshape(B, T, KV, hd))  # (B, T, H*hd)
        o, c["o"] = linear_forward(a, params[p + "self_attn.o_proj.weight"])  # (B, T, D)
        x = x + o  # residual
        h2, c["norm2"] = rmsnorm_forward(x, params[p + "post_attention_layernorm.weight"], eps)  # (B, T, D)
        g, c["gate"] = linear_forward(h2, params[p + "mlp.gate_proj.weight"])  # (B, T, F)
        u, c["up"] = linear_forward(h2, params[p + "mlp.up_proj.weight"])  # (B, T, F)
        m, c["swiglu"] = swiglu_forward(g, u)  # (B, T, F)
        d, c["down"] = linear_forward(m, params[p + "mlp.down_proj.weight"])  # (B, T, D)
        x = x + d  # residual
        layers.append(c)
    xf, c_norm = rmsnorm_forward(x, params["model.norm.weight"], eps)  # (B, T, D)
    logits, c_head = linear_forward(xf, _head_weight(params, config))  # (B, T, V)
    cache = {"config": config, "shape": (B, T), "embed": c_embed, "layers": layers, "norm": c_norm,
             "head": c_head}
    return logits, cache


def backward(dlogits, cache) -> dict[str, np.ndarray]:
    """dlogits (B, T, V) -> gradient of every parameter, keyed and ordered like :func:`param_shapes`."""
    config = cache["config"]
    B, T = cache["shape"]
    H, KV, hd = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    grads = {}
    dxf, dhead = linear_backward(dlogits, cache["head"])  # (B, T, D), (V, D)
    dx, grads["model.norm.weight"] = rmsnorm_backward(dxf, cache["norm"])
    for i in reversed(range(config["num_hidden_layers"])):
        p = f"model.layers.{i}."
        c = cache["layers"][i]
        # MLP branch: x = x + down(swiglu(gate(h2), up(h2))), h2 = norm2(x)
        dm, grads[p + "mlp.down_proj.weight"] = linear_backward(dx, c["down"])  # (B, T, F)
        dg, du = swiglu_backward(dm, c["swiglu"])  # (B, T, F) each
        dh2, grads[p + "mlp.gate_proj.weight"] = linear_backward(dg, c["gate"])  # (B, T, D)
        dh2u, grads[p + "mlp.up_proj.weight"] = linear_backward(du, c["up"])
        dh2 += dh2u
        dxn, grads[p + "post_attention_layernorm.weight"] = rmsnorm_backward(dh2, c["norm2"])
        dx = dx + dxn
        # attention branch: x = x + o(attn(rope(q(h)), rope(k(h)), v(h))), h = norm1(x)
        da, grads[p + "self_attn.o_proj.weight"] = linear_backward(dx, c["o"])  # (B, T, H*hd)
        dq, dk, dv = attention_backward(da, c["attn"])  # (B, T, H, hd), (B, T, KV, hd) x2
        dq = rope_backward(dq, c["rope_q"]).reshape(B, T, H * hd)
        dk = rope_backward(dk, c["rope_k"]).reshape(B, T, KV * hd)
        dh, grads[p + "self_attn.q_proj.weight"] = linear_backward(dq, c["q"])  # (B, T, D)
        dhk, grads[p + "self_attn.k_proj.weight"] = linear_backward(dk, c["k"])
        dhv, grads[p + "self_attn.v_proj.weight"] = linear_backward(dv.reshape(B, T, KV * hd), c["v"])
        dh += dhk
        dh += dhv
        dxn, grads[p + "input_layernorm.weight"] = rmsnorm_backward(dh, c["norm1"])
        dx = dx + dxn
    dembed = embedding_backward(dx, cache["embed"])  # (V, D)
    if config["tie_word_embeddings"]:
        dembed += dhead
        grads["model.embed_tokens.weight"] = dembed
    else:
        grads["model.embed_tokens.weight"] = dembed
        grads["lm_head.weight"] = dhead
    return {name: grads[name] for name in param_shapes(config)}


def loss_and_grads(params: dict, config: dict, ids, targets, mask=None, denom=None) -> tuple[float, dict]:
    """Cross-entropy of next-token prediction and the gradient of every parameter.

    ids, targets (B, T) int; mask (B, T) of 0/1 or None; denom: see cross_entropy_forward.
    Returns (loss, grads).
    """
    logits, cache = forward(params, config, ids)
    loss, ce_cache = cross_entropy_forward(logits, np.asarray(targets), mask, denom)
    del logits
    return loss, backward(cross_entropy_backward(ce_cache), cache)


def loss_only(params: dict, config: dict, ids, targets, mask=None) -> float:
    """Cross-entropy without the backward pass (validation)."""
    logits, _ = forward(params, config, ids)
    loss, _ = cross_entropy_forward(logits, np.asarray(targets), mask)
    return loss
