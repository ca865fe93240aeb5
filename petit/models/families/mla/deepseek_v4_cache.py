"""DeepSeek-V4's cache and scratch (the family helpers: deepseek_v4_plan.py's decoder): the regions of a layer's
values-are-keys cache rows kernels/dsv4_plan.c reads (`regions`: the window's keys, a compressed layer's entries and
its compressor's raw kv / gate, the indexer's), their width (`cache_width`) and the step's scratch buffers."""
import numpy as np

from petit.models.blocks.decoder import _Scratch
from petit.models.families.mla.deepseek_v4_config import CSA, SWA
from petit.models.blocks.plan import fptr


def regions(cfg, kind) -> dict:
    """{name: offset in floats per position} of a layer's cache regions, and its width."""
    hd, di = cfg.head_dim, cfg.index_head_dim
    out = {"keys": 0, "width": hd}
    if kind != SWA:
        W = (2 if kind == CSA else 1) * hd
        out.update(entries=hd, raw=2 * hd, width=2 * hd + 2 * W)
    if kind == CSA:
        at = out["width"]
        out.update(i_entries=at, i_raw=at + di, width=at + 5 * di)
    return out


def cache_width(cfg) -> int:
    return max(regions(cfg, k)["width"] for k in cfg.layer_types)


class _V4Scratch(_Scratch):
    def __init__(self, arch, cap, cfg):
        super().__init__(arch, cap)
        D, n, H, hd = cfg.hidden_size, cfg.hc_mult, cfg.num_attention_heads, cfg.head_dim
        nh, di, G, r = cfg.index_n_heads, cfg.index_head_dim, cfg.o_groups, cfg.o_lora_rank
        widths = {"X0": n * D, "X1": n * D, "hx": D, "post": n, "comb": n * n, "qa": cfg.q_lora_rank, "q4": H * hd,
                  "kv": hd, "att4": H * hd, "oa": G * r, "y": D, "ckv": 2 * hd, "cgate": 2 * hd, "ikv": 2 * di,
                  "igate": 2 * di, "iq": nh * di, "iw": nh, "emb": D, "gin": H * hd // G, "gout": r}
        for name, w in widths.items():
            self.arrays[name] = np.zeros((cap, w), np.float32)
            self.p[name] = fptr(self.arrays[name])
        # each CSA layer's indexer choice [T, index_topk] and its count [T], kept for last_choice
        self.sel = {i: (np.zeros((cap, cfg.index_topk), np.int32), np.zeros(cap, np.int32))
                    for i, kind in enumerate(cfg.layer_types) if kind == CSA}

    def last_choice(self, i: int, T: int) -> np.ndarray:
        """The compressed entries layer i's queries of the last step attended to, [T, top_k], increasing, -1 after
        each query's count (a copy)."""
        sel, n = self.sel[i]
        return np.where(np.arange(sel.shape[1]) < n[:T, None], np.sort(np.where(
            np.arange(sel.shape[1]) < n[:T, None], sel[:T], np.iinfo(np.int32).max), 1), -1)
