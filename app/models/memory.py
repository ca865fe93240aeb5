"""How much memory a model will take (its files' sizes) against what the machine has. No psutil: /proc/meminfo on
Linux, GlobalMemoryStatusEx on Windows, os.sysconf elsewhere (macOS: the total only)."""
import ctypes
import os
import sys
from dataclasses import dataclass


@dataclass
class MemoryInfo:
    total: int | None        # bytes of RAM; None when unknown
    available: int | None    # bytes a new allocation can get without swapping; None when unknown


class MEMORYSTATUSEX(ctypes.Structure):
    """Windows' MEMORYSTATUSEX (64 bytes)."""
    _fields_ = [("dwLength", ctypes.c_uint32), ("dwMemoryLoad", ctypes.c_uint32),
                ("ullTotalPhys", ctypes.c_uint64), ("ullAvailPhys", ctypes.c_uint64),
                ("ullTotalPageFile", ctypes.c_uint64), ("ullAvailPageFile", ctypes.c_uint64),
                ("ullTotalVirtual", ctypes.c_uint64), ("ullAvailVirtual", ctypes.c_uint64),
                ("ullAvailExtendedVirtual", ctypes.c_uint64)]


def _windows_memory() -> MemoryInfo:
    status = MEMORYSTATUSEX()
    status.dwLength = ctypes.sizeof(MEMORYSTATUSEX)
    try:
        if ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):
            return MemoryInfo(int(status.ullTotalPhys), int(status.ullAvailPhys))
    except (AttributeError, OSError):
        pass
    return MemoryInfo(None, None)


def machine_memory(meminfo: str = "/proc/meminfo") -> MemoryInfo:
    if sys.platform == "win32":
        return _windows_memory()
    values = {}
    try:
        with open(meminfo) as f:
            for line in f:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts and parts[0].isdigit():
                    values[key] = int(parts[0]) * 1024      # kB
    except OSError:
        pass
    total, available = values.get("MemTotal"), values.get("MemAvailable")
    if total is None:
        try:
            total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            total = None
    if available is None and "MemFree" in values:
        available = values["MemFree"] + values.get("Cached", 0)
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            available = None
    return MemoryInfo(total, available)


def model_bytes(path: str) -> int:
    """The size of a model on disk: a file's size, or the sum of a folder's files (weights, tokenizer, config)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            if not name.startswith("."):
                try:
                    total += os.path.getsize(os.path.join(root, name))
                except OSError:
                    pass
    return total


def human_bytes(n: int | None) -> str:
    if n is None:
        return "unknown"
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def fit_message(path: str, mem: MemoryInfo | None = None) -> tuple[str, bool]:
    """A sentence comparing the model's size with the machine's memory, and whether it fits comfortably."""
    mem = mem or machine_memory()
    need = model_bytes(path)
    text = f"needs about {human_bytes(need)}"
    if mem.available is not None:
        text += f"; {human_bytes(mem.available)} available of {human_bytes(mem.total)}"
        fits = need < 0.8 * mem.available
        if not fits:
            text += " (it may not fit)"
        return text, fits
    return text + f"; this machine has {human_bytes(mem.total)}", True
