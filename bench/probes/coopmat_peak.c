/* bench/probes/coopmat_peak.c: runs bench/probes/coopmat_peak.comp (the matrix units' rate through
 * VK_KHR_cooperative_matrix, ingredient by ingredient) through nuvec's public API and prints
 * TFLOP/s for each MODE given. What located the product kernel's slowness (bench/RESULTS.md,
 * 2026-12-01: 612 TFLOP/s in registers, 525 loading from shared memory, against 35 in the kernel).
 * A throwaway measurement kept for the next step; not built by the Makefile (needs a device with
 * cooperative matrices; run it without validation: Debian 12's layer predates the extension):
 *   build-deps/prefix/bin/glslang -V --target-env vulkan1.2 bench/probes/coopmat_peak.comp -o /tmp/coopmat_peak.spv
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude bench/probes/coopmat_peak.c build/libnuvec.a -lcjson -lpthread -ldl \
 *       -lm -lstdc++ -o /tmp/coopmat_peak
 *   /tmp/coopmat_peak /tmp/coopmat_peak.spv 0 1 3 7 15     (MODE values; STRIDE=48 in the environment
 *                                                          sets the shared rows' stride in halves) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nuvec.h"
#include "probe.h"


int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: coopmat_peak SPV MODE...\n");
        return 2;
    }
    nu_device_desc dd = {0};
    nu_device *d;
    CHECK(nu_device_open(&dd, &d));
    const uint32_t groups = 132 * 8, steps = 1024;
    nu_buffer *out, *src;
    CHECK(nu_buffer_new(d, (size_t)groups * 8 * 256 * 4, NU_STORAGE_PRIVATE, &out));
    CHECK(nu_buffer_new(d, 65536 * 16, NU_STORAGE_PRIVATE, &src));
    nu_binding b[2] = {{out, NU_ACCESS_WRITE, 0, 0}, {src, NU_ACCESS_READ, 0, 0}};
    uint32_t stride = getenv("STRIDE") ? (uint32_t)atoi(getenv("STRIDE")) : 40;
    for (int a = 2; a < argc; a++) {
        nu_specialization sp[2] = {{0, (uint32_t)atoi(argv[a])}, {1, stride}};
        nu_kernel_desc kd = {.path = argv[1], .push_constant_size = 4, .constants = sp, .constant_count = 2};
        nu_kernel *k;
        CHECK(nu_kernel_new(d, &kd, &k));
        double best = 1e30;
        for (int t = 0; t < 3; t++) {
            nu_commands *c;
            CHECK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
            uint32_t g[3] = {groups, 1, 1};
            CHECK(nu_commands_dispatch(c, k, g, b, 2, &steps, 4));
            double t0 = now();
            CHECK(nu_commands_commit(c));
            CHECK(nu_commands_wait(c, UINT64_MAX));
            double dt = now() - t0;
            nu_commands_free(c);
            best = dt < best ? dt : best;
        }
        double flop = 2.0 * 16 * 16 * 16 * 16 * steps * (double)groups * 8;
        printf("mode %s, rows %u halves apart: %.2f ms, %.1f TFLOP/s\n", argv[a], stride, best * 1e3,
               flop / best / 1e12);
    }
    nu_buffer_free(out);
    nu_buffer_free(src);
    nu_device_close(d);
    return 0;
}
