"""trainer.speed.training_speed: training tokens per second of a config, from real optimizer steps timed on a
clock (a fake one here, so the figure is exact: tests never assert timings)."""
import itertools

import pytest

import trainer.speed
from trainer.speed import training_speed
from trainer.train import TrainConfig

CONFIG = TrainConfig(tokenizer="char", n_layers=1, dim=32, n_heads=2, n_kv_heads=2, ffn_dim=64, context=8,
                     batch_size=3, steps=10, lr=1e-3)


@pytest.fixture
def clock(monkeypatch):
    """A clock that moves 0.2 s each time it is read."""
    ticks = itertools.count()
    monkeypatch.setattr(trainer.speed, "perf_counter", lambda: 0.2 * next(ticks))


def test_steps_until_the_time_budget_then_tokens_per_second(clock):
    # read at 0 (start), 0.2 and 0.4 (under the 0.5 s budget: two more steps), 0.6 (stop), 0.8 (the end): 3 steps
    # of 3 x 8 tokens in 0.8 s
    assert training_speed(CONFIG, vocab_size=40, budget_s=0.5, max_steps=10) == pytest.approx(3 * 24 / 0.8)


def test_at_most_max_steps(clock):
    # 0 (start), 0.2 (under budget: a second step), 0.4 (the end): 2 steps of 24 tokens in 0.4 s
    assert training_speed(CONFIG, vocab_size=40, budget_s=100, max_steps=2) == pytest.approx(2 * 24 / 0.4)


def test_max_steps_must_be_positive():
    with pytest.raises(ValueError, match="max_steps must be at least 1, got 0"):
        training_speed(CONFIG, vocab_size=40, max_steps=0)
