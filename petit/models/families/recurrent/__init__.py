"""Recurrent decoders with no attention at all: Mamba 1 / 2, RWKV 4 / 6 / 7, xLSTM (blocks/ssm.py's mixers);
their state per sequence in petit/cache.py's StateCache."""

# model_type -> its module in this folder
MODEL_TYPES = {
    "falcon_mamba": "falcon_mamba",
    "mamba": "mamba",
    "mamba2": "mamba2",
    "rwkv": "rwkv",
    "rwkv6": "rwkv6",
    "rwkv6qwen2": "rwkv6qwen2",
    "rwkv7": "rwkv7",
    "xlstm": "xlstm",
}

# the modules here that are part of a family, not one: module -> the modules of its family that import it
HELPERS = {
    "rwkv6_config": ("rwkv6",),
    "rwkv7_config": ("rwkv7",),
}
