/* llm_memory.c: a model's device memory (nu_llm_model_memory) as the tools report it: a JSON
 * object for `nuvec generate --json` and `nuvec bench llm --json`, and a line for people. */
#include <stdio.h>

#include "llm_memory.h"

void cli_llm_memory_json(cJSON *parent, const nu_llm_model *m)
{
    nu_llm_memory mem;
    if (nu_llm_model_memory(m, &mem) != NU_OK)
        return;
    cJSON *o = cJSON_AddObjectToObject(parent, "device_memory");
    if (!o)
        return;
    const struct {
        const char *name;
        uint64_t value;
    } fields[] = {{"weights", mem.weights},
                  {"weights_in_host", mem.weights_in_host},
                  {"kv_cache", mem.kv_cache},
                  {"activations", mem.activations},
                  {"total", mem.total},
                  {"prefill_pass", mem.prefill_pass},
                  {"need", mem.need},
                  {"open_peak", mem.open_peak},
                  {"prefill_peak", mem.prefill_peak},
                  {"decode_peak", mem.decode_peak},
                  {"device_active", mem.device_active},
                  {"device_reserved", mem.device_reserved},
                  {"heap_budget", mem.heap_budget},
                  {"heap_usage", mem.heap_usage}};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        cJSON_AddNumberToObject(o, fields[i].name, (double)fields[i].value);
}

void cli_llm_memory_line(FILE *f, const nu_llm_model *m)
{
    nu_llm_memory mem;
    if (nu_llm_model_memory(m, &mem) != NU_OK)
        return;
    const double mib = 1024.0 * 1024.0;
    fprintf(f, "device memory: weights %.1f MiB, KV cache %.1f MiB, activations %.1f MiB (total %.1f MiB); a prefill "
               "pass %.1f MiB",
            mem.weights / mib, mem.kv_cache / mib, mem.activations / mib, mem.total / mib, mem.prefill_pass / mib);
    if (mem.weights_in_host)
        fprintf(f, "; in host memory: weights %.1f MiB", mem.weights_in_host / mib);
    if (mem.prefill_peak || mem.decode_peak)
        fprintf(f, "; peak %.1f MiB in prefill, %.1f MiB in decode", mem.prefill_peak / mib, mem.decode_peak / mib);
    if (mem.heap_budget)
        fprintf(f, "; the device's budget %.1f MiB, used %.1f MiB", mem.heap_budget / mib, mem.heap_usage / mib);
    fprintf(f, "\n");
}
