"""The public `Model` object: config, tokenizer, logits and the decode cache (petit.loading builds one from a file
or a folder)."""
import numpy as np

from petit.cache import HybridCache, KVCache, StateCache

PREFILL_CHUNK = 512      # a longer prompt runs in pieces of this many tokens (Model.forward)


class Model:
    """A loaded model.

    Attributes:
        config: the family's config dataclass (Hugging Face field names).
        tokenizer: the model's Tokenizer (None if the file has none and none was given).
        metadata: the file's metadata dict (chat template, generation defaults, quantization).
        path: where it was loaded from.
        warnings: what loading warned about (also issued as Python warnings), one message each, for an app to
            show: a file without checksums, checkpoint tensors ignored, matrices kept in f16.
    """

    def __init__(self, config, net, tokenizer, metadata: dict, path: str, source=None, tensors=None,
                 warnings=None):
        self.config, self.net, self.tokenizer, self.metadata, self.path = config, net, tokenizer, metadata, path
        self.warnings: list[str] = list(warnings or [])
        self._source = source          # the open PetitFile the weights map into (None: weights in memory)
        if source is not None and hasattr(net, "embed"):
            from petit.loading.file_rows import read_embedding_from_file
            read_embedding_from_file(net, source)       # its rows by pread: no page cache folio mapped per lookup
        # name -> (dtype, shape, bytes) as the model runs them (petit convert writes these)
        self.tensors = tensors or {}

    @property
    def kind(self) -> str:
        """"decoder" (a language model: logits, generation) or "encoder" (an embedding model's bidirectional
        encoder, BERT: hidden states only, `hidden_states`)."""
        from petit.models import ENCODERS
        return getattr(ENCODERS.get(getattr(self.config, "model_type", None)), "KIND", "decoder")

    def _decoder_only(self) -> None:
        if self.kind != "decoder":
            raise ValueError(f"{self.path}: a {self.config.model_type} model is an encoder (an embedding model): it "
                             f"has no next-token logits; embed texts with petit.embed or `petit embed`")

    def hidden_states(self, seqs) -> list[np.ndarray]:
        """The last hidden states (after the final norm) of each token sequence of `seqs`, each run from a fresh
        cache of its own length, all in one batched step: a list of [T, hidden_size] float32 arrays (issue 35: what
        an embedding model pools; petit.generation.embed)."""
        runs = []
        for i, token_ids in enumerate(seqs):
            where = f"sequence {i}: " if len(seqs) > 1 else ""
            try:
                ids = self._check_ids(token_ids)
            except ValueError as e:
                raise ValueError(f"{where}{e}") from None
            if not len(ids):
                raise ValueError(f"{where}a text needs at least one token")
            runs.append((ids, self.new_cache(len(ids))))
        if not runs:
            return []
        out = self.net.hidden_batch(runs)
        result, at = [], 0
        for ids, _ in runs:
            result.append(out[at:at + len(ids)])
            at += len(ids)
        return result

    @property
    def vocab_size(self) -> int:
        return self.net.arch.vocab_size

    @property
    def context_length(self) -> int:
        """The most positions the model handles (max_position_embeddings, stretched by a linear/dynamic RoPE)."""
        return self.net.arch.context_length

    @property
    def n_layers(self) -> int:
        return len(self.net.layers)

    @property
    def n_params(self) -> int:
        """Parameters the model runs on (a tied LM head counted once)."""
        from math import prod
        return sum(prod(shape) for _, shape, _ in self.tensors.values())

    @property
    def weight_type(self) -> str:
        return self.net.weight_type

    def new_cache(self, n_ctx: int | None = None, kv_type: str = "f32") -> KVCache:
        """A KV cache for up to n_ctx positions (default: the model's max_position_embeddings), float32 or int8."""
        a = self.net.arch
        n_ctx = a.context_length if n_ctx is None else n_ctx
        if n_ctx > a.context_length:
            raise ValueError(f"a context of {n_ctx} exceeds the model's context length {a.context_length}")
        if a.state_layers is not None:     # a hybrid: KV caches for its attention layers, states for the rest
            return HybridCache(a.cache_slots or len(self.net.layers), a.state_layers, *a.state_shapes,
                               a.num_key_value_heads, n_ctx, a.head_dim, a.empty_layers)
        if a.state_shapes is not None:     # a state-space model: a float32 recurrent state (kv_type is a KV cache's)
            return StateCache(len(self.net.layers), *a.state_shapes, n_ctx)
        if kv_type == "int8" and not getattr(self.net, "int8_cache", True):
            raise ValueError(f"{self.net.int8_refusal}: kv_type 'int8' is not supported (float32 caches only)")
        return KVCache(a.cache_slots or len(self.net.layers), a.num_key_value_heads, n_ctx, a.head_dim, kv_type,
                       a.values_are_keys)       # cache_slots: MiniMax-M3's indexer keys past the layers (fam36i)

    def logits(self, token_ids, chunk: int = 256) -> np.ndarray:
        """The float32 logits [len(token_ids), vocab_size] of every position, from a fresh cache (the decode
        cache of any generation in progress is not touched)."""
        self._decoder_only()
        ids = self._check_ids(token_ids)
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
        out = np.empty((len(ids), self.vocab_size), np.float32)
        cache = self.new_cache(max(len(ids), 1))
        for start in range(0, len(ids), chunk):
            part = ids[start:start + chunk]
            self.net.forward(part, cache, out[start:start + len(part)])
        return out

    def forward(self, token_ids, cache: KVCache, all_logits: bool = False) -> np.ndarray:
        """Append token_ids to `cache` and return the logits of the last position ([vocab]) or, with all_logits,
        of every new position ([T, vocab])."""
        self._decoder_only()
        ids = self._check_ids(token_ids)
        if not len(ids):
            raise ValueError("forward needs at least one token")
        out = np.empty((len(ids) if all_logits else 1, self.vocab_size), np.float32)
        if all_logits or len(ids) <= PREFILL_CHUNK or cache.pos + len(ids) > cache.n_ctx:
            self.net.forward(ids, cache, out)     # (a prompt that does not fit raises the whole prompt's error)
            return out if all_logits else out[0]
        # a long prompt in pieces: the step's scratch stays that of PREFILL_CHUNK tokens (resident memory close to
        # weights + KV cache), and each token gets the bits it gets in one piece; an error puts the cache back
        pos0 = cache.pos
        if isinstance(cache, StateCache):
            cache.snapshot()                  # a recurrent state goes back only to a snapshot
        try:
            for start in range(0, len(ids), PREFILL_CHUNK):
                part = ids[start:start + PREFILL_CHUNK]
                self.net.forward(part, cache, out if start + PREFILL_CHUNK >= len(ids) else None)
        except BaseException:
            cache.rewind(pos0)
            raise
        return out[0]

    def forward_batch(self, seqs, all_logits: bool = False) -> list[np.ndarray]:
        """Run several independent sequences in one step: `seqs` is a list of (token_ids, cache), each cache its
        own (a sequence's tokens are appended to its cache, at its own positions). Returns, per sequence, the
        logits of its last position ([vocab]) or, with all_logits, of every new position ([T, vocab]).

        One sequence may be a prompt (prefill) while others decode one token each. The weights are read once for
        all of them, so decoding n sequences together costs far less than n steps; each sequence's logits and cache
        are bit for bit what `forward` gives it alone. A bad sequence (token ids out of range, no tokens, a full
        context, a cache not made for this model or shared with another sequence) raises a ValueError that names
        it ("sequence 2: ..."), and no cache changes."""
        self._decoder_only()
        if isinstance(seqs, (str, bytes)) or not hasattr(seqs, "__len__") or not len(seqs):
            raise ValueError("forward_batch needs a list of (token_ids, cache) pairs, at least one")
        runs, rows = [], 0
        for i, item in enumerate(seqs):
            where = f"sequence {i}: " if len(seqs) > 1 else ""
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise ValueError(f"{where}expected a (token_ids, cache) pair, got {type(item).__name__}")
            token_ids, cache = item
            if not isinstance(cache, KVCache):
                raise ValueError(f"{where}expected a KVCache (model.new_cache()), got {type(cache).__name__}")
            try:
                ids = self._check_ids(token_ids)
            except ValueError as e:
                raise ValueError(f"{where}{e}") from None
            if not len(ids):
                raise ValueError(f"{where}forward needs at least one token")
            n = len(ids) if all_logits else 1
            runs.append((ids, cache, n))
            rows += n
        out = np.empty((rows, self.vocab_size), np.float32)
        self.net.forward_batch(runs, out)
        result, at = [], 0
        for _, _, n in runs:
            result.append(out[at:at + n] if all_logits else out[at])
            at += n
        return result

    def _check_ids(self, token_ids) -> np.ndarray:
        ids = np.asarray(token_ids)
        if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
            raise ValueError(f"token ids must be a 1-D sequence of integers, got {ids.dtype} of shape {ids.shape}")
        bad = ids[(ids < 0) | (ids >= self.vocab_size)]
        if bad.size:
            raise ValueError(f"token id(s) {bad[:5].tolist()} out of range for a vocabulary of {self.vocab_size}")
        if len(ids) > self.context_length:
            raise ValueError(f"{len(ids)} tokens exceed the model's context of {self.context_length}")
        return ids.astype(np.int32)

    def close(self) -> None:
        """Drop the weights and unmap the file (the model is unusable afterwards)."""
        self.net = None
        if self._source is not None:
            self._source.close()
            self._source = None


def check_tokenizer(path, tok, vocab_size: int) -> None:
    if tok is not None and tok.vocab_size > vocab_size:
        raise ValueError(f"{path}: the tokenizer has {tok.vocab_size} tokens but the model only {vocab_size}")
