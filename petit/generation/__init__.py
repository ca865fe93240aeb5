"""Generation: sampling, stop strings, streaming detokenization, the one token loop and the Session over it.

    from petit.generation import Params, Session
    session = Session(model)                                      # keeps only the KV cache, keyed by the token prefix
    for step in session.reply(messages, Params(max_tokens=64)):   # the caller owns the conversation
        print(step.text, end="")

sample.py (Sampler) and stop.py (StopStrings) import nothing heavy; loop.py and session.py need the kernels, so the
names below are imported on first use.
"""
_WHERE = {"Step": "loop", "generate_tokens": "loop", "stream_text": "loop", "Sampler": "sample",
          "StopStrings": "stop", "END_OF_TURN": "session", "ContextFullError": "session", "Params": "session",
          "Session": "session", "Stats": "session", "Speculation": "speculative", "LookupDrafter": "speculative",
          "DraftModel": "speculative", "generate_speculative": "speculative", "load_draft": "speculative",
          "check_rollback": "speculative"}

__all__ = sorted(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        import importlib
        return getattr(importlib.import_module(f"petit.generation.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'petit.generation' has no attribute {name!r}")
