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


int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: coopmat_direct MODULE.spv:BM:BN:THREADS ...\n");
        return 2;
    }
    nu_device_desc dd = {0};
    nu_device *d;
    CHECK(nu_device_open(&dd, &d));
    probe_product p;
    CHECK(probe_product_new(d, 4096, 11008, 4096, &p));
    probe_product_head("module");
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
        double tf[3], worst;
        CHECK(probe_product_shapes(d, k, &p, bm, bn, 64, tf, &worst));
        const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        printf("%-40s %12.1f %16.1f %17.1f  max error %g\n", name, tf[0], tf[1], tf[2], worst);
        nu_kernel_free(k);
    }
    probe_product_free(&p);
    nu_device_close(d);
    return 0;
}
