/* A run of length-prefixed strings, as GGUF stores its string arrays (a u64 little-endian byte count, then the
 * bytes): where each string's bytes start. A 150,000-token vocabulary and as many merges are 300,000 lengths read
 * one after the other, 0.3-0.6 s as a Python loop (issue 31: the open time of a 7B GGUF). */
#include "internal.h"

int64_t pt_prefixed_starts(const void *buf, int64_t size, int64_t pos, int64_t n, int64_t *starts) {
    const uint8_t *p = (const uint8_t *)buf;
    for (int64_t i = 0; i < n; i++) {
        if (pos < 0 || size - pos < 8)
            return -1 - i;
        uint64_t len;
        memcpy(&len, p + pos, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        len = __builtin_bswap64(len);
#endif
        pos += 8;
        if (len > (uint64_t)(size - pos))
            return -1 - i;
        starts[i] = pos;
        pos += (int64_t)len;
    }
    return pos;
}
