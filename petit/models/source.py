"""Where a family's builder gets its tensors: a `TensorSource`, which petit.loading implements for a `.petit` file
(zero-copy views) and for a Hugging Face checkpoint (read, converted and quantized one tensor at a time). The builder
asks by name and expected shape; a missing tensor or a wrong shape is an error naming both. Every tensor handed out is
recorded, so `petit convert` can write exactly what the model runs on and the loader can report tensors nobody asked
for.
"""
import numpy as np

from petit.models.blocks.decoder import Vec
from petit.models.recipe import BLOCK_VALUES, RECIPES, Recipe, fitting
from petit.native import NonFiniteError, Weight, quantize

class TensorSource:
    """Subclasses provide `names()`, `info(name) -> (dtype, shape)`, `stored(name)` (raw bytes as stored, or None
    when the stored form is not what the kernels read) and `f32(name)`.

    Args:
        where: the file or folder, for messages.
        weights: convert weight matrices to this type (None: run them as stored).
    """

    def __init__(self, where: str, weights: str | None = None, search: bool = False):
        self.where, self.weights, self.search = where, weights, search
        self.recipe = None                        # a recipe (q4_k_m) picks each matrix's type: built at first use
        if weights in RECIPES:
            self.recipe, self.weights = weights, None
        self.used: dict[str, tuple[str, tuple, np.ndarray]] = {}     # name -> (dtype, shape, bytes) handed out
        self.fallbacks: list[tuple[str, str, str]] = []   # (matrix, asked type, type written): rows not whole blocks

    def has(self, name: str) -> bool:
        return name in self.names()

    def _check(self, name: str, shape) -> str:
        if not self.has(name):
            raise ValueError(f"{self.where}: tensor {name!r} is missing")
        dtype, got = self.info(name)
        if tuple(got) != tuple(shape):
            raise ValueError(f"{self.where}: tensor {name!r} has shape {tuple(got)}, expected {tuple(shape)}")
        return dtype

    def weight(self, name: str, shape) -> Weight:
        """A matrix [out, in] for the kernels, in the load's weight type."""
        dtype = self._check(name, shape)
        target = self.weights or dtype
        if self.recipe is not None:
            if isinstance(self.recipe, str):
                self.recipe = Recipe(self.recipe, self.names())
            target = self.recipe(name)
        raw = self.stored(name) if target == dtype else None
        if raw is None:
            if (fit := fitting(target, shape[1])) != target:
                self.fallbacks.append((name, target, fit))
                target = fit
                raw = self.stored(name) if target == dtype else None
        if raw is None:
            try:
                raw = self.convert(name, shape, target)
            except NonFiniteError as e:      # a NaN / infinity the quantizer met: name the tensor too
                raise ValueError(f"{self.where}: tensor {name!r}: {e}") from None
        w = Weight(raw, target, shape)
        self.used[name] = (target, tuple(shape), raw)
        return w

    def convert(self, name: str, shape, target: str) -> np.ndarray:
        """The matrix `name` in `target` rows (subclasses may convert slice by slice)."""
        if target == "q8_0" and (exact := self.exact_q8(name)) is not None:
            return exact
        return quantize(self.f32(name), target, self.search)

    def ternary(self, name: str, shape) -> Weight:
        """A BitNet matrix as tq2 rows (ternary values and a scale), whatever the load's weight type: the model
        computes with ternary weights and per-token int8 activations, and another type would change its logits. As
        stored (a .petit file), exactly from a packed checkpoint (exact_tq2), or by BitNet's absmean rule from float
        master weights."""
        dtype = self._check(name, shape)
        raw = self.stored(name) if dtype == "tq2" else None
        if raw is None:
            raw = self.exact_tq2(name)
        if raw is None:
            try:
                raw = quantize(self.f32(name), "tq2")
            except NonFiniteError as e:
                raise ValueError(f"{self.where}: tensor {name!r}: {e}") from None
        w = Weight(raw, "tq2", shape)
        self.used[name] = ("tq2", tuple(shape), raw)
        return w

    def exact_tq2(self, name: str) -> np.ndarray | None:
        """The matrix as tq2 rows with exactly its stored ternary values and scale (a packed BitNet checkpoint), or
        None."""
        return None

    def exact_q8(self, name: str) -> np.ndarray | None:
        """The matrix as q8_0 rows with exactly its stored values, where its type allows (GGUF's Q5_0, IQ4_NL), or
        None: then it is decoded and quantized."""
        return None

    def fallback_note(self) -> str | None:
        """One line on the matrices written in another type than asked (rows not whole blocks of it), or None."""
        if not self.fallbacks:
            return None
        kinds = {}
        for name, asked, got in self.fallbacks:
            kinds.setdefault((asked, got), []).append(name)
        parts = [f"{len(v)} as {got} instead of {asked} (rows not whole {BLOCK_VALUES[asked]}-value "
                 f"blocks: {', '.join(v[:3])}{' ...' if len(v) > 3 else ''})" for (asked, got), v in kinds.items()]
        return f"{self.where}: wrote {len(self.fallbacks)} matri(ces) in another type: " + "; ".join(parts)

    def float_weight(self, name: str, shape) -> Weight:
        """A matrix kept in float32 whatever the load's weight type (an MoE router: routing stays in float)."""
        self._check(name, shape)
        a = np.ascontiguousarray(self.f32(name).reshape(shape), np.float32)
        raw = a.view(np.uint8).reshape(shape[0], -1)
        self.used[name] = ("f32", tuple(shape), raw)
        return Weight(raw, "f32", shape)

    def vec(self, name: str, shape, add: float = 0.0) -> Vec:
        """A float32 vector (a norm weight, a bias) or small [rows, n] block; `add` is added first (Gemma's 1 + w)."""
        self._check(name, shape)
        a = self.f32(name).reshape(shape)
        self.used[name] = ("f32", tuple(shape), np.ascontiguousarray(a, np.float32))
        return Vec(a + np.float32(add) if add else a)

    def array(self, name: str, shape) -> np.ndarray:
        """A float32 array kept as is (learned position embeddings)."""
        self._check(name, shape)
        a = np.ascontiguousarray(self.f32(name).reshape(shape), np.float32)
        self.used[name] = ("f32", tuple(shape), a)
        return a

    def unused(self) -> list[str]:
        return sorted(set(self.names()) - set(self.used))
