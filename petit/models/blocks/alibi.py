"""ALiBi's per-head slopes (BLOOM, Falcon, MPT): attention adds slope_h * (j - i) to the score of key j for the
query at i (kernels/attention.c takes the slopes; the query's own term is constant in its softmax, so this equals
the slope_h * j that BLOOM and Falcon add)."""
import math

import numpy as np


def bloom_slopes(n_heads: int) -> np.ndarray:
    """BLOOM's (and Falcon's): 2^(-8 k / n) for k = 1..n with n the largest power of two <= n_heads, then, for the
    heads beyond it, the odd powers of 2^(-8 / 2n)."""
    n = 2 ** math.floor(math.log2(n_heads))
    base = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
    slopes = [base ** k for k in range(1, n + 1)]
    if n != n_heads:
        extra = 2.0 ** (-(2.0 ** -(math.log2(2 * n) - 3)))
        slopes += [extra ** k for k in range(1, 1 + 2 * min(n, n_heads - n), 2)]
    return np.array(slopes, np.float32)


def mpt_slopes(n_heads: int, bias_max: float = 8.0) -> np.ndarray:
    """MPT's: 1 / 2^(k bias_max / m) for k = 1..m with m the next power of two >= n_heads; when m > n_heads, the odd
    entries then the even ones, the first n_heads of them."""
    m = 2 ** math.ceil(math.log2(n_heads))
    slopes = 1.0 / np.power(2.0, np.arange(1, m + 1) * (bias_max / m))
    if m != n_heads:
        slopes = np.concatenate([slopes[1::2], slopes[::2]])[:n_heads]
    return slopes.astype(np.float32)
