"""Export a trainer checkpoint as a self-contained `.petit` model file, quantized or not.

    petit export CHECKPOINT -o MODEL.petit [--q8 | --q4 | --f32]
    petit export BASE --merge ADAPTER.gguf -o OUT.petit|OUT.gguf [--lora-scale S] [--q8 | --q4_k_m | ...]

The second form (petit.loading.lora_merge) merges a LoRA adapter `petit finetune` wrote into its base model.

`export_checkpoint(ckpt_dir, out_path, weights="q8_0")` writes the file (atomically, through
`petit.formats.petit_file.write_petit`) and returns a summary. Weight matrices are stored as q8_0 (the default), q4_0
or f32; norm weights always stay f32. The metadata carries the config (Hugging Face llama names), the tokenizer,
the chat template of a chat model, generation defaults for a chat model, and `quantization`:
`{"weights", "tool", "source_step"}`. It also records `checksums`: `{"sha256": {tensor: hex digest of its stored
bytes}}`, so `petit verify` can tell a file damaged after export from one the engine misreads, and (as every
`write_petit` does) `"pt64"`, the fast checksums `petit.load` checks before the model runs.

`run_export(args)` exit codes: 0 written, 1 an error (missing or unreadable checkpoint, a matrix that cannot be
quantized, the file cannot be written), reported as one line `petit export: error: ...` on stderr; argparse
usage errors exit 2.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np

WEIGHT_TYPES = ("q8_0", "q4_0", "f32")
MERGE_ONLY_TYPES = ("q4_k_m", "q6_k", "q5_k", "q4_k", "q5_0", "f16")
BLOCK = 32
_ALIGN = 64


def _pad(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def format_size(n: int) -> str:
    """Bytes in SI units with three significant digits: 812 B, 61.2 kB, 4.62 MB, 1.05 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}" if n / scale < 100 else f"{n / scale:.0f} {unit}"
    return f"{n} B"


def export_checkpoint(ckpt_dir, out_path, weights: str = "q8_0", *, generation: dict | None = None) -> dict:
    """Write `out_path` (.petit, version 1) from a trainer checkpoint directory.

    Args:
        ckpt_dir: The checkpoint directory (see trainer/checkpoint.py).
        out_path: The model file to write; an existing file is replaced only once the new one is complete.
        weights: "q8_0", "q4_0" or "f32": how the weight matrices are stored (norms are always f32).
        generation: Generation defaults for the metadata; None picks them (greedy for a chat model, none
            otherwise); {} writes none.

    Returns:
        {"path", "bytes" (file size), "fp32_bytes" (the size of the same export with f32 matrices, to 64 bytes),
         "ratio" (bytes / fp32_bytes), "weights", "source_step", "tensors"}.

    Raises:
        ValueError: An unknown weight type; a missing, incomplete or unreadable checkpoint; a checkpoint without
            a tokenizer; non-finite weights; a matrix whose columns are not a multiple of 32 for q8_0 / q4_0.
        OSError: The file cannot be written (an existing file is left untouched).
    """
    from petit import __version__
    from petit.formats.petit_file import write_petit
    from petit.native import quantize
    from trainer.checkpoint import load_checkpoint
    from trainer.model import check_params, validate_config

    if weights not in WEIGHT_TYPES:
        raise ValueError(f"weights must be one of {', '.join(WEIGHT_TYPES)}, got {weights!r}")
    ckpt = load_checkpoint(ckpt_dir)
    if ckpt.tokenizer is None:
        raise ValueError(f"checkpoint {ckpt.path} has no tokenizer (trained on raw token ids); a .petit file "
                         f"needs one")
    try:
        config = validate_config(dict(ckpt.model_config))      # normalised; includes rope_interleaved: false
        check_params(ckpt.params, config)
    except ValueError as e:
        raise ValueError(f"checkpoint {ckpt.path}: {e}") from None

    # check every tensor before quantizing or writing anything
    for name, p in ckpt.params.items():
        if not np.all(np.isfinite(p)):
            raise ValueError(f"checkpoint {ckpt.path}: tensor {name} has non-finite values (did training "
                             f"diverge?)")
        if weights != "f32" and p.ndim == 2 and p.shape[1] % BLOCK:
            raise ValueError(f"tensor {name} of shape {tuple(p.shape)} cannot be stored as {weights}: its "
                             f"{p.shape[1]} columns are not a multiple of {BLOCK}; export with --f32")

    tensors, digests, fp32_data, data = {}, {}, 0, 0
    for name, p in ckpt.params.items():                          # checkpoint order = param_shapes order
        w = np.ascontiguousarray(p, dtype="<f4")
        if p.ndim == 2 and weights != "f32":
            stored, dtype = quantize(w, weights, search=True), weights   # uint8 [rows, row_bytes]; scales searched
        else:
            stored, dtype = w, "f32"
        tensors[name] = (dtype, tuple(int(d) for d in p.shape), stored)
        digests[name] = hashlib.sha256(stored.tobytes()).hexdigest()
        fp32_data += _pad(w.nbytes)
        data += _pad(stored.nbytes)

    metadata = {"format": "petit", "config": config, "tokenizer": ckpt.tokenizer}
    if ckpt.chat_template:
        metadata["chat_template"] = ckpt.chat_template
    if generation is None:
        # a tiny chat model answers best greedily; for a text model leave the choice to the user / app
        generation = {"temperature": 0.0, "top_k": 0, "top_p": 1.0} if ckpt.chat_template else {}
    if generation:
        metadata["generation"] = generation
    metadata["quantization"] = {"weights": weights, "tool": f"petit {__version__} export",
                                "source_step": int(ckpt.step)}
    metadata["checksums"] = {"sha256": digests}
    write_petit(out_path, metadata, tensors)
    size = Path(out_path).stat().st_size
    fp32_bytes = size - data + fp32_data
    return {"path": str(out_path), "bytes": size, "fp32_bytes": fp32_bytes, "ratio": size / fp32_bytes,
            "weights": weights, "source_step": int(ckpt.step), "tensors": len(tensors)}


def export_petit(checkpoint_dir, out_path, *, generation: dict | None = None) -> None:
    """The f32 export (kept for existing callers): `export_checkpoint(..., weights="f32")`."""
    export_checkpoint(checkpoint_dir, out_path, "f32", generation=generation if generation is not None else {})


def add_export_parser(subparsers):
    """Register `export` on an argparse subparsers object; its default `func` is run_export."""
    p = subparsers.add_parser(
        "export", help="write a trained checkpoint, or a base model with a LoRA adapter merged in (--merge), as one "
                       "model file",
        description="Write a trainer checkpoint as a self-contained .petit model file: config, tokenizer, chat "
                    "template and weights. Weight matrices are quantized to q8_0 (default) or q4_0, or kept "
                    "f32; norm weights stay f32. Check the result with `petit verify MODEL.petit`. With --merge "
                    "ADAPTER, SOURCE is a base model (Hugging Face folder, GGUF or .petit file) and the adapter "
                    "`petit finetune` wrote is merged into it (W + scale * alpha / rank * B A, in float32), then "
                    "written as `petit convert` writes a model: a .petit file, or a GGUF file when the output ends "
                    "in .gguf, each matrix in its own type unless a type is given.")
    p.add_argument("checkpoint", metavar="SOURCE",
                   help="checkpoint directory written by `petit train`; with --merge, the base model")
    p.add_argument("-o", "--output", metavar="OUT", required=True,
                   help="the model file to write (.petit; with --merge also .gguf)")
    p.add_argument("--merge", metavar="ADAPTER", help="a LoRA adapter file (GGUF, as `petit finetune` writes) to "
                                                      "merge into the base model SOURCE")
    p.add_argument("--lora-scale", metavar="S",
                   help="with --merge: the adapter's product times S (default 1.0, as `--lora-scale` at run time)")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--q8", "--q8_0", dest="weights", action="store_const", const="q8_0",
                      help="8-bit weights, q8_0 (a checkpoint's default): about 27%% of f32, nearly lossless")
    kind.add_argument("--q4", "--q4_0", dest="weights", action="store_const", const="q4_0",
                      help="4-bit weights, q4_0: about 14%% of f32, clearly lossier on tiny models")
    kind.add_argument("--f32", "--fp32", dest="weights", action="store_const", const="f32",
                      help="float32 weights, exactly as trained (--fp32: the same)")
    for flag in MERGE_ONLY_TYPES:
        kind.add_argument(f"--{flag}", dest="weights", action="store_const", const=flag,
                          help=f"with --merge: weights as {flag}" + (" (llama.cpp's mix)" if flag == "q4_k_m" else ""))
    p.set_defaults(func=run_export, weights=None)
    return p


def run_export(args) -> int:
    """Run `petit export`; returns the exit code (0 written, 1 error)."""
    if args.merge is not None:
        return _run_merge(args)
    if args.weights not in (None,) + WEIGHT_TYPES:
        print(f"petit export: error: --{args.weights} applies to --merge only; a checkpoint is written as q8_0, q4_0 "
              f"or f32", file=sys.stderr)
        return 1
    if args.lora_scale is not None:
        print("petit export: error: --lora-scale applies to --merge only", file=sys.stderr)
        return 1
    try:
        s = export_checkpoint(args.checkpoint, args.output, args.weights or "q8_0")
    except (ValueError, OSError) as e:
        msg = str(e) if isinstance(e, ValueError) else f"cannot write {args.output}: {e.strerror or e}"
        print(f"petit export: error: {msg}", file=sys.stderr)
        return 1
    print(f"wrote {s['path']}: {format_size(s['bytes'])} ({s['weights']}), {100 * s['ratio']:.1f}% of f32 "
          f"({format_size(s['fp32_bytes'])})")
    return 0


def _run_merge(args) -> int:
    from petit.loading.lora_merge import merge_to_file
    try:
        scale = 1.0 if args.lora_scale is None else float(args.lora_scale)
    except ValueError:
        scale = args.lora_scale             # merge_to_file names it in its error
    try:
        model = merge_to_file(args.checkpoint, args.merge, args.output, args.weights, scale)
    except (ValueError, OSError) as e:
        msg = str(e) if isinstance(e, ValueError) else f"cannot write {args.output}: {e.strerror or e}"
        print(f"petit export: error: {msg}", file=sys.stderr)
        return 1
    types = sorted({W.dtype for W in model.net.matrices()})
    model.close()
    print(f"wrote {args.output}: {format_size(Path(args.output).stat().st_size)} ({', '.join(types)}), "
          f"{args.merge} merged into {args.checkpoint} at scale {scale:g}")
    return 0


