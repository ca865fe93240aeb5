"""PyInstaller hook for `petit`: the modules a static scan cannot be sure of, and the bundled assets.

- `_cffi_backend`: the compiled kernels (petit/_kernels*.so, built by `pip install -e .`) load it from C;
- every petit submodule (the model families in petit.models are imported explicitly, but taking the whole package
  keeps a new module from being forgotten);
- the assets (default models, their evaluation, fonts, icons) go to `petit/_assets/` in the bundle, where
  petit.assets finds them through importlib.resources, as in an installed wheel.
"""
import os

from PyInstaller.utils.hooks import collect_submodules

hiddenimports = ["_cffi_backend"] + collect_submodules("petit", filter=lambda name: name != "petit._assets")


def _asset_dir() -> str:
    from petit.assets import DEFAULT_MODEL, asset_dirs     # a checkout's assets/ or an installed petit/_assets/
    for d in asset_dirs():
        if os.path.isfile(os.path.join(d, DEFAULT_MODEL)):
            return d
    raise SystemExit(f"hook-petit: the bundled model {DEFAULT_MODEL} was not found in {asset_dirs()}")


_src = _asset_dir()
datas = [(os.path.join(_src, name), "petit/_assets")
         for name in ("default-q8_0.petit", "default-q4_0.petit", "default-model-eval.json")]
datas += [(os.path.join(_src, folder), f"petit/_assets/{folder}")
          for folder in ("fonts", "icons") if os.path.isdir(os.path.join(_src, folder))]
