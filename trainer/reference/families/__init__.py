"""The families the reference models, one function per Hugging Face `model_type`: `spec(cfg, names) -> ModelSpec`
(cfg the config dict, names the tensor names in the file). Grouped by layout: llama.py (Llama's tensor names:
llama, mistral, qwen2, qwen3, phi3, olmo2, granite, smollm3), gemma.py (gemma, gemma2, gemma3_text), gpt.py (gpt2,
gpt_neox, phi, starcoder2, stablelm), cohere.py (cohere, cohere2), moe.py (qwen3_moe, qwen2_moe, olmoe, mixtral,
granitemoe, granitemoeshared, gpt_oss, llama4_text), deepseek.py (deepseek_v2, deepseek_v3), ssm.py (mamba,
falcon_mamba, ...), llama_variants.py (helium, seed_oss, ernie4_5, ministral, arcee, olmo, olmo3, glm, glm4, exaone4,
vaultgemma, apertus, nemotron, hunyuan_v1_dense, persimmon), gpt_variants.py (gptj, codegen, gpt_neo, gpt_bigcode,
falcon, bloom, mpt, opt), hybrid.py (qwen3_next, qwen3_5_text, nemotron_h), dense5.py (the dense group of issue 30:
granite_swa, granitemoe_swa, ...).

A family added to the engine is not verified until it is added here: `spec_for` refuses an unknown model_type by
name, so `petit verify` reports an error instead of a verdict computed with the wrong architecture.
"""
from trainer.reference.families import (cohere, deepseek, gemma, gpt, gpt_variants, hybrid, llama, llama_variants, moe,
                                         ssm)
from trainer.reference.families import dense5          # issue 30: the dense group of transformers 5's families
from trainer.reference.families import wrap5           # issue 30: the wrap group (multimodal wrappers)
from trainer.reference.families import moe_a5          # issue 30: the moe_a group
from trainer.reference.families import mla5            # issue 30: the mla group
from trainer.reference.families import hybrid5         # issue 30: the hybrid group
from trainer.reference.families import gemma5          # issue 30: the gemma group
from trainer.reference.families import moe_b           # issue 30: the moe_b group
from trainer.reference.families import recur5          # issue 30: the recur group
from trainer.reference.families import jetmoe5         # issue 30: the jetmoe group
from trainer.reference.families import fam36b5         # issue 36: the fam36b group
from trainer.reference.families import fam36c5         # issue 36: the fam36c group
from trainer.reference.families import zamba5          # issue 30: the zamba group
from trainer.reference.families import mimo5           # issue 30: the mimo group
from trainer.reference.families import longcat5        # issue 30: the longcat group
from trainer.reference.families import ggufx5          # issue 30: the ggufx group (rwkv6qwen2)
from trainer.reference.families import dsv4_5          # issue 30: the dsv4 group (deepseek_v4)
from trainer.reference.families import fam36           # issue 36: the fam36a group (openai-gpt)
from trainer.reference.families import fam36e5         # issue 36: the fam36e group (kolibri1)
from trainer.reference.families import fam36d5         # issue 36: the fam36d group (diffllama)
from trainer.reference.families import fam36i5         # issue 36: the fam36i group (aria_text)
from trainer.reference.families import fam36f5         # issue 36: the fam36f group (multimodal checkpoints)
from trainer.reference.families import fam36j5         # issue 36: the fam36j group (modernbert-decoder)
from trainer.reference.families import fam36h5         # issue 36: the fam36h group (hy_v3)
from trainer.reference.families import fam36g5         # issue 36: the fam36g group (axk1, laguna, zaya)
from trainer.reference.families import fam36k5         # issue 36: the fam36k group
from trainer.reference.families import fam36n5         # issue 36: the fam36n group (xlstm)
from trainer.reference.families import fam36l5         # issue 36: the fam36l group (Inkling)
from trainer.reference.families import fam36m5         # issue 36: the fam36m group (axk2, bailing_hybrid, hy_v4)
from trainer.reference.families import fam36o5         # issue 36: the fam36o group (hrm_text)
from trainer.reference.families import q4exp5          # issue 36: the q4exp group (qwen4_exp_text, qwen4_exp)
from trainer.reference.families import qwenvl5         # issue 36: the qwenvl group (Qwen-VL's language models)
from trainer.reference.families import newdec5         # issue 36: the newdec group (mistral4; mistral3 over it)
from trainer.reference.families import vlnew5          # issue 36: the vlnew group (multimodal checkpoints' text models)

FAMILIES = {**llama.FAMILIES, **llama_variants.FAMILIES, **gemma.FAMILIES, **gpt.FAMILIES, **gpt_variants.FAMILIES,
            **cohere.FAMILIES,
            **moe.FAMILIES, **deepseek.FAMILIES, **ssm.FAMILIES, **hybrid.FAMILIES,
            **dense5.FAMILIES,
            **wrap5.FAMILIES,
            **moe_a5.FAMILIES,
            **mla5.FAMILIES,
            **hybrid5.FAMILIES,
            **gemma5.FAMILIES,
            **moe_b.FAMILIES,
            **recur5.FAMILIES,
            **jetmoe5.FAMILIES,
            **zamba5.FAMILIES,
            **mimo5.FAMILIES,
            **longcat5.FAMILIES,
            **ggufx5.FAMILIES,
            **dsv4_5.FAMILIES,
            **fam36.FAMILIES,
            **fam36b5.FAMILIES,
            **fam36e5.FAMILIES,
            **fam36c5.FAMILIES,
            **fam36d5.FAMILIES,
            **fam36i5.FAMILIES,
            **fam36f5.FAMILIES,
            **fam36j5.FAMILIES,
            **fam36h5.FAMILIES,
            **fam36g5.FAMILIES,
            **fam36k5.FAMILIES,
            **fam36n5.FAMILIES,
            **fam36l5.FAMILIES,
            **fam36m5.FAMILIES,
            **fam36o5.FAMILIES,
            **q4exp5.FAMILIES,
            **qwenvl5.FAMILIES,
            **newdec5.FAMILIES,
            **vlnew5.FAMILIES,
            }


class UnsupportedFamily(ValueError):
    """The reference does not model this model_type (or a feature of it)."""


def spec_for(cfg: dict, names):
    """The ModelSpec of a config; raises UnsupportedFamily naming what is not modelled."""
    kind = cfg.get("model_type")
    if kind not in FAMILIES and cfg.get("text_model_type") in FAMILIES:
        # a multimodal checkpoint's language model, converted flat (petit/models/multimodal.py): the file says which
        # text model it is, and holds that model's config and tensors (a plain head's scaling already 1)
        spec = spec_for(dict(cfg, model_type=cfg["text_model_type"]), names)
        spec.family = kind
        return spec
    if kind not in FAMILIES:
        raise UnsupportedFamily(f"the independent reference does not model model_type {kind!r} (it models "
                                f"{', '.join(sorted(FAMILIES))}), so it cannot verify this model")
    if cfg.get("rope_parameters") is not None:       # the engine writes rope_theta / rope_scaling into its files
        raise UnsupportedFamily(f"the independent reference reads RoPE settings as rope_theta / rope_scaling; this "
                                f"{kind} config has transformers 5's rope_parameters, which it does not model")
    try:
        return FAMILIES[kind](cfg, set(names))
    except (KeyError, TypeError, ZeroDivisionError) as e:
        raise ValueError(f"the reference cannot read this {kind} config ({type(e).__name__}: {e})") from None
