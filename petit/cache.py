"""The KV cache: per layer, keys and values [n_kv_heads, n_ctx, head_dim], and the number of positions filled.
Rewinding is just moving `pos` back: positions past it are overwritten by the next tokens.

kv_type "f32" stores float32; "int8" stores each row (one position of one kv head) as int8 with an fp32 scale,
about a quarter of the memory (the logit difference is measured in tests/test_session.py)."""
import numpy as np

from petit.native import ffi


class KVCache:
    def __init__(self, n_layers: int, n_kv_heads: int, n_ctx: int, head_dim: int, kv_type: str = "f32",
                 values_are_keys: bool = False):
        """values_are_keys: one buffer for both (latent attention's cache: each position's row once, its values the
        keys' rows); the kernels then store each row once."""
        if n_ctx <= 0:
            raise ValueError(f"cache size must be positive, got {n_ctx}")
        if kv_type not in ("f32", "int8"):
            raise ValueError(f"kv_type must be f32 or int8, got {kv_type!r}")
        self.n_ctx, self.kv_type = n_ctx, kv_type
        self.layout = (n_layers, n_kv_heads, n_ctx, head_dim)   # checked by the model before every pass
        self._pos = 0
        shape = (n_layers, n_kv_heads, n_ctx, head_dim)
        ctype = "float *" if kv_type == "f32" else "int8_t *"
        self.k = np.zeros(shape, np.float32 if kv_type == "f32" else np.int8)
        self.values_are_keys = values_are_keys
        self.v = self.k if values_are_keys else np.zeros_like(self.k)
        self.k_ptr = [ffi.cast(ctype, ffi.from_buffer(self.k[i])) for i in range(n_layers)]
        self.v_ptr = [ffi.cast(ctype, ffi.from_buffer(self.v[i])) for i in range(n_layers)]
        if kv_type == "int8":
            self.k_scale = np.zeros(shape[:3], np.float32)
            self.v_scale = self.k_scale if values_are_keys else np.zeros_like(self.k_scale)
            self.ks_ptr = [ffi.cast("float *", ffi.from_buffer(self.k_scale[i])) for i in range(n_layers)]
            self.vs_ptr = [ffi.cast("float *", ffi.from_buffer(self.v_scale[i])) for i in range(n_layers)]

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
        both = 1 if self.values_are_keys else 2
        scales = self.k_scale.nbytes * both if self.kv_type == "int8" else 0
        return self.k.nbytes * both + scales
