/* The drivers' shared ground: the lock every user of the pool or the shared scratch holds, fork safety, and the two
 * ways work is split over the pool (chunks of a job; independent rows). Every other source calls in here and this
 * file calls only the pool (pool.c), so the call graph points one way: cpu.c, matmul.c, attention.c, quant.c and
 * checksum.c -> parallel.c -> pool.c. The lock serialises concurrent callers from several Python threads (the GIL is
 * released) instead of letting them corrupt the pool. */
#define _GNU_SOURCE
#include "internal.h"
#include "portable.h"
#include <stdatomic.h>

static pt_mutex lock = PT_MUTEX_INIT;

void pt_lock(void) { pt_mutex_lock(&lock); }
void pt_unlock(void) { pt_mutex_unlock(&lock); }

#ifndef _WIN32                   /* fork(): a child must not inherit the lock held, nor workers it does not have */
static void atfork_prepare(void) { pt_mutex_lock(&lock); }
static void atfork_parent(void) { pt_mutex_unlock(&lock); }
static void atfork_child(void) {
    pt_mutex_reset(&lock);
    pt_pool_after_fork_child();
}
#endif

void pt_fork_safe(void) {
#ifndef _WIN32
    static atomic_flag done = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&done)) pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
#endif
}

void pt_run_chunks(pt_task_fn fn, void *ctx, int64_t n_chunks, double work) {
    if (work < PT_SERIAL_WORK) {    /* too small to pay for a hand-off */
        for (int64_t c = 0; c < n_chunks; c++) fn(ctx, c, 0);
    } else {
        pt_pool_run(fn, ctx, n_chunks, work);
    }
}

/* ---- independent rows (weight quantization, the checksum) in chunks ---- */
#define ROW_CHUNK_VALUES 65536  /* values per chunk; fewer than two chunks run on the calling thread */
typedef struct { void (*fn)(void *, int64_t, int64_t); void *ctx; int64_t rows, per; } rows_task_job;

static void rows_task(void *ctx, int64_t chunk, int ith) {
    (void)ith;
    const rows_task_job *j = (const rows_task_job *)ctx;
    int64_t r0 = chunk * j->per, r1 = r0 + j->per < j->rows ? r0 + j->per : j->rows;
    j->fn(j->ctx, r0, r1);
}

void pt_run_rows(void (*fn)(void *ctx, int64_t r0, int64_t r1), void *ctx, int64_t rows, int64_t cols) {
    int64_t per = cols > 0 && cols < ROW_CHUNK_VALUES ? ROW_CHUNK_VALUES / cols : 1;
    int64_t chunks = (rows + per - 1) / per;
    if (chunks < 2) {
        if (rows > 0) fn(ctx, 0, rows);
        return;
    }
    rows_task_job j = {fn, ctx, rows, per};
    pt_lock();
    pt_pool_run(rows_task, &j, chunks, (double)rows * (double)cols);
    pt_unlock();
}
