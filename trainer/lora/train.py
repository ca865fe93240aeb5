"""The fine-tuning loop: AdamW on the adapters (float32, with their moments), the base frozen as loaded; a batch of
examples a step (the mean loss over their tokens that count), a held-out split scored after every epoch; the adapter
written as a GGUF LoRA file at the end (petit.loading.lora)."""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass

import numpy as np

from petit.loading.lora import write_adapter
from trainer.lora.base import TARGETS, FrozenBase
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


def finetune(model, data_path: str, out_path: str, cfg: FinetuneConfig, out=None, examples=None) -> dict:
    """Train adapters on `model` from `data_path` and write them to `out_path`. Returns the stats: per epoch
    train / held-out loss, tokens/s; the adapter parameters under "params". NumPy's BLAS runs one thread meanwhile
    (its threads spinning against the engine's pool on busy cores made each small product wait for a descheduled
    thread: the attention's products measured 100-1000x slower on 2 shared cores)."""
    with single_threaded_blas():
        return _finetune(model, data_path, out_path, cfg, out or sys.stdout, examples)


def _finetune(model, data_path, out_path, cfg, out, examples) -> dict:
    cfg.check()
    if cfg.ctx > model.context_length - 1:
        cfg.ctx = model.context_length - 1
    base = FrozenBase(model, np.float32)
    examples = examples if examples is not None else read_examples(data_path, model, cfg.ctx)
    train, held = split(examples, cfg.val_fraction, cfg.seed)
    params = init_adapters(base, cfg.targets, cfg.rank, cfg.seed)
    lm = LoraModel(base, params, cfg.alpha, cfg.rank)
    opt = AdamW(params, betas=(0.9, 0.999), weight_decay=cfg.weight_decay)
    total_steps = cfg.epochs * -(-len(train) // cfg.batch)
    n_params = sum(p.size for p in params.values())
    print(f"fine-tuning {model.path} ({model.weight_type} base, frozen): rank {cfg.rank}, alpha {cfg.alpha:g}, "
          f"targets {','.join(cfg.targets)}, {n_params:,} adapter parameters; {len(train)} training / {len(held)} "
          f"held-out examples, {cfg.batch} a step, context {cfg.ctx}", file=out)
    history, step = [], 0
    val0 = mean_loss(lm, held) if held else None
    if val0 is not None:
        print(f"held-out loss before training {val0:.4f}", file=out)
    for epoch in range(cfg.epochs):
        order = np.random.default_rng([cfg.seed, epoch]).permutation(len(train))
        t0, tokens, total, counted = time.perf_counter(), 0, 0.0, 0
        for b0 in range(0, len(order), cfg.batch):
            batch = [train[j] for j in order[b0:b0 + cfg.batch]]
            grads = {n: np.zeros_like(p) for n, p in params.items()}
            loss = sum(lm.loss(ex.ids[:-1], ex.ids[1:], ex.weights[1:], grads) for ex in batch)
            n = sum(ex.n_loss for ex in batch)
            for g in grads.values():
                g *= np.float32(1.0 / n)
            if not math.isfinite(loss):
                raise ValueError(f"the loss diverged at step {step} (lines {', '.join(str(ex.line) for ex in batch)} "
                                 f"of the data)")
            clip_grad_norm(grads, cfg.clip)
            opt.step(params, grads, get_lr(step, lr=cfg.lr, min_lr=cfg.lr / 10, warmup_steps=min(cfg.warmup,
                                                                                                  total_steps),
                                           total_steps=total_steps))
            step += 1
            tokens += sum(len(ex.ids) - 1 for ex in batch)
            total += loss
            counted += n
        seconds = time.perf_counter() - t0
        val = mean_loss(lm, held) if held else None
        stats = {"epoch": epoch + 1, "train_loss": total / max(counted, 1), "val_loss": val,
                 "tokens_per_s": tokens / max(seconds, 1e-9), "seconds": seconds, "steps": step}
        history.append(stats)
        print(f"epoch {epoch + 1}/{cfg.epochs}: train loss {stats['train_loss']:.4f}, held-out "
              f"{'-' if val is None else f'{val:.4f}'}, {stats['tokens_per_s']:.0f} tokens/s, {seconds:.1f} s",
              file=out)
    meta = {"petit.lora.rank": cfg.rank, "petit.lora.targets": ",".join(cfg.targets), "petit.lora.epochs": cfg.epochs,
            "petit.lora.base": str(model.path)}
    if history and history[-1]["val_loss"] is not None:
        meta["petit.lora.val_loss"] = float(history[-1]["val_loss"])
    write_adapter(out_path, model, params, cfg.alpha, meta)
    print(f"wrote {out_path}", file=out)
    return {"history": history, "val_before": val0, "params": params}
