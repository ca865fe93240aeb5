"""Per-model settings: sampling, system prompt, chat format, context, KV and weights types."""
