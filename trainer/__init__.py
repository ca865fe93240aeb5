"""Petit's trainer: a small Llama-style model trained in pure NumPy on the CPU.

Modules, bottom up:

- ``layers``: forward/backward pairs (embedding, rmsnorm, linear, rope, attention, swiglu, cross-entropy).
- ``model``: the llama config dict, parameter init, forward/backward over the Hugging Face-named parameters.
- ``optim``: AdamW (decay on >= 2-D tensors only), warmup + cosine learning rate, global-norm clipping.
- ``parallel``: one step's batch split over worker threads with single-threaded BLAS.
- ``data``: encoding, the chat loss mask, the train/validation split, batches.
- ``bpe``: tokenizer training (byte-level BPE or characters) into the dict ``petit.tokenizer`` reads.
- ``chat_corpus``: the seeded ChatML dialogue generator and its held-out evaluation pairs.
- ``checkpoint``: atomic checkpoint directories.
- ``train``: ``TrainConfig`` and ``train()``.
- ``export``: a checkpoint as a ``.petit`` model file (f32, q8_0 or q4_0) for the engine; ``petit export``.
- ``reference``: an independent float64 forward that reads ``.petit`` files itself (no engine code).
- ``verify``: engine against reference on every logit of a prompt + generation; ``petit verify``.
- ``evaluate``: exact-match accuracy on the chat corpus's held-out questions.
- ``default_model``: the one-command recipe of the bundled default model.
- ``gradcheck``: the finite-difference gradient check.
- ``cli``: the ``petit train`` subcommand.
"""
