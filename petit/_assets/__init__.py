"""Petit's bundled assets (the default model, its evaluation, the app's fonts and icons) as package data.

The files live in the repository's `assets/` folder; pyproject.toml's package-dir maps that folder to this package,
so `pip install .` installs them here, in `petit/_assets/`, where importlib.resources finds them (petit.assets). In
a source checkout this file only marks the package for setuptools' discovery, and petit.assets reads `assets/`.
"""
