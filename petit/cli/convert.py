"""`petit convert MODEL -o OUT.petit`: a Hugging Face model folder, a GGUF file or a .petit file into one
self-contained `.petit` file (weights in the chosen type, tokenizer, chat template and generation defaults embedded;
petit.loading.convert does the work). Loading the result is a memory map.
"""
import os
import sys
import time


def add_convert_parser(sub) -> None:
    p = sub.add_parser("convert", help="convert a Hugging Face model folder, a GGUF or a .petit file into a .petit "
                                       "or a GGUF file",
                       description=("Read a Hugging Face model folder (config.json, safetensors or pytorch_model.bin, "
                                    "tokenizer.json), a GGUF file or a .petit file and write one .petit (or GGUF) "
                                    "file with the weights quantized, the tokenizer, the chat template and the "
                                    "generation defaults. Every 4-, 5- and 6-bit block gets the scale of least "
                                    "squared error; a matrix whose rows do not divide into a type's blocks takes "
                                    "the next type that does (Q4_K and Q5_K: Q5_0, Q6_K: Q8_0), as llama.cpp's "
                                    "quantizer does."))
    p.add_argument("folder", metavar="MODEL", help="the Hugging Face model folder, GGUF file or .petit file")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="the file to write: a .petit file, or a GGUF file when it ends in .gguf (for llama.cpp, LM "
                        "Studio, Ollama: the same weights, llama.cpp's tensor names and keys)")
    kind = p.add_mutually_exclusive_group()
    for flags, dtype, more in (
            (["--q8", "--q8_0"], "q8_0", " (a folder's default)"),
            (["--q4_k_m"], "q4_k_m", ": Q4_K, with Q6_K for the output head and the value and MLP-down matrices of "
                                     "a third of the layers, as llama.cpp's Q4_K_M (a 4-bit model's best quality)"),
            (["--q6_k"], "q6_k", ""), (["--q5_k"], "q5_k", ""), (["--q4_k"], "q4_k", ""), (["--q5_0"], "q5_0", ""),
            (["--q4", "--q4_0"], "q4_0", ""), (["--f16"], "f16", ""), (["--f32", "--fp32"], "f32", "")):
        kind.add_argument(*flags, dest="weights", action="store_const", const=dtype,
                          help=(f"the recipe {dtype}" if dtype == "q4_k_m" else f"weights as {dtype}") + more)
    p.add_argument("--name", help="the model's name in a GGUF file (general.name; default: the source's file or "
                                  "folder name)")
    p.add_argument("--no-tokenizer", dest="tokenizer", action="store_false",
                   help="convert a folder that has no tokenizer.json (the file then takes token ids only); "
                        "without it such a folder is refused")
    p.set_defaults(func=cmd_convert, weights=None)


def cmd_convert(args) -> int:
    from petit.loading.convert import convert
    t0 = time.perf_counter()
    model = convert(args.folder, args.output, args.weights, args.tokenizer, args.name)
    size = os.path.getsize(args.output)
    print(f"petit convert: {args.output}: {model.config.model_type}, {model.n_params / 1e6:.1f}M parameters, "
          f"{model.weight_type} weights, {size / 1e6:.1f} MB, in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0
