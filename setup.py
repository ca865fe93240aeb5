"""Build hook: compiles the C kernels in kernels/ with cffi (out-of-line API mode) at install time.

All metadata lives in pyproject.toml; this file exists only because `cffi_modules` is a setup() keyword.
"""
from setuptools import setup

setup(cffi_modules=["kernels/build.py:ffibuilder"])
