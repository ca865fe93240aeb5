"""How fast this machine trains a model: a few optimizer steps of the real model on random tokens, timed, with the
same step runner (trainer.parallel.StepRunner) and optimizer (trainer.optim.AdamW) that train() uses. The app's
Train tab estimates a run's time from it before the run starts; a tiny model takes a fraction of a second, a large
one a few."""
from time import perf_counter

import numpy as np

from trainer.model import init_params
from trainer.optim import AdamW
from trainer.parallel import StepRunner
from trainer.train import TrainConfig


def training_speed(config: TrainConfig, vocab_size: int, budget_s: float = 0.5, max_steps: int = 4) -> float:
    """Training tokens per second for `config` (its model, batch, context, grad_chunks and lr) with a vocabulary
    of `vocab_size`: one warm-up step (untimed), then steps until `budget_s` seconds or `max_steps` steps."""
    if max_steps < 1:
        raise ValueError(f"max_steps must be at least 1, got {max_steps}")
    model_config = config.model_config(vocab_size)
    params = init_params(model_config, 0)
    opt = AdamW(params)
    rng = np.random.default_rng(0)
    x = rng.integers(0, vocab_size, (config.batch_size, config.context), dtype=np.int64)
    y = rng.integers(0, vocab_size, (config.batch_size, config.context), dtype=np.int64)
    with StepRunner(config.grad_chunks) as runner:
        def step():
            _, grads = runner.loss_and_grads(params, model_config, x, y, None)
            opt.step(params, grads, config.lr)
        step()
        t0, steps = perf_counter(), 0
        while steps < max_steps and (steps == 0 or perf_counter() - t0 < budget_s):
            step()
            steps += 1
        return steps * config.batch_size * config.context / (perf_counter() - t0)
