/* Compresses every file named on standard input with zlib, libdeflate and ISA-L at each level worth comparing, one
 * whole buffer per file as packager's writer does, and prints a Markdown table row per encoder and level: seconds (best
 * of RUNS passes, one core), output bytes and the ratio to the input. Used by scripts/bench-deflate.sh. */
#include <isa-l/igzip_lib.h>
#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

enum { RUNS = 3 };

struct file { unsigned char *bytes; size_t size; };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static struct file *files;
static size_t count, total;
static unsigned char *out;
static size_t outCapacity;

static size_t with_zlib(int level) {
    size_t sum = 0;
    for (size_t i = 0; i < count; i++) {
        z_stream z;
        memset(&z, 0, sizeof z);
        deflateInit2(&z, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
        z.next_in = files[i].bytes;
        z.avail_in = (uInt)files[i].size;
        z.next_out = out;
        z.avail_out = (uInt)outCapacity;
        deflate(&z, Z_FINISH);
        sum += z.total_out;
        deflateEnd(&z);
    }
    return sum;
}

static size_t with_libdeflate(int level) {
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
    size_t sum = 0;
    for (size_t i = 0; i < count; i++) sum += libdeflate_deflate_compress(c, files[i].bytes, files[i].size, out, outCapacity);
    libdeflate_free_compressor(c);
    return sum;
}

static size_t with_isal(int level) {
    static const unsigned sizes[] = {ISAL_DEF_LVL0_DEFAULT, ISAL_DEF_LVL1_DEFAULT, ISAL_DEF_LVL2_DEFAULT, ISAL_DEF_LVL3_DEFAULT};
    unsigned char *levelBuffer = malloc(sizes[level]);
    size_t sum = 0;
    for (size_t i = 0; i < count; i++) {
        struct isal_zstream s;
        isal_deflate_stateless_init(&s);
        s.level = level;
        s.level_buf = levelBuffer;
        s.level_buf_size = sizes[level];
        s.next_in = files[i].bytes;
        s.avail_in = (uint32_t)files[i].size;
        s.next_out = out;
        s.avail_out = (uint32_t)outCapacity;
        s.end_of_stream = 1;
        s.flush = NO_FLUSH;
        if (isal_deflate_stateless(&s) != COMP_OK) { fprintf(stderr, "isa-l failed\n"); exit(1); }
        sum += s.total_out;
    }
    free(levelBuffer);
    return sum;
}

static void row(const char *name, int level, size_t (*encode)(int)) {
    double best = 1e9;
    size_t bytes = 0;
    for (int run = 0; run < RUNS; run++) {
        double start = now();
        bytes = encode(level);
        double took = now() - start;
        if (took < best) best = took;
    }
    printf("| %s | %d | %.3f s | %zu | %.4f |\n", name, level, best, bytes, (double)bytes / total);
}

int main(void) {
    char path[4096];
    size_t capacity = 1024;
    files = malloc(capacity * sizeof *files);
    while (fgets(path, sizeof path, stdin)) {
        path[strcspn(path, "\n")] = 0;
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fseek(f, 0, SEEK_SET);
        if (count == capacity) files = realloc(files, (capacity *= 2) * sizeof *files);
        files[count].bytes = malloc(size > 0 ? size : 1);
        files[count].size = fread(files[count].bytes, 1, size, f);
        fclose(f);
        total += files[count].size;
        if (files[count].size * 2 + 65536 > outCapacity) outCapacity = files[count].size * 2 + 65536;
        count++;
    }
    out = malloc(outCapacity);
    printf("%zu files, %zu bytes\n\n", count, total);
    printf("| encoder | level | time | output bytes | output / input |\n|---|---|---|---|---|\n");
    for (int level = 1; level <= 9; level += 1) if (level == 1 || level == 6 || level == 9) row("zlib", level, with_zlib);
    for (int level = 1; level <= 12; level++) row("libdeflate", level, with_libdeflate);
    for (int level = 0; level <= 3; level++) row("ISA-L", level, with_isal);
    return 0;
}
