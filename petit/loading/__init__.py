"""Loading a model (`petit.load`): a `.petit` file (file.py), a GGUF file (gguf.py) or a Hugging Face model folder
(folder.py). All read through petit.formats, build the network with the family's builder from petit.models and hand
back a petit.model.Model; convert.py writes a loaded folder out as one `.petit` file."""
import os

from petit.loading.file import load_file
from petit.model import Model
from petit.native import trim_heap

WEIGHT_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q5_0", "q4_k", "q5_k", "q6_k", "q4_k_m")


def load(path, weights: str | None = None, tokenizer=None, verify_checksums: bool = True,
         mmap: bool = True, repack: bool | None = None, gguf_stored: bool | None = None, search: bool = False) -> Model:
    """Load a `.petit` model file, a GGUF file or a Hugging Face model folder.

    Args:
        path: the file (.petit or GGUF, told apart by their first bytes), or a folder with config.json, safetensors
            (or pytorch_model.bin) and tokenizer.json.
        weights: None to run a .petit file's weights as stored (memory-mapped, zero-copy); or one of f32, f16, bf16,
            q8_0, q4_0, q5_0, q4_k, q5_k, q6_k to convert the weight matrices at load (an in-memory copy), or the
            recipe q4_k_m (Q4_K with Q6_K where a model is most sensitive, as llama.cpp's Q4_K_M; see
            petit.models.recipe). A folder is quantized while it is read, to q8_0 unless given.
        tokenizer: overrides the model's tokenizer; False loads a folder without tokenizer.json (a model that
            takes token ids only), which is otherwise refused.
        verify_checksums: check every tensor of a .petit file against the checksums it records before anything
            runs (about 0.1 s per GB in the page cache); a file that records none loads with a warning (in
            `model.warnings` too). False skips the check.
        mmap: True maps a .petit file's weights (they load at once, stay shared with the page cache and are read
            from disk as they are first used); False reads them into private memory on huge pages, which decodes
            about 15 % faster where the system has transparent huge pages, at the cost of reading the whole file
            at load. A folder's weights are converted into memory either way.
        repack: True rewrites the q8_0 / q4_0 matrices with their rows interleaved in groups of 8, the layout the
            x86 kernels (AVX2, AVX-512) multiply fastest (decode 1.1-2.5x on an AVX2 CPU for a small model, the
            same logits bit for bit); a mapped file's matrices are then copied into memory on huge pages (its file
            pages leave the resident set). None (the default) repacks where the active kernel path prefers it, but
            copies a mapped file's matrices only up to 1 GiB of them (petit.loading.interleave.COPY_MAX): a larger
            model's decode is bound by memory, where the stored rows run within 5-9 %, and it opens in about a
            second instead of the copy's several. False runs the matrices as stored.
        gguf_stored: for a GGUF file (and a .petit file's GGUF block types), which block types other than q8_0 /
            q4_0 run as stored (the others are decoded to q8_0 at load). None: those the active path runs fastest
            so (Q4_K, Q5_K, Q6_K on x86); True: every type it has SIMD kernels for (Q4_1, Q5_0, Q5_1 and IQ4_NL too:
            less memory, slower); False: none.
        search: q4_0 blocks get the scale of least squared error instead of GGML's max / -8 (some 20 times slower
            to quantize; `petit convert` and `petit export` write them so); the other 4-, 5- and 6-bit types always.

    Raises:
        PetitFileError / ValueError: a missing, corrupt, damaged or unsupported model, naming the file and what is
            wrong (for damage, the tensor).
    """
    if weights is not None and weights not in WEIGHT_TYPES:
        raise ValueError(f"weights must be one of {', '.join(WEIGHT_TYPES)}, got {weights!r}")
    path = os.fspath(path)
    try:
        if os.path.isdir(path):
            from petit.loading.folder import load_folder     # the checkpoint readers, only when a folder is loaded
            return load_folder(path, weights or "q8_0", tokenizer, repack, search)
        from petit.formats.gguf import is_gguf
        if is_gguf(path):
            from petit.loading.gguf import load_gguf
            return load_gguf(path, weights, tokenizer, repack, gguf_stored, search)
        return load_file(path, weights, tokenizer, verify_checksums, mmap, repack, search, gguf_stored)
    finally:
        trim_heap()       # what a load allocated and freed (a GGUF vocabulary's strings, fp32 tensors) goes back
