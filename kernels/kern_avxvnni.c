/* The AVX-VNNI path: the AVX2 kernels with vpdpbusd in its VEX encoding (u8 x s8 -> int32 in one instruction on
 * 256-bit vectors), for the CPUs that have AVX-VNNI but not AVX-512: Intel's laptop and desktop cores since Alder
 * Lake. One instruction where AVX2 needs three (vpmaddubsw, vpmaddwd, vpaddd), and no 16-bit intermediate sums. */
#include "internal.h"
#ifdef PT_X86_64
#include <immintrin.h>          /* before the target switch: clang's intrinsics carry their own targets */
#ifdef __clang__                 /* clang ignores GCC's target pragma: the same, as an attribute on every function */
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avxvnni"))), apply_to = function)
#elif defined(__GNUC__)          /* MSVC compiles intrinsics without a target switch */
#pragma GCC target("avx2,fma,f16c,avxvnni")
#endif
#include "kern_generic.h"
#define SUFFIX avxvnni
#define DOT_ACC(acc, u, s) _mm256_dpbusd_avx_epi32((acc), (u), (s))
#define DOT_ACC16 0
#include "kern_x86.h"
#ifdef __clang__
#pragma clang attribute pop
#endif
PT_X86_TABLE(pt_kernels_avxvnni, "avxvnni");
#else
const pt_kernels pt_kernels_avxvnni = {.name = 0};
#endif
