/* pipeline.c: `nuvec bench pipeline`: the pipelined loop of `nuvec demo` (tools/pipeline.c)
 * with and without reuse of memory still used by in-flight steps, side by side: throughput,
 * peak active bytes, and peak device memory kept (active + cache + pending, what the limit bounds). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_util.h"
#include "nuvec.h"
#include "pipeline.h"

int bench_pipeline(int argc, char **argv)
{
    nu_device_desc desc = {0};
    bool json = false;
    uint32_t elements = 0, steps = 0, in_flight = 4;
    long v;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            desc.select = argv[++i];
        else if (!strcmp(argv[i], "--elements") && i + 1 < argc) { /* at most 1 GiB of F32 a buffer */
            if (!bench_parse_count("pipeline", argv[i], argv[i + 1], 1, 1l << 28, &v))
                return 2;
            elements = (uint32_t)v, i++;
        } else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
            if (!bench_parse_count("pipeline", argv[i], argv[i + 1], 1, 1l << 20, &v))
                return 2;
            steps = (uint32_t)v, i++;
        } else if (!strcmp(argv[i], "--in-flight") && i + 1 < argc) {
            if (!bench_parse_count("pipeline", argv[i], argv[i + 1], 1, 64, &v))
                return 2;
            in_flight = (uint32_t)v, i++;
        } else {
            fprintf(stderr, "usage: nuvec bench pipeline [--json] [--device NAME] [--elements N] [--steps N] "
                            "[--in-flight N]\n");
            return 2;
        }
    }
    nu_device *d;
    nu_status st = nu_device_open(&desc, &d);
    if (st != NU_OK) {
        fprintf(stderr, "nuvec bench pipeline: %s: %s\n", nu_status_string(st), nu_error_message(NULL));
        return 1;
    }
    const nu_device_info *info = nu_device_get_info(d);
    bool gpu = info->type != NU_DEVICE_CPU;
    if (!elements)
        elements = gpu ? 16u << 20 : 1u << 20;
    if (!steps)
        steps = gpu ? 64 : 16;
    pipeline_result warm, r[2];
    st = pipeline_run(d, true, 2, elements, in_flight, NULL, &warm); /* first dispatches compile on some drivers */
    for (int reuse = 1; reuse >= 0 && st == NU_OK; reuse--) {
        st = pipeline_run(d, reuse, steps, elements, in_flight, NULL, &r[reuse]);
        nu_memory_clear_cache(d);
    }
    if (st != NU_OK) {
        fprintf(stderr, "nuvec bench pipeline: %s: %s\n", nu_status_string(st), nu_error_message(d));
        nu_device_close(d);
        return 1;
    }
    bool ok = r[0].verified && r[1].verified;
    if (json) {
        cJSON *doc = cJSON_CreateObject();
        cJSON_AddStringToObject(doc, "device", info->name);
        cJSON_AddNumberToObject(doc, "elements", elements);
        cJSON_AddNumberToObject(doc, "steps", steps);
        cJSON_AddNumberToObject(doc, "in_flight", in_flight);
        for (int reuse = 1; reuse >= 0; reuse--) {
            cJSON *o = cJSON_AddObjectToObject(doc, reuse ? "with_reuse" : "without_reuse");
            cJSON_AddNumberToObject(o, "gbps", r[reuse].gbps);
            cJSON_AddNumberToObject(o, "peak_active_bytes", (double)r[reuse].peak);
            cJSON_AddNumberToObject(o, "peak_active_plus_cache_bytes", (double)r[reuse].held_peak);
            cJSON_AddBoolToObject(o, "verified", r[reuse].verified);
        }
        char *text = cJSON_Print(doc);
        puts(text);
        free(text);
        cJSON_Delete(doc);
    } else {
        printf("nuvec bench pipeline on device %u: %s\n", info->index, info->name);
        printf("%u steps of %u floats (%.1f MiB a buffer), %u in flight; each step reads the same input and\n"
               "writes three intermediates, freed as soon as the step is committed; outputs checked on the CPU\n\n",
               steps, elements, elements * 4 / 1048576.0, in_flight);
        printf("%-26s | %9s | %16s | %22s | %s\n", "", "GB/s", "peak active MiB", "peak held MiB", "verified");
        for (int reuse = 1; reuse >= 0; reuse--)
            printf("%-26s | %9.2f | %16.2f | %22.2f | %s\n", reuse ? "nu_buffer_new_gpu (reuse)" : "nu_buffer_new",
                   r[reuse].gbps, r[reuse].peak / 1048576.0, r[reuse].held_peak / 1048576.0,
                   r[reuse].verified ? "yes" : "NO");
        printf("\nmemory kept with reuse / without: %.2fx; throughput with / without: %.2fx\n",
               (double)r[1].held_peak / (double)r[0].held_peak, r[1].gbps / r[0].gbps);
    }
    nu_device_close(d);
    return ok ? 0 : 1;
}
