/* bench/probes/cuda_register.c: can CUDA pin a file's page-cache pages (cuMemHostRegister with
 * READ_ONLY) fast enough to move a file at >= 0.9x the pinned bandwidth? Registers a file mapping
 * whole and in chunks on 1-16 threads while copying registered chunks (cuMemcpyHtoDAsync), and
 * measures CPU copy rates from the mapping into pinned memory (memcpy and AVX2 streaming stores).
 * A throwaway measurement kept for its numbers (bench/RESULTS.md, 2026-11-30); not built by the
 * Makefile, and nuvec does not use CUDA. libcuda is loaded with dlopen (no CUDA headers needed):
 *   gcc -O2 -mavx2 -pthread bench/probes/cuda_register.c -ldl -o /tmp/cuda_register
 *   /tmp/cuda_register /tmp/probe.bin 8      (writes an 8 GiB file there if it is not one) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef unsigned long long CUdeviceptr;

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGet)(CUdevice *, int);
static CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*cuCtxSetCurrent)(CUcontext);
static CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
static CUresult (*cuMemHostRegister)(void *, size_t, unsigned);
static CUresult (*cuMemHostUnregister)(void *);
static CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
static CUresult (*cuStreamCreate)(CUstream *, unsigned);
static CUresult (*cuStreamSynchronize)(CUstream);
static CUresult (*cuEventCreate)(CUevent *, unsigned);
static CUresult (*cuEventRecord)(CUevent, CUstream);
static CUresult (*cuEventSynchronize)(CUevent);
static CUresult (*cuGetErrorString)(CUresult, const char **);

#define CK(x) do { CUresult r_ = (x); if (r_) { const char *s_ = "?"; cuGetErrorString(r_, &s_); \
    fprintf(stderr, "%s:%d %s -> %d %s\n", __FILE__, __LINE__, #x, r_, s_); exit(1); } } while (0)

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void *sym(void *h, const char *n) { void *p = dlsym(h, n); if (!p) { fprintf(stderr, "no %s\n", n); exit(1); } return p; }

static CUcontext ctx;
static uint8_t *map;
static size_t fsize, chunk;
static size_t nchunks;
static _Atomic size_t next_chunk;
static _Atomic int *ready;
static double reg_time_total;
static pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER;
static unsigned reg_flags = 0x08; /* READ_ONLY */

static void *reg_worker(void *a)
{
    (void)a;
    CK(cuCtxSetCurrent(ctx));
    double t = 0;
    for (;;) {
        size_t k = atomic_fetch_add(&next_chunk, 1);
        if (k >= nchunks) break;
        size_t off = k * chunk, n = fsize - off < chunk ? fsize - off : chunk;
        double t0 = now();
        CUresult r = cuMemHostRegister(map + off, n, reg_flags);
        t += now() - t0;
        if (r) { const char *s = "?"; cuGetErrorString(r, &s); fprintf(stderr, "register chunk %zu: %d %s\n", k, r, s); atomic_store(&ready[k], -1); continue; }
        atomic_store(&ready[k], 1);
    }
    pthread_mutex_lock(&lk); reg_time_total += t; pthread_mutex_unlock(&lk);
    return NULL;
}

/* Register on `threads` threads while main copies each registered chunk: GB/s end to end. */
static double pipeline(CUdeviceptr dst, size_t ch, unsigned threads, double *unreg_s, int *fail)
{
    chunk = ch; nchunks = (fsize + ch - 1) / ch;
    ready = calloc(nchunks, sizeof *ready);
    atomic_store(&next_chunk, 0);
    reg_time_total = 0;
    CUstream s; CK(cuStreamCreate(&s, 1));
    CUevent *ev = calloc(nchunks, sizeof *ev);
    for (size_t i = 0; i < nchunks; i++) CK(cuEventCreate(&ev[i], 2 /* disable timing */));
    pthread_t th[32];
    double t0 = now();
    for (unsigned i = 0; i < threads; i++) pthread_create(&th[i], NULL, reg_worker, NULL);
    *fail = 0;
    for (size_t k = 0; k < nchunks; k++) {
        int v;
        while ((v = atomic_load(&ready[k])) == 0) _mm_pause();
        if (v < 0) { (*fail)++; continue; }
        size_t off = k * ch, n = fsize - off < ch ? fsize - off : ch;
        CK(cuMemcpyHtoDAsync(dst + off, map + off, n, s));
        CK(cuEventRecord(ev[k], s));
    }
    CK(cuStreamSynchronize(s));
    double t1 = now();
    for (unsigned i = 0; i < threads; i++) pthread_join(th[i], NULL);
    double u0 = now();
    for (size_t k = 0; k < nchunks; k++) if (ready[k] > 0) CK(cuMemHostUnregister(map + k * ch));
    *unreg_s = now() - u0;
    free(ready); free(ev);
    return fsize / (t1 - t0) / 1e9;
}

/* CPU copy from the mapping into pinned staging on `threads` threads, nt or memcpy. */
static uint8_t *stage;
static size_t stage_size;
static int use_nt;
static unsigned nthreads_copy;
static void *copy_worker(void *a)
{
    size_t id = (size_t)a;
    size_t per = stage_size / nthreads_copy;
    for (;;) {
        size_t k = atomic_fetch_add(&next_chunk, 1);
        size_t off = k * chunk;
        if (off >= fsize) break;
        size_t n = fsize - off < chunk ? fsize - off : chunk;
        uint8_t *d = stage + id * per; /* each thread reuses its own slot: a CPU-rate upper bound */
        if (n > per) n = per;
        if (use_nt) {
            const __m256i *src = (const __m256i *)(map + off);
            __m256i *dd = (__m256i *)d;
            size_t m = n / 32;
            for (size_t i = 0; i + 4 <= m; i += 4) {
                __m256i a0 = _mm256_loadu_si256(src + i), a1 = _mm256_loadu_si256(src + i + 1);
                __m256i a2 = _mm256_loadu_si256(src + i + 2), a3 = _mm256_loadu_si256(src + i + 3);
                _mm256_stream_si256(dd + i, a0); _mm256_stream_si256(dd + i + 1, a1);
                _mm256_stream_si256(dd + i + 2, a2); _mm256_stream_si256(dd + i + 3, a3);
            }
            _mm_sfence();
        } else {
            memcpy(d, map + off, n);
        }
    }
    return NULL;
}
static double cpu_copy(unsigned threads, size_t ch, int nt)
{
    chunk = ch; use_nt = nt; nthreads_copy = threads; atomic_store(&next_chunk, 0);
    pthread_t th[32];
    double t0 = now();
    for (unsigned i = 0; i < threads; i++) pthread_create(&th[i], NULL, copy_worker, (void *)(size_t)i);
    for (unsigned i = 0; i < threads; i++) pthread_join(th[i], NULL);
    return fsize / (now() - t0) / 1e9;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/tmp/probe.bin";
    double gib = argc > 2 ? atof(argv[2]) : 8;
    fsize = (size_t)(gib * (1ull << 30));
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
    cuInit = sym(h, "cuInit"); cuDeviceGet = sym(h, "cuDeviceGet");
    cuDevicePrimaryCtxRetain = sym(h, "cuDevicePrimaryCtxRetain"); cuCtxSetCurrent = sym(h, "cuCtxSetCurrent");
    cuMemAlloc = sym(h, "cuMemAlloc_v2"); cuMemHostAlloc = sym(h, "cuMemHostAlloc");
    cuMemHostRegister = sym(h, "cuMemHostRegister_v2"); cuMemHostUnregister = sym(h, "cuMemHostUnregister");
    cuMemcpyHtoDAsync = sym(h, "cuMemcpyHtoDAsync_v2"); cuStreamCreate = sym(h, "cuStreamCreate");
    cuStreamSynchronize = sym(h, "cuStreamSynchronize"); cuEventCreate = sym(h, "cuEventCreate");
    cuEventRecord = sym(h, "cuEventRecord"); cuEventSynchronize = sym(h, "cuEventSynchronize");
    cuGetErrorString = sym(h, "cuGetErrorString");
    CK(cuInit(0));
    CUdevice dev; CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));

    /* the file, in the page cache */
    struct stat st;
    if (stat(path, &st) || (size_t)st.st_size != fsize) {
        int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
        size_t b = 64 << 20; uint8_t *buf = malloc(b);
        for (size_t i = 0; i < b; i++) buf[i] = (uint8_t)(i * 7 + 1);
        double t0 = now();
        for (size_t o = 0; o < fsize; o += b) if (write(fd, buf, b) != (ssize_t)b) { perror("write"); return 1; }
        close(fd); free(buf);
        printf("wrote %.1f GiB in %.1f s\n", gib, now() - t0);
    }
    int fd = open(path, O_RDONLY);
    map = mmap(NULL, fsize, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) { perror("mmap"); return 1; }
    volatile uint64_t sink = 0;
    for (size_t o = 0; o < fsize; o += 4096) sink += map[o]; /* fault in (page cache) */

    CUdeviceptr dst; CK(cuMemAlloc(&dst, fsize));
    /* pinned baseline: 512 MiB pinned copied repeatedly to cover fsize */
    size_t pb = 512ull << 20; void *pin; CK(cuMemHostAlloc(&pin, pb, 0));
    memset(pin, 1, pb);
    CUstream s; CK(cuStreamCreate(&s, 1));
    double best_pin = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        for (size_t o = 0; o < fsize; o += pb) CK(cuMemcpyHtoDAsync(dst + o, pin, fsize - o < pb ? fsize - o : pb, s));
        CK(cuStreamSynchronize(s));
        double g = fsize / (now() - t0) / 1e9; if (g > best_pin) best_pin = g;
    }
    printf("pinned (cuMemHostAlloc 512 MiB, repeated): %.2f GB/s\n", best_pin);

    /* register whole file once: time, then copy from registered */
    for (int flags = 0; flags < 2; flags++) {
        reg_flags = flags ? 0x08 : 0x0;
        double t0 = now();
        CUresult r = cuMemHostRegister(map, fsize, reg_flags);
        double tr = now() - t0;
        if (r) { const char *e = "?"; cuGetErrorString(r, &e); printf("register whole file flags=%u: error %d %s\n", reg_flags, r, e); continue; }
        t0 = now();
        CK(cuMemcpyHtoDAsync(dst, map, fsize, s)); CK(cuStreamSynchronize(s));
        double tc = now() - t0;
        t0 = now(); CK(cuMemHostUnregister(map)); double tu = now() - t0;
        printf("register whole file flags=%u: register %.0f ms (%.1f GB/s), copy %.2f GB/s, unregister %.0f ms\n",
               reg_flags, tr * 1e3, fsize / tr / 1e9, fsize / tc / 1e9, tu * 1e3);
    }
    reg_flags = 0x08;
    printf("\n%-8s %-8s %-10s %-12s %-12s %s\n", "chunk", "threads", "GB/s", "vs pinned", "unreg ms", "reg s/thread");
    size_t chunks[] = {16ull << 20, 64ull << 20, 256ull << 20};
    unsigned ths[] = {1, 2, 4, 8, 16};
    for (int c = 0; c < 3; c++)
        for (int t = 0; t < 5; t++) {
            double u; int fail;
            double g = pipeline(dst, chunks[c], ths[t], &u, &fail);
            printf("%-8zu %-8u %-10.2f %-12.2f %-12.0f %.3f%s\n", chunks[c] >> 20, ths[t], g, g / best_pin, u * 1e3,
                   reg_time_total / ths[t], fail ? " FAILURES" : "");
        }

    /* CPU copy rates into pinned staging */
    stage_size = 16 * (64ull << 20);
    CK(cuMemHostAlloc((void **)&stage, stage_size, 0));
    memset(stage, 0, stage_size);
    printf("\ncpu copy mapping -> pinned (GB/s)\n%-8s %-8s %-10s %-10s\n", "chunk", "threads", "memcpy", "nt-avx2");
    for (int t = 1; t < 5; t++) {
        size_t ch = 4ull << 20;
        printf("%-8zu %-8u %-10.2f %-10.2f\n", ch >> 20, ths[t], cpu_copy(ths[t], ch, 0), cpu_copy(ths[t], ch, 1));
    }
    (void)sink;
    return 0;
}
