"""The settings panel's editors, one per setting, each with the same small interface: `widget`, `get()`,
`set(value)` and a `changed` callback. Values are the resolved settings' (None = "the default")."""
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFileDialog, QHBoxLayout, QLineEdit,
                               QPlainTextEdit, QPushButton, QSpinBox, QWidget)


class Field:
    def __init__(self, key: str, label: str, tip: str, widget):
        self.key, self.label, self.tip, self.widget = key, label, tip, widget
        widget.setToolTip(tip)
        widget.setAccessibleName(label)
        self.on_change = None              # set by the panel: called with (key, value)

    def _emit(self, *_args) -> None:
        if self.on_change is not None:
            self.on_change(self.key, self.get())

    def get(self):
        raise NotImplementedError

    def set(self, value) -> None:
        raise NotImplementedError


class NumberField(Field):
    def __init__(self, key, label, tip, low, high, step=None, decimals=None, special=None):
        box = QDoubleSpinBox() if decimals is not None else QSpinBox()
        if decimals is not None:
            box.setDecimals(decimals)
        box.setRange(low, high)
        if step is not None:
            box.setSingleStep(step)
        if special is not None:
            box.setSpecialValueText(special)        # shown at the minimum
        box.setKeyboardTracking(False)
        super().__init__(key, label, tip, box)
        self.decimals = decimals
        box.valueChanged.connect(self._emit)

    def get(self):
        value = self.widget.value()
        return round(float(value), self.decimals) if self.decimals is not None else int(value)

    def set(self, value) -> None:
        self.widget.setValue(self.widget.minimum() if value is None else value)

    def set_maximum(self, high) -> None:
        self.widget.setMaximum(high)


class SeedField(NumberField):
    """-1 (shown "random") means a fresh seed each reply."""

    def __init__(self):
        super().__init__("seed", "Seed", "The same seed and settings give the same reply; random = a fresh one",
                         -1, 2**31 - 1, special="random")

    def get(self):
        value = self.widget.value()
        return None if value < 0 else int(value)

    def set(self, value) -> None:
        self.widget.setValue(-1 if value is None else int(value))


class CheckField(Field):
    def __init__(self, key, label, tip):
        super().__init__(key, label, tip, QCheckBox(label))
        self.widget.toggled.connect(self._emit)

    def get(self):
        return self.widget.isChecked()

    def set(self, value) -> None:
        self.widget.setChecked(bool(value))


class ChoiceField(Field):
    """A list of (value, text); the value None stands for "the model's own / automatic"."""

    def __init__(self, key, label, tip, choices):
        super().__init__(key, label, tip, QComboBox())
        self.set_choices(choices)
        self.widget.currentIndexChanged.connect(self._emit)

    def set_choices(self, choices) -> None:
        blocked = self.widget.blockSignals(True)
        self.widget.clear()
        for value, text in choices:
            self.widget.addItem(text, value)
        self.widget.blockSignals(blocked)

    def get(self):
        return self.widget.currentData()

    def set(self, value) -> None:
        index = self.widget.findData(value)
        self.widget.setCurrentIndex(max(index, 0))


class TextField(Field):
    def __init__(self, key, label, tip, placeholder=""):
        super().__init__(key, label, tip, QPlainTextEdit())
        self.widget.setPlaceholderText(placeholder)
        self.widget.setMaximumHeight(self.widget.fontMetrics().lineSpacing() * 6)
        self.widget.textChanged.connect(self._emit)

    def get(self):
        return self.widget.toPlainText()

    def set(self, value) -> None:
        if self.widget.toPlainText() != (value or ""):
            self.widget.setPlainText(value or "")


class FileField(Field):
    """A file path (None: none), typed or picked with Browse. `pick(parent)` opens the file dialog and returns the
    chosen path ("" when cancelled); tests replace it, never opening a dialog."""

    FILTER = "Models (*.petit *.gguf *.safetensors);;All files (*)"

    def __init__(self, key, label, tip):
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        self.edit = QLineEdit()
        self.edit.setPlaceholderText("none")
        self.edit.setAccessibleName(label)
        self.browse = QPushButton("Browse…")
        self.browse.setAccessibleName(f"{label}: browse")
        row.addWidget(self.edit, 1)
        row.addWidget(self.browse)
        super().__init__(key, label, tip, box)
        self.edit.editingFinished.connect(self._emit)
        self.browse.clicked.connect(self._browse)

    def pick(self, parent) -> str:
        return QFileDialog.getOpenFileName(parent, "Draft model", "", self.FILTER)[0]

    def _browse(self) -> None:
        path = self.pick(self.widget)
        if path:
            self.edit.setText(path)
            self._emit()

    def get(self):
        return self.edit.text().strip() or None

    def set(self, value) -> None:
        if self.edit.text() != (value or ""):
            self.edit.setText(value or "")
