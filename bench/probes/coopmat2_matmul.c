/* bench/probes/coopmat2_matmul.c: times bench/probes/coopmat2_matmul.comp (an F16 product on
 * VK_NV_cooperative_matrix2's workgroup-scope matrices) at 4096^3 and at a 7B prefill's
 * 512 x 4096 -> 4096 / 11008, for tiles given as BMxBNxBK/THREADS arguments, and checks 64 of
 * dst's elements against the CPU (inputs multiples of 1/8 in [-1, 1]: exact in F16, the sums
 * exact in F32). A throwaway measurement (bench/RESULTS.md says what it showed); not built by the
 * Makefile; needs NUVEC_COOPMAT2=1 (nuvec enables the extension only then) and no validation:
 *   glslang -V --target-env vulkan1.3 bench/probes/coopmat2_matmul.comp -o /tmp/cm2.spv
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude bench/probes/coopmat2_matmul.c build/libnuvec.a -lcjson \
 *       -lpthread -ldl -lm -lstdc++ -o /tmp/coopmat2_matmul
 *   NUVEC_COOPMAT2=1 /tmp/coopmat2_matmul /tmp/cm2.spv 128x128x32/256 256x128x32/256 ... */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nuvec.h"
#include "probe.h"


int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: coopmat2_matmul MODULE.spv BMxBNxBK/THREADS ...\n");
        return 2;
    }
    nu_device_desc dd = {0};
    nu_device *d;
    CHECK(nu_device_open(&dd, &d));
    if (!nu_device_get_info(d)->features[NU_FEATURE_NV_COOPERATIVE_MATRIX2]) {
        fprintf(stderr, "coopmat2_matmul: %s has no VK_NV_cooperative_matrix2\n", nu_device_get_info(d)->name);
        return 1;
    }
    probe_product p;
    CHECK(probe_product_new(d, 4096, 11008, 4096, &p));
    probe_product_head("tile");
    for (int f = 2; f < argc; f++) {
        unsigned bm, bn, bk, th;
        if (sscanf(argv[f], "%ux%ux%u/%u", &bm, &bn, &bk, &th) != 4)
            return fprintf(stderr, "bad tile %s\n", argv[f]), 2;
        nu_specialization sp[4] = {{0, bm}, {1, bn}, {2, bk}, {3, th}};
        nu_kernel_desc kd = {.path = argv[1], .push_constant_size = 12, .constants = sp, .constant_count = 4};
        nu_kernel *k;
        if (nu_kernel_new(d, &kd, &k) != NU_OK) {
            printf("%-40s kernel refused: %s\n", argv[f], nu_error_message(d));
            continue;
        }
        double tf[3], worst;
        CHECK(probe_product_shapes(d, k, &p, bm, bn, 8 * bk, tf, &worst));
        printf("%-40s %12.1f %16.1f %17.1f  max error %g\n", argv[f], tf[0], tf[1], tf[2], worst);
        nu_kernel_free(k);
    }
    probe_product_free(&p);
    nu_device_close(d);
    return 0;
}
