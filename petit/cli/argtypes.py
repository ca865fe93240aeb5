"""argparse value types shared by every `petit` subcommand, so each flag error reads the same way, and the error a
command raises for a command line that cannot work (exit code 2, like argparse's own)."""
import argparse


class UsageError(ValueError):
    """The command line cannot work (flags that contradict each other, a value out of range): `petit` prints
    'petit COMMAND: error: MESSAGE' and exits with 2, as for a flag argparse rejects. Runtime errors (a missing or
    corrupt file, a model that refuses) stay ValueError / OSError: exit 1."""


def non_negative_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {s!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {v}")
    return v


def positive_int(s: str) -> int:
    v = non_negative_int(s)
    if v == 0:
        raise argparse.ArgumentTypeError("expected a positive integer, got 0")
    return v


def thread_count(s: str) -> int:
    v = positive_int(s)
    if v > 256:                          # the kernels' thread pool holds at most 256 (petit.native.configure)
        raise argparse.ArgumentTypeError(f"expected 1 to 256 threads, got {v}")
    return v


def number(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {s!r}") from None


def weight_type(s: str) -> str:
    """A --weights value, with fp32 accepted for f32 (the spelling `petit export` once used)."""
    return "f32" if s == "fp32" else s
