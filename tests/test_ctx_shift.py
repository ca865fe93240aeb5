"""Context shift (petit/generation/ctx_shift.py, issue 32 item 5): a chat that outgrows its context drops its oldest
whole turns and moves the kept ones down inside the KV cache, keys re-rotated, so only the new turn is prefilled. The
cache then holds exactly the tokens of a fresh render of the shortened conversation, and its first layer's keys and
values are a fresh prefill's at the new positions (the first layer's keys depend only on the token and its position;
later layers keep what the dropped turns contributed, as in any context shift). Families where a shift cannot be
exact re-prefill the shortened conversation (as without --ctx-shift, the same replies) and say why."""
import numpy as np
import pytest

import petit
from petit.assets import default_model_path
from petit.chat.formats import get_format
from petit.cli import main
from petit.generation.ctx_shift import find_kept, rerotate, shift_refusal
from petit.generation.session import Params, Session
from petit.models.blocks.rope import Rope
from test_cli_chat import QUESTIONS

HF = "tests/fixtures/hf"
CHATML = get_format("chatml")


def converse(model, *, shift: bool, kv: str = "f32", n_ctx: int = 128, template=None, max_tokens: int = 8,
             questions=QUESTIONS):
    """A chat with a system prompt through the questions, old turns dropped to fit: (session, replies, stats)."""
    session = Session(model, n_ctx=n_ctx, kv_type=kv, template=template)
    messages = [{"role": "system", "content": "Be brief."}]
    replies, stats = [], []
    for q in questions:
        messages.append({"role": "user", "content": q})
        steps = list(session.reply(messages, Params(max_tokens=max_tokens, drop_old_turns=True, ctx_shift=shift)))
        st = steps[-1].stats
        reply = "".join(s.text for s in steps)
        messages = messages[:1] + messages[1 + st.dropped_messages:] + [{"role": "assistant", "content": reply}]
        replies.append([s.token for s in steps])
        stats.append(st)
    session.messages = messages
    return session, replies, stats


def rows(cache, layer, n, which="k"):
    x = getattr(cache, which)[layer][:, :n].astype(np.float32)
    if cache.kv_type == "int8":
        x = x * getattr(cache, f"{which}_scale")[layer][:, :n, None]
    return x


def check_against_a_fresh_prefill(model, session, tol):
    """The cache's tokens are a fresh render's (the shortened conversation before its last reply, that reply's
    tokens after it), and its first layer's keys / values those of a fresh prefill of them."""
    cached = session._cached
    assert len(cached) == session.cache.pos
    shown = session.prompt_ids(session.messages[:-1])
    assert cached[:len(shown)] == shown
    fresh = model.new_cache(session.n_ctx, session.cache.kv_type)
    model.forward(cached, fresh)
    n = len(cached)
    for which in ("k",) if session.cache.values_are_keys else ("k", "v"):
        got, want = rows(session.cache, 0, n, which), rows(fresh, 0, n, which)
        assert np.abs(got - want).max() <= tol * np.abs(want).max(), which


@pytest.mark.parametrize("path, kv, tol", [
    (None, "f32", 1e-6), (None, "int8", 0.02),            # the bundled model (int8: one quantization step)
    (f"{HF}/llama_yarn", "f32", 1e-5),                     # yarn: an attention factor in the tables
    (f"{HF}/llama_llama3", "f32", 1e-5), (f"{HF}/llama_linear", "f32", 1e-5),
    (f"{HF}/cohere", "f32", 1e-5),                         # interleaved pairs
    (f"{HF}/phi", "f32", 1e-5), (f"{HF}/gpt_neox", "f32", 1e-5),     # partial rotary
    (f"{HF}/smollm3", "f32", 1e-5),                        # NoPE layers: rows only move
    (f"{HF}/gemma3_text", "f32", 1e-5),                    # sliding windows, two bases
    (f"{HF}/qwen3", "f32", 1e-5),                          # key norms before RoPE
    ("tests/fixtures/hf5_mla/minicpm3", "f32", 1e-5),      # latent attention: the rows' RoPE part rotates
    ("tests/fixtures/hf5_fam36e/kolibri1", "f32", 1e-5),   # issue 36: windows with RoPE, NoPE full layers, experts
    ("tests/fixtures/hf5_fam36e/flint", "f32", 1e-5),      # the same with attention sinks
    ("tests/fixtures/hf5_fam36d/diffllama", "f32", 1e-5),  # issue 36: each head's keys held twice, both re-rotated
    ("tests/fixtures/hf5_fam36d/doge", "f32", 1e-5),       # and the keys' bias slot, past the rotated values, moves
    ("tests/fixtures/hf5_fam36i/cohere_compass_text", "f32", 1e-5),  # issue 36: a parallel block, windows, NoPE
    ("tests/fixtures/hf5_fam36i/beam", "f32", 1e-5),       # windows, NoPE layers whose query scale reads the position
    ("tests/fixtures/hf5_fam36f/fuyu", "f32", 1e-5),       # issue 36: keys LayerNormed per head, then half rotated
    ("tests/fixtures/hf5_fam36f/mllama", "f32", 1e-5),     # the self-attention layers of 5 (cross ones skipped)
    ("tests/fixtures/hf5_fam36j/modernbert-decoder", "f32", 1e-5),   # issue 36: two bases, windows, biased keys
    ("tests/fixtures/hf5_fam36h/hy_v3", "f32", 1e-5),      # issue 36: key norms before RoPE, a dense layer, experts
    ("tests/fixtures/hf5_fam36h/dory", "f32", 1e-5),       # keys L2-normed after RoPE (a rotation passes through),
                                                            # each loop's pass its own layers' rows
    ("tests/fixtures/hf5_fam36h/ergo", "f32", 1e-5),       # adjacent-pair RoPE in the sliding layers, NoPE full ones
    ("tests/fixtures/hf5_fam36g/laguna", "f32", 1e-5),     # issue 36: per-layer heads, yarn on part of the head
    ("tests/fixtures/hf5_fam36g/axk1", "f32", 1e-5),       # latent attention in A.X-K1's layers
    ("tests/fixtures/hf5_fam36o/hrm_text", "f32", 1e-5),   # issue 36: each H / L cycle's pass its own layers' rows
])
def test_a_shift_leaves_the_cache_a_fresh_render_would_make(path, kv, tol):
    model = petit.load(path or default_model_path())
    assert shift_refusal(model, model.new_cache(8, kv)) is None
    template, max_tokens = (None, 8) if path is None else (CHATML, 4)
    session, _, stats = converse(model, shift=True, kv=kv, template=template, max_tokens=max_tokens)
    shifted = [s for s in stats if s.dropped_messages]
    assert shifted and all(s.shifted_tokens > 0 and s.shift_refused is None for s in shifted)
    assert all(s.reused_tokens >= s.shifted_tokens and type(s.shifted_tokens) is int for s in shifted)
    check_against_a_fresh_prefill(model, session, tol)


def test_only_the_new_turn_is_prefilled():
    model = petit.load(default_model_path())
    session, _, stats = converse(model, shift=True)
    _, _, plain = converse(model, shift=False)
    for s, p in zip(stats, plain):
        assert s.prompt_tokens == p.prompt_tokens and s.dropped_messages == p.dropped_messages
        if s.dropped_messages:       # without the shift: everything after the system prompt again
            new_turn = s.prompt_tokens - s.reused_tokens
            assert new_turn < 20 and p.prompt_tokens - p.reused_tokens > 3 * new_turn
    assert sum(bool(s.dropped_messages) for s in stats) >= 3
    assert "context shift:" in str(stats[-1]) and "tokens of kept turns moved, not prefilled" in str(stats[-1])


@pytest.mark.parametrize("path, reason", [
    (f"{HF}/gpt2", "the model adds learned absolute positions"),
    (f"{HF}/llama_dynamic", "layer 0's RoPE (Rope, dynamic) depends on more than the position"),
    (f"{HF}/phi3", "layer 0's RoPE (Rope, longrope) depends on more than the position"),
    ("tests/fixtures/hf5_hybrid/bamba", "the model keeps a recurrent state"),
    ("tests/fixtures/hf5_fam36g/zaya", "the model keeps a recurrent state"),     # issue 36: ZAYA's CCA state
    ("tests/fixtures/hf5_fam36n/xlstm", "the model keeps a recurrent state"),    # issue 36: xLSTM's mLSTM memory
    ("tests/fixtures/hf5_fam36l/inkling_text", "the model keeps a recurrent state"),    # issue 36: Inkling's convs
    ("tests/fixtures/hf5_fam36l/inkling2_text", "the model keeps a recurrent state"),
    ("tests/fixtures/hf5_fam36l/inkling2_loop_text", "the model keeps a recurrent state"),
    ("tests/fixtures/hf5_mla/glm_moe_dsa", "sparse attention indexer keeps keys of its own RoPE"),
    ("tests/fixtures/hf5_fam36m/hy_v4", "sparse attention indexer keeps keys of its own RoPE"),   # in HC streams
    ("tests/fixtures/hf5_q4exp/qwen4_exp_text", "the model keeps a recurrent state"),   # issue 36: Qwen4-Exp
    ("tests/fixtures/hf5_gemma/gemma3n_text", "layer 0 is a family's own attention"),
])
def test_where_a_shift_cannot_be_exact_the_turns_are_prefilled_again(path, reason):
    model = petit.load(path)
    n_ctx = min(128, model.context_length)
    _, replies, stats = converse(model, shift=True, n_ctx=n_ctx, template=CHATML, max_tokens=4)
    _, plain, plain_stats = converse(model, shift=False, n_ctx=n_ctx, template=CHATML, max_tokens=4)
    assert replies == plain
    dropped = [s for s in stats if s.dropped_messages]
    assert dropped and all(s.shifted_tokens == 0 and reason in s.shift_refused for s in dropped)
    assert [s.reused_tokens for s in stats] == [s.reused_tokens for s in plain_stats]
    assert "no context shift (" in str(dropped[0])


def test_find_kept_takes_the_longest_run_after_the_common_prefix():
    cached = [1, 2, 9, 9, 9, 3, 4, 5, 6]
    assert find_kept(cached, [1, 2, 3, 4, 5, 7], 2) == (3, 3)
    assert find_kept(cached, [1, 2, 8], 2) is None
    assert find_kept([1, 2, 3, 5, 3, 4], [1, 2, 3, 4], 2) == (2, 2)     # 3 4 at 4, not 3 5 at 2


@pytest.mark.parametrize("interleaved", [False, True])
def test_a_rerotation_equals_rotating_at_the_new_position(interleaved):
    rope = Rope(10, 10000.0, interleaved=interleaved)            # rotary part 10 of a 14-wide head
    rng = np.random.default_rng(0)
    k = rng.standard_normal((3, 5, 14)).astype(np.float32)
    old, new = np.array([40, 41, 42, 43, 90]), np.array([7, 8, 9, 10, 11])
    cos, sin = rope.tables(100)

    def rotate(x, pos):
        out = x.copy()
        c, s = cos[pos][None], sin[pos][None]
        if interleaved:
            a, b = x[..., 0:10:2], x[..., 1:10:2]
            out[..., 0:10:2], out[..., 1:10:2] = a * c - b * s, b * c + a * s
        else:
            a, b = x[..., :5], x[..., 5:10]
            out[..., :5], out[..., 5:10] = a * c - b * s, b * c + a * s
        return out
    stored = rotate(k, old)
    rerotate(stored, rope, old, new, 128)
    np.testing.assert_allclose(stored, rotate(k, new), atol=2e-6)
    assert (stored[..., 10:] == k[..., 10:]).all()               # past the rotary part: untouched


def test_cli_chat_ctx_shift_prints_what_it_moved(capsys, monkeypatch):
    import io
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{q}\n" for q in QUESTIONS)))
    assert main(["chat", "-t", "0", "--ctx", "128", "--ctx-shift", "--stats", "--system", "Be brief."]) == 0
    err = capsys.readouterr().err
    assert "context shift:" in err and "tokens of kept turns moved, not prefilled" in err


def _random_cache(layers, kv_type, values_are_keys, seed=0):
    from petit.cache import KVCache
    cache = KVCache(len(layers), 3, 37, 14, kv_type, values_are_keys)
    rng = np.random.default_rng(seed)
    if kv_type == "f32":
        cache.k[:] = rng.standard_normal(cache.k.shape).astype(np.float32)
        if not values_are_keys:
            cache.v[:] = rng.standard_normal(cache.v.shape).astype(np.float32)
    else:
        for buf, scale in ((cache.k, cache.k_scale), (cache.v, cache.v_scale)):
            buf[:] = rng.integers(-127, 128, buf.shape, dtype=np.int8)
            scale[:] = rng.uniform(0.01, 0.1, scale.shape).astype(np.float32)
    cache.pos = 35
    return cache


@pytest.mark.parametrize("kv_type", ["f32", "int8"])
@pytest.mark.parametrize("values_are_keys", [False, True])
@pytest.mark.parametrize("keep, dropped, kept", [(3, 7, 19), (2, 20, 13), (0, 1, 34), (5, 9, 0)])
def test_the_c_kernel_equals_the_numpy_reference_at_odd_sizes(kv_type, values_are_keys, keep, dropped, kept):
    from types import SimpleNamespace

    from petit.generation.ctx_shift import shift, shift_reference
    ropes = [Rope(10, 10000.0), Rope(14, 500.0, interleaved=True), None,
             Rope(6, 10000.0, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}, 64)]
    model = SimpleNamespace(net=SimpleNamespace(layers=[SimpleNamespace(rope=r) for r in ropes]))
    got, want = (_random_cache(ropes, kv_type, values_are_keys) for _ in range(2))
    shift(model, got, keep, dropped, kept)
    shift_reference(model, want, keep, dropped, kept)
    assert got.pos == want.pos == keep + kept
    for i, rope in enumerate(ropes):
        for which in ("k",) if values_are_keys else ("k", "v"):
            a, b = rows(got, i, keep + kept, which), rows(want, i, keep + kept, which)
            step = 0 if kv_type == "f32" else want.k_scale[i][:, :keep + kept, None].max() * 1.01
            assert np.abs(a - b).max() <= 1e-6 * np.abs(b).max() + step, (i, which)
            if rope is None or which == "v":
                assert (a == b).all()                # rows that only move keep their bits
    with pytest.raises(ValueError, match="cannot shift 30 positions from 10 to 3: the cache holds 35"):
        shift(model, _random_cache(ropes, kv_type, values_are_keys), 3, 7, 30)


def test_serve_ctx_shift_prefills_only_the_new_turn():
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    from petit.server import Server
    from petit.server.engine import ServerWorker
    server = Server(ServerWorker(default_model_path(), max_tokens=8, drop_old_turns=True, ctx_shift=True,
                                 system="Be brief."), port=0).start()
    try:
        messages, timings = [], []
        for q in QUESTIONS:
            messages.append({"role": "user", "content": q})
            r = httpx.post(f"{server.url}/chat/completions", timeout=60,
                           json={"model": "m", "messages": messages, "temperature": 0}).json()
            messages.append(r["choices"][0]["message"])
            timings.append(r["timings"])
        assert server.engine.last_stats.dropped_messages > 0 and server.engine.last_stats.shifted_tokens > 0
        late = timings[-3:]                      # the context is full by then: every turn drops old ones
        assert all(t["prompt_n"] < 20 and t["cache_n"] > 60 for t in late)
    finally:
        server.stop()


def test_n_keep_keeps_the_first_turn_and_the_shift_works_around_it():
    """Without a system prompt, n_keep keeps the first question and its answer (the attention sinks): the turns
    dropped are the ones after it, and the kept turns behind them shift down as before."""
    model = petit.load(default_model_path())
    session = Session(model, n_ctx=128, kv_type="f32")
    messages, all_stats = [], []
    for q in QUESTIONS:
        messages.append({"role": "user", "content": q})
        steps = list(session.reply(messages, Params(max_tokens=8, drop_old_turns=True, ctx_shift=True, n_keep=4)))
        st = steps[-1].stats
        at, n = st.dropped_at, st.dropped_messages
        messages = messages[:at] + messages[at + n:] + [{"role": "assistant", "content": "".join(s.text
                                                                                                  for s in steps)}]
        all_stats.append(st)
    dropped = [s for s in all_stats if s.dropped_messages]
    assert dropped and all(s.dropped_at == 2 and s.shifted_tokens > 0 for s in dropped)
    assert messages[0]["content"] == QUESTIONS[0]                   # the first turn stayed
    session.messages = messages
    check_against_a_fresh_prefill(model, session, 1e-6)


def test_the_chat_loop_with_n_keep_keeps_the_first_turn(capsys, monkeypatch):
    """petit chat --n-keep: the loop forgets the messages the session dropped (after the kept first turn)."""
    import io

    from petit.cli.repl import ChatLoop
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{q}\n" for q in QUESTIONS)))
    model = petit.load(default_model_path())
    loop = ChatLoop(Session(model, n_ctx=128), Params(max_tokens=8, drop_old_turns=True, ctx_shift=True, n_keep=4),
                    raw=False, system=None, stats=True)
    loop.run()
    assert "context shift:" in capsys.readouterr().err
    assert loop.messages[0]["content"] == QUESTIONS[0] and loop.messages[-2]["content"] == QUESTIONS[-1]
    assert len(loop.messages) < 2 * len(QUESTIONS)
    assert [m["role"] for m in loop.messages] == ["user", "assistant"] * (len(loop.messages) // 2)
