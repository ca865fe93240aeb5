"""An independent float64 forward over a `.petit` file, the yardstick `petit verify` holds the engine to.

It shares no code with the engine: the file is parsed and its blocks decoded here (petit_reader.py), each family's
architecture is described from transformers' definitions (families/, one module per group of families, into the
plain data of spec.py) and run by one NumPy forward (forward.py, ops.py, rope.py). It takes token ids (no
tokenizer) and runs the whole sequence at once with a causal mask, no cache, every product in float64 on the weights
exactly as stored. By default activations are not rounded; `round_activations=True` rounds the input of each product
with a q8_0 / q4_0 matrix to int8 blocks (per 32 values an fp32 scale max|x| / 127), as the engine's integer
kernels do, leaving little more than float rounding between the two.

    ref = Reference("model.petit")
    logits = ref.logits([1, 2, 3])           # float64 [3, vocab]

A model_type the reference does not model is refused (ValueError naming it): a verdict needs the right architecture.
"""
import numpy as np

from trainer.reference.families import FAMILIES, UnsupportedFamily, spec_for
from trainer.reference.forward import Forward
from trainer.reference.petit_reader import PetitReader, decode, round_to_int8_blocks

__all__ = ["FAMILIES", "Reference", "UnsupportedFamily", "decode", "round_to_int8_blocks"]


class Reference:
    """A `.petit` model, read and run independently of the engine.

    Attributes:
        config: the metadata's `config` dict (Hugging Face names); metadata: the whole metadata dict.
        tensors: name -> (dtype, shape, absolute byte offset, nbytes).
        spec: the ModelSpec the family module made of the config.

    Raises (from __init__):
        ValueError: not a readable version-1 `.petit` file, a model_type (or feature) the reference does not model,
            or a tensor the model needs is missing.
        OSError: the file cannot be opened.
    """

    def __init__(self, path, round_activations: bool = False):
        self.path = str(path)
        self._reader = PetitReader(path)
        try:
            self.metadata, self.config, self.tensors = self._reader.metadata, self._reader.config, self._reader.tensors
            self.spec = spec_for(self.config, self.tensors)
            missing = sorted(n for n in _names(self.spec) if n not in self.tensors)
            if missing:
                raise ValueError(f"{self.path}: tensor(s) {', '.join(missing[:5])} missing")
        except ValueError as e:
            self.close()
            raise ValueError(str(e) if str(e).startswith(self.path) else f"{self.path}: {e}") from None
        except BaseException:
            self.close()
            raise
        self._forward = Forward(self._reader, self.spec)
        self.round_activations = round_activations
        self._memo = {}               # (ids, round_activations) -> logits: the file cannot change under the map

    @property
    def round_activations(self) -> bool:
        return self._forward.round_activations

    @round_activations.setter
    def round_activations(self, value: bool) -> None:
        self._forward.round_activations = bool(value)

    def raw(self, name: str) -> memoryview:
        """The stored bytes of a tensor (no copy)."""
        return self._reader.raw(name)

    def weight(self, name: str) -> np.ndarray:
        """A tensor decoded to float64."""
        return self._reader.weight(name)

    def logits(self, ids) -> np.ndarray:
        """The float64 logits [len(ids), vocab] of every position of the token sequence `ids`."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        vocab = self.tensors[self.spec.embed][1][0]
        if ids.size == 0 or ids.min() < 0 or ids.max() >= vocab:
            raise ValueError(f"token ids must be a non-empty sequence in 0..{vocab - 1}")
        key = (ids.tobytes(), self.round_activations)
        if key not in self._memo:
            self._memo[key] = (self._forward.logits(ids), list(self._forward.routing))
        return self._memo[key][0].copy()

    def routing(self, ids) -> list:
        """The experts each MoE layer chose at every position of `ids` in that logits() call: [T, top_k] arrays,
        sorted per row, layer by layer (empty for a dense model); computed by logits() if it was not called."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        key = (ids.tobytes(), self.round_activations)
        if key not in self._memo:
            self.logits(ids)
        return [r.copy() for r in self._memo[key][1]]

    def decoded(self, name: str) -> np.ndarray:
        """A tensor decoded to float64, kept for the next call (the forward's own copy: do not modify it)."""
        return self._forward.w(name)

    def close(self) -> None:
        """Unmap the file (if raw() views are still alive, the mapping goes when they do)."""
        self._forward = None
        self._reader.close()


def _names(spec) -> set:
    """Every tensor name the spec reads."""
    out = {spec.embed, spec.head, spec.pos_embed, spec.head_b, *spec.extra_names}
    for n in (spec.final_norm, spec.embed_norm):             # either may be absent (OPT-350m, all but BLOOM)
        if n is not None:
            out.update((n.weight, n.bias))
    for L in spec.layers:
        for v in vars(L).values():
            if isinstance(v, str):
                out.add(v)
            elif isinstance(v, tuple) and all(isinstance(x, str) for x in v):     # Apertus's xIELU parameters
                out.update(v)
            elif hasattr(v, "kind"):
                out.update((v.weight, v.bias))
    return out - {None}
