"""A LoRA adapter merged into its base and written as one model file (`petit export BASE --merge ADAPTER -o OUT`,
issue 33): each adapted matrix becomes W + scale * alpha / rank * B A, computed in float32 from the base's values as
read (a folder's float weights; a file's blocks, decoded), then the whole model is written as `petit convert` writes
one: a .petit file, or a GGUF file when OUT ends in .gguf, in any weight type convert takes. With no type given each
matrix keeps its own: an adapted one is quantized again to its type (scales searched for the least error), the
others are copied as stored.

The merged model is the reference the run-time adapter is held to (`petit.loading.lora.merge`); this writes it.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from petit.formats.petit_file import check_output_folder, write_petit
from petit.loading.convert import STORED_GGUF, convert
from petit.loading.lora import Adapter, read_adapter
from petit.native import quantize

_REQUANTIZED = ("f32", "f16", "bf16", "q8_0", "q4_0", "q5_0", "q4_k", "q5_k", "q6_k")


def merge_to_file(base, adapter, output, weights: str | None = None, scale: float = 1.0, name: str | None = None):
    """Merge `adapter` (a GGUF LoRA file or an Adapter) into the model `base` (a Hugging Face folder, a GGUF or a
    .petit file) and write `output`; returns the written model, loaded back (the caller closes it).

    Raises:
        ValueError: an unreadable base or adapter, an adapter for another model, a scale that is not a finite
            number, a matrix the file holds in a form a merge cannot write back.
        OSError: the output cannot be written (nothing is left at `output` then).
    """
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not np.isfinite(scale):
        raise ValueError(f"the adapter scale must be a finite number, got {scale!r}")
    base = os.fspath(base)
    check_output_folder(output)
    model = _load_base(base)
    try:
        ad = adapter if isinstance(adapter, Adapter) else read_adapter(os.fspath(adapter), model)
        tensors = _merged_tensors(model, ad, scale, weights, base)
        meta = {k: v for k, v in model.metadata.items() if k not in ("source", "checksums")}
        meta["converted_from"] = os.path.basename(os.path.abspath(base))
        meta["merged_lora"] = {"adapter": os.path.basename(os.fspath(adapter)) if not isinstance(adapter, Adapter)
                               else None, "scale": float(scale), "alpha": ad.alpha, "rank": ad.rank}
        has_tokenizer = model.tokenizer is not None
        if has_tokenizer:
            meta["tokenizer"] = model.tokenizer.to_dict()
    finally:
        model.close()
    # the merged model goes through a .petit file beside the output, then through convert: the same quantization,
    # recipes and GGUF writer (with its read-back check) as `petit convert`
    tmp = f"{os.fspath(output)}.merge-{os.getpid()}.petit"
    try:
        write_petit(tmp, meta, tensors)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            model = convert(tmp, output, weights, has_tokenizer, name or os.path.splitext(os.path.basename(base))[0],
                            origin=meta["converted_from"])
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    for w in said:                  # what convert says of the file it read is said of the base
        warnings.warn(str(w.message).replace(tmp, base), w.category, stacklevel=2)
    return model


def _load_base(base: str):
    """The base as convert reads it, so its unadapted tensors are written back as they are stored."""
    from petit.formats.gguf import is_gguf
    if os.path.isdir(base):
        from petit.loading.folder import load_folder
        return load_folder(base, "f32", None, repack=False)
    if not os.path.isfile(base):
        raise ValueError(f"{base}: no such file or folder (the base model of --merge: a Hugging Face model folder, a "
                         f"GGUF file or a .petit file)")
    if is_gguf(base):
        from petit.loading.gguf import load_gguf
        return load_gguf(base, None, None, repack=False, kquants=STORED_GGUF, search=True)
    from petit.loading import load
    return load(base, repack=False)


def _merged_tensors(model, ad: Adapter, scale: float, weights: str | None, where: str) -> dict:
    """The model's tensors with each adapted matrix replaced by its merged values: float32 when a weight type is
    asked for (convert quantizes them), else quantized again to the matrix's own type."""
    tensors = dict(model.tensors)
    named = {_address(raw): n for n, (_, _, raw) in tensors.items() if isinstance(raw, np.ndarray)}
    factors = ad.scaling(scale)
    for (i, t), (A, B) in sorted(ad.pairs.items()):
        W = getattr(model.net.layers[i], t)
        tname = named.get(_address(W.raw))
        if tname is None:       # a matrix built from several of the file's tensors (joined when read)
            raise ValueError(f"{where}: layer {i}'s {t} matrix is not stored as one tensor in this model, so an "
                             f"adapter cannot be merged into it")
        dtype, shape, _ = tensors[tname]
        merged = W.dequantize() + np.float32(factors[(i, t)]) * (B @ A)
        if weights is not None or dtype == "f32":
            tensors[tname] = ("f32", tuple(shape), np.ascontiguousarray(merged, np.float32))
        elif dtype in _REQUANTIZED:
            tensors[tname] = (dtype, tuple(shape), quantize(merged, dtype, search=True))
        else:
            raise ValueError(f"{where}: {tname} is {dtype}, which a merge cannot write back; ask for a weight type "
                             f"(--q8, --q4_k_m, ...)")
    return tensors


def _address(a: np.ndarray) -> tuple[int, int]:
    return a.__array_interface__["data"][0], a.nbytes
