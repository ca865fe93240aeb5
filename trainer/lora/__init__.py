"""LoRA fine-tuning on a frozen base (issue 33): `petit finetune` (cli.py) trains float32 adapters with AdamW
(train.py) on chats or texts (data.py) through the base as it is loaded (base.py: the engine's C kernels, the
transposed quantized product among them), with per-layer activation checkpointing (model.py); `--check`
(gradcheck.py) holds every adapter gradient to float64 finite differences. The adapter file is
petit/loading/lora.py's."""

# the matrices an adapter can target (here, not in base.py: `petit --help` builds this command's parser without
# loading the kernels, so a path check's warning still goes through the CLI's one-line format)
TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
