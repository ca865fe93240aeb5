"""The settings side panel: sampling, reply length, system prompt, chat format, context, KV-cache and weights
types, and the device its products run on, for the loaded model. It shows the resolved values (the user's choice,
else the model's generation defaults), labels in bold the ones the user changed, and saves them per model."""
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (QComboBox, QFormLayout, QFrame, QLabel, QPushButton, QScrollArea, QVBoxLayout,
                               QWidget)

from app.models.devices import device_choices
from app.settings.fields import CheckField, ChoiceField, FileField, NumberField, SeedField, TextField
from app.settings.values import (FALLBACK, FORMAT_NAMES, KV_TYPES, RELOADS, SAMPLING_KEYS, SPECULATION,
                                 WEIGHT_TYPES, clean, model_defaults, resolve_settings, session_options)

SAVE_DELAY_MS = 400
DEVICE_TIP = ("Where the matrix products run: the CPU, or an OpenCL device (a GPU) for the q8_0, q4_0, Q4_K, Q5_K "
              "and Q6_K matrices, the rest staying on the CPU (reloads the model). A device that fails its start-up "
              "check is not used, and the model says why")


def _fields():
    return [
        CheckField("greedy", "Greedy (always the likeliest token)", "The same as temperature 0"),
        NumberField("temperature", "Temperature", "Higher is more random; 0 is greedy", 0.0, 2.0, 0.05, 2),
        NumberField("top_k", "Top-k", "Keep only the k likeliest tokens (off = all)", 0, 1000, special="off"),
        NumberField("top_p", "Top-p", "Keep the likeliest tokens holding this much probability (1 = off)",
                    0.01, 1.0, 0.05, 2),
        NumberField("min_p", "Min-p", "Drop tokens below min-p × the top probability (off = 0)", 0.0, 1.0, 0.01, 2,
                    special="off"),
        NumberField("repetition_penalty", "Repetition penalty", "Discourage repeating earlier tokens (1 = off)",
                    0.5, 2.0, 0.05, 2),
        NumberField("frequency_penalty", "Frequency penalty", "Penalise tokens by how often they occurred (0 = off)",
                    -2.0, 2.0, 0.1, 2),
        NumberField("presence_penalty", "Presence penalty", "Penalise tokens that occurred at all (0 = off)",
                    -2.0, 2.0, 0.1, 2),
        SeedField(),
        NumberField("max_tokens", "Max tokens", "The longest reply, in tokens", 1, 32768),
        TextField("system", "System prompt", "Sent before the conversation", "None"),
        ChoiceField("format", "Chat format", "How messages are laid out for the model", []),
        NumberField("n_ctx", "Context size", "Tokens the model sees at once (the conversation must fit)", 16, 16),
        CheckField("drop_old_turns", "Forget old turns when full",
                   "When the conversation outgrows the context, forget its oldest turns (never the system "
                   "prompt; the kept turns move inside the KV cache, so only the new message is read, where the "
                   "model allows it exactly); otherwise a message that does not fit is refused"),
        NumberField("n_keep", "Keep first tokens",
                    "When old turns are forgotten, keep every turn that starts within the conversation's first this "
                    "many tokens too (the attention sinks; off = only the system prompt)", 0, 32768, special="off"),
        ChoiceField("kv_type", "KV cache", "int8 takes about a quarter of the memory of f32",
                    [(None, "automatic")] + [(k, k) for k in KV_TYPES]),
        ChoiceField("weights", "Weights", "Convert the weights when loading (reloads the model)", []),
        ChoiceField("device", "Device", DEVICE_TIP, []),
        ChoiceField("speculation", "Speculative decoding",
                    "Draft several tokens and check them in one pass: prompt lookup drafts from the conversation, "
                    "a draft model (a small model with the same vocabulary) predicts them. Greedy replies stay "
                    "the same, sampled ones keep their distribution", list(SPECULATION)),
        FileField("draft_model", "Draft model", "The model that drafts (the same vocabulary as this one), e.g. "
                                                "a q4_0 copy of it"),
    ]


class SettingsPanel(QScrollArea):
    changed = Signal(str)                 # the key changed ("" after a reset)
    reload_requested = Signal()           # the weights type or device changed: the model must be loaded again

    def __init__(self, store, parent=None):
        super().__init__(parent)
        self.store = store
        self.info = None
        self.overrides: dict = {}
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        inner = QWidget()
        layout = QVBoxLayout(inner)
        title = QLabel("<b>Settings</b>")
        layout.addWidget(title)
        app_form = QFormLayout()
        self.theme_combo = QComboBox()           # the app's, not the model's (app.theme fills and follows it)
        self.theme_combo.setAccessibleName("Theme")
        self.theme_combo.setToolTip("Light or dark, or as the operating system says (for every model)")
        app_form.addRow("Theme", self.theme_combo)
        layout.addLayout(app_form)
        self.defaults_label = QLabel()
        self.defaults_label.setWordWrap(True)
        self.defaults_label.setEnabled(False)
        layout.addWidget(self.defaults_label)
        self.warning = QLabel()
        self.warning.setWordWrap(True)
        self.warning.setStyleSheet("color: #8a4b00;")
        self.warning.hide()
        layout.addWidget(self.warning)
        form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.fields = {f.key: f for f in _fields()}
        self.labels = {}
        for f in self.fields.values():
            f.on_change = self._on_field
            if isinstance(f, CheckField):
                form.addRow(f.widget)
            else:
                self.labels[f.key] = QLabel(f.label)
                self.labels[f.key].setBuddy(f.widget)
                form.addRow(self.labels[f.key], f.widget)
        layout.addLayout(form)
        self.reset_button = QPushButton("Reset to the model's defaults")
        self.reset_button.clicked.connect(self.reset)
        layout.addWidget(self.reset_button)
        layout.addStretch(1)
        self.setWidget(inner)
        self._save_timer = QTimer(self)
        self._save_timer.setSingleShot(True)
        self._save_timer.setInterval(SAVE_DELAY_MS)
        self._save_timer.timeout.connect(self.flush)
        self._unsaved = False                 # edits not yet written (the timer may already have fired)
        self._showing = False
        self.setEnabled(False)

    # the model
    def set_model(self, info) -> None:
        """Show (and from now on edit) the settings of the model `info` describes."""
        self.flush()
        self.info = info
        self.overrides = self.store.get(info.path)
        self.fields["n_ctx"].set_maximum(max(info.max_context, 16))
        self.fields["weights"].set_choices([(None, f"as stored ({info.weight_type})")]
                                           + [(w, w) for w in WEIGHT_TYPES])
        choices, why = device_choices()
        self.fields["device"].set_choices(choices)
        self.fields["device"].widget.setEnabled(len(choices) > 1)
        self.fields["device"].widget.setToolTip(DEVICE_TIP + (f". None here: {why}" if why else ""))
        own = "the model's template" if info.has_template else "ChatML (the model has no template)"
        self.fields["format"].set_choices([(None, own)] + [(n, n) for n in FORMAT_NAMES])
        self.defaults_label.setText("Model defaults: " + _describe(model_defaults(info)))
        self.setEnabled(True)
        self._show()

    def values(self) -> dict:
        """Every setting's resolved value."""
        return resolve_settings(self.overrides, self.info)

    def options(self) -> dict:
        """What the generation worker needs (app.settings.values.session_options)."""
        return session_options(self.values())

    # editing
    def set_value(self, key: str, value) -> None:
        """Set one setting (None = back to the model's default), save it and tell the listeners."""
        if key == "greedy":
            key, value = "temperature", 0.0 if value else self._warm_temperature()
        if key == "format" and self.info is not None and not self.info.has_template and value == "chatml":
            value = None
        if key == "n_ctx" and self.info is not None and value == model_defaults(self.info)["n_ctx"]:
            value = None
        if key == "speculation" and value == "off":
            value = None
        before = [self.overrides.get(k) for k in RELOADS]
        self.overrides[key] = value
        self.overrides = clean(self.overrides)
        self._unsaved = True
        self._save_timer.start()
        self._show()
        self.changed.emit(key)
        if [self.overrides.get(k) for k in RELOADS] != before:
            self.flush(force=True)          # the loader reads the weights type and device from the store
            self.reload_requested.emit()

    def reset(self) -> None:
        reloads = any(self.overrides.get(k) is not None for k in RELOADS)
        self.overrides = {}
        self.flush(force=True)
        self._show()
        self.changed.emit("")
        if reloads:
            self.reload_requested.emit()

    def flush(self, force: bool = False) -> None:
        """Save what is unsaved (the timer's timeout, Quit, another model); force: save in any case."""
        self._save_timer.stop()
        if (force or self._unsaved) and self.info is not None:
            self.store.set(self.info.path, self.overrides)
            self._unsaved = False

    def _warm_temperature(self) -> float:
        default = model_defaults(self.info).get("temperature") if self.info else 0.0
        return default if default else FALLBACK["temperature"]

    def _on_field(self, key: str, value) -> None:
        if not self._showing:
            self.set_value(key, value)

    def _show(self) -> None:
        values = self.values()
        self._showing = True
        try:
            for key, f in self.fields.items():
                f.set(values["temperature"] == 0 if key == "greedy" else values.get(key))
        finally:
            self._showing = False
        greedy = values["temperature"] == 0
        for key in ("temperature", "top_k", "top_p", "min_p"):
            self.fields[key].widget.setEnabled(not greedy)
        self.fields["draft_model"].widget.setEnabled(values["speculation"] == "model")
        for key, label in self.labels.items():
            font = label.font()
            font.setBold(key in self.overrides)
            label.setFont(font)
        no_template = self.info is not None and not self.info.has_template and values["format"] == "chatml"
        self.warning.setText("This model ships no chat template: ChatML is used, which may not be the layout it "
                             "was trained on. Pick its format above if you know it.")
        self.warning.setVisible(no_template)


def _describe(values: dict) -> str:
    parts = ["greedy" if values["temperature"] == 0 else f"temperature {values['temperature']:g}"]
    if values["top_k"]:
        parts.append(f"top-k {values['top_k']}")
    if values["top_p"] < 1:
        parts.append(f"top-p {values['top_p']:g}")
    if values["min_p"]:
        parts.append(f"min-p {values['min_p']:g}")
    for key in SAMPLING_KEYS[4:]:
        if values[key] != FALLBACK[key]:
            parts.append(f"{key.replace('_', ' ')} {values[key]:g}")
    parts.append(f"context {values['n_ctx']}")
    return ", ".join(parts)
