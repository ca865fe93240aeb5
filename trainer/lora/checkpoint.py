"""A fine-tuning run's checkpoint (trainer.checkpoint's directory, each file written atomically): the adapters, AdamW's
moments and step, the losses so far, and what the run must match to continue (its settings, the base, the data), so
a run paused, stopped or killed resumes where its last checkpoint left it and ends with the same adapter, bit for
bit, as a run never stopped."""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field

import numpy as np

from trainer.checkpoint import load_checkpoint, save_checkpoint

KIND = "petit-lora-run"
# the settings a resumed run must share with the run it continues (epochs may grow)
SAME = ("rank", "alpha", "targets", "lr", "ctx", "seed", "val_fraction", "warmup", "batch", "weight_decay", "clip")


@dataclass
class RunState:
    """Where a run stands: `step` optimizer steps done, `done` the finished epochs' stats, the current epoch's running
    sums (`total` loss, `counted` tokens of the loss, `tokens` trained on, `seconds`), `val_before` the held-out loss
    before training, `losses` each step's mean loss, `vals` (step, held-out loss) after each epoch."""
    step: int = 0
    done: list = field(default_factory=list)
    total: float = 0.0
    counted: int = 0
    tokens: int = 0
    seconds: float = 0.0
    val_before: float | None = None
    losses: list = field(default_factory=list)
    vals: list = field(default_factory=list)


def data_digest(examples) -> str:
    """SHA-256 of the examples' ids and loss weights, in order: the data a checkpoint was trained on."""
    h = hashlib.sha256()
    for ex in examples:
        h.update(np.int64(len(ex.ids)).tobytes())
        h.update(ex.ids.tobytes())
        h.update(ex.weights.tobytes())
    return h.hexdigest()


def _base(model) -> dict:
    return {"path": str(model.path), "weight_type": str(model.weight_type)}


def save_run(path, model, cfg, params: dict, opt, state: RunState, digest: str) -> str:
    settings = asdict(cfg)
    settings["targets"] = list(cfg.targets)
    run = {k: v for k, v in asdict(state).items() if k not in ("losses", "vals")}
    save_checkpoint(path, params=params, model_config={"kind": KIND, "base": _base(model)}, step=state.step,
                    train_config=settings, optimizer=opt.state_dict(),
                    history={"loss": state.losses, "val": state.vals}, data={"sha256": digest, "run": run})
    return str(path)


def load_run(path, model, cfg, params: dict, opt, digest: str) -> RunState:
    """Restore `params` and `opt` in place from checkpoint `path`, after checking that it continues this run.

    Raises:
        ValueError: the checkpoint is missing, torn or unreadable (naming the file), is not a fine-tuning run's, or
            was made with other settings, another base model or other data (naming what differs).
    """
    ck = load_checkpoint(path)
    if not isinstance(ck.model_config, dict) or ck.model_config.get("kind") != KIND:
        raise ValueError(f"checkpoint {path} is not a fine-tuning run's (a `petit train` checkpoint?)")
    where = f"checkpoint {path}"
    base = ck.model_config.get("base") or {}
    if base != _base(model):
        raise ValueError(f"{where} was made on {base.get('path')} ({base.get('weight_type')} weights), not on "
                         f"{model.path} ({model.weight_type})")
    settings = asdict(cfg)
    settings["targets"] = list(cfg.targets)
    theirs = ck.train_config or {}
    differ = [f"{k} {theirs.get(k)!r} (now {settings[k]!r})" for k in SAME if theirs.get(k) != settings[k]]
    if differ:
        raise ValueError(f"{where} was made with other settings: {', '.join(differ)}")
    if (ck.data or {}).get("sha256") != digest:
        raise ValueError(f"{where} was trained on other data (the examples read now differ from its)")
    if set(ck.params) != set(params) or any(ck.params[n].shape != params[n].shape for n in params):
        raise ValueError(f"{where} holds other adapters than this run's")
    for n, p in params.items():
        p[...] = ck.params[n]
    opt.load_state_dict(ck.optimizer)
    run = dict(ck.data["run"])
    state = RunState(**run, losses=list(ck.history["loss"]), vals=[tuple(v) for v in ck.history["val"]])
    if state.step != ck.step:
        raise ValueError(f"{where} is inconsistent: its run is at step {state.step}, its optimizer at {ck.step}")
    return state
