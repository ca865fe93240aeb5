/* Rows read from the file instead of through its mapping (issue 31: peak RSS at 7B).
 *
 * An untied token embedding is read a few rows a step. Through a file mapping, the first touch of a row maps the
 * page cache's whole folio around it into the process (2 MiB where Linux holds the file in large folios, as 6.x
 * kernels do after a sequential read), so a 512-token prompt of a 7B model brought ~320 MiB of its 357 MiB
 * embedding into the resident set for ~1 MiB of rows. pread(2) copies just the rows' bytes out of the page cache.
 *
 * A matrix is registered by its data pointer with a file descriptor (owned from then on, closed by the drop) and the
 * offset of its first byte in that file; pt_get_rows then reads its rows with pread. A short or failed read falls
 * back to the mapping, so the values never differ. Windows has no pread: registration fails there and the mapping
 * is used as before. */
#define _GNU_SOURCE        /* portable.h: sched_getaffinity */
#include "internal.h"
#include "portable.h"

#ifndef _WIN32
#include <errno.h>
#endif

#define FILE_ROWS_MAX 32

typedef struct {
    const void *data;    /* NULL: a free slot */
    int64_t nbytes, offset;
    int fd;
} file_rows;

static file_rows g_rows[FILE_ROWS_MAX];
static pt_mutex g_rows_lock = PT_MUTEX_INIT;

int pt_file_rows_add(const void *data, int64_t nbytes, int fd, int64_t offset) {
#ifdef _WIN32
    (void)data; (void)nbytes; (void)fd; (void)offset;
    return -1;
#else
    if (!data || nbytes <= 0 || fd < 0 || offset < 0) return -1;
    int slot = -1;
    pt_mutex_lock(&g_rows_lock);
    for (int i = 0; i < FILE_ROWS_MAX; i++) {
        if (g_rows[i].data == data) {           /* registered already: the caller keeps its fd */
            slot = -2;
            break;
        }
        if (!g_rows[i].data && slot == -1) slot = i;
    }
    if (slot >= 0) g_rows[slot] = (file_rows){data, nbytes, offset, fd};
    pt_mutex_unlock(&g_rows_lock);
    return slot >= 0 ? 0 : -1;
#endif
}

int pt_file_rows_drop(const void *data) {
    int found = -1;
    pt_mutex_lock(&g_rows_lock);
    for (int i = 0; i < FILE_ROWS_MAX; i++)
        if (data && g_rows[i].data == data) {
#ifndef _WIN32
            close(g_rows[i].fd);
#endif
            g_rows[i].data = NULL;
            found = 0;
        }
    pt_mutex_unlock(&g_rows_lock);
    return found;
}

int64_t pt_file_rows_count(void) {
    int64_t n = 0;
    pt_mutex_lock(&g_rows_lock);
    for (int i = 0; i < FILE_ROWS_MAX; i++) n += g_rows[i].data != NULL;
    pt_mutex_unlock(&g_rows_lock);
    return n;
}

/* 1 and the fd / file offset of `data` when it is registered, else 0. The entry cannot be dropped while a call reads
 * through it: the drop runs when the matrix's owner lets go of it, which is after its last call. */
int pt_file_rows_find(const void *data, int *fd, int64_t *offset, int64_t *nbytes) {
    int found = 0;
    pt_mutex_lock(&g_rows_lock);
    for (int i = 0; i < FILE_ROWS_MAX && !found; i++)
        if (g_rows[i].data && g_rows[i].data == data) {
            *fd = g_rows[i].fd, *offset = g_rows[i].offset, *nbytes = g_rows[i].nbytes;
            found = 1;
        }
    pt_mutex_unlock(&g_rows_lock);
    return found;
}

/* bytes [at, at + n) of the registered file into buf: 0 when all were read, -1 otherwise (the caller then reads the
 * mapping) */
int pt_file_rows_read(int fd, int64_t offset, int64_t at, int64_t n, void *buf) {
#ifdef _WIN32
    (void)fd; (void)offset; (void)at; (void)n; (void)buf;
    return -1;
#else
    uint8_t *p = (uint8_t *)buf;
    while (n > 0) {
        ssize_t got = pread(fd, p, (size_t)n, (off_t)(offset + at));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        p += got, at += got, n -= got;
    }
    return 0;
#endif
}
