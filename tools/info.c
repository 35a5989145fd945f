/* info.c: `nuvec info [--json]`: every Vulkan device nuvec sees (memory heaps and types, the
 * features nuvec uses, limits, queues), then what nuvec chose on the default device (memory
 * types for shared and private buffers, and why) and the allocator's limits. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "nuvec.h"

/* Memory property flags, in the order they are printed: text name and JSON name. */
static const struct {
    uint32_t bit;
    const char *text;
    const char *json;
} memory_flags[] = {
    {NU_MEMORY_DEVICE_LOCAL, "device-local", "device_local"},
    {NU_MEMORY_HOST_VISIBLE, "host-visible", "host_visible"},
    {NU_MEMORY_HOST_COHERENT, "coherent", "host_coherent"},
    {NU_MEMORY_HOST_CACHED, "cached", "host_cached"},
    {NU_MEMORY_LAZILY_ALLOCATED, "lazily-allocated", "lazily_allocated"},
    {NU_MEMORY_PROTECTED, "protected", "protected"},
};
#define MEMORY_FLAG_COUNT (sizeof memory_flags / sizeof memory_flags[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: nuvec info [--json]\n"
               "  Lists every Vulkan device: type, driver, Vulkan version, memory heaps and types,\n"
               "  the features nuvec uses, limits and queues; then, for the default device\n"
               "  (NUVEC_DEVICE=index|name chooses), the memory types nuvec chose for shared and\n"
               "  private buffers, why, and the allocator's memory and cache limits.\n"
               "  --json   the same as one JSON document (byte counts as integers)\n");
}

static int fail(nu_status st)
{
    fprintf(stderr, "nuvec info: %s: %s\n", nu_status_string(st), nu_error_message(NULL));
    return 1;
}

/* "1.5 GiB", "256 B". */
static const char *human_bytes(char *buf, size_t size, uint64_t bytes)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    unsigned u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%" PRIu64 " B", bytes);
    else if (v == (double)(uint64_t)v)
        snprintf(buf, size, "%.0f %s", v, units[u]);
    else
        snprintf(buf, size, "%.1f %s", v, units[u]);
    return buf;
}

/* Vulkan's apiVersion encoding (variant bits ignored). */
static const char *api_version_string(char *buf, size_t size, uint32_t v)
{
    snprintf(buf, size, "%u.%u.%u", (v >> 22) & 0x7fu, (v >> 12) & 0x3ffu, v & 0xfffu);
    return buf;
}

/* driverVersion is vendor-specific: NVIDIA packs 10.8.8.6 bits; Mesa and most others use
 * Vulkan's encoding. The driver_info string usually has the exact version as well. */
static const char *driver_version_string(char *buf, size_t size, const nu_device_info *info)
{
    uint32_t v = info->driver_version;
    if (info->vendor_id == 0x10de)
        snprintf(buf, size, "%u.%u.%u", (v >> 22) & 0x3ffu, (v >> 14) & 0xffu, (v >> 6) & 0xffu);
    else
        api_version_string(buf, size, v);
    return buf;
}

static const char *vendor_name(uint32_t id)
{
    switch (id) {
    case 0x10de: return "NVIDIA";
    case 0x1002: return "AMD";
    case 0x8086: return "Intel";
    case 0x106b: return "Apple";
    case 0x13b5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x1010: return "Imagination";
    case 0x10005: return "Mesa";
    default: return NULL;
    }
}

/* "device-local, host-visible, coherent", or "none". */
static const char *flags_string(char *buf, size_t size, uint32_t flags)
{
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < MEMORY_FLAG_COUNT; i++)
        if (flags & memory_flags[i].bit)
            n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "%s%s", n ? ", " : "", memory_flags[i].text);
    if (!n)
        snprintf(buf, size, "none");
    return buf;
}

static uint32_t heap_count(const nu_device_info *info)
{
    return info->heap_count < NU_MAX_MEMORY_HEAPS ? info->heap_count : NU_MAX_MEMORY_HEAPS;
}

static uint32_t type_count(const nu_device_info *info)
{
    return info->memory_type_count < NU_MAX_MEMORY_TYPES ? info->memory_type_count : NU_MAX_MEMORY_TYPES;
}

/* The default device's choices and limits, or the failure to open it. */
typedef struct default_device {
    nu_device *device;
    const nu_device_info *info;
    const nu_memory_choice *choice;
    nu_memory_stats stats;
    const char *selected; /* NUVEC_DEVICE's value, or NULL for the default order */
} default_device;

static nu_status open_default(default_device *dd)
{
    memset(dd, 0, sizeof *dd);
    const char *env = getenv("NUVEC_DEVICE");
    dd->selected = env && *env ? env : NULL;
    nu_status st = nu_device_open(NULL, &dd->device);
    if (st != NU_OK)
        return st;
    dd->info = nu_device_get_info(dd->device);
    dd->choice = nu_device_memory_choice(dd->device);
    st = nu_memory_get_stats(dd->device, &dd->stats);
    if (st != NU_OK) {
        nu_device_close(dd->device);
        dd->device = NULL;
    }
    return st;
}

/* ---- text ------------------------------------------------------------------------------- */

static void print_device(const nu_device_info *in)
{
    char a[64], c[160];
    printf("Device %u: %s\n", in->index, in->name);
    printf("  type              %s\n", nu_device_type_name(in->type));
    printf("  driver            %s (%s), driverVersion %s\n", in->driver_name[0] ? in->driver_name : "?",
           in->driver_info[0] ? in->driver_info : "no driver info", driver_version_string(a, sizeof a, in));
    printf("  Vulkan            %s\n", api_version_string(a, sizeof a, in->api_version));
    const char *vendor = vendor_name(in->vendor_id);
    printf("  vendor / device   0x%04x%s%s%s / 0x%04x\n", in->vendor_id, vendor ? " (" : "", vendor ? vendor : "",
           vendor ? ")" : "", in->device_id);
    printf("  memory            %s\n", in->unified_memory ? "unified (the CPU and the device share memory)"
                                                          : "discrete (device memory of its own)");

    printf("  memory heaps\n");
    for (uint32_t i = 0; i < heap_count(in); i++)
        printf("    %2u  %10s  %s\n", i, human_bytes(a, sizeof a, in->heaps[i].size),
               in->heaps[i].device_local ? "device-local" : "host");
    printf("  memory types\n");
    for (uint32_t i = 0; i < type_count(in); i++)
        printf("    %2u  heap %-2u  %s\n", i, in->memory_types[i].heap,
               flags_string(c, sizeof c, in->memory_types[i].flags));

    printf("  features\n");
    for (int f = 0; f < NU_FEATURE_COUNT; f++)
        printf("    %-36s %s\n", nu_feature_name((nu_feature)f), in->features[f] ? "yes" : "no");
    if (in->cooperative_matrix_count) {
        printf("  cooperative matrix products (subgroup scope: M x N x K, A x B + C = result)\n");
        for (uint32_t i = 0; i < in->cooperative_matrix_count && i < NU_MAX_COOPERATIVE_MATRIX_SHAPES; i++) {
            const nu_cooperative_matrix_shape *s = &in->cooperative_matrix[i];
            printf("    %2u x %2u x %2u  %s x %s + %s = %s%s\n", s->m, s->n, s->k, nu_dtype_name(s->a),
                   nu_dtype_name(s->b), nu_dtype_name(s->c), nu_dtype_name(s->result),
                   s->saturating ? " (saturating)" : "");
        }
    }

    printf("  limits\n");
    printf("    %-36s %u (min %u, max %u)\n", "subgroup size", in->subgroup_size, in->min_subgroup_size,
           in->max_subgroup_size);
    static const char *const ops[8] = {"basic", "vote", "arithmetic", "ballot", "shuffle", "shuffle_relative",
                                       "clustered", "quad"};
    printf("    %-36s", "subgroup operations");
    for (int i = 0; i < 8; i++)
        if (in->subgroup_operations & (1u << i))
            printf(" %s", ops[i]);
    printf("%s\n", in->subgroup_operations ? "" : " none");
    printf("    %-36s %u x %u x %u\n", "max workgroup count", in->max_workgroup_count[0], in->max_workgroup_count[1],
           in->max_workgroup_count[2]);
    printf("    %-36s %u x %u x %u\n", "max workgroup size", in->max_workgroup_size[0], in->max_workgroup_size[1],
           in->max_workgroup_size[2]);
    printf("    %-36s %u\n", "max workgroup invocations", in->max_workgroup_invocations);
    printf("    %-36s %s\n", "max shared memory", human_bytes(a, sizeof a, in->max_shared_memory));
    printf("    %-36s %s\n", "max push constants", human_bytes(a, sizeof a, in->max_push_constants));
    printf("    %-36s %s (%" PRIu64 " B)\n", "max storage buffer range",
           human_bytes(a, sizeof a, in->max_storage_buffer_range), in->max_storage_buffer_range);
    printf("    %-36s %s (%" PRIu64 " B)\n", "max allocation size", human_bytes(a, sizeof a, in->max_allocation_size),
           in->max_allocation_size);
    printf("    %-36s %u\n", "max allocation count", in->max_allocation_count);
    printf("    %-36s %" PRIu64 " B\n", "min storage buffer offset alignment", in->min_storage_buffer_offset_alignment);
    if (in->features[NU_FEATURE_EXTERNAL_HOST_MEMORY])
        printf("    %-36s %" PRIu64 " B\n", "min imported host pointer alignment",
               in->min_imported_host_pointer_alignment);
    else
        printf("    %-36s n/a (no external host memory)\n", "min imported host pointer alignment");
    printf("    %-36s %" PRIu64 " B\n", "non-coherent atom size", in->non_coherent_atom_size);
    printf("    %-36s %g ns per tick\n", "timestamp period", (double)in->timestamp_period);
    if (in->compute_units)
        printf("    %-36s %u\n", "compute units", in->compute_units);
    else
        printf("    %-36s unknown (the driver does not say)\n", "compute units");

    printf("  queues\n");
    if (in->compute_queue_family == UINT32_MAX) {
        printf("    compute family    none (nuvec cannot use this device)\n");
    } else {
        printf("    compute family    %u\n", in->compute_queue_family);
        if (in->separate_transfer_queue)
            printf("    transfer family   %u (a separate transfer-only family: copies run beside compute)\n",
                   in->transfer_queue_family);
        else
            printf("    transfer family   %u (none separate: transfers use the compute queue)\n",
                   in->transfer_queue_family);
    }
}

static void print_memory_type(const char *label, const nu_device_info *in, uint32_t type)
{
    char c[160];
    if (type < type_count(in))
        printf("  %-17s memory type %u, heap %u (%s)\n", label, type, in->memory_types[type].heap,
               flags_string(c, sizeof c, in->memory_types[type].flags));
    else
        printf("  %-17s memory type %u\n", label, type);
}

static void print_default(const default_device *dd)
{
    const nu_device_info *in = dd->info;
    const nu_memory_choice *m = dd->choice;
    char a[64];
    printf("Default device: %u (%s)\n", in->index, in->name);
    if (dd->selected)
        printf("  chosen by         NUVEC_DEVICE=%s\n", dd->selected);
    else
        printf("  chosen by         the default order (discrete, integrated, virtual GPU, CPU)\n");
    print_memory_type("shared buffers", in, m->shared_type);
    print_memory_type("private buffers", in, m->private_type);
    printf("  shared memory     %s\n", m->shared_device_local ? "device-local (host-visible)" : "host memory");
    printf("  why               %s\n", m->reason);
    if (m->measured_read_gbps[0] > 0 || m->measured_read_gbps[1] > 0)
        printf("  measured (CPU)    host memory: read %.2f GB/s, write %.2f GB/s; "
               "device-local: read %.2f GB/s, write %.2f GB/s\n",
               m->measured_read_gbps[0], m->measured_write_gbps[0], m->measured_read_gbps[1],
               m->measured_write_gbps[1]);
    printf("  memory limit      %s (%" PRIu64 " B)\n", human_bytes(a, sizeof a, dd->stats.memory_limit),
           dd->stats.memory_limit);
    printf("  cache limit       %s (%" PRIu64 " B)%s\n", human_bytes(a, sizeof a, dd->stats.cache_limit),
           dd->stats.cache_limit, dd->stats.cache_limit ? "" : ": the cache is off");
}

/* ---- JSON ------------------------------------------------------------------------------- */

static cJSON *flags_json(uint32_t flags)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < MEMORY_FLAG_COUNT; i++)
        if (flags & memory_flags[i].bit)
            cJSON_AddItemToArray(arr, cJSON_CreateString(memory_flags[i].json));
    return arr;
}

static cJSON *triple_json(const uint32_t v[3])
{
    const int iv[3] = {(int)v[0], (int)v[1], (int)v[2]};
    /* cJSON_CreateIntArray takes int: values above INT_MAX must go through doubles. */
    if (v[0] > INT32_MAX || v[1] > INT32_MAX || v[2] > INT32_MAX) {
        cJSON *arr = cJSON_CreateArray();
        for (int i = 0; i < 3; i++)
            cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)v[i]));
        return arr;
    }
    return cJSON_CreateIntArray(iv, 3);
}

static cJSON *device_json(const nu_device_info *in)
{
    char a[64];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", in->index);
    cJSON_AddStringToObject(o, "name", in->name);
    cJSON_AddStringToObject(o, "type", nu_device_type_name(in->type));
    cJSON_AddStringToObject(o, "driver_name", in->driver_name);
    cJSON_AddStringToObject(o, "driver_info", in->driver_info);
    cJSON_AddNumberToObject(o, "driver_version", in->driver_version);
    cJSON_AddStringToObject(o, "driver_version_string", driver_version_string(a, sizeof a, in));
    cJSON_AddStringToObject(o, "api_version", api_version_string(a, sizeof a, in->api_version));
    cJSON_AddNumberToObject(o, "vendor_id", in->vendor_id);
    const char *vendor = vendor_name(in->vendor_id);
    if (vendor)
        cJSON_AddStringToObject(o, "vendor", vendor);
    else
        cJSON_AddNullToObject(o, "vendor");
    cJSON_AddNumberToObject(o, "device_id", in->device_id);
    cJSON_AddBoolToObject(o, "unified_memory", in->unified_memory);

    cJSON *heaps = cJSON_AddArrayToObject(o, "memory_heaps");
    for (uint32_t i = 0; i < heap_count(in); i++) {
        cJSON *h = cJSON_CreateObject();
        cJSON_AddNumberToObject(h, "index", i);
        cJSON_AddNumberToObject(h, "size", (double)in->heaps[i].size);
        cJSON_AddBoolToObject(h, "device_local", in->heaps[i].device_local);
        cJSON_AddItemToArray(heaps, h);
    }
    cJSON *types = cJSON_AddArrayToObject(o, "memory_types");
    for (uint32_t i = 0; i < type_count(in); i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "index", i);
        cJSON_AddNumberToObject(t, "heap", in->memory_types[i].heap);
        cJSON_AddItemToObject(t, "flags", flags_json(in->memory_types[i].flags));
        cJSON_AddItemToArray(types, t);
    }

    /* Keyed by nuvec's feature name (the Vulkan feature or extension name): stable and
     * greppable, and the same names the text output prints. */
    cJSON *features = cJSON_AddObjectToObject(o, "features");
    for (int f = 0; f < NU_FEATURE_COUNT; f++)
        cJSON_AddBoolToObject(features, nu_feature_name((nu_feature)f), in->features[f]);
    cJSON *coop = cJSON_AddArrayToObject(o, "cooperative_matrix");
    for (uint32_t i = 0; i < in->cooperative_matrix_count && i < NU_MAX_COOPERATIVE_MATRIX_SHAPES; i++) {
        const nu_cooperative_matrix_shape *s = &in->cooperative_matrix[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "m", s->m);
        cJSON_AddNumberToObject(e, "n", s->n);
        cJSON_AddNumberToObject(e, "k", s->k);
        cJSON_AddStringToObject(e, "a", nu_dtype_name(s->a));
        cJSON_AddStringToObject(e, "b", nu_dtype_name(s->b));
        cJSON_AddStringToObject(e, "c", nu_dtype_name(s->c));
        cJSON_AddStringToObject(e, "result", nu_dtype_name(s->result));
        cJSON_AddBoolToObject(e, "saturating", s->saturating);
        cJSON_AddItemToArray(coop, e);
    }

    cJSON *l = cJSON_AddObjectToObject(o, "limits");
    cJSON_AddNumberToObject(l, "subgroup_size", in->subgroup_size);
    cJSON_AddNumberToObject(l, "min_subgroup_size", in->min_subgroup_size);
    cJSON_AddNumberToObject(l, "max_subgroup_size", in->max_subgroup_size);
    cJSON_AddNumberToObject(l, "subgroup_operations", in->subgroup_operations);
    cJSON_AddItemToObject(l, "max_workgroup_count", triple_json(in->max_workgroup_count));
    cJSON_AddItemToObject(l, "max_workgroup_size", triple_json(in->max_workgroup_size));
    cJSON_AddNumberToObject(l, "max_workgroup_invocations", in->max_workgroup_invocations);
    cJSON_AddNumberToObject(l, "max_shared_memory", in->max_shared_memory);
    cJSON_AddNumberToObject(l, "max_push_constants", in->max_push_constants);
    cJSON_AddNumberToObject(l, "max_storage_buffer_range", (double)in->max_storage_buffer_range);
    cJSON_AddNumberToObject(l, "max_allocation_size", (double)in->max_allocation_size);
    cJSON_AddNumberToObject(l, "max_allocation_count", in->max_allocation_count);
    cJSON_AddNumberToObject(l, "compute_units", in->compute_units);
    cJSON_AddNumberToObject(l, "min_storage_buffer_offset_alignment",
                            (double)in->min_storage_buffer_offset_alignment);
    cJSON_AddNumberToObject(l, "min_imported_host_pointer_alignment",
                            (double)in->min_imported_host_pointer_alignment);
    cJSON_AddNumberToObject(l, "non_coherent_atom_size", (double)in->non_coherent_atom_size);
    cJSON_AddNumberToObject(l, "timestamp_period_ns", (double)in->timestamp_period);

    cJSON *q = cJSON_AddObjectToObject(o, "queues");
    if (in->compute_queue_family == UINT32_MAX) {
        cJSON_AddNullToObject(q, "compute_family");
        cJSON_AddNullToObject(q, "transfer_family");
    } else {
        cJSON_AddNumberToObject(q, "compute_family", in->compute_queue_family);
        cJSON_AddNumberToObject(q, "transfer_family", in->transfer_queue_family);
    }
    cJSON_AddBoolToObject(q, "separate_transfer_queue", in->separate_transfer_queue);
    return o;
}

static cJSON *default_json(const default_device *dd)
{
    const nu_memory_choice *m = dd->choice;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", dd->info->index);
    cJSON_AddStringToObject(o, "name", dd->info->name);
    if (dd->selected)
        cJSON_AddStringToObject(o, "nuvec_device", dd->selected);
    else
        cJSON_AddNullToObject(o, "nuvec_device");
    cJSON_AddNumberToObject(o, "shared_memory_type", m->shared_type);
    cJSON_AddNumberToObject(o, "private_memory_type", m->private_type);
    cJSON_AddBoolToObject(o, "shared_device_local", m->shared_device_local);
    cJSON_AddStringToObject(o, "reason", m->reason);
    /* Bandwidths nuvec measured at open (resizable BAR only): null where not measured. */
    cJSON *meas = cJSON_AddObjectToObject(o, "measured_cpu_gbps");
    static const char *where[2] = {"host", "device_local"};
    for (int i = 0; i < 2; i++) {
        cJSON *w = cJSON_AddObjectToObject(meas, where[i]);
        if (m->measured_read_gbps[i] > 0 || m->measured_write_gbps[i] > 0) {
            cJSON_AddNumberToObject(w, "read", m->measured_read_gbps[i]);
            cJSON_AddNumberToObject(w, "write", m->measured_write_gbps[i]);
        } else {
            cJSON_AddNullToObject(w, "read");
            cJSON_AddNullToObject(w, "write");
        }
    }
    cJSON_AddNumberToObject(o, "memory_limit", (double)dd->stats.memory_limit);
    cJSON_AddNumberToObject(o, "cache_limit", (double)dd->stats.cache_limit);
    return o;
}

/* ---- the command ------------------------------------------------------------------------ */

int cli_info(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "nuvec info: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }

    uint32_t count = 0;
    nu_status st = nu_device_enumerate(NULL, 0, &count);
    if (st != NU_OK)
        return fail(st);
    nu_device_info *infos = calloc(count ? count : 1, sizeof *infos);
    if (!infos) {
        fprintf(stderr, "nuvec info: out of host memory\n");
        return 1;
    }
    uint32_t got = 0;
    st = nu_device_enumerate(infos, count, &got);
    if (st != NU_OK) {
        free(infos);
        return fail(st);
    }
    if (got < count) /* a device went away between the two calls */
        count = got;

    /* With no device at all, opening one fails with NU_ERROR_NO_DEVICE and says so. */
    default_device dd;
    st = open_default(&dd);
    if (st != NU_OK) {
        free(infos);
        return fail(st);
    }

    int rc = 0;
    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "nuvec_version", NUVEC_VERSION_STRING);
        cJSON *devs = cJSON_AddArrayToObject(root, "devices");
        for (uint32_t i = 0; i < count; i++)
            cJSON_AddItemToArray(devs, device_json(&infos[i]));
        cJSON_AddItemToObject(root, "default_device", default_json(&dd));
        char *text = cJSON_Print(root);
        if (text) {
            printf("%s\n", text);
            cJSON_free(text);
        } else {
            fprintf(stderr, "nuvec info: out of host memory printing JSON\n");
            rc = 1;
        }
        cJSON_Delete(root);
    } else {
        printf("nuvec %s: %u Vulkan device%s\n", NUVEC_VERSION_STRING, count, count == 1 ? "" : "s");
        for (uint32_t i = 0; i < count; i++) {
            printf("\n");
            print_device(&infos[i]);
        }
        printf("\n");
        print_default(&dd);
    }
    nu_device_close(dd.device);
    free(infos);
    return rc; /* a failed write to stdout: tools/nuvec.c's main says so */
}
