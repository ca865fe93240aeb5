"""How fast this machine trains a preset: a few optimizer steps of the real model on random tokens, timed.

Runs on a worker (app.training.jobs.Job); a tiny preset takes a fraction of a second, the large one a few."""
import time

import numpy as np

from app.training.presets import Preset, train_config
from trainer.model import init_params
from trainer.optim import AdamW
from trainer.parallel import StepRunner

_measured: dict = {}                 # (preset key, vocab size) -> tokens/s


def known(p: Preset, vocab_size: int) -> float | None:
    return _measured.get((p.key, vocab_size))


def measure(p: Preset, vocab_size: int, budget_s: float = 0.5, max_steps: int = 4) -> float:
    """Training tokens per second: one warm-up step, then steps until `budget_s` or `max_steps`."""
    config = train_config(p, steps=100, tokenizer="bpe", vocab_size=vocab_size)
    model_config = config.model_config(vocab_size)
    params = init_params(model_config, 0)
    opt = AdamW(params)
    rng = np.random.default_rng(0)
    x = rng.integers(0, vocab_size, (p.batch_size, p.context), dtype=np.int64)
    y = rng.integers(0, vocab_size, (p.batch_size, p.context), dtype=np.int64)
    with StepRunner(config.grad_chunks) as runner:
        def step():
            _, grads = runner.loss_and_grads(params, model_config, x, y, None)
            opt.step(params, grads, config.lr)
        step()
        t0, steps = time.perf_counter(), 0
        while steps < max_steps and (steps == 0 or time.perf_counter() - t0 < budget_s):
            step()
            steps += 1
        rate = steps * p.tokens_per_step / (time.perf_counter() - t0)
    _measured[(p.key, vocab_size)] = rate
    return rate

