"""What the checkpoint readers (safetensors, pytorch_model.bin) share: a table of validated entries, lookup with
a named error, opening the file as a read-only memory map, and closing as a context manager."""
import mmap
import os


class TensorFile:
    """Subclasses set `Error` (their exception class) and `self.path`, fill `self.entries` (name -> entry with
    `.dtype` and `.shape`) and define `close()`."""

    Error: type = ValueError
    entries: dict
    path: str

    def _err(self, msg: str, name: str | None = None) -> Exception:
        """The reader's error, naming the file and, when given, the tensor."""
        return self.Error(f"{self.path}: tensor {name!r}: {msg}" if name is not None else f"{self.path}: {msg}")

    def _map(self, check=None, head: int = 0) -> tuple[int, bytes]:
        """Memory-map self.path read-only into self._mm; `check(size)` may refuse the file before it is mapped.
        Returns (its size, its first `head` bytes). A missing or unreadable file is the reader's error."""
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                first = f.read(head) if head else b""
                if check is not None:
                    check(size)
                self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            raise self._err("file not found") from None
        except OSError as e:
            raise self._err(f"cannot open: {e.strerror or e}") from None
        return size, first

    def names(self) -> list:
        """Every tensor name, in the file's order."""
        return list(self.entries)

    def info(self, name: str) -> tuple:
        """Return (Petit dtype name, shape) of `name`; the reader's error if there is no such tensor."""
        e = self._get(name)
        return e.dtype, e.shape

    def _get(self, name: str):
        e = self.entries.get(name)
        if e is None:
            raise self._err("no such tensor", name)
        return e

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
