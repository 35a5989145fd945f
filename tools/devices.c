/* devices.c: --devices, --split-weights and --split for the commands that run a model (devices.h). */
#include "devices.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cli_devices_parse(cli_devices *d, const char *list, char *why, size_t why_size)
{
    d->count = 0;
    const char *s = list;
    while (*s) {
        size_t n = strcspn(s, ",");
        if (n == 0 || n >= sizeof d->names[0] || d->count == NU_LLM_MAX_DEVICES) {
            snprintf(why, why_size, "--devices '%s': %s", list,
                     n == 0 ? "an empty name" : d->count == NU_LLM_MAX_DEVICES ? "more than 16 devices" : "a name too long");
            return false;
        }
        memcpy(d->names[d->count], s, n);
        d->names[d->count++][n] = 0;
        s += n;
        if (*s == ',' && !*++s) {
            snprintf(why, why_size, "--devices '%s': an empty name", list);
            return false;
        }
    }
    if (!d->count)
        snprintf(why, why_size, "--devices: no device named");
    return d->count > 0;
}

bool cli_split_weights_parse(cli_devices *d, const char *list, char *why, size_t why_size)
{
    uint32_t n = 0;
    const char *s = list;
    while (*s) {
        char *end;
        double v = strtod(s, &end);
        if (end == s || !(v > 0) || !isfinite(v) || (*end && *end != ',') || n == NU_LLM_MAX_DEVICES) {
            snprintf(why, why_size, "--split-weights '%s': positive numbers, one a device, commas between", list);
            return false;
        }
        d->weights[n++] = v;
        s = *end ? end + 1 : end;
    }
    d->weight_count = n;
    if (!n)
        snprintf(why, why_size, "--split-weights: no weight");
    return n > 0;
}

bool cli_split_mode_parse(const char *mode, char *why, size_t why_size)
{
    if (!strcmp(mode, "layer"))
        return true;
    snprintf(why, why_size, "--split %s: nuvec splits a model by layers only (--split layer); %s", mode,
             !strcmp(mode, "tensor") ? "tensor parallelism is not built" : "no such split");
    return false;
}

bool cli_devices_option(cli_devices *d, const char *arg, const char *value, bool *ok, char *why, size_t why_size)
{
    if (!strcmp(arg, "--devices"))
        *ok = cli_devices_parse(d, value, why, why_size);
    else if (!strcmp(arg, "--split-weights"))
        *ok = cli_split_weights_parse(d, value, why, why_size);
    else if (!strcmp(arg, "--split"))
        *ok = cli_split_mode_parse(value, why, why_size);
    else
        return false;
    return true;
}

bool cli_devices_check(const cli_devices *d, const char *single, char *why, size_t why_size)
{
    if (single && d->count) {
        snprintf(why, why_size, "--device and --devices exclude each other");
        return false;
    }
    if (d->weight_count && d->weight_count != d->count) {
        snprintf(why, why_size, "--split-weights gives %u weights for %u devices (--devices)", d->weight_count,
                 d->count);
        return false;
    }
    return true;
}

nu_status cli_devices_open(cli_devices *d, bool validation, char *why, size_t why_size)
{
    for (uint32_t i = 0; i < d->count; i++) {
        nu_device_desc desc = {.select = d->names[i], .validation = validation};
        nu_status st = nu_device_open(&desc, &d->device[i]);
        if (st != NU_OK) {
            snprintf(why, why_size, "device %s: %s", d->names[i], nu_error_message(NULL));
            cli_devices_close(d);
            return st;
        }
    }
    return NU_OK;
}

void cli_devices_close(cli_devices *d)
{
    for (uint32_t i = 0; i < d->count; i++) {
        nu_device_close(d->device[i]);
        d->device[i] = NULL;
    }
}

nu_status cli_model_open(const cli_devices *d, nu_device *single, const char *path, const nu_llm_model_options *o,
                         nu_llm_model **out)
{
    if (!d || d->count == 0)
        return nu_llm_model_open(single, path, o, out);
    return nu_llm_model_open_split(d->device, d->count, d->weight_count ? d->weights : NULL, path, o, out);
}

void cli_describe_split(const nu_llm_model *m, char *out, size_t size)
{
    *out = 0;
    uint32_t n = nu_llm_model_devices(m);
    size_t at = 0;
    for (uint32_t i = 0; n > 1 && i < n && at < size; i++) {
        nu_device *dev;
        uint32_t first, end;
        if (nu_llm_model_device_layers(m, i, &dev, &first, &end) != NU_OK)
            break;
        const nu_device_info *in = nu_device_get_info(dev);
        int k = snprintf(out + at, size - at, "%slayers %u-%u on %s (device %u)", i ? ", " : "", first, end - 1,
                         in ? in->name : "?", in ? in->index : 0);
        if (k < 0)
            break;
        at += (size_t)k;
    }
}
