"""Where Petit's bundled assets live: the default model (`default-q8_0.petit`, `default-q4_0.petit`), its
evaluation (`default-model-eval.json`) and the app's fonts (`fonts/`) and icons (`icons/`).

They are package data, found through `importlib.resources` at `petit/_assets/`:

- `pip install .` puts them there: the repository keeps them in `assets/`, and pyproject.toml's package-dir maps
  that folder to the package `petit._assets` (`petit/_assets/__init__.py` in the repository only marks the
  package for setuptools' discovery);
- a PyInstaller bundle (`python build_app.py`) carries them at the same place, under `sys._MEIPASS`;
- a source checkout or an editable install (`pip install -e .`) reads `assets/` beside the `petit` folder.
"""
import importlib.resources
import os

DEFAULT_MODEL = "default-q8_0.petit"
PACKAGE_DIR = "_assets"          # inside the petit package


def package_dir() -> str | None:
    """The installed (or bundled) `petit/_assets` folder, via importlib.resources; None when there is none."""
    try:
        root = importlib.resources.files("petit").joinpath(PACKAGE_DIR)
    except (ImportError, TypeError, ValueError):    # pragma: no cover - petit always importable
        return None
    if not isinstance(root, os.PathLike):           # pragma: no cover - a zipped install: models are memory-mapped
        return None                                 # from real files, which a zip does not have
    path = os.fspath(root)
    return path if os.path.isdir(path) else None


def checkout_dir() -> str:
    """`assets/` of the source checkout this petit was imported from (also an editable install)."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(os.path.dirname(here), "assets")


def asset_dirs() -> list[str]:
    """Every folder the bundled assets may be in, in the order they are looked for."""
    dirs = []
    pkg = package_dir()
    if pkg is not None:
        dirs.append(pkg)
    dirs.append(checkout_dir())
    return dirs


def default_model_path(name: str = DEFAULT_MODEL) -> str:
    """The bundled model's path.

    Raises:
        FileNotFoundError: naming every place looked in.
    """
    for d in asset_dirs():
        path = os.path.join(d, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"the bundled model {name} is not installed (looked in {', '.join(asset_dirs())})")


def bundled_models() -> list[str]:
    """The models that ship with Petit (every .petit file beside the default model), for a model list; [] when
    the bundled model is not installed."""
    try:
        folder = os.path.dirname(default_model_path())
    except FileNotFoundError:
        return []
    return [os.path.join(folder, n) for n in sorted(os.listdir(folder)) if n.endswith(".petit")]
