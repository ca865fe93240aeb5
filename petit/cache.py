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


class StateCache(KVCache):
    """The recurrent state of a state-space model (Mamba) in place of a KV cache: per layer its conv state and its
    scan state, float32, the same size at position 10 as at position 10,000. `n_ctx` only bounds the positions.

    A recurrent state cannot be rewound like a KV cache: `snapshot()` keeps a copy of the state at the current
    position (the generation session takes one at the end of every reply), and `rewind(pos)` goes back to a
    snapshot's position (or to 0: a fresh state); `restorable(pos)` is the latest position at or before `pos` it can
    rewind to, from which a prompt is prefilled again. The plan reads the states through k_ptr (conv) and v_ptr
    (scan)."""

    MAX_SNAPSHOTS = 8

    def __init__(self, n_layers: int, conv_shape: tuple, ssm_shape: tuple, n_ctx: int):
        if n_ctx <= 0:
            raise ValueError(f"cache size must be positive, got {n_ctx}")
        self.n_ctx, self.kv_type, self.values_are_keys = n_ctx, "f32", False
        self.layout = ("state", n_layers, tuple(conv_shape), tuple(ssm_shape))
        self._pos = 0
        self.k = np.zeros((n_layers,) + tuple(conv_shape), np.float32)      # conv states
        self.v = np.zeros((n_layers,) + tuple(ssm_shape), np.float32)       # scan states
        self.k_ptr = [ffi.cast("float *", ffi.from_buffer(self.k[i])) for i in range(n_layers)]
        self.v_ptr = [ffi.cast("float *", ffi.from_buffer(self.v[i])) for i in range(n_layers)]
        self.snapshots: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def snapshot(self) -> None:
        """Keep the state at the current position (the oldest of MAX_SNAPSHOTS goes)."""
        if self._pos == 0:
            return
        self.snapshots[self._pos] = (self.k.copy(), self.v.copy())
        while len(self.snapshots) > self.MAX_SNAPSHOTS:
            del self.snapshots[min(self.snapshots)]

    def restorable(self, pos: int) -> int:
        """The latest position <= pos the state can go back to (0 at least)."""
        return max([p for p in self.snapshots if p <= min(pos, self._pos)] + [0])

    def rewind(self, pos: int) -> None:
        if not 0 <= pos <= self.pos:
            raise ValueError(f"cannot rewind the cache to {pos}: it holds {self.pos} positions")
        if pos == self._pos:
            return
        if pos == 0:
            self.k[:] = 0.0
            self.v[:] = 0.0
        elif pos in self.snapshots:
            k, v = self.snapshots[pos]
            self.k[:], self.v[:] = k, v
        else:
            raise ValueError(f"a recurrent state cannot be rewound to position {pos}: it can go back to "
                             f"{sorted(self.snapshots) or 'none'} or 0 (restorable() tells which)")
        self.snapshots = {p: s for p, s in self.snapshots.items() if p <= pos}
        self._pos = pos

    @property
    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes


class HybridCache(StateCache):
    """A hybrid model's cache: a KV cache for its attention layers ([n_kv, n_ctx, head_dim] keys and values each)
    and a recurrent state for its other layers (a conv state, and a scan state: LFM2's short convolutions have only
    the first, its second is a placeholder). Snapshots hold the recurrent states (the KV rows are positional: going
    back to a position only forgets the rows after it)."""

    def __init__(self, n_layers: int, state_layers: tuple, conv_shape: tuple, ssm_shape: tuple, n_kv: int,
                 n_ctx: int, head_dim: int, empty_layers: tuple = ()):
        if n_ctx <= 0:
            raise ValueError(f"cache size must be positive, got {n_ctx}")
        self.n_ctx, self.kv_type, self.values_are_keys = n_ctx, "f32", False
        self.layout = ("hybrid", n_layers, tuple(state_layers), tuple(conv_shape), tuple(ssm_shape), n_kv, head_dim) + \
            ((tuple(empty_layers),) if empty_layers else ())
        self._pos = 0
        state, empty = set(state_layers), set(empty_layers)       # empty: blocks that keep nothing (an MLP block)
        kv = (n_kv, n_ctx, head_dim)
        shape = lambda i, s: s if i in state else (1,) if i in empty else kv      # noqa: E731
        self.k = [np.zeros(shape(i, conv_shape), np.float32) for i in range(n_layers)]
        self.v = [np.zeros(shape(i, ssm_shape), np.float32) for i in range(n_layers)]
        self.state_layers = tuple(sorted(state))
        self.k_ptr = [ffi.cast("float *", ffi.from_buffer(a)) for a in self.k]
        self.v_ptr = [ffi.cast("float *", ffi.from_buffer(a)) for a in self.v]
        self.snapshots: dict[int, tuple] = {}

    def snapshot(self) -> None:
        if self._pos == 0:
            return
        self.snapshots[self._pos] = tuple((self.k[i].copy(), self.v[i].copy()) for i in self.state_layers)
        while len(self.snapshots) > self.MAX_SNAPSHOTS:
            del self.snapshots[min(self.snapshots)]

    def rewind(self, pos: int) -> None:
        if not 0 <= pos <= self.pos:
            raise ValueError(f"cannot rewind the cache to {pos}: it holds {self.pos} positions")
        if pos == self._pos:
            return
        if pos == 0:
            for i in self.state_layers:
                self.k[i][:] = 0.0
                self.v[i][:] = 0.0
        elif pos in self.snapshots:
            for i, (k, v) in zip(self.state_layers, self.snapshots[pos]):
                self.k[i][:], self.v[i][:] = k, v
        else:
            raise ValueError(f"a recurrent state cannot be rewound to position {pos}: it can go back to "
                             f"{sorted(self.snapshots) or 'none'} or 0 (restorable() tells which)")
        self.snapshots = {p: s for p, s in self.snapshots.items() if p <= pos}
        self._pos = pos

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.k) + sum(a.nbytes for a in self.v)
