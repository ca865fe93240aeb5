/* A persistent thread pool. The calling thread works as thread 0; n-1 workers wait for jobs. A job is split into
 * chunks that every thread claims from one atomic counter (work stealing: a thread that lost its core to another
 * process simply claims nothing while the others take its share). The job is over when all its chunks are
 * *completed*, not when every worker has reported in: a worker that was descheduled before it claimed anything
 * holds nobody up, and one that wakes late finds the job's chunks all claimed (or claims a chunk of the job posted
 * since, which is just as valid). Only a chunk a thread claimed and then lost its core in the middle of is waited
 * for, so chunks are kept small. Workers spin a short while after a job, so the next op of the same token starts
 * without a wake-up, then sleep on a condition variable, so an idle app burns no CPU. The caller, once no chunk is
 * left to claim, spins briefly for the chunks still running and then sleeps until the last one signals: when
 * another process takes a core away, the late worker gets the core instead of the caller spinning on it. */
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

/* The claim word: the current job's chunk count in the high 32 bits, the next unclaimed chunk in the low 32. The
 * caller stores a fresh word to post a job; a thread claims with one fetch_add and owns chunk `next` when it is
 * below the count. A fetch_add that lands after the job's last chunk only pushes `next` further past the count
 * (at most once per thread per job, so it never carries into the high half), and the next job's store resets it. */
#define CLAIM_COUNT(w) ((int64_t)((uint64_t)(w) >> 32))
#define CLAIM_NEXT(w) ((int64_t)((uint64_t)(w) & 0xffffffffu))
#define MAX_JOB_CHUNKS ((int64_t)1 << 30)   /* more chunks than this are run as several jobs */

static struct {
    int n_threads;
    pt_thread threads[MAX_THREADS];
    pt_mutex mu;
    pt_cond cv;
    int sleepers;              /* guarded by mu */
    atomic_int generation;     /* bumped once per job: what the waiting workers watch */
    atomic_int stop;
    pt_task_fn fn;             /* the current job, written before its claim word is stored (release) and stable */
    void *ctx;                 /* until all of its chunks are completed */
    int64_t base;              /* the first chunk number of this job (a huge job runs as several) */
    _Atomic uint64_t claim;
    atomic_llong completed;    /* chunks of the current job finished */
    int start_generation;      /* the generation when the workers were created */
    pt_mutex done_mu;   /* the caller sleeps on done_cv while a chunk runs late (a core taken away) */
    pt_cond done_cv;
} P = { .n_threads = 1, .mu = PT_MUTEX_INIT, .cv = PT_COND_INIT, .done_mu = PT_MUTEX_INIT,
        .done_cv = PT_COND_INIT };

/* The pool or the caller alone, chosen by measurement. When another process takes a core away, a worker that
 * loses it in the middle of a chunk costs the caller a scheduler time slice (milliseconds, against microseconds for
 * a chunk of a decoded token), and with two threads sharing one core two threads can decode slower than one.
 * Whether the pool helps is a matter of speed, so it is measured: jobs count in windows (WINDOW_JOBS jobs, or
 * WINDOW_NS of job time when that comes first), each window run one way, pooled or by the caller alone (the workers
 * then sleep and leave their cores to whoever needs them). A window's rate is its work (the MACs or values the
 * driver says a job has) per nanosecond of the jobs' wall time, waits for late chunks and wake-ups included, plus
 * the time between jobs (the small ops the caller runs alone, and Python between steps), which a spinning worker
 * slows down when it shares a core with the caller; a gap over GAP_NS is the program doing something else, not
 * counted. After `explore` windows one way, one window is run the other way; the next window goes the faster of the
 * two, and the loser is tried again after twice as many windows as before (up to MAX_EXPLORE), or after one window
 * when the probe won. So a quiet machine pools with a probe of running alone every 64 windows, and a busy one runs
 * alone with a probe of the pool as often. A probe that is clearly losing (under half the other way's rate after 16
 * jobs, under 0.8 of it after 64) ends there: on a busy machine a pooled job took 3.3x as long as one run alone
 * (bench_busy's pool statistics), so a whole window of probing every 32 windows cost about 3 % of the decode speed.
 * Two adjacent windows hold the same mix of ops (a window spans whole decoded tokens of most models), which is what
 * makes their rates comparable; 16 or 64 jobs are a few layers' mix, so a probe is cut only on a wide margin. An
 * earlier rule that stepped aside on one long wait misfired on this VM, whose cores stall for a millisecond now and
 * then with nothing else running, and pushed a quiet 2-thread decode down to one thread's speed over a few seconds. */
#define WINDOW_NS 50000000LL     /* a window ends after 50 ms of job time (and at least 8 jobs) */
#define WINDOW_JOBS 512          /* or after this many jobs: one or two decoded tokens of a 0.5B or a 135M model */
#define MAX_EXPLORE 64           /* windows the better way before the other is tried again, at most */
/* a probe under half the other way's rate after 16 jobs, or under 0.8 of it after 64, ends there, lost */
#define PROBE_EARLY_JOBS 16
#define PROBE_EARLY_RATE 0.5
#define PROBE_CHECK_JOBS 64
#define PROBE_CHECK_RATE 0.8
#define GAP_NS 2000000LL         /* the time between two jobs counts with the second when shorter than 2 ms */
static struct {
    int solo, probing;           /* the way jobs run now; whether this window is a probe of it */
    double work;                 /* this window's work and wall time */
    int64_t ns, jobs;
    double rate[2];              /* work per ns of the last window run each way (0: not run yet), [pooled, alone] */
    int64_t windows, explore;    /* windows run this way since the last probe; windows before the next probe */
    int64_t last_end;            /* when the last job ended */
} pick;                          /* set by pt_pool_start, before any job is pooled */

/* what the choice did since the pool started, for benchmarks (pt_pool_stats): jobs and their time each way, probes
 * run and probes cut short */
static struct { double jobs[2], ns[2], probes, cut; } stats;

/* a job ran (pooled or alone, as pick.solo says) with `work` in `ns` */
static void pick_account(double work, int64_t ns) {
    pick.work += work;
    pick.ns += ns;
    const int way = pick.solo, other = !way;
    ++pick.jobs;
    stats.jobs[way] += 1.0;
    stats.ns[way] += (double)ns;
    const double cut = pick.jobs == PROBE_EARLY_JOBS   ? PROBE_EARLY_RATE
                     : pick.jobs == PROBE_CHECK_JOBS ? PROBE_CHECK_RATE : 0.0;
    const int lost_early = pick.probing && pick.work < cut * pick.rate[other] * (double)pick.ns;
    stats.cut += lost_early;
    if (!lost_early && pick.jobs < WINDOW_JOBS && (pick.jobs < 8 || pick.ns < WINDOW_NS)) return;
    pick.rate[way] = pick.work / (double)pick.ns;
    pick.work = 0.0;
    pick.ns = pick.jobs = 0;
    if (pick.probing) {          /* the probe against the window before it */
        pick.probing = 0;
        pick.windows = 0;
        if (pick.rate[way] >= pick.rate[other]) {
            pick.explore = 1;
        } else {
            pick.solo = other;
            pick.explore = pick.explore * 2 < MAX_EXPLORE ? pick.explore * 2 : MAX_EXPLORE;
        }
    } else if (++pick.windows >= pick.explore) {
        pick.solo = other;
        pick.probing = 1;
        stats.probes += 1.0;
    }
}

/* whether jobs run on the caller alone now: one thread, or the pool measured slower (a driver then cuts its work
 * in a few large chunks, not in many for the threads: the split does not change a result's bits) */
int pt_pool_alone(void) { return P.n_threads == 1 || pick.solo; }

int pt_pool_stats(double *out, int n) {
    const double v[6] = {stats.jobs[0], stats.jobs[1], stats.ns[0] * 1e-9, stats.ns[1] * 1e-9, stats.probes,
                         stats.cut};
    int k = 0;
    for (; k < n && k < 6; k++) out[k] = v[k];
    return k;
}

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

/* Test hook: PETIT_TEST_POOL_STALL=1 keeps every worker of the pool started next away from jobs, as a thread
 * another process took the core from is (tests/test_kernels_integrity.py checks that jobs still complete, run by
 * the caller alone, instead of waiting for workers that never come). */
static int stall_workers;

/* claim and run chunks until none is left. The job's fn, ctx and base are read after a successful claim: the job
 * cannot be replaced before this chunk is completed, so they are the claimed job's own. The thread that completes
 * the job's last chunk signals the caller under done_mu: either the caller's check comes after that unlock and
 * sees the count, or it is already waiting and gets the signal. (A handshake through a "caller is waiting" flag
 * instead needs a store and the load after it kept in order, which QEMU's ARM emulation on an x86 host does not
 * do: both sides read the old value and the caller slept forever.) */
static void run_chunks(int ith) {
    for (;;) {
        uint64_t w = atomic_fetch_add_explicit(&P.claim, 1, memory_order_acq_rel);
        int64_t n = CLAIM_COUNT(w), c = CLAIM_NEXT(w);
        if (c >= n) return;
        P.fn(P.ctx, P.base + c, ith);
        if (atomic_fetch_add_explicit(&P.completed, 1, memory_order_acq_rel) + 1 == n) {
            pt_mutex_lock(&P.done_mu);
            pt_cond_signal(&P.done_cv);
            pt_mutex_unlock(&P.done_mu);
        }
    }
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
        seen = g;            /* read before claiming: a job posted from here on bumps it again and is not missed */
        if (!stall_workers) run_chunks(ith);
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
    memset(&pick, 0, sizeof pick);
    memset(&stats, 0, sizeof stats);
    pick.explore = 4;
    P.start_generation = atomic_load(&P.generation);
    const char *stall = getenv("PETIT_TEST_POOL_STALL");
    stall_workers = stall && atoi(stall) == 1;
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

static void run_job(pt_task_fn fn, void *ctx, int64_t base, int64_t n_chunks) {
    P.fn = fn;
    P.ctx = ctx;
    P.base = base;
    atomic_store_explicit(&P.completed, 0, memory_order_relaxed);
    atomic_store_explicit(&P.claim, (uint64_t)n_chunks << 32, memory_order_release);
    pt_mutex_lock(&P.mu);
    atomic_fetch_add_explicit(&P.generation, 1, memory_order_release);
    if (P.sleepers > 0) pt_cond_broadcast(&P.cv);
    pt_mutex_unlock(&P.mu);
    run_chunks(0);
    int done = 0;
    for (int spins = 0; spins < SPIN_ITERS && !done; spins++) {
        done = atomic_load_explicit(&P.completed, memory_order_acquire) == n_chunks;
        if (!done) CPU_RELAX();
    }
    if (!done) {   /* a claimed chunk runs late (its thread descheduled): block instead of burning its core */
        pt_mutex_lock(&P.done_mu);
        while (atomic_load(&P.completed) < n_chunks) pt_cond_wait(&P.done_cv, &P.done_mu);
        pt_mutex_unlock(&P.done_mu);
    }
}

void pt_pool_run(pt_task_fn fn, void *ctx, int64_t n_chunks, double work) {
    if (n_chunks <= 0) return;
    if (P.n_threads == 1 || n_chunks == 1) {
        for (int64_t c = 0; c < n_chunks; c++) fn(ctx, c, 0);
        return;
    }
    const int64_t t0 = pt_now_ns();
    if (pick.solo) {
        for (int64_t c = 0; c < n_chunks; c++) fn(ctx, c, 0);
    } else {
        for (int64_t base = 0; base < n_chunks; base += MAX_JOB_CHUNKS)
            run_job(fn, ctx, base, n_chunks - base < MAX_JOB_CHUNKS ? n_chunks - base : MAX_JOB_CHUNKS);
    }
    const int64_t t1 = pt_now_ns(), gap = t0 - pick.last_end;
    pick_account(work, t1 - t0 + (pick.last_end && gap > 0 && gap < GAP_NS ? gap : 0));
    pick.last_end = t1;
}
