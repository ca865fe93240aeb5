"""The settings panel: values resolved from the model's generation defaults, edits reaching the next reply, saved
per model across a restart, and reset to the model's defaults."""
from app.models.info import ModelInfo
from app.settings.values import resolve_settings, session_options
from app_helpers import Q4, TIMEOUT_MS, send_and_wait


def _info(**generation):
    return ModelInfo(path="/m.petit", name="m", weight_type="q8_0", n_params=1, n_layers=1, max_context=64,
                     generation=generation)


def test_values_resolve_user_then_model_then_fallback():
    values = resolve_settings({}, _info(temperature=0.7, top_k=40))
    assert (values["temperature"], values["top_k"], values["top_p"], values["n_ctx"]) == (0.7, 40, 1.0, 64)
    assert resolve_settings({}, _info(do_sample=False))["temperature"] == 0.0
    assert resolve_settings({"temperature": 1.2, "n_ctx": 999}, _info(temperature=0.7))["temperature"] == 1.2
    assert resolve_settings({"n_ctx": 999}, _info())["n_ctx"] == 64          # never past the model's context
    assert resolve_settings({}, _info())["temperature"] == 0.8              # petit's fallback
    no_template = _info()
    no_template.has_template = False
    options = session_options(resolve_settings({}, no_template))
    assert "<|im_start|>" in options["template"]                            # ChatML, with a warning shown


def test_the_panel_shows_the_model_defaults(window):
    panel = window.settings_panel
    f = panel.fields
    assert f["greedy"].get() is True and not f["temperature"].widget.isEnabled()   # the model says greedy
    assert f["n_ctx"].get() == 128 and f["max_tokens"].get() == 256 and f["seed"].get() is None
    assert f["weights"].widget.currentText() == "as stored (q8_0)"
    assert "greedy" in panel.defaults_label.text() and "context 128" in panel.defaults_label.text()
    assert not panel.warning.isVisibleTo(panel)


def test_edits_reach_the_next_reply(qtbot, window):
    f = window.settings_panel.fields
    f["max_tokens"].widget.setValue(1)
    assert window.settings_panel.labels["max_tokens"].font().bold()       # changed from the model's default
    send_and_wait(qtbot, window, "count from 1 to 30")
    stats = window.chat.messages[-1].meta["stats"]
    assert stats["generated_tokens"] == 1 and stats["finish_reason"] == "length"
    assert "cut at the token limit" in window.page.view.widgets[-1].footer.text()
    f["greedy"].widget.setChecked(False)
    assert f["temperature"].get() == 0.8 and f["temperature"].widget.isEnabled()
    f["seed"].widget.setValue(7)
    assert window.settings_panel.options()["sampler"] == {
        "temperature": 0.8, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.0,
        "frequency_penalty": 0.0, "presence_penalty": 0.0, "seed": 7}


def test_settings_persist_per_model_across_a_restart(qtbot, make_window):
    first = make_window()
    f = first.settings_panel.fields
    f["greedy"].widget.setChecked(False)
    f["temperature"].widget.setValue(1.25)
    f["top_k"].widget.setValue(12)
    f["system"].widget.setPlainText("Answer briefly.")
    f["format"].set("chatml")
    f["n_ctx"].widget.setValue(96)
    f["kv_type"].set("f32")
    before = first.settings_panel.values()
    first.close()                                        # saves what the debounce timer had not yet saved
    second = make_window()
    assert second.settings_panel.values() == before
    g = second.settings_panel.fields
    assert (g["temperature"].get(), g["top_k"].get(), g["system"].get()) == (1.25, 12, "Answer briefly.")
    assert g["format"].get() == "chatml" and g["kv_type"].get() == "f32" and g["n_ctx"].get() == 96
    # another model has its own settings
    second.open_model(Q4)
    qtbot.waitUntil(lambda: second.models.info.path == Q4 and not second.models.loading, timeout=TIMEOUT_MS)
    assert second.settings_panel.fields["greedy"].get() is True and g["system"].get() == ""


def test_reset_to_the_model_defaults(qtbot, window):
    panel = window.settings_panel
    panel.set_value("temperature", 1.5)
    panel.set_value("max_tokens", 5)
    panel.reset_button.click()
    assert panel.overrides == {}
    assert panel.fields["greedy"].get() is True and panel.fields["max_tokens"].get() == 256
    assert panel.store.get(window.models.info.path) == {}


def test_context_size_and_system_prompt_reach_the_session(qtbot, window):
    panel = window.settings_panel
    panel.set_value("n_ctx", 64)
    panel.set_value("system", "You are a calculator.")
    panel.set_value("kv_type", "f32")
    assert send_and_wait(qtbot, window, "what is 12 plus 7?") == "19"
    session = window.generation.worker.session
    assert session.cache.n_ctx == 64 and session.cache.kv_type == "f32"
    # the conversation the worker passed began with the system prompt: the KV cache holds it, rendered
    prompt = session.prompt_ids([{"role": "system", "content": "You are a calculator."},
                                 {"role": "user", "content": "what is 12 plus 7?"}])
    assert session._cached[:len(prompt)] == prompt
    assert window.status.context_label.text().endswith("/ 64")


def test_changing_the_weights_type_reloads_the_model(qtbot, window):
    window.settings_panel.fields["weights"].set("f32")
    qtbot.waitUntil(lambda: window.models.info.weight_type == "f32" and not window.models.loading,
                    timeout=TIMEOUT_MS)
    assert window.status.weights_label.text() == "f32 weights"
    assert send_and_wait(qtbot, window, "what is 12 plus 7?") == "19"


def _stored_settings(data_dir) -> dict:
    """The model_settings table as another process would read it (a separate connection)."""
    import json
    import sqlite3
    conn = sqlite3.connect(str(data_dir / "petit.sqlite3"))
    try:
        return {model: json.loads(value) for model, value in conn.execute("SELECT model, value FROM model_settings")}
    finally:
        conn.close()


def test_settings_are_saved_once_the_debounce_ends(qtbot, make_window, data_dir):
    first = make_window()
    f = first.settings_panel.fields
    f["greedy"].widget.setChecked(False)
    f["temperature"].widget.setValue(1.3)
    path = first.models.info.path
    # after the debounce the row is in the database: a crash from here on loses nothing
    qtbot.waitUntil(lambda: _stored_settings(data_dir).get(path) == {"temperature": 1.3}, timeout=TIMEOUT_MS)
    first.menu_actions["quit"].trigger()                  # File > Quit, well after the timer fired
    assert _stored_settings(data_dir) == {path: {"temperature": 1.3}}
    second = make_window()
    assert second.settings_panel.fields["greedy"].get() is False
    assert second.settings_panel.fields["temperature"].get() == 1.3
