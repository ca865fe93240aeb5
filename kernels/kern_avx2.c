/* The AVX2 + FMA + F16C path. */
#include "internal.h"
#ifdef PT_X86_64
#include <immintrin.h>          /* before the target switch: clang's intrinsics carry their own targets */
#ifdef __clang__                 /* clang ignores GCC's target pragma: the same, as an attribute on every function */
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#elif defined(__GNUC__)          /* MSVC compiles intrinsics without a target switch */
#pragma GCC target("avx2,fma,f16c")
#endif
#include "kern_generic.h"
#define SUFFIX avx2
#define DOT_ACC(acc, u, s) _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), ones))
#define DOT_ACC16 1     /* q4_0's pair sums add up in 16 bits before one vpmaddwd */
#include "kern_x86.h"
#ifdef __clang__
#pragma clang attribute pop
#endif
PT_X86_TABLE(pt_kernels_avx2, "avx2");
#else
const pt_kernels pt_kernels_avx2 = {.name = 0};
#endif
