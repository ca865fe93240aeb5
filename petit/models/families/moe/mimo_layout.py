"""MiMo-V2-Flash's attention in the layout Petit's kernels run (one head size, one kv head count for every layer):
each value head padded to head_dim with zero rows of v_proj (attention_value_scale folded in) and zero columns of
o_proj, exact (the padded dims are 0 in every cache row and add 0 x 0); a full layer's kv heads each repeated to the
sliding layers' count (query head h reads kv head h // (H / 2KV), the copy of the head h // (H / KV) it reads in
transformers). Shared by the Hugging Face folder (petit/models/families/moe/mimo_v2_flash.py) and llama.cpp's mimo2
files (petit/loading/gguf_mimo5.py)."""
import numpy as np


def padded_attention(cfg: dict, read) -> dict:
    """{HF name: (shape, make, layer, which)} of each layer's k / v / o projections as the kernels run them: kv heads
    repeated to the sliding layers' count (full layers), value heads padded to head_dim with zero rows and scaled by
    attention_value_scale, o_proj's columns padded to match. `read(layer, which)` gives the stored matrix [out, in]
    of which = "k" / "v" / "o"; `cfg` a validated config's fields (a HF config or a GGUF file's)."""
    hd, vd, H, D = cfg["head_dim"], cfg["v_head_dim"], cfg["num_attention_heads"], cfg["hidden_size"]
    KV, types, scale = cfg["num_key_value_heads"], cfg["layer_types"], np.float32(cfg["attention_value_scale"])
    K = 2 * KV if "sliding_attention" in types else KV
    out = {}

    def stored(i, which, shape, kind):
        m = read(i, which)
        if m.shape != shape:
            raise ValueError(f"model.layers.{i}.self_attn.{which}_proj.weight is {list(m.shape)}, not the "
                             f"{list(shape)} of a {kind} layer of this config (layer_types, num_key_value_heads, "
                             f"head_dim, v_head_dim)")
        return m

    for i, kind in enumerate(types):
        a, n = f"model.layers.{i}.self_attn.", 2 * KV if kind == "sliding_attention" else KV

        def k_rows(i=i, n=n, kind=kind):
            return np.repeat(stored(i, "k", (n * hd, D), kind).reshape(n, hd, D), K // n, axis=0).reshape(K * hd, D)

        def v_rows(i=i, n=n, kind=kind):
            v = np.zeros((K, hd, D), np.float32)
            v[:, :vd] = np.repeat(stored(i, "v", (n * vd, D), kind).reshape(n, vd, D), K // n, axis=0)
            return (v * scale).reshape(K * hd, D)

        def o_cols(i=i, kind=kind):
            o = np.zeros((D, H, hd), np.float32)
            o[:, :, :vd] = stored(i, "o", (D, H * vd), kind).reshape(D, H, vd)
            return o.reshape(D, H * hd)

        out[a + "k_proj.weight"] = ((K * hd, D), k_rows, i, "k")
        out[a + "v_proj.weight"] = ((K * hd, D), v_rows, i, "v")
        out[a + "o_proj.weight"] = ((D, H * hd), o_cols, i, "o")
    return out
