"""The dsv4 group of issue 30: DeepSeek-V4, whose blocks (hyper-connections, compressed attention, hash routing) fit
no LayerSpec: its forward is trainer/reference/deepseek_v4_f64.py's float64 definition (checked against
transformers by tests/test_dsv4_5.py), run on the tensors of a .petit file as Petit writes them (the config's
fields as petit/models/families/mla/deepseek_v4_config.py keeps them, wo_a split per output group, tid2eid as floats).
The spec's layers name each layer's experts, for verify's matrix check and depth."""
import numpy as np

from trainer.reference import deepseek_v4_f64 as v4
from trainer.reference.families.common import get, rms
from trainer.reference.spec import LayerSpec, MoeSpec, ModelSpec


class _Tensors:
    """The file's tensors as the definition asks for them, its products through the forward's (rounding) mm."""

    def __init__(self, fwd, cfg):
        self.f, self.c, self.routing = fwd, cfg, fwd.routing

    def __getitem__(self, name):
        if name.endswith("wo_a.weight"):
            p = name[:-len("weight")]
            return np.concatenate([self.f.w(f"{p}{g}.weight") for g in range(self.c["o_groups"])])
        if name.endswith("tid2eid"):
            return np.rint(self.f.w(name)).astype(np.int64)
        return self.f.w(name)

    def get(self, name, default=None):
        return self[name] if name in self.f.r.tensors else default

    def mm(self, x, name):
        return self.f.mm(x, name)


def deepseek_v4(cfg, names):
    c = dict(cfg)
    n, E = c["num_hidden_layers"], c["n_routed_experts"]
    c["qk_rope_head_dim"] = int(c["head_dim"] * c["partial_rotary_factor"])
    compress = {"rope_type": "default", "rope_theta": c["compress_rope_theta"]} | (c.get("compress_rope_scaling") or {})
    c["rope_parameters"] = {"main": {"rope_theta": c["rope_theta"]}, "compress": compress}
    for label, rp in c["rope_parameters"].items():
        if rp.get("rope_type", "default") not in ("default", "yarn") or rp.get("attention_factor", 1.0) != 1.0:
            raise ValueError(f"the reference does not model deepseek_v4's {label} rope {rp!r}")

    def forward(fwd, ids):
        return v4.forward(c, _Tensors(fwd, c), ids)

    spec = ModelSpec("deepseek_v4", c["num_attention_heads"], 1, c["head_dim"], "model.embed_tokens.weight",
                     "head.weight", rms("model.norm", get(c, "rms_norm_eps", 1e-6)), forward=forward,
                     extra_names=tuple(sorted(names)))
    for i in range(n):
        p = f"model.layers.{i}.ffn."
        w = ("w1", "w3", "w2")
        experts = [tuple(f"{p}experts.{e}.{x}.weight" for x in w) for e in range(E)]
        moe = MoeSpec(p + "gate.weight", experts, c["num_experts_per_tok"], c["norm_topk_prob"],
                      shared=tuple(f"{p}shared_experts.{x}.weight" for x in w))
        spec.layers.append(LayerSpec(q=None, k=None, v=None, o=None, moe=moe))
    return spec


FAMILIES = {"deepseek_v4": deepseek_v4}
