"""OpenCL offload of the forward step's matmuls (issue 34; docs/gpu.md). pyopencl is optional: nothing here
imports it until a device is asked for."""
from petit.gpu.devices import Device, GpuUnavailable, choose, list_devices, why_not
from petit.gpu.offload import Offload, attach, detach, start

__all__ = ["Device", "GpuUnavailable", "Offload", "attach", "choose", "detach", "list_devices", "start", "why_not"]
