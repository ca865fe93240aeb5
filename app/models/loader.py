"""Loading a model, the work a load Worker (app.threads) runs. petit.load cannot be interrupted, so cancelling a
load means its result is closed when it arrives (`close_loaded`, the worker's discard); the app goes back to the
old model at once."""
import petit
from app.models.devices import offload
from app.models.info import describe
from app.threads import Worker


def load_model(path: str, weights: str | None = None, device: str | None = None, report=None) -> tuple:
    """(the Model, its ModelInfo), its products on `device` (app.models.devices: None the CPU). Raises what
    petit.load raises: missing, corrupt, unsupported, the engine says which; a device that cannot be used is a
    warning, the model running on the CPU."""
    model = petit.load(path, weights=weights)
    try:
        where, note, warning = offload(model, device)
        info = describe(model, path)
        info.device, info.device_note = where, note
        if warning:
            info.warnings.append(warning)
        return model, info
    except BaseException:
        model.close()
        raise


def close_loaded(result: tuple) -> None:
    model, _info = result
    model.close()


def load_worker(path: str, weights: str | None = None, device: str | None = None) -> Worker:
    """A Worker loading `path`: succeeded((model, info)) or failed(the engine's message)."""
    return Worker(load_model, path, weights, device, name="petit-load", discard=close_loaded)
