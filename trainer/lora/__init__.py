"""LoRA fine-tuning on a frozen base (issue 33): `petit finetune` (cli.py) trains float32 adapters with AdamW
(train.py) on chats or texts (data.py) through the base as it is loaded (base.py: the engine's C kernels, the
transposed quantized product among them), with per-layer activation checkpointing (model.py); `--check`
(gradcheck.py) holds every adapter gradient to float64 finite differences. The adapter file is
petit/loading/lora.py's."""

# the matrices an adapter can target (here, not in base.py: `petit --help` builds this command's parser without
# loading the kernels, so a path check's warning still goes through the CLI's one-line format)
TARGETS = ("q", "k", "v", "o", "gate", "up", "down")


def merge_to_file(base, adapter, output, weights: str | None = None, scale: float = 1.0):
    """The adapter merged into a copy of `base` written to `output` (petit.loading.lora_merge; `petit export --merge`
    and the app's "Merge and chat" both go through it). Returns the written model, loaded (the caller closes it)."""
    from petit.loading.lora_merge import merge_to_file as merge
    return merge(base, adapter, output, weights, scale)
