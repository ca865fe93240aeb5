"""`petit verify MODEL`: check that the engine computes what the model's weights say, against an independent
reference (docs/verify.md).

    petit verify MODEL [--prompt TEXT] [-n N] [--weights TYPE] [--json]

MODEL is a `.petit` file or a Hugging Face folder (the engine loads it as `petit.load` does, q8_0 unless
--weights; the reference reads the weights the engine converted, written to a temporary `.petit` file).

The engine generates N tokens greedily after the prompt; then, at every position of the whole sequence:
1. the engine as it runs (`model.logits`) against `trainer.reference.Reference`, a float64 NumPy forward of the
   same weights that parses the file, decodes its blocks and models each family itself, sharing no code with the
   engine; for q8_0 / q4_0 files also against the reference with its activations rounded as the engine's
   ("rounded": information, as large as the rounding itself on wide or deep models);
2. for q8_0 / q4_0 files, the engine run on the same values dequantized to float32 (`petit.load(...,
   weights="f32")`): without int8 activations what is left is float32 rounding, so a wrong bias, RoPE or norm
   shows thousands of times over;
3. every weight matrix multiplied through the engine's kernels with probe inputs its int8 blocks hold exactly,
   against the file's decoded values (`check_matrices`): one block read wrong shows hundreds of times over.
The file is also checked against the SHA-256 of every tensor that `petit export` records (`checksums`), when
present: weights damaged after export decode the same way in both forwards, so only the checksums catch them.

PASS needs: an engine that generates without error, finite logits, matching checksums (if recorded), no matrix
outside float32 rounding, and the figures within `limits(weights, hidden_size, layers)`, which follow from an
error model of the engine's arithmetic (docs/verify.md), not from one constant.

Exit codes of `run_verify`: 0 VERIFY PASS, 1 VERIFY FAIL, 2 an error (missing or unreadable model, a model_type the
reference does not model, a prompt the tokenizer cannot encode or that does not fit the context) reported as one
line `petit verify: error: ...` on stderr, and argparse usage errors (also 2). With `--json` stdout holds exactly
one JSON object: the figures, "thresholds" and "pass"; on an error `{"pass": false, "error": "..."}` (the error
line still goes to stderr).
"""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np

from petit.cli.argtypes import non_negative_int

# What PASS allows follows from an error model of the engine's arithmetic; docs/verify.md derives it and lists the
# measurements the multiples come from ("rel" errors are divided by the logit scale, max |reference logit|):
#   max_rel_err / mean_rel_err: worst / mean |engine - reference| over all positions and the whole vocabulary;
#   rounded_mean_rel_err (q8_0 / q4_0): mean |engine - reference with activations rounded as the engine does|;
#   dequantized_max_rel_err (q8_0 / q4_0): worst |engine on the dequantized values in float32 - reference|;
#   matrix_rel_err: |probe product through the kernels - the file's values| per |row| |probe| (each matrix: K cols);
#   argmax_agreement: the least share of positions whose top token must be the same.
_FLOATS = ("f32", "f16", "bf16")       # every other weight type runs with int8 activations
# BitNet's ternary rows (tq2) run with int8 activations too, rounded per token as the model itself defines them and
# the reference reproduces: its error model is float's (measured on the fixtures: 1.5e-7 of the logit scale)
_EXACT = _FLOATS + ("tq2",)
U32 = 2.0 ** -24                     # float32 unit roundoff
Q8_STEP = 1 / (127 * 12 ** 0.5)      # rms error of a q8 activation, relative to its block's largest |value|
# (mean, max) multiples of eps * sqrt(layers + 1), one pair per kind of error (docs/verify.md: the measurements)
K_FLOAT = (2.0, 10.0)
K_Q8 = (5.0, 40.0)


def limits(weights: str, hidden: int, layers: int, widest: int | None = None) -> dict:
    """What PASS allows for a model of `layers` blocks of width `hidden` whose loosest matrices are `weights`,
    `widest` the most columns of a matrix (docs/verify.md derives it).

    Per product the engine's own error is eps: float32 rounding over a row of `hidden` terms, u sqrt(hidden), or,
    with q8_0 / q4_0 matrices, the int8 rounding of the product's input, Q8_STEP (the reference decodes the same
    weights, so the weight type adds nothing else). The errors of the products add up independently along the
    depth: eps sqrt(layers + 1), the +1 for the head. The mean and the worst logit error (relative to the largest
    |logit|) may be fixed multiples of that; the engine run on the dequantized values must stay within the float
    limits; a probe product (check_matrices) within float32 rounding of a row, 2 (widest + 2) u."""
    depth = (layers + 1) ** 0.5
    float_eps = U32 * hidden ** 0.5 * depth
    quantized = weights not in _EXACT           # q8_0, q4_0 and GGUF's block types: int8 activations
    eps, (k_mean, k_max) = (Q8_STEP * depth, K_Q8) if quantized else (float_eps, K_FLOAT)
    out = {"max_rel_err": k_max * eps, "mean_rel_err": k_mean * eps,
           "argmax_agreement": 0.75 if quantized else 0.95}
    if quantized:
        out["rounded_mean_rel_err"] = out["mean_rel_err"]
        out["dequantized_max_rel_err"] = K_FLOAT[1] * float_eps
    out["matrix_rel_err"] = 2 * ((widest or hidden) + 2) * U32
    return out


_LOOSENESS = ("f32", "f16", "bf16", "tq2", "q8_0", "q6_k", "q5_k", "q5_0", "q4_k", "q4_0")
DEFAULT_TEXT = "Once upon a time"
DEFAULT_QUESTION = "what is 12 plus 7?"


def _default_ids(tok, metadata: dict) -> tuple[list[int], str, str]:
    """-> (ids, prompt text, where it came from) when no prompt is given."""
    if tok is None:
        return [0], "", "token 0 (the file has no tokenizer)"
    template = metadata.get("chat_template") or ""
    if "<|im_start|>" in template and tok.token_to_id("<|im_start|>") is not None \
            and tok.token_to_id("<|im_end|>") is not None:
        text = f"<|im_start|>user\n{DEFAULT_QUESTION}<|im_end|>\n<|im_start|>assistant\n"
        return tok.encode(text), text, "chat template (ChatML), a short question"
    text = ""
    for c in DEFAULT_TEXT:                       # a character tokenizer may lack some of these characters
        try:
            tok.encode(c, add_bos=False)
            text += c
        except ValueError:
            pass
    ids = tok.encode(text) if text else []
    if not ids:
        ids, text = [tok.bos_id if tok.bos_id is not None else 0], ""
    return ids, text, "default text"


def _checksums(ref) -> tuple[str, list[str]]:
    """-> ("ok" | "mismatch" | "absent", names of tensors that do not match the recorded SHA-256, else pt64)."""
    from petit.formats.petit_file import checksum_hex
    checksums = ref.metadata.get("checksums") or {}
    recorded, digest = checksums.get("sha256"), lambda raw: hashlib.sha256(raw).hexdigest()
    if not isinstance(recorded, dict):
        recorded, digest = checksums.get("pt64"), checksum_hex
    if not isinstance(recorded, dict):
        return "absent", []
    bad = sorted(set(recorded) ^ set(ref.tensors))           # recorded but missing, or present but unrecorded
    bad += [n for n in ref.tensors if n in recorded and digest(ref.raw(n)) != recorded[n]]
    return ("mismatch" if bad else "ok"), bad


def verify(model_path, prompt: str | None = None, n: int = 16, thresholds: dict | None = None,
           weights: str | None = None, reference=None) -> dict:
    """Run the engine and the reference on the same tokens and compare their logits at every position.

    Args:
        model_path: a `.petit` file or a Hugging Face model folder.
        prompt: text to start from (special tokens such as <|im_start|> are recognised); None: the chat
            template around a short question for a chat model, else "Once upon a time".
        n: tokens the engine generates greedily after the prompt (fewer if the context ends).
        thresholds: overrides of limits(...)'s values.
        weights: for a folder, the weight type the engine converts it to (default q8_0, as `petit.load`);
            for a file, None (as stored) or a type to convert to at load.
        reference: an open trainer.reference.Reference of this same file (weights None), to check several engine
            runs against one reference without recomputing it; left open. None: one is opened and closed here.

    Returns:
        A JSON-ready dict: model, weights (the loosest type among the matrices), hidden_size, layers, prompt,
        prompt_source, prompt_tokens, generated_tokens, generated_text, generation_error, positions, finite,
        argmax_matches, argmax_agreement, max_abs_err, mean_abs_err, logit_scale, max_rel_err, mean_rel_err,
        worst_position, position_errors, rounded_max_rel_err, rounded_mean_rel_err, dequantized_max_rel_err,
        dequantized_mean_rel_err (q8_0 / q4_0 only), matrices_checked, matrix_max_rel_err, bad_matrices, checksums
        ("ok", "mismatch" or "absent"), bad_tensors, thresholds, failures (why it failed, one string each) and pass.

    Raises:
        ValueError: a missing or invalid model, a model_type the reference does not model, a prompt the tokenizer
            cannot encode, an empty prompt, or a prompt that does not fit the model's context.
        OSError: the file cannot be read.
    """
    import os
    import tempfile

    import petit

    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    model_path = os.fspath(model_path)
    if not os.path.exists(model_path):
        raise ValueError(f"{model_path}: file not found")
    if reference is not None and (weights is not None or os.path.abspath(reference.path) != os.path.abspath(
            model_path)):
        raise ValueError(f"the reference given reads {reference.path}, not {model_path} as stored")
    with tempfile.TemporaryDirectory(prefix="petit-verify-") as tmp:
        model = petit.load(model_path, weights=weights, verify_checksums=False)   # damage: a FAIL below
        try:
            ref_path = model_path
            from petit.formats.gguf import is_gguf
            if os.path.isdir(model_path) or weights is not None or is_gguf(model_path) or _decoded(model):
                ref_path = _as_file(model, os.path.join(tmp, "model.petit"))
            return _verify(model, model_path, ref_path, prompt, n, thresholds, reference)
        finally:
            model.close()


def _decoded(model) -> bool:
    """A .petit file some of whose matrices the engine runs in another type than stored (q5_0 decoded to q8_0)."""
    stored = getattr(getattr(model, "_source", None), "tensors", {})
    return any(name in stored and stored[name].dtype != dtype for name, (dtype, _, _) in model.tensors.items())


def _as_file(model, path: str) -> str:
    """The weights the engine loaded (as it converted them), written as a .petit file for the reference; a GGUF
    block type the engine runs as stored (a .petit file holds none) is written as its exact float32 values."""
    from petit.formats.petit_file import DTYPE_CODES, write_petit
    from petit.native import dequantize_gguf
    tensors = {}
    for name, (dtype, shape, raw) in model.tensors.items():
        if dtype not in DTYPE_CODES:
            values = dequantize_gguf(raw() if callable(raw) else raw, dtype.upper(), shape)
            dtype, raw = "f32", values
        tensors[name] = (dtype, shape, raw)
    write_petit(path, {"config": model.config.to_dict()}, tensors)
    return path


def _verify(model, model_path, ref_path, prompt, n, thresholds, reference) -> dict:
    import petit
    from trainer.reference import Reference

    try:
        ref = reference or Reference(ref_path)
    except ValueError as e:                 # name what the user gave, not the temporary copy of a folder
        raise ValueError(str(e).replace(ref_path, model_path)) from None
    try:
        tok = model.tokenizer
        if prompt is None:
            ids, prompt_text, source = _default_ids(tok, model.metadata)
        else:
            if tok is None:
                raise ValueError(f"{model_path}: the model has no tokenizer to encode the prompt with")
            ids, prompt_text, source = tok.encode(prompt), prompt, "given"
            if not ids:
                raise ValueError("the prompt encodes to no tokens: give some text")
        ctx = model.context_length
        if len(ids) > ctx:
            raise ValueError(f"the prompt is {len(ids)} tokens, more than the model's context of {ctx}")
        generated, gen_error = [], None
        if n and len(ids) < ctx:
            try:
                generated = [s.token for s in petit.generate_tokens(model, ids, max_tokens=n)][:ctx - len(ids)]
            except ValueError as e:                  # e.g. the sampler refusing NaN logits: a FAIL, not an error
                gen_error = str(e)
        all_ids = list(ids) + generated
        engine = model.logits(all_ids).astype(np.float64)
        ref.round_activations = False
        reference = ref.logits(all_ids)
        checks, bad = _checksums(ref) if ref_path == model_path else ("absent", [])
        weights = max((d for d, shape, _, _ in ref.tensors.values() if len(shape) == 2),
                      key=_LOOSENESS.index, default="f32")
        # a GGUF block type the engine multiplies as stored (the reference got its float32 values) quantizes the
        # activations as q8_0 / q4_0 do: the loosest of all
        native = sorted({d for d, shape, _ in model.tensors.values() if len(shape) == 2} - set(_LOOSENESS))
        if native:
            weights = native[0]
        rounded = dequantized = None
        # ternary matrices (BitNet) round their inputs per token as the model itself does, in the engine and the
        # reference alike: dequantizing changes nothing there, so that comparison is left out
        ternary = any(d == "tq2" for d, _, _ in model.tensors.values())
        if weights not in _FLOATS and not ternary:
            ref.round_activations = True            # the same forward, activations rounded like the engine's
            rounded = ref.logits(all_ids)
            ref.round_activations = False
            # the engine on the same values, without int8 activations
            plain = petit.load(ref_path, weights="f32", verify_checksums=False)
            try:
                dequantized = plain.logits(all_ids).astype(np.float64)
            finally:
                plain.close()
        routing = _routing(model, ref, all_ids, rounded is not None)
        matrices = check_matrices(model, ref)
        text = tok.decode(generated) if tok is not None else ""
        hidden, layers = ref.tensors[ref.spec.embed][1][1], len(ref.spec.layers)
        widest = max(shape[1] for _, shape, _, _ in ref.tensors.values() if len(shape) == 2)
    finally:
        if reference is None:
            ref.close()

    out = {"model": str(model_path), "weights": weights, "hidden_size": int(hidden), "layers": layers,
           "prompt": prompt_text, "prompt_source": source, "prompt_tokens": len(ids),
           "generated_tokens": len(generated), "generated_text": text, "generation_error": gen_error,
           "positions": len(all_ids), **_compare(engine, reference, rounded, dequantized, routing), **matrices,
           "checksums": checks, "bad_tensors": bad}
    lim = dict(limits(weights, hidden, layers, widest), **(thresholds or {}))
    if ternary:
        lim.pop("dequantized_max_rel_err", None)
    failures = []
    if gen_error is not None:
        failures.append(f"the engine failed while generating: {gen_error}")
    if not out["finite"]:
        failures.append("the logits are not all finite (NaN or infinity)")
    else:
        for key in ("max_rel_err", "mean_rel_err", "rounded_mean_rel_err", "dequantized_max_rel_err"):
            if out[key] is not None and key in lim and not out[key] <= lim[key]:
                failures.append(f"{key} {out[key]:.3g} > {lim[key]:.3g}")
    if routing is not None and routing["rounded_agree"] < 0.5 * len(all_ids):
        failures.append(f"routing: the engine and the reference with the engine's rounding choose the same experts at "
                        f"only {routing['rounded_agree']} of {len(all_ids)} positions, too few to compare")
    if out["argmax_agreement"] < lim["argmax_agreement"]:
        failures.append(f"argmax agreement {out['argmax_agreement']:.3f} < {lim['argmax_agreement']:g}")
    if out["bad_matrices"]:
        failures.append(f"{len(out['bad_matrices'])} matri(ces) multiply differently from the file's values "
                        f"(worst relative error {out['matrix_max_rel_err']:.3g}; float32 rounding allows "
                        f"{lim['matrix_rel_err']:.2g} for the widest): "
                        f"{', '.join(out['bad_matrices'][:3])}{' ...' if len(out['bad_matrices']) > 3 else ''}")
    if checks == "mismatch":
        failures.append(f"{len(bad)} tensor(s) do not match the checksums recorded in the file: "
                        f"{', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''}")
    out.update(thresholds=lim, failures=failures, **{"pass": not failures})
    return out


def _routing(model, ref, ids, rounded: bool) -> dict | None:
    """For a mixture of experts with int8 activations (None otherwise): which positions the engine routes as the
    float64 reference does, and as the reference with activations rounded like the engine's. A near-tie between two
    experts' router logits tips either way under rounding noise, and a token that takes another expert has other
    logits, by as much as the experts differ: the errors are only comparable where the choices agree."""
    # DeepSeek Sparse Attention's indexer routes too (the positions each query attends to; issue 30, mla group):
    # a full layer's choice comes before its experts', in the reference's order
    routers = []
    for L in model.net.layers:
        d = L.mla.dsa if L.mla is not None else None
        if d is not None and not d.shared:
            routers.append(d.last_choice)
        v4 = getattr(L, "v4", None)             # DeepSeek-V4's CSA indexer, before its experts (issue 30, dsv4)
        if v4 is not None and v4.index is not None:
            routers.append(v4.index.last_choice)
        if L.moa_router is not None:           # JetMoE's attention experts, before the MLP's (issue 30, jetmoe)
            routers.append(L.moa_last_routing)
        if L.sparse is not None:               # MiniMax-M3's indexer: the key blocks (issue 36, fam36i)
            routers.append(L.sparse.last_choice)
        if L.moe is not None:
            routers.append(L.moe.last_routing)
    if not routers or not rounded:
        return None
    cache = model.new_cache(len(ids))
    model.net.forward(list(ids), cache, np.empty((1, model.vocab_size), np.float32))
    engine = [last(len(ids)) for last in routers]
    ref.round_activations = False
    plain = ref.routing(ids)
    ref.round_activations = True
    rounded_routing = ref.routing(ids)
    ref.round_activations = False

    def same(other):
        ok = np.ones(len(ids), bool)
        for a, b in zip(engine, other):
            ok &= (a == b).all(axis=1)
        return ok
    a, b = same(plain), same(rounded_routing)
    # issue 36, fam36l: a family whose experts' output goes through a short causal convolution before its add
    # (Inkling's mlp_sconv) hands a flipped position's output to the `routing_reach` positions after it directly:
    # those are left out with it
    for mask in (a, b):
        for t in np.flatnonzero(~mask):
            mask[t:t + 1 + getattr(model.net, "routing_reach", 0)] = False
    return {"agree": int(a.sum()), "rounded_agree": int(b.sum()), "mask": a, "rounded_mask": b}


def _compare(engine, reference, rounded, dequantized, routing=None) -> dict:
    """The figures of verify(): errors (None when a logit is not finite), relative to max |reference logit|; for a
    mixture of experts (`routing`), over the positions where the engine's experts are the reference's (the rounded
    ones: where they are the rounded reference's)."""
    keep = routing["mask"] if routing else np.ones(len(engine), bool)
    keep_rounded = routing["rounded_mask"] if routing else keep
    matches = int((engine.argmax(axis=1) == reference.argmax(axis=1))[keep].sum())
    out = {"finite": bool(all(np.isfinite(a).all() for a in (engine, reference, rounded, dequantized)
                              if a is not None)),
           "argmax_matches": matches, "argmax_agreement": matches / max(int(keep.sum()), 1),
           "routing_agree": routing and routing["agree"], "routing_rounded_agree": routing and routing["rounded_agree"]}
    keys = ("max_abs_err", "mean_abs_err", "logit_scale", "max_rel_err", "mean_rel_err", "worst_position",
            "rounded_max_rel_err", "rounded_mean_rel_err", "dequantized_max_rel_err", "dequantized_mean_rel_err")
    out.update(dict.fromkeys(keys))
    out["position_errors"] = []
    if not out["finite"]:
        return out
    full = np.abs(engine - reference)
    err = np.where(keep[:, None], full, 0.0)
    n = max(int(keep.sum()), 1)
    scale = float(np.abs(reference).max()) or 1.0
    out.update(max_abs_err=float(err.max()), mean_abs_err=float(err.sum()) / (n * err.shape[1]), logit_scale=scale,
               max_rel_err=float(err.max()) / scale, mean_rel_err=float(err.sum()) / (n * err.shape[1]) / scale,
               worst_position=int(np.unravel_index(err.argmax(), err.shape)[0]),
               position_errors=[float(e) / scale for e in full.max(axis=1)])
    for name, other in (("rounded", rounded), ("dequantized", dequantized)):
        if other is not None:
            err = np.abs(other - reference) if name == "dequantized" else np.abs(engine - other)
            if name == "rounded":
                err = err[keep_rounded] if keep_rounded.any() else err[:0]
            out.update({f"{name}_max_rel_err": float(err.max(initial=0.0)) / scale,
                        f"{name}_mean_rel_err": float(err.mean()) / scale if err.size else 0.0})
    return out


def check_matrices(model, ref) -> dict:
    """Every weight matrix the engine runs, multiplied by its kernels with probe inputs its int8 activation blocks
    hold exactly (per 32 values: integers up to 127 times a power of two, one of them 127), against the file's
    values decoded by the reference: what is left is float32 rounding, at most ~(K + 2) u of |row| |x| for K
    columns, so one block read wrong (a share ~sqrt(32 / K) of a row) shows hundreds of times over.
    The engine's matrices are paired with the file's tensors by role (layer i's q, k, v, o, gate, up, down, or its
    router and each expert's gate, up, down; the embedding and the head), which also catches a matrix put in the
    wrong place."""
    from petit.native import matmul

    net, spec = model.net, ref.spec
    pairs = [(net.embed, spec.embed), (net.lm_head, spec.head)]
    rows = {}       # issue 36, fam36d: q / k / v rearranged from the file (Layer.file_rows: rows, cols; zeros past it)
    for L, S in zip(net.layers, spec.layers):
        rows.update({getattr(S, role): rc for role, rc in (getattr(L, "file_rows", None) or {}).items()})
        pairs += [(getattr(L, role), getattr(S, role)) for role in ("q", "k", "v", "o", "gate", "up", "down",
                                                                     "attn_gate")]
        pairs.append((L.moa_router, S.moa_router))       # issue 30, the jetmoe group: JetMoE's attention router
        if (L.moe is None) != (S.moe is None):       # routed experts on one side only
            pairs.append((L.moe and L.moe.router, S.moe and S.moe.router))
        elif L.moe is not None:                     # the router and every expert's matrices, by expert
            pairs.append((L.moe.router, S.moe.router))
            for e, names in enumerate(S.moe.experts):
                W = (L.moe.gate and L.moe.gate[e], L.moe.up[e], L.moe.down[e]) if e < len(L.moe.up) \
                    else (None,) * 3                # gate None: plain experts (Nemotron-H)
                pairs += list(zip(W, names))
            if S.moe.shared is not None or L.moe.shared is not None:
                pairs += list(zip(L.moe.shared or (None,) * 3, S.moe.shared or (None,) * 3))
                pairs.append((L.moe.shared_gate, S.moe.shared_gate))
        if L.mla is not None or S.mla is not None:    # latent attention: its products and each head's absorbed ones
            a, b = L.mla, S.mla
            pairs += [(a and a.q_a, b and b.q_a), (a and a.q, b and b.q_nope), (a and a.q_pe, b and b.q_pe),
                      (a and a.c, b and b.kv_c), (a and a.k_pe, b and b.kv_pe)]
            if a is not None and b is not None:
                pairs += list(zip(a.k_absorb, b.k_absorb)) + list(zip(a.v_absorb, b.v_absorb))
        mixer = S.mamba or S.mamba2 or S.short_conv or S.deltanet or S.rglru or S.lightning or S.rwkv6 or S.rwkv7 or \
            S.rwkv4 or S.gla or S.mlstm                     # issue 30: Griffin, MiniMax, RWKV, QRWKV6; 36: xLSTM
        if L.mamba is not None or mixer is not None:
            a, b = L.mamba, mixer
            pairs += [(a and getattr(a, n), b and getattr(b, n, None)) for n in ("in_proj", "x_proj", "dt_proj",
                                                                                 "out_proj")]
        if getattr(L, "shared", None) is not None or getattr(S, "shared", None) is not None:
            pairs += _shared_pairs(L.shared, S.shared)          # issue 30: Zamba's shared blocks, per use
    pairs += getattr(net, "named_matrices", list)()     # issue 30, the gemma group: Gemma 3n's other matrices
    hd, sd = getattr(net, "head_dense", None), spec.head_dense      # issue 36, fam36j: ModernBERT's head dense
    if hd is not None or sd is not None:
        pairs.append((hd and hd.W, sd and sd[0]))
    rng = np.random.default_rng(0)
    worst, bad, checked = 0.0, [], 0
    for W, name in pairs:
        if W is None or name is None:
            if (W is None) != (name is None):
                bad.append(name or "?")
            continue
        w = ref.decoded(name)
        for axis, idx in enumerate(rows.get(name, ())):
            if idx is not None:             # an index past the last: a zero row / column
                w = np.take(np.concatenate([w, np.zeros_like(np.take(w, [0], axis=axis))], axis=axis), idx, axis=axis)
        checked += 1
        if tuple(W.shape) != w.shape:
            bad.append(name)
            continue
        K = w.shape[1]
        if K % 32:                          # not a q8 block layout: a float matrix, any probe is exact input
            x = rng.standard_normal((4, K)).astype(np.float32)
        else:
            # one power of two per block of the activations as the kernel rounds them, so the probe is exact input:
            # 32 values (q8_0 blocks), 256 for the K-quants (Q8_K's), the row for a ternary matrix (BitNet's rule)
            size = K if W.dtype == "tq2" else 256 if W.dtype in ("q4_k", "q5_k", "q6_k") else 32
            q = rng.integers(-127, 128, (4, K // size, size)).astype(np.float32)
            q[:, :, 0] = 127
            x = (q * np.exp2(rng.integers(-4, 3, (4, K // size, 1))).astype(np.float32)).reshape(4, K)
        got = matmul(W, x).astype(np.float64)
        want = x.astype(np.float64) @ w.T
        # float32 rounding of a row's sum is at most ~K u sum|w_i x_i| <= K u |w| |x| (Cauchy-Schwarz)
        norms = np.sqrt(np.einsum("ij,ij->i", w, w))[None, :] * np.linalg.norm(x.astype(np.float64), axis=1)[:, None]
        err = float((np.abs(got - want) / (norms + 1e-30)).max())
        worst = max(worst, err)
        if not err <= 2 * (K + 2) * U32:
            bad.append(name)
    return {"matrices_checked": checked, "matrix_max_rel_err": worst, "bad_matrices": sorted(set(bad))}


def _report(r: dict) -> str:
    text = r["generated_text"] if len(r["generated_text"]) <= 60 else r["generated_text"][:57] + "..."
    t = r["thresholds"]
    lines = [f"model:       {r['model']} ({r['weights']} weights, hidden {r['hidden_size']}, {r['layers']} layers)",
             f"prompt:      {r['prompt_tokens']} tokens ({r['prompt_source']}); {r['generated_tokens']} generated "
             f"greedily by the engine: {text!r}",
             f"compared:    {r['positions']} positions, engine vs independent float64 reference"]
    if r["generation_error"]:
        lines.append(f"generation:  FAILED: {r['generation_error']}")
    if r["finite"]:
        lines += [f"max error:   {r['max_abs_err']:.4g} (position {r['worst_position']}), {r['max_rel_err']:.3g} "
                  f"of the logit scale {r['logit_scale']:.4g} (limit {t['max_rel_err']:.3g})",
                  f"mean error:  {r['mean_abs_err']:.4g}, {r['mean_rel_err']:.3g} of the logit scale "
                  f"(limit {t['mean_rel_err']:.3g})"]
        if r.get("routing_agree") is not None:
            lines.append(f"routing:     the engine chooses the float64 reference's experts at {r['routing_agree']}/"
                         f"{r['positions']} positions, the rounded reference's at {r['routing_rounded_agree']}/"
                         f"{r['positions']} (near-ties tip under int8 rounding; errors compared where they agree)")
        if r["rounded_mean_rel_err"] is not None:
            lines.append(f"rounded:     with the reference's activations rounded to int8 blocks as the engine's: "
                         f"max {r['rounded_max_rel_err']:.3g}, mean {r['rounded_mean_rel_err']:.3g} of the scale "
                         f"(limit {t['rounded_mean_rel_err']:.3g})")
        if r["dequantized_max_rel_err"] is not None:
            lines.append(f"dequantized: the engine on the same values in float32: max "
                         f"{r['dequantized_max_rel_err']:.3g} of the scale (limit {t['dequantized_max_rel_err']:.3g})")
    else:
        lines.append("logits:      NOT FINITE (NaN or infinity)")
    lines.append(f"argmax:      {r['argmax_matches']}/{r['positions']} positions agree "
                 f"({100 * r['argmax_agreement']:.1f}%, limit {100 * t['argmax_agreement']:g}%)")
    lines.append(f"matrices:    {r['matrices_checked']} probed through the kernels: worst {r['matrix_max_rel_err']:.3g}"
                 f" (float32 rounding allows {t['matrix_rel_err']:.2g})"
                 + (f"; WRONG: {', '.join(r['bad_matrices'][:3])}" if r["bad_matrices"] else ""))
    lines.append({"ok": "checksums:   ok (every tensor matches the checksum recorded in the file)",
                  "absent": "checksums:   none recorded in the file (not checked)",
                  "mismatch": f"checksums:   MISMATCH in {', '.join(r['bad_tensors'])}"}[r["checksums"]])
    lines += [f"failed:      {f}" for f in r["failures"]]
    lines.append("VERIFY PASS" if r["pass"] else "VERIFY FAIL")
    return "\n".join(lines)


def add_verify_parser(subparsers):
    """Register `verify` on an argparse subparsers object; its default `func` is run_verify."""
    p = subparsers.add_parser(
        "verify", help="check the engine against an independent reference forward on a model",
        description="Generate N tokens greedily with the engine, then compare the engine's logits at every "
                    "position with an independent float64 NumPy forward of the same weights (every family Petit "
                    "runs), probe every weight matrix through the kernels, and check the checksums recorded at "
                    "export. The limits follow from the weight type, the hidden size and the depth (docs/verify.md). "
                    "Exit 0 VERIFY PASS, 1 VERIFY FAIL, 2 error.")
    p.add_argument("model", metavar="MODEL", help="a .petit file or a Hugging Face model folder")
    p.add_argument("-p", "--prompt", help="text to start from (default: a short chat question for a chat model, "
                                          f"else {DEFAULT_TEXT!r})")
    p.add_argument("-n", "--tokens", type=non_negative_int, default=16, metavar="N",
                   help="tokens to generate before comparing (default 16)")
    p.add_argument("--weights", choices=_LOOSENESS, metavar="TYPE",
                   help="convert the weights at load, as `petit run --weights` does (a folder: default q8_0; a "
                        "file: default as stored); one of " + ", ".join(_LOOSENESS))
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    p.set_defaults(func=run_verify)
    return p


def run_verify(args) -> int:
    """Run `petit verify`; returns the exit code (0 pass, 1 fail, 2 error)."""
    try:
        r = verify(args.model, prompt=args.prompt, n=args.tokens, weights=getattr(args, "weights", None))
    except (ValueError, OSError) as e:
        msg = str(e) if isinstance(e, ValueError) else f"cannot read {args.model}: {e.strerror or e}"
        if args.json:
            print(json.dumps({"pass": False, "error": msg}))
        print(f"petit verify: error: {msg}", file=sys.stderr)
        return 2
    print(json.dumps(r, ensure_ascii=False) if args.json else _report(r))
    return 0 if r["pass"] else 1


def _shared_pairs(a, b) -> list:
    """Issue 30, the hybrid group: a Zamba2 use's matrices (petit/models/blocks/shared_block.py) and the reference's
    names (spec.SharedSpec): the block's, its linear and its adapters."""
    if a is None or b is None:
        return [(a and a.linear, b and b.linear)]
    at = a.block.attn
    pairs = [(at.q, b.q), (at.k, b.k), (at.v, b.v), (at.o, b.o), (at.gate, b.gate), (at.up, b.up), (at.down, b.down),
             (a.linear, b.linear)]
    for n in ("q", "k", "v"):
        A, B = b.adapters.get(n, (None, None))
        pairs += [(getattr(a, n + "_a"), A), (getattr(a, n + "_b"), B)]
    pairs += [(a.mlp_a, b.adapters.get("gate", (None,))[0]), (a.gate_b, b.adapters.get("gate", (None, None))[1]),
              (a.up_b, b.adapters.get("up", (None, None))[1])]
    return pairs
