"""Loading a GGUF file (the format of llama.cpp, LM Studio, Ollama): its metadata picks the architecture
(petit/loading/gguf_archs.py) and gives the config, its tensors are handed to the family's builder under their
Hugging Face names, its tokenizer and chat template come from the metadata.

Tensors in a type the kernels read (F32, F16, BF16, Q8_0, Q4_0, and the GGUF block types the active path multiplies
with SIMD kernels: Q4_K, Q5_K, Q6_K on x86) are zero-copy views of the mapped file (q8_0 / q4_0 then repacked for the
CPU like any other). The other block types GGUF files use (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, IQ4_NL, IQ4_XS, and the
K-quants on other paths) are decoded at load (kernels/gguf_quants.c) and their matrices quantized to q8_0, which
keeps their values within q8_0's rounding at about twice their size (Q5_0 and IQ4_NL exactly: their values fit q8_0
blocks with the same scale); the load says so in a warning. Any other type
is refused, naming the tensor and the type.
"""
import warnings

import numpy as np

from petit.formats.gguf import GGUFFile
from petit.loading.gguf_archs import config_from_gguf, expert_names, hf_name, split_names, tensor_fix
from petit.loading.gguf_phimoe import ASSUMED as PHIMOE_ASSUMED, mscales as phimoe_mscales
from petit.loading.gguf_names import ONE_ROW
from petit.loading.interleave import repack_matrices, should_repack
from petit.models.families.moe.gpt_oss import mxfp4_f32, mxfp4_q8_0
from petit.model import Model, check_tokenizer
from petit.models import get_family
from petit.models.source import TensorSource
from petit.native import (EXACT_Q8, dequantize, dequantize_gguf, gguf_decode_reason, gguf_decodes, gguf_fast_types,
                          gguf_simd_types, gguf_to_q8_0)

NATIVE = {"F32": "f32", "F16": "f16", "BF16": "bf16", "Q8_0": "q8_0", "Q4_0": "q4_0"}
# integer tensors, handed out as float32 (issue 30, dsv4g: deepseek4's hash-routing table, int32 expert ids)
INTEGER = {"I8": np.int8, "I16": np.int16, "I32": np.int32}


class GGUFSource(TensorSource):
    """The tensors of a GGUF file under the names a family's builder asks for."""

    def __init__(self, f: GGUFFile, arch, cfg, weights: str | None, native: set, search: bool = False,
                 unpair: tuple | None = None):
        super().__init__(f.path, weights, search)
        self.f, self.arch, self.native = f, arch, native       # native: the GGUF types run as stored
        self.unpair = unpair        # (heads, kv heads, head_dim): q / k rows put back in rotate-half order
        # HF name -> (GGUF name, rows (r0, r1) of its [rows, columns] view, or None); a 3-D tensor's view is
        # [experts x rows, columns]
        self.map: dict[str, tuple[str, tuple | None]] = {}
        self.one_row: set[str] = set()                           # vectors handed out as [1, n] matrices
        self.fixes: dict = {}                                    # HF name -> its Fix (GGUFArch.fixes)
        more = arch.cfg_fixes(cfg) if arch.cfg_fixes is not None else None     # fixes that need the config
        own = arch.config_names(f.tensors, cfg) if arch.config_names is not None else {}
        for name, t in f.tensors.items():
            parts = expert_names(name, arch, t.shape) or split_names(name, arch, cfg, t.shape[0])
            if parts is not None:                                # a fused matrix or an expert: row ranges, no copy
                self.map.update((hf, (name, rows)) for hf, rows in parts)
            elif (hf := own.get(name) or hf_name(name, arch)) is not None:
                self.map[hf] = (name, None)
                if name.split(".")[-2] in ONE_ROW and len(t.shape) == 1:
                    self.one_row.add(hf)
                if (fix := tensor_fix(name, arch, more)) is not None:
                    self.fixes[hf] = fix
        # HF name -> [(GGUF name, (r0, r1)), ...]: a matrix made of rows of several tensors (Qwen3-Next's in_proj)
        self.joined: dict[str, list] = arch.joins(f.tensors, cfg) if arch.joins is not None else {}
        for hf in self.joined:
            self.map.pop(hf, None)
        # HF name -> (shape, make, GGUF names): a matrix computed from stored rows (GGUFArch.derived)
        self.derived: dict[str, tuple] = arch.derived(f.tensors, cfg) if arch.derived is not None else {}
        # HF name -> float32 array not stored as a tensor: what the file keeps as metadata (Apertus's xIELU
        # parameters), or the value of one llama.cpp lets a file leave out (deepseek2's zero selection bias)
        try:
            self.meta: dict[str, np.ndarray] = (arch.meta_tensors(f.metadata, cfg, f.tensors.__contains__)
                                                if arch.meta_tensors else {})
        except ValueError as e:
            raise ValueError(f"{self.where}: {e}") from None
        self._names = dict.fromkeys([*self.map, *self.joined, *self.meta, *self.derived]).keys()  # the file's order
        self.decoded: dict[str, str] = {}                        # HF name -> the GGUF type decoded at load

    def names(self):
        return self._names

    def _join(self, name):
        """A joined matrix's (parts, type, shape)."""
        parts = self.joined[name]
        kinds = sorted({self.f.tensors[g].type for g, _ in parts})
        if len(kinds) > 1:
            raise ValueError(f"{self.where}: tensors {', '.join(sorted({g for g, _ in parts}))} are read as one "
                             f"matrix ({name}) but have different types ({', '.join(kinds)})")
        cols = self.f.tensors[parts[0][0]].shape[-1]
        return parts, self.f.tensors[parts[0][0]], (sum(r1 - r0 for _, (r0, r1) in parts), cols)

    def _rows(self, gname, r0, r1) -> np.ndarray:
        raw = self.f.raw(gname)
        rb = raw.nbytes // _outer_rows(self.f.tensors[gname].shape)
        return raw[r0 * rb:r1 * rb]

    def _tensor(self, name):
        gname, rows = self.map[name]
        t = self.f.tensors[gname]
        shape = t.shape if rows is None else (rows[1] - rows[0],) + t.shape[1:][-1:]
        if rows is not None and len(t.shape) == 2 and name.endswith(".bias"):
            shape = shape[1:]                                    # one expert's bias: a row of [experts, n]
        if name in self.one_row:
            shape = (1,) + t.shape
        fix = self.fixes.get(name)
        if fix is not None and fix.shape is not None:
            shape = fix.shape(t.shape)
        return gname, rows, t, shape

    def info(self, name):
        if name in self.meta:
            return "f32", self.meta[name].shape
        if name in self.derived:
            shape, _, sources = self.derived[name]
            t = self.f.tensors[sources[0]]
            return NATIVE.get(t.type, "q8_0"), shape
        if name in self.joined:
            _, t, shape = self._join(name)
            gname = name
        else:
            gname, _, t, shape = self._tensor(name)
        if t.type in NATIVE:
            return NATIVE[t.type], shape
        if t.type in INTEGER:
            return "f32", shape
        if t.type == "MXFP4":                    # as q8_0 exactly (a block's scale out of f16's range: rounded)
            return (self.weights or "q8_0") if len(shape) == 2 else "f32", shape
        if t.type in self.native and len(shape) == 2:
            return t.type.lower(), shape
        if gguf_decodes(t.type):
            return (self.weights or "q8_0") if len(shape) == 2 else "f32", shape
        raise ValueError(f"{self.where}: tensor {gname!r} is {t.type}, a type Petit cannot read (it reads F32, F16, "
                         f"BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS and MXFP4)")

    def _raw(self, name) -> np.ndarray:
        gname, rows, t, shape = self._tensor(name)
        raw = self.f.raw(gname)
        if rows is None:
            return raw
        rb = raw.nbytes // _outer_rows(t.shape)
        return raw[rows[0] * rb:rows[1] * rb]

    def stored(self, name):
        if name in self.meta or name in self.derived:
            return None
        if name in self.joined:
            parts, t, shape = self._join(name)
            if t.type not in NATIVE and t.type not in self.native:
                return None
            return np.concatenate([self._rows(g, r0, r1) for g, (r0, r1) in parts]).reshape(shape[0], -1)
        _, _, t, shape = self._tensor(name)
        if name in self.fixes and self.fixes[name].values is not None:
            return None                                          # its values change: f32() gives them
        if t.type not in NATIVE and not (t.type in self.native and len(shape) == 2):
            return None
        raw = self._raw(name)
        return self._halves(name, raw.reshape(shape[0], -1)) if len(shape) == 2 else self._halves(name, raw)

    def _halves(self, name, rows: np.ndarray) -> np.ndarray:
        """q / k rows (a matrix's, any type, or a bias's values) from llama.cpp's adjacent-pair order back to
        rotate-half order, when the load asked for it (unpair); other tensors as they are."""
        if self.unpair is None or not (".q_proj." in name or ".k_proj." in name):
            return rows
        heads, kv, hd = self.unpair
        n = heads if ".q_proj." in name else kv
        r = rows.reshape(n, hd // 2, 2, -1)     # a bias: one value a row
        return np.ascontiguousarray(r.transpose(0, 2, 1, 3)).reshape(rows.shape)

    def exact_q8(self, name):
        if name in self.joined:                 # rows of MXFP4 tensors (a deepseek4 file's attn_output_a) exactly
            parts, t, shape = self._join(name)
            if t.type != "MXFP4":
                return None
            raw = np.concatenate([self._rows(g, r0, r1) for g, (r0, r1) in parts])
            out = mxfp4_q8_0(*_ggml_mxfp4(raw, shape))
            if out is not None:
                self.decoded[name] = t.type
            return out
        if name in self.meta or name in self.derived:
            return None
        if name in self.fixes and self.fixes[name].values is not None:
            return None                                          # its values change: f32() gives them
        gname, part, t, shape = self._tensor(name)
        if t.type == "MXFP4" and len(shape) == 2:
            out = mxfp4_q8_0(*_ggml_mxfp4(self._raw(name), shape))
            if out is not None:
                self.decoded[name] = t.type
                self._release(gname, part, shape, t)
            return out
        if t.type not in EXACT_Q8 or len(shape) != 2:
            return None
        self.decoded[name] = t.type
        out = gguf_to_q8_0(self._raw(name), t.type, shape)
        self._release(gname, part, shape, t)
        return self._halves(name, out.reshape(shape[0], -1)).reshape(out.shape)

    def _release(self, gname, part, shape, t, rows=None):
        """Release the file pages of a tensor's rows [r0, r1) (all of them: None) of the part `part` of `gname`."""
        if part is None:
            at = rows
        else:
            r0, r1 = rows or (0, shape[0])
            at = (part[0] + r0, part[0] + r1)
        self.f.release(gname, at, _outer_rows(t.shape))

    def _f32_rows(self, g, r0, r1) -> np.ndarray:
        """Rows [r0, r1) of the GGUF tensor g ([rows, columns] view) as float32."""
        t = self.f.tensors[g]
        return _decode(self._rows(g, r0, r1), t.type, (r1 - r0, t.shape[-1]))

    def _joined_f32(self, name):
        parts, t, shape = self._join(name)
        if t.type not in ("F32", *NATIVE, *INTEGER):
            self.decoded[name] = t.type
        return np.concatenate([_decode(self._rows(g, r0, r1), t.type, (r1 - r0, shape[1])) for g, (r0, r1) in parts])

    def f32(self, name):
        if name in self.meta:
            return self.meta[name]
        if name in self.derived:
            return np.ascontiguousarray(self.derived[name][1](self._f32_rows), np.float32)
        if name in self.joined:
            return self._joined_f32(name)
        gname, part, t, shape = self._tensor(name)
        raw = self._raw(name)
        rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        if t.type not in ("F32", *NATIVE, *INTEGER):
            self.decoded[name] = t.type
        out = _decode(raw, t.type, (rows, shape[-1])).reshape(shape)
        if t.type != "F32":
            # decoded: the stored bytes are not read again, so their file pages leave the resident set (a Q4_K_M
            # file whose matrices are mostly Q5_0 kept 185 MiB of them beside their q8_0 copies)
            self._release(gname, part, shape, t)
        fix = self.fixes.get(name)
        if self.arch.norm_shift and name.endswith("norm.weight") and (fix is None or fix.shift):
            out = out - np.float32(self.arch.norm_shift)        # Gemma's files store 1 + w; the family adds 1
        if fix is not None and fix.values is not None:
            try:
                out = fix.values(out)
            except ValueError as e:
                raise ValueError(f"{self.where}: tensor {gname!r}: {e}") from None
        return self._halves(name, out)


def load_gguf(path: str, weights: str | None = None, tokenizer=None, repack: bool | None = None,
              kquants: bool | None = None, search: bool = False, rope_halves: bool = False) -> Model:
    """Load a GGUF file (see petit.loading.load for the arguments). kquants: which GGUF block types (other than
    q8_0 / q4_0 / floats) run as stored, the rest decoded to q8_0 at load. None: those the active path runs fastest
    so (Q4_K, Q5_K, Q6_K on x86); True: every type it has SIMD kernels for (Q4_1, Q5_0, Q5_1 and IQ4_NL too: less
    memory, slower); False: none; a set of type names: those (`petit convert` keeps the types a .petit file holds).
    search: see petit.load. rope_halves: q / k rows that llama.cpp's converter permuted for adjacent-pair RoPE are
    put back in rotate-half order (copied) and RoPE runs on halves, as the model the file was written from (`petit
    convert`'s read-back check: the same rows in the same order compute the same bits)."""
    f = GGUFFile(path)
    try:
        meta = f.metadata
        tokens = meta.get("tokenizer.ggml.tokens")
        embed = f.tensors.get("token_embd.weight")
        if embed is None:
            raise ValueError(f"{path}: tensor 'token_embd.weight' is missing")
        n_vocab = embed.shape[0]
        arch, cfg_dict = config_from_gguf(meta, path, n_vocab, f.tensors)
        _rope_factors(f, cfg_dict)
        unpair = None
        if rope_halves and cfg_dict.get("rope_interleaved") and arch.rope_pairs:
            cfg_dict["rope_interleaved"] = False
            heads = cfg_dict["num_attention_heads"]
            unpair = (heads, cfg_dict.get("num_key_value_heads") or heads,
                      cfg_dict.get("head_dim") or cfg_dict["hidden_size"] // heads)
        try:
            family = get_family(cfg_dict["model_type"])
            cfg = family.Config.from_dict(cfg_dict)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
        # the tokenizer before the weights, and its arrays dropped from the metadata once built: building one of
        # 150,000 tokens takes some 150 MB for a moment, which then is not on top of the weights
        tok = tokenizer if tokenizer is not False else None
        if tokenizer is None and tokens is not None:
            from petit.hf.gguf_tokenizer import tokenizer_from_gguf
            tok = tokenizer_from_gguf(meta, path)
        for key in [k for k in meta if k.startswith("tokenizer.ggml.") and not isinstance(meta[k], (int, float, str))]:
            del meta[key]
        del tokens
        src = GGUFSource(f, arch, cfg_dict, weights, (set(kquants) if isinstance(kquants, (set, frozenset))
                         else {None: gguf_fast_types, True: gguf_simd_types}.get(kquants, set)()),
                         search, unpair)
        net = family.build(cfg, src)
        used = {g for hf, (g, _) in src.map.items() if hf in src.used} | set(ROPE_FACTORS)
        used |= {g for hf, parts in src.joined.items() if hf in src.used for g, _ in parts}
        used |= {g for hf, (_, _, names) in src.derived.items() if hf in src.used for g in names}
        extra = sorted(set(f.tensors) - used - set(_mtp_layers(f.tensors, meta, cfg_dict)))
        notes = []
        if extra:
            raise ValueError(f"{path}: tensor(s) {', '.join(extra[:5])} of the {meta['general.architecture']} "
                             f"architecture are not used by Petit's {cfg.model_type} family")
        if src.decoded:
            kinds = sorted(set(src.decoded.values()))
            why = (f"weights={weights!r} was asked for" if weights is not None
                   else gguf_decode_reason()
                   if set(kinds) <= gguf_simd_types() - gguf_fast_types() and kquants is None
                   else "Petit has no kernels for those types on this CPU" if kquants in (None, True)
                   else "gguf_stored=False was asked for" if kquants is False
                   else "only the types a .petit file holds were asked for")
            notes.append(f"{path}: {len(src.decoded)} tensor(s) stored as {', '.join(kinds)} were decoded at load "
                         f"and run as {src.weights or src.recipe and src.recipe.name or 'q8_0'} ({why})")
        if (note := src.fallback_note()) is not None:
            notes.append(note)
        if meta.get("general.architecture") == "phimoe":      # what the file lacks and Petit assumes
            notes.append(f"{path}: {PHIMOE_ASSUMED}")
        for note in notes:
            warnings.warn(note, stacklevel=3)
        if should_repack(repack):
            repack_matrices(net, src.used, release=lambda name, rows=None: None if name in src.joined  # a copy
                            else src._release(*_parts(src, name), rows), force=repack is True)
        check_tokenizer(path, tok, net.arch.vocab_size)
        metadata = {"config": cfg.to_dict(), "format": "gguf", "source": path,
                    "quantization": {"weights": sorted({t.type for t in f.tensors.values()})}}
        if isinstance(meta.get("tokenizer.chat_template"), str):
            metadata["chat_template"] = meta["tokenizer.chat_template"]
        pooling = meta.get(f"{meta['general.architecture']}.pooling_type")
        if pooling is not None:           # an embedding model's (issue 35: petit/generation/embed_config.py)
            metadata["pooling_type"] = pooling
        return Model(cfg, net, tok, metadata, path, source=f, tensors=src.used, warnings=notes)
    except BaseException:
        f.close()
        raise


def _parts(src: GGUFSource, name: str) -> tuple:
    gname, part, t, shape = src._tensor(name)
    return gname, part, shape, t


def _decode(raw: np.ndarray, kind: str, n: tuple) -> np.ndarray:
    """Stored values of GGUF type `kind` as float32 [rows, columns] `n`."""
    if kind == "F32":
        return raw.view(np.float32).reshape(n)
    if kind in INTEGER:
        return raw.view(INTEGER[kind]).astype(np.float32).reshape(n)
    if kind == "MXFP4":
        return mxfp4_f32(*_ggml_mxfp4(raw, n))
    if kind in NATIVE:
        return dequantize(raw, NATIVE[kind], n)
    return dequantize_gguf(raw, kind, n)


def _ggml_mxfp4(raw: np.ndarray, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """ggml's MXFP4 rows [rows, cols] (blocks of 32: an E8M0 exponent, then 16 bytes whose low nibbles are values 0-15
    and high nibbles 16-31, each 2 x FP4 times 2^(e - 128)) as the codes and exponents of Hugging Face's MXFP4 (byte k
    holds values 2k, 2k + 1; FP4 times 2^(e - 127): the same numbers), which gpt_oss's converters read (issue 30,
    dsv4g: llama.cpp's deepseek4 experts)."""
    rows, nb = int(shape[0]), int(shape[1]) // 32
    b = np.ascontiguousarray(raw).view(np.uint8).reshape(rows, nb, 17)
    codes = np.concatenate([b[..., 1:] & 15, b[..., 1:] >> 4], axis=-1)          # value order
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8), b[..., 0]


def _outer_rows(shape: tuple) -> int:
    """The rows of a tensor's [rows, columns] view (a 3-D one's experts x rows; a vector's values)."""
    return int(np.prod(shape[:-1])) if len(shape) > 1 else int(shape[0])


def _mtp_layers(names, meta, cfg) -> list:
    """The tensors of the multi-token-prediction layers a converter appends after the decoder's (GLM-4.5's
    `nextn_predict_layers`, counted in `block_count`): llama.cpp's decoder does not run them, nor does Petit."""
    if not meta.get(f"{meta['general.architecture']}.nextn_predict_layers"):
        return []
    n = cfg["num_hidden_layers"]
    return [g for g in names if g.startswith("blk.") and g.split(".")[1].isdigit() and int(g.split(".")[1]) >= n]


ROPE_FACTORS = ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight")


def _rope_factors(f: GGUFFile, cfg: dict) -> None:
    """RoPE scalings llama.cpp files store as tensors of per-frequency divisors: Llama 3.1's `rope_freqs` (one table:
    a long-rope table with no attention factor) and long-rope's `rope_factors_long` / `_short` (Phi-3)."""
    tables = {}
    for name in ROPE_FACTORS:
        t = f.tensors.get(name)
        if t is not None:
            if t.type != "F32":
                raise ValueError(f"{f.path}: tensor {name!r} is {t.type}, expected F32")
            tables[name] = f.raw(name).view(np.float32).tolist()
    if "rope_freqs.weight" in tables:
        cfg["rope_scaling"] = {"rope_type": "longrope", "long_factor": tables["rope_freqs.weight"],
                               "short_factor": tables["rope_freqs.weight"], "attention_factor": 1.0,
                               "original_max_position_embeddings": cfg["max_position_embeddings"]}
    elif "rope_factors_long.weight" in tables:
        arch = f.metadata.get("general.architecture")
        s = {"rope_type": "longrope", "long_factor": tables["rope_factors_long.weight"],
             "short_factor": tables.get("rope_factors_short.weight", tables["rope_factors_long.weight"])}
        attn = f.metadata.get(f"{arch}.rope.scaling.attn_factor")
        if attn is not None:
            s["attention_factor"] = float(attn)
        cfg["rope_scaling"] = phimoe_mscales(f.metadata, s) if arch == "phimoe" else s
