"""Constrained decoding: a grammar (a JSON schema, or a Lark grammar that embeds schemas) decides which tokens may
come next, so the reply always matches it.

The grammar engine is llguidance (a dependency of Petit: one abi3 wheel per system, no other packages): it works on
the tokenizer's bytes, so any of Petit's tokenizers can drive it. bench/bench_grammar.py compares it with xgrammar
and outlines-core (docs/server.md has the figures). A tokenizer's engine-side copy costs a pass over the vocabulary,
so it is made once per tokenizer and end-token set (`GrammarTokenizer.get`).

JSON comes out in the usual layout, `{"a": 1, "b": [2, 3]}`: one space after a colon and after a comma, no other
whitespace, so a small model cannot wander off into blank space and a reply is reproducible.
"""
import threading

import numpy as np

JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


class GrammarError(ValueError):
    """A schema or grammar the engine cannot compile; the message is the engine's."""


class GrammarUnavailable(RuntimeError):
    """llguidance is not installed (it is one of Petit's dependencies, so only a hand-made install lacks it)."""


MISSING = "constrained decoding needs the llguidance package, which is not installed: pip install llguidance"


def available() -> bool:
    import importlib.util
    return importlib.util.find_spec("llguidance") is not None


def _llguidance():
    try:
        import llguidance
    except ImportError:
        raise GrammarUnavailable(MISSING) from None
    return llguidance


def json_schema_grammar(schema: dict) -> str:
    """The engine's grammar for values valid against `schema` (a dict)."""
    llg = _llguidance()
    try:
        return llg.LLMatcher.grammar_from_json_schema(schema, overrides=JSON_OPTIONS)
    except (ValueError, TypeError) as e:
        raise GrammarError(str(e)) from None


def lark_grammar(text: str) -> str:
    """The engine's grammar for a Lark grammar (llguidance's dialect: `%json {schema}` embeds a JSON schema)."""
    return _llguidance().LLMatcher.grammar_from_lark(text)


def json_rule(schema: dict) -> str:
    """A Lark `%json` item for `schema`, in the layout JSON_OPTIONS gives a whole schema."""
    import json
    return "%json " + json.dumps({**schema, "x-guidance": JSON_OPTIONS})


class GrammarTokenizer:
    """A tokenizer as the engine sees it: each id's bytes, the special ids, and the end tokens a finished grammar
    allows (a reply under a grammar ends with one of them)."""

    _cache: dict = {}
    _lock = threading.Lock()

    def __init__(self, tokenizer, end_ids):
        llg = _llguidance()
        n = tokenizer.vocab_size
        end_ids = sorted(set(int(i) for i in end_ids))
        if not end_ids:
            raise GrammarError("the model has no end token, so a constrained reply could never finish")

        class _Vocab:                        # what llguidance.TokenizerWrapper reads
            eos_token_id = end_ids[0]
            bos_token_id = tokenizer.bos_id
            tokens = [tokenizer.token_bytes(i) for i in range(n)]
            special_token_ids = sorted(set(tokenizer.special_ids) | set(end_ids))

            def __call__(self, data: bytes):
                return tokenizer.encode(data.decode("utf-8", "replace"), add_bos=False)
        self.n_vocab, self.end_ids = n, end_ids
        self.ll = llg.LLTokenizer(llg.TokenizerWrapper(_Vocab()), n_vocab=n, eos_token=end_ids)

    @classmethod
    def get(cls, tokenizer, end_ids) -> "GrammarTokenizer":
        key = (id(tokenizer), tuple(sorted(set(end_ids))))
        with cls._lock:
            entry = cls._cache.get(key)
            if entry is None or entry[0] is not tokenizer:
                entry = cls._cache[key] = (tokenizer, cls(tokenizer, end_ids))
            return entry[1]

    def check(self, grammar: str) -> None:
        """Raise GrammarError with the engine's message when `grammar` does not compile for this tokenizer."""
        error = _llguidance().LLMatcher.validate_grammar(grammar, self.ll)
        if error:
            raise GrammarError(error)

    def matcher(self, grammar: str) -> "Matcher":
        return Matcher(self, grammar)


class Matcher:
    """Where one reply is in its grammar: the tokens allowed next, and each token sampled fed back."""

    def __init__(self, tokenizer: GrammarTokenizer, grammar: str):
        llg = _llguidance()
        self.n_vocab = tokenizer.n_vocab
        self._m = llg.LLMatcher(tokenizer.ll, grammar, log_level=0)
        if self._m.is_error():
            raise GrammarError(self._m.get_error())

    def allowed(self) -> np.ndarray:
        """A bool mask over the vocabulary: the tokens that keep the reply inside the grammar."""
        bits = np.frombuffer(self._m.compute_bitmask(), dtype=np.uint8)
        return np.unpackbits(bits, bitorder="little")[:self.n_vocab].view(bool)

    def consume(self, token: int) -> None:
        if not self._m.consume_token(int(token)):
            raise GrammarError(f"token {token} does not fit the grammar: {self._m.get_error()}")

    @property
    def accepting(self) -> bool:
        """The text so far is a whole match (an end token may come next)."""
        return self._m.is_accepting()
