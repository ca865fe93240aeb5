"""What the checkpoint readers (safetensors, pytorch_model.bin) share: a table of validated entries, lookup with
a named error, and closing as a context manager."""


class TensorFile:
    """Subclasses fill `self.entries` (name -> entry with `.dtype` and `.shape`) and define `_err(msg, name)` and
    `close()`."""

    entries: dict

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
