"""What the families are built from, none of it a family: the decoder and its plan, the config readers, RoPE, the
mixers (mixture of experts, latent and sparse attention, Mamba and the other recurrent mixers, the shared blocks) and
the builders that several families share (Llama's tensor names in `common`, DeepSeek's in `deepseek_common`, the
multimodal wrappers' config and checkpoint in `wrapper`). A module here imports only this folder and lower layers,
never a family (tests/test_architecture.py)."""
