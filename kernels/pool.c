/* A persistent thread pool. The calling thread works as thread 0; n-1 workers wait for jobs. A job is split into
 * chunks handed out by an atomic counter (work stealing on a VM that loses a core now and then). Workers spin a
 * short while after a job, so the next job of the same token starts without a wake-up, then sleep on a condition
 * variable, so an idle app burns no CPU. The caller, once its own chunks are done, spins briefly for the workers
 * and then sleeps until the last one signals: when another process takes a core away, the late worker gets the
 * core instead of the caller spinning on it. */
#define _GNU_SOURCE
#include "internal.h"
#include "portable.h"
#include <stdatomic.h>
#include <stdlib.h>

#ifdef PT_X86_64
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__) && defined(__GNUC__)
#define CPU_RELAX() __asm__ volatile("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

#define MAX_THREADS 256
/* polls before a worker (or the waiting caller) sleeps. How long that is depends on the CPU's pause instruction,
 * which Intel made about 14x slower with Skylake: 20,000 of them took 274 us on a Xeon and about 650 us on an AMD
 * EPYC where we measured them; spinning less would wake the pool more often between the ops of a token. */
#define SPIN_ITERS 20000

static struct {
    int n_threads;
    pt_thread threads[MAX_THREADS];
    pt_mutex mu;
    pt_cond cv;
    int sleepers;              /* guarded by mu */
    atomic_int generation;     /* bumped once per job */
    atomic_int stop;
    pt_task_fn fn;
    void *ctx;
    int64_t n_chunks;
    atomic_llong next;
    atomic_int done;           /* workers that finished the current job */
    int start_generation;      /* the generation when the workers were created */
    pt_mutex done_mu;   /* the caller sleeps on done_cv when the workers are slow (a core taken away) */
    pt_cond done_cv;
} P = { .n_threads = 1, .mu = PT_MUTEX_INIT, .cv = PT_COND_INIT, .done_mu = PT_MUTEX_INIT,
        .done_cv = PT_COND_INIT };

static struct { float *buf; int64_t cap; } scratch[MAX_THREADS];

float *pt_scratch(int ith, int64_t n) {
    if (scratch[ith].cap < n) {
        free(scratch[ith].buf);
        int64_t cap = n < 4096 ? 4096 : n + n / 2;
        scratch[ith].buf = (float *)malloc((size_t)cap * sizeof(float));
        scratch[ith].cap = scratch[ith].buf ? cap : 0;
    }
    return scratch[ith].buf;
}

static void run_chunks(int ith) {
    int64_t c;
    while ((c = atomic_fetch_add_explicit(&P.next, 1, memory_order_relaxed)) < P.n_chunks) P.fn(P.ctx, c, ith);
}

static PT_THREAD_FN(worker) {
    int ith = (int)(intptr_t)arg;
    int seen = P.start_generation;   /* not a fresh load: a job may already have been posted */
    for (;;) {
        int g = seen;
        for (int i = 0; i < SPIN_ITERS && g == seen; i++) {
            CPU_RELAX();
            g = atomic_load_explicit(&P.generation, memory_order_acquire);
        }
        if (g == seen) {
            pt_mutex_lock(&P.mu);
            P.sleepers++;
            while ((g = atomic_load_explicit(&P.generation, memory_order_acquire)) == seen &&
                   !atomic_load(&P.stop))
                pt_cond_wait(&P.cv, &P.mu);
            P.sleepers--;
            pt_mutex_unlock(&P.mu);
        }
        if (atomic_load(&P.stop)) return PT_THREAD_RETURN;
        seen = g;
        run_chunks(ith);
        /* The last worker of a job always signals under done_mu. A handshake through a flag instead ("the caller
         * is waiting" stored, then done loaded, against done added, then the flag loaded) needs the store and the
         * load after it kept in order; QEMU's ARM emulation on an x86 host does not keep them (no fence between a
         * store-release and a later load-acquire), both sides read the old value, and the caller slept forever.
         * With the mutex, either the caller's check comes after this unlock and sees the count, or it is already
         * waiting and gets the signal. An uncontended lock and a signal nobody waits for cost well under a
         * microsecond, once per job. */
        if (atomic_fetch_add(&P.done, 1) + 1 == P.n_threads - 1) {
            pt_mutex_lock(&P.done_mu);
            pt_cond_signal(&P.done_cv);
            pt_mutex_unlock(&P.done_mu);
        }
    }
}

int pt_pool_threads(void) { return P.n_threads; }

/* After fork() the child has no workers: forget them (their mutexes may have been held mid-job), so the child
 * runs single-threaded until it calls pt_init again (petit/native.py does, through os.register_at_fork). */
void pt_pool_after_fork_child(void) {
    pt_mutex_reset(&P.mu);
    pt_cond_reset(&P.cv);
    pt_mutex_reset(&P.done_mu);
    pt_cond_reset(&P.done_cv);
    P.sleepers = 0;
    atomic_store(&P.stop, 0);
    P.n_threads = 1;
}

void pt_pool_stop(void) {
    if (P.n_threads <= 1) { P.n_threads = 1; return; }
    pt_mutex_lock(&P.mu);
    atomic_store(&P.stop, 1);
    atomic_fetch_add(&P.generation, 1);
    pt_cond_broadcast(&P.cv);
    pt_mutex_unlock(&P.mu);
    for (int i = 1; i < P.n_threads; i++) pt_thread_join(P.threads[i]);
    atomic_store(&P.stop, 0);
    P.n_threads = 1;
}

/* Test hook: PETIT_TEST_POOL_FAIL=N makes starting a pool of N threads fail at its last thread, after the others
 * started (tests/test_kernels.py checks that pt_init then leaves the path and the pool as they were). */
static int failing_thread(int n_threads) {
    const char *e = getenv("PETIT_TEST_POOL_FAIL");
    return e && atoi(e) == n_threads ? n_threads - 1 : -1;
}

/* -1 when a thread cannot be started: the ones that did are stopped again, the pool is left with one thread */
int pt_pool_start(int n_threads) {
    if (n_threads < 1 || n_threads > MAX_THREADS) return -1;
    pt_pool_stop();
    P.n_threads = n_threads;
    P.start_generation = atomic_load(&P.generation);
    const int fail = failing_thread(n_threads);
    for (int i = 1; i < n_threads; i++) {
        if (i == fail || pt_thread_start(&P.threads[i], worker, (void *)(intptr_t)i) != 0) {
            P.n_threads = i;   /* the ones that started, to be stopped */
            pt_pool_stop();
            return -1;
        }
    }
    return 0;
}

void pt_pool_run(pt_task_fn fn, void *ctx, int64_t n_chunks) {
    if (n_chunks <= 0) return;
    if (P.n_threads == 1 || n_chunks == 1) {
        for (int64_t c = 0; c < n_chunks; c++) fn(ctx, c, 0);
        return;
    }
    P.fn = fn;
    P.ctx = ctx;
    P.n_chunks = n_chunks;
    atomic_store_explicit(&P.next, 0, memory_order_relaxed);
    atomic_store_explicit(&P.done, 0, memory_order_relaxed);
    pt_mutex_lock(&P.mu);
    atomic_fetch_add_explicit(&P.generation, 1, memory_order_release);
    if (P.sleepers) pt_cond_broadcast(&P.cv);
    pt_mutex_unlock(&P.mu);
    run_chunks(0);
    int workers = P.n_threads - 1;
    for (int spins = 0; spins < SPIN_ITERS; spins++) {
        if (atomic_load_explicit(&P.done, memory_order_acquire) == workers) return;
        CPU_RELAX();
    }
    /* a worker is late (descheduled, or woken from sleep): block instead of burning the core it needs */
    pt_mutex_lock(&P.done_mu);
    while (atomic_load(&P.done) < workers) pt_cond_wait(&P.done_cv, &P.done_mu);
    pt_mutex_unlock(&P.done_mu);
}
