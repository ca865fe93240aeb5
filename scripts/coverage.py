"""The coverage tables at the end of docs/hf-models.md and docs/gguf.md: every type of transformers' causal-LM registry
and every architecture llama.cpp knows (tests/fixtures/registry/registry.json, a snapshot of both), with whether
Petit runs it and, when not, why. Made from the engine's own registries, so they cannot drift from what runs:
tests/test_coverage.py fails when the docs differ from what this prints.

    python scripts/coverage.py            # print both tables
    python scripts/coverage.py --write    # rewrite them in the docs (between the coverage markers)
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from petit.loading.gguf_archs import ARCHS  # noqa: E402
from petit.models import CLOSEST, ENCODERS, MODEL_TYPES, MULTIMODAL_ROWS  # noqa: E402
from petit.models.refusals import GGUF_NOT_DECODERS, MULTIMODAL_NOT_TEXT, NOT_DECODERS, NOT_YET  # noqa: E402

REGISTRY = os.path.join(ROOT, "tests", "fixtures", "registry", "registry.json")
DOCS = {"hf": os.path.join(ROOT, "docs", "hf-models.md"), "gguf": os.path.join(ROOT, "docs", "gguf.md")}
BEGIN, END = "<!-- coverage:begin -->", "<!-- coverage:end -->"
MM_BEGIN, MM_END = "<!-- coverage-multimodal:begin -->", "<!-- coverage-multimodal:end -->"


def registry() -> dict:
    with open(REGISTRY, encoding="utf-8") as f:
        return json.load(f)


def hf_rows(reg: dict) -> list[tuple[str, str, str]]:
    """(model_type, "runs" / "refused" / "not a decoder", the family or the reason) of every registry entry."""
    rows = []
    for t, info in sorted(reg["transformers"]["types"].items()):
        saved_as = info["config_model_type"]
        if t in MODEL_TYPES:
            rows.append((t, "runs", f"`{t}`"))
        elif saved_as in MODEL_TYPES:
            rows.append((t, "runs", f"`{saved_as}` (its config.json says `{saved_as}`)"))
        elif t in ENCODERS:       # issue 35
            rows.append((t, "not a decoder", f"a bidirectional encoder: Petit runs `{t}` for embeddings (`petit "
                                             f"embed`, docs/embeddings.md), not chat"))
        elif t in NOT_DECODERS:
            rows.append((t, "not a decoder", NOT_DECODERS[t]))
        elif t in CLOSEST:
            family, what = CLOSEST[t]
            rows.append((t, "refused", f"not yet: {what} (the nearest family Petit runs: `{family}`)"))
        else:
            rows.append((t, "refused", f"not yet: {NOT_YET.get(t, 'no family written for it yet')}"))
    return rows


def gguf_rows(reg: dict) -> list[tuple[str, str, str]]:
    rows = []
    for name in sorted(reg["llama_cpp"]["archs"]):
        if name in ARCHS:        # an embedding encoder's file (issue 35) is read too, but is no decoder
            encoder = ARCHS[name].model_type in ENCODERS
            rows.append((name, "read (encoder)" if encoder else "read", f"`{ARCHS[name].model_type}`"))
        elif name in GGUF_NOT_DECODERS:
            rows.append((name, "not a decoder", GGUF_NOT_DECODERS[name]))
        else:
            rows.append((name, "refused", f"not yet: {NOT_YET.get('gguf:' + name, 'not read yet')}"))
    return rows


def mm_rows(reg: dict) -> list[tuple[str, str, str]]:
    """The same for transformers' multimodal checkpoints that generate text (issue 36): Petit runs the language model
    of those whose text part is a decoder it runs, the tower not run."""
    rows = []
    for t, info in sorted(reg["transformers"]["multimodal"].items()):
        text = info["text_model_type"]
        if t in MULTIMODAL_ROWS:
            rows.append((t, "runs", f"its `{MULTIMODAL_ROWS[t].text}` language model, the tower not run (a row of "
                                    f"petit/models/multimodal_rows.py)"))
        elif t in MODEL_TYPES:
            rows.append((t, "runs", f"`{t}` (its language model, the tower not run)"))
        elif info["encoder_decoder"]:
            rows.append((t, "not a decoder", "an encoder-decoder: its text comes from a decoder reading an encoder's "
                                             "states"))
        elif t in MULTIMODAL_NOT_TEXT:
            rows.append((t, "not a decoder", MULTIMODAL_NOT_TEXT[t]))
        elif t in CLOSEST:
            family, what = CLOSEST[t]
            rows.append((t, "refused", f"not yet: {what} (the nearest family Petit runs: `{family}`)"))
        else:
            why = NOT_YET.get(t) or (
                f"its language model (`{text}`) is a family Petit runs, this checkpoint's layout is not read yet (no "
                f"row in petit/models/multimodal_rows.py)" if text in MODEL_TYPES else
                f"its language model (`{text}`) is not a family Petit runs yet" if text else
                "no family written for it yet")
            rows.append((t, "refused", f"not yet: {why}"))
    return rows


def mm_table(reg: dict | None = None) -> str:
    reg = reg or registry()
    rows = mm_rows(reg)
    text, runs = _counts(rows, "runs")
    head = (f"transformers {reg['transformers']['version']}'s image-text-to-text, multimodal-LM and speech "
            f"sequence-to-sequence registries hold {len(rows)} more types than its causal-LM registry; {text} "
            f"of them are multimodal checkpoints around a decoder-only language model, and Petit runs the language "
            f"model of **{runs}** of those (a text prompt; the vision or audio tower is not run, which the one "
            f"warning such a folder gives says). The others are encoder-decoders or no decoder-only language model "
            f"of text (said why).")
    return head + "\n\n" + _table(rows, "model_type")


def _counts(rows, done: str, apart=("not a decoder",)) -> tuple[int, int]:
    """How many rows are decoders (their status not in `apart`), and how many of them have the status `done`."""
    return sum(r[1] not in apart for r in rows), sum(r[1] == done for r in rows)


def _table(rows, first: str) -> str:
    lines = [f"| {first} | status | family / why not |", "|---|---|---|"]
    lines += [f"| `{a}` | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def hf_table(reg: dict | None = None) -> str:
    reg = reg or registry()
    rows = hf_rows(reg)
    decoders, runs = _counts(rows, "runs")
    head = (f"transformers {reg['transformers']['version']}'s causal-LM registry (`MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`) "
            f"holds {len(rows)} types; {decoders} of them are decoder-only language models (or a multimodal "
            f"checkpoint around one), and Petit runs **{runs}** of those. The others are not decoders (said why).")
    return head + "\n\n" + _table(rows, "model_type")


def gguf_table(reg: dict | None = None) -> str:
    reg = reg or registry()
    rows = gguf_rows(reg)
    decoders, read = _counts(rows, "read", ("not a decoder", "read (encoder)"))
    encoders = [f"`{r[0]}`" for r in rows if r[1] == "read (encoder)"]
    head = (f"llama.cpp ({reg['llama_cpp']['version']}) knows {len(rows)} architectures; {decoders} of them are "
            f"decoder-only language models, and Petit reads **{read}** of those (the family each runs as). Of the "
            f"others, Petit reads the embedding encoders {', '.join(encoders)} ([embeddings.md](embeddings.md)).")
    return head + "\n\n" + _table(rows, "architecture")


def replaced(text: str, table: str, where: str, begin: str = BEGIN, end: str = END) -> str:
    if begin not in text or end not in text:
        raise ValueError(f"{where}: the markers {begin} / {end} are missing")
    head, rest = text.split(begin, 1)
    return head + begin + "\n" + table + "\n" + end + rest.split(end, 1)[1]


def tables(reg: dict) -> list[tuple[str, str, str, str]]:
    """(doc path, table, begin marker, end marker) of every coverage table."""
    return [(DOCS["hf"], hf_table(reg), BEGIN, END), (DOCS["hf"], mm_table(reg), MM_BEGIN, MM_END),
            (DOCS["gguf"], gguf_table(reg), BEGIN, END)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the tables in docs/")
    args = ap.parse_args(argv)
    reg = registry()
    if not args.write:
        print("\n\n".join(t for _, t, _, _ in tables(reg)))
        return 0
    for path, table, begin, end in tables(reg):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = replaced(text, table, path, begin, end)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(new)
        os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
