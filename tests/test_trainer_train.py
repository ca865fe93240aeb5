"""Training loop and checkpoints: learning, reproducibility, resume, Ctrl+C, atomic files."""

import io
import math

import numpy as np
import pytest

from trainer import checkpoint as ckpt_mod
from trainer.chat_corpus import make_split
from trainer.checkpoint import load_checkpoint, save_checkpoint
from trainer.train import Callbacks, TrainConfig, train

TEXT = ("the quick brown fox jumps over the lazy dog. " * 30 + "a stitch in time saves nine. " * 30
        + "to be or not to be, that is the question. " * 20)


def tiny(**overrides) -> TrainConfig:
    base = dict(tokenizer="char", n_layers=2, dim=32, n_heads=4, n_kv_heads=2, ffn_dim=64, context=32, steps=12,
                batch_size=8, lr=1e-2, warmup_steps=5, eval_interval=4, checkpoint_interval=0, seed=7)
    return TrainConfig(**{**base, **overrides})


def run(config, out_dir=None, **kw):
    return train(config, TEXT, out_dir=out_dir, log=io.StringIO(), **kw)


def test_loss_falls_below_half_of_ln_vocab():
    result = run(tiny(steps=60, eval_interval=20))
    ln_v = math.log(len(result.tokenizer["vocab"]))
    assert abs(result.losses[0] - ln_v) < 0.15 * ln_v, "an untrained model should be near uniform"
    final = float(np.mean(result.losses[-5:]))
    assert final < 0.5 * ln_v, f"loss {final:.3f} did not fall below half of ln(V) = {ln_v:.3f}"
    assert result.val_losses[-1][0] == 60 and result.val_losses[-1][1] < 0.6 * ln_v


def test_same_seed_same_losses_exactly():
    a, b = run(tiny()), run(tiny())
    assert a.losses == b.losses and a.val_losses == b.val_losses
    assert all(np.array_equal(a.params[n], b.params[n]) for n in a.params)
    assert run(tiny(seed=8)).losses != a.losses


def test_resume_equals_uninterrupted(tmp_path):
    full = run(tiny(), tmp_path / "full")
    stopped = run(tiny(), tmp_path / "part", callbacks=Callbacks(should_stop=lambda: True))
    assert stopped.interrupted and stopped.step == 1
    half = run(tiny(), tmp_path / "part", resume=tmp_path / "part")
    assert half.step == 12
    assert half.losses == full.losses, "resumed losses differ from the uninterrupted run"
    assert half.val_losses == full.val_losses
    assert all(np.array_equal(half.params[n], full.params[n]) for n in full.params)
    saved = load_checkpoint(tmp_path / "part")
    assert saved.step == 12 and saved.history["loss"] == full.losses


def test_resume_from_the_middle_bit_identical(tmp_path):
    full = run(tiny())
    stop_at = {"step": 0}

    def on_progress(step, loss, val_loss, tok_s):
        stop_at["step"] = step

    part = run(tiny(), tmp_path / "ck", callbacks=Callbacks(on_progress=on_progress,
                                                               should_stop=lambda: stop_at["step"] == 6))
    assert part.interrupted and part.step == 6 and load_checkpoint(tmp_path / "ck").step == 6
    rest = run(tiny(), tmp_path / "ck", resume=tmp_path / "ck")
    assert rest.losses == full.losses
    assert all(np.array_equal(rest.params[n], full.params[n]) for n in full.params)


def test_keyboard_interrupt_saves_and_reports(tmp_path):
    def on_progress(step, loss, val_loss, tok_s):
        if step == 3:
            raise KeyboardInterrupt

    log = io.StringIO()
    result = train(tiny(), TEXT, out_dir=tmp_path / "ck", log=log, callbacks=Callbacks(on_progress=on_progress))
    assert result.interrupted and result.step == 3
    assert load_checkpoint(tmp_path / "ck").step == 3
    assert f"interrupted at step 3/12; checkpoint saved to {tmp_path / 'ck'}" in log.getvalue()


def test_progress_callback_values(tmp_path):
    seen = []
    saved = []
    result = run(tiny(steps=8, checkpoint_interval=4), tmp_path / "ck",
                 callbacks=Callbacks(on_progress=lambda *a: seen.append(a), on_checkpoint=saved.append))
    assert [s[0] for s in seen] == list(range(1, 9))
    assert [s[1] for s in seen] == result.losses
    assert seen[0][2] is None and seen[3][2] == result.val_losses[0][1]  # val after step 4
    assert all(s[3] > 0 for s in seen)
    assert saved == [tmp_path / "ck"] * 2  # at step 4 and at the end


def test_checkpoint_files_are_atomic(tmp_path, monkeypatch):
    result = run(tiny(steps=3), tmp_path / "ck")
    files = sorted(p.name for p in (tmp_path / "ck").iterdir())
    assert files == ["config.json", "optimizer.npz", "weights.npz"], f"leftover files: {files}"
    before = (tmp_path / "ck" / "weights.npz").read_bytes()

    def exploding_savez(f, **arrays):
        f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(ckpt_mod.np, "savez", exploding_savez)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path / "ck", params=result.params, model_config=result.model_config, step=99)
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == files, "a temporary file was left behind"
    assert (tmp_path / "ck" / "weights.npz").read_bytes() == before
    assert load_checkpoint(tmp_path / "ck").step == 3


def test_checkpoint_contents_and_torn_set(tmp_path):
    result = run(tiny(steps=3), tmp_path / "ck", chat_template="{{ x }}")
    ck = load_checkpoint(tmp_path / "ck")
    assert ck.model_config == result.model_config and ck.tokenizer == result.tokenizer
    assert ck.train_config["steps"] == 3 and ck.chat_template == "{{ x }}"
    assert all(ck.params[n].dtype == np.float32 and np.array_equal(ck.params[n], result.params[n])
               for n in result.params)
    assert set(ck.optimizer["m"]) == set(result.params) and ck.optimizer["t"] == 3
    # an .npz from another save without the matching config.json is detected
    np.savez(tmp_path / "ck" / "weights.npz", **{n: p * 2 for n, p in result.params.items()})
    with pytest.raises(ValueError, match="inconsistent: weights.npz"):
        load_checkpoint(tmp_path / "ck")
    with pytest.raises(ValueError, match="does not exist"):
        load_checkpoint(tmp_path / "missing")


def test_resume_rejects_a_different_model(tmp_path):
    run(tiny(steps=2), tmp_path / "ck")
    with pytest.raises(ValueError, match="different model.*hidden_size"):
        run(tiny(steps=4, dim=64), tmp_path / "ck", resume=tmp_path / "ck")


def test_train_on_token_ids_with_mask():
    rng = np.random.default_rng(0)
    ids = np.tile(np.arange(10), 60)  # a perfectly predictable stream
    mask = (rng.random(ids.size) < 0.5).astype(np.uint8)
    result = train(tiny(steps=30, vocab_size=10), ids, loss_mask=mask, log=io.StringIO(), progress=False)
    assert result.tokenizer is None and result.model_config["vocab_size"] == 10
    assert result.losses[-1] < 0.3 * math.log(10)
    with pytest.raises(ValueError, match=r"token id 10 is outside the vocabulary \[0, 10\)"):
        train(tiny(vocab_size=10), np.r_[ids, 10], log=io.StringIO())


def test_chat_training_masks_all_but_answers():
    split = make_split(0, 300)
    result = train(tiny(tokenizer="bpe", vocab_size=300, steps=2, context=64), split.train_text, chat=True,
                   log=io.StringIO())
    assert result.tokenizer["eos_token"] == "<|im_end|>" and result.chat_template.startswith("{% for")
    from petit.tokenizer import Tokenizer
    from trainer.data import encode_chat

    tok = Tokenizer.from_dict(result.tokenizer)
    ids, mask = encode_chat(split.train_text, tok)
    assert list(ids) == tok.encode(split.train_text)
    answers = tok.decode(ids[mask == 1])
    assert answers == "".join(a + "<|im_end|>" for turns in split.dialogues for _, a in turns)


def test_bad_inputs_raise_value_error():
    with pytest.raises(ValueError, match="needs at least 33 training tokens"):
        train(tiny(), "tiny corpus", log=io.StringIO())
    with pytest.raises(ValueError, match=r"dim \(30\) must be a multiple of n_heads \(4\)"):
        train(tiny(dim=30), TEXT, log=io.StringIO())
    with pytest.raises(ValueError, match="steps must be a positive integer, got 0"):
        train(tiny(steps=0), TEXT, log=io.StringIO())


def test_chunked_step_equals_full_batch_and_threads_do_not_change_numbers():
    from trainer.model import init_params, loss_and_grads, make_config
    from trainer.parallel import StepRunner

    cfg = make_config(vocab_size=20, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8)
    params = init_params(cfg, 0, np.float64)
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 20, (5, 8)), rng.integers(0, 20, (5, 8))
    m = (rng.random((5, 8)) < 0.6).astype(np.float64)
    full_loss, full_grads = loss_and_grads(params, cfg, x, y, m)
    results = []
    for threads in (1, 2):
        with StepRunner(grad_chunks=3, threads=threads) as runner:
            results.append(runner.loss_and_grads(params, cfg, x, y, m))
    (loss1, grads1), (loss2, grads2) = results
    assert loss1 == loss2 and all(np.array_equal(grads1[n], grads2[n]) for n in grads1)
    assert loss1 == pytest.approx(full_loss, rel=1e-12)
    for n in full_grads:
        np.testing.assert_allclose(grads1[n], full_grads[n], rtol=1e-10, atol=1e-14)


def test_thread_count_does_not_change_training():
    a = train(tiny(steps=4), TEXT, log=io.StringIO(), threads=1)
    b = train(tiny(steps=4), TEXT, log=io.StringIO(), threads=2)
    assert a.losses == b.losses and a.val_losses == b.val_losses
