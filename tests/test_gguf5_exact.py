"""transformers 5's families as llama.cpp converts them (tests/fixtures/gguf5_*: each group's q8_0 file beside
llama.cpp's exact float logits, greedy tokens and tokenizer ids, made by the group's make_gguf5_*.py): decoded to
float32, Petit's logits are llama.cpp's within 1e-5 of the range at every position with the same argmax, and its
greedy tokens and tokenization are llama.cpp's. One table over every group (issue 36 part 4); each group's file keeps
its cases, its loader (which warnings a file may give) and what its files hold beyond this."""
import numpy as np
import pytest

import test_dense5
from models import range_err
import test_fam36c5
import test_fam36o5
import test_fam36q5
import test_fam36r5
import test_gg36s5
import test_gg36t5
import test_hybrid5
import test_mla5
import test_moe_a5
import test_moe_b5
import test_qwenvl5
import test_newdec5
import test_recur5
import test_vlnew5
import test_wrap5

GROUPS = (test_dense5, test_fam36c5, test_fam36o5, test_fam36q5, test_fam36r5, test_gg36s5, test_gg36t5, test_hybrid5,
          test_mla5, test_moe_a5, test_moe_b5, test_recur5, test_wrap5, test_qwenvl5,
          test_newdec5, test_vlnew5)
DECODED = [pytest.param(g, c, id=f"{g.GGUF.name}/{c}") for g in GROUPS for c in g.GGUF_READ]
# the groups whose manifest lists llama.cpp's greedy tokens and tokenizations (gguf5_mla's has no manifest)
GREEDY = [p for p in DECODED if p.values[0] is not test_mla5]


@pytest.mark.parametrize("group, case", DECODED)
def test_gguf_decoded_to_float_gives_llama_cpps_exact_logits(group, case):
    ref = np.load(group.GGUF / case / "q8_0.npz")
    got = group._gguf(case, weights="f32").logits(ref["input_ids"])
    # llama.cpp's GELU reads a table of f16 values (test_wrap5.GELU_TABLE): within 1e-3 of the range there; a group's
    # EXACT_BOUND names its other cases' bounds (test_fam36r5: llama.cpp's M-RoPE runs; test_gg36t5: its flash attention)
    bound = getattr(group, "EXACT_BOUND", {}).get(case, 1e-3 if case in getattr(group, "GELU_TABLE", ()) else 1e-5)
    assert range_err(got, ref["exact_logits"]) <= bound
    assert np.array_equal(got.argmax(1), ref["exact_logits"].argmax(1))


@pytest.mark.parametrize("group, case", GREEDY)
def test_gguf_greedy_tokens_and_tokenizer_are_llama_cpps(group, case):
    ref = np.load(group.GGUF / case / "q8_0.npz")
    model = group._gguf(case, weights="f32")
    cache = model.new_cache()
    logits = model.forward(ref["input_ids"], cache)
    out = []
    for _ in range(len(ref["exact_greedy"])):
        out.append(int(np.argmax(logits)))
        logits = model.forward([out[-1]], cache)
    assert out == ref["exact_greedy"].tolist()
    for t in group.GGUF_MANIFEST[case]["tokenize"]:
        assert model.tokenizer.encode(t["text"]) == t["llama_cpp"], t["text"]
