"""`petit convert FOLDER -o MODEL.petit`: a Hugging Face model folder into one self-contained `.petit` file (weights
in the chosen type, tokenizer, chat template and generation defaults embedded). Loading the result is a memory map.
"""
import os
import sys
import time


def add_convert_parser(sub) -> None:
    p = sub.add_parser("convert", help="convert a Hugging Face model folder into a .petit file",
                       description="Read a Hugging Face model folder (config.json, safetensors or pytorch_model.bin, "
                                   "tokenizer.json) and write one .petit file with the weights quantized, the tokenizer, "
                                   "the chat template and the generation defaults.")
    p.add_argument("folder", metavar="FOLDER", help="the Hugging Face model folder")
    p.add_argument("-o", "--output", required=True, metavar="MODEL.petit", help="the file to write")
    kind = p.add_mutually_exclusive_group()
    for flags, dtype in ((["--q8"], "q8_0"), (["--q4"], "q4_0"), (["--f16"], "f16"), (["--f32", "--fp32"], "f32")):
        kind.add_argument(*flags, dest="weights", action="store_const", const=dtype,
                          help=f"weights as {dtype}" + (" (default)" if dtype == "q8_0" else ""))
    p.add_argument("--no-tokenizer", dest="tokenizer", action="store_false",
                   help="convert a folder that has no tokenizer.json (the file then takes token ids only); "
                        "without it such a folder is refused")
    p.set_defaults(func=cmd_convert, weights="q8_0")


def convert(folder, output, weights: str = "q8_0", tokenizer: bool = True):
    """Convert; returns the loaded model (its tensors are what was written).

    Args:
        tokenizer: False converts a folder without tokenizer.json (refused otherwise).

    Raises:
        ValueError: an unreadable or unsupported folder, a missing tokenizer.json, non-finite weights.
        OSError: the output cannot be written (PetitWriteError: "cannot write OUTPUT: why"); checked for a missing
            output folder before the model is read.
    """
    from petit.hf.loader import load_folder
    from petit.petit_file import check_output_folder, write_petit
    if not os.path.isdir(folder):
        raise ValueError(f"{folder}: not a folder (petit convert reads a Hugging Face model folder)")
    check_output_folder(output)
    model = load_folder(folder, weights, None if tokenizer else False)
    meta = {k: v for k, v in model.metadata.items() if k != "source"}
    meta["converted_from"] = os.path.basename(os.path.abspath(folder))
    if model.tokenizer is not None:
        meta["tokenizer"] = model.tokenizer.to_dict()
    tensors = {name: (dtype, shape, raw) for name, (dtype, shape, raw) in model.tensors.items()}
    write_petit(output, meta, tensors)
    return model


def cmd_convert(args) -> int:
    t0 = time.perf_counter()
    model = convert(args.folder, args.output, args.weights, args.tokenizer)
    size = os.path.getsize(args.output)
    print(f"petit convert: {args.output}: {model.config.model_type}, {model.n_params / 1e6:.1f}M parameters, "
          f"{args.weights} weights, {size / 1e6:.1f} MB, in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0
