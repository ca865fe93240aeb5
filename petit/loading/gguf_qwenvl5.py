"""llama.cpp's GLM-4.1V / GLM-4.5V language-model files (issue 36, the qwenvl group): `glm4` and `glm4moe` files with
M-RoPE sections, read as the glm4v_text / glm4_moe families. Their converter (conversion/glm.py) writes the
language model alone (the vision tower goes to a separate mmproj file) and, from a config with M-RoPE sections,
`rope.dimension_sections` ([the three sections, 0]); llama.cpp's graph (src/models/glm4.cpp, glm4-moe.cpp) then runs
M-RoPE when the first two are non-zero (llama_hparams::use_mrope), which rotates halves. A text token has one position,
which llama.cpp's batch gives every section, so each rotates by the token's position: plain RoPE on halves.

- glm4 (GLM-4.1V): GLM-4's RoPE is on adjacent pairs, so the converter permuted each head's rotary q / k rows (and
  biases) to halves (Glm4Model.normal_to_neox); Petit puts them back in GLM's order (a row permutation, exact) and
  runs the glm4v_text family, whose RoPE is on pairs. Without the sections (GLM-4), the file is glm4's, unpermuted.
  Before this group Petit read such a file as glm4 with the rows permuted: wrong logits, said nowhere.
- glm4moe (GLM-4.5V): GLM-4.5V's RoPE is on halves already (nothing permuted), and llama.cpp's glm4moe graph runs the
  q / k norms when the file holds them, as the glm4_moe family does: the file is read as glm4moe is, its sections
  read and left (the glm4moe reader refused them before)."""
from dataclasses import replace

import numpy as np

from petit.loading.gguf_ssm import Fix


def _sections(meta, key) -> list | None:
    """The file's M-RoPE sections (four sizes, as llama.cpp reads them), or None."""
    s = meta.get(key("rope.dimension_sections"))
    if s is None:
        return None
    if len(s) != 4 or any(int(x) < 0 for x in s):
        raise ValueError(f"metadata {key('rope.dimension_sections')!r} is {[int(x) for x in s]!r}: llama.cpp reads "
                         f"four section sizes")
    return [int(x) for x in s]


def _glm4v(base_extra):
    def extra(meta, key, cfg, has):
        base_extra(meta, key, cfg, has)
        s = _sections(meta, key)
        if s is not None and s[0] > 0 and s[1] > 0:     # llama_hparams::use_mrope: the converter permuted q / k
            cfg.update(model_type="glm4v_text", mrope_section=s[:3])
    return extra


def _glm4v_moe(base_extra):
    def extra(meta, key, cfg, has):
        if _sections(meta, key) is not None:        # the glm4moe reader refuses the sections: read without them
            meta = {k: v for k, v in meta.items() if k != key("rope.dimension_sections")}
        base_extra(meta, key, cfg, has)
    return extra


def _pairs_again(cfg) -> dict:
    """glm4v_text's q / k rows (and biases) in GLM's pair order again: llama.cpp's converter moved each head's rotary
    rows 0, 2, 4 ... before 1, 3, 5 ... (its first rotary_dim rows; the rest stay)."""
    if cfg.get("model_type") != "glm4v_text":
        return {}
    hd = cfg["head_dim"]
    rot = int(hd * cfg.get("partial_rotary_factor", 1.0))
    perm = np.concatenate([np.stack([np.arange(rot // 2), np.arange(rot // 2, rot)], 1).reshape(-1),
                           np.arange(rot, hd)])

    def fix(w):
        return np.ascontiguousarray(w.reshape(-1, hd, *w.shape[1:])[:, perm].reshape(w.shape))
    return {f"attn_{x}.{kind}": Fix(values=fix, shift=False) for x in "qk" for kind in ("weight", "bias")}


def qwenvl_archs(archs: dict) -> dict:
    return {"glm4": replace(archs["glm4"], extra=_glm4v(archs["glm4"].extra), cfg_fixes=_pairs_again),
            "glm4moe": replace(archs["glm4moe"], extra=_glm4v_moe(archs["glm4moe"].extra))}
