"""Petit: run, train, quantize and verify small language models on a laptop CPU.

    import petit
    model = petit.load("assets/default-q8_0.petit")
    logits = model.logits(model.tokenizer.encode("Hello"))      # float32 [positions, vocab]
    session = petit.Session(model)                              # keeps the KV cache; you keep the conversation
    for step in session.reply([{"role": "user", "content": "Hi"}], petit.Params(max_tokens=32)):
        print(step.text, end="")
"""

__version__ = "0.1.0"


def load(path, weights=None, tokenizer=None, verify_checksums=True, mmap=True, repack=None, gguf_stored=None,
         search=False):
    """Load a model file or folder; see petit.loading.load."""
    from petit.loading import load as _load
    return _load(path, weights=weights, tokenizer=tokenizer, verify_checksums=verify_checksums, mmap=mmap,
                 repack=repack, gguf_stored=gguf_stored, search=search)


def describe(path) -> dict:
    """What a model file or folder holds, read from its headers without loading the weights (`petit info MODEL`);
    see petit.loading.describe.describe. Raises ValueError (or OSError) naming what is wrong."""
    from petit.loading.describe import describe as _describe
    return _describe(path)


def embed(model_or_path, texts, *, query: bool = False, prompt_name: str | None = None, weights=None):
    """The embeddings of `texts` (a string or a list of strings) by an embedding model, float32 [n, dimension], as
    sentence-transformers computes them from the model's folder (pooling, normalization, prompts; issue 35).

    model_or_path: a Hugging Face folder saved by sentence-transformers (loaded with `weights`, petit.load's default
    q8_0 when None), a loaded Model of one, or an Embedder (petit.generation.embed; keep one to embed many times
    without loading again). query: put the folder's "query" prompt before each text; prompt_name: another prompt."""
    from petit.generation.embed import Embedder
    emb = model_or_path if isinstance(model_or_path, Embedder) else Embedder.open(model_or_path, weights=weights)
    if query and prompt_name is not None:
        raise ValueError("give query=True or prompt_name, not both")
    return emb.embed(texts, prompt_name="query" if query else prompt_name)


def __getattr__(name):
    # the heavier modules (and the compiled kernels) are imported on first use, so `import petit` stays cheap
    if name == "Model":
        from petit.model import Model
        return Model
    if name in ("Sampler", "Session", "Params", "Step", "Stats", "generate_tokens", "stream_text"):
        from petit import generation
        return getattr(generation, name)
    if name == "Embedder":
        from petit.generation.embed import Embedder
        return Embedder
    if name == "Tokenizer":
        from petit.tokenizer import Tokenizer
        return Tokenizer
    raise AttributeError(f"module 'petit' has no attribute {name!r}")
