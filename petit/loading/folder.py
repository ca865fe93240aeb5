"""Open a Hugging Face model folder: config.json picks the family, the family's builder asks for its tensors one at
a time, each is read from the checkpoint (safetensors or pytorch_model.bin), converted to float32 and quantized
before the next is read. There is never a float32 copy of the whole model: the peak is the quantized model plus one
tensor in float32. `petit convert` writes what the loaded model runs on into a self-contained `.petit` file.
"""
import json
import os
import warnings

import numpy as np

from petit.formats.checkpoint import open_checkpoint
from petit.formats.metadata import float_tags, read_folder_metadata
from petit.loading.interleave import repack_matrices, should_repack
from petit.model import Model, check_tokenizer
from petit.models import get_family
from petit.models.source import TensorSource
from petit.native import NonFiniteError, dequantize, quantize, row_bytes, weight_buffer

# checkpoint tensors that are buffers, not parameters (transformers recomputes them)
_BUFFERS = ("rotary_emb.inv_freq", ".attn.bias", ".attn.masked_bias", ".attention.bias", ".attention.masked_bias")


class HFSource(TensorSource):
    """The tensors of a checkpoint, under the names the family's builder asks for. A family whose stored layout
    differs from what the kernels read (fused, transposed or interleaved tensors) provides
    `hf_tensors(cfg, ckpt) -> {name: (shape, make_f32, sources[, make_q8_0[, make_tq2]])}` for those names (make_tq2:
    BitNet's packed ternary rows exactly; make_q8_0: the exact
    q8_0 rows of a stored block format, or None)."""

    def __init__(self, ckpt, family, cfg, where: str, weights: str, search: bool = False):
        super().__init__(where, weights, search)
        self.ckpt = ckpt
        self.derived = family.hf_tensors(cfg, ckpt) if hasattr(family, "hf_tensors") else {}
        self.sources: set[str] = set()      # checkpoint tensors consumed by derived ones
        self.unread = tuple(getattr(family, "UNREAD", ()))     # tensors the family leaves unread on purpose
        if getattr(cfg, "tie_word_embeddings", False):
            self.sources.add("lm_head.weight")  # pytorch_model.bin keeps the tied head (sharing the embedding)

    def names(self):
        return set(self.ckpt.names()) | set(self.derived)

    def has(self, name):
        return name in self.derived or name in self.ckpt

    def info(self, name):
        if name in self.derived:
            return "f32", tuple(self.derived[name][0])
        return self.ckpt.info(name)

    def stored(self, name):
        if name in self.derived:
            return None
        dtype, shape = self.ckpt.info(name)
        if len(shape) != 2 or dtype not in ("f32", "f16", "bf16"):
            return None
        return np.ascontiguousarray(self.ckpt.raw(name)).view(np.uint8).reshape(shape[0], -1)

    def exact_tq2(self, name):
        """A derived matrix's tq2 rows, when the family's hf_tensors gives a fifth element making them (BitNet's
        packed ternary weights), else None."""
        entry = self.derived.get(name)
        if entry is None or len(entry) < 5 or entry[4] is None:
            return None
        self.sources.update(entry[2])
        out = entry[4]()
        for n in entry[2]:
            self.ckpt.release(n)
        return out

    def exact_q8(self, name):
        """A derived matrix's q8_0 rows with exactly its stored values, when the family's hf_tensors gives a maker
        for them (gpt-oss's MXFP4 experts), else None."""
        entry = self.derived.get(name)
        if entry is None or len(entry) < 4 or entry[3] is None:
            return None
        out = entry[3]()
        if out is not None:
            self.sources.update(entry[2])
            for n in entry[2]:
                self.ckpt.release(n)
        return out

    def f32(self, name):
        if name in self.derived:
            shape, make, used = self.derived[name][:3]
            self.sources.update(used)
            out = np.ascontiguousarray(make(), np.float32)
            for n in used:
                self.ckpt.release(n)
            return out
        out = self.ckpt.f32(name)
        self.ckpt.release(name)
        return out

    def convert(self, name, shape, target):
        """Convert a stored matrix a slice of rows at a time (about 4 MB of float32 each), releasing each slice's
        mapped pages as it goes: the peak is the converted matrix plus one slice, not the matrix in float32.

        Raises:
            NonFiniteError: a NaN or an infinity the quantizer met, at its row in the whole matrix.
        """
        dtype, stored_shape = self.ckpt.info(name) if name not in self.derived else ("f32", None)
        if name in self.derived or dtype not in ("f32", "f16", "bf16") or len(stored_shape) != 2:
            return super().convert(name, shape, target)
        rows, cols = shape
        src = self.ckpt.raw(name)
        out = weight_buffer(rows, row_bytes(target, cols))
        step = max(1, (1 << 20) // cols)
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            part = src[r0:r1]
            if dtype != "f32":          # bf16 / f16 -> f32 in C, one pass
                part = dequantize(np.ascontiguousarray(part).view(np.uint8), dtype, (r1 - r0, cols))
            try:
                out[r0:r1] = quantize(np.ascontiguousarray(part, np.float32), target, self.search)
            except NonFiniteError as e:      # its row in the whole matrix
                raise NonFiniteError(r0 + e.row, e.col, e.value, e.dtype) from None
            self.ckpt.release(name, (r0, r1))
        return out

    def unused(self):
        return sorted(n for n in set(self.ckpt.names()) - set(self.used) - self.sources
                      if not n.endswith(_BUFFERS + self.unread) and n not in self.derived)


class _BareModel:
    """A checkpoint saved from a bare base model (`Qwen3Model`: sentence-transformers saves Qwen3-Embedding so,
    issue 35), its tensors under the names the causal-LM class gives them, `model.<name>`: the families ask for
    those."""

    def __init__(self, ckpt):
        self.ckpt = ckpt

    @staticmethod
    def wanted(ckpt) -> bool:
        names = ckpt.names()
        return "embed_tokens.weight" in ckpt and not any(n.startswith("model.") for n in names)

    def names(self):
        return sorted("model." + n for n in self.ckpt.names())

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name.startswith("model.") and name[6:] in self.ckpt

    def info(self, name):
        return self.ckpt.info(name[6:])

    def raw(self, name):
        return self.ckpt.raw(name[6:])

    def f32(self, name):
        return self.ckpt.f32(name[6:])

    def release(self, name, rows=None):
        return self.ckpt.release(name[6:], rows)

    def __getattr__(self, attr):          # folder, files, format, close ...
        return getattr(self.ckpt, attr)


def read_config(folder: str) -> dict:
    path = os.path.join(folder, "config.json")
    if not os.path.isfile(path):
        raise ValueError(f"{folder}: config.json is missing (a Hugging Face model folder needs config.json, the "
                         f"weights and tokenizer.json)")
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f, object_hook=float_tags)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: cannot read: {e}") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path}: not a JSON object")
    return d


def load_folder(folder, weights: str = "q8_0", tokenizer=None, repack: bool | None = None, search: bool = False):
    """Load a Hugging Face model folder into a Model, quantizing the weight matrices to `weights`.

    `tokenizer`: None reads the folder's tokenizer.json (refused when it is missing: a model that loads but cannot
    read a prompt would fail only at the first message); a Tokenizer overrides it; False loads without one.
    `search`: q4_0 blocks get the scale of least error (petit.native.quantize), as `petit convert` writes them.
    """
    folder = os.fspath(folder)
    d = read_config(folder)
    if tokenizer is None and not os.path.isfile(os.path.join(folder, "tokenizer.json")):
        raise ValueError(f"{folder}: tokenizer.json is missing (a Hugging Face model folder needs config.json, the "
                         f"weights and tokenizer.json; to load a model without a tokenizer, pass tokenizer=False, "
                         f"or --no-tokenizer to petit convert)")
    cfg_path = os.path.join(folder, "config.json")
    try:
        family = get_family(d.get("model_type"))
        cfg = family.Config.from_dict(d)
    except ValueError as e:
        raise ValueError(f"{cfg_path}: {e}") from None
    ckpt = open_checkpoint(folder)
    if _BareModel.wanted(ckpt):
        ckpt = _BareModel(ckpt)
    try:
        src = HFSource(ckpt, family, cfg, folder, weights, search)
        net = family.build(cfg, src)
        if should_repack(repack):
            repack_matrices(net, src.used)
        notes = []
        extra = src.unused()
        if extra:
            notes.append(f"{folder}: ignoring checkpoint tensor(s) the {cfg.model_type} family does not use: "
                         f"{', '.join(extra[:8])}{' ...' if len(extra) > 8 else ''}")
        if (note := src.fallback_note()) is not None:
            notes.append(note)
        for note in notes:
            warnings.warn(note, stacklevel=3)
        meta = read_folder_metadata(folder)
        tok = tokenizer if tokenizer is not False else None
        if tokenizer is None:
            from petit.hf.tokenizer import HFTokenizer
            tok = HFTokenizer.from_folder(folder)
        check_tokenizer(folder, tok, net.arch.vocab_size)
        meta = dict(meta, config=cfg.to_dict(), quantization=weights, source=os.path.abspath(folder))
        keep_open = any(isinstance(raw, np.ndarray) and _maps_into(raw) for _, _, raw in src.used.values())
        model = Model(cfg, net, tok, meta, folder, source=ckpt if keep_open else None, tensors=src.used,
                      warnings=notes)
        if not keep_open:
            ckpt.close()
        return model
    except BaseException:
        ckpt.close()
        raise


def _maps_into(a: np.ndarray) -> bool:
    """True when the array is a view of a memory map (it must outlive the checkpoint's files)."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return not isinstance(a, np.ndarray)
