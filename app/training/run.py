"""One training run on a Worker thread (app.threads), driven through trainer.train's callbacks.

Pause blocks the worker between two steps (inside `should_stop`, which the trainer polls after every step); Cancel
ends the run there and the trainer saves a checkpoint before returning; a cancel while paused does the same. The
trainer writes every checkpoint atomically (periodically, at the end and on a stop), so a run that is stopped,
cancelled or killed keeps its latest checkpoint. Progress is sent at most every PROGRESS_S (and at every
validation and the last step), with every loss since the last report, so the plot misses none."""
import io
import os
import sys
import threading
import time
from dataclasses import dataclass

from PySide6.QtCore import QObject, QThread, Signal

from app.threads import Worker
from app.training import corpus as corpora
from trainer.train import Callbacks, TrainConfig, train

PROGRESS_S = 0.1
NICENESS = 10                        # of the training threads, on Linux


@dataclass
class RunSpec:
    config: TrainConfig
    corpus: corpora.Corpus
    checkpoint_dir: str
    resume: bool = False             # continue the checkpoint in checkpoint_dir


def _lower_priority() -> None:
    """Let the window's thread go first: training keeps every core busy (the trainer's step threads, created from
    this one, inherit its niceness on Linux). Elsewhere QThread's own priority is what there is."""
    if sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)
        except (OSError, AttributeError):
            pass


class TrainRun(QObject):
    """The run's state and signals (emitted on the worker, received queued on the GUI thread); its thread is
    `self.worker`, whose succeeded / failed / ended it passes on."""
    stage_changed = Signal(str)      # what the run is doing, for a person
    progressed = Signal(object)      # dict: see _flush
    paused = Signal(int)             # the step it is paused after
    checkpoint_saved = Signal(str)
    succeeded = Signal(object)       # dict: checkpoint, step, steps, interrupted, loss, val_loss, tokens_per_s
    failed = Signal(str)
    ended = Signal()                 # always last

    def __init__(self, spec: RunSpec, parent=None):
        super().__init__(parent)
        self.spec = spec
        self.worker = Worker(self._run, name="petit-training", parent=self)
        self.worker.succeeded.connect(self.succeeded)
        self.worker.failed.connect(self.failed)
        self.worker.ended.connect(self.ended)
        self._go = threading.Event()
        self._go.set()
        self._paused_s = 0.0
        self._start_step = None
        self._pending: list = []
        self._pending_val: list = []
        self._last_report = 0.0
        self._latest = (0, None, None)        # step, loss, validation loss
        self._rate = self._elapsed = 0.0

    # from the GUI thread
    def start(self, priority=QThread.Priority.InheritPriority) -> None:
        self.worker.start(priority)

    def pause(self) -> None:
        self._go.clear()

    def resume(self) -> None:
        self._go.set()

    def cancel(self) -> None:
        self.worker.cancel()
        self._go.set()

    def stop(self) -> None:
        """Cancel (the trainer saves a checkpoint) and join the thread."""
        self.cancel()
        self.worker.wait()

    @property
    def is_paused(self) -> bool:
        return not self._go.is_set()

    @property
    def cancelled(self) -> bool:
        return self.worker.cancelled

    # on the worker: ValueError (bad corpus or config, divergence), OSError (saving) are the worker's `failed`
    def _run(self, report) -> dict:
        _lower_priority()
        return self._train()

    def _train(self) -> dict:
        """Each phase says what it does as it starts: the corpus, the tokenizer, the first step, training."""
        spec, config = self.spec, self.spec.config
        say = self.stage_changed.emit
        say(f"Generating {spec.corpus.describe()}…" if spec.corpus.chat else f"Reading {spec.corpus.describe()}…")
        text, data_info = corpora.load(spec.corpus, config.seed)
        tokenizer = None
        if not spec.resume and not self.cancelled:          # (a resumed run uses its checkpoint's tokenizer)
            say(f"Learning the BPE tokenizer (vocabulary {config.vocab_size}) from the corpus…"
                if config.tokenizer == "bpe" else "Building the character tokenizer from the corpus…")
            tokenizer = corpora.learn_tokenizer(text, config, spec.corpus.chat)
        if self.cancelled:
            return {"checkpoint": None, "step": 0, "steps": config.steps, "interrupted": True, "loss": None,
                    "val_loss": None, "tokens_per_s": 0.0}
        say(("Loading the checkpoint, tokenizing" if spec.resume else "Tokenizing")
            + " the corpus and running the first step…")
        callbacks = Callbacks(on_progress=self._on_progress, should_stop=self._should_stop,
                              on_checkpoint=lambda path: self.checkpoint_saved.emit(str(path)))
        result = train(config, text, tokenizer=tokenizer, chat=spec.corpus.chat, out_dir=spec.checkpoint_dir,
                       resume=spec.checkpoint_dir if spec.resume else None, callbacks=callbacks, progress=False,
                       log=io.StringIO(), data_info=data_info)
        self._flush()
        return {"checkpoint": str(result.checkpoint) if result.checkpoint else None, "step": result.step,
                "steps": config.steps, "interrupted": result.interrupted,
                "loss": result.losses[-1] if result.losses else None,
                "val_loss": result.val_losses[-1][1] if result.val_losses else None, "tokens_per_s": self._rate}

    def _on_progress(self, step: int, loss: float, val_loss, tokens_per_s: float) -> None:
        config = self.spec.config
        if self._start_step is None:
            self._start_step = step - 1
            self.stage_changed.emit("Training…")
        # the trainer's speed counts paused time; take it out
        trainer_elapsed = (step - self._start_step) * config.batch_size * config.context / max(tokens_per_s, 1e-9)
        elapsed = max(trainer_elapsed - self._paused_s, 1e-9)
        self._elapsed = elapsed
        self._rate = (step - self._start_step) * config.batch_size * config.context / elapsed
        self._pending.append((step, loss))
        self._latest = (step, loss, val_loss)
        evaluated = step % config.eval_interval == 0 or step == config.steps
        if evaluated and val_loss is not None:
            self._pending_val.append((step, val_loss))
        if evaluated or time.monotonic() - self._last_report >= PROGRESS_S:
            self._flush()

    def _flush(self) -> None:
        if not self._pending and not self._pending_val:
            return
        self._last_report = time.monotonic()
        config = self.spec.config
        step, loss, val_loss = self._latest
        eta = (config.steps - step) * config.batch_size * config.context / self._rate if self._rate else None
        self.progressed.emit({"step": step, "steps": config.steps, "losses": self._pending,
                              "val_losses": self._pending_val, "loss": loss, "val_loss": val_loss,
                              "tokens_per_s": self._rate, "elapsed_s": self._elapsed, "eta_s": eta})
        self._pending, self._pending_val = [], []

    def _should_stop(self) -> bool:
        if not self._go.is_set() and not self.cancelled:
            self._flush()
            self.paused.emit(self._latest[0])
            t0 = time.perf_counter()
            self._go.wait()
            self._paused_s += time.perf_counter() - t0
        return self.cancelled
