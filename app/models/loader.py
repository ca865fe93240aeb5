"""Loading a model, the work a load Worker (app.threads) runs. petit.load cannot be interrupted, so cancelling a
load means its result is closed when it arrives (`close_loaded`, the worker's discard); the app goes back to the
old model at once."""
import petit
from app.models.info import describe
from app.threads import Worker


def load_model(path: str, weights: str | None = None, report=None) -> tuple:
    """(the Model, its ModelInfo). Raises what petit.load raises: missing, corrupt, unsupported, the engine says
    which."""
    model = petit.load(path, weights=weights)
    try:
        return model, describe(model, path)
    except BaseException:
        model.close()
        raise


def close_loaded(result: tuple) -> None:
    model, _info = result
    model.close()


def load_worker(path: str, weights: str | None = None) -> Worker:
    """A Worker loading `path`: succeeded((model, info)) or failed(the engine's message)."""
    return Worker(load_model, path, weights, name="petit-load", discard=close_loaded)
