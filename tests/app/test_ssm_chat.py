"""A state-space model (tests/fixtures/hf_ssm) opens in the app, streams a reply, and its second turn prefills only
what is new: its recurrent state goes back to the snapshot the session took at the end of the first prompt (before
its last token)."""
import os

import pytest

from app_helpers import TIMEOUT_MS

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
HYBRIDS = ("qwen3_next", "qwen3_next_dense", "qwen3_5_text", "nemotron_h")      # tests/fixtures/hf_hybrid


@pytest.mark.parametrize("case", ["mamba", "falcon_mamba", "mamba2", "lfm2", "granitemoehybrid", "jamba",
                                  "falcon_h1", *HYBRIDS])
def test_a_state_space_model_streams_and_reuses_its_state_on_the_next_turn(qtbot, window, case):
    folder = os.path.join(FIXTURES, "hf_hybrid" if case in HYBRIDS else "hf_ssm", case)
    window.open_model(folder)
    qtbot.waitUntil(lambda: window.models.info.path == folder and not window.models.loading, timeout=TIMEOUT_MS)
    assert window.error_dialog is None and window.status.model_label.text() == case
    window.settings_panel.set_value("temperature", 0.0)
    window.settings_panel.set_value("max_tokens", 6)
    deltas = []
    window.generation.tokens_decoded.connect(deltas.append)
    stats = []
    for text in ("hello", "and again"):
        deltas.clear()
        with qtbot.waitSignal(window.chat.turn_finished, timeout=TIMEOUT_MS) as finished:
            window.chat.send(text)
        reply = window.chat.messages[-1]
        assert reply.role == "assistant" and reply.content == "".join(deltas)
        stats.append(finished.args[0])
    assert stats[0]["reused_tokens"] == 0
    # the second prompt holds the first: all of it but its last token (where the session snapshots the state, so that
    # the same prompt again can run that token) comes back from the snapshot, not a new prefill
    assert stats[1]["reused_tokens"] >= stats[0]["prompt_tokens"] - 1 > 0
    assert not window.page.view.error.isVisibleTo(window.page.view)
