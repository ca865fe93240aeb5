/* What differs between the systems the kernels build on: threads, a mutex and a condition variable, the CPU count,
 * cpuid, and whether the x86 SIMD paths are compiled. POSIX threads on Linux and macOS; the Win32 API on Windows
 * (MSVC, clang-cl and MinGW-w64 alike). Atomics are C11 <stdatomic.h> everywhere (MSVC: /experimental:c11atomics,
 * Visual Studio 2022 17.5 or later). Everything else in kernels/ is plain C11 without variable-length arrays. */
#ifndef PETIT_PORTABLE_H
#define PETIT_PORTABLE_H

#include "internal.h"   /* PT_X86_64 */

#ifdef _WIN32
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX               /* no min / max macros over our names */
#endif
#include <windows.h>
#include <process.h>

typedef SRWLOCK pt_mutex;
typedef CONDITION_VARIABLE pt_cond;
typedef HANDLE pt_thread;
#define PT_MUTEX_INIT SRWLOCK_INIT
#define PT_COND_INIT CONDITION_VARIABLE_INIT
#define PT_THREAD_FN(name) unsigned __stdcall name(void *arg)
#define PT_THREAD_RETURN 0

static inline void pt_mutex_lock(pt_mutex *m) { AcquireSRWLockExclusive(m); }
static inline void pt_mutex_unlock(pt_mutex *m) { ReleaseSRWLockExclusive(m); }
static inline void pt_mutex_reset(pt_mutex *m) { InitializeSRWLock(m); }
static inline void pt_cond_reset(pt_cond *c) { InitializeConditionVariable(c); }
static inline void pt_cond_wait(pt_cond *c, pt_mutex *m) { SleepConditionVariableSRW(c, m, INFINITE, 0); }
static inline void pt_cond_signal(pt_cond *c) { WakeConditionVariable(c); }
static inline void pt_cond_broadcast(pt_cond *c) { WakeAllConditionVariable(c); }

static inline int pt_thread_start(pt_thread *t, unsigned(__stdcall *fn)(void *), void *arg) {
    uintptr_t h = _beginthreadex(NULL, 0, fn, arg, 0, NULL);
    if (h == 0) return -1;
    *t = (HANDLE)h;
    return 0;
}
static inline void pt_thread_join(pt_thread t) {
    WaitForSingleObject(t, INFINITE);
    CloseHandle(t);
}

static inline int64_t pt_now_ns(void) {      /* a monotonic clock */
    static LARGE_INTEGER freq;
    LARGE_INTEGER t;
    if (!freq.QuadPart) QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&t);
    return (int64_t)((double)t.QuadPart * 1e9 / (double)freq.QuadPart);
}

/* the CPUs this process may run on (its affinity mask, else every active CPU) */
static inline int pt_cpu_count(void) {
    DWORD_PTR proc = 0, sys = 0;
    if (GetProcessAffinityMask(GetCurrentProcess(), &proc, &sys) && proc) {
        int n = 0;
        for (; proc; proc &= proc - 1) n++;
        return n;
    }
    DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    return n > 0 ? (int)n : 1;
}

#else /* POSIX */
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

typedef pthread_mutex_t pt_mutex;
typedef pthread_cond_t pt_cond;
typedef pthread_t pt_thread;
#define PT_MUTEX_INIT PTHREAD_MUTEX_INITIALIZER
#define PT_COND_INIT PTHREAD_COND_INITIALIZER
#define PT_THREAD_FN(name) void *name(void *arg)
#define PT_THREAD_RETURN NULL

static inline void pt_mutex_lock(pt_mutex *m) { pthread_mutex_lock(m); }
static inline void pt_mutex_unlock(pt_mutex *m) { pthread_mutex_unlock(m); }
static inline void pt_mutex_reset(pt_mutex *m) { pthread_mutex_init(m, NULL); }
static inline void pt_cond_reset(pt_cond *c) { pthread_cond_init(c, NULL); }
static inline void pt_cond_wait(pt_cond *c, pt_mutex *m) { pthread_cond_wait(c, m); }
static inline void pt_cond_signal(pt_cond *c) { pthread_cond_signal(c); }
static inline void pt_cond_broadcast(pt_cond *c) { pthread_cond_broadcast(c); }

static inline int pt_thread_start(pt_thread *t, void *(*fn)(void *), void *arg) {
    return pthread_create(t, NULL, fn, arg) == 0 ? 0 : -1;
}
static inline void pt_thread_join(pt_thread t) { pthread_join(t, NULL); }

static inline int64_t pt_now_ns(void) {      /* a monotonic clock */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int pt_cpu_count(void) {
#ifdef __linux__                 /* the CPUs this process may run on (a container's or taskset's limit) */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c > 0) return c;
    }
#endif
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)c : 1;
}
#endif

/* ---- cpuid: regs = {eax, ebx, ecx, edx} of a leaf and sub-leaf, 0 when the leaf does not exist ---- */
#ifdef PT_X86_64
#if defined(_MSC_VER)
#include <intrin.h>
#include <immintrin.h>
static inline int pt_cpuid(unsigned leaf, unsigned sub, unsigned regs[4]) {
    int r[4];
    __cpuid(r, 0);
    if ((unsigned)r[0] < leaf) return 0;
    __cpuidex(r, (int)leaf, (int)sub);
    for (int i = 0; i < 4; i++) regs[i] = (unsigned)r[i];
    return 1;
}
static inline unsigned long long pt_xgetbv0(void) { return _xgetbv(0); }
#else
#include <cpuid.h>
static inline int pt_cpuid(unsigned leaf, unsigned sub, unsigned regs[4]) {
    return __get_cpuid_count(leaf, sub, &regs[0], &regs[1], &regs[2], &regs[3]);
}
static inline unsigned long long pt_xgetbv0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}
#endif
#endif

#endif
