/* bench/probes/coopmat_direct.c: times modules of bench/probes/coopmat_direct.comp (an F16 product
 * whose subgroups load their fragments straight from the buffers) at 4096^3 and at a 7B prefill's
 * 512 x 4096 -> 4096 / 11008, and checks 64 of dst's elements against the CPU (inputs multiples of
 * 1/8 in [-1, 1]: exact in F16, the sums exact in F32). A throwaway measurement (bench/RESULTS.md
 * says what it showed); not built by the Makefile; run without validation:
 *   glslang -V --target-env vulkan1.2 -DFM=4 -DFN=4 -DWM=2 -DWN=2 bench/probes/coopmat_direct.comp -o /tmp/d.spv
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude bench/probes/coopmat_direct.c build/libnuvec.a -lcjson \
 *       -lpthread -ldl -lm -lstdc++ -o /tmp/coopmat_direct
 *   /tmp/coopmat_direct /tmp/d.spv:BM:BN:THREADS ...   (the module's workgroup tile and size) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nuvec.h"
#include "probe.h"


/* (i - 8) / 8 as F16 bits, i in 0..16: exact. */
static uint16_t half_of(int i)
{
    float f = (float)(i - 8) / 8.0f;
    if (f == 0.0f)
        return 0;
    uint32_t b;
    memcpy(&b, &f, 4);
    uint32_t sign = b >> 31, exp = (b >> 23) & 0xff, man = b & 0x7fffff;
    return (uint16_t)((sign << 15) | ((exp - 127 + 15) << 10) | (man >> 13));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: coopmat_direct MODULE.spv:BM:BN:THREADS ...\n");
        return 2;
    }
    nu_device_desc dd = {0};
    nu_device *d;
    CHECK(nu_device_open(&dd, &d));
    const uint32_t big = 4096, cap = 11008;
    size_t an = (size_t)big * big, wn = (size_t)cap * big;
    uint16_t *ah = malloc(an * 2), *wh = malloc(wn * 2);
    signed char *ai = malloc(an), *wi = malloc(wn);
    if (!ah || !wh || !ai || !wi)
        return 1;
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < an; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ai[i] = (signed char)(x % 17);
        ah[i] = half_of(ai[i]);
    }
    for (size_t i = 0; i < wn; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        wi[i] = (signed char)(x % 17);
        wh[i] = half_of(wi[i]);
    }
    nu_buffer *dst, *a, *w;
    CHECK(nu_buffer_new(d, (size_t)big * cap * 4, NU_STORAGE_SHARED, &dst));
    CHECK(nu_buffer_from(d, ah, an * 2, NU_STORAGE_PRIVATE, &a));
    CHECK(nu_buffer_from(d, wh, wn * 2, NU_STORAGE_PRIVATE, &w));
    nu_binding b[3] = {{dst, NU_ACCESS_WRITE, 0, 0}, {a, NU_ACCESS_READ, 0, 0}, {w, NU_ACCESS_READ, 0, 0}};
    static const uint32_t shapes[3][3] = {{4096, 4096, 4096}, {512, 4096, 4096}, {512, 11008, 4096}};
    printf("%-40s %12s %16s %17s  check\n", "module", "4096^3", "512x4096>4096", "512x4096>11008");
    for (int f = 1; f < argc; f++) {
        char path[512];
        unsigned bm, bn, th;
        const char *colon = strchr(argv[f], ':');
        if (!colon || (size_t)(colon - argv[f]) >= sizeof path || sscanf(colon, ":%u:%u:%u", &bm, &bn, &th) != 3)
            return fprintf(stderr, "bad module %s\n", argv[f]), 2;
        memcpy(path, argv[f], (size_t)(colon - argv[f]));
        path[colon - argv[f]] = 0;
        (void)th;
        nu_kernel_desc kd = {.path = path, .push_constant_size = 12};
        nu_kernel *k;
        if (nu_kernel_new(d, &kd, &k) != NU_OK) {
            printf("%-40s kernel refused: %s\n", path, nu_error_message(d));
            continue;
        }
        double tf[3];
        double worst = 0;
        for (int s = 0; s < 3; s++) {
            uint32_t push[3] = {shapes[s][0], shapes[s][1], shapes[s][2]};
            uint32_t g[3] = {push[1] / bn, push[0] / bm, 1};
            if (push[1] % bn || push[0] % bm || push[2] % 64) {
                tf[s] = 0;
                continue;
            }
            uint32_t reps = s ? 20 : 5;
            double best = 1e30;
            for (int t = 0; t < 3; t++) {
                nu_commands *c;
                CHECK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
                for (uint32_t r = 0; r < reps; r++)
                    CHECK(nu_commands_dispatch(c, k, g, b, 3, push, sizeof push));
                double t0 = now();
                CHECK(nu_commands_commit(c));
                CHECK(nu_commands_wait(c, UINT64_MAX));
                double dt = (now() - t0) / reps;
                nu_commands_free(c);
                best = dt < best ? dt : best;
            }
            tf[s] = 2.0 * push[0] * push[1] * (double)push[2] / best / 1e12;
            const void *mem;
            CHECK(nu_buffer_contents(dst, &mem));
            const float *out = mem;
            for (int e = 0; e < 64; e++) {
                uint32_t i = (uint32_t)(e * 7919u) % push[0], j = (uint32_t)(e * 104729u) % push[1];
                double want = 0;
                for (uint32_t kk = 0; kk < push[2]; kk++)
                    want += ((ai[(size_t)i * push[2] + kk] - 8) / 8.0) * ((wi[(size_t)j * push[2] + kk] - 8) / 8.0);
                double got = out[(size_t)i * push[1] + j];
                worst = fmax(worst, fabs(got - want));
            }
        }
        const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        printf("%-40s %12.1f %16.1f %17.1f  max error %g\n", name, tf[0], tf[1], tf[2], worst);
        nu_kernel_free(k);
    }
    nu_buffer_free(dst);
    nu_buffer_free(a);
    nu_buffer_free(w);
    nu_device_close(d);
    free(ah), free(wh), free(ai), free(wi);
    return 0;
}
