#ifndef PACKAGER_CMALLOC_SHIM_H
#define PACKAGER_CMALLOC_SHIM_H
// Gives the allocator's free pages back to the system. glibc keeps memory freed by one thread in that thread's arena,
// where another thread's allocations cannot use it; malloc_trim releases the free pages of every arena. Elsewhere it
// does nothing.
#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
static inline void packager_release_free_memory(void) { malloc_trim(0); }
// For a process that allocates and frees many bodies of tens of kilobytes to megabytes on several threads (a crawl):
// glibc's defaults map large ones anew and hand freed memory back at once (madvise, then a TLB flush on every core),
// which cost a crawl of 5,542 files a seventh of its time and one of 50,000 pages a quarter. Bodies under 1 MiB come
// from the heap, and a heap gives memory back once 4 MiB are free at its top (malloc_trim still gives it all back).
// With 32 MiB for both, the crawls were a little faster, but the peak of a decompression bomb's build grew by 12 MiB.
static inline void packager_tune_allocator_for_bodies(void) {
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    mallopt(M_TRIM_THRESHOLD, 4 << 20);
}
#else
static inline void packager_release_free_memory(void) {}
static inline void packager_tune_allocator_for_bodies(void) {}
#endif
#endif
