"""Every decoder family of tests/fixtures/hf_more (issue 18's families: OLMo, GLM, Falcon, BLOOM, OPT, ...) and of
the transformers 5 groups (tests/fixtures/hf5_*: Gemma 3n, Qwen3.5-MoE, ...) opens in the app and streams a reply
like any other: the window shows the family's folder, the deltas make up the reply."""
import os
import sys

import pytest

from app_helpers import TIMEOUT_MS

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from models import FIXTURES, HF5_FOLDERS, case_folders  # noqa: E402

MORE = case_folders([FIXTURES / "hf_more"])
FOLDERS = {**MORE, **HF5_FOLDERS}
CASES = sorted(FOLDERS)


def test_the_fixture_folder_is_not_empty():
    assert len(MORE) >= 15


@pytest.mark.parametrize("case", CASES)
def test_a_folder_of_each_family_opens_and_streams_a_reply(qtbot, window, case):
    folder = str(FOLDERS[case])
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
