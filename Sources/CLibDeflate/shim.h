#ifndef PACKAGER_CLIBDEFLATE_SHIM_H
#define PACKAGER_CLIBDEFLATE_SHIM_H
// libdeflate: whole-buffer raw deflate for the bundle writer (build side only; the runtime inflates with zlib).
#include <libdeflate.h>
#endif
