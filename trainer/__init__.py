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
- ``export``: a checkpoint as a ``.petit`` model file (f32) for the engine.
- ``gradcheck``: the finite-difference gradient check.
- ``cli``: the ``petit train`` subcommand.
"""
