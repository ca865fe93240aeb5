"""A remote model as the generation worker holds it (in place of a petit Model), and "loading" one: asking the
backend's /v1/models that it is there, on a load Worker thread."""
from dataclasses import dataclass

from app.models.info import ModelInfo
from app.remote.api import Backend, RemoteError, list_models

REMOTE_CONTEXT = 131072          # what the settings' context field allows; the server decides what it takes


@dataclass
class RemoteModel:
    backend: Backend
    model: str
    weight_type: str = "remote"

    def close(self) -> None:
        """Nothing to free: the model lives on the server."""


def load_remote(key: str, backend: Backend, model: str, report=None) -> tuple:
    """(RemoteModel, ModelInfo) once the server lists `model`; RemoteError (a sentence) otherwise."""
    models = list_models(backend)
    if models and model not in models:
        raise RemoteError(f"{backend.base_url} does not serve the model {model!r} (it lists: "
                          f"{', '.join(models[:10])}{', …' if len(models) > 10 else ''})")
    info = ModelInfo(path=key, name=f"{model} @ {backend.name or backend.base_url}", weight_type="remote",
                     n_params=0, n_layers=0, max_context=REMOTE_CONTEXT, generation={}, has_template=True)
    return RemoteModel(backend, model), info
