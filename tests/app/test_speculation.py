"""Speculative decoding and context shift in the app (issue 32): the setting (off / prompt lookup / a draft model picked from a file)
reaches the next reply, greedy replies are the ones without it, and the footer and the status bar show accepted /
drafted tokens and tokens per target step. The file dialog is never opened: its `pick` is replaced."""
from app.chat.message_widget import speculation_parts, stats_text
from app.settings.values import resolve_settings, session_options
from app_helpers import HF_FOLDER, Q4, TIMEOUT_MS, send_and_wait

QUESTION = "count from 1 to 9"


def test_the_options_carry_the_choice():
    values = resolve_settings({}, None)
    assert (values["speculation"], values["draft_model"]) == ("off", None)
    assert (session_options(values)["speculation"], session_options(values)["draft_model"]) == (None, None)
    values = resolve_settings({"speculation": "model", "draft_model": Q4}, None)
    assert (session_options(values)["speculation"], session_options(values)["draft_model"]) == ("model", Q4)


def test_footer_text_of_a_speculative_reply():
    stats = {"generated_tokens": 12, "target_passes": 5, "drafted_tokens": 10, "accepted_tokens": 7,
             "finish_reason": "stop"}
    assert speculation_parts(stats) == ["accepted 7/10 drafted", "2.40 tokens/step"]
    assert stats_text({"stats": stats}) == "12 tokens · accepted 7/10 drafted · 2.40 tokens/step"
    assert speculation_parts({"generated_tokens": 3, "target_passes": 0}) == []


def test_lookup_then_a_picked_draft_model_answer_as_without(qtbot, make_window):
    plain_window = make_window()
    plain = [send_and_wait(qtbot, plain_window, QUESTION) for _ in range(4)]
    plain_window.close()
    window = make_window()
    panel = window.settings_panel
    f = panel.fields
    got = [send_and_wait(qtbot, window, QUESTION)]                 # off
    assert not window.chat.messages[-1].meta["stats"]["target_passes"]
    assert not f["draft_model"].widget.isEnabled()              # only for "draft model"

    f["speculation"].set("lookup")
    assert panel.values()["speculation"] == "lookup" and panel.labels["speculation"].font().bold()
    got.append(send_and_wait(qtbot, window, QUESTION))
    stats = window.chat.messages[-1].meta["stats"]
    assert stats["target_passes"] > 0 and stats["drafted_tokens"] > 0
    footer = window.page.view.widgets[-1].footer.text()
    assert f"accepted {stats['accepted_tokens']}/{stats['drafted_tokens']} drafted" in footer
    per_step = f"{stats['generated_tokens'] / stats['target_passes']:.2f} tokens/step"
    assert per_step in footer and per_step in window.status.speed_label.text()

    f["speculation"].set("model")
    assert f["draft_model"].widget.isEnabled()
    f["draft_model"].pick = lambda parent: Q4                   # what the dialog would return
    f["draft_model"].browse.click()
    assert panel.values()["draft_model"] == Q4
    got.append(send_and_wait(qtbot, window, QUESTION))
    stats = window.chat.messages[-1].meta["stats"]
    assert stats["target_passes"] > 0 and 0 < stats["accepted_tokens"] <= stats["drafted_tokens"]
    assert window.generation.worker._draft.weight_type == "q4_0"

    f["speculation"].set("off")
    assert "speculation" not in panel.overrides                 # back to the default
    got.append(send_and_wait(qtbot, window, QUESTION))
    assert not window.chat.messages[-1].meta["stats"]["target_passes"]
    assert window.generation.worker._draft is None              # the draft model was closed
    assert got == plain


def test_a_draft_model_of_another_vocabulary_is_said(qtbot, window):
    panel = window.settings_panel
    panel.set_value("speculation", "model")
    panel.set_value("draft_model", HF_FOLDER)
    window.chat.send(QUESTION)
    qtbot.waitUntil(lambda: not window.chat.busy, timeout=TIMEOUT_MS)
    assert "The model could not answer: the draft model's vocabulary" in window.page.view.error.text()
    panel.set_value("draft_model", None)
    window.chat.send(QUESTION)
    qtbot.waitUntil(lambda: not window.chat.busy, timeout=TIMEOUT_MS)
    assert "choose the draft model's file in Settings" in window.page.view.error.text()


def test_forgetting_old_turns_shifts_the_cache(qtbot, window):
    """"Forget old turns when full" (on by default) moves the kept turns inside the KV cache: a turn after the
    context fills prefills only its own message."""
    assert window.settings_panel.options()["ctx_shift"] is True
    for q in ("what is 12 plus 7?", "which is bigger, 2 or 16?", "what comes after C?", "count from 3 to 6",
              "reverse the word apple", "what is 9 minus 4?", "what colour is a banana?", "count from 1 to 9"):
        send_and_wait(qtbot, window, q)
    stats = [m.meta["stats"] for m in window.chat.messages if m.role == "assistant"]
    shifted = [s for s in stats if s["dropped_messages"]]
    assert shifted and all(s["shifted_tokens"] > 0 and s["shift_refused"] is None for s in shifted)
    assert all(s["prompt_tokens"] - s["reused_tokens"] < 20 for s in shifted)


def test_keep_first_tokens_keeps_the_first_turn_when_old_turns_are_forgotten(qtbot, window):
    """"Keep first tokens" (n_keep, off by default): the turns that start within the conversation's first N tokens
    are never forgotten; the ones after them go first, and the kept turns still shift inside the cache."""
    panel = window.settings_panel
    assert panel.options()["n_keep"] == 0
    panel.fields["n_keep"].set(4)
    assert panel.values()["n_keep"] == 4 and panel.labels["n_keep"].font().bold()
    assert panel.options()["n_keep"] == 4
    for q in ("what is 12 plus 7?", "which is bigger, 2 or 16?", "what comes after C?", "count from 3 to 6",
              "reverse the word apple", "what is 9 minus 4?", "what colour is a banana?", "count from 1 to 9"):
        send_and_wait(qtbot, window, q)
    stats = [m.meta["stats"] for m in window.chat.messages if m.role == "assistant"]
    shifted = [s for s in stats if s["dropped_messages"]]
    assert shifted, "the context never filled"
    # the first turn (the user's question and its answer: messages 0 and 1) starts at token 0 < 4: kept
    assert all(s["dropped_at"] == 2 for s in shifted)
    assert all(s["shifted_tokens"] > 0 and s["shift_refused"] is None for s in shifted)
