"""Speculative decoding (petit/generation/speculative.py): greedy output token for token the plain loop's with both
drafters over many prompts, lengths, stop tokens and a tight context; the KV cache rolled back to exactly what the
plain loop holds; sampling by rejection sampling distributed as the plain loop (chi-square over many seeds); the
adaptive draft length and its speed cut-off; the refusals; and the CLI flags."""
import math
import os
from collections import Counter

import numpy as np
import pytest

import petit
from petit.assets import default_model_path
from petit.cli import main
from petit.generation.loop import generate_tokens
from petit.generation.sample import Sampler
from petit.generation.session import Params, Session, Stats
from petit.generation.speculative import (DraftLength, DraftModel, LookupDrafter, SelfDraft, Speculation,
                                          generate_speculative, load_draft)

PROMPTS = ["Once upon a time", "The cat sat on the mat. The cat sat on the", "Hello, my name is", "1, 2, 3, 4, 5,",
           "Lily and Tom went to the park. Lily and Tom", "Tim had a red ball. Tim", "She said", "The dog",
           "Mom and Dad", "One day, a big bird", "The sun was hot and the sky was", "Ben liked to play with his"]


@pytest.fixture(scope="module")
def target():
    return petit.load(default_model_path())


@pytest.fixture(scope="module")
def draft_q4(target):
    return petit.load(default_model_path(), weights="q4_0")


class Fixed:
    """A drafter that always proposes the same tokens (exactness must hold whatever is drafted)."""
    name = "fixed"

    def __init__(self, tokens):
        self.tokens = list(tokens)

    def draft(self, context, n):
        return self.tokens[:n]


def _ids(model, text):
    tok = model.tokenizer
    return tok.encode(text, add_bos=tok.adds_bos)


def _plain(model, ids, **kw):
    return [(s.token, s.finish_reason) for s in generate_tokens(model, ids, **kw)]


def _spec(model, ids, speculation, **kw):
    return [(s.token, s.finish_reason) for s in generate_speculative(model, ids, speculation, **kw)]


@pytest.mark.parametrize("path, weights", [(None, None), ("tests/fixtures/hf/llama", None),
                                           ("tests/fixtures/hf/qwen3", "q4_0")])
@pytest.mark.parametrize("kv", ["f32", "int8"])
def test_a_batched_check_gives_the_bits_of_one_token_steps(path, weights, kv):
    """Why greedy speculation is exact: the multi-token pass's logits at each position are bit for bit those of
    decoding the same tokens one at a time (so an argmax near a tie cannot flip)."""
    model = petit.load(path or default_model_path(), weights=weights)
    one, many = model.new_cache(64, kv), model.new_cache(64, kv)
    ids = list(range(3, 31))
    model.forward(ids[:20], one)
    model.forward(ids[:20], many)
    steps = np.stack([model.forward([t], one) for t in ids[20:]])
    assert np.array_equal(model.forward(ids[20:], many, all_logits=True), steps)


@pytest.mark.parametrize("kind", ["lookup", "draft", "self", "fixed"])
def test_greedy_output_equals_the_plain_loop_over_many_prompts(target, draft_q4, kind):
    drafted = accepted = 0
    for i, text in enumerate(PROMPTS):
        ids = _ids(target, text)
        n = 20 + 7 * i                       # lengths that end mid-round as well as at a round's end
        plain = _plain(target, ids, max_tokens=n)
        drafter = {"lookup": LookupDrafter(), "draft": DraftModel(draft_q4, target),
                   "self": SelfDraft(draft_q4, target), "fixed": Fixed(t for t, _ in plain[3:])}[kind]
        stats = Stats()
        spec = _spec(target, ids, Speculation(drafter, draft_max=1 + i % 6), max_tokens=n, stats=stats)
        assert spec == plain, (kind, text)
        assert stats.accepted_tokens <= stats.drafted_tokens
        assert stats.target_passes <= len(spec)
        drafted, accepted = drafted + stats.drafted_tokens, accepted + stats.accepted_tokens
    assert drafted > 0 and accepted > 0              # the drafts were really checked, and some kept


def test_greedy_equal_with_stop_tokens_penalties_and_a_tight_context(target, draft_q4):
    for text in PROMPTS[:6]:
        ids = _ids(target, text)
        free = [t for t, _ in _plain(target, ids, max_tokens=30)]
        stop = [free[9], free[17]]                   # stops that fall inside accepted drafts
        sampler = Sampler(temperature=0.0, repetition_penalty=1.3, presence_penalty=0.5)
        for drafter in (LookupDrafter(), DraftModel(draft_q4, target), SelfDraft(draft_q4, target)):
            assert _spec(target, ids, Speculation(drafter), max_tokens=30, stop_ids=stop) == \
                _plain(target, ids, max_tokens=30, stop_ids=stop)
            assert _spec(target, ids, Speculation(drafter), max_tokens=30, sampler=sampler) == \
                _plain(target, ids, max_tokens=30, sampler=sampler)
            tight = len(ids) + 13                  # the context ends before max_tokens: "length" at the same token
            got = _spec(target, ids, Speculation(drafter), max_tokens=30, cache=target.new_cache(tight))
            assert got == _plain(target, ids, max_tokens=30, cache=target.new_cache(tight))
            assert got[-1][1] == "length"


def test_the_cache_is_rolled_back_to_what_the_plain_loop_holds(target, draft_q4):
    ids = _ids(target, PROMPTS[1])
    free = [t for t, _ in _plain(target, ids, max_tokens=30)]
    for drafter in (Fixed(free[1:]), DraftModel(draft_q4, target), SelfDraft(draft_q4, target)):
        plain_cache, spec_cache = target.new_cache(64), target.new_cache(64)
        a = _plain(target, ids, max_tokens=30, stop_ids=[free[12]], cache=plain_cache)
        b = _spec(target, ids, Speculation(drafter, draft_max=8), max_tokens=30, stop_ids=[free[12]],
                  cache=spec_cache)
        assert a == b and spec_cache.pos == plain_cache.pos == len(ids) + len(a) - 1
        n = spec_cache.pos
        # bit for bit: the check pass overwrites every row a draft (a self draft's, in this cache) wrote
        assert np.array_equal(spec_cache.k[:, :, :n], plain_cache.k[:, :, :n])
        assert np.array_equal(spec_cache.v[:, :, :n], plain_cache.v[:, :, :n])
        # stopped by the caller in the middle of a round of accepted drafts: the unused drafts go too
        cache = target.new_cache(64)
        steps = generate_speculative(target, ids, Speculation(Fixed(free[1:]), draft_max=8), max_tokens=30,
                                     cache=cache)
        got = [next(steps).token for _ in range(5)]
        steps.close()
        assert got == free[:5] and cache.pos == len(ids) + 4


def test_a_session_replies_the_same_turn_after_turn_with_speculation(target, draft_q4):
    plain = Session(target)
    spec = Session(target, speculation=Speculation(DraftModel(draft_q4, target, 128)))
    look = Session(target, speculation=Speculation(LookupDrafter(), draft_max=4))
    own = Session(target, speculation=Speculation(SelfDraft(draft_q4, target)))
    assert own.cache.kv_type == "int8"                                       # q8_0 weights: an int8 KV cache
    conversations = [[], [], [], []]
    for turn in ["Hi", "Tell me a story", "Again"]:
        replies = []
        for session, messages in zip((plain, spec, look, own), conversations):
            messages.append({"role": "user", "content": turn})
            steps = list(session.reply(messages, Params(max_tokens=24)))
            messages.append({"role": "assistant", "content": "".join(s.text for s in steps)})
            replies.append([s.token for s in steps])
            assert session._cached == session._cached[:session.cache.pos]      # the record matches the cache
        assert replies[1] == replies[0] and replies[2] == replies[0] and replies[3] == replies[0]
    stats = steps[-1].stats
    assert stats.target_passes > 0 and "tokens per target pass" in str(stats)


def _expected(model, ids, sampler, n):
    """The plain loop's exact distribution of its first n tokens: {token tuple: probability}."""
    out, cache = {}, model.new_cache(len(ids) + n + 1)

    def walk(prefix, prob, logits):
        if len(prefix) == n:
            out[tuple(prefix)] = prob
            return
        p = sampler.probs(logits[:model.tokenizer.vocab_size], list(ids) + prefix)
        for t in np.flatnonzero(p):
            pos = cache.pos
            walk(prefix + [int(t)], prob * p[t], model.forward([int(t)], cache) if len(prefix) + 1 < n else None)
            cache.rewind(pos)

    walk([], 1.0, model.forward(ids, cache))
    return out


def _chi_square_ok(counts: Counter, expected: dict, n: int) -> tuple[float, float]:
    """Pearson's statistic over cells pooled to an expected count >= 5, and its 0.999 quantile (Wilson-Hilferty)."""
    cells = sorted(expected, key=expected.get, reverse=True)
    stat, df, pool_e, pool_o = 0.0, -1, 0.0, 0
    for c in cells:
        pool_e, pool_o = pool_e + expected[c] * n, pool_o + counts.get(c, 0)
        if pool_e >= 5:
            stat, df, pool_e, pool_o = stat + (pool_o - pool_e) ** 2 / pool_e, df + 1, 0.0, 0
    if pool_e > 0:
        stat += (pool_o - pool_e) ** 2 / max(pool_e, 1e-12)
        df += 1
    assert sum(counts.values()) == n and set(counts) <= set(expected)
    k = max(df, 1)
    return stat, k * (1 - 2 / (9 * k) + 3.09 * math.sqrt(2 / (9 * k))) ** 3


@pytest.mark.parametrize("drafts", ["likely", "unlikely"])
def test_sampling_by_rejection_is_distributed_as_the_plain_loop(target, drafts):
    ids = _ids(target, "Once upon a time")
    settings = dict(temperature=1.0, top_k=3)
    expected = _expected(target, ids, Sampler(**settings), 3)
    likely = max(expected, key=expected.get)
    drafter = Fixed(likely[1:] if drafts == "likely" else [5, 6, 7])
    n, counts, stats = 1500, Counter(), Stats()
    for seed in range(n):
        counts[tuple(t for t, _ in _spec(target, ids, Speculation(drafter, draft_max=3), max_tokens=3,
                                         sampler=Sampler(seed=seed, **settings), stats=stats))] += 1
    stat, limit = _chi_square_ok(counts, expected, n)
    assert stat < limit, (stat, limit)
    assert stats.drafted_tokens >= n                 # every run checked drafts (room for one before the 3rd token)
    if drafts == "likely":
        assert stats.accepted_tokens > n // 4        # kept about as often as the target samples them
    else:
        assert stats.accepted_tokens < n // 20       # outside top-k: always rejected, the residual sampled


def test_lookup_drafts_what_followed_the_latest_match():
    look = LookupDrafter(max_ngram=3)
    assert look.draft([1, 2, 3, 4, 5, 9, 2, 3], 3) == [4, 5, 9]              # the 2-gram [2, 3]
    assert look.draft([1, 2, 3, 7, 1, 2, 3, 8, 1, 2, 3], 2) == [8, 1]        # the latest of two matches
    assert look.draft([1, 2, 3, 4], 3) == [] and look.draft([5], 3) == [] and look.draft([1, 2, 1], 0) == []
    assert look.draft([7, 7], 4) == [7, 7, 7, 7]                             # a loop goes on looping
    assert look.draft([1, 5, 6, 9, 5, 6], 5) == [9, 5, 6, 9, 5]               # period 3, read through the drafts
    with pytest.raises(ValueError, match="min_ngram"):
        LookupDrafter(max_ngram=1, min_ngram=2)


def test_draft_length_follows_acceptance_and_stops_where_speculation_loses():
    ctl = DraftLength(lo=2, hi=6)
    assert ctl.next(room=100) == 4 and ctl.next(room=3) == 3     # drafts from the start, never past the room
    ctl.round(drafted=4, accepted=4, seconds=1.0)        # the first round (a draft model's prefill) is not timed
    assert ctl.k == 5 and ctl.spec_rate is None
    ctl.round(drafted=5, accepted=5, seconds=0.01)
    assert ctl.k == 6                                    # all accepted: one more each time, up to draft-max
    ctl.round(drafted=6, accepted=6, seconds=0.01)
    assert ctl.k == 6
    assert ctl.plain_rate is None and ctl.next(100) == 0     # one plain step to measure what to beat
    ctl.plain(0.001)                                     # plain: 1000 tok/s
    assert ctl.next(100) == 6
    ctl.round(drafted=6, accepted=0, seconds=0.01)
    assert ctl.k == 2                                    # a rejection: accepted + 1, at least draft-min
    assert ctl.next(room=1) == 0                         # less room than draft-min: a plain step
    assert ctl.pause == 8 and ctl.next(100) == 0         # the rounds average < 1000 tok/s: 8 plain steps
    for _ in range(8):
        ctl.plain(0.001)
    assert ctl.next(100) == 2                            # then it tries again ...
    for _ in range(2):
        ctl.round(drafted=2, accepted=1, seconds=0.01)   # drafts kept, but 200 tok/s < 1000
    assert ctl.pause == 16                               # ... and backs off longer when it loses again
    for _ in range(16):
        ctl.plain(0.01)                                  # plain steps got slower (100 tok/s or so)
    for _ in range(2):
        ctl.round(drafted=2, accepted=1, seconds=0.004)  # 500 tok/s: it keeps drafting
    assert ctl.pause == 0 and ctl.next(100) == 2 and ctl.backoff == 8


def test_a_round_that_keeps_no_draft_pauses_at_once_longer_while_no_draft_was_ever_right():
    ctl = DraftLength(lo=1, hi=8, start=2)
    assert ctl.next(100) == 2                            # a drafting model starts short
    ctl.round(drafted=2, accepted=0, seconds=0.001)      # the first round, however fast: one token for two drafts
    assert ctl.k == 1 and ctl.pause == 8 and ctl.next(100) == 0
    for _ in range(8):
        ctl.plain(0.001)
    assert ctl.next(100) == 1
    ctl.round(drafted=1, accepted=0, seconds=0.001)
    assert ctl.pause == 32                               # never right yet: four times as long
    for _ in range(32):
        ctl.plain(0.001)
    ctl.round(drafted=1, accepted=1, seconds=0.0005)     # right once
    assert ctl.pause == 0 and ctl.next(100) == 2
    ctl.round(drafted=2, accepted=0, seconds=0.0005)
    assert (ctl.pause, ctl.backoff) == (128, 256)        # from now on twice as long each time, up to 256


def test_a_drafter_that_is_always_wrong_drafts_four_tokens_in_sixty(target):
    ids = _ids(target, PROMPTS[1])
    plain = _plain(target, ids, max_tokens=60)
    wrong = [(t + 1) % target.vocab_size for t, _ in plain]

    class Wrong:
        name = "wrong"

        def draft(self, context, n):                     # the next plain token, shifted: every draft rejected
            return wrong[len(context) - len(ids):][:n]

    stats = Stats()
    assert _spec(target, ids, Speculation(Wrong()), max_tokens=60, stats=stats) == plain
    # 2 drafts at the first round, then 1 after 8 plain steps and 1 after 32 more: the loss is four drafts and
    # three longer passes, whatever the clock reads
    assert (stats.drafted_tokens, stats.accepted_tokens) == (4, 0)


class _SlowClock:
    """A fake clock: 0.5 s between two readings, and a drafter that takes 1 s more."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += 0.5
        return self.t


def test_a_losing_drafter_costs_plain_steps_not_drafts(target):
    ids = _ids(target, PROMPTS[0])
    clock, stats = _SlowClock(), Stats()

    class Slow(Fixed):
        def draft(self, context, n):
            clock.t += 1.0
            return super().draft(context, n)

    got = _spec(target, ids, Speculation(Slow([5, 6, 7, 8])), max_tokens=60, stats=stats, clock=clock)
    assert got == _plain(target, ids, max_tokens=60)
    assert 0 < stats.drafted_tokens < 20 and stats.target_passes > 40    # drafting mostly stopped


def test_refusals(target, tmp_path):
    llama = petit.load("tests/fixtures/hf/llama")
    with pytest.raises(ValueError, match=r"vocabulary \(320 tokens\) does not match the target's \(512"):
        DraftModel(llama, target)
    mamba = petit.load("tests/fixtures/hf_ssm/mamba")
    with pytest.raises(ValueError, match="recurrent state"):
        Session(mamba, speculation=Speculation(LookupDrafter()))
    with pytest.raises(ValueError, match="recurrent state"):
        DraftModel(mamba, mamba)
    with pytest.raises(ValueError, match="draft-min"):
        Speculation(LookupDrafter(), draft_max=2, draft_min=3)
    own = load_draft("self:q4_0", target, default_model_path())
    assert isinstance(own, SelfDraft) and own.model.weight_type == "q4_0"
    assert not isinstance(load_draft(default_model_path(), target, default_model_path()), SelfDraft)
    from models import TINY, write_model
    other = str(tmp_path / "other.petit")               # the same vocabulary, another shape
    write_model(other, dict(TINY, vocab_size=target.vocab_size), tokenizer=target.tokenizer.to_dict())
    with pytest.raises(ValueError, match="cache layout"):
        SelfDraft(petit.load(other), target)
    assert DraftModel(petit.load(other), target).draft(_ids(target, "Tom and"), 3)     # a DraftModel takes it


def test_a_stateful_sampler_runs_the_plain_loop(target):
    ids = _ids(target, PROMPTS[2])
    calls = []

    def sampler(logits):
        calls.append(1)
        return int(np.argmax(logits))

    stats = Stats()
    got = _spec(target, ids, Speculation(LookupDrafter()), max_tokens=10, sampler=sampler, stats=stats)
    assert got == _plain(target, ids, max_tokens=10) and len(calls) == 10 and stats.target_passes == 0


def test_cli_run_lookup_and_draft_print_the_plain_text_and_the_counts(capsys):
    model = default_model_path()
    prompt = "Tom and"
    assert main(["run", model, "-p", prompt, "-n", "40", "--greedy"]) == 0
    plain = capsys.readouterr().out
    for flags in (["--lookup"], ["--draft", "self:q4_0", "--draft-max", "3"],
                  ["--draft", os.path.join(os.path.dirname(model), "default-q4_0.petit")]):
        assert main(["run", model, "-p", prompt, "-n", "40", "--greedy", *flags]) == 0
        out = capsys.readouterr()
        assert out.out == plain
        assert "drafted" in out.err and "accepted" in out.err and "tokens per target pass" in out.err
        if "--draft" in flags:
            assert "accepted 0," not in out.err


@pytest.mark.parametrize("flags, message", [
    (["--lookup", "--draft-min", "4", "--draft-max", "2"], "--draft-min (4) is above --draft-max (2)"),
    (["--draft-max", "3"], "need --draft MODEL or --lookup"),
    (["--draft", "self:q3"], "the weight type after self: must be one of"),
    (["--lookup", "--dump-logits", "x.npy"], "cannot be combined"),
])
def test_cli_wrong_flags_are_usage_errors(flags, message, capsys):
    assert main(["run", default_model_path(), "-p", "hi", *flags]) == 2
    assert message in capsys.readouterr().err


def test_cli_vocabulary_mismatch_is_named(capsys):
    assert main(["run", default_model_path(), "-p", "hi", "--draft", "tests/fixtures/hf/llama"]) == 1
    assert "does not match the target's" in capsys.readouterr().err


def test_cli_chat_answers_the_same_with_speculation_turn_after_turn():
    from test_cli_chat import QUESTIONS, chat
    plain = chat([], QUESTIONS)
    assert chat(["--lookup"], QUESTIONS) == plain            # dropped turns included: the cache follows the record
    assert chat(["--draft", "self:q4_0", "--draft-max", "4"], QUESTIONS) == plain


def test_serve_lookup_answers_concurrent_requests_as_plain_and_reports_the_drafts():
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    import threading

    from petit.server import Server
    from petit.server.engine import ServerWorker
    from test_cli_chat import ANSWERS, QUESTIONS

    def ask(url, question, out, i):
        body = {"model": "m", "messages": [{"role": "user", "content": question}], "temperature": 0,
                "max_tokens": 24}
        out[i] = httpx.post(f"{url}/chat/completions", json=body, timeout=60).json()

    server = Server(ServerWorker(default_model_path(), max_tokens=24, lookup=True, draft_max=4), port=0).start()
    try:
        out = [None] * len(QUESTIONS)
        threads = [threading.Thread(target=ask, args=(server.url, q, out, i)) for i, q in enumerate(QUESTIONS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [r["choices"][0]["message"]["content"] for r in out] == ANSWERS
        assert all({"draft_n", "draft_n_accepted", "tokens_per_pass"} <= set(r["timings"]) for r in out)
        assert sum(r["timings"]["draft_n"] for r in out) > 0
    finally:
        server.stop()


def test_a_reply_closed_mid_round_leaves_the_session_as_a_plain_one(target, draft_q4):
    """The caller stops a reply while accepted drafts are still pending: the cache forgets them, and the next turn
    reuses exactly the tokens given out."""
    sessions = [Session(target), Session(target, speculation=Speculation(DraftModel(draft_q4, target, 128)))]
    replies = []
    for session in sessions:
        messages = [{"role": "user", "content": "count from 1 to 9"}]
        steps = session.reply(messages, Params(max_tokens=24))
        got = [next(steps) for _ in range(5)]       # the second round's drafts: 2, then 3
        steps.close()
        if session.speculation is not None:
            assert got[-1].stats.accepted_tokens > 3      # drafts were still pending when it stopped
        assert session.cache.pos == len(session._cached) and session._cached[-4:] == [s.token for s in got[:4]]
        messages.append({"role": "assistant", "content": "".join(s.text for s in got)})
        messages.append({"role": "user", "content": "what is 3 plus 4?"})
        steps = list(session.reply(messages, Params(max_tokens=24)))
        replies.append(([s.token for s in got], [s.token for s in steps], steps[-1].stats.reused_tokens))
    assert replies[1] == replies[0]
