"""Where a model's matrix products run: the CPU, or an OpenCL device through petit's offload (docs/gpu.md).

A model's "device" setting is None for the CPU alone (the default, as `petit run` without --gpu), "gpu" for the
device `--gpu` would use (the first GPU, else the first device) or "P/D" for device D of platform P (`petit info`'s
numbers). The load worker attaches it once the model is loaded; a device that cannot run the offload leaves the
model on the CPU, and the load's warnings say why."""
import functools

from petit.gpu import GpuUnavailable, attach, list_devices

CPU = "CPU"


@functools.cache
def device_choices() -> tuple[tuple, str]:
    """((value, shown as), ...) for the settings' Device field, and "" or why there is no OpenCL device (asked once:
    listing the platforms loads their drivers)."""
    try:
        devices = list_devices()
        why = "" if devices else "no OpenCL platform or device found (no driver installed)"
    except GpuUnavailable as e:
        devices, why = [], str(e)
    if not devices:
        return ((None, CPU),), why
    return ((None, CPU), ("gpu", "OpenCL: the first GPU (else the first device)")) + tuple(
        (f"{d.platform}/{d.index}", f"OpenCL: {d.name} ({d.kind}, platform {d.platform} device {d.index})")
        for d in devices), ""


def offload(model, device: str | None) -> tuple[str, str, str]:
    """Attach the `device` a model's setting names to the loaded `model`: (where its products run: CPU or the
    device's name; what runs there and what stays on the CPU, or ""; a warning for the user, or "")."""
    if not device:
        return CPU, "", ""
    try:
        platform, index = (None, None) if device == "gpu" else (int(n) for n in device.split("/"))
        off = attach(model, platform, index)
    except (GpuUnavailable, ValueError) as e:
        return CPU, "", f"the GPU offload is not used, the model runs on the CPU: {e}"
    return off.device.name, "\n".join([off.describe()] + [f"on the CPU: {s}" for s in off.skipped]), ""
