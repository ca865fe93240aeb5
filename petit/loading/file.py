"""Loading a `.petit` model file: the file is memory-mapped, its checksums checked, its config picks the family and
the family's builder takes its tensors as zero-copy views (or converted, when a weight type is asked for). Matrices
in GGUF's block types (q5_0, q4_k, q5_k, q6_k, as `petit convert --q4_k_m` writes) are handled as a GGUF file's:
run as stored where the active kernel path runs them fastest so (Q4_K, Q5_K, Q6_K on x86), else decoded to q8_0 at
load (Q5_0, whose row-at-a-time kernel is slower than q8_0's interleaved one; everything on NEON or the scalar
path), with a warning; `gguf_stored=True` keeps every type the path has SIMD kernels for."""
import warnings

import numpy as np

from petit.formats.petit_file import PetitFile, PetitFileError
from petit.loading.interleave import repack_matrices, should_repack
from petit.model import Model, check_tokenizer
from petit.models import get_family
from petit.models.source import TensorSource
from petit.native import dequantize, gguf_decode_reason, gguf_fast_types, gguf_simd_types, gguf_to_q8_0

GGUF_BLOCKS = ("q5_0", "q4_k", "q5_k", "q6_k")    # GGUF's layouts a .petit file may hold too


class PetitSource(TensorSource):
    """Tensors of an open PetitFile."""

    def __init__(self, f, where: str, weights: str | None = None, search: bool = False, stored: bool | None = None):
        super().__init__(where, weights, search)
        self.f = f
        # as a GGUF file's (petit.load's gguf_stored): None, what the path runs fastest as stored (Q4_K, Q5_K,
        # Q6_K on x86); True, every type it has SIMD kernels for (Q5_0 too); False, none
        self.fast = {None: gguf_fast_types, True: gguf_simd_types}.get(stored, set)()
        self.decoded: dict[str, str] = {}

    def _check(self, name, shape):
        try:
            return super()._check(name, shape)
        except ValueError as e:
            raise PetitFileError(str(e)) from None

    def names(self):
        return self.f.tensors.keys()

    def info(self, name):
        i = self.f.tensors[name]
        if i.dtype in GGUF_BLOCKS and i.dtype.upper() not in self.fast:
            return "q8_0", i.shape             # a block type run decoded to q8_0 (see stored)
        return i.dtype, i.shape

    def stored(self, name):
        i = self.f.tensors[name]
        if i.dtype in GGUF_BLOCKS and i.dtype.upper() not in self.fast:
            self.decoded[name] = i.dtype      # decoded and quantized to q8_0, as a GGUF file's would be
            return None
        return self.f.raw(name)

    def exact_q8(self, name):
        i = self.f.tensors[name]
        if i.dtype != "q5_0" or len(i.shape) != 2:
            return None
        return gguf_to_q8_0(self.f.raw(name), "Q5_0", i.shape)

    def f32(self, name):
        i = self.f.tensors[name]
        raw = self.f.raw(name)
        if i.dtype == "f32":
            return raw.view(np.float32).reshape(i.shape)
        shape2 = (int(np.prod(i.shape[:-1])), i.shape[-1])
        return dequantize(raw, i.dtype, shape2).reshape(i.shape)


def load_file(path: str, weights: str | None = None, tokenizer=None, verify_checksums: bool = True,
              mmap: bool = True, repack: bool | None = None, search: bool = False,
              gguf_stored: bool | None = None) -> Model:
    """Load a `.petit` file (see petit.loading.load for the arguments)."""
    f = PetitFile(path, map_file=mmap)
    try:
        notes = []
        force, repack = repack is True, should_repack(repack)
        if verify_checksums:
            note = f.check_checksums(release=repack)
            if note:
                warnings.warn(note, stacklevel=3)
                notes.append(note)
        meta = f.metadata
        cfg_dict = meta.get("config")
        if not isinstance(cfg_dict, dict):
            raise PetitFileError(f"{path}: metadata: 'config' is missing or not an object")
        try:
            family = get_family(cfg_dict.get("model_type"))
            cfg = family.Config.from_dict(cfg_dict)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
        src = PetitSource(f, path, weights, search, gguf_stored)
        net = family.build(cfg, src)
        extra = src.unused()
        if extra:
            raise PetitFileError(f"{path}: unexpected tensor(s) {', '.join(extra[:5])} for model_type "
                                 f"{cfg.model_type!r}")
        if (note := src.fallback_note()) is not None:
            warnings.warn(note, stacklevel=3)
            notes.append(note)
        if src.decoded and weights is None:
            kinds = sorted(set(src.decoded.values()))
            why = (gguf_decode_reason()
                   if {k.upper() for k in kinds} <= gguf_simd_types() and gguf_stored is None
                   else "this CPU's kernel path has no SIMD kernels for them" if gguf_stored is not False
                   else "gguf_stored=False")
            note = (f"{path}: {len(src.decoded)} matri(ces) stored as {', '.join(kinds)} were decoded at load and run "
                    f"as q8_0 ({why})")
            warnings.warn(note, stacklevel=3)
            notes.append(note)
        if repack:
            repack_matrices(net, src.used, release=f.release, force=force)
        tok = tokenizer if tokenizer is not False else None
        if tokenizer is None and meta.get("tokenizer") is not None:
            try:
                from petit.hf.tokenizer import tokenizer_from_dict
                tok = tokenizer_from_dict(meta["tokenizer"])
            except (ValueError, TypeError, KeyError) as e:
                raise PetitFileError(f"{path}: metadata: tokenizer: {e}") from None
        check_tokenizer(path, tok, net.arch.vocab_size)
        return Model(cfg, net, tok, meta, path, source=f, tensors=src.used, warnings=notes)
    except BaseException:
        f.close()
        raise
