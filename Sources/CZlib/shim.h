#ifndef PACKAGER_CZLIB_SHIM_H
#define PACKAGER_CZLIB_SHIM_H
#include <zlib.h>

// deflateInit2 and inflateInit2 are macros; Swift cannot call them directly.
static inline int czlib_deflate_init_raw(z_streamp strm, int level) {
    return deflateInit2(strm, level, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
}

// A gzip member (RFC 1952): zlib writes the header (no name, time 0) and the trailer (window bits 15 + 16).
static inline int czlib_deflate_init_gzip(z_streamp strm, int level) {
    return deflateInit2(strm, level, Z_DEFLATED, MAX_WBITS + 16, 8, Z_DEFAULT_STRATEGY);
}

static inline int czlib_inflate_init_raw(z_streamp strm) {
    return inflateInit2(strm, -MAX_WBITS);
}

// Inflates gzip or zlib streams, detected from their header (window bits 15 + 32).
static inline int czlib_inflate_init_auto(z_streamp strm) {
    return inflateInit2(strm, MAX_WBITS + 32);
}
#endif
