"""A value-type description of a loaded model, safe to send between threads (the Model itself stays on the
generation worker)."""
import os
from dataclasses import dataclass, field


@dataclass
class ModelInfo:
    path: str                    # as opened (a .petit or GGUF file, or a Hugging Face folder)
    name: str                    # for the status bar and the message headers
    weight_type: str             # q8_0, q4_0, f16, bf16, f32
    n_params: int
    n_layers: int
    max_context: int             # Model.context_length
    generation: dict = field(default_factory=dict)   # the model's generation defaults
    has_template: bool = True
    warnings: list = field(default_factory=list)     # what the engine says the user should know about the file
    device: str = "CPU"          # where its matrix products run: the CPU, or the OpenCL device's name
    device_note: str = ""        # what runs on that device and what stays on the CPU (app.models.devices)


def model_key(path: str) -> str:
    """The key a model's settings and recent-list entry are stored under: its absolute, normalised path (a remote
    model's "remote:ID/MODEL" as it is)."""
    if path.startswith("remote:"):
        return path
    return os.path.normpath(os.path.abspath(os.path.expanduser(path)))


def display_name(path: str) -> str:
    if path.startswith("remote:"):
        return path.partition("/")[2]
    path = os.path.normpath(path)
    base = os.path.basename(path)
    for ext in (".petit", ".gguf"):
        if base.endswith(ext):
            return base[:-len(ext)]
    return base


def describe(model, path: str) -> ModelInfo:
    """Read a petit Model's public attributes into a ModelInfo."""
    meta = model.metadata or {}
    generation = meta.get("generation")
    return ModelInfo(path=path, name=display_name(path), weight_type=model.weight_type, n_params=model.n_params,
                     n_layers=model.n_layers, max_context=int(model.context_length),
                     generation=dict(generation) if isinstance(generation, dict) else {},
                     has_template=bool(meta.get("chat_template")),
                     warnings=[str(w) for w in (getattr(model, "warnings", None) or [])])


def count_text(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)
