"""The training loop: TrainConfig, train(), progress reporting, checkpoints and clean Ctrl+C handling."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from trainer import chat_corpus
from trainer.bpe import train_tokenizer
from trainer.checkpoint import load_checkpoint, save_checkpoint
from trainer.data import batch_rng, check_ids, encode_chat, encode_text, eval_batches, get_batch, split_train_val
from trainer.model import check_params, count_params, init_params, loss_only, make_config
from trainer.optim import AdamW, clip_grad_norm, get_lr
from trainer.parallel import StepRunner


@dataclass
class TrainConfig:
    """Everything that defines a training run. Same config + same data + same seed -> same losses."""
    # --- tokenizer (trained on the corpus when train() gets text and no tokenizer)
    tokenizer: str = "bpe"  # "bpe" (byte-level BPE, 256 byte tokens + merges) or "char" (one per character)
    vocab_size: int = 512  # total vocab incl. special tokens for bpe; ignored for char (the corpus decides)
    # --- model (saved with Hugging Face llama names)
    n_layers: int = 4  # num_hidden_layers
    dim: int = 128  # hidden_size; head_dim = dim // n_heads
    n_heads: int = 4  # num_attention_heads
    n_kv_heads: int = 2  # num_key_value_heads (grouped-query attention); must divide n_heads
    ffn_dim: int = 384  # intermediate_size of the SwiGLU MLP (3 x dim)
    context: int = 128  # training window length, saved as max_position_embeddings
    tie_embeddings: bool = True  # lm_head shares the embedding matrix (saves V x dim params)
    rope_theta: float = 10000.0  # RoPE base
    rms_norm_eps: float = 1e-5  # RMSNorm epsilon
    # --- optimisation
    steps: int = 2000  # optimizer steps in total (a resumed run continues up to this)
    batch_size: int = 16  # windows per step; tokens per step = batch_size * context
    lr: float = 3e-3  # peak learning rate (tiny models tolerate a high one)
    min_lr: float = 3e-4  # end of the cosine decay
    warmup_steps: int = 100  # linear warmup; capped at steps // 10 so short runs still decay
    weight_decay: float = 0.1  # AdamW decoupled decay, on >= 2-D tensors only
    beta1: float = 0.9  # AdamW first-moment decay
    beta2: float = 0.95  # AdamW second-moment decay
    grad_clip: float = 1.0  # clip the global gradient norm to this; 0 disables
    grad_chunks: int = 2  # pieces each batch is split into for worker threads; fixes the exact arithmetic
    # --- evaluation and bookkeeping
    val_fraction: float = 0.1  # last fraction of the token stream held out for validation; 0 = none
    eval_interval: int = 100  # steps between validation losses (and always at the last step)
    eval_tokens: int = 16384  # validation tokens per evaluation (the same windows every time)
    checkpoint_interval: int = 500  # steps between checkpoints; 0 = only at the end and on Ctrl+C
    seed: int = 1337  # weight init and batch order

    def validate(self) -> "TrainConfig":
        """Raise ValueError naming the field and value if anything is out of range; return self."""
        if self.tokenizer not in ("bpe", "char"):
            raise ValueError(f"tokenizer must be 'bpe' or 'char', got {self.tokenizer!r}")
        for name in ("vocab_size", "n_layers", "dim", "n_heads", "n_kv_heads", "ffn_dim", "context", "steps",
                     "batch_size", "grad_chunks", "eval_interval", "eval_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("warmup_steps", "checkpoint_interval", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        if self.dim % self.n_heads or (self.dim // self.n_heads) % 2:
            raise ValueError(f"dim ({self.dim}) must be a multiple of n_heads ({self.n_heads}) with an even "
                             f"quotient (the head_dim, rotated by RoPE)")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        for name, low, high in (("lr", 0.0, 10.0), ("beta1", 0.0, 1.0), ("beta2", 0.0, 1.0)):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and low < value < high):
                raise ValueError(f"{name} must be in ({low}, {high}), got {value!r}")
        for name in ("min_lr", "weight_decay", "grad_clip", "rms_norm_eps", "rope_theta"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a non-negative number, got {value!r}")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in [0, 1), got {self.val_fraction!r}")
        return self

    def model_config(self, vocab_size: int) -> dict:
        """The Hugging Face llama config this run trains."""
        return make_config(vocab_size=vocab_size, hidden_size=self.dim, intermediate_size=self.ffn_dim,
                           num_hidden_layers=self.n_layers, num_attention_heads=self.n_heads,
                           num_key_value_heads=self.n_kv_heads, head_dim=self.dim // self.n_heads,
                           rms_norm_eps=self.rms_norm_eps, rope_theta=self.rope_theta,
                           max_position_embeddings=self.context, tie_word_embeddings=self.tie_embeddings)

    def lr_at(self, step: int) -> float:
        """Learning rate of a 0-based step (warmup, then cosine)."""
        warmup = min(self.warmup_steps, self.steps // 10)
        return get_lr(step, lr=self.lr, min_lr=min(self.min_lr, self.lr), warmup_steps=warmup,
                      total_steps=self.steps)


class TrainingDiverged(ValueError):
    """The loss became NaN or infinite (usually: the learning rate is too high)."""


@dataclass
class Callbacks:
    """Hooks for a GUI. ``on_progress(step, loss, val_loss, tokens_per_s)`` runs after every step
    (val_loss is the latest validation loss or None); ``should_stop()`` is polled after every step and
    stops the run like Ctrl+C (checkpoint saved); ``on_checkpoint(path)`` runs after each save."""
    on_progress: Callable[[int, float, float | None, float], None] | None = None
    should_stop: Callable[[], bool] | None = None
    on_checkpoint: Callable[[Path], None] | None = None


@dataclass
class TrainResult:
    """What train() returns. ``losses[i]`` is the training loss of step i + 1; ``val_losses`` holds
    (step, loss) pairs; ``interrupted`` is True if Ctrl+C or should_stop ended the run early."""
    params: dict
    model_config: dict
    tokenizer: dict | None
    chat_template: str | None
    step: int
    losses: list = field(default_factory=list)
    val_losses: list = field(default_factory=list)
    interrupted: bool = False
    checkpoint: Path | None = None
    tokens_per_s: float = 0.0


class _Progress:
    """One status line on stderr: '\\r' updates on a terminal, a plain line per evaluation otherwise."""

    def __init__(self, stream, total: int, enabled: bool):
        self.stream, self.total, self.enabled = stream, total, enabled
        self.tty = enabled and hasattr(stream, "isatty") and stream.isatty()
        self.last_draw = 0.0

    def update(self, step, loss, val_loss, tok_s, eta_s, evaluated: bool):
        if not self.enabled:
            return
        now = time.monotonic()
        final = step == self.total
        if not (evaluated or final or (self.tty and now - self.last_draw >= 0.1)):
            return
        self.last_draw = now
        val = f"{val_loss:.4f}" if val_loss is not None else "-"
        eta = f"{int(eta_s) // 60}m{int(eta_s) % 60:02d}s"
        line = f"step {step}/{self.total} | loss {loss:.4f} | val {val} | {tok_s:,.0f} tok/s | ETA {eta}"
        if self.tty:
            self.stream.write("\r" + line + "\033[K" + ("\n" if evaluated or final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


@contextlib.contextmanager
def _deferred_sigint():
    """In the main thread, make the first Ctrl+C set a flag (checked between steps, so the state saved is
    never half-updated); a second Ctrl+C raises KeyboardInterrupt as usual."""
    flag = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum, frame):
        if flag.is_set():
            raise KeyboardInterrupt
        flag.set()

    old = signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, old)


def evaluate(params, model_config, ids, mask, batch_size, context, max_tokens, runner=None) -> float:
    """Mean loss over the fixed validation windows (weighted by the number of counted positions)."""
    batches = eval_batches(ids, mask, batch_size, context, max_tokens)
    if runner is None:
        results = [(loss_only(params, model_config, x, y, m), float(m.sum()) if m is not None else float(y.size))
                   for x, y, m in batches]
    else:
        results = runner.losses(params, model_config, batches)
    total = sum(loss * w for loss, w in results)
    weight = sum(w for _, w in results)
    return total / weight if weight else float("nan")


def _prepare_data(config, data, tokenizer, loss_mask, chat, chat_loss):
    """-> (ids, mask or None, tokenizer dict or None)."""
    if isinstance(data, str):
        from petit.tokenizer import Tokenizer

        if tokenizer is None:
            specials = chat_corpus.SPECIAL_TOKENS if chat else []
            tokenizer = train_tokenizer(data, mode=config.tokenizer,
                                        vocab_size=config.vocab_size if config.tokenizer == "bpe" else None,
                                        special_tokens=specials, eos_token=chat_corpus.EOS_TOKEN if chat else None)
        tok = Tokenizer.from_dict(tokenizer)
        if chat and chat_loss == "answers":
            ids, mask = encode_chat(data, tok)
        else:
            ids, mask = encode_text(data, tok), None
        return ids, mask, tokenizer
    vocab = len(tokenizer["vocab"]) if tokenizer is not None else config.vocab_size
    ids = check_ids(data, vocab)
    mask = None
    if loss_mask is not None:
        mask = np.asarray(loss_mask, dtype=np.uint8)
        if mask.shape != ids.shape:
            raise ValueError(f"loss_mask has shape {mask.shape}, the token ids have {ids.shape}")
    return ids, mask, tokenizer


def _data_digest(ids, mask) -> dict:
    h = hashlib.sha256(np.ascontiguousarray(ids, dtype=np.int32).tobytes())
    if mask is not None:
        h.update(np.ascontiguousarray(mask, dtype=np.uint8).tobytes())
    return {"tokens": int(len(ids)), "sha256": h.hexdigest()}


def _restore(ckpt, model_config, opt, digest, log):
    """Check a checkpoint against the run and return (params, history, step) to continue from."""
    if ckpt.model_config != model_config:
        diff = {k: (ckpt.model_config.get(k), v) for k, v in model_config.items() if ckpt.model_config.get(k) != v}
        raise ValueError(f"checkpoint {ckpt.path} has a different model (checkpoint vs config): {diff}")
    check_params(ckpt.params, model_config)
    params = {n: np.array(ckpt.params[n], dtype=np.float32) for n in ckpt.params}
    if ckpt.optimizer is not None:
        opt.load_state_dict(ckpt.optimizer)
    if ckpt.data is not None and ckpt.data.get("sha256") != digest["sha256"]:
        print(f"warning: the training data differs from the data of checkpoint {ckpt.path}; continuing anyway",
              file=log)
    return params, {"loss": list(ckpt.history["loss"]), "val": list(ckpt.history["val"])}, ckpt.step


def train(config: TrainConfig, data, *, tokenizer: dict | None = None, loss_mask=None, chat: bool = False,
          chat_loss: str = "answers", chat_template: str | None = None, out_dir=None, resume=None,
          callbacks: Callbacks | None = None, progress: bool = True, log=None, data_info: dict | None = None,
          threads: int | None = None) -> TrainResult:
    """Train a model from scratch or resume one.

    Args:
        config: The run's TrainConfig. On resume its model fields must match the checkpoint's.
        data: Corpus text, or a 1-D sequence of token ids.
        tokenizer: Tokenizer dict; for text data one is trained if None (a resumed run uses the
            checkpoint's). Needed for ids only to size the vocab and be saved with the model.
        loss_mask: With token ids: 0/1 per token, 1 = train on predicting it. None = all tokens.
        chat: Text data is a ChatML corpus: add the ChatML special tokens to a trained tokenizer and
            (with chat_loss="answers") train only on the assistant answers.
        chat_loss: "answers" (loss on assistant answers and their <|im_end|>) or "all" (every token).
        chat_template: Jinja chat template saved with the model (defaults to ChatML when chat=True).
        out_dir: Checkpoint directory (None: nothing is saved).
        resume: Checkpoint directory to continue from; the run continues bit-identically.
        callbacks: Progress / stop hooks for a GUI.
        progress: Draw the progress line on ``log``.
        log: Stream for progress and messages (default sys.stderr).
        data_info: Extra JSON facts about the data source saved in the checkpoint's "data" entry
            (e.g. the corpus path), next to the token count and SHA-256 of the ids.
        threads: Worker threads for the batch chunks (None: min(grad_chunks, CPU count)). Changes
            speed only, never the numbers.

    Raises:
        ValueError: On a bad config, too little data, token ids outside the vocab, a checkpoint that
            does not match the config; TrainingDiverged (a ValueError) if the loss becomes NaN/inf.
        OSError: If the checkpoint cannot be written.
    """
    log = log or sys.stderr
    callbacks = callbacks or Callbacks()
    config.validate()
    if chat_loss not in ("answers", "all"):
        raise ValueError(f"chat_loss must be 'answers' or 'all', got {chat_loss!r}")
    ckpt = load_checkpoint(resume) if resume is not None else None
    if ckpt is not None and ckpt.tokenizer is not None:
        tokenizer = ckpt.tokenizer
    if chat and chat_template is None:
        chat_template = chat_corpus.CHAT_TEMPLATE
    if ckpt is not None and chat_template is None:
        chat_template = ckpt.chat_template
    ids, mask, tokenizer = _prepare_data(config, data, tokenizer, loss_mask, chat, chat_loss)
    vocab_size = len(tokenizer["vocab"]) if tokenizer is not None else config.vocab_size
    model_config = config.model_config(vocab_size)
    (train_ids, train_mask), (val_ids, val_mask) = split_train_val(ids, mask, config.val_fraction,
                                                                    config.context)
    digest = {**(data_info or {}), **_data_digest(ids, mask)}

    params = init_params(model_config, config.seed, np.float32)
    opt = AdamW(params, betas=(config.beta1, config.beta2), weight_decay=config.weight_decay)
    history, start = {"loss": [], "val": []}, 0
    if ckpt is not None:
        params, history, start = _restore(ckpt, model_config, opt, digest, log)

    out_dir = Path(out_dir) if out_dir is not None else None

    def save(step) -> Path | None:
        if out_dir is None:
            return None
        path = save_checkpoint(out_dir, params=params, model_config=model_config, step=step,
                               train_config=dataclasses.asdict(config), tokenizer=tokenizer,
                               chat_template=chat_template, optimizer=opt.state_dict(), history=history,
                               data=digest)
        if callbacks.on_checkpoint:
            callbacks.on_checkpoint(path)
        return path

    if progress:
        print(f"model: {count_params(model_config):,} parameters, vocab {vocab_size}, {len(train_ids):,} train "
              f"tokens, {0 if val_ids is None else len(val_ids):,} val tokens; steps {start}..{config.steps}",
              file=log)
    bar = _Progress(log, config.steps, progress)
    tokens_per_step = config.batch_size * config.context
    val_loss = history["val"][-1][1] if history["val"] else None
    step, interrupted, in_update, tok_s, checkpoint = start, False, False, 0.0, None
    t0 = time.perf_counter()
    try:
        with _deferred_sigint() as sigint, StepRunner(config.grad_chunks, threads) as runner:
            for step_index in range(start, config.steps):
                x, y, m = get_batch(train_ids, train_mask, config.batch_size, config.context,
                                    batch_rng(config.seed, step_index))
                loss, grads = runner.loss_and_grads(params, model_config, x, y, m)
                if not math.isfinite(loss):
                    raise TrainingDiverged(f"the loss became {loss} at step {step_index + 1}; try a lower "
                                           f"learning rate (lr={config.lr})")
                clip_grad_norm(grads, config.grad_clip)
                in_update = True
                opt.step(params, grads, config.lr_at(step_index))
                history["loss"].append(loss)
                step, in_update = step_index + 1, False
                evaluated = step % config.eval_interval == 0 or step == config.steps
                if evaluated and val_ids is not None:
                    val_loss = evaluate(params, model_config, val_ids, val_mask, config.batch_size,
                                        config.context, config.eval_tokens, runner)
                    history["val"].append((step, val_loss))
                if config.checkpoint_interval and step % config.checkpoint_interval == 0 and step < config.steps:
                    checkpoint = save(step)
                elapsed = time.perf_counter() - t0
                tok_s = (step - start) * tokens_per_step / elapsed
                eta = (config.steps - step) * elapsed / (step - start)
                bar.update(step, loss, val_loss, tok_s, eta, evaluated)
                if callbacks.on_progress:
                    callbacks.on_progress(step, loss, val_loss, tok_s)
                if sigint.is_set() or (callbacks.should_stop and callbacks.should_stop()):
                    interrupted = True
                    break
    except KeyboardInterrupt:
        if in_update:  # a forced second Ctrl+C inside the update: the state is torn, keep the last save
            raise
        interrupted = True
    if interrupted or out_dir is not None:
        checkpoint = save(step)
    if interrupted:
        where = f"checkpoint saved to {checkpoint}" if checkpoint else "no output directory, nothing saved"
        print(f"\ninterrupted at step {step}/{config.steps}; {where}"
              + (f" (continue with --resume {checkpoint})" if checkpoint else ""), file=log)
    return TrainResult(params=params, model_config=model_config, tokenizer=tokenizer,
                       chat_template=chat_template, step=step, losses=history["loss"], val_losses=history["val"],
                       interrupted=interrupted, checkpoint=checkpoint, tokens_per_s=tok_s)
