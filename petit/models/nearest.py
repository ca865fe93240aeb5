"""The model_types Petit does not run that are near a family it does: the family, and what differs. Named in the
refusal a user sees (petit.models.closest) and in the coverage tables of docs/hf-models.md and docs/gguf.md; the
models that are not decoder-only language models at all are in petit/models/refusals.py."""

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
