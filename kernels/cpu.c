/* CPU detection, the choice of path (the per-ISA table every other call reads through pt_active) and pt_init, which
 * switches the path and (re)starts the pool under the drivers' lock (parallel.c). */
#define _GNU_SOURCE
#include "internal.h"
#include "portable.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the active path: switched by pt_init under the lock, read by calls that do not take it, hence atomic */
static _Atomic(const pt_kernels *) active = &pt_kernels_scalar;
static atomic_int active_isa = PT_ISA_SCALAR;

const pt_kernels *pt_active(void) { return atomic_load_explicit(&active, memory_order_acquire); }

/* ---- CPU features ---- */
#ifdef PT_X86_64
/* CPU features from cpuid, and whether the OS saves the AVX (and AVX-512) registers (xgetbv): the same answer with
 * gcc, clang and MSVC, which do not share a __builtin_cpu_supports */
enum { F_SSE42, F_AVX, F_AVX2, F_FMA, F_F16C, F_AVX512F, F_AVX512BW, F_AVX512VL, F_AVX512VNNI, F_AVX512BF16, F_AVXVNNI, F_N };

static void cpu_features(int has[F_N]) {
    unsigned r[4];
    for (int i = 0; i < F_N; i++) has[i] = 0;
    if (!pt_cpuid(1, 0, r)) return;
    unsigned c = r[2];
    unsigned long long xcr0 = (c >> 27) & 1 ? pt_xgetbv0() : 0;   /* OSXSAVE: the OS manages the vector state */
    int os_avx = (xcr0 & 0x6) == 0x6, os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
    has[F_SSE42] = (c >> 20) & 1;
    has[F_AVX] = os_avx && ((c >> 28) & 1);
    has[F_FMA] = os_avx && ((c >> 12) & 1);
    has[F_F16C] = os_avx && ((c >> 29) & 1);
    if (pt_cpuid(7, 0, r)) {
        unsigned b7 = r[1], c7 = r[2];
        has[F_AVX2] = os_avx && ((b7 >> 5) & 1);
        has[F_AVX512F] = os_avx512 && ((b7 >> 16) & 1);
        has[F_AVX512BW] = os_avx512 && ((b7 >> 30) & 1);
        has[F_AVX512VL] = os_avx512 && ((b7 >> 31) & 1);
        has[F_AVX512VNNI] = os_avx512 && ((c7 >> 11) & 1);
        if (pt_cpuid(7, 1, r)) {
            has[F_AVX512BF16] = os_avx512 && ((r[0] >> 5) & 1);
            has[F_AVXVNNI] = os_avx && ((r[0] >> 4) & 1);
        }
    }
}
#endif

int pt_isa_supported(int isa) {
    if (isa == PT_ISA_SCALAR) return 1;
    if (isa == PT_ISA_NEON) return pt_kernels_neon.name != 0;   /* every ARMv8-A CPU has NEON */
#ifdef PT_X86_64
    int has[F_N];
    cpu_features(has);
    int avx2 = has[F_AVX2] && has[F_FMA] && has[F_F16C];
    if (isa == PT_ISA_AVX2) return avx2 && pt_kernels_avx2.name != 0;
    if (isa == PT_ISA_AVXVNNI) return avx2 && has[F_AVXVNNI] && pt_kernels_avxvnni.name != 0;
    if (isa == PT_ISA_AVX512)
        return avx2 && has[F_AVX512F] && has[F_AVX512BW] && has[F_AVX512VL] && has[F_AVX512VNNI] &&
               pt_kernels_avx512.name != 0;
#endif
    return 0;
}

int pt_cpu_features(char *buf, int n) {
    int len = 0;
    if (n > 0) buf[0] = 0;
#ifdef PT_X86_64
    static const char *names[F_N] = {"sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                                     "avx512vnni", "avx512bf16", "avxvnni"};
    int has[F_N];
    cpu_features(has);
    for (int i = 0; i < F_N; i++) {
        if (!has[i]) continue;
        int w = snprintf(buf + len, n > len ? (size_t)(n - len) : 0, "%s%s", len ? "," : "", names[i]);
        if (w > 0) len += w;
    }
#elif defined(__aarch64__) && defined(__ARM_NEON)
    len = snprintf(buf, n > 0 ? (size_t)n : 0, "neon");
#ifdef __ARM_FEATURE_DOTPROD
    if (len > 0) len += snprintf(buf + len, n > len ? (size_t)(n - len) : 0, ",dotprod");
#endif
#endif
    return len < n ? len : (n > 0 ? n - 1 : 0);
}

/* ---- the default thread count: the performance cores this process may run on ----
 * Two hardware threads of one core share its multiply units, and an efficiency core finishes its share of a matmul
 * late, which every other thread then waits for: the matmuls run fastest on one thread per performance core. */
#if defined(__linux__)
static int read_int(const char *path, long *v) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fscanf(f, "%ld", v) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

/* 1 when the CPU list in `path` ("0-7,16-23") names cpu, 0 when not, -1 when the file is absent */
static int list_has(const char *path, int cpu) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long a, b;
    int found = 0, c;
    while (!found && fscanf(f, "%ld", &a) == 1) {
        b = a;
        if ((c = fgetc(f)) == '-') {
            if (fscanf(f, "%ld", &b) != 1) break;
            c = fgetc(f);
        }
        found = cpu >= a && cpu <= b;
        if (c != ',') break;
    }
    fclose(f);
    return found;
}

static int perf_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
    enum { MAX_CPUS = CPU_SETSIZE };
    static long key[MAX_CPUS];         /* package << 20 | core of each counted CPU */
    long cap_max = -1;                 /* ARM big.LITTLE: the big cores have the highest cpu_capacity */
    char path[128];
    for (int cpu = 0; cpu < MAX_CPUS; cpu++) {
        if (!CPU_ISSET(cpu, &set)) continue;
        long cap;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cpu_capacity", cpu);
        if (read_int(path, &cap) == 0 && cap > cap_max) cap_max = cap;
    }
    int n = 0;
    for (int cpu = 0; cpu < MAX_CPUS; cpu++) {
        if (!CPU_ISSET(cpu, &set)) continue;
        if (list_has("/sys/devices/cpu_core/cpus", cpu) == 0) continue;   /* Intel hybrid: an efficiency core */
        long cap, core, pkg;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cpu_capacity", cpu);
        if (cap_max > 0 && read_int(path, &cap) == 0 && cap < cap_max) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        if (read_int(path, &core) != 0) return 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
        if (read_int(path, &pkg) != 0) pkg = 0;
        long k = pkg << 20 | core;
        int seen = 0;
        for (int i = 0; i < n && !seen; i++) seen = key[i] == k;
        if (!seen) key[n++] = k;
    }
    return n;
}
#elif defined(__APPLE__)
#include <sys/sysctl.h>
static int perf_cores(void) {      /* Apple Silicon: perflevel0 is the performance cluster */
    int v = 0;
    size_t len = sizeof v;
    if (sysctlbyname("hw.perflevel0.physicalcpu", &v, &len, NULL, 0) == 0 && v > 0) return v;
    len = sizeof v;
    return sysctlbyname("hw.physicalcpu", &v, &len, NULL, 0) == 0 ? v : 0;
}
#elif defined(_WIN32)
static int perf_cores(void) {      /* the cores of the highest efficiency class (all of them on a non-hybrid CPU) */
    DWORD len = 0;
    GetLogicalProcessorInformationEx(RelationProcessorCore, NULL, &len);
    if (len == 0) return 0;
    char *buf = (char *)malloc(len);
    if (!buf) return 0;
    int n = 0, best = -1;
    if (GetLogicalProcessorInformationEx(RelationProcessorCore, (PSYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX)buf, &len)) {
        for (int pass = 0; pass < 2; pass++) {
            for (DWORD off = 0; off < len;) {
                PSYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX e = (PSYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX)(buf + off);
                /* EfficiencyClass: the byte after Flags (MinGW-w64's headers still call it Reserved) */
                int cls = ((const BYTE *)&e->Processor)[1];
                if (pass == 0 && cls > best) best = cls;
                if (pass == 1 && cls == best) n++;
                off += e->Size;
            }
        }
    }
    free(buf);
    return n;
}
#else
static int perf_cores(void) { return 0; }
#endif

int pt_default_threads(void) {
    int cpus = pt_cpu_count(), cores = perf_cores();   /* 0: unknown */
    return cores > 0 && cores < cpus ? cores : cpus;
}

static const pt_kernels *const tables[PT_ISA_COUNT] = {&pt_kernels_scalar, &pt_kernels_avx2, &pt_kernels_avx512,
                                                        &pt_kernels_neon, &pt_kernels_avxvnni};

/* ---- the start-up check (pathcheck.c): a path that disagrees with the scalar one is never made active ---- */
static pt_mutex check_mu = PT_MUTEX_INIT;
static int check_result[PT_ISA_COUNT];          /* 0 not checked yet, 1 agrees, -1 disagrees */
static char check_msg[PT_ISA_COUNT][320];
static char warning[400];                       /* why the last pt_init did not use the path asked for */

/* `isa` if it passes the check, else the next path down that does (scalar always does) */
static int checked_path(int isa) {
    pt_mutex_lock(&check_mu);
    warning[0] = 0;
    while (isa != PT_ISA_SCALAR) {
        if (!check_result[isa])
            check_result[isa] = pt_path_check(tables[isa], check_msg[isa], (int)sizeof check_msg[isa]) == 0 ? 1 : -1;
        if (check_result[isa] == 1) break;
        /* the x86 paths step down avx512 -> avxvnni -> avx2 -> scalar, skipping what the CPU lacks */
        int next = PT_ISA_SCALAR;
        if (isa == PT_ISA_AVX512 && pt_isa_supported(PT_ISA_AVXVNNI)) next = PT_ISA_AVXVNNI;
        else if ((isa == PT_ISA_AVX512 || isa == PT_ISA_AVXVNNI) && pt_isa_supported(PT_ISA_AVX2)) next = PT_ISA_AVX2;
        if (!warning[0])
            snprintf(warning, sizeof warning, "%s: using the %s path instead", check_msg[isa], tables[next]->name);
        isa = next;
    }
    pt_mutex_unlock(&check_mu);
    return isa;
}

/* ---- AMX: the AVX-512 path's prefill on the tiles (kern_amx.c) ----
 * Used when the CPU has AMX-TILE and AMX-INT8, the OS saves the tile state (XCR0 bits 17-18), Linux grants it to
 * this process (arch_prctl(ARCH_REQ_XCOMP_PERM), without which the first tile instruction raises SIGILL), and the
 * kernel gives the scalar path's bits in the start-up check, run under a guard for SIGILL / SIGSEGV / SIGBUS so a
 * machine where the tiles fault gets a warning instead of a crash. Decided once; PETIT_AMX=0 turns it off. */
static atomic_int amx_active;       /* read by the AVX-512 kernels on every prefill call */
static int amx_state;               /* under check_mu: 0 not decided, 1 usable, -1 not (amx_msg says why) */
static char amx_msg[320];
static int amx_check_failed;        /* the CPU and OS have AMX but the kernel disagreed or faulted: a warning */

int pt_amx_on(void) { return atomic_load_explicit(&amx_active, memory_order_relaxed); }

#if defined(PT_X86_64) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static sigjmp_buf amx_jump;
static void amx_fault(int sig) { siglongjmp(amx_jump, sig); }

/* the start-up check with SIGILL, SIGSEGV and SIGBUS turned into a failure, the caller's handlers put back after.
 * The handlers are the process's for the check's few milliseconds, at the first pt_init (import time). */
static int amx_guarded_check(char *msg, int n) {
    static const int sigs[3] = {SIGILL, SIGSEGV, SIGBUS};
    struct sigaction sa, old[3];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = amx_fault;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, &old[i]);
    volatile int rc = -1;
    const int sig = sigsetjmp(amx_jump, 1);
    if (sig == 0) rc = pt_amx_check(msg, n);
    else snprintf(msg, (size_t)n, "the AMX kernel raised signal %d in its start-up check", sig);
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
    return rc;
}

static int amx_decide(void) {
    const char *e = getenv("PETIT_AMX");
    if (e && !strcmp(e, "0")) { snprintf(amx_msg, sizeof amx_msg, "turned off by PETIT_AMX=0"); return -1; }
    unsigned r[4];
    if (!pt_cpuid(7, 0, r) || !((r[3] >> 24) & 1) || !((r[3] >> 25) & 1)) {
        snprintf(amx_msg, sizeof amx_msg, "this CPU has no AMX-TILE / AMX-INT8");
        return -1;
    }
    /* xgetbv itself is undefined without OSXSAVE (a kernel booted with noxsave, a VM that shows AMX in cpuid only) */
    if (!pt_cpuid(1, 0, r) || !((r[2] >> 27) & 1) || (pt_xgetbv0() & (3ull << 17)) != (3ull << 17)) {
        snprintf(amx_msg, sizeof amx_msg, "the operating system does not enable the AMX tile state (XCR0)");
        return -1;
    }
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        snprintf(amx_msg, sizeof amx_msg, "Linux did not grant the AMX tile state (arch_prctl: %s)", strerror(errno));
        return -1;
    }
    char why[256];
    if (amx_guarded_check(why, (int)sizeof why) != 0) {
        snprintf(amx_msg, sizeof amx_msg, "%s: prefill runs on the avx512 path's vectors instead", why);
        amx_check_failed = 1;
        return -1;
    }
    return 1;
}
#else
static int amx_decide(void) {
    snprintf(amx_msg, sizeof amx_msg, "AMX is used by Linux x86-64 builds (gcc or clang) only");
    return -1;
}
#endif

/* 1 when the tiles run the active path's prefill; else 0 and why into buf */
int pt_amx_status(char *buf, int n) {
    pt_mutex_lock(&check_mu);
    const int on = pt_amx_on();
    int len = 0;
    if (on) len = snprintf(buf, n > 0 ? (size_t)n : 0, "on");
    else if (amx_state == 1)
        len = snprintf(buf, n > 0 ? (size_t)n : 0, "AMX runs with the avx512 path, and the %s path is active",
                       tables[pt_isa()]->name);
    else len = snprintf(buf, n > 0 ? (size_t)n : 0, "%s", amx_state ? amx_msg : "not checked yet");
    pt_mutex_unlock(&check_mu);
    (void)len;
    return on;
}

/* whether the path `isa` gets the tiles (the avx512 path only): decided once, at the first pt_init */
static int amx_for(int isa) {
    pt_mutex_lock(&check_mu);
    if (!amx_state) amx_state = amx_decide();
    if (amx_check_failed && !warning[0]) snprintf(warning, sizeof warning, "%s", amx_msg);
    const int use = amx_state == 1 && isa == PT_ISA_AVX512;
    pt_mutex_unlock(&check_mu);
    return use;
}

int pt_path_warning(char *buf, int n) {
    pt_mutex_lock(&check_mu);
    int len = snprintf(buf, n > 0 ? (size_t)n : 0, "%s", warning);
    pt_mutex_unlock(&check_mu);
    return len < n ? len : (n > 0 ? n - 1 : 0);
}

int pt_init(int n_threads, int isa) {
    pt_fork_safe();
    if (isa < -1 || isa >= PT_ISA_COUNT) return -1;
    if (isa == -1) isa = pt_isa_supported(PT_ISA_AVX512)  ? PT_ISA_AVX512
                       : pt_isa_supported(PT_ISA_AVXVNNI) ? PT_ISA_AVXVNNI
                       : pt_isa_supported(PT_ISA_AVX2)    ? PT_ISA_AVX2
                       : pt_isa_supported(PT_ISA_NEON)  ? PT_ISA_NEON : PT_ISA_SCALAR;
    if (!pt_isa_supported(isa)) return -1;
    if (n_threads <= 0) n_threads = pt_default_threads() < 64 ? pt_default_threads() : 64;
    if (n_threads > 256) return -2;
    isa = checked_path(isa);
    const int amx = amx_for(isa);
    pt_lock();
    const int old = pt_pool_threads();
    int rc = old == n_threads ? 0 : pt_pool_start(n_threads);
    if (rc != 0) {
        /* the new pool did not start (it stopped what it had started): the previous pool and path stay, so a
         * failed configure leaves the kernels as they were */
        if (pt_pool_start(old) != 0) pt_pool_start(1);   /* one thread always starts: it is the caller */
    } else {
        atomic_store_explicit(&active, tables[isa], memory_order_release);
        atomic_store(&active_isa, isa);
        atomic_store(&amx_active, amx);
    }
    pt_unlock();
    return rc == 0 ? 0 : -2;
}

int pt_isa(void) { return atomic_load(&active_isa); }
int pt_n_threads(void) { return pt_pool_threads(); }
