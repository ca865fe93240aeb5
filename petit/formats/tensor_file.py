"""What the checkpoint readers (safetensors, pytorch_model.bin) share: a table of validated entries, lookup with
a named error, and closing as a context manager."""


class TensorFile:
    """Subclasses set `Error` (their exception class) and `self.path`, fill `self.entries` (name -> entry with
    `.dtype` and `.shape`) and define `close()`."""

    Error: type = ValueError
    entries: dict
    path: str

    def _err(self, msg: str, name: str | None = None) -> Exception:
        """The reader's error, naming the file and, when given, the tensor."""
        return self.Error(f"{self.path}: tensor {name!r}: {msg}" if name is not None else f"{self.path}: {msg}")

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
