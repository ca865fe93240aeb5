"""llama.cpp's GGUF embedding encoders (issue 35, the gemb35 group): `bert` (bge, e5, MiniLM: BertModel converted
by convert_hf_to_gguf's BertModel), read as Petit's bert family, and `nomic-bert` (nomic-embed-text v1 / v1.5:
NomicBertModel), read as its nomic_bert family. Imported by gguf_archs, whose ARCHS these join.

The converter keeps the tensors as they are under llama.cpp's names (q / k unpermuted: both rotate halves, llama.cpp's
NEOX RoPE), the fused Wqkv of nomic-bert as one `attn_qkv`, and the token-type table whole (`token_types`); llama.cpp
adds type 0's row to every token, as transformers does for a one-segment text, so Petit folds that row into the
position table (bert) or the word embedding (nomic-bert) at load, as from a Hugging Face folder.

llama.cpp's graph (src/models/bert.cpp) runs bert's MLP GELU as ggml_gelu, the tanh form looked up in a table of
f16 inputs on the CPU, where the model (transformers' BertModel, hidden_act "gelu", which the file does not record)
runs the erf form. Petit runs the erf form: its vectors are sentence-transformers' to float32 rounding, and 1e-4 of
their size from llama.cpp's, which are that far from sentence-transformers' themselves (the tanh form would not close
the gap: the f16 table makes most of it; tests/test_gemb35.py). The pooling (`<arch>.pooling_type`) is read by
petit/generation/embed_config.py."""
from petit.loading.gguf_names import QKV, GGUFArch

# llama.cpp's enum llama_pooling_type (`<arch>.pooling_type`): the ones that make a text's vector (as
# sentence-transformers' pooling modes), and the others (petit/generation/embed_config.py refuses them)
GGUF_POOLING = {1: "mean", 2: "cls", 3: "lasttoken"}
GGUF_OTHER = {0: "none: a vector per token", 4: "rank: a reranker's relevance score"}

BERT_LAYER = {"attn_q": "attention.self.query", "attn_k": "attention.self.key", "attn_v": "attention.self.value",
              "attn_output": "attention.output.dense", "attn_output_norm": "attention.output.LayerNorm",
              "ffn_up": "intermediate.dense", "ffn_down": "output.dense", "layer_output_norm": "output.LayerNorm"}
BERT_GLOBAL = {"token_embd": "embeddings.word_embeddings", "token_embd_norm": "embeddings.LayerNorm",
               "position_embd": "embeddings.position_embeddings", "token_types": "embeddings.token_type_embeddings"}
NOMIC_LAYER = {"attn_output": "attn.out_proj", "attn_output_norm": "norm1", "ffn_up": "mlp.fc11",
               "ffn_gate": "mlp.fc12", "ffn_down": "mlp.fc2", "layer_output_norm": "norm2"}
NOMIC_GLOBAL = {"token_embd": "embeddings.word_embeddings", "token_embd_norm": "emb_ln",
                "token_types": "embeddings.token_type_embeddings"}


def _encoder(meta, key, cfg, has, act: str) -> None:
    if meta.get(key("attention.causal"), False):
        raise ValueError(f"metadata {key('attention.causal')!r} is true: the {cfg['model_type']} family runs a "
                         f"bidirectional encoder")
    cfg["layer_norm_eps"] = float(meta.get(key("attention.layer_norm_epsilon"), 1e-12))
    cfg["hidden_act"] = act
    for k in ("num_key_value_heads", "tie_word_embeddings"):
        cfg.pop(k)


def _bert(meta, key, cfg, has):
    _encoder(meta, key, cfg, has, "gelu")         # the model's erf form (see the module docstring)
    for k in ("head_dim", "rope_theta"):
        cfg.pop(k)


def _nomic(meta, key, cfg, has):
    _encoder(meta, key, cfg, has, "silu")


def _types(meta, key, cfg, shape):
    """type_vocab_size: the rows of token_types (llama.cpp adds row 0; a file may leave the table out)."""
    rows = shape("token_types.weight")
    cfg["type_vocab_size"] = rows[0] if rows else 1


def _plus_type0(table: str, rows_of: str):
    """derived(tensors, cfg) of the table `table` (HF name) made of the GGUF tensor `rows_of` with token type 0's
    row added to each row (no token_types: the rows as they are)."""
    def derived(tensors, cfg):
        n = tensors[rows_of].shape[0]
        names = [rows_of] + (["token_types.weight"] if "token_types.weight" in tensors else [])

        def make(rows):
            out = rows(rows_of, 0, n)
            return out + rows("token_types.weight", 0, 1)[0] if len(names) > 1 else out
        return {table: ((n, cfg["hidden_size"]), make, names)} if rows_of in tensors else {}
    return derived


GEMB35_ARCHS = {
    "bert": GGUFArch("bert", BERT_LAYER, global_names=BERT_GLOBAL, prefix="encoder.layer.{}.", extra=_bert,
                     shape_extra=_types,
                     derived=_plus_type0("embeddings.position_embeddings.typed", "position_embd.weight")),
    "nomic-bert": GGUFArch("nomic_bert", NOMIC_LAYER, global_names=NOMIC_GLOBAL, prefix="encoder.layers.{}.",
                           splits={"attn_qkv": tuple((n.replace("self_attn.", "attn."), s) for n, s in QKV)},
                           extra=_nomic, shape_extra=_types,
                           derived=_plus_type0("embeddings.word_embeddings.typed", "token_embd.weight")),
}
