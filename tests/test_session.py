"""ChatSession: the reply equals a fresh greedy generation over the re-rendered conversation, and only the new
tail is prefilled each turn (the KV cache is reused), with logits equal to a full re-prefill."""
import os

import numpy as np
import pytest

import petit
from petit.chat.template import TemplateError
from petit.session import ChatSession, common_prefix

ASSET = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets", "default-q8_0.petit")


@pytest.fixture(scope="module")
def model():
    return petit.load(ASSET)


def _fresh_reply(model, session, messages):
    ids = session.prompt_ids(messages)
    steps = list(petit.stream_text(model, ids, max_tokens=session.max_tokens, stop_ids=session.stop_ids))
    text = "".join(s.text for s in steps if s.finish_reason != "stop")
    return text, ids


def test_each_turn_answers_like_a_fresh_generation_and_prefills_only_the_tail(model):
    s = ChatSession(model, max_tokens=24)
    first = "".join(step.text for step in s.send("what is 12 plus 7?"))
    assert first == "19"
    assert s.messages[-1] == {"role": "assistant", "content": "19"}
    first_prompt = s.prompt_ids(s.messages[:1])
    assert s.last_prefill == len(first_prompt)
    cached = list(s._cached)                  # the first prompt and the reply tokens fed back
    assert cached[:len(first_prompt)] == first_prompt and len(cached) > len(first_prompt)
    second = "".join(step.text for step in s.send("which is bigger, 2 or 16?"))
    expected, ids = _fresh_reply(model, s, s.messages[:-1])
    assert second == expected == "16"
    # everything the cache held is reused: only the tokens after it are prefilled
    assert ids[:len(cached)] == cached
    assert s.last_prefill == len(ids) - len(cached)


def test_logits_after_reuse_equal_a_full_prefill(model):
    s = ChatSession(model, max_tokens=8, kv_type="f32")
    list(s.send("count from 3 to 6"))
    messages = s.messages + [{"role": "user", "content": "what comes after C?"}]
    ids = s.prompt_ids(messages)
    keep = min(common_prefix(s._cached, ids), s.cache.pos)
    assert keep > 0
    s.cache.rewind(keep)
    tail = model.forward(ids[keep:], s.cache, all_logits=True)
    np.testing.assert_allclose(tail, model.logits(ids)[keep:], rtol=0, atol=1e-4)


def test_a_template_error_leaves_the_conversation_unchanged(model):
    t = "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}" \
        "{% endif %}{{ m['content'] }}{% endfor %}"
    s = ChatSession(model, template=t, system="be brief")
    with pytest.raises(TemplateError, match="System role not supported"):
        list(s.send("hi"))
    assert s.messages == [{"role": "system", "content": "be brief"}]


def test_a_model_without_template_cannot_chat(tmp_path):
    import models
    models.write_model(tmp_path / "m.petit")
    with pytest.raises(ValueError, match="no chat template"):
        ChatSession(petit.load(tmp_path / "m.petit"))


def test_the_sampler_sees_the_whole_conversation_for_its_penalties(model):
    from petit.sample import Sampler

    seen = []

    class Spy(Sampler):
        def __call__(self, logits, context_ids=None):
            seen.append(list(context_ids))
            return super().__call__(logits, context_ids)

    s = ChatSession(model, sampler=Spy(temperature=0.0, repetition_penalty=1.3), max_tokens=8)
    list(s.send("count from 3 to 6"))
    list(s.send("what comes after C?"))
    ids = s.prompt_ids(s.messages[:-1])
    # the first sample of the second turn sees every token of the re-rendered conversation, reused or new
    first_of_turn_two = [c for c in seen if len(c) == len(ids)]
    assert first_of_turn_two and first_of_turn_two[0] == ids
    for earlier, later in zip(seen, seen[1:]):       # within a turn, each sample adds the token just drawn
        if len(later) == len(earlier) + 1:
            assert later[:-1] == earlier


def test_stopping_a_reply_early_keeps_the_session_consistent(model):
    s = ChatSession(model, max_tokens=24)
    steps = s.send("count from 1 to 9")
    next(steps)                                       # the caller stops after the first token (Ctrl-C, cancel)
    steps.close()
    assert s.stats.finish_reason == "cancelled" and s.stats.generated_tokens == 1
    assert [m["role"] for m in s.messages] == ["user", "assistant"]
    prompt = s.prompt_ids(s.messages[:1])
    assert s._cached == prompt and s.cache.pos == len(prompt)     # the drawn token was never fed back
    # the next turn answers exactly as a fresh generation over the same history would
    reply = "".join(step.text for step in s.send("what is 12 plus 7?"))
    expected, _ = _fresh_reply(model, s, s.messages[:-1])
    assert reply == expected


def test_turn_statistics(model):
    s = ChatSession(model, max_tokens=24)
    list(s.send("what is 12 plus 7?"))
    first = s.stats
    assert (first.prompt_tokens, first.reused_tokens, first.finish_reason) == (14, 0, "stop")
    assert first.generated_tokens >= 2 and first.time_to_first_token > 0 and first.prefill_tokens_per_s > 0
    cached = len(s._cached)
    list(s.send("which is bigger, 2 or 16?"))
    assert s.stats.reused_tokens == cached
    no_reuse = ChatSession(model, max_tokens=24, reuse_cache=False)
    list(no_reuse.send("what is 12 plus 7?"))
    list(no_reuse.send("which is bigger, 2 or 16?"))
    assert no_reuse.stats.reused_tokens == 0 and no_reuse.messages == s.messages


def test_cancel_from_another_thread_stops_within_one_token(model):
    import threading
    s = ChatSession(model, max_tokens=24)
    got = []
    for step in s.send("count from 1 to 9"):
        got.append(step)
        if len(got) == 2:
            t = threading.Thread(target=s.cancel)
            t.start()
            t.join()
    assert len(got) == 2 and s.stats.finish_reason == "cancelled"
    assert len(s._cached) == s.cache.pos
    reply = "".join(step.text for step in s.send("what is 12 plus 7?"))     # the session goes on normally
    assert reply == _fresh_reply(model, s, s.messages[:-1])[0]


def test_raw_mode_continues_one_running_transcript(model):
    from petit.session import RawSession
    raw = RawSession(model, max_tokens=6)
    first = "".join(step.text for step in raw.send("<|im_start|>user\nwhat is 12 plus 7?<|im_end|>\n<|im_start|>assistant\n"))
    assert first == "19" and raw.stats.finish_reason == "stop"
    before = list(raw.transcript_ids)
    second = "".join(step.text for step in raw.send("\n<|im_start|>user\nwhich is bigger, 2 or 16?<|im_end|>\n"
                                                    "<|im_start|>assistant\n"))
    assert second == "16"
    assert raw.transcript_ids[:len(before)] == before                 # appended, never re-rendered
    assert raw.stats.reused_tokens == len(before)
    assert raw.transcript.endswith("<|im_start|>assistant\n16")
    # the whole transcript continued in one go gives the same continuation
    ids = model.tokenizer.encode(raw.transcript[: -len("16")])
    assert [s.token for s in petit.generate_tokens(model, ids, max_tokens=1)] == raw.transcript_ids[len(ids):len(ids) + 1]


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
    from petit.stop import StopStrings
    st = StopStrings(["<END>", "xyz"])
    assert st.push("hello <E") == ("hello ", False)       # "<E" might start "<END>": held back
    assert st.push("N") == ("", False)
    assert st.push("D> more") == ("", True)                # the stop string and what follows are dropped
    st = StopStrings(["xyz"])
    assert st.push("ax") == ("a", False) and st.push("b") == ("xb", False) and st.flush() == ""
    s = ChatSession(model, max_tokens=24, stop_strings=[" 5"])
    steps = list(s.send("count from 3 to 7"))
    assert "".join(step.text for step in steps) == "3 4" and steps[-1].finish_reason == "stop"
    assert s.messages[-1]["content"] == "3 4" and len(s._cached) == s.cache.pos


def test_a_full_context_drops_the_oldest_turns_only_when_asked(model):
    questions = ["what is 12 plus 7?", "which is bigger, 2 or 16?", "what comes after C?", "count from 3 to 6",
                 "reverse the word apple", "what is 9 minus 4?", "what colour is a banana?"]
    strict = ChatSession(model, system="be brief", max_tokens=16, n_ctx=96)
    with pytest.raises(ValueError, match=r"no longer fits the context \(96 tokens, 95 for the prompt at most\)"):
        for q in questions:
            list(strict.send(q))
    kept = list(strict.messages)
    with pytest.raises(ValueError):
        list(strict.send("hi"))
    assert strict.messages == kept                      # a refused message changes nothing

    s = ChatSession(model, system="be brief", max_tokens=16, n_ctx=96, drop_old_turns=True)
    for q in questions:
        list(s.send(q))
    assert s.messages[0] == {"role": "system", "content": "be brief"}
    assert [m["role"] for m in s.messages[1:]] == ["user", "assistant"] * ((len(s.messages) - 1) // 2)
    assert s.messages[-2]["content"] == questions[-1] and len(s.messages) < 1 + 2 * len(questions)
    assert len(s.prompt_ids(s.messages[:-1])) < 96
    assert s.messages[-1]["content"] == _fresh_reply(model, s, s.messages[:-1])[0]


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
    assert ChatSession(m).cache.kv_type == "int8"            # the default for quantized weights


def test_resume_continues_a_cut_off_reply_as_if_it_had_never_stopped(model):
    full = ChatSession(model, max_tokens=24)
    whole = "".join(step.text for step in full.send("count from 1 to 30"))
    cut = ChatSession(model, max_tokens=24)
    steps = cut.send("count from 1 to 30")
    partial = "".join(next(steps).text for _ in range(4))
    steps.close()
    assert whole.startswith(partial) and len(partial) < len(whole)
    resumed = ChatSession(model, max_tokens=24)      # e.g. after a restart: the history is all it has
    resumed.messages = [{"role": "user", "content": "count from 1 to 30"}]
    more = "".join(step.text for step in resumed.resume(partial))
    assert full.stats.finish_reason == resumed.stats.finish_reason == "stop"
    assert partial + more == whole                    # greedy: the same reply, "1 2 3 ... 11"
    assert resumed.stats.generated_tokens < full.stats.generated_tokens
    assert resumed.messages[-1] == {"role": "assistant", "content": partial + more}
