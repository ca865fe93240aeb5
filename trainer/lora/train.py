"""The fine-tuning loop: AdamW on the adapters (float32, with their moments), the base frozen as loaded; a batch of
examples a step (the mean loss over their tokens that count), a held-out split scored after every epoch; the adapter
written as a GGUF LoRA file at the end (petit.loading.lora)."""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from petit.loading.lora import write_adapter
from trainer.lora.base import TARGETS, FrozenBase
from trainer.lora.checkpoint import RunState, data_digest, load_run, save_run
from trainer.lora.data import read_examples, split
from trainer.lora.model import LoraModel, init_adapters
from trainer.optim import AdamW, clip_grad_norm, get_lr
from trainer.parallel import single_threaded_blas


@dataclass
class FinetuneConfig:
    rank: int = 8
    alpha: float = 16.0
    targets: tuple = TARGETS
    epochs: int = 1
    lr: float = 2e-4
    ctx: int = 512
    seed: int = 0
    val_fraction: float = 0.1
    warmup: int = 10
    batch: int = 1              # examples a step: their gradients summed, the loss their tokens' mean
    weight_decay: float = 0.0
    clip: float = 1.0
    checkpoint_every: int = 50  # steps between two saves of a run given a checkpoint directory

    def check(self) -> None:
        if self.rank < 1 or self.alpha <= 0 or self.epochs < 1 or not self.lr > 0 or self.ctx < 2 or self.batch < 1:
            raise ValueError("rank, epochs, batch, ctx (>= 2), alpha and lr must be positive")
        bad = [t for t in self.targets if t not in TARGETS]
        if bad or not self.targets:
            raise ValueError(f"targets must be some of {','.join(TARGETS)}, got {','.join(self.targets) or 'none'}")
        if not 0 <= self.val_fraction < 1:
            raise ValueError(f"the held-out fraction must be in [0, 1), got {self.val_fraction}")


def mean_loss(lm: LoraModel, examples) -> float:
    """Token-weighted mean loss over examples (no gradients)."""
    total, n = 0.0, 0
    for ex in examples:
        total += lm.loss(ex.ids[:-1], ex.ids[1:], ex.weights[1:])
        n += ex.n_loss
    return total / max(n, 1)


@dataclass
class Hooks:
    """What a window follows a run by (all optional, all called on the training thread): ``on_step(info)`` after
    every step (info: step, steps, epoch, epochs, loss (the step's mean), tokens_per_s), ``on_epoch(stats)`` after
    every epoch, ``should_stop()`` polled after every step (True: a checkpoint is saved and the run returns with
    "interrupted"), ``on_checkpoint(path)`` after each save."""
    on_step: Callable[[dict], None] | None = None
    on_epoch: Callable[[dict], None] | None = None
    should_stop: Callable[[], bool] | None = None
    on_checkpoint: Callable[[str], None] | None = None


def finetune(model, data_path: str, out_path: str, cfg: FinetuneConfig, out=None, examples=None, hooks=None,
             checkpoint: str | None = None, resume: bool = False) -> dict:
    """Train adapters on `model` from `data_path` and write them to `out_path`. Returns the stats: per epoch
    train / held-out loss, tokens/s; the adapter parameters under "params"; "interrupted" (stopped by
    hooks.should_stop or Ctrl+C: the checkpoint saved, no adapter written). NumPy's BLAS runs one thread meanwhile
    (its threads spinning against the engine's pool on busy cores made each small product wait for a descheduled
    thread: the attention's products measured 100-1000x slower on 2 shared cores).

    checkpoint: a directory the run is saved to every cfg.checkpoint_every steps, when stopped and at the end
    (trainer.lora.checkpoint); with resume, the run continues from it (ValueError if it is another run's)."""
    if resume and not checkpoint:
        raise ValueError("resuming needs the checkpoint directory of the run")
    with single_threaded_blas():
        return _finetune(model, data_path, out_path, cfg, out or sys.stdout, examples, hooks or Hooks(), checkpoint,
                         resume)


def _finetune(model, data_path, out_path, cfg, out, examples, hooks, checkpoint, resume) -> dict:
    cfg.check()
    if cfg.ctx > model.context_length - 1:
        cfg.ctx = model.context_length - 1
    base = FrozenBase(model, np.float32)
    examples = examples if examples is not None else read_examples(data_path, model, cfg.ctx)
    train, held = split(examples, cfg.val_fraction, cfg.seed)
    params = init_adapters(base, cfg.targets, cfg.rank, cfg.seed)
    lm = LoraModel(base, params, cfg.alpha, cfg.rank)
    opt = AdamW(params, betas=(0.9, 0.999), weight_decay=cfg.weight_decay)
    per_epoch = -(-len(train) // cfg.batch)
    total_steps = cfg.epochs * per_epoch
    n_params = sum(p.size for p in params.values())
    digest = data_digest(examples)
    print(f"fine-tuning {model.path} ({model.weight_type} base, frozen): rank {cfg.rank}, alpha {cfg.alpha:g}, "
          f"targets {','.join(cfg.targets)}, {n_params:,} adapter parameters; {len(train)} training / {len(held)} "
          f"held-out examples, {cfg.batch} a step, context {cfg.ctx}", file=out)
    if resume:
        st = load_run(checkpoint, model, cfg, params, opt, digest)
        print(f"resumed from {checkpoint} at step {st.step} of {total_steps}", file=out)
    else:
        st = RunState()
        st.val_before = mean_loss(lm, held) if held else None
        if st.val_before is not None:
            print(f"held-out loss before training {st.val_before:.4f}", file=out)

    def save() -> None:
        if checkpoint:
            saved = save_run(checkpoint, model, cfg, params, opt, st, digest)
            if hooks.on_checkpoint:
                hooks.on_checkpoint(saved)

    interrupted, steady = False, True      # steady: no update half done (Ctrl+C may come anywhere)
    try:
        for epoch in range(len(st.done), cfg.epochs):       # a run stopped after an epoch's last step ends it first
            order = np.random.default_rng([cfg.seed, epoch]).permutation(len(train))
            t0, seconds0 = time.perf_counter(), st.seconds
            for b0 in range((st.step - epoch * per_epoch) * cfg.batch, len(order), cfg.batch):
                batch = [train[j] for j in order[b0:b0 + cfg.batch]]
                grads = {n: np.zeros_like(p) for n, p in params.items()}
                loss = sum(lm.loss(ex.ids[:-1], ex.ids[1:], ex.weights[1:], grads) for ex in batch)
                n = sum(ex.n_loss for ex in batch)
                for g in grads.values():
                    g *= np.float32(1.0 / n)
                if not math.isfinite(loss):
                    raise ValueError(f"the loss diverged at step {st.step} (lines "
                                     f"{', '.join(str(ex.line) for ex in batch)} of the data)")
                clip_grad_norm(grads, cfg.clip)
                steady = False
                opt.step(params, grads, get_lr(st.step, lr=cfg.lr, min_lr=cfg.lr / 10,
                                               warmup_steps=min(cfg.warmup, total_steps), total_steps=total_steps))
                st.step += 1
                st.tokens += sum(len(ex.ids) - 1 for ex in batch)
                st.total += loss
                st.counted += n
                st.seconds = seconds0 + time.perf_counter() - t0
                st.losses.append(float(loss / max(n, 1)))
                steady = True
                if hooks.on_step:
                    hooks.on_step({"step": st.step, "steps": total_steps, "epoch": epoch + 1, "epochs": cfg.epochs,
                                   "loss": st.losses[-1], "tokens_per_s": st.tokens / max(st.seconds, 1e-9)})
                if hooks.should_stop and hooks.should_stop():
                    raise KeyboardInterrupt
                if checkpoint and cfg.checkpoint_every and st.step % cfg.checkpoint_every == 0:
                    save()
            val = mean_loss(lm, held) if held else None
            stats = {"epoch": epoch + 1, "train_loss": st.total / max(st.counted, 1), "val_loss": val,
                     "tokens_per_s": st.tokens / max(st.seconds, 1e-9), "seconds": st.seconds, "steps": st.step}
            st.done.append(stats)
            if val is not None:
                st.vals.append((st.step, float(val)))
            st.total, st.counted, st.tokens, st.seconds = 0.0, 0, 0, 0.0
            print(f"epoch {epoch + 1}/{cfg.epochs}: train loss {stats['train_loss']:.4f}, held-out "
                  f"{'-' if val is None else f'{val:.4f}'}, {stats['tokens_per_s']:.0f} tokens/s, "
                  f"{stats['seconds']:.1f} s", file=out)
            if hooks.on_epoch:
                hooks.on_epoch(stats)
            save()
    except KeyboardInterrupt:
        interrupted = True
        if steady:
            save()
            kept = f"; {checkpoint} holds the run (resume it to go on)" if checkpoint else ""
        else:
            kept = f"; stopped inside an update, so {checkpoint} keeps its last save" if checkpoint else ""
        print(f"stopped at step {st.step} of {total_steps}{kept}; no adapter written", file=out)
    result = {"history": st.done, "val_before": st.val_before, "params": params, "interrupted": interrupted,
              "checkpoint": checkpoint, "steps": st.step}
    if interrupted:
        return result
    meta = {"petit.lora.rank": cfg.rank, "petit.lora.targets": ",".join(cfg.targets), "petit.lora.epochs": cfg.epochs,
            "petit.lora.base": str(model.path)}
    if st.done and st.done[-1]["val_loss"] is not None:
        meta["petit.lora.val_loss"] = float(st.done[-1]["val_loss"])
    write_adapter(out_path, model, params, cfg.alpha, meta)
    print(f"wrote {out_path}", file=out)
    return result
