"""The RoPE settings of a config.json, from either style transformers writes, into the fields the family dataclasses
carry: `rope_theta`, `rope_scaling`, `partial_rotary_factor` and Gemma 3's `rope_local_base_freq`.

- transformers 4 wrote them at the top level: `rope_theta`, `rope_scaling` {rope_type (or type), factor, ...},
  `partial_rotary_factor`, and some families their own names for them (GPT-NeoX `rotary_emb_base` / `rotary_pct`;
  Gemma 3 `rope_local_base_freq`, the theta of its sliding layers).
- transformers 5 writes one `rope_parameters` {rope_type, rope_theta, partial_rotary_factor, factor, ...}, or one per
  layer type ({"full_attention": {...}, "sliding_attention": {...}}) when they differ (Gemma 3). It still reads the
  old keys, and some of its files keep both (GPT-NeoX keeps rope_theta and partial_rotary_factor at the top level).

Every family with RoPE reads its config through `read_rope`, so no value given in either style falls back to a family
default: a value given in both styles must agree (transformers 4 reads the top-level one, transformers 5 the one in
rope_parameters, so a disagreement is refused naming both), a key inside rope_parameters that no RoPE of the family
uses is reported like any unknown key, and a partial rotary factor other than 1 is refused by the families whose
attention rotates whole heads (transformers 5 cannot run those either).
"""
import dataclasses

from petit.models.blocks.rope import Rope, scaling_type

LAYER_TYPES = ("full_attention", "sliding_attention")
_CANONICAL = ("rope_theta", "rope_scaling", "partial_rotary_factor", "rope_local_base_freq")
_ENTRY_OWN = ("rope_type", "type", "rope_theta", "partial_rotary_factor")


def read_rope(cls, d: dict) -> tuple[dict, list[str]]:
    """`d` with its RoPE settings under the family's field names (rope_parameters and alias keys removed), and the
    dotted names of keys inside rope_parameters that no RoPE of the family uses.

    The family class may set `_ROPE_ALIASES` {legacy key: field} (GPT-NeoX), `_ROPE_LOCAL_THETA` (True when
    sliding layers have a theta of their own, `rope_local_base_freq`: Gemma 3) and `_ROPE_LAYER_TYPES` (the layer
    types that use RoPE; Cohere 2's full-attention layers have none).

    Raises:
        ValueError: the two styles disagree, rope_parameters is malformed, or it asks for what the family cannot run.
    """
    fields = {f.name for f in dataclasses.fields(cls)}
    if "rope_theta" not in fields:          # no RoPE (GPT-2): a rope_parameters key is reported as unknown
        return d, []
    family = d.get("model_type") or getattr(cls, "model_type", cls.__name__)
    out = dict(d)
    old = _top_level(cls, out)
    unknown: list[str] = []
    new = {} if out.get("rope_parameters") is None else _parameters(cls, out["rope_parameters"], family, unknown)
    out.pop("rope_parameters", None)
    for name in _CANONICAL:
        if name in old and name in new and not _same(name, old[name][0], new[name][0]):
            raise ValueError(f"config: {old[name][1]} {old[name][0]!r} and {new[name][1]} {new[name][0]!r} disagree "
                             f"(transformers 4 reads the first, transformers 5 the second)")
        if name not in new and name not in old:
            continue                        # neither style gives it: the family's default (transformers' own)
        value, where = new.get(name) or old[name]
        if name in fields:
            out[name] = value
        elif name == "partial_rotary_factor":
            out.pop(name, None)
            if value != 1:
                raise ValueError(f"config: partial_rotary_factor {value!r} ({where}) is not supported by the {family} "
                                 f"family: its attention rotates whole heads")
    return out, unknown


def _top_level(cls, out: dict) -> dict:
    """{field: (value, key it came from)} of the top-level (transformers 4) keys, with the aliases popped."""
    found = {}
    names = [(n, n) for n in _CANONICAL] + list(cls._ROPE_ALIASES.items())
    for key, name in names:
        value = out.get(key)
        if key != name:
            out.pop(key, None)
        if value is None:
            continue
        if name in found and not _same(name, found[name][0], value):
            raise ValueError(f"config: {key} {value!r} and {found[name][1]} {found[name][0]!r} disagree")
        found.setdefault(name, (value, key))
    return found


def _parameters(cls, rp, family: str, unknown: list) -> dict:
    """{field: (value, where)} from rope_parameters, flat or per layer type."""
    if not isinstance(rp, dict):
        raise ValueError(f"config: rope_parameters must be an object, got {rp!r}")
    nested = [k for k in rp if k in LAYER_TYPES]
    extra = cls._ROPE_SCALING_EXTRA
    if not nested:
        return _entry(rp, "rope_parameters", unknown, extra)
    other = [k for k in rp if k not in LAYER_TYPES]
    if other:
        raise ValueError(f"config: rope_parameters mixes per-layer-type entries ({', '.join(nested)}) with other keys "
                         f"({', '.join(other)})")
    entries = {k: _entry(rp[k], f"rope_parameters.{k}", unknown, extra) for k in nested if rp[k] is not None}
    if cls._ROPE_SLIDING_UNSCALED:
        # full layers: rope_theta with rope_scaling; sliding layers: the same theta, unscaled (OLMo 3)
        got, local = dict(entries.get("full_attention", {})), entries.get("sliding_attention", {})
        kind = scaling_type(local.get("rope_scaling", (None,))[0])
        if kind != "default" or any(n in local and n in got and not _same(n, local[n][0], got[n][0])
                                    for n in ("rope_theta", "partial_rotary_factor")):
            raise ValueError(f"config: rope_parameters.sliding_attention must be the full layers' RoPE without "
                             f"scaling in the {family} family, got {rp['sliding_attention']!r}")
        return got
    if cls._ROPE_LOCAL_THETA:
        # full layers: rope_theta with rope_scaling; sliding layers: their own theta, unscaled
        got = dict(entries.get("full_attention", {}))
        local = entries.get("sliding_attention", {})
        kind = scaling_type(local.get("rope_scaling", (None,))[0])
        if kind != "default":
            raise ValueError(f"config: rope_parameters.sliding_attention: a {kind} scaling of the sliding layers' RoPE "
                             f"is not supported by the {family} family")
        if "rope_theta" in local:
            got["rope_local_base_freq"] = local["rope_theta"]
        if "partial_rotary_factor" in local:
            got.setdefault("partial_rotary_factor", local["partial_rotary_factor"])
            if not _same("partial_rotary_factor", got["partial_rotary_factor"][0], local["partial_rotary_factor"][0]):
                raise ValueError(f"config: rope_parameters gives full_attention and sliding_attention layers "
                                 f"different partial_rotary_factor; the {family} family rotates the same dims in both")
        return got
    used = cls._ROPE_LAYER_TYPES
    unknown.extend(f"rope_parameters.{k}" for k in entries if k not in used)
    values = [{n: v for n, (v, _) in entries[k].items()} for k in used if k in entries]
    if any(v != values[0] for v in values[1:]):
        raise ValueError(f"config: rope_parameters gives {' and '.join(k for k in used if k in entries)} layers "
                         f"different RoPEs; the {family} family uses one RoPE for all its layers")
    return next((entries[k] for k in used if k in entries), {})


def _entry(e, where: str, unknown: list, extra=frozenset()) -> dict:
    """{field: (value, where)} of one rope_parameters object: theta, partial rotary factor and the scaling (None for
    the default type, else a rope_scaling dict, validated)."""
    if not isinstance(e, dict):
        raise ValueError(f"config: {where} must be an object, got {e!r}")
    if e.get("rope_type") is not None and e.get("type") is not None and e["rope_type"] != e["type"]:
        raise ValueError(f"config: {where} has rope_type {e['rope_type']!r} and type {e['type']!r}")
    kind = e.get("rope_type") or e.get("type") or "default"
    got = {k: (e[k], f"{where}.{k}") for k in ("rope_theta", "partial_rotary_factor") if e.get(k) is not None}
    rest = {k: v for k, v in e.items() if k not in _ENTRY_OWN}
    if kind == "default":
        unknown.extend(f"{where}.{k}" for k in rest if k not in extra)
        got["rope_scaling"] = (None, where)
    else:
        scaling = {"rope_type": kind, **rest}
        scaling_type({k: v for k, v in scaling.items() if k not in extra}, where)
        got["rope_scaling"] = (scaling, where)
    return got


def _same(name: str, a, b) -> bool:
    if name != "rope_scaling":
        return a == b
    if not a or not b:
        return not a and not b
    kind = lambda s: s.get("rope_type", s.get("type"))          # noqa: E731
    return kind(a) == kind(b) and all(a[k] == b[k] for k in set(a) & set(b) - {"rope_type", "type"})


def per_layer_type(rp, used: list, family: str, drop=()) -> dict:
    """Issue 36, fam36i: a `rope_parameters` keyed by layer type, each entry a RoPE or null (no position encoding:
    Cohere Compass's and Beam's NoPE full layers), as read_rope reads it: {"rope_parameters": the entries (keys beside
    them dropped, as transformers drops or never reads them; each entry's `drop` keys taken out), "rope_layer_types":
    the types whose entry is not null}. `used`: the config's layer types, each of which needs an entry.

    Raises:
        ValueError: rope_parameters not keyed by layer type, or a used type without an entry (transformers 5.25
            builds no model from either).
    """
    if not isinstance(rp, dict) or not set(rp) & set(LAYER_TYPES):
        raise ValueError(f"config: rope_parameters must be keyed by layer type (full_attention / sliding_attention, "
                         f"null for no position encoding): transformers 5.25 builds no {family} model from {rp!r}")
    missing = sorted({t for t in used if t in LAYER_TYPES} - set(rp))
    if missing:
        raise ValueError(f"config: rope_parameters has no entry for the layer type(s) {', '.join(missing)} "
                         f"(transformers 5.25 builds no {family} model without one; null: no position encoding)")
    rp = {k: {n: x for n, x in v.items() if n not in drop} if isinstance(v, dict) else v
          for k, v in rp.items() if k in LAYER_TYPES}
    return {"rope_parameters": rp, "rope_layer_types": [t for t in LAYER_TYPES if rp.get(t) is not None]}
class RopeByType:
    """transformers 5's `rope_parameters` keyed by layer type, each its own theta, scaling and partial rotary factor,
    kept as given in the dataclass field `rope_types` (Petit's key; Laguna, ZAYA); the top-level rope_theta /
    rope_scaling / partial_rotary_factor, which those families' transformers configs ignore, are reported and not
    read. `_ROPE_DEFAULT` is transformers' default for a config without rope_parameters (replaced whole)."""

    _ROPE_DEFAULT: dict = {}

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict):
            d = dict(d)
            if d.get("rope_parameters") is not None:
                if d.get("rope_types") is not None:
                    raise ValueError("config: rope_parameters and rope_types both given (the same settings)")
                # ZAYA's released config has a top-level rope_type beside the layer types: transformers drops it
                d["rope_types"] = {k: v for k, v in d.pop("rope_parameters").items() if k != "rope_type"}
            for k in ("rope_theta", "rope_scaling", "partial_rotary_factor"):
                if k in d:
                    d[f"{k} ({cls.model_type} reads rope_parameters per layer type)"] = d.pop(k)
        return super().from_dict(d)

    def to_dict(self) -> dict:
        d = super().to_dict()
        del d["rope_theta"], d["rope_scaling"]
        return d

    def ropes(self) -> dict:
        """{layer type: Rope} of the types the layers use."""
        rp = self._ROPE_DEFAULT if self.rope_types is None else self.rope_types
        out = {}
        for kind in sorted(set(self.types())):
            e = rp.get(kind) if isinstance(rp, dict) else None
            if not isinstance(e, dict) or e.get("rope_theta") is None:
                raise ValueError(f"config: rope_parameters has no rope_theta for the {kind} layers ({rp!r})")
            scaling = {k: v for k, v in e.items() if k not in ("rope_theta", "partial_rotary_factor")}
            scaling = None if scaling_type(scaling, f"rope_parameters.{kind}") == "default" else scaling
            dim = int(self.head_dim * e.get("partial_rotary_factor", 1.0))
            out[kind] = Rope(dim, e["rope_theta"], scaling, self.max_position_embeddings)
        return out
