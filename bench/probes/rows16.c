/* bench/probes/rows16.c: runs bench/probes/rows16.comp (a 16-row product against Q4_0_SOA weights
 * with the weight fragments built in registers) through nuvec's public API: first the fragment
 * layouts (MODE 1), then for each shape N x K the product checked against the host's and timed
 * (dependent dispatches, one command buffer; the split-K partials are not summed here).
 * A throwaway measurement; not built by the Makefile (needs cooperative matrices):
 *   build-deps/prefix/bin/glslang -V --target-env vulkan1.2 bench/probes/rows16.comp -o /tmp/rows16.spv
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude bench/probes/rows16.c build/libnuvec.a -lcjson -lpthread -ldl \
 *       -lm -lstdc++ -o /tmp/rows16
 *   /tmp/rows16 /tmp/rows16.spv [CONFIG...]   CONFIG: local,group,asrc,probe,accs,splits (0: automatic),bsrc,fn (the module's FN) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nuvec.h"
#include "probe.h"

static uint16_t h16(float f)
{
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}
static float f16(uint16_t u)
{
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}

static uint32_t rng = 12345;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

static int run_dump(nu_device *d, const char *spv)
{
    nu_buffer *o, *a, *w;
    CHECK(nu_buffer_new(d, 65536, NU_STORAGE_SHARED, &o));
    CHECK(nu_buffer_new(d, 4096, NU_STORAGE_SHARED, &a));
    CHECK(nu_buffer_new(d, 4096, NU_STORAGE_SHARED, &w));
    float of[256];
    uint16_t ah[512];
    for (int i = 0; i < 256; i++) {
        of[i] = (float)i;
        ah[i] = h16((float)i);                              /* A(m, k) = 16 m + k, row-major */
        ah[256 + i] = h16((float)((i % 16) * 16 + i / 16)); /* at 16 n + k: 16 k + n */
    }
    CHECK(nu_buffer_write(o, 0, of, sizeof of));
    CHECK(nu_buffer_write(a, 0, ah, sizeof ah));
    nu_specialization sp[2] = {{0, 32}, {1, 1}};
    nu_kernel_desc kd = {.path = spv, .push_constant_size = 12, .constants = sp, .constant_count = 2};
    nu_kernel *k;
    CHECK(nu_kernel_new(d, &kd, &k));
    nu_binding b[3] = {{o, NU_ACCESS_READ_WRITE, 0, 0}, {a, NU_ACCESS_READ, 0, 0}, {w, NU_ACCESS_READ, 0, 0}};
    nu_commands *c;
    CHECK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    uint32_t g[3] = {1, 1, 1}, pcs[3] = {16, 32, 32};
    CHECK(nu_commands_dispatch(c, k, g, b, 3, pcs, 12));
    CHECK(nu_commands_commit(c));
    CHECK(nu_commands_wait(c, UINT64_MAX));
    nu_commands_free(c);
    float out[32 * 32];
    CHECK(nu_buffer_read(o, 256 * 4, out, sizeof out));
    printf("fragment layouts (length %d): lane: A (m,k) | B (k,n) | C (m,n)\n", (int)out[0]);
    for (int t = 0; t < 32; t++) {
        const float *e = out + 32 * t;
        int len = (int)e[0];
        printf("%2d:", t);
        for (int i = 0; i < len && i < 9; i++) printf(" (%d,%d)", (int)e[1 + i] / 16, (int)e[1 + i] % 16);
        printf(" |");
        for (int i = 0; i < len && i < 9; i++) printf(" (%d,%d)", (int)e[10 + i] / 16, (int)e[10 + i] % 16);
        printf(" |");
        for (int i = 0; i < len && i < 13; i++) printf(" (%d,%d)", (int)e[19 + i] / 16, (int)e[19 + i] % 16);
        printf("\n");
    }
    nu_kernel_free(k);
    nu_buffer_free(o);
    nu_buffer_free(a);
    nu_buffer_free(w);
    return 0;
}

/* One shape under one configuration: checked, then timed. */
static int run_shape(nu_device *d, const char *spv, uint32_t n, uint32_t kk, const uint32_t cfg[8])
{
    uint32_t local = cfg[0], splits = cfg[5];
    uint32_t wgs = n / 16 / cfg[7] / (local / 32);
    if (!splits) { /* about 4 workgroups a compute unit's worth, k a multiple of 256 a split */
        splits = 1;
        while (wgs * splits < 132 * 4 && kk / (splits * 2) >= 256) splits *= 2;
    }
    uint32_t k_per = (kk / splits + 255) / 256 * 256;
    if (cfg[2] == 1 && k_per > 1024) {
        while (k_per > 1024) { splits *= 2; k_per = (kk / splits + 255) / 256 * 256; }
    }
    splits = (kk + k_per - 1) / k_per;
    size_t wrow = (size_t)kk / 32 * 18;
    uint16_t *ah = malloc((size_t)16 * kk * 2);
    uint8_t *wb = malloc(n * wrow);
    float *af = malloc((size_t)16 * kk * 4);
    for (size_t i = 0; i < (size_t)16 * kk; i++) {
        ah[i] = h16(((int)(rnd() % 2001) - 1000) / 1000.0f);
        af[i] = f16(ah[i]);
    }
    for (uint32_t j = 0; j < n; j++) {
        uint8_t *row = wb + j * wrow;
        for (uint32_t b = 0; b < kk / 32; b++) {
            uint16_t dh = h16((float)(rnd() % 1000 + 1) / 40000.0f);
            memcpy(row + 2 * b, &dh, 2);
        }
        for (uint32_t i = 0; i < kk / 2; i++) row[kk / 16 + i] = (uint8_t)rnd();
    }
    nu_buffer *o, *a, *w;
    size_t obytes = (size_t)splits * 16 * n * 4;
    CHECK(nu_buffer_new(d, obytes, NU_STORAGE_PRIVATE, &o));
    CHECK(nu_buffer_new(d, (size_t)16 * kk * 2, NU_STORAGE_PRIVATE, &a));
    CHECK(nu_buffer_new(d, n * wrow, NU_STORAGE_PRIVATE, &w));
    CHECK(nu_buffer_write(a, 0, ah, (size_t)16 * kk * 2));
    CHECK(nu_buffer_write(w, 0, wb, n * wrow));
    nu_specialization sp[7] = {{0, local}, {1, 0}, {2, cfg[1]}, {3, cfg[2]}, {4, cfg[3]}, {6, cfg[4]}, {7, cfg[6]}};
    nu_kernel_desc kd = {.path = spv, .push_constant_size = 12, .constants = sp, .constant_count = 7};
    nu_kernel *k;
    CHECK(nu_kernel_new(d, &kd, &k));
    nu_binding b[3] = {{o, NU_ACCESS_WRITE, 0, 0}, {a, NU_ACCESS_READ, 0, 0}, {w, NU_ACCESS_READ, 0, 0}};
    uint32_t g[3] = {wgs, splits, 1}, pcs[3] = {n, kk, k_per};
    const int reps = 200;
    double best = 1e30;
    for (int round = 0; round < 3; round++) {
        nu_commands *c;
        CHECK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
        int count = round == 0 ? 1 : reps;
        for (int i = 0; i < count; i++)
            CHECK(nu_commands_dispatch(c, k, g, b, 3, pcs, 12));
        double t0 = now();
        CHECK(nu_commands_commit(c));
        CHECK(nu_commands_wait(c, UINT64_MAX));
        double dt = (now() - t0) / count;
        nu_commands_free(c);
        if (round)
            best = dt < best ? dt : best;
    }
    /* check: the partials summed against the host's product (double) */
    float *of = malloc(obytes);
    CHECK(nu_buffer_read(o, 0, of, obytes));
    double worst = 0, scale = 0;
    for (uint32_t j = 0; j < n; j += (n / 61) | 1) {
        const uint8_t *row = wb + j * wrow;
        for (uint32_t m = 0; m < 16; m++) {
            double ref = 0, got = 0;
            for (uint32_t kx = 0; kx < kk; kx++) {
                uint32_t blk = kx / 32, e = kx % 32;
                uint16_t dh;
                memcpy(&dh, row + 2 * blk, 2);
                uint8_t byte = row[kk / 16 + 16 * blk + e % 16];
                int qv = (e < 16 ? byte & 15 : byte >> 4) - 8;
                ref += (double)af[(size_t)m * kk + kx] * f16(dh) * qv;
            }
            for (uint32_t sI = 0; sI < splits; sI++) got += of[(size_t)sI * 16 * n + (size_t)m * n + j];
            double err = fabs(got - ref);
            worst = err > worst ? err : worst;
            scale = fabs(ref) > scale ? fabs(ref) : scale;
        }
    }
    double bytes = (double)n * wrow;
    printf("%5u x %5u  local %3u group %u asrc %u probe %u accs %u bsrc %u fn %u splits %2u: %8.2f us  %6.0f GB/s  max err %.2e (of %.2e)%s\n",
           n, kk, local, cfg[1], cfg[2], cfg[3], cfg[4], cfg[6], cfg[7], splits, best * 1e6, bytes / best / 1e9, worst, scale,
           worst > 2e-2 * scale + 1e-3 && !cfg[3] ? "  WRONG" : "");
    free(of);
    nu_kernel_free(k);
    nu_buffer_free(o);
    nu_buffer_free(a);
    nu_buffer_free(w);
    free(ah);
    free(wb);
    free(af);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: rows16 SPV [local,group,asrc,probe,accs,splits,bsrc | SPV ...]\n");
        return 2;
    }
    nu_device_desc dd = {0};
    nu_device *d;
    CHECK(nu_device_open(&dd, &d));
    if (run_dump(d, argv[1]))
        return 1;
    static const uint32_t shapes[][2] = {{4096, 4096}, {11008, 4096}, {4096, 11008}, {12288, 4096}, {22016, 4096}};
    const char *spv = argv[1];
    for (int a = 2; a < argc; a++) {
        if (strstr(argv[a], ".spv")) {
            spv = argv[a];
            printf("module %s\n", spv);
            continue;
        }
        uint32_t cfg[8] = {128, 2, 1, 0, 2, 0, 0, 1};
        sscanf(argv[a], "%u,%u,%u,%u,%u,%u,%u,%u", &cfg[0], &cfg[1], &cfg[2], &cfg[3], &cfg[4], &cfg[5], &cfg[6], &cfg[7]);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            if (run_shape(d, spv, shapes[s][0], shapes[s][1], cfg))
                return 1;
    }
    nu_device_close(d);
    return 0;
}
