"""The Device setting (issue 34, docs/gpu.md): the CPU, or an OpenCL device for the loaded model's matrix products,
changed by loading the model again. On PoCL's CPU device in CI (.ci/run sets PETIT_REQUIRE_OPENCL=1: a missing
device fails there); elsewhere the tests that need a device skip, saying why."""
import os
import sys

import pytest

from app_helpers import send_and_wait

REQUIRED = os.environ.get("PETIT_REQUIRE_OPENCL") == "1"
LOAD_MS = 60000          # a first attach builds the kernels for the device and runs their start-up check


def _choices() -> tuple:
    from app.models.devices import device_choices
    choices, why = device_choices()
    if why:
        if REQUIRED:
            pytest.fail(f"PETIT_REQUIRE_OPENCL=1 but there is no OpenCL device: {why}")
        pytest.skip(f"no OpenCL device here: {why}")
    return choices


def _reloaded(qtbot, window, device: str) -> None:
    qtbot.waitUntil(lambda: not window.models.loading and window.models.info.device == device, timeout=LOAD_MS)


def test_the_panel_offers_the_cpu_then_each_opencl_device(window):
    choices = _choices()
    field = window.settings_panel.fields["device"]
    shown = [field.widget.itemText(i) for i in range(field.widget.count())]
    assert shown == [text for _, text in choices] and shown[0] == "CPU" and len(shown) >= 3
    assert shown[1] == "OpenCL: the first GPU (else the first device)" and shown[2].startswith("OpenCL: ")
    assert field.get() is None and field.widget.isEnabled()          # the CPU alone by default
    assert window.status.weights_label.text() == "q8_0 weights"


def test_choosing_a_device_loads_the_model_again_with_its_products_there(qtbot, window):
    from petit.gpu import choose, list_devices
    _choices()
    name = choose(list_devices()).name
    window.settings_panel.fields["device"].set("gpu")
    _reloaded(qtbot, window, name)
    assert window.status.weights_label.text() == f"q8_0 weights on {name}"
    assert "layers' matrices and the LM head" in window.status.weights_label.toolTip()
    assert send_and_wait(qtbot, window, "what is 12 plus 7?") == "19"            # the CPU's answer
    assert window.models.settings_store.get(window.models.info.path)["device"] == "gpu"
    window.settings_panel.fields["device"].set(None)
    _reloaded(qtbot, window, "CPU")
    assert window.status.weights_label.text() == "q8_0 weights" and window.status.weights_label.toolTip() == ""


def test_a_device_that_is_not_there_leaves_the_model_on_the_cpu_and_says_why(qtbot, window):
    """A setting saved on another machine names a device this one lacks: the model loads, on the CPU, and the
    load's notice says why."""
    _choices()
    window.models.settings_store.set(window.models.info.path, {"device": "9/7"})
    window.models.reload()
    qtbot.waitUntil(lambda: not window.models.loading and window.models.warning_dialog is not None, timeout=LOAD_MS)
    info = window.models.info
    assert info.device == "CPU" and window.status.weights_label.text() == "q8_0 weights"
    assert ("the GPU offload is not used, the model runs on the CPU: no OpenCL device 7 on platform 9"
            in "\n".join(info.warnings))
    assert send_and_wait(qtbot, window, "what is 12 plus 7?") == "19"


def test_without_pyopencl_the_field_offers_the_cpu_alone_and_says_why(make_window, monkeypatch):
    from app.models import devices
    monkeypatch.setitem(sys.modules, "pyopencl", None)           # import pyopencl raises ImportError
    devices.device_choices.cache_clear()
    try:
        field = make_window().settings_panel.fields["device"]
        assert [field.widget.itemText(i) for i in range(field.widget.count())] == ["CPU"]
        assert not field.widget.isEnabled()
        assert "None here: pyopencl is not installed" in field.widget.toolTip()
        assert 'pip install "petit[gpu]"' in field.widget.toolTip()
    finally:
        devices.device_choices.cache_clear()
