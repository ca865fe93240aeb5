"""The install-time build (kernels/build.py, run by pip) stops with a message a user can act on when the machine
lacks what compiling the kernels needs, instead of a compiler error (found on a fresh Debian 12)."""
import runpy
import sysconfig
from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parents[1] / "kernels" / "build.py"


def test_missing_python_headers_are_named_with_the_package_that_installs_them(monkeypatch, capsys, tmp_path):
    real = sysconfig.get_paths
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: dict(real(*a, **k), include=str(tmp_path)))
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(BUILD))
    assert e.value.code == 1
    assert capsys.readouterr().err == (
        f"\nerror: petit builds its kernels against Python's C headers, and {tmp_path}/Python.h is missing.\n"
        f"Install them (Debian/Ubuntu: 'apt-get install python3-dev') and run pip again.\n\n")


def test_the_build_script_loads_where_the_headers_are_there():
    namespace = runpy.run_path(str(BUILD))
    assert "ffibuilder" in namespace
