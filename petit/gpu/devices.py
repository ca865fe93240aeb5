"""OpenCL platforms and devices (issue 34): what this machine has, which one `--gpu` would use and why another is
not. pyopencl is optional (`pip install "petit[gpu]"`); without it, or without a driver, there are no devices and
`missing()` says why."""
from dataclasses import dataclass


class GpuUnavailable(RuntimeError):
    """No OpenCL device can run the offload: the message says why."""


@dataclass
class Device:
    platform: int           # index among the platforms (--gpu-platform)
    index: int              # index among its platform's devices (--gpu-device)
    platform_name: str
    name: str
    kind: str               # GPU, CPU, ACCELERATOR...
    global_mem: int         # bytes
    max_alloc: int          # the largest one buffer, bytes
    version: str
    handle: object = None   # the pyopencl.Device

    @property
    def is_gpu(self) -> bool:
        return self.kind == "GPU"

    def describe(self) -> str:
        return (f"platform {self.platform} device {self.index}: {self.name} ({self.kind}, "
                f"{self.global_mem / 2**30:.1f} GiB, {self.version.strip()}; {self.platform_name})")


def opencl():
    """The pyopencl module, or GpuUnavailable saying how to get it."""
    try:
        import pyopencl
    except ImportError as e:
        raise GpuUnavailable(f"pyopencl is not installed ({e}): pip install \"petit[gpu]\" (pyopencl; "
                             "pocl-binary-distribution adds a CPU OpenCL device)") from None
    return pyopencl


def list_devices() -> list[Device]:
    """Every device of every platform, platform by platform (GpuUnavailable without pyopencl; [] without a driver)."""
    cl = opencl()
    try:
        platforms = cl.get_platforms()
    except cl.Error:                         # no ICD loader / no platform installed
        return []
    out = []
    for p, plat in enumerate(platforms):
        try:
            devs = plat.get_devices()
        except cl.Error:
            continue
        for i, d in enumerate(devs):
            kind = next((k for k in ("GPU", "ACCELERATOR", "CPU", "CUSTOM")
                         if d.type & getattr(cl.device_type, k, 0)), str(d.type))
            out.append(Device(p, i, plat.name.strip(), d.name.strip(), kind, int(d.global_mem_size),
                              int(d.max_mem_alloc_size), d.version, d))
    return out


def choose(devices: list[Device], platform: int | None = None, device: int | None = None) -> Device:
    """The device `--gpu` uses: the one named by platform / device (either alone: the first of that platform, that
    index on platform 0), else the first GPU, else the first device of any kind (PoCL's CPU device: the offload then
    runs, slower than the CPU path, which is how CI proves the kernels). GpuUnavailable when none matches."""
    if not devices:
        raise GpuUnavailable("no OpenCL platform or device found (no driver installed; pip install "
                             "pocl-binary-distribution adds a CPU device)")
    if platform is not None or device is not None:
        p, d = platform or 0, device or 0
        for dev in devices:
            if dev.platform == p and dev.index == d:
                return dev
        have = ", ".join(f"{x.platform}/{x.index}" for x in devices)
        raise GpuUnavailable(f"no OpenCL device {d} on platform {p} (platform/device here: {have})")
    gpus = [d for d in devices if d.is_gpu]
    return gpus[0] if gpus else devices[0]


def why_not(chosen: Device, dev: Device) -> str:
    """Why `--gpu` alone does not use dev (chosen is what it uses): what `petit info` says beside each device."""
    if chosen.is_gpu and not dev.is_gpu:
        return "not a GPU"
    if chosen.is_gpu:
        return "a GPU listed before it comes first"
    return "no GPU here: the first device is used"
