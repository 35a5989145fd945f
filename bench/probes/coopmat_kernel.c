/* bench/probes/coopmat_kernel.c: times modules of bench/probes/coopmat_kernel.comp (the matrix-product
 * kernel with one suspect removed each, compiled by bench/probes/coopmat_kernel.sh) on a 4096^3
 * F16 x F16 -> F32 product, each with PROBE 0 (all), 1 (no global loads) and 2 (no products), and
 * prints TFLOP/s. A throwaway measurement (bench/RESULTS.md says what it showed); not built by the
 * Makefile; run it without validation (Debian 12's layer predates cooperative matrices):
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude bench/probes/coopmat_kernel.c build/libnuvec.a -lcjson -lpthread -ldl \
 *       -lm -lstdc++ -o /tmp/coopmat_kernel
 *   /tmp/coopmat_kernel DIR/NAME.spv ...   (BK=32 in the environment: k a step for the modules that take it) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nuvec.h"
#include "probe.h"


int main(int argc, char **argv)
{
    nu_device_desc dd = {0};
    nu_device *d;
    CHECK(nu_device_open(&dd, &d));
    const uint32_t n = 4096, reps = 5;
    nu_buffer *dst, *a, *w;
    CHECK(nu_buffer_new(d, (size_t)n * n * 4, NU_STORAGE_PRIVATE, &dst));
    CHECK(nu_buffer_new(d, (size_t)n * n * 2, NU_STORAGE_PRIVATE, &a));
    CHECK(nu_buffer_new(d, (size_t)n * n * 2, NU_STORAGE_PRIVATE, &w));
    nu_binding b[4] = {{dst, NU_ACCESS_WRITE, 0, 0}, {a, NU_ACCESS_READ, 0, 0}, {w, NU_ACCESS_READ, 0, 0},
                       {a, NU_ACCESS_READ, 0, 0}};
    uint32_t bk = getenv("BK") ? (uint32_t)atoi(getenv("BK")) : 64;
    struct {
        uint32_t m, n, k, first_a, a_row, a_batch, first_w, w_row, w_batch, first_dst, dst_batch, first_bias;
    } push = {n, n, n, 0, n, 0, 0, n, 0, 0, 0, 0};
    printf("%-28s %10s %14s %14s\n", "module", "TFLOP/s", "no loads", "no products");
    for (int f = 1; f < argc; f++) {
        double tf[3];
        for (uint32_t probe = 0; probe < 3; probe++) {
            /* WDT F16, DDT F32, no bias, 256 threads, 2 x 4 subgroups of 4 x 2 fragments, bk, 1 buffer */
            uint32_t v[12] = {1, 0, 0, 0, 256, 2, 4, 4, 2, bk, 1, probe};
            nu_specialization sp[12];
            for (uint32_t i = 0; i < 12; i++)
                sp[i] = (nu_specialization){i, v[i]};
            nu_kernel_desc kd = {.path = argv[f], .push_constant_size = sizeof push, .constants = sp,
                                 .constant_count = 12};
            nu_kernel *k;
            CHECK(nu_kernel_new(d, &kd, &k));
            uint32_t g[3] = {n / 128, n / 128, 1};
            double best;
            CHECK(probe_time(d, k, g, b, 4, &push, sizeof push, reps, &best));
            tf[probe] = 2.0 * n * n * (double)n / best / 1e12;
        }
        const char *name = strrchr(argv[f], '/') ? strrchr(argv[f], '/') + 1 : argv[f];
        printf("%-28s %10.1f %14.1f %14.1f\n", name, tf[0], tf[1], tf[2]);
    }
    nu_buffer_free(dst);
    nu_buffer_free(a);
    nu_buffer_free(w);
    nu_device_close(d);
    return 0;
}
