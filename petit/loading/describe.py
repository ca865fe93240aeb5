"""What a model file or folder holds, read from its headers without building the model (`petit info MODEL`): the
format, architecture, whether Petit runs it, parameters, tensor types and sizes, context, tokenizer and template.
A file Petit cannot run is still described, with the reason."""
import os
from math import prod


def describe(path) -> dict:
    """A description of the model at `path` (.petit, GGUF or a Hugging Face folder).

    Raises:
        ValueError: the path holds no readable model (the message names what is wrong).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        return _folder(path)
    if not os.path.exists(path):
        raise ValueError(f"{path}: no such file or folder")
    from petit.formats.gguf import is_gguf
    return _gguf(path) if is_gguf(path) else _petit(path)


def _tensor_summary(items) -> tuple[int, dict]:
    """(parameters, {type: [tensors, bytes]}) of (type, shape, nbytes) items."""
    params, types = 0, {}
    for dtype, shape, nbytes in items:
        params += prod(shape)
        count, size = types.get(dtype, (0, 0))
        types[dtype] = [count + 1, size + nbytes]
    return params, types


def _runs(model_type) -> str | None:
    """None when Petit has a family for model_type, else why not."""
    from petit.models import get_family
    try:
        get_family(model_type)
        return None
    except ValueError as e:
        return str(e)


def _gguf(path: str) -> dict:
    from petit.formats.gguf import GGUFFile
    from petit.loading.gguf_archs import ARCHS, unsupported
    with GGUFFile(path) as f:
        m = f.metadata
        arch = m.get("general.architecture")
        params, types = _tensor_summary((t.type, t.shape, t.nbytes) for t in f.tensors.values())
        tokens = m.get("tokenizer.ggml.tokens")
        template = m.get("tokenizer.chat_template")
        out = {"path": path, "format": f"GGUF v{f.version}", "name": m.get("general.name"), "architecture": arch,
               "runs": None if arch in ARCHS else unsupported(arch),
               "parameters": params, "tensors": len(f.tensors), "types": types,
               "context_length": m.get(f"{arch}.context_length"), "layers": m.get(f"{arch}.block_count"),
               "hidden_size": m.get(f"{arch}.embedding_length"),
               "tokenizer": (f"{m.get('tokenizer.ggml.model')} ({m.get('tokenizer.ggml.pre', 'no pre-tokenizer')}), "
                             f"{len(tokens)} tokens") if tokens is not None else None,
               "chat_template": _template(template), "file_size": os.path.getsize(path),
               "at_load": _gguf_at_load(types), "kv_width": _gguf_kv_width(m, arch),
               "pooling": m.get(f"{arch}.pooling_type")}        # an embedding model's (issue 35)
    refused = out["at_load"]["refused"]
    if out["runs"] is None and refused:
        out["runs"] = f"tensor type(s) {', '.join(refused)} are not ones Petit reads"
    return out


def _gguf_at_load(types: dict) -> dict:
    """How this CPU's kernel path takes each of a GGUF file's types: {"as stored": [...], "decoded to q8_0": [...],
    "refused": [...]}, each in order of size (petit.loading.gguf's choice: Petit's own types and the block types
    the path runs fastest as stored are kept, the other readable ones decoded, the rest refused)."""
    from petit.native import gguf_decodes, gguf_fast_types
    stored = {"F32", "F16", "BF16", "Q8_0", "Q4_0"} | gguf_fast_types()
    out = {"as stored": [], "decoded to q8_0": [], "refused": []}
    for t, _ in sorted(types.items(), key=lambda kv: -kv[1][1]):
        out["as stored" if t in stored else "decoded to q8_0" if gguf_decodes(t) else "refused"].append(t)
    return out


def _petit_at_load(types: dict) -> dict | None:
    """For a .petit file holding GGUF's block types, how this CPU's path takes each (as a GGUF file's: the ones it
    runs fastest as stored kept, the others decoded to q8_0); None when it holds only Petit's first types."""
    from petit.native import gguf_fast_types
    blocks = [t for t in types if t in ("q5_0", "q4_k", "q5_k", "q6_k")]
    if not blocks:
        return None
    out = {"as stored": [], "decoded to q8_0": []}
    for t, _ in sorted(types.items(), key=lambda kv: -kv[1][1]):
        out["as stored" if t not in blocks or t.upper() in gguf_fast_types() else "decoded to q8_0"].append(t)
    return out


def _petit(path: str) -> dict:
    from petit.formats.petit_file import PetitFile
    with PetitFile(path) as f:
        meta, cfg = f.metadata, f.metadata.get("config") or {}
        params, types = _tensor_summary((t.dtype, t.shape, t.nbytes) for t in f.tensors.values())
        tok = meta.get("tokenizer")
        return {"path": path, "format": "petit", "name": os.path.basename(path), "architecture": cfg.get("model_type"),
                "runs": _runs(cfg.get("model_type")), "parameters": params, "tensors": len(f.tensors), "types": types,
                "context_length": cfg.get("max_position_embeddings"), "layers": cfg.get("num_hidden_layers"),
                "hidden_size": cfg.get("hidden_size"),
                "tokenizer": _petit_tokenizer(tok), "chat_template": _template(meta.get("chat_template")),
                "file_size": os.path.getsize(path), "at_load": _petit_at_load(types), "kv_width": _kv_width(cfg)}


def _petit_tokenizer(tok) -> str | None:
    if not isinstance(tok, dict):
        return None
    if tok.get("type") == "bpe":
        return f"Petit byte-level BPE, {len(tok.get('vocab', []))} tokens"
    return f"Hugging Face tokenizer ({tok.get('type')})"


def _folder(path: str) -> dict:
    from petit.formats.checkpoint import open_checkpoint
    from petit.formats.metadata import read_folder_metadata
    from petit.loading.folder import read_config
    cfg = read_config(path)
    ckpt = open_checkpoint(path)
    try:
        items = []
        for name in ckpt.names():
            dtype, shape = ckpt.info(name)
            items.append((dtype, shape, prod(shape) * {"f32": 4, "f16": 2, "bf16": 2}.get(dtype, 4)))
        params, types = _tensor_summary(items)
    finally:
        ckpt.close()
    meta = read_folder_metadata(path)
    has_tok = os.path.isfile(os.path.join(path, "tokenizer.json"))
    return {"path": path, "format": "Hugging Face folder", "name": os.path.basename(os.path.normpath(path)),
            "architecture": cfg.get("model_type"), "runs": _runs(cfg.get("model_type")), "parameters": params,
            "tensors": len(items), "types": types, "context_length": cfg.get("max_position_embeddings"),
            "layers": cfg.get("num_hidden_layers"), "hidden_size": cfg.get("hidden_size"),
            "tokenizer": "tokenizer.json" if has_tok else None, "chat_template": _template(meta.get("chat_template")),
            "file_size": sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path)
                             if os.path.isfile(os.path.join(path, n))), "kv_width": _kv_width(cfg)}


def _kv_width(cfg: dict) -> int | None:
    """Values one layer's KV cache keeps per position and per K or V (KV heads x head size), from a config; None
    when the config does not say (what a memory estimate needs, with the layers and the context)."""
    cfg = cfg.get("text_config") or cfg if isinstance(cfg, dict) else {}
    heads, hidden = cfg.get("num_attention_heads"), cfg.get("hidden_size")
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or (hidden // heads if isinstance(hidden, int) and isinstance(heads, int)
                                       and heads else None)
    return kv_heads * head_dim if isinstance(kv_heads, int) and isinstance(head_dim, int) else None


def _gguf_kv_width(m: dict, arch) -> int | None:
    heads, hidden = m.get(f"{arch}.attention.head_count"), m.get(f"{arch}.embedding_length")
    kv_heads = m.get(f"{arch}.attention.head_count_kv", heads)
    head_dim = m.get(f"{arch}.attention.key_length") or (hidden // heads if isinstance(hidden, int)
                                                           and isinstance(heads, int) and heads else None)
    if isinstance(kv_heads, list):            # per-layer counts (hybrid models): the widest layer's
        kv_heads = max(kv_heads, default=0)
    return kv_heads * head_dim if isinstance(kv_heads, int) and isinstance(head_dim, int) else None


def _template(t) -> str | None:
    if not isinstance(t, str) or not t:
        return None
    return f"{len(t)} characters" + (", " + "ChatML" if "<|im_start|>" in t else "")


def format_description(d: dict) -> str:
    """The description as the lines `petit info MODEL` prints."""
    def size(n):
        for unit, s in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
            if n >= s:
                return f"{n / s:.1f} {unit}"
        return f"{n} B"

    runs = "yes" if d["runs"] is None else f"no: {d['runs']}"
    lines = [f"model:          {d['path']}", f"format:         {d['format']}",
             f"name:           {d['name']}", f"architecture:   {d['architecture']}", f"runs in Petit:  {runs}",
             f"parameters:     {d['parameters']:,} in {d['tensors']} tensors ({size(d['file_size'])} on disk)"]
    by_size = sorted(d["types"].items(), key=lambda kv: -kv[1][1])
    lines.append("tensor types:   " + ", ".join(f"{t} {n} ({size(b)})" for t, (n, b) in by_size))
    if d.get("at_load"):
        from petit.native import info
        ways = "; ".join(f"{', '.join(ts)} {how}" for how, ts in d["at_load"].items() if ts)
        lines.append(f"at load:        {ways} (on the {info()['isa']} path)")
    for label, key in (("layers", "layers"), ("hidden size", "hidden_size"), ("context", "context_length"),
                       ("tokenizer", "tokenizer"), ("chat template", "chat_template")):
        lines.append(f"{label + ':':<16}{d[key] if d[key] is not None else 'none'}")
    if d.get("pooling") is not None:
        from petit.loading.gguf_gemb35 import GGUF_POOLING
        how = f"{GGUF_POOLING[d['pooling']]} pooling" if d["pooling"] in GGUF_POOLING else "no text vector"
        lines.append(f"embeddings:     pooling_type {d['pooling']} ({how})")
    return "\n".join(lines)

