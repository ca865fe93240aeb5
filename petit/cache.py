"""The KV cache: per layer, keys and values [n_kv_heads, n_ctx, head_dim] in float32, and the number of positions
filled. Rewinding is just moving `pos` back: positions past it are overwritten by the next tokens."""
import numpy as np

from petit.kernels import ffi


class KVCache:
    def __init__(self, n_layers: int, n_kv_heads: int, n_ctx: int, head_dim: int):
        if n_ctx <= 0:
            raise ValueError(f"cache size must be positive, got {n_ctx}")
        self.n_ctx = n_ctx
        self.layout = (n_layers, n_kv_heads, n_ctx, head_dim)   # checked by the model before every pass
        self._pos = 0
        self.k = np.zeros((n_layers, n_kv_heads, n_ctx, head_dim), np.float32)
        self.v = np.zeros_like(self.k)
        self.k_ptr = [ffi.cast("float *", ffi.from_buffer(self.k[i])) for i in range(n_layers)]
        self.v_ptr = [ffi.cast("float *", ffi.from_buffer(self.v[i])) for i in range(n_layers)]

    @property
    def pos(self) -> int:
        """Positions filled (the next token goes here)."""
        return self._pos

    @pos.setter
    def pos(self, value: int) -> None:
        if not 0 <= value <= self.n_ctx:
            raise ValueError(f"cache position {value} outside 0..{self.n_ctx}")
        self._pos = value

    def rewind(self, pos: int) -> None:
        """Forget every position from `pos` on."""
        if not 0 <= pos <= self.pos:
            raise ValueError(f"cannot rewind the cache to {pos}: it holds {self.pos} positions")
        self.pos = pos

    @property
    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes
