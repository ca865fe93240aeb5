"""The status bar's figures: model, weights type, kernel path, tokens/s, time to first token, context used /
available, and the nearly-full warning before the context runs out."""
from petit.native import info as kernel_info

from app.status import context_text
from app_helpers import send_and_wait


def test_model_weights_and_kernel_path(window):
    s = window.status
    assert s.model_label.text() == "default-q8_0" and s.weights_label.text() == "q8_0 weights"
    i = kernel_info()
    assert s.kernel_label.text() == f"{i['isa']} kernels, {i['threads']} threads"


def test_speed_first_token_and_context_after_a_reply(qtbot, window):
    send_and_wait(qtbot, window, "what is 12 plus 7?")
    stats = window.chat.messages[-1].meta["stats"]
    s = window.status
    assert "tok/s" in s.speed_label.text() and "first token" in s.speed_label.text()
    assert f"first token {1000 * stats['time_to_first_token']:.0f} ms" in s.speed_label.text()
    used = stats["prompt_tokens"] + stats["generated_tokens"]
    assert s.context_label.text() == f"context {used} / 128" and not s.context_full


def test_the_context_is_measured_when_a_chat_is_opened(qtbot, make_window):
    first = make_window()
    send_and_wait(qtbot, first, "what is 12 plus 7?")
    first.close()
    second = make_window()
    qtbot.waitUntil(lambda: second.status.context_label.text().startswith("context "), timeout=5000)
    used = int(second.status.context_label.text().split()[1])
    assert 10 < used < 40


def test_nearly_full_is_shown_before_it_becomes_an_error(qtbot, window):
    window.settings_panel.set_value("n_ctx", 24)
    send_and_wait(qtbot, window, "count from 1 to 30")
    s = window.status
    assert s.context_full and "nearly full" in s.context_label.text()
    assert "new chat" in s.context_label.toolTip()
    assert context_text(100, 128) == ("context 100 / 128", False)
    assert context_text(110, 128) == ("context 110 / 128 — nearly full", True)


def test_a_message_that_no_longer_fits_is_refused_with_a_clear_error(qtbot, window):
    window.settings_panel.set_value("drop_old_turns", False)
    window.settings_panel.set_value("n_ctx", 16)
    send_and_wait(qtbot, window, "what is 12 plus 7? " * 3)
    error = window.page.view.error
    assert error.isVisibleTo(window.page.view) and "no longer fits the context" in error.text()
    assert "new chat" in error.text()
    assert window.chat.messages[-1].role == "user" and not window.chat.busy
