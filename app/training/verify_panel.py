"""The Verify tab: the verifier (trainer.verify) on a .petit file, on a worker: VERIFY PASS / FAIL, the worst and
mean errors, the argmax agreement, the checksums, why it failed, and a plot of the error at each position against
the PASS limit."""
import os

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QFileDialog, QFormLayout, QHBoxLayout, QLabel, QLineEdit, QPushButton, QSpinBox,
                               QVBoxLayout, QWidget)

from app.threads import Worker, WorkerSlot
from app.training import verification
from app.training.hub import shared_hub
from app.training.plot import LinePlot

PASS_STYLE = "font-size: 20pt; font-weight: bold; color: #1b7f3b;"
FAIL_STYLE = "font-size: 20pt; font-weight: bold; color: #b00020;"
ERROR_STYLE = "color: #b00020;"
DETAILS = (("weights", "Weights"), ("compared", "Compared"), ("worst", "Worst error"), ("mean", "Mean error"),
           ("argmax", "Argmax agreement"), ("rounded", "Rounded activations"), ("checksums", "Checksums"),
           ("generated", "Generated"), ("failures", "Failed"))


class VerifyPanel(QWidget):
    chat_with_model = Signal(str)

    def __init__(self, parent=None, hub=None):
        super().__init__(parent)
        self.hub = hub or shared_hub()
        self.result: dict | None = None
        self.file_dialog = None
        self._job = WorkerSlot()
        layout = QVBoxLayout(self)
        form = QFormLayout()
        row = QHBoxLayout()
        self.model_edit = QLineEdit(placeholderText="a .petit model file")
        self.model_edit.setAccessibleName("Model file to verify")
        self.model_edit.textChanged.connect(self._sync)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self.choose_model)
        row.addWidget(self.model_edit, 1)
        row.addWidget(browse)
        form.addRow("Model:", row)
        self.prompt_edit = QLineEdit(placeholderText="default: a short question for a chat model, else "
                                                     "\"Once upon a time\"")
        self.prompt_edit.setAccessibleName("Prompt")
        form.addRow("Prompt:", self.prompt_edit)
        self.tokens = QSpinBox(minimum=0, maximum=4096, value=16)
        self.tokens.setAccessibleName("Tokens to generate")
        self.tokens.setToolTip("Tokens the engine generates greedily after the prompt before the logits are compared")
        form.addRow("Generate:", self.tokens)
        layout.addLayout(form)
        row = QHBoxLayout()
        self.verify_button = QPushButton("Verify")
        self.verify_button.clicked.connect(self.verify)
        self.chat_button = QPushButton("Chat with this model")
        self.chat_button.clicked.connect(self._chat)
        self.status = QLabel("Compares the engine's logits at every position with an independent float64 "
                             "reference that reads the same file.")
        self.status.setWordWrap(True)
        row.addWidget(self.verify_button)
        row.addWidget(self.chat_button)
        row.addWidget(self.status, 1)
        layout.addLayout(row)
        self.verdict = QLabel()
        self.verdict.setObjectName("verdict")
        layout.addWidget(self.verdict)
        details = QFormLayout()
        self.details = {}
        for key, title in DETAILS:
            label = QLabel()
            label.setWordWrap(True)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.details[key] = label
            details.addRow(f"{title}:", label)
        layout.addLayout(details)
        self.plot = LinePlot("position", "|engine − reference| / logit scale", log_y=True,
                             empty_text="The error at each position appears here.")
        self.error_series = self.plot.add_series("worst error at the position", "#1f77b4", markers=True)
        layout.addWidget(self.plot, 1)
        self.hub.model_exported.connect(self._on_hub_model)
        if self.hub.model:
            self.set_model(self.hub.model)
        self._show(None)

    def set_model(self, path: str) -> None:
        self.model_edit.setText(path)

    def _on_hub_model(self, path: str) -> None:
        if not self._job.busy:
            self.set_model(path)

    def choose_model(self) -> None:
        start = os.path.dirname(self.model_edit.text()) or os.path.expanduser("~")
        dialog = QFileDialog(self, "Choose a model to verify", start, "Petit models (*.petit);;All files (*)")
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(self.set_model)
        dialog.open()
        self.file_dialog = dialog

    def verify(self) -> None:
        path = self.model_edit.text().strip()
        if self._job.busy or not path:
            return
        self._show(None)
        prompt = self.prompt_edit.text() or None
        job = Worker(verification.run, path, prompt, self.tokens.value(), name="petit-verify")
        job.progressed.connect(self.status.setText)
        job.succeeded.connect(self._on_verified)
        job.failed.connect(self._on_failed)
        self._job.start(job, then=self._sync)
        self._sync()

    def _on_verified(self, r: dict) -> None:
        self.status.setText(f"Verified {r['model']}.")
        self._show(r)

    def _on_failed(self, message: str) -> None:
        self.status.setText("The verifier could not run.")
        self.verdict.setStyleSheet(ERROR_STYLE)
        self.verdict.setText(message)

    def _show(self, r: dict | None) -> None:
        self.result = r
        self.plot.clear()
        for label in self.details.values():
            label.clear()
        if r is None:
            self.verdict.clear()
            self._sync()
            return
        self.verdict.setText("VERIFY PASS" if r["pass"] else "VERIFY FAIL")
        self.verdict.setStyleSheet(PASS_STYLE if r["pass"] else FAIL_STYLE)
        t, d = r["thresholds"], self.details
        d["weights"].setText(r["weights"])
        d["compared"].setText(f"{r['positions']} positions: {r['prompt_tokens']} of the prompt "
                              f"({r['prompt_source']}) and {r['generated_tokens']} generated greedily")
        if r["finite"]:
            d["worst"].setText(f"{r['max_abs_err']:.4g} at position {r['worst_position']}: {r['max_rel_err']:.3g} of "
                               f"the logit scale {r['logit_scale']:.4g} (PASS needs ≤ {t['max_rel_err']:g})")
            d["mean"].setText(f"{r['mean_abs_err']:.4g}: {r['mean_rel_err']:.3g} of the logit scale "
                              f"(PASS needs ≤ {t['mean_rel_err']:g})")
        else:
            d["worst"].setText("the logits are not all finite (NaN or infinity)")
        d["argmax"].setText(f"{r['argmax_matches']} of {r['positions']} positions pick the same top token "
                            f"({100 * r['argmax_agreement']:.1f} %; PASS needs ≥ {100 * t['argmax_agreement']:g} %)")
        if r.get("rounded_mean_rel_err") is not None:
            d["rounded"].setText(f"mean {r['rounded_mean_rel_err']:.3g} of the logit scale against the reference "
                                 f"with the engine's int8 rounding (PASS needs ≤ {t['rounded_mean_rel_err']:g})")
        else:
            d["rounded"].setText("not needed (no q8_0 / q4_0 matrices)")
        d["checksums"].setText({"ok": "every tensor matches the checksum recorded in the file",
                                "absent": "none recorded in the file (not checked)",
                                "mismatch": f"MISMATCH in {', '.join(r['bad_tensors'])}"}[r["checksums"]])
        answer, end = r.get("answer", r["generated_text"]), r.get("end_marker")
        d["generated"].setText(repr(answer) + (f", then {end} (the end of the model's turn)" if end else ""))
        d["failures"].setText("\n".join(r["failures"]) or "nothing")
        self.error_series.points = list(enumerate(r.get("position_errors") or []))
        self.plot.lines = [("PASS limit", t["max_rel_err"], "#b00020")]
        self.plot.update()
        self._sync()

    def _chat(self) -> None:
        path = self.model_edit.text().strip()
        if path:
            self.chat_with_model.emit(path)

    def _sync(self) -> None:
        busy = self._job.busy
        has = bool(self.model_edit.text().strip())
        self.verify_button.setEnabled(has and not busy)
        self.chat_button.setEnabled(has and not busy)

    def shutdown(self) -> None:
        self._job.shutdown()
