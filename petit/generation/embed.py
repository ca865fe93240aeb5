"""Text embeddings (issue 35): an embedding model's hidden states pooled into one vector a text, as
sentence-transformers computes them from the same folder (petit/generation/embed_config.py reads its files), or
from llama.cpp's GGUF file of one (its pooling key).

    from petit.generation.embed import Embedder
    emb = Embedder.open("bge-small-en-v1.5")         # a Hugging Face folder saved by sentence-transformers
    vectors = emb.embed(["a text", "another"])        # float32 [2, dim], normalized when the folder says so
    queries = emb.embed(["what is ..."], prompt_name="query")

Each text is tokenized as its tokenizer does with special tokens (BERT's [CLS] ... [SEP], Qwen3-Embedding's final
<|endoftext|>), truncated to the folder's max_seq_length with the special tokens kept, and run alone: no padding,
so the padding side sentence-transformers uses (left for Qwen3-Embedding) changes nothing; a batch of texts is one
step of the kernels (Model.hidden_states), each text's states bit for bit those it gets alone.
"""
import numpy as np

from petit.generation.embed_config import EmbedSettings, gguf_settings, read_settings

BATCH = 32      # texts a step at most
TOKENS = 4096   # and tokens a step at most (the step's buffers grow with them), unless one text alone is longer
_FROM = ("embeddings are read from a Hugging Face folder saved by sentence-transformers or a GGUF file with a "
         "pooling key (.petit embedding files are not supported yet)")


class Embedder:
    """An embedding model: a loaded Model (an encoder such as BERT, or a decoder such as Qwen3-Embedding) and the
    settings that pool its states."""

    def __init__(self, model, settings: EmbedSettings):
        if model.tokenizer is None or not hasattr(model.tokenizer, "hf_encode"):
            raise ValueError(f"{model.path}: embeddings need the folder's Hugging Face tokenizer (tokenizer.json)")
        self.model, self.settings = model, settings
        limit = model.context_length
        self.max_length = min(settings.max_length or limit, limit)
        self._specials = None

    @classmethod
    def open(cls, model_or_path, weights: str | None = None) -> "Embedder":
        """An Embedder of a loaded Model, of a model folder or of a GGUF file (loaded with `weights`: None is
        petit.load's default, q8_0 for a folder, a GGUF file's types as stored; "f32" ...).
        Raises ValueError for a model that is not an embedding model or whose settings Petit cannot apply."""
        import os

        from petit.loading import load
        model = model_or_path
        if isinstance(model_or_path, (str, os.PathLike)):
            if not os.path.isdir(model_or_path) and not str(model_or_path).lower().endswith(".gguf"):
                raise ValueError(f"{model_or_path}: {_FROM}")
            model = load(model_or_path, weights=weights)
        if model.metadata.get("format") == "gguf":
            return cls(model, gguf_settings(model.metadata, str(model.path)))
        if not os.path.isdir(str(model.path)):
            raise ValueError(f"{model.path}: {_FROM}")
        return cls(model, read_settings(str(model.path), model.net.arch.hidden_size, model.kind))

    @property
    def dimension(self) -> int:
        return self.model.net.arch.hidden_size * len(self.settings.pooling)

    def prompt(self, prompt_name: str | None = None, prompt: str | None = None) -> str:
        """The text put before each input: `prompt` as given, else the named prompt of the folder (query /
        document ...), else its default_prompt_name's, else none."""
        if prompt is not None:
            return prompt
        name = prompt_name if prompt_name is not None else self.settings.default_prompt_name
        if name is None:
            return ""
        if name not in self.settings.prompts:
            known = ", ".join(sorted(self.settings.prompts)) or "none"
            raise ValueError(f"{self.model.path}: no prompt named {name!r} (the model's prompts: {known})")
        return self.settings.prompts[name]

    def _special_ends(self) -> tuple[list, list]:
        """The token ids the tokenizer's post-processor puts before and after a text ([CLS] / [SEP] ...)."""
        if self._specials is None:
            tok = self.model.tokenizer
            plain = tok.hf_encode("a", add_special_tokens=False)
            full = tok.hf_encode("a", add_special_tokens=True)
            at = next((i for i in range(len(full) - len(plain) + 1) if full[i:i + len(plain)] == plain), None)
            if at is None:
                raise ValueError(f"{self.model.path}: the tokenizer's special tokens do not frame the text")
            self._specials = (full[:at], full[at + len(plain):])
        return self._specials

    def tokenize(self, text: str) -> list[int]:
        """A text's token ids as sentence-transformers feeds them (special tokens added, truncated to max_length
        with the special tokens kept)."""
        if not isinstance(text, str):
            raise ValueError(f"a text must be a string, got {type(text).__name__}")
        if self.settings.lower_case:
            text = text.lower()
        ids = self.model.tokenizer.hf_encode(text, add_special_tokens=True)
        if len(ids) <= self.max_length:
            return ids
        head, tail = self._special_ends()
        body = self.model.tokenizer.hf_encode(text, add_special_tokens=False)
        return head + body[:max(self.max_length - len(head) - len(tail), 0)] + tail

    def _prompt_length(self, prompt: str) -> int:
        """sentence-transformers' prompt length: the prompt's tokens less a trailing special one."""
        if not prompt:
            return 0
        ids = self.tokenize(prompt)
        return len(ids) - (1 if ids and ids[-1] in self._special_ends()[1] else 0)

    def embed(self, texts, prompt_name: str | None = None, prompt: str | None = None,
              normalize: bool | None = None) -> np.ndarray:
        """The embeddings of `texts` (a string or a list of strings): float32 [n, dimension]. The prompt is put
        before each text (see `prompt`); normalize None follows the folder (its Normalize module)."""
        if isinstance(texts, str):
            texts = [texts]
        p = self.prompt(prompt_name, prompt)
        seqs = [self.tokenize(p + t) for t in texts]
        skip = 0 if self.settings.include_prompt else self._prompt_length(p)
        return self.embed_ids(seqs, normalize=normalize, skip=skip)

    def embed_ids(self, seqs, normalize: bool | None = None, skip: int = 0) -> np.ndarray:
        """The embeddings of token id sequences (taken as given: no special tokens added): float32 [n, dim].
        `skip`: leading tokens (a prompt) left out of the pooling, as sentence-transformers' include_prompt false."""
        out = np.zeros((len(seqs), self.dimension), np.float32)
        for start, stop in batches([len(s) for s in seqs]):
            for i, states in enumerate(self.model.hidden_states(seqs[start:stop])):
                out[start + i] = pool(states, self.settings.pooling, skip)
        if self.settings.normalize if normalize is None else normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def count_tokens(self, texts, prompt_name: str | None = None, prompt: str | None = None) -> int:
        """How many tokens `embed` runs for these texts (the usage an API reports)."""
        p = self.prompt(prompt_name, prompt)
        return sum(len(self.tokenize(p + t)) for t in ([texts] if isinstance(texts, str) else texts))


def batches(lengths, most: int = BATCH, tokens: int = TOKENS) -> list[tuple[int, int]]:
    """The (start, stop) ranges of consecutive sequences run in one step: at most `most` of them and `tokens` tokens
    (a longer sequence alone)."""
    out, start, total = [], 0, 0
    for i, n in enumerate(lengths):
        if i > start and (i - start == most or total + n > tokens):
            out.append((start, i))
            start, total = i, 0
        total += n
    if start < len(lengths):
        out.append((start, len(lengths)))
    return out


def pool(states: np.ndarray, modes, skip: int = 0) -> np.ndarray:
    """One text's vector from its token states [T, D] by sentence-transformers' pooling modes (concatenated in
    order); the first `skip` tokens (a prompt) are left out, as its include_prompt false does."""
    T = states.shape[0]
    keep = states[min(skip, T - 1):].astype(np.float64)
    parts = []
    for mode in modes:
        if mode == "cls":
            parts.append(keep[0])
        elif mode == "max":
            parts.append(keep.max(axis=0))
        elif mode == "mean":
            parts.append(keep.mean(axis=0))
        elif mode == "mean_sqrt_len_tokens":
            parts.append(keep.sum(axis=0) / np.sqrt(len(keep)))
        elif mode == "weightedmean":
            w = np.arange(T - len(keep) + 1, T + 1, dtype=np.float64)[:, None]
            parts.append((keep * w).sum(axis=0) / w.sum())
        elif mode == "lasttoken":
            parts.append(keep[-1])
        else:
            raise ValueError(f"unknown pooling mode {mode!r}")
    return np.concatenate(parts).astype(np.float32)
