"""A mixture-of-experts model (tests/fixtures/hf_moe) opens in the app and streams a reply like any other."""
import os

import pytest

from app_helpers import TIMEOUT_MS

MOE_FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "hf_moe")
CASES = ["qwen3_moe", "qwen2_moe", "olmoe", "mixtral", "granitemoe", "granitemoeshared", "gpt_oss",
         "gpt_oss_mxfp4", "llama4_text",
         "deepseek_v2", "deepseek_v3", "glm4_moe", "ernie4_5_moe", "hunyuan_v1_moe", "dbrx"]
MORE = {"glm4_moe", "ernie4_5_moe", "hunyuan_v1_moe", "dbrx"}     # tests/fixtures/hf_moe_more


@pytest.mark.parametrize("case", CASES)
def test_a_moe_folder_opens_and_streams_a_reply(qtbot, window, case):
    folder = os.path.join(MOE_FIXTURES + ("_more" if case in MORE else ""), case)
    window.open_model(folder)
    qtbot.waitUntil(lambda: window.models.info.path == folder and not window.models.loading, timeout=TIMEOUT_MS)
    assert window.error_dialog is None and window.status.model_label.text() == case
    window.settings_panel.set_value("temperature", 0.0)
    window.settings_panel.set_value("max_tokens", 6)
    deltas = []
    window.generation.tokens_decoded.connect(deltas.append)
    with qtbot.waitSignal(window.chat.turn_finished, timeout=TIMEOUT_MS) as finished:
        window.chat.send("hello")
    reply = window.chat.messages[-1]
    assert reply.role == "assistant" and reply.content == "".join(deltas)     # random weights: any text, streamed
    assert finished.args[0]["finish_reason"] in ("length", "stop")
    assert deltas or finished.args[0]["finish_reason"] == "stop"
    assert not window.page.view.error.isVisibleTo(window.page.view)
