"""Converting a Hugging Face model folder, a GGUF file or a .petit file into one self-contained `.petit` file, or a
GGUF file (`petit convert`): the model is loaded as petit.load loads it (a folder quantized while it is read) and
what it runs on is written with its tokenizer, chat template and generation defaults (gguf_export.py for GGUF).
Loading the result is a memory map.
"""
import os

from petit.formats.petit_file import check_output_folder, write_petit
from petit.loading.folder import load_folder

STORED_GGUF = frozenset({"Q5_0", "Q4_K", "Q5_K", "Q6_K"})      # GGUF block types a .petit file holds as they are


def convert(source, output, weights: str | None = "q8_0", tokenizer: bool = True, name: str | None = None,
            origin: str | None = None):
    """Convert a Hugging Face folder, a GGUF file or a .petit file; returns the loaded model (its tensors are what was
    written).

    Args:
        weights: the matrices' type (petit.load's weight types, the recipe q4_k_m among them); None keeps a file's
            types as stored (a GGUF file's types a .petit file does not hold become q8_0), a folder is quantized to
            q8_0 then. Scales are searched for the least error (petit.native.quantize).
        tokenizer: False converts a folder without tokenizer.json (refused otherwise).
        name: a GGUF file's general.name (default: the source's file or folder name).
        origin: what a .petit file records it was converted from (default: the source's file or folder name).

    Raises:
        ValueError: an unreadable or unsupported model, a missing tokenizer.json, non-finite weights.
        OSError: the output cannot be written (PetitWriteError: "cannot write OUTPUT: why"); checked for a missing
            output folder before the model is read.
    """
    tok = None if tokenizer else False
    to_gguf = os.fspath(output).lower().endswith(".gguf")
    kept = STORED_GGUF | ({"Q4_1", "Q5_1", "Q2_K", "Q3_K", "IQ4_NL", "IQ4_XS"} if to_gguf else set())
    if os.path.isdir(source):
        check_output_folder(output)
        model = load_folder(source, weights or "q8_0", tok, repack=False, search=True)  # written, not run
    elif os.path.isfile(source):
        check_output_folder(output)
        from petit.formats.gguf import is_gguf
        if is_gguf(source):       # GGUF's types a .petit file holds are kept as stored, the others decoded (to q8_0)
            from petit.loading.gguf import load_gguf
            model = load_gguf(source, weights, tok, repack=False, kquants=kept, search=True)
        else:
            from petit.loading import load
            model = load(source, weights=weights, tokenizer=tok, repack=False, search=True)
    else:
        raise ValueError(f"{source}: no such file or folder (petit convert reads a Hugging Face model folder, a GGUF "
                         f"file or a .petit file)")
    if to_gguf:
        from petit.loading.gguf_export import write_model_gguf
        try:
            write_model_gguf(model, output, source, weights, name)
        except BaseException:
            model.close()
            raise
        return model
    meta = {k: v for k, v in model.metadata.items() if k not in ("source", "checksums")}
    meta["converted_from"] = origin or os.path.basename(os.path.abspath(source))
    if model.tokenizer is not None:
        meta["tokenizer"] = model.tokenizer.to_dict()
    tensors = {name: (dtype, shape, raw) for name, (dtype, shape, raw) in model.tensors.items()}
    write_petit(output, meta, tensors)
    return model
