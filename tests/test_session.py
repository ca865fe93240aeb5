"""Session: the reply equals a fresh greedy generation over the re-rendered conversation, and only the new tail is
prefilled each call (the KV cache is reused), with logits equal to a full re-prefill. The caller owns the
conversation: these tests keep it in a list, as the app, the server and `petit chat` do."""
import os

import numpy as np
import pytest

import petit
from petit.chat.template import TemplateError
from petit.generation.session import Params, Session, common_prefix

ASSET = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets", "default-q8_0.petit")


@pytest.fixture(scope="module")
def model():
    return petit.load(ASSET)


def user(text):
    return {"role": "user", "content": text}


class Chat:
    """A conversation kept by the caller: each say() passes the whole history to Session.reply and keeps the reply
    (dropping the messages the Session says no longer fit)."""

    def __init__(self, session, params=None, system=None):
        self.session, self.params = session, params or Params(max_tokens=24)
        self.messages = [{"role": "system", "content": system}] if system else []
        self.stats = None

    def say(self, text, steps=None):
        messages = self.messages + [user(text)]
        parts = []
        for step in self.session.reply(messages, self.params):
            parts.append(step.text)
            self.stats = step.stats
        first = 1 if messages[0]["role"] == "system" else 0
        self.messages = (messages[:first] + messages[first + self.stats.dropped_messages:]
                         + [{"role": "assistant", "content": "".join(parts)}])
        return "".join(parts)


def _fresh_reply(model, session, messages, max_tokens=24):
    ids = session.prompt_ids(messages)
    steps = list(petit.stream_text(model, ids, max_tokens=max_tokens, stop_ids=session.chat_stop_ids))
    text = "".join(s.text for s in steps if s.finish_reason != "stop")
    return text, ids


def test_each_turn_answers_like_a_fresh_generation_and_prefills_only_the_tail(model):
    s = Session(model)
    chat = Chat(s)
    first = chat.say("what is 12 plus 7?")
    assert first == "19"
    assert chat.messages[-1] == {"role": "assistant", "content": "19"}
    first_prompt = s.prompt_ids(chat.messages[:1])
    assert chat.stats.prompt_tokens - chat.stats.reused_tokens == len(first_prompt)
    cached = list(s._cached)                  # the first prompt and the reply tokens fed back
    assert cached[:len(first_prompt)] == first_prompt and len(cached) > len(first_prompt)
    second = chat.say("which is bigger, 2 or 16?")
    expected, ids = _fresh_reply(model, s, chat.messages[:-1])
    assert second == expected == "16"
    # everything the cache held is reused: only the tokens after it are prefilled
    assert ids[:len(cached)] == cached
    assert chat.stats.prompt_tokens - chat.stats.reused_tokens == len(ids) - len(cached)


def test_the_callers_messages_are_never_changed(model):
    s = Session(model, n_ctx=96)
    messages = [{"role": "system", "content": "be brief"}] + [
        m for q in ("what is 12 plus 7?", "which is bigger, 2 or 16?", "what comes after C?", "count from 3 to 6",
                    "reverse the word apple", "what is 9 minus 4?")
        for m in (user(q), {"role": "assistant", "content": "x " * 8})] + [user("what colour is a banana?")]
    before = [dict(m) for m in messages]
    steps = list(s.reply(messages, Params(max_tokens=16, drop_old_turns=True)))
    assert steps[-1].stats.dropped_messages > 0 and messages == before


def test_logits_after_reuse_equal_a_full_prefill(model):
    s = Session(model, kv_type="f32")
    chat = Chat(s, Params(max_tokens=8))
    chat.say("count from 3 to 6")
    ids = s.prompt_ids(chat.messages + [user("what comes after C?")])
    keep = min(common_prefix(s._cached, ids), s.cache.pos)
    assert keep > 0
    full = model.logits(ids)
    for split in [keep] + list(range(1, len(ids))):     # and wherever another cache would have ended
        s.cache.rewind(min(split, keep))
        if split > keep:
            model.forward(ids[keep:split], s.cache)
        tail = model.forward(ids[split:], s.cache, all_logits=True)
        np.testing.assert_allclose(tail, full[split:], rtol=0, atol=1e-4, err_msg=f"split at {split}")


def test_a_template_error_is_raised_before_any_token(model):
    t = "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}" \
        "{% endif %}{{ m['content'] }}{% endfor %}"
    chat = Chat(Session(model, template=t), system="be brief")
    with pytest.raises(TemplateError, match="System role not supported"):
        chat.say("hi")
    assert chat.messages == [{"role": "system", "content": "be brief"}]


def test_a_model_without_template_cannot_chat_but_completes(tmp_path):
    import models
    models.write_model(tmp_path / "m.petit")
    s = Session(petit.load(tmp_path / "m.petit"))
    with pytest.raises(ValueError, match="no chat template"):
        list(s.reply([user("hi")]))
    assert len(list(s.complete("hello", Params(max_tokens=3)))) >= 1


def test_the_sampler_sees_the_whole_conversation_for_its_penalties(model):
    from petit.generation.sample import Sampler

    seen = []

    class Spy(Sampler):
        def __call__(self, logits, context_ids=None):
            seen.append(list(context_ids))
            return super().__call__(logits, context_ids)

    s = Session(model)
    chat = Chat(s, Params(sampler=Spy(temperature=0.0, repetition_penalty=1.3), max_tokens=8))
    chat.say("count from 3 to 6")
    chat.say("what comes after C?")
    ids = s.prompt_ids(chat.messages[:-1])
    # the first sample of the second turn sees every token of the re-rendered conversation, reused or new
    first_of_turn_two = [c for c in seen if len(c) == len(ids)]
    assert first_of_turn_two and first_of_turn_two[0] == ids
    for earlier, later in zip(seen, seen[1:]):       # within a turn, each sample adds the token just drawn
        if len(later) == len(earlier) + 1:
            assert later[:-1] == earlier


def test_stopping_a_reply_early_keeps_the_session_consistent(model):
    s = Session(model)
    messages = [user("count from 1 to 9")]
    steps = s.reply(messages, Params(max_tokens=24))
    stats = next(steps).stats                         # the caller stops after the first token (Ctrl-C, cancel)
    steps.close()
    assert stats.finish_reason == "cancelled" and stats.generated_tokens == 1
    prompt = s.prompt_ids(messages)
    assert s._cached == prompt and s.cache.pos == len(prompt)     # the drawn token was never fed back
    # the next turn answers exactly as a fresh generation over the same history would
    chat = Chat(s)
    chat.messages = messages + [{"role": "assistant", "content": ""}]
    reply = chat.say("what is 12 plus 7?")
    expected, _ = _fresh_reply(model, s, chat.messages[:-1])
    assert reply == expected


def test_turn_statistics(model):
    s = Session(model)
    chat = Chat(s)
    chat.say("what is 12 plus 7?")
    first = chat.stats
    assert (first.prompt_tokens, first.reused_tokens, first.finish_reason) == (14, 0, "stop")
    assert first.generated_tokens >= 2 and first.time_to_first_token > 0 and first.prefill_tokens_per_s > 0
    assert str(first).startswith(f"[14 prompt tokens (0 reused), {first.generated_tokens} generated; first token ")
    cached = len(s._cached)
    chat.say("which is bigger, 2 or 16?")
    assert chat.stats.reused_tokens == cached
    no_reuse = Chat(Session(model, reuse_cache=False))
    no_reuse.say("what is 12 plus 7?")
    no_reuse.say("which is bigger, 2 or 16?")
    assert no_reuse.stats.reused_tokens == 0 and no_reuse.messages == chat.messages


def test_cancel_from_another_thread_stops_within_one_token(model):
    import threading
    s = Session(model)
    got = []
    for step in s.reply([user("count from 1 to 9")], Params(max_tokens=24)):
        got.append(step)
        if len(got) == 2:
            t = threading.Thread(target=s.cancel)
            t.start()
            t.join()
    assert len(got) == 2 and got[-1].stats.finish_reason == "cancelled"
    assert len(s._cached) == s.cache.pos
    chat = Chat(s)
    chat.messages = [user("count from 1 to 9"), {"role": "assistant", "content": "".join(g.text for g in got)}]
    reply = chat.say("what is 12 plus 7?")          # the session goes on normally
    assert reply == _fresh_reply(model, s, chat.messages[:-1])[0]


def test_complete_continues_a_running_transcript_kept_by_the_caller(model):
    s = Session(model)
    tok = model.tokenizer
    transcript = tok.encode("<|im_start|>user\nwhat is 12 plus 7?<|im_end|>\n<|im_start|>assistant\n",
                            add_bos=tok.adds_bos)
    steps = list(s.complete(transcript, Params(max_tokens=6)))
    assert "".join(step.text for step in steps) == "19" and steps[-1].stats.finish_reason == "stop"
    transcript += [step.token for step in steps if step.token not in s.text_stop_ids]
    before = list(transcript)
    transcript += tok.encode("\n<|im_start|>user\nwhich is bigger, 2 or 16?<|im_end|>\n<|im_start|>assistant\n",
                             add_bos=False)
    steps = list(s.complete(transcript, Params(max_tokens=6)))
    assert "".join(step.text for step in steps) == "16"
    assert steps[-1].stats.reused_tokens == len(before)              # appended, never re-rendered
    transcript += [step.token for step in steps if step.token not in s.text_stop_ids]
    text = tok.decode(transcript)
    assert text.endswith("<|im_start|>assistant\n16")
    # the whole transcript continued in one go gives the same continuation
    ids = tok.encode(text[: -len("16")])
    assert [st.token for st in petit.generate_tokens(model, ids, max_tokens=1)] == transcript[len(ids):len(ids) + 1]
    # a text prompt gets a BOS exactly when the tokenizer adds one to plain text
    steps = list(s.complete("count from 1 to 3", Params(max_tokens=1)))
    assert steps[0].stats.prompt_tokens == len(tok.encode("count from 1 to 3", add_bos=tok.adds_bos))
    with pytest.raises(ValueError, match="nothing to continue: the text is empty"):
        list(s.complete("", Params()))


def test_builtin_formats_render_the_common_forms():
    from petit.chat.formats import NAMES, get_format
    from petit.chat.template import render_template
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "2+2?"}]
    st = {"bos_token": "<s>", "eos_token": "</s>"}
    expected = {
        "chatml": "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n",
        "llama3": "<s><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
        "llama2": "<s>[INST] Hi [/INST] Hello! </s><s>[INST] 2+2? [/INST]",
        "mistral": "<s>[INST] Hi [/INST]Hello!</s>[INST] 2+2? [/INST]",
        "zephyr": "<|user|>\nHi</s>\n<|assistant|>\nHello!</s>\n<|user|>\n2+2?</s>\n<|assistant|>\n",
        "gemma": "<s><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n<start_of_turn>user\n2+2?<end_of_turn>\n<start_of_turn>model\n",
        "phi3": "<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n<|user|>\n2+2?<|end|>\n<|assistant|>\n",
    }
    assert set(expected) | {"raw"} == set(NAMES)
    for name, text in expected.items():
        assert render_template(get_format(name), msgs, add_generation_prompt=True, **st) == text, name
    with pytest.raises(TemplateError, match="System role not supported"):
        render_template(get_format("gemma"), [{"role": "system", "content": "x"}], **st)
    with pytest.raises(ValueError, match="unknown chat format 'vicuna': choose one of chatml, llama3"):
        get_format("vicuna")


def test_stop_strings_end_the_reply_and_are_never_shown(model):
    from petit.generation.stop import StopStrings
    st = StopStrings(["<END>", "xyz"])
    assert st.push("hello <E") == ("hello ", False)       # "<E" might start "<END>": held back
    assert st.push("N") == ("", False)
    assert st.push("D> more") == ("", True)                # the stop string and what follows are dropped
    st = StopStrings(["xyz"])
    assert st.push("ax") == ("a", False) and st.push("b") == ("xb", False) and st.flush() == ""
    s = Session(model)
    steps = list(s.reply([user("count from 3 to 7")], Params(max_tokens=24, stop=[" 5"])))
    assert "".join(step.text for step in steps) == "3 4" and steps[-1].finish_reason == "stop"
    assert steps[-1].stats.finish_reason == "stop" and len(s._cached) == s.cache.pos


def test_a_full_context_drops_the_oldest_turns_only_when_asked(model):
    questions = ["what is 12 plus 7?", "which is bigger, 2 or 16?", "what comes after C?", "count from 3 to 6",
                 "reverse the word apple", "what is 9 minus 4?", "what colour is a banana?"]
    strict = Chat(Session(model, n_ctx=96), Params(max_tokens=16), system="be brief")
    with pytest.raises(ValueError, match=r"no longer fits the context \(96 tokens, 95 for the prompt at most\)"):
        for q in questions:
            strict.say(q)
    kept = list(strict.messages)
    with pytest.raises(ValueError):
        strict.say("hi")
    assert strict.messages == kept                      # a refused message changes nothing

    s = Session(model, n_ctx=96)
    chat = Chat(s, Params(max_tokens=16, drop_old_turns=True), system="be brief")
    dropped = 0
    for q in questions:
        chat.say(q)
        dropped += chat.stats.dropped_turns
    assert dropped > 0
    assert chat.messages[0] == {"role": "system", "content": "be brief"}
    assert [m["role"] for m in chat.messages[1:]] == ["user", "assistant"] * ((len(chat.messages) - 1) // 2)
    assert chat.messages[-2]["content"] == questions[-1] and len(chat.messages) < 1 + 2 * len(questions)
    assert len(s.prompt_ids(chat.messages[:-1])) < 96
    assert chat.messages[-1]["content"] == _fresh_reply(model, s, chat.messages[:-1], 16)[0]


@pytest.mark.parametrize("name", ["default-q8_0.petit", "default-q4_0.petit"])
def test_int8_kv_cache_is_a_quarter_of_the_memory_and_close_to_f32(name):
    # bound: over a two-turn conversation the int8 cache moves no logit by more than 5 % of the largest logit
    # (measured: 2.2 % for q8_0, 1.7 % for q4_0) and changes no argmax
    m = petit.load(os.path.join(os.path.dirname(ASSET), name))
    text = ("<|im_start|>user\ncount from 3 to 9<|im_end|>\n<|im_start|>assistant\n3 4 5 6 7 8 9<|im_end|>\n"
            "<|im_start|>user\nreverse the word apple<|im_end|>\n<|im_start|>assistant\n")
    ids = m.tokenizer.encode(text)
    f32 = m.forward(ids, m.new_cache(128, "f32"), all_logits=True)
    int8_cache = m.new_cache(128, "int8")
    int8 = m.forward(ids, int8_cache, all_logits=True)
    assert np.abs(int8 - f32).max() <= 0.05 * np.abs(f32).max()
    assert (int8.argmax(axis=1) == f32.argmax(axis=1)).all()
    assert int8_cache.nbytes <= 0.3 * m.new_cache(128, "f32").nbytes
    assert Session(m).cache.kv_type == "int8"            # the default for quantized weights


def test_partial_continues_a_cut_off_reply_as_if_it_had_never_stopped(model):
    messages = [user("count from 1 to 30")]
    params = Params(max_tokens=24)
    full = list(Session(model).reply(messages, params))
    whole = "".join(step.text for step in full)
    steps = Session(model).reply(messages, params)
    partial = "".join(next(steps).text for _ in range(4))
    steps.close()
    assert whole.startswith(partial) and len(partial) < len(whole)
    resumed = list(Session(model).reply(messages, params, partial=partial))   # e.g. after a restart
    more = "".join(step.text for step in resumed)
    assert full[-1].stats.finish_reason == resumed[-1].stats.finish_reason == "stop"
    assert partial + more == whole                    # greedy: the same reply, "1 2 3 ... 11"
    assert resumed[-1].stats.generated_tokens < full[-1].stats.generated_tokens
