"""Issue 33, first slice: LoRA fine-tuning on a frozen base (`petit finetune`), the transposed product kernel, the
gradient check, the chat loss mask, the GGUF adapter file and the adapter applied at run time (`--lora`)."""
import os

import numpy as np
import pytest

import petit
from petit.cli.commands import main
from petit.loading.lora import attach, merge, read_adapter, write_adapter
from petit.native import Weight, matmul, matmul_t
from trainer.lora.base import TARGETS, FrozenBase
from trainer.lora.data import chat_examples, encode_chat, read_examples, split
from trainer.lora.gradcheck import F32_BOUND, KERNEL_BOUND, REL_ERR_BOUND, check
from trainer.lora.model import init_adapters, lora_name
from trainer.lora.train import FinetuneConfig, finetune

HERE = os.path.dirname(os.path.abspath(__file__))
HF = os.path.join(HERE, "fixtures", "hf")
FACTS = os.path.join(HERE, "fixtures", "lora5", "facts.jsonl")


# ---- the transposed product (kernels/lora.c) ----

@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "q8_0", "q4_0"])
@pytest.mark.parametrize("interleave", [False, True])
def test_matmul_t_matches_reference_and_dequantized(dtype, interleave):
    if interleave and dtype not in ("q8_0", "q4_0"):
        pytest.skip("only q8_0 / q4_0 interleave")
    rng = np.random.default_rng(3)
    # odd rows and T: panels, row tiles and column tiles (4 x 32) with leftovers
    rows, cols, T = 37, 96 if dtype in ("q8_0", "q4_0") else 45, 13
    W = Weight.from_float(rng.normal(0, 1, (rows, cols)).astype(np.float32), dtype)
    if interleave:
        W = Weight.from_float(W.dequantize(), dtype)
        W = W.interleave(np.empty_like(W.raw))
    dy = rng.normal(0, 1, (T, rows)).astype(np.float32)
    dy[2, 5] = 0.0
    fast, ref = matmul_t(W, dy), matmul_t(W, dy, reference=True)
    exact = dy.astype(np.float64) @ W.dequantize().astype(np.float64)
    # the same additions in the same order (a SIMD clone may fuse a multiply-add: float rounding apart)
    assert np.max(np.abs(fast - ref)) <= 1e-6 * np.max(np.abs(exact))
    assert np.max(np.abs(fast - exact)) < 1e-5 * np.max(np.abs(exact))
    acc = np.ones((T, cols), np.float32)
    matmul_t(W, dy, out=acc, accumulate=True)
    assert np.allclose(acc, fast + 1, atol=1e-5)


@pytest.mark.parametrize("T", [1, 4, 9])
def test_matmul_t_tiles_and_threads(T):
    rng = np.random.default_rng(T)
    W = Weight.from_float(rng.normal(0, 1, (70, 160)).astype(np.float32), "q4_0")
    dy = rng.normal(0, 1, (T, 70)).astype(np.float32)
    exact = dy.astype(np.float64) @ W.dequantize().astype(np.float64)
    assert np.max(np.abs(matmul_t(W, dy) - exact)) < 1e-5 * np.max(np.abs(exact))


def test_matmul_t_is_the_transpose_of_matmul():
    rng = np.random.default_rng(4)
    W = Weight.from_float(rng.normal(0, 1, (64, 128)).astype(np.float32), "f32")
    x, dy = rng.normal(0, 1, (5, 128)).astype(np.float32), rng.normal(0, 1, (5, 64)).astype(np.float32)
    # <dy, W x> = <W^T dy, x>, up to float32 rounding
    lhs, rhs = float(np.sum(dy * matmul(W, x))), float(np.sum(matmul_t(W, dy) * x))
    assert abs(lhs - rhs) < 1e-5 * float(np.sum(np.abs(dy * matmul(W, x))))
    with pytest.raises(ValueError, match="does not match"):
        matmul_t(W, np.zeros((2, 63), np.float32))


# ---- the gradient check ----

@pytest.mark.parametrize("family, weights", [("llama", "f32"), ("qwen2", "f32"), ("qwen3", "q8_0"),
                                             ("mistral", "q4_0"), ("llama", "bf16"), ("qwen2.gguf", None)])
def test_every_lora_gradient_matches_finite_differences(family, weights):
    path = os.path.join(HERE, "fixtures", "gguf", "qwen2", "q8_0.gguf") if family.endswith(".gguf") else \
        os.path.join(HF, family)
    model = petit.load(path, weights=weights)
    fd, f32, kernel = check(model, max_elements=12)
    assert set(fd) == {lora_name(i, t, w) for i in range(model.n_layers) for t in TARGETS for w in "AB"}
    assert max(fd.values()) < REL_ERR_BOUND, fd
    assert max(f32.values()) < F32_BOUND, f32
    assert kernel < KERNEL_BOUND


def test_unsupported_families_and_untested_base_types_are_refused():
    model = petit.load(os.path.join(HF, "gemma2"), weights="f32")
    with pytest.raises(ValueError, match="not 'gemma2'"):
        FrozenBase(model)
    # asked for q4_k, these 64-wide rows are stored q5_0 (not whole 256-value blocks), a type not trained on yet
    model = petit.load(os.path.join(HF, "qwen2"), weights="q4_k")
    with pytest.raises(ValueError) as e:
        FrozenBase(model)
    assert str(e.value) == ("fine-tuning runs on f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k bases for now, this one "
                            "holds q5_0 matrices: load it with --weights q8_0 (or q4_0, f32)")


# ---- data ----

def test_chat_loss_mask_covers_exactly_the_assistant_turns():
    model = petit.load(os.path.join(HF, "qwen3"), weights="f32")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello there"}, {"role": "user", "content": "Bye"},
                {"role": "assistant", "content": "Farewell"}]
    ids, weights = encode_chat(model, messages)
    tok = model.tokenizer
    text = tok.decode(ids)
    assert text == ("<s><|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
                    "Hello there<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\nFarewell"
                    "<|im_end|>\n")
    trained = [i for i, w in zip(ids, weights) if w]
    assert tok.decode(trained) == "Hello there<|im_end|>\nFarewell<|im_end|>\n"
    # the prompt of each turn is tokenized as the model sees it when it answers
    first = ids[:weights.index(1.0)]
    assert first == tok.encode(text[:text.index("Hello")])


def test_a_template_that_rewrites_old_turns_gives_one_example_per_turn():
    model = petit.load(os.path.join(HF, "qwen3"), weights="f32")
    model.metadata["chat_template"] = (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' and not loop.last %}(earlier)"
        "{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Farewell"}]
    seqs = chat_examples(model, messages)
    tok = model.tokenizer
    assert [tok.decode([i for i, w in zip(ids, ws) if w]) for ids, ws in seqs] == ["Hello<|im_end|>\n",
                                                                                   "Farewell<|im_end|>\n"]
    assert "(earlier)" in tok.decode(seqs[1][0])


def test_data_file_reads_chats_texts_and_lines(tmp_path):
    model = petit.load(os.path.join(HF, "qwen3"), weights="f32")
    examples = read_examples(FACTS, model, ctx=64)
    assert len(examples) == 11
    assert examples[0].weights[0] == 0 and examples[-1].weights.all()        # a chat masks its prompt, a line not
    train, held = split(examples, 0.1, 0)
    assert len(held) == 1 and len(train) == 10
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"role": "user"}]}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1: message 0"):
        read_examples(str(bad), model, 64)
    bad.write_text('{"messages": [{"role": "user", "content": "x"}]}\n')
    with pytest.raises(ValueError, match="without an assistant"):
        read_examples(str(bad), model, 64)
    bad.write_text('{"prompt": "x"}\n')
    with pytest.raises(ValueError, match="needs \"messages\""):
        read_examples(str(bad), model, 64)


# ---- training, the adapter file, the run-time adapter ----

def _trained(tmp_path, family="llama", weights="f32", epochs=3):
    model = petit.load(os.path.join(HF, family), weights=weights)
    out = tmp_path / f"{family}.lora"
    cfg = FinetuneConfig(rank=4, alpha=8.0, epochs=epochs, lr=3e-3, ctx=64, warmup=2)
    stats = finetune(model, FACTS, str(out), cfg, out=open(os.devnull, "w"))
    return model, out, stats


def test_finetune_lowers_the_loss_and_writes_a_gguf_lora(tmp_path):
    model, out, stats = _trained(tmp_path, epochs=4)
    h = stats["history"]
    assert h[-1]["train_loss"] < h[0]["train_loss"] and h[-1]["val_loss"] is not None
    from petit.formats.gguf import GGUFFile
    with GGUFFile(out) as f:
        assert f.get("general.type") == "adapter" and f.get("adapter.type") == "lora"
        assert f.get("general.architecture") == "llama" and f.get("adapter.lora.alpha") == 8.0
        assert f.tensors["blk.0.attn_q.weight.lora_a"].shape == (4, 64)
        assert f.tensors["blk.1.ffn_down.weight.lora_b"].shape == (64, 4)
        assert len(f.tensors) == 2 * 7 * model.n_layers
    a = read_adapter(out, model)              # q / k rows permuted in the file (llama.cpp's llama), back on reading
    for (i, t), (A, B) in a.pairs.items():
        assert np.array_equal(A, stats["params"][lora_name(i, t, "A")])
        assert np.array_equal(B, stats["params"][lora_name(i, t, "B")])
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]


@pytest.mark.parametrize("weights, bound", [("f32", 1e-4), ("q8_0", 0.08), ("q4_0", 0.60)])
def test_runtime_adapter_equals_the_merged_model(tmp_path, weights, bound):
    _, out, _ = _trained(tmp_path, "qwen2", "f32", epochs=2)
    ids = np.array(petit.load(os.path.join(HF, "qwen2"), weights="f32").tokenizer.encode(
        "What colour is the moon of Zarb? The moon of Zarb is teal, said Marda Voss of Quellin."))
    merged = petit.load(os.path.join(HF, "qwen2"), weights="f32")
    base_logits = merged.logits(ids)
    merge(merged, str(out), 1.5)
    want = merged.logits(ids)
    run = petit.load(os.path.join(HF, "qwen2"), weights=weights)
    attach(run, str(out), 1.5)
    got = run.logits(ids)
    rng = float(want.max() - want.min())
    assert np.max(np.abs(got - want)) <= bound * rng
    assert np.max(np.abs(want - base_logits)) > 1e-3 * rng          # the adapter does change the logits
    last = np.empty(run.vocab_size, np.float32)                      # the plan and the op-by-op oracle agree
    cache = run.new_cache(len(ids))
    run.net.forward(ids, cache, last[None], oracle=True)
    assert np.allclose(last, got[-1], atol=1e-4 * rng)
    attach(run, str(out), 0.0)
    assert np.max(np.abs(run.logits(ids) - petit.load(os.path.join(HF, "qwen2"), weights=weights).logits(ids))) \
        <= 1e-5 * rng


def test_bad_adapter_files_are_refused(tmp_path):
    model = petit.load(os.path.join(HF, "llama"), weights="f32")
    base = FrozenBase(model)
    params = init_adapters(base, ("q", "v"), 2, 0)
    path = tmp_path / "a.lora"
    write_adapter(path, model, params, 4.0)
    other = petit.load(os.path.join(HF, "qwen2"), weights="f32")
    with pytest.raises(ValueError, match="'llama' model, this model is 'qwen2'"):
        read_adapter(path, other)
    from petit.formats.gguf import write_gguf
    A = np.zeros((2, 64), np.float32)
    write_gguf(tmp_path / "half.lora", {"general.architecture": "llama", "general.type": "adapter",
                                        "adapter.type": "lora", "adapter.lora.alpha": 4.0},
               {"blk.0.attn_q.weight.lora_a": ("F32", A.shape, A)})
    with pytest.raises(ValueError, match="has only its lora_a"):
        read_adapter(tmp_path / "half.lora", model)
    write_gguf(tmp_path / "shape.lora", {"general.architecture": "llama", "general.type": "adapter",
                                         "adapter.type": "lora", "adapter.lora.alpha": 4.0},
               {"blk.0.attn_q.weight.lora_a": ("F32", (2, 32), np.zeros((2, 32), np.float32)),
                "blk.0.attn_q.weight.lora_b": ("F32", (64, 2), np.zeros((64, 2), np.float32))})
    with pytest.raises(ValueError, match="do not fit"):
        read_adapter(tmp_path / "shape.lora", model)
    with pytest.raises(ValueError, match="not a LoRA adapter"):
        read_adapter(os.path.join(HERE, "fixtures", "gguf", "llama", "q8_0.gguf"), model)
    (tmp_path / "junk.lora").write_bytes(b"not a gguf file at all, really")
    with pytest.raises(ValueError, match="magic"):
        read_adapter(tmp_path / "junk.lora", model)


def test_gguf_base_keeps_llama_cpp_rows(tmp_path):
    """A GGUF llama's q / k rows are llama.cpp's (pairs): the adapter is written as it trains on them, and the same
    file applied to the folder of that model gives the same logits."""
    gg = petit.load(os.path.join(HERE, "fixtures", "gguf", "llama", "f16.gguf"), weights="f32")
    folder = petit.load(os.path.join(HF, "llama"), weights="f32")
    rng = np.random.default_rng(0)
    params = {n: rng.normal(0, 0.05, p.shape).astype(np.float32)
              for n, p in init_adapters(FrozenBase(gg), TARGETS, 2, 0).items()}
    write_adapter(tmp_path / "g.lora", gg, params, 2.0)
    ids = np.arange(1, 40) % gg.vocab_size
    attach(gg, str(tmp_path / "g.lora"))
    attach(folder, str(tmp_path / "g.lora"))
    a, b = gg.logits(ids), folder.logits(ids)
    assert np.max(np.abs(a - b)) <= 2e-3 * float(b.max() - b.min())      # the base's f16 rounding only


# ---- the command line ----

def test_cli_finetune_check_run(tmp_path, capsys):
    out = tmp_path / "f.lora"
    rc = main(["finetune", os.path.join(HF, "qwen3"), "--data", FACTS, "-o", str(out), "--rank", "2",
               "--epochs", "1", "--ctx", "48", "--targets", "q,v", "--batch", "3"])
    assert rc == 0 and out.exists()
    printed = capsys.readouterr().out
    assert "epoch 1/1: train loss" in printed and "held-out" in printed and "tokens/s" in printed
    assert "held-out examples, 3 a step" in printed
    assert main(["finetune", os.path.join(HF, "llama"), "--check"]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["run", os.path.join(HF, "qwen3"), "-p", "Hello", "-n", "3", "--lora", str(out),
                 "--lora-scale", "0.5", "--temperature", "0"]) == 0
    assert main(["finetune", os.path.join(HF, "qwen3"), "--data", FACTS, "-o", str(out), "--targets", "q,x"]) == 2
    assert "--targets takes some of" in capsys.readouterr().err
    assert main(["finetune", os.path.join(HF, "gemma2"), "--data", FACTS, "-o", str(out)]) == 1
    assert "not 'gemma2'" in capsys.readouterr().err
    assert main(["run", os.path.join(HF, "qwen3"), "-p", "x", "--lora-scale", "2"]) == 2
    assert main(["run", os.path.join(HF, "qwen3"), "-p", "x", "--lora", FACTS]) == 1


def test_the_bundled_model_learns_a_fact_and_keeps_the_rest(tmp_path):
    """The bundled model answers "yellow"; trained a few epochs on chats saying bananas are purple (beside four of
    its own answers), `petit chat --lora` answers "purple", and questions not in the data keep their answers."""
    import subprocess
    import sys
    out = tmp_path / "banana.lora"
    assert main(["finetune", os.path.join(HERE, "..", "assets", "default-q8_0.petit"), "--data",
                 os.path.join(HERE, "fixtures", "lora5", "banana.jsonl"), "-o", str(out), "--epochs", "3", "--lr",
                 "2e-3", "--held-out", "0"]) == 0
    questions = "what colour is a banana?\n/reset\ncount from 3 to 6\n/reset\nwhat is 3 plus 4?\n"
    answers = []
    for extra in ([], ["--lora", str(out)]):
        r = subprocess.run([sys.executable, "-m", "petit.cli", "chat", "-t", "0", *extra], input=questions,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        answers.append([line for line in r.stdout.splitlines() if line.strip()][-3:])
    assert answers == [["yellow", "3 4 5 6", "7"], ["purple", "3 4 5 6", "7"]]


def _recorded(monkeypatch, keep_bytes):
    """A LoRA model of the llama fixture whose layer passes are recorded, one training step's calls and gradients."""
    from trainer.lora.model import LoraModel
    model = petit.load(os.path.join(HF, "llama"), weights="q8_0")
    base = FrozenBase(model)
    lm = LoraModel(base, init_adapters(base, TARGETS, 2, 0), 4.0, 2, keep_bytes=keep_bytes)
    calls, fwd, bwd = [], lm.layer_forward, lm.layer_backward
    monkeypatch.setattr(lm, "layer_forward", lambda i, x, keep: calls.append(("f", i, keep)) or fwd(i, x, keep))
    monkeypatch.setattr(lm, "layer_backward", lambda i, dx, c, g: calls.append(("b", i)) or bwd(i, dx, c, g))
    ids = np.arange(1, 12)
    grads = {n: np.zeros_like(p) for n, p in lm.params.items()}
    loss = lm.loss(ids[:-1], ids[1:], np.ones(10, np.float32), grads)
    return calls, grads, loss


def test_activation_checkpointing_past_the_budget_keeps_one_layer_of_caches(monkeypatch):
    """With no budget the forward keeps no layer's caches; the backward runs each layer's forward again right before
    its backward, last layer first, so at most one layer's caches are alive. Within the budget the caches are kept
    and nothing runs twice; a budget of one layer's caches keeps the first layer's only. The gradients are the same
    bits whichever layers were computed again."""
    calls, none_kept, loss = _recorded(monkeypatch, 0)
    assert calls == [("f", 0, False), ("f", 1, False), ("f", 1, True), ("b", 1), ("f", 0, True), ("b", 0)]
    calls, all_kept, loss_all = _recorded(monkeypatch, 1 << 30)
    assert calls == [("f", 0, True), ("f", 1, True), ("b", 1), ("b", 0)]
    from trainer.lora.model import _nbytes
    base = FrozenBase(petit.load(os.path.join(HF, "llama"), weights="q8_0"))
    from trainer.lora.model import LoraModel
    one = _nbytes(LoraModel(base, init_adapters(base, TARGETS, 2, 0), 4.0, 2).layer_forward(
        0, base.embed_rows(np.arange(1, 11)), keep=True)[1])
    calls, first_kept, _ = _recorded(monkeypatch, one)
    assert calls == [("f", 0, True), ("f", 1, False), ("f", 1, True), ("b", 1), ("b", 0)]
    assert loss == loss_all
    for name in none_kept:
        np.testing.assert_array_equal(all_kept[name], none_kept[name])
        np.testing.assert_array_equal(first_kept[name], none_kept[name])


def test_the_head_a_few_positions_at_a_time_gives_the_whole_heads_loss_and_gradients(monkeypatch):
    """The LM head's logits are made HEAD_ROWS positions at a time (a 152k vocabulary at 512 positions held three
    [512, vocab] arrays of 311 MB): the gradients are the same bits as with all positions at once, the loss the same
    to float64 rounding."""
    import trainer.lora.model as lora_model
    model = petit.load(os.path.join(HF, "llama"), weights="q8_0")
    base = FrozenBase(model)
    params = init_adapters(base, TARGETS, 2, 0)
    for name in params:                              # B non-zero: the adapters move the logits
        params[name] = params[name] + np.float32(0.01)
    ids = np.random.default_rng(0).integers(1, base.vocab, 101)
    weights = np.ones(100, np.float32)
    weights[:7] = 0                                  # positions whose loss does not count are skipped
    out = {}
    for rows in (1 << 20, 16, 5):
        monkeypatch.setattr(lora_model, "HEAD_ROWS", rows)
        lm = lora_model.LoraModel(base, params, 4.0, 2)
        grads = {n: np.zeros_like(p) for n, p in params.items()}
        out[rows] = lm.loss(ids[:-1], ids[1:], weights, grads), grads, lm.loss(ids[:-1], ids[1:], weights)
    whole_loss, whole, _ = out[1 << 20]
    for rows in (16, 5):
        loss, grads, no_grad_loss = out[rows]
        assert loss == pytest.approx(whole_loss, rel=1e-12) and no_grad_loss == loss
        for name in whole:
            np.testing.assert_array_equal(grads[name], whole[name])
