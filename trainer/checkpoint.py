"""Training checkpoints: a directory holding three files, each written atomically.

    CKPT_DIR/
      weights.npz     model parameters, Hugging Face names, float32 ([out, in] matrices)
      optimizer.npz   "step", "adam_t", "m.<name>", "v.<name>" (AdamW moments), "loss_history" (per step),
                      "val_history" ((k, 2): step, validation loss)
      config.json     {"format": "petit-trainer-checkpoint", "version": 1, "step", "model_config",
                       "train_config", "tokenizer", "chat_template", "data", "loss", "val_loss",
                       "files": {name: sha256}}

Each file is written to a temporary name in the same directory, flushed, fsynced and renamed over the
target with ``os.replace``. ``config.json`` is written last and records the SHA-256 of the two ``.npz``
files, so a set torn by a crash between renames is detected on load instead of resuming from mixed steps.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

FORMAT = "petit-trainer-checkpoint"
VERSION = 1
WEIGHTS_FILE = "weights.npz"
OPTIMIZER_FILE = "optimizer.npz"
CONFIG_FILE = "config.json"


@dataclass
class Checkpoint:
    """A loaded checkpoint. ``optimizer`` is ``{"t", "m", "v"}`` (AdamW.state_dict) or None; ``history``
    is ``{"loss": [float per step], "val": [(step, val_loss), ...]}``."""
    path: Path
    step: int
    params: dict
    model_config: dict
    train_config: dict | None = None
    tokenizer: dict | None = None
    chat_template: str | None = None
    optimizer: dict | None = None
    history: dict = field(default_factory=lambda: {"loss": [], "val": []})
    data: dict | None = None


def _write_atomic(target: Path, write) -> str:
    """Call write(file) on a temporary file next to target, then rename it over target.
    Returns the SHA-256 hex digest of what was written."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        digest = _sha256(tmp)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return digest


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def save_checkpoint(path, *, params: dict, model_config: dict, step: int, train_config: dict | None = None,
                    tokenizer: dict | None = None, chat_template: str | None = None,
                    optimizer: dict | None = None, history: dict | None = None, data: dict | None = None) -> Path:
    """Write a checkpoint directory (created if needed) and return its path.

    Args:
        path: The checkpoint directory.
        params: name -> array (saved as they are; the trainer keeps them float32).
        model_config: The llama config dict (Hugging Face names).
        step: Number of optimizer steps done.
        train_config: The TrainConfig as a dict, for resuming.
        tokenizer: The tokenizer dict (``petit.tokenizer.Tokenizer.to_dict`` format), if any.
        chat_template: Jinja chat template text for chat models, if any.
        optimizer: AdamW.state_dict() (``{"t", "m", "v"}``), if any.
        history: ``{"loss": [...], "val": [(step, loss), ...]}``.
        data: Small JSON dict describing the training data (token count, SHA-256 of the ids).
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    history = history or {"loss": [], "val": []}
    digests = {WEIGHTS_FILE: _write_atomic(path / WEIGHTS_FILE, lambda f: np.savez(f, **params))}
    opt_arrays = {"step": np.int64(step),
                  "loss_history": np.asarray(history["loss"], dtype=np.float64),
                  "val_history": np.asarray(history["val"], dtype=np.float64).reshape(-1, 2)}
    if optimizer is not None:
        opt_arrays["adam_t"] = np.int64(optimizer["t"])
        opt_arrays.update({f"m.{n}": a for n, a in optimizer["m"].items()})
        opt_arrays.update({f"v.{n}": a for n, a in optimizer["v"].items()})
    digests[OPTIMIZER_FILE] = _write_atomic(path / OPTIMIZER_FILE, lambda f: np.savez(f, **opt_arrays))
    meta = {"format": FORMAT, "version": VERSION, "step": int(step), "model_config": model_config,
            "train_config": train_config, "tokenizer": tokenizer, "chat_template": chat_template,
            "data": data, "loss": history["loss"][-1] if history["loss"] else None,
            "val_loss": history["val"][-1][1] if history["val"] else None, "files": digests}
    text = json.dumps(meta, indent=1, ensure_ascii=False)
    _write_atomic(path / CONFIG_FILE, lambda f: f.write(text.encode("utf-8")))
    return path


def _load_npz(file: Path) -> dict:
    try:
        with np.load(file, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise ValueError(f"checkpoint file {file} cannot be read: {e}") from None


def load_checkpoint(path) -> Checkpoint:
    """Read a checkpoint directory written by :func:`save_checkpoint`.

    Raises:
        ValueError: If the directory or a file is missing or unreadable, the format or version is unknown,
            or the ``.npz`` files do not match the hashes in config.json (a torn save).
    """
    path = Path(path)
    if not path.is_dir():
        raise ValueError(f"checkpoint {path} does not exist or is not a directory")
    for name in (CONFIG_FILE, WEIGHTS_FILE, OPTIMIZER_FILE):
        if not (path / name).is_file():
            raise ValueError(f"checkpoint {path} is incomplete: {name} is missing "
                             f"(expected {CONFIG_FILE}, {WEIGHTS_FILE}, {OPTIMIZER_FILE})")
    try:
        meta = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"checkpoint file {path / CONFIG_FILE} is not valid JSON: {e}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{path / CONFIG_FILE} is not a trainer checkpoint (format {FORMAT!r} expected)")
    if meta.get("version") != VERSION:
        raise ValueError(f"{path / CONFIG_FILE}: checkpoint version {meta.get('version')!r} is not supported "
                         f"(this trainer reads version {VERSION})")
    for name, digest in (meta.get("files") or {}).items():
        if _sha256(path / name) != digest:
            raise ValueError(f"checkpoint {path} is inconsistent: {name} does not match {CONFIG_FILE} "
                             f"(was the save interrupted?)")
    params = _load_npz(path / WEIGHTS_FILE)
    opt = _load_npz(path / OPTIMIZER_FILE)
    step = int(meta["step"])
    if int(opt["step"]) != step:
        raise ValueError(f"checkpoint {path}: {OPTIMIZER_FILE} is at step {int(opt['step'])}, "
                         f"{CONFIG_FILE} at step {step}")
    optimizer = None
    if "adam_t" in opt:
        optimizer = {"t": int(opt["adam_t"]),
                     "m": {k[2:]: v for k, v in opt.items() if k.startswith("m.")},
                     "v": {k[2:]: v for k, v in opt.items() if k.startswith("v.")}}
    history = {"loss": [float(x) for x in opt["loss_history"]],
               "val": [(int(s), float(v)) for s, v in opt["val_history"]]}
    return Checkpoint(path=path, step=step, params=params, model_config=meta["model_config"],
                      train_config=meta.get("train_config"), tokenizer=meta.get("tokenizer"),
                      chat_template=meta.get("chat_template"), optimizer=optimizer, history=history,
                      data=meta.get("data"))
