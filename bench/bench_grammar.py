"""Grammar engines for constrained decoding on Petit's tokenizers: llguidance, xgrammar and outlines-core.

For each engine, tokenizer and JSON schema: does the schema compile, how long that takes, how long one next-token
mask takes (the cost every constrained token pays), and whether random walks under the mask (random logits, the
best allowed token each step, until an end token or 256 tokens) end in text that parses and validates against the
schema. Engines that are not installed are skipped. It needs `jsonschema` (the test extra).

    python bench/bench_grammar.py                       # the bundled model's tokenizer and tests' qwen3 one
    python bench/bench_grammar.py --tokenizer path/to/model-folder --tokenizer tokenizer.json.gz --walks 3
"""
import argparse
import gzip
import json
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SCHEMAS = {
    "object": {"type": "object"},
    "flat": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                              "age": {"type": "integer", "minimum": 0, "maximum": 150}},
             "required": ["name", "age"], "additionalProperties": False},
    "enum": {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]}}, "required": ["colour"]},
    "nested": {"type": "object", "properties": {"user": {"type": "object", "properties": {
        "id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string", "maxLength": 6},
                                            "maxItems": 3}}, "required": ["id", "tags"]}}, "required": ["user"]},
    "array": {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 4},
    "anyOf": {"anyOf": [{"type": "object", "properties": {"ok": {"const": True}}, "required": ["ok"]},
                        {"type": "object", "properties": {"error": {"type": "string", "maxLength": 10}},
                         "required": ["error"]}]},
    "pattern": {"type": "object", "properties": {"date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}},
                "required": ["date"]},
    "optional": {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"},
                                                  "c": {"type": "integer"}}, "required": ["a"]},
    "ref": {"$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                                "required": ["x", "y"], "additionalProperties": False}},
            "type": "object", "properties": {"from": {"$ref": "#/$defs/point"}, "to": {"$ref": "#/$defs/point"}},
            "required": ["from", "to"], "additionalProperties": False},
    "tool_call": {"type": "object", "properties": {"name": {"const": "get_weather"}, "arguments": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                         "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}},
        "required": ["name", "arguments"], "additionalProperties": False},
}


class Llguidance:
    name = "llguidance"

    def __init__(self, tok, end_id):
        from petit.generation.grammar import GrammarTokenizer
        self.gt = GrammarTokenizer(tok, [end_id])

    def compile(self, schema):
        from petit.generation.grammar import json_schema_grammar
        grammar = json_schema_grammar(schema)
        self.gt.check(grammar)
        return lambda: _LlgWalk(self.gt.matcher(grammar))


class _LlgWalk:
    def __init__(self, m):
        self.m = m

    def allowed(self):
        return self.m.allowed()

    def consume(self, t):
        self.m.consume(t)


class Xgrammar:
    name = "xgrammar"

    def __init__(self, tok, end_id):
        import xgrammar as xgr
        self.xgr, self.n = xgr, tok.vocab_size
        vocab = [tok.token_bytes(i) for i in range(self.n)]
        info = xgr.TokenizerInfo(vocab, xgr.VocabType.RAW,
                                 vocab_size=self.n, stop_token_ids=[end_id])
        self.compiler = xgr.GrammarCompiler(info)

    def compile(self, schema):
        compiled = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(", ", ": "))
        return lambda: _XgrWalk(self.xgr, compiled, self.n)


class _XgrWalk:
    def __init__(self, xgr, compiled, n):
        self.m, self.n = xgr.GrammarMatcher(compiled), n
        self.bitmask = xgr.allocate_token_bitmask(1, n)

    def allowed(self):
        self.m.fill_next_token_bitmask(self.bitmask)
        bits = self.bitmask.numpy().view(np.uint8)[0]
        return np.unpackbits(bits, bitorder="little")[:self.n].view(bool)

    def consume(self, t):
        assert self.m.accept_token(int(t))


class OutlinesCore:
    name = "outlines-core"

    def __init__(self, tok, end_id):
        from outlines_core import Vocabulary
        self.n, self.end = tok.vocab_size, end_id
        by_bytes = {}
        for i in range(self.n):
            if i != end_id and i not in tok.special_ids:
                by_bytes.setdefault(tok.token_bytes(i), []).append(i)
        self.vocab = Vocabulary(end_id, by_bytes)

    def compile(self, schema):
        from outlines_core import Index
        from outlines_core.json_schema import build_regex_from_schema
        index = Index(build_regex_from_schema(json.dumps(schema), r"[ ]?"), self.vocab)
        return lambda: _OcWalk(index, self.n)


class _OcWalk:
    def __init__(self, index, n):
        from outlines_core import Guide
        self.g, self.n = Guide(index), n
        self.mask = np.zeros((n + 31) // 32, dtype=np.int32)

    def allowed(self):
        self.g.write_mask_into(self.mask.ctypes.data, self.mask.size, 4)
        return np.unpackbits(self.mask.view(np.uint8), bitorder="little")[:self.n].view(bool)

    def consume(self, t):
        self.g.advance(int(t), return_tokens=False)


def walk(factory, tok, end_id, seed, max_tokens=256):
    """One random walk under the mask: (text or None if it never ended, mask times in s)."""
    rng, m, out, times = np.random.default_rng(seed), factory(), [], []
    for _ in range(max_tokens):
        t0 = time.perf_counter()
        allowed = m.allowed()
        times.append(time.perf_counter() - t0)
        logits = np.where(allowed, rng.standard_normal(allowed.size), -np.inf)
        if not np.isfinite(logits).any():
            return None, times
        token = int(np.argmax(logits))
        if token == end_id:
            return tok.decode(out), times
        m.consume(token)
        out.append(token)
    return None, times


def tokenizers(paths):
    import petit
    from petit.assets import default_model_path
    from petit.hf.tokenizer import HFTokenizer
    model = petit.load(default_model_path())
    yield "bundled (512)", model.tokenizer, model.tokenizer.eos_id
    for path in paths:
        if os.path.isdir(path):
            tok = HFTokenizer.from_folder(path)
        else:
            with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8") as f:
                tok = HFTokenizer(f.read())
        end = tok.token_to_id("<|im_end|>") or tok.eos_id or tok.token_to_id("<|endoftext|>")
        yield f"{os.path.basename(path.rstrip('/'))} ({tok.vocab_size})", tok, end


def main():
    import jsonschema
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", action="append", help="a Hugging Face model folder or tokenizer.json[.gz] "
                                                         "(repeatable); default: tests' qwen3 folder")
    ap.add_argument("--walks", type=int, default=5)
    args = ap.parse_args()
    paths = args.tokenizer or [os.path.join(ROOT, "tests/fixtures/hf/qwen3")]
    engines = []
    for cls in (Llguidance, Xgrammar, OutlinesCore):
        try:
            __import__({"llguidance": "llguidance", "xgrammar": "xgrammar", "outlines-core": "outlines_core"}[cls.name])
            engines.append(cls)
        except ImportError:
            print(f"{cls.name}: not installed, skipped")
    # the mask time includes turning the engine's bitmask into a bool array (the same numpy call for all three)
    print("| engine | tokenizer | schemas compiled | walks valid / ended / run | compile ms (median) "
          "| mask us (median) | mask us (p95) |")
    print("|---|---|---|---|---|---|---|")
    for label, tok, end_id in tokenizers(paths):
        for cls in engines:
            t0 = time.perf_counter()
            engine = cls(tok, end_id)
            setup = time.perf_counter() - t0
            compiled, compile_s, mask_s, valid, ended, run, failures = 0, [], [], 0, 0, 0, []
            for name, schema in SCHEMAS.items():
                try:
                    t0 = time.perf_counter()
                    factory = engine.compile(schema)
                    compile_s.append(time.perf_counter() - t0)
                except Exception as e:      # noqa: BLE001 - an engine's refusal is a result here
                    failures.append(f"{name}: {type(e).__name__}: {str(e)[:80]}")
                    continue
                compiled += 1
                for seed in range(args.walks):
                    run += 1
                    try:
                        text, times = walk(factory, tok, end_id, seed)
                    except Exception as e:  # noqa: BLE001
                        failures.append(f"{name} walk {seed}: {type(e).__name__}: {str(e)[:80]}")
                        continue
                    mask_s += times
                    if text is None:
                        continue
                    ended += 1
                    try:
                        jsonschema.validate(json.loads(text), schema)
                        valid += 1
                    except (ValueError, jsonschema.ValidationError) as e:
                        failures.append(f"{name} walk {seed}: invalid {text[:60]!r}: {str(e)[:60]}")
            med = statistics.median(mask_s) * 1e6 if mask_s else float("nan")
            p95 = sorted(mask_s)[int(0.95 * (len(mask_s) - 1))] * 1e6 if mask_s else float("nan")
            cms = statistics.median(compile_s) * 1e3 if compile_s else float("nan")
            print(f"| {cls.name} | {label} | {compiled}/{len(SCHEMAS)} | {valid} / {ended} / {run} | {cms:.1f} "
                  f"| {med:.0f} | {p95:.0f} |  (tokenizer setup {setup * 1e3:.0f} ms)")
            for f in failures:
                print(f"    {cls.name} {label}: {' '.join(f.split())}")


if __name__ == "__main__":
    main()
