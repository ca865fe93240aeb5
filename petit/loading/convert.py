"""Converting a Hugging Face model folder into one self-contained `.petit` file (`petit convert`): the folder is
loaded as petit.load loads it (quantized while it is read) and what the model runs on is written with its tokenizer,
chat template and generation defaults. Loading the result is a memory map.
"""
import os

from petit.formats.petit_file import check_output_folder, write_petit
from petit.loading.folder import load_folder


def convert(folder, output, weights: str = "q8_0", tokenizer: bool = True):
    """Convert; returns the loaded model (its tensors are what was written).

    Args:
        tokenizer: False converts a folder without tokenizer.json (refused otherwise).

    Raises:
        ValueError: an unreadable or unsupported folder, a missing tokenizer.json, non-finite weights.
        OSError: the output cannot be written (PetitWriteError: "cannot write OUTPUT: why"); checked for a missing
            output folder before the model is read.
    """
    if not os.path.isdir(folder):
        raise ValueError(f"{folder}: not a folder (petit convert reads a Hugging Face model folder)")
    check_output_folder(output)
    model = load_folder(folder, weights, None if tokenizer else False, repack=False)   # written, not run
    meta = {k: v for k, v in model.metadata.items() if k != "source"}
    meta["converted_from"] = os.path.basename(os.path.abspath(folder))
    if model.tokenizer is not None:
        meta["tokenizer"] = model.tokenizer.to_dict()
    tensors = {name: (dtype, shape, raw) for name, (dtype, shape, raw) in model.tensors.items()}
    write_petit(output, meta, tensors)
    return model
