"""Why a model Petit is asked to open is not one it runs, when the reason is what the model is rather than a family
not written yet: an encoder-decoder, a bidirectional encoder, a speech or music model. Named in the refusal (so a
user knows not to wait for it) and in the coverage tables of docs/hf-models.md and docs/gguf.md.

Petit runs decoder-only language models: one stack of causal blocks from token ids to next-token logits."""

_SEQ2SEQ = ("an encoder-decoder (sequence-to-sequence) model: its causal-LM class is the decoder alone, which reads "
            "the encoder's states")
_ENCODER = ("a bidirectional encoder (a masked-language model) with a language-model head; embedding models are "
            "another feature than chat")

# Hugging Face model_type -> what it is
NOT_DECODERS = {
    **{t: _SEQ2SEQ for t in ("bart", "bigbird_pegasus", "blenderbot", "blenderbot-small", "marian", "mbart", "mvp",
                             "pegasus", "plbart", "prophetnet")},
    **{t: _ENCODER for t in ("bert-generation", "big_bird", "camembert", "data2vec-text", "electra", "ernie",
                             "megatron-bert", "rembert", "roberta-prelayernorm", "roc_bert", "roformer",
                             "xlm-roberta-xl", "xmod")},
    "xlm": "a cross-lingual masked-language model (a bidirectional encoder with a language-model head)",
    "xlnet": "a permutation language model (two-stream attention over permuted orders), not a causal decoder",
    "whisper": "a speech recognizer: an encoder-decoder over audio",
    "moss_transcribe_diarize": "a speech transcriber: audio in, text out through an audio encoder",
    "musicgen": "a music generator: it predicts audio codes, not text",
    "musicgen_melody": "a music generator: it predicts audio codes, not text",
    "moshi": "a speech-text model: it predicts audio codes beside text",
    "trocr": "an OCR decoder: it reads the states of an image encoder",
}

# issue 36: transformers' multimodal checkpoints that are no decoder-only language model of text, whatever their
# backbone
MULTIMODAL_NOT_TEXT = {
    "pi0": "a robot policy (Physical Intelligence's pi0): a vision-language backbone whose action expert predicts "
           "robot actions by flow matching; it generates no text",
    "pi05": "a robot policy (pi0.5): a vision-language backbone whose action expert predicts robot actions by flow "
            "matching; it generates no text",
    "evolla": "a protein-language model: protein sequences and structures (a SaProt encoder) read by a Llama with "
              "cross-attention to them, no text-only language model",
    "kyutai_speech_to_text": "a streaming speech recognizer: its decoder reads audio codes (Mimi) beside text at "
                             "every step",
    "diffusion_gemma": "a block-diffusion language model (DiffusionGemmaForBlockDiffusion): a causal encoder caches "
                       "the text so far and a decoder denoises the next block of masked tokens with bidirectional "
                       "attention over it, in several passes, instead of predicting one next token",
    "blip": "BLIP's captioner: a BERT-style text decoder that cross-attends to the image at every layer; its forward "
            "requires pixel_values (main input), so there is no text-only language model",
}

# issue 35: llama.cpp's bert and nomic-bert embedding encoders are read (petit/loading/gguf_gemb35.py), not these
_GGUF_ENCODER = ("an encoder (embeddings), not a decoder-only language model, and not one of the embedding encoders "
                 "Petit reads (bert, nomic-bert)")
# llama.cpp general.architecture -> what it is
GGUF_NOT_DECODERS = {
    **{a: _GGUF_ENCODER for a in ("modern-bert", "nomic-bert-moe", "neo-bert", "jina-bert-v2",
                                  "jina-bert-v3", "eurobert", "gemma-embedding", "llama-embed", "t5encoder")},
    "t5": "an encoder-decoder (sequence-to-sequence) model",
    "clip": "a vision encoder (the image half of a multimodal model)",
    "wavtokenizer-dec": "an audio codec's decoder",
    "qwen3tts": "a text-to-speech model: it predicts audio codes",
    "pockettts": "a text-to-speech model: it predicts audio codes",
    "dream": "a diffusion language model: it denoises masked tokens in parallel instead of predicting the next one",
    "llada": "a diffusion language model: it denoises masked tokens in parallel instead of predicting the next one",
    "llada-moe": "a diffusion language model: it denoises masked tokens in parallel instead of predicting the next one",
    "rnd1": "a diffusion language model: it denoises masked tokens in parallel instead of predicting the next one",
    "eagle3": "a speculative-decoding draft head: it runs on a target model's hidden states",
    "dflash": "a speculative-decoding draft head: it runs on a target model's hidden states",
}

# decoder-only types (and GGUF architectures, as "gguf:<name>") with no family yet, and what running them needs;
# CLOSEST (petit/models/nearest.py) says it for those near a family Petit runs
NOT_YET: dict[str, str] = {}

# issue 30, the recur group
NOT_YET.update({
    "gguf:arwkv7": ("RWKV-7's time mixing on Qwen2's RMS-normed SwiGLU blocks; not read because llama.cpp, the only "
                    "reference (no transformers class), does not run its own conversion consistently: on a tiny "
                    "converted ARWKV file (tests/fixtures/gguf5_ggufx/make_gguf5_ggufx.py --only arwkv7) the first "
                    "position's logits depend on how many tokens the batch holds (2.3 / 0.58 / 0 apart at 1 / 2 / 5+ "
                    "tokens), and a file without the gate and the group norm gives NaN at a prompt's last positions, "
                    "so there is nothing exact to check a reading against"),
})
# issue 30, the gemma group
NOT_YET.update({
    "gemma4_assistant": "Gemma 4's assistant, a speculative-decoding draft model: every layer attends over the keys "
                        "and values of its target Gemma 4 model (num_kv_shared_layers = num_hidden_layers), which "
                        "Petit's cache does not hand from one model to another",
    "gemma4_unified_assistant": "Gemma 4 Unified's assistant, a speculative-decoding draft model: every layer attends "
                                "over its target model's keys and values, which Petit's cache does not hand from one "
                                "model to another",
    "gguf:gemma4-assistant": "Gemma 4's assistant, a speculative-decoding draft model reading its target model's KV "
                             "cache, which Petit's cache does not hand from one model to another",
})
# issue 36, the fam36q group: llama.cpp architectures not read, each with what it computes that Petit does not run
# (or why no file can be checked); hy_v3 is read (petit/loading/gguf_fam36q5.py)
NOT_YET.update({
    "gguf:gptj": ("GPT-J runs from its Hugging Face folder (model_type gptj), not from a GGUF file: llama.cpp 0.3.36 "
                  "keeps the name but builds no graph for it (no hyperparameter or tensor loader: its files do not "
                  "load) and its converter has no GPTJForCausalLM class, so there is no llama.cpp file to read"),
    "gguf:dots3note": ("Dots 3 Note runs from its Hugging Face folder (model_type dots3_note / dots3_note_text), not "
                       "from a GGUF file: llama.cpp 0.3.36's graph rotates the indexer's q / k by halves (NEOX) where "
                       "transformers' Dots3NoteTextIndexer rotates adjacent pairs, and its converter does not permute "
                       "the indexer for it. On a tiny converted file (tests/fixtures/gguf5_gg36t) llama.cpp's exact "
                       "logits are transformers' within 2e-6 of the range until the indexer chooses (position 12 of "
                       "35, index_topk 12), then up to 0.68 of the range away; with the indexer's rows permuted to "
                       "halves, within 2.2e-6 at every position. A reading of its two-sized latent attention "
                       "(per-layer head counts, the sliding layers' own kv_lora_rank) is not written yet"),
    "gguf:deepseek": ("DeepSeek-MoE (remote code DeepseekForCausalLM, no transformers class): Llama's attention with "
                      "softmax-routed experts whose top-k weights are not renormalised plus ungated shared experts "
                      "after `leading_dense_block_count` dense layers; Petit's deepseek_v2 / deepseek_v3 families "
                      "have latent attention only, and no family runs this router beside plain attention"),
    "gguf:chameleon": ("Chameleon (ChameleonForConditionalGeneration, not in transformers' causal-LM registry): "
                       "LayerNorms with biases on q and k, Swin-style norms after attention and MLP (`swin_norm`), "
                       "and the logits of the 8192 image tokens (ids 4..8195) set to -FLT_MAX by llama.cpp's graph; "
                       "no family Petit runs"),
    "gguf:grok": ("Grok (remote code GrokForCausalLM, no transformers class): attention logits soft-capped at 30 "
                  "and outputs scaled (`attention.output_scale`), router logits soft-capped, GELU experts (Grok-2: "
                  "a dense GELU MLP beside them, the two summed times 1/sqrt(2)), norms after attention and MLP, "
                  "embedding and logit multipliers; no family Petit runs has these"),
    "gguf:arctic": ("Snowflake Arctic (remote code ArcticForCausalLM, no transformers class): each block adds to its "
                    "dense residual SwiGLU MLP a softmax-routed MoE computed from the block's input (before "
                    "attention) under its own norm (`ffn_norm_exps`); no family Petit runs has that parallel "
                    "residual MoE branch"),
    "gguf:bailingmoe": ("Ling 1 (remote code BailingMoeForCausalLM, no transformers class): fused q / k / v, "
                        "softmax-routed experts (renormalised with `expert_weights_norm`) plus ungated shared "
                        "experts; Petit's Ling families (sarvam_moe for bailingmoe2, bailing_hybrid) route on the "
                        "sigmoid"),
    "gguf:grovemoe": ("GroveMoE (remote code GroveMoeForCausalLM, no transformers class): besides the softmax-routed "
                      "experts, adjugate experts shared by groups of experts (`ffn_*_chexps`) run on the same choice "
                      "and added times `expert_group_scale`; no family Petit runs"),
    "gguf:cogvlm": ("CogVLM (remote code CogVLMForCausalLM): a vision-language model whose layers hold a second set "
                    "of attention and MLP weights (the visual expert) for image tokens, fed by an image encoder; "
                    "Petit reads no image"),
    "gguf:deci": ("DeciLM / Nemotron-NAS (remote code DeciLMForCausalLM, no transformers class): Llama's blocks with "
                  "a head count and MLP width of their own in each layer, some attention or MLP replaced by a linear "
                  "map or left out (`block_configs`); Petit's llama family has one shape for every layer"),
    "gguf:glm5-next": ("GLM-5.3-Flash (Glm5NextForConditionalGeneration, no transformers class): Kimi Delta Attention "
                       "layers beside latent attention without RoPE, a DeepSeek Sparse Attention indexer over pooled "
                       "keys, hyper-connection residual streams and DeepSeek's experts; no family Petit runs "
                       "combines them"),
    "gguf:graniteswitch": ("Granite Switch (remote code GraniteSwitchForCausalLM): dense Granite with N LoRA adapters "
                           "embedded in every layer, one chosen per token by a control token the model reads, "
                           "which reserves a cache slot (a weightless switch layer); Petit runs no per-token adapter "
                           "choice"),
})
# issue 36, the fam36r group: llama.cpp architectures Petit does not read, and why (the qwen*vl ones, paddleocr, xverse,
# orion, pangu-embedded, qwen and mellum are read: petit/loading/gguf_fam36r5.py)
_REMOTE = "remote code, no transformers class"
_NOT_CHECKED = ("Petit runs the family from its Hugging Face folder (model_type {}); its GGUF file is not read yet: no "
                "tiny file converted by llama.cpp has been checked against its logits, and llama.cpp's graph differs "
                "from transformers' in {}")
NOT_YET.update({
    "gguf:jais": f"JAIS ({_REMOTE}): GPT-2's LayerNorm blocks with ALiBi, a SwiGLU MLP and muP embedding / logit "
                 "scales, a block no Petit family has (jais2 is another design: RoPE, a relu² MLP)",
    "gguf:kimi-k3": "Kimi-K3's language model: kimi-linear's KDA + MLA hybrid with cross-layer residual attention, a "
                    "latent MoE, the situ activation, an MLA output gate and a full-rank KDA gate, none of which "
                    "Petit's kimi_linear family runs; its converter reads the release's MXFP4-packed experts",
    "gguf:maincoder": f"Maincoder ({_REMOTE}): llama's block with q / k RMSNorms applied after RoPE, which llama.cpp "
                      "runs on adjacent pairs of unpermuted q / k rows; Petit's hunyuan_v1_dense norms after RoPE too, "
                      "but on halves, and with no reference but llama.cpp the pairing is not checked",
    "gguf:maple": f"Maple ({_REMOTE}): a sliding / global MoE with q / k norms whose expert SwiGLU is clamped at 7",
    "gguf:nanbeige": f"Nanbeige 4.2 ({_REMOTE}): llama's blocks run num_loops times over (a looped depth), with an "
                     "optional final norm per loop",
    "gguf:openelm": f"OpenELM ({_REMOTE}): per-layer head counts and MLP widths (layer-wise scaling), q / k norms",
    "gguf:plamo": f"PLaMo ({_REMOTE}): parallel attention and MLP on one norm, 5 shared key / value heads",
    "gguf:plamo2": f"PLaMo 2 ({_REMOTE}): a Mamba / attention hybrid with its own SSM layout",
    "gguf:plamo3": f"PLaMo 3 ({_REMOTE}): sliding / global attention (a pattern of period 8), q / k norms and "
                  "post-attention / post-MLP norms",
    "gguf:plm": f"PLM ({_REMOTE}): MLA attention (kv_lora_rank) with a relu² MLP",
    "gguf:qwen4exp": "Qwen4-Exp, which Petit runs from its Hugging Face folder (qwen4_exp_text; "
                     "docs/hf-models.md), not from llama.cpp's file: its GGUF's names and keys for the "
                     "hyper-connections, the QSA indexer (a top_k, not budget and ratio) and one PLE layer are not "
                     "mapped, and llama.cpp 0.3.36 marks its own qwen4exp graph as pending a complete "
                     "reimplementation, no reference to check a reading against",
    "gguf:refact": f"Refact ({_REMOTE}): ALiBi attention with one key / value head, RMSNorms and SwiGLU",
    "gguf:smallthinker": f"SmallThinker ({_REMOTE}): an MoE whose experts are routed before the attention "
                         "(sigmoid or softmax primary router) with a sliding / global pattern",
    "gguf:spark2_5": f"Spark-X2.5 ({_REMOTE}): sliding / global attention with head-wise sigmoid output gates, "
                     "partial RoPE per layer type and a GELU MLP",
    "gguf:talkie": f"Talkie ({_REMOTE}): weightless RMSNorms with learned attention / MLP / head gains and a logit "
                   "scale, the inverse RoPE absorbed into q / k",
})
# the remote-code blocks above that no family Petit runs has (the others say so themselves)
for _name in ("maple", "nanbeige", "openelm", "plamo", "plamo2", "plamo3", "plm", "refact", "smallthinker",
              "spark2_5", "talkie"):
    NOT_YET["gguf:" + _name] += "; no family Petit runs has that block"
