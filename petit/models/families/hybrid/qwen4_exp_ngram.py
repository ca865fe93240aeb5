"""Qwen4-Exp's n-gram hashing (the family helper: qwen4_exp_ple.py's embeddings): each PLE layer's hash multipliers
(splitmix64 from the config's seed, odd) and its heads' vocabularies (primes from ngram_vocab_size_base up), with
their offsets in the table, as transformers derives its buffers."""
import math

_M64 = (1 << 64) - 1
_GAMMA, _MIX1, _MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _splitmix64(x: int) -> int:
    x = (x + _GAMMA) & _M64
    x = ((x ^ (x >> 30)) * _MIX1) & _M64
    x = ((x ^ (x >> 27)) * _MIX2) & _M64
    return x ^ (x >> 31)


def multipliers(cfg, index: int) -> list:
    """The PLE layer `index`'s odd multipliers, one per n-gram position, below 2^63 / vocab_size."""
    half = max(1, ((1 << 63) - 1) // max(cfg.vocab_size, 1) // 2)
    base = cfg.seed + 10007 * index
    return [2 * (_splitmix64((base + _GAMMA * (i + 1)) & _M64) % half) + 1 for i in range(cfg.ngram_size)]


def _is_prime(v: int) -> bool:
    return v > 1 and (v == 2 or v % 2 != 0) and all(v % d for d in range(3, math.isqrt(v) + 1, 2))


def vocabularies(cfg, index: int) -> tuple[list, list, int]:
    """The PLE layer `index`'s heads' vocabularies (consecutive primes from ngram_vocab_size_base, after those of
    the layers before it), their first rows, and the table's padded rows."""
    heads = (cfg.ngram_size - 1) * cfg.heads_per_ngram
    primes, v = [], cfg.ngram_vocab_size_base - 1
    while len(primes) < (index + 1) * heads:
        v += 1
        if _is_prime(v):
            primes.append(v)
    sizes = primes[index * heads:]
    offsets = [sum(sizes[:k]) for k in range(heads)]
    div = cfg.make_ngram_vocab_size_divisible_by
    return sizes, offsets, -(-sum(sizes) // div) * div
