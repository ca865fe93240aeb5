"""Exporting a checkpoint as .petit files (trainer.export.export_checkpoint), one weight type after another, on a
worker; and what the panels say about a checkpoint before exporting it."""
import json
import os

from trainer.checkpoint import CONFIG_FILE
from trainer.export import export_checkpoint

WEIGHTS = (("f32", "fp32"), ("q8_0", "q8_0"), ("q4_0", "q4_0"))       # (export type, what the panel calls it)
LABELS = dict(WEIGHTS)


def model_path(folder: str, stem: str, weights: str) -> str:
    return os.path.join(folder, f"{stem}-{weights}.petit")


def name_problem(stem: str) -> str | None:
    """Why `stem` cannot name the model files inside the chosen folder (a path, not a name: it would write them
    elsewhere), or None when it is a plain file name."""
    if not stem:
        return "give the model files a name"
    if "/" in stem or "\\" in stem or os.sep in stem or (os.altsep and os.altsep in stem):
        return (f"the name {stem!r} contains a folder separator (/ or \\): give a plain file name; the files are "
                f"written in the \"Save in\" folder")
    if os.path.isabs(stem) or os.path.splitdrive(stem)[0] or "\0" in stem:
        return f"the name {stem!r} is not a plain file name: give one without a drive or folder"
    return None


def default_target(checkpoint: str) -> tuple[str, str]:
    """(folder, file-name stem) for a checkpoint: the run folder holding it, named after that folder."""
    ckpt = os.path.abspath(checkpoint)
    folder = os.path.dirname(ckpt) if os.path.basename(ckpt) == "checkpoint" else ckpt
    return folder, os.path.basename(folder) or "model"


def export_all(checkpoint: str, folder: str, stem: str, weights: list, report=None) -> list[dict]:
    """Export `checkpoint` once per weight type; returns export_checkpoint's summaries, with "label". ValueError
    when `stem` is not a plain file name (nothing is written)."""
    problem = name_problem(stem)
    if problem:
        raise ValueError(problem[0].upper() + problem[1:] + ".")
    os.makedirs(folder, exist_ok=True)
    out = []
    for w in weights:
        summary = export_checkpoint(checkpoint, model_path(folder, stem, w), weights=w)
        summary["label"] = LABELS[w]
        out.append(summary)
        if report is not None:
            report(summary)
    return out


def describe_checkpoint(checkpoint: str) -> str:
    """One line about a checkpoint directory (read from its config.json only), or why it is not one."""
    path = os.path.join(checkpoint, CONFIG_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except FileNotFoundError:
        return "no checkpoint here (a checkpoint folder holds config.json and weights.npz)"
    except (OSError, ValueError) as e:
        return f"cannot read {path}: {e}"
    from app.training.presets import format_count
    from trainer.model import count_params
    try:
        cfg = meta["model_config"]
        params = format_count(count_params(cfg))
        steps = (meta.get("train_config") or {}).get("steps")
        step = f"step {meta['step']:,}" + (f" of {steps:,}" if steps else "")
        kind = "chat model" if meta.get("chat_template") else "text model"
        return (f"{step}, {params} parameters, {cfg['num_hidden_layers']} layers × {cfg['hidden_size']}, "
                f"vocabulary {cfg['vocab_size']}, {kind}")
    except (KeyError, TypeError, ValueError):
        return f"{path} is not a Petit training checkpoint"
