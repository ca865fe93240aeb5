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
NOT_YET: dict[str, str] = {
    # issue 30, the recur group
    "gguf:rwkv6qwen2": ("RWKV-6's time mixing as gated linear attention (no bonus, k x (1 - w), sigmoid gate, grouped "
                        "k / v heads, no group norm) on Qwen2's RMS-normed SwiGLU blocks; Petit's rwkv6 block has the "
                        "bonus, the group norm and the channel mixing"),
    "gguf:arwkv7": ("RWKV-7's time mixing on Qwen2's RMS-normed SwiGLU blocks (no channel mixing, no token shift in "
                    "the MLP); Petit's rwkv7 block has RWKV-7's channel mixing"),
}
