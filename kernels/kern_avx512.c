/* The AVX-512 path: the AVX2 kernels with VNNI's vpdpbusd (u8 x s8 -> int32 in one instruction, on 256-bit
 * vectors through AVX512VL), and the interleaved q8_0 / q4_0 matrices, decode's and prefill's main work, on 512-bit
 * vectors (kern_x86_512.h). */
#include "internal.h"
#ifdef PT_X86_64
#include <immintrin.h>          /* before the target switch: clang's intrinsics carry their own targets */
#ifdef __clang__                 /* clang ignores GCC's target pragma: the same, as an attribute on every function */
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"))), apply_to = function)
#elif defined(__GNUC__)          /* MSVC compiles intrinsics without a target switch */
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#endif
#include "kern_generic.h"
#define SUFFIX avx512
#define DOT_ACC(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#define DOT_ACC16 0
#define X8_KERNEL(t) FN(rows_##t##x16_)
#define ATTN_KERNEL FN(attn_block512_)
#include "kern_x86.h"
#include "kern_x86_512.h"
#ifdef __clang__
#pragma clang attribute pop
#endif
PT_X86_TABLE(pt_kernels_avx512, "avx512vnni");
#else
const pt_kernels pt_kernels_avx512 = {.name = 0};
#endif
