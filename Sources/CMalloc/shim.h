#ifndef PACKAGER_CMALLOC_SHIM_H
#define PACKAGER_CMALLOC_SHIM_H
// Gives the allocator's free pages back to the system. glibc keeps memory freed by one thread in that thread's arena,
// where another thread's allocations cannot use it; malloc_trim releases the free pages of every arena. Elsewhere it
// does nothing.
#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
static inline void packager_release_free_memory(void) { malloc_trim(0); }
#else
static inline void packager_release_free_memory(void) {}
#endif
#endif
