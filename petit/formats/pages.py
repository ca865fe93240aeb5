"""Letting go of a mapped file's pages (MADV_DONTNEED): what a reader does once the bytes of a tensor, or of some of
its rows, are no longer read through the mapping (copied, converted or checked). They leave the process's resident
set; the page cache keeps them, and reading them again maps them back in."""
import mmap


def close_map(mm) -> None:
    """Close a memory map unless arrays still view it (then it is freed when they are collected); None is a no-op."""
    if mm is not None:
        try:
            mm.close()
        except BufferError:
            pass


def release_rows(mm, begin: int, end: int, rows: int, part: tuple[int, int] | None = None) -> None:
    """Release the pages of bytes [begin, end) of a file mapping `mm` holding `rows` rows, or of its rows
    [r0, r1) only. The pages a neighbour shares come back when it is read. A no-op where unsupported (or for a
    closed mapping)."""
    if mm is None or not hasattr(mmap, "MADV_DONTNEED"):
        return
    if part is not None:
        row = (end - begin) // max(rows, 1)
        begin, end = begin + part[0] * row, min(end, begin + part[1] * row)
    start = begin // mmap.PAGESIZE * mmap.PAGESIZE
    try:
        if end > start:
            mm.madvise(mmap.MADV_DONTNEED, start, end - start)
    except (OSError, ValueError):
        pass
