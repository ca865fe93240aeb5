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
    **{t: _ENCODER for t in ("bert", "bert-generation", "big_bird", "camembert", "data2vec-text", "electra", "ernie",
                             "megatron-bert", "rembert", "roberta", "roberta-prelayernorm", "roc_bert", "roformer",
                             "xlm-roberta", "xlm-roberta-xl", "xmod")},
    "xlm": "a cross-lingual masked-language model (a bidirectional encoder with a language-model head)",
    "xlnet": "a permutation language model (two-stream attention over permuted orders), not a causal decoder",
    "whisper": "a speech recognizer: an encoder-decoder over audio",
    "moss_transcribe_diarize": "a speech transcriber: audio in, text out through an audio encoder",
    "musicgen": "a music generator: it predicts audio codes, not text",
    "musicgen_melody": "a music generator: it predicts audio codes, not text",
    "moshi": "a speech-text model: it predicts audio codes beside text",
    "trocr": "an OCR decoder: it reads the states of an image encoder",
}

_GGUF_ENCODER = "an encoder (embeddings), not a decoder-only language model"
# llama.cpp general.architecture -> what it is
GGUF_NOT_DECODERS = {
    **{a: _GGUF_ENCODER for a in ("bert", "modern-bert", "nomic-bert", "nomic-bert-moe", "neo-bert", "jina-bert-v2",
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
# CLOSEST (petit/models/__init__.py) says it for those near a family Petit runs
NOT_YET: dict[str, str] = {}

# issue 30, the mla group: the latent-attention families not run yet, and what each adds that Petit lacks
NOT_YET.update({
    "longcat_flash": "LongCat-Flash: each layer is two latent-attention sublayers (their q / kv latents rescaled by "
                     "sqrt(hidden / rank)) and two dense MLPs, plus a shortcut MoE on the first sublayer's output "
                     "added after the second, whose router also picks zero-computation experts (identity: the "
                     "token passes unchanged, weighted); Petit's decoder has one attention and one MLP per layer and "
                     "its MoE kernel no identity experts",
    "deepseek_v4": "DeepSeek-V4: attention over a sliding window of keys plus compressed long-range entries "
                   "(compressed sparse attention: overlapping learned-gate compressions of every few tokens, chosen "
                   "by its own indexer; heavily compressed attention), a per-head attention sink, grouped low-rank "
                   "output projections (o_groups / o_lora_rank), hyper-connections (hc_mult parallel residual "
                   "streams mixed per layer and by a hyper head), hash-routed expert layers and sqrtsoftplus "
                   "routing: none of these is in Petit's decoder or kernels (its DeepSeek Sparse Attention is "
                   "V3.2's, over every cached position)",
})

# issue 30, the hybrid group: what the hybrids Petit does not run yet add
NOT_YET.update({
    "zamba": ("Zamba v1's mixers are multi-head Mamba-1 (each of n_mamba_heads channel groups with its own x_proj and "
              "dt_proj, so its own B, C and time steps), which kernels/ssm.c's Mamba-1 scan (one x_proj over all "
              "channels) does not run; its shared attention block (without Zamba2's adapters) would run as zamba2's"),
})
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
