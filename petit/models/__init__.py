"""The model families Petit can run, one module per Hugging Face `model_type`.

The registry is an explicit table, not an import built from a config string: it is the allowlist of what a model
file may ask for (packaging/hooks/hook-petit.py hands every module to a frozen app). A family's module is imported
when its model_type is first looked up, so opening a file imports its own family, not all 160 (0.5-1 s of the open
time of a 7B GGUF, issue 31).

A family module has `Config` (a dataclass with Hugging Face's field names and `from_dict` / `to_dict`), `build(cfg,
tensors) -> Decoder` (asking a TensorSource for each tensor by name and shape), and, when its checkpoints store
tensors in another layout than the kernels read, `hf_tensors(cfg, checkpoint)`.
"""
import importlib
from collections.abc import Mapping

from petit.models.multimodal_rows import ROWS as MULTIMODAL_ROWS
from petit.models.refusals import MULTIMODAL_NOT_TEXT, NOT_DECODERS


class Registry(Mapping):
    """model_type -> its family module (petit.models.<name>), imported on first look-up."""

    def __init__(self, names: dict):
        self.names = names

    def __getitem__(self, model_type):
        name = self.names[model_type]
        if name.startswith("multimodal:"):      # a row of the multimodal table (petit/models/multimodal_rows.py)
            return importlib.import_module("petit.models.multimodal").family(model_type, MULTIMODAL_ROWS[model_type],
                                                                             self)
        return importlib.import_module(f"petit.models.{name}")

    def __iter__(self):
        return iter(self.names)

    def __len__(self):
        return len(self.names)

    def __contains__(self, model_type):
        return model_type in self.names


MODEL_TYPES = Registry({
    "llama": "llama",
    "mistral": "mistral",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "phi3": "phi3",
    "gemma": "gemma",
    "gemma2": "gemma2",
    "gemma3_text": "gemma3_text",
    "gpt2": "gpt2",
    "gpt_neox": "gpt_neox",
    "gpt_neox_japanese": "gpt_neox_japanese",
    "ctrl": "ctrl",
    "mellum": "mellum",
    "phi": "phi",
    "starcoder2": "starcoder2",
    "stablelm": "stablelm",
    "olmo2": "olmo2",
    "granite": "granite",
    "smollm3": "smollm3",
    "cohere": "cohere",
    "cohere2": "cohere2",
    "qwen3_moe": "qwen3_moe",
    "qwen2_moe": "qwen2_moe",
    "olmoe": "olmoe",
    "mixtral": "mixtral",
    "granitemoe": "granitemoe",
    "granitemoeshared": "granitemoeshared",
    "gpt_oss": "gpt_oss",
    "llama4_text": "llama4_text",
    "deepseek_v2": "deepseek_v2",
    "deepseek_v3": "deepseek_v3",
    "mamba": "mamba",
    "falcon_mamba": "falcon_mamba",
    "mamba2": "mamba2",
    "lfm2": "lfm2",
    "granitemoehybrid": "granitemoehybrid",
    "jamba": "jamba",
    "helium": "helium",
    "seed_oss": "seed_oss",
    "ernie4_5": "ernie4_5",
    "ministral": "ministral",
    "arcee": "arcee",
    "olmo": "olmo",
    "olmo3": "olmo3",
    "glm": "glm",
    "glm4": "glm4",
    "exaone4": "exaone4",
    "vaultgemma": "vaultgemma",
    "apertus": "apertus",
    "nemotron": "nemotron",
    "hunyuan_v1_dense": "hunyuan_v1_dense",
    "persimmon": "persimmon",
    "gptj": "gptj",
    "codegen": "codegen",
    "gpt_neo": "gpt_neo",
    "gpt_bigcode": "gpt_bigcode",
    "falcon": "falcon",
    "bloom": "bloom",
    "mpt": "mpt",
    "opt": "opt",
    "openai-gpt": "openai_gpt",
    "xglm": "xglm",
    "biogpt": "biogpt",
    "bitnet": "bitnet",
    "falcon_h1": "falcon_h1",
    "qwen3_next": "qwen3_next",
    "qwen3_5_text": "qwen3_5_text",
    "qwen3_5": "qwen3_5",
    "nemotron_h": "nemotron_h",
    "glm4_moe": "glm4_moe",
    "ernie4_5_moe": "ernie4_5_moe",
    "hunyuan_v1_moe": "hunyuan_v1_moe",
    "dbrx": "dbrx",
    "internlm3": "internlm3",
    # issue 30, the dense group
    "granite_swa": "granite_swa",
    "granitemoe_swa": "granitemoe_swa",
    "nanochat": "nanochat",
    "apertus1p5_text": "apertus1p5_text",
    "cwm": "cwm",
    "youtu": "youtu",
    "iquestcoder": "iquestcoder",
    "hyperclovax": "hyperclovax",
    "jais2": "jais2",
    "minicpm": "minicpm",
    "internlm2": "internlm2",
    # issue 30, the wrap group
    "gemma3": "gemma3",
    "ministral3": "ministral3",
    "mistral3": "mistral3",
    # issue 30, the moe_a group
    "qwen3_5_moe_text": "qwen3_5_moe_text",
    "qwen3_5_moe": "qwen3_5_moe",
    # issue 30, the mla group
    "glm4_moe_lite": "glm4_moe_lite",
    # issue 30, the hybrid group
    "bamba": "bamba",
    "zamba2": "zamba2",
    # issue 30, the zamba group
    "zamba": "zamba",
    # issue 30, the gemma group
    "gemma3n_text": "gemma3n_text",
    "gemma3n": "gemma3n",
    # issue 30, the moe_b group
    "lfm2_moe": "lfm2_moe",
    "exaone_moe": "exaone_moe",
    "minimax_m2": "minimax_m2",
    # issue 30, the recur group
    "recurrent_gemma": "recurrent_gemma",
    "llama4": "llama4",
    "exaone": "exaone",
    "solar_open": "solar_open",
    "phimoe": "phimoe",
    "dots1": "dots1",
    "cohere2_moe": "cohere2_moe",
    "flex_olmo": "flex_olmo",
    "afmoe": "afmoe",
    "deepseek_v32": "deepseek_v32",
    "deepseek_v4": "deepseek_v4",     # issue 30, the dsv4 group
    "glm_moe_dsa": "glm_moe_dsa",
    "minicpm3": "minicpm3",
    "olmo_hybrid": "olmo_hybrid",
    "minimax": "minimax",
    "rwkv6": "rwkv6",
    "rwkv7": "rwkv7",
    "gemma4_text": "gemma4_text",
    "gemma4": "gemma4",
    "gemma4_unified_text": "gemma4_unified_text",
    "gemma4_unified": "gemma4_unified",
    "minicpm5_moe": "minicpm5_moe",
    "lfm3": "lfm3",
    "kimi_linear": "kimi_linear",
    "rwkv": "rwkv",
    # issue 30, the jetmoe group
    "jetmoe": "jetmoe",
    # issue 30, the mimo group
    "mimo_v2_flash": "mimo_v2_flash",
    # issue 30, the longcat group
    "longcat_flash": "longcat_flash",
    # issue 30, the ggufx group: llama.cpp's QRWKV6 (GGUF only)
    "rwkv6qwen2": "rwkv6qwen2",
    # issue 36, the fam36e group
    "kolibri1": "kolibri1",
    "flint": "flint",
    # issue 36, the fam36c group: GLM-4.5's and DeepSeek-V3's models under configs (and names) of their own
    "sarvam_moe": "sarvam_moe",
    "param2moe": "param2moe",
    "sarvam_mla": "sarvam_mla",
    # issue 36, the fam36d group
    "diffllama": "diffllama",
    "doge": "doge",
    # issue 36, fam36i
    "aria_text": "aria_text",
    "cohere_compass_text": "cohere_compass_text",
    "minimax_m3_vl_text": "minimax_m3_vl_text",
    "beam": "beam",
    # issue 36, the fam36f group: multimodal checkpoints whose language model is a family above (the tower not run)
    "emu3": "emu3",
    "got_ocr2": "got_ocr2",
    "fuyu": "fuyu",
    "mllama": "mllama",
    "phi4_multimodal": "phi4_multimodal",
    # issue 36, the fam36j group
    "modernbert-decoder": "modernbert_decoder",
    "git": "git",             # GIT's text decoder (its image tower not run)
    # issue 36, the fam36h group
    "hy_v3": "hy_v3",
    "dory": "dory",
    "ergo": "ergo",
    # issue 36, the fam36g group
    "axk1": "axk1",
    "laguna": "laguna",
    "zaya": "zaya",
    # issue 36, the fam36k group
    "lara_mini": "lara_mini",
    "dots3_note_text": "dots3_note_text",
    "dots3_note": "dots3_note",
    # issue 36, fam36n
    "xlstm": "xlstm",
    "hrm_text": "hrm_text",
    # issue 36, the fam36l group
    "inkling_text": "inkling_text",
    "inkling2_text": "inkling2_text",
    "inkling2_loop_text": "inkling2_loop_text",
    # issue 36, the fam36m group
    "axk2": "axk2",
    "bailing_hybrid": "bailing_hybrid",
    "hy_v4": "hy_v4",
    # issue 36, the q4exp group
    "qwen4_exp_text": "qwen4_exp_text",
    "qwen4_exp": "qwen4_exp",
    # issue 36, the qwenvl group
    "qwen2_vl_text": "qwen2_vl_text",
    "qwen2_vl": "qwen2_vl",
    "qwen2_5_vl_text": "qwen2_5_vl_text",
    "qwen2_5_vl": "qwen2_5_vl",
    "qwen3_vl_text": "qwen3_vl_text",
    "qwen3_vl": "qwen3_vl",
    "qwen3_vl_moe_text": "qwen3_vl_moe_text",
    "qwen3_vl_moe": "qwen3_vl_moe",
    "glm4v_text": "glm4v_text",
    "glm4v": "glm4v",
    "glm4v_moe_text": "glm4v_moe_text",
    "glm4v_moe": "glm4v_moe",
    "glm46v": "glm46v",
    "glmga": "glmga",
    "cosmos3_omni": "cosmos3_omni",
    "qwen2_5_omni_text": "qwen2_5_omni_text",
    "qwen2_5_omni_thinker": "qwen2_5_omni_thinker",
    "qwen3_omni_moe_text": "qwen3_omni_moe_text",
    "qwen3_omni_moe_thinker": "qwen3_omni_moe_thinker",
    "qwen2_5_omni": "qwen2_5_omni",
    "qwen3_omni_moe": "qwen3_omni_moe",
    # issue 36, the newdec group
    "mistral4": "mistral4",
    "step3p5": "step3p5",
    "step3p7": "step3p7",
    "muse_glimmer_text": "muse_glimmer_text",
    "muse_glimmer": "muse_glimmer",
    # issue 36, the vlnew group: multimodal checkpoints whose text model is a decoder (the tower not run)
    "paddleocr_vl_text": "paddleocr_vl_text",
    "paddleocr_vl": "paddleocr_vl",
    "glm_ocr_text": "glm_ocr_text",
    "glm_ocr": "glm_ocr",
    "hunyuan_vl_text": "hunyuan_vl_text",
    "hunyuan_vl": "hunyuan_vl",
    "granite4_vision_text": "granite4_vision_text",
    "granite4_vision": "granite4_vision",
    "granite_docling_text": "granite_docling_text",
    "granite_docling": "granite_docling",
    "ernie4_5_vl_moe_text": "ernie4_5_vl_moe_text",
    "ernie4_5_vl_moe": "ernie4_5_vl_moe",
    "cosmos3_edge_text": "cosmos3_edge_text",
    "cosmos3_edge": "cosmos3_edge",
    "molmo2_text": "molmo2_text",
    "molmo2": "molmo2",
    "deepseek_ocr2_text": "deepseek_ocr2_text",
    "deepseek_ocr2": "deepseek_ocr2",
    "hy_v4_vl_text": "hy_v4_vl_text",
    "hy_v4_vl": "hy_v4_vl",
    "kosmos_2_text_model": "kosmos_2_text_model",
    "kosmos-2": "kosmos2",
})
# issue 36: the multimodal checkpoints whose language model is a family above, one row each in the table
MODEL_TYPES.names |= {t: f"multimodal:{t}" for t in MULTIMODAL_ROWS}

# issue 35: the encoders of embedding models (family KIND "encoder": hidden states for petit.embed, no logits), kept
# apart from the language models above, whose tests (logit parity, petit verify) do not apply to them
ENCODERS = Registry({
    "bert": "bert",
    "xlm-roberta": "xlm_roberta",
    "roberta": "xlm_roberta",
    "modernbert": "modernbert",
    "nomic_bert": "nomic_bert",
})


# model_types Petit does not run, with the family each was derived from (its architecture differs in what the note
# says): named in the refusal, so a user knows what is near and what is missing
CLOSEST = {
    "baichuan": ("llama", "fused W_pack, ALiBi in the 13B"),
    "qwen3_next": ("qwen3_moe", "Gated DeltaNet layers"),
    # issue 36, fam36e: Kolibri 1.1 keeps Kolibri 1's block but not its attention
    "kolibri1_1": ("kolibri1", "indexed sparse attention layers (a weightless indexer picks each query's keys from "
                               "pools of NVFP4-rounded block summaries), their keys and values rounded to NVFP4 and "
                               "shared across layers, dense MLPs in mlp_only_layers"),
    # issue 36, the multimodal table: checkpoints around a text family Petit runs that are not rows of it
    "paligemma": ("gemma", "a prefix language model: PaliGemma's processor marks the prompt (the image tokens and the "
                           "text prefix) with token_type_ids 0, and those positions attend to each other both ways "
                           "(text_config use_bidirectional_attention), which a causal decoder does not run"),
    "blip-2": ("opt", "the language model always reads an image: Blip2ForConditionalGeneration's forward requires "
                      "pixel_values and puts the Q-Former's query embeddings before the text, so there is no "
                      "text-only forward to run"),
    "instructblip": ("opt", "the language model always reads an image: the forward requires pixel_values and "
                            "qformer_input_ids and puts the Q-Former's query embeddings before the text"),
    "instructblipvideo": ("opt", "the language model always reads a video: the forward requires pixel_values and "
                                 "qformer_input_ids and puts the Q-Former's query embeddings before the text"),
    "apertus1p5": ("apertus1p5_text", "the multimodal checkpoint: its image and audio codes are ids of the text "
                                      "vocabulary (image_token_offset / audio_token_offset), which the wrapper's "
                                      "forward sends through its image and audio tokenizers wherever they appear in "
                                      "a prompt; not read yet"),
    "inkling_mm_model": ("inkling_text", "Inkling's multimodal checkpoint: save_pretrained writes its language model "
                                         "in the release's names (model.llm.embed, layers.N.attn.wq_du / wk_dv / "
                                         "wr_du, ...), which the inkling_text family does not read yet (it reads "
                                         "transformers' names)"),
    # issue 36, fam36j: CPM-Ant's pre-RMSNorm blocks and gated GELU MLP are llama's with gelu; its attention is not
    "cpmant": ("llama", "a prefix language model as transformers runs it: 32 learned prompt tokens before the text and "
                        "every position of a call attending to every other (its context mask is all ones), so a "
                        "position's logits depend on the tokens after it and a cached decode step differs from a "
                        "whole forward; T5-style bucketed relative-position and segment-pair biases in each "
                        "attention in place of RoPE; segment embeddings, and id 0 taken for left padding"),
    # issue 36, fam36k: Qwen4-Exp keeps Qwen3.5-MoE's mixers, experts and norms, but not its residual stream
    # issue 36, fam36p: two causal LMs whose blocks are near a family but whose sequence handling is not
    "blt": ("llama", "Meta's Byte Latent Transformer, a model of bytes (vocabulary 260) that runs three sequence "
                     "lengths: each byte's embedding plus hashed n-gram embeddings (rolling polynomial hashes of its "
                     "preceding 3..8 bytes, encoder_hash_byte_group_vocab rows each); patches of variable length cut "
                     "where a separate entropy model (the patcher, a causal byte transformer with its own head) puts "
                     "its next-byte entropy above patching_threshold; a local encoder of causal byte layers whose "
                     "patch states (each patch's bytes max-pooled, cross_attn_k queries a patch) cross-attend to "
                     "their bytes, a global transformer causal over the patches (run whole at every step, with no "
                     "cache), and a local decoder whose bytes cross-attend to the global transformer's patch states "
                     "before its causal byte layers. Its blocks are Llama's (RMSNorm, SwiGLU, RoPE on adjacent "
                     "pairs); the patching, the pooling and the cross-attention between bytes and patches are not"),
    # issue 36, the vlnew group: a multimodal checkpoint whose text model has no text-only path
    "voxtral_realtime": ("mistral", "Voxtral Realtime, a streaming speech recognizer: VoxtralRealtimeModel.forward "
                                    "requires audio at every call (transformers raises without input_features), each "
                                    "position's input being its token's embedding plus its audio frame's projected "
                                    "encoder state, and every layer scales its MLP input by 1 + ada_rms_norm(t_cond), "
                                    "a time embedding of num_delay_tokens; there is no text-only path to run, and "
                                    "Petit reads no audio. Its attention and MLP are Mistral's"),
    "voxtral_realtime_text": ("mistral", "Voxtral Realtime's language model: every layer scales its MLP input by 1 + "
                                         "ada_rms_norm(t_cond), a time embedding of the wrapper's num_delay_tokens "
                                         "(VoxtralRealtimeTextModel cannot run without it), and its inputs are token "
                                         "embeddings plus audio frames' states; Petit reads no audio. Its attention "
                                         "and MLP are Mistral's"),
    "unlimited_ocr": ("deepseek_ocr2_text", "Unlimited-OCR's text model (unlimited_ocr_text): DeepSeek-OCR-2's, "
                                            "with reference sliding attention in every layer by default: a token "
                                            "attends to every token of the prefill (the prompt and its image) and "
                                            "to the last sliding_window tokens, so what a generated token sees "
                                            "depends on where the prefill ended (a cached decode differs from one "
                                            "forward over the same tokens); Petit's windows have no such prefix"),
    "unlimited_ocr_text": ("deepseek_ocr2_text", "reference sliding attention (layer_types "
                                                 "reference_sliding_attention, the default): a token attends to every "
                                                 "prefill token and to the last sliding_window tokens, which depends "
                                                 "on where the prefill ended; Petit's windows have no such prefix"),
    "reformer": ("gpt2", "Google's Reformer: LSH attention layers (one shared query-key projection, the keys "
                         "length-normalised; in a sequence longer than lsh_attn_chunk_length each position is "
                         "hashed to one of num_buckets buckets by random rotations that torch.randn draws anew at "
                         "every forward unless hash_seed is set, so its logits are not a function of the weights "
                         "alone, and attends only within its sorted bucket's chunk and the chunk before, num_hashes "
                         "rounds merged by their logsumexp; a position sees itself only at -1e5) alternating with "
                         "local attention over fixed chunks (a query sees its own chunk of local_attn_chunk_length "
                         "and, by default, the one before: a window that depends on where in its chunk it stands); "
                         "reversible residual layers over two half streams (y1 = x1 + attention(x2), y2 = x2 + "
                         "MLP(y1), the head reading a LayerNorm of [y1; y2], twice the hidden size); axial position "
                         "embeddings (learned factor tables concatenated). Its pre-LayerNorm blocks and ReLU MLP are "
                         "GPT-2's; the hashing, the chunk windows, the two streams and the axial positions are not"),
    # issue 36, the newdec group: what these transformers 5.25 types add to the families that run (mistral4,
    # muse_glimmer_text, glm_moe_dsa), none of it in Petit's engine yet
    **{t: ("mistral4", "Mistral Large 4 (MistralLarge4ForConditionalGeneration and its text model): DeepSeek Sparse "
                       "Attention with an indexer of its own (queries from a LayerNorm of the hidden state, each "
                       "head's scaled by scale_h ln(p + 1) + bias_h; `indexer_types` layers reusing the last full "
                       "layer's choice), no low-rank query, NoPE layers (`no_rope_layers`), latent KV caches "
                       "shared across layers (`kv_source_layers`), RoPE frequencies times a learned exp(alpha) "
                       "(LeRoPE), the attention's queries scaled per head and position as the indexer's, the "
                       "logits soft-capped (30); the router and experts are mistral4's")
       for t in ("mistral_large4", "mistral_large4_text")},
    **{t: ("muse_glimmer_text", "Muse Spark (MuseSparkForConditionalGeneration, an image / audio / text "
                                "checkpoint, and its text model): each attention head's output RMS-normed before "
                                "the gate, residual gates (alpha x residual + beta x sublayer, per channel, from "
                                "sigmoid(gate / temperature)), norms that scale before normalising, and a mixture "
                                "of experts run at its own width (pre_expert_proj, a norm, sigmoid-routed experts "
                                "each followed by a norm, post_expert_proj) with logit-scaled routing")
       for t in ("muse_spark", "muse_spark_text")},
    **{t: ("glm_moe_dsa", "GLM-5.3-Flash (Glm5NextForConditionalGeneration and its text model): Kimi Delta "
                          "Attention layers beside latent attention without RoPE, a DeepSeek Sparse Attention "
                          "indexer over pooled keys, hyper-connection residual streams and forget gates, DeepSeek's "
                          "experts; no family Petit runs combines them")
       for t in ("glm5_next", "glm5_next_text")},
}


def closest(model_type) -> str | None:
    """The supported family nearest an unknown model_type, with what differs, or None."""
    import difflib
    if model_type in CLOSEST and CLOSEST[model_type][0] in MODEL_TYPES:
        family, what = CLOSEST[model_type]
        return f"{family} ({model_type} differs: {what})"
    near = difflib.get_close_matches(str(model_type), list(MODEL_TYPES), n=1, cutoff=0.75)
    return near[0] if near else None


def get_family(model_type):
    """The module implementing `model_type`.

    Raises:
        ValueError: for a model_type that is not a decoder-only language model, saying what it is; for an unknown
            model_type, naming the closest supported family when there is one and listing the
            supported ones.
    """
    if model_type in ENCODERS:
        return ENCODERS[model_type]
    if model_type in NOT_DECODERS or model_type in MULTIMODAL_NOT_TEXT:
        what = NOT_DECODERS.get(model_type) or MULTIMODAL_NOT_TEXT[model_type]
        raise ValueError(f"unsupported model_type {model_type!r}: {what}; Petit runs decoder-only language models")
    if model_type not in MODEL_TYPES:
        near = closest(model_type)
        hint = f"; the closest family Petit runs is {near}" if near else ""
        raise ValueError(f"unsupported model_type {model_type!r}{hint}: supported model types are "
                         f"{', '.join(sorted(MODEL_TYPES))}")
    return MODEL_TYPES[model_type]
