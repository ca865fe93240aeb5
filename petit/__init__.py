"""Petit: run, train, quantize and verify small language models on a laptop CPU."""

__version__ = "0.1.0"
