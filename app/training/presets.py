"""The model sizes the training wizard offers, what each run's schedule is, and how long a run should take.

Every preset keeps hidden and MLP sizes multiples of 32, so its matrices can be exported as q8_0 / q4_0. The time
estimate is the run's work (training tokens, plus the validation passes at a third of a training token each) over
a speed measured on this machine (trainer.speed, remembered here per preset) or, while training, the trainer's
own."""
from dataclasses import dataclass

from trainer.model import count_params
from trainer.speed import training_speed
from trainer.train import TrainConfig

_measured: dict = {}                 # (preset key, vocab size) -> training tokens/s on this machine


@dataclass(frozen=True)
class Preset:
    key: str
    title: str
    n_layers: int
    dim: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    context: int
    batch_size: int
    lr: float
    steps: int                       # the steps offered by default

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.context

    def describe(self) -> str:
        return (f"{self.n_layers} layers, hidden size {self.dim}, {self.n_heads} heads ({self.n_kv_heads} key-value), "
                f"MLP {self.ffn_dim}, context {self.context}, batch {self.batch_size}")


PRESETS = (
    Preset("tiny", "Tiny: a first try", 2, 64, 4, 2, 192, 64, 8, 3e-3, 500),
    Preset("small", "Small: the bundled model's size", 4, 128, 4, 2, 384, 128, 16, 3e-3, 2000),
    Preset("medium", "Medium", 6, 192, 6, 2, 512, 128, 16, 2e-3, 3000),
    Preset("large", "Large: hours on a laptop", 8, 256, 8, 4, 768, 256, 16, 1e-3, 4000),
)


def preset(key: str) -> Preset:
    for p in PRESETS:
        if p.key == key:
            return p
    raise KeyError(f"no preset {key!r} (presets: {', '.join(p.key for p in PRESETS)})")


def schedule(p: Preset, steps: int) -> dict:
    """How often a run of `steps` steps measures its validation loss (on how many tokens) and saves."""
    return {"eval_interval": max(5, min(100, steps // 20)),
            "eval_tokens": min(16384, 8 * p.tokens_per_step),
            "checkpoint_interval": max(10, steps // 10)}


def train_config(p: Preset, *, steps: int, tokenizer: str, vocab_size: int, seed: int = 1337) -> TrainConfig:
    return TrainConfig(tokenizer=tokenizer, vocab_size=vocab_size, n_layers=p.n_layers, dim=p.dim,
                       n_heads=p.n_heads, n_kv_heads=p.n_kv_heads, ffn_dim=p.ffn_dim, context=p.context,
                       batch_size=p.batch_size, lr=p.lr, min_lr=p.lr / 10, steps=steps, seed=seed,
                       **schedule(p, steps)).validate()


def param_count(p: Preset, vocab_size: int) -> int:
    return count_params(train_config(p, steps=1, tokenizer="bpe", vocab_size=vocab_size).model_config(vocab_size))


def known_speed(p: Preset, vocab_size: int) -> float | None:
    """The training speed measure_speed found for this preset and vocabulary in this process, if it ran."""
    return _measured.get((p.key, vocab_size))


def measure_speed(p: Preset, vocab_size: int) -> float:
    """Training tokens per second of this preset on this machine (trainer.speed; run it on a worker thread)."""
    rate = training_speed(train_config(p, steps=100, tokenizer="bpe", vocab_size=vocab_size), vocab_size)
    _measured[(p.key, vocab_size)] = rate
    return rate


def estimate_seconds(p: Preset, steps: int, tokens_per_s: float) -> float:
    """Seconds a run of `steps` steps should take at `tokens_per_s` training tokens per second."""
    s = schedule(p, steps)
    evaluations = steps // s["eval_interval"] + 1
    work = steps * p.tokens_per_step + evaluations * s["eval_tokens"] / 3
    return work / tokens_per_s if tokens_per_s > 0 else float("inf")


def format_count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def format_duration(seconds: float) -> str:
    """12 s, 3 min 05 s, 2 h 07 min."""
    if seconds != seconds or seconds == float("inf"):
        return "unknown"
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
