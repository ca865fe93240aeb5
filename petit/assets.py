"""Where the bundled default model lives: `assets/` of a source checkout (also an editable install), or
`<prefix>/share/petit/assets` where `pip install .` puts it (pyproject's data-files)."""
import os
import sys

DEFAULT_MODEL = "default-q8_0.petit"


def asset_dirs() -> list[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(os.path.dirname(here), "assets"), os.path.join(sys.prefix, "share", "petit", "assets")]


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
