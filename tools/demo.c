/* demo.c: `nuvec demo`, the self-check `make demo` runs: opens the default device, prints
 * what it is, then allocates, writes, reads and frees shared and private buffers through the
 * caching allocator, checks every byte, and prints the memory statistics along the way; then
 * writes a safetensors weights file, maps it, moves it to the device, and runs the pipelined
 * computation whose steps read those weights. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "nuvec.h"
#include "pipeline.h"

static void print_stats(nu_device *d, const char *when)
{
    nu_memory_stats s;
    nu_memory_get_stats(d, &s);
    printf("  %-28s active %8.2f MiB  peak %8.2f MiB  cache %8.2f MiB  reserved %8.2f MiB  buffers %llu  blocks %llu\n",
           when, s.active / 1048576.0, s.peak / 1048576.0, s.cache / 1048576.0, s.reserved / 1048576.0,
           (unsigned long long)s.buffers, (unsigned long long)s.blocks);
}

static int fail(const char *what, nu_status st)
{
    fprintf(stderr, "nuvec demo: %s: %s: %s\n", what, nu_status_string(st), nu_error_message(NULL));
    return 1;
}

/* Fills a buffer with a pattern of its own, reads it back and compares. */
static int roundtrip(nu_buffer *b, unsigned seed)
{
    size_t n = nu_buffer_size(b);
    unsigned char *in = malloc(n ? n : 1), *out = malloc(n ? n : 1);
    if (!in || !out) {
        free(in);
        free(out);
        fprintf(stderr, "nuvec demo: out of host memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        in[i] = (unsigned char)(i * 2654435761u + seed);
    nu_status st = nu_buffer_write(b, 0, in, n);
    if (st == NU_OK)
        st = nu_buffer_read(b, 0, out, n);
    int bad = st != NU_OK ? fail("write/read", st) : memcmp(in, out, n) != 0;
    if (st == NU_OK && bad)
        fprintf(stderr, "nuvec demo: the bytes read back differ from those written\n");
    free(in);
    free(out);
    return bad;
}

/* Writes `layers` F32 tensors of `elements` values pipeline_weight(layer + 1, i) to `path`:
 * the header first (data left as holes), then each tensor's bytes in place. */
static nu_status write_weights(nu_device *d, const char *path, uint32_t layers, uint32_t elements)
{
    nu_tensor_write *t = calloc(layers, sizeof *t);
    char(*names)[32] = calloc(layers, sizeof *names);
    float *values = malloc((size_t)elements * 4);
    nu_status st = t && names && values ? NU_OK : NU_ERROR_HOST_OUT_OF_MEMORY;
    for (uint32_t l = 0; st == NU_OK && l < layers; l++) {
        snprintf(names[l], sizeof names[l], "layers.%u.weight", l);
        t[l] = (nu_tensor_write){.name = names[l], .dtype = NU_DTYPE_F32, .rank = elements % 1024 ? 1 : 2,
                                 .shape = {elements % 1024 ? elements : elements / 1024, 1024}};
    }
    const char *key = "source", *value = "nuvec demo";
    if (st == NU_OK)
        st = nu_safetensors_write(path, t, layers, &key, &value, 1);
    nu_safetensors *f = NULL;
    if (st == NU_OK)
        st = nu_safetensors_open(d, path, &f);
    int fd = st == NU_OK ? open(path, O_WRONLY) : -1;
    if (st == NU_OK && fd < 0)
        st = NU_ERROR_IO;
    for (uint32_t l = 0; st == NU_OK && l < layers; l++) {
        for (uint32_t i = 0; i < elements; i++)
            values[i] = pipeline_weight(l + 1, i);
        const nu_tensor_info *ti = nu_safetensors_find(f, names[l]);
        if (pwrite(fd, values, (size_t)elements * 4, (off_t)ti->offset) != (ssize_t)elements * 4)
            st = NU_ERROR_IO;
    }
    if (fd >= 0)
        close(fd);
    nu_safetensors_close(f);
    free(t);
    free(names);
    free(values);
    return st;
}

/* The weights: written, mapped, listed, moved to the device; the pipeline then reads them. */
static int run_weights(nu_device *d, uint64_t size, uint32_t elements, uint32_t steps)
{
    uint64_t tensor = (uint64_t)elements * 4;
    uint32_t layers = size / tensor ? (uint32_t)(size / tensor) : 1;
    const char *tmp = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/nuvec-demo-%d.safetensors", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    printf("  weights: %u tensors of %u floats (%.1f MiB) written to %s\n", layers, elements,
           layers * tensor / 1048576.0, path);
    nu_status st = write_weights(d, path, layers, elements);
    nu_safetensors *f = NULL;
    nu_buffer *w = NULL;
    uint64_t *offsets = calloc(layers, sizeof *offsets);
    if (st == NU_OK && !offsets)
        st = NU_ERROR_HOST_OUT_OF_MEMORY;
    double t0 = cli_now_s();
    if (st == NU_OK)
        st = nu_safetensors_open(d, path, &f);
    double t1 = cli_now_s();
    if (st == NU_OK)
        st = nu_safetensors_to_device(f, NULL, 0, NULL, &w, offsets);
    double t2 = cli_now_s();
    int bad = 0;
    if (st != NU_OK) {
        bad = fail("the weights file", st);
    } else {
        printf("  weights mapped in %.2f ms (%s), moved to the device in %.1f ms: %.2f GB/s\n", (t1 - t0) * 1e3,
               nu_buffer_is_zero_copy(nu_safetensors_buffer(f)) ? "zero-copy" : "copied: no host-memory import",
               (t2 - t1) * 1e3, (double)nu_safetensors_data_size(f) / (t2 - t1) / 1e9);
        pipeline_weights pw = {.buffer = w, .offsets = offsets, .layers = layers};
        pipeline_result r;
        st = pipeline_run(d, true, steps, elements, 4, &pw, &r);
        if (st != NU_OK)
            bad = fail("the pipeline over the weights", st);
        else
            printf("    %-26s %7.2f GB/s  peak active %7.2f MiB  verified against the CPU: %s\n",
                   "steps reading the weights:", r.gbps, r.peak / 1048576.0, r.verified ? "yes" : "NO");
        bad |= st == NU_OK && !r.verified;
    }
    nu_buffer_free(w);
    nu_safetensors_close(f);
    free(offsets);
    unlink(path);
    nu_memory_clear_cache(d);
    return bad;
}

int cli_demo(int argc, char **argv)
{
    nu_device_desc desc = {0};
    uint32_t elements = 0, steps = 0;
    uint64_t weights_size = 0;
    const char *trace = NULL, *capture = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = v != NULL;
        /* A step's buffers are elements F32 values each (at most 1 GiB); the weights file at most 1 TiB. */
        if (ok && !strcmp(a, "--device"))
            desc.select = v;
        else if (ok && !strcmp(a, "--elements"))
            ok = cli_arg_u32(v, 1, 1u << 28, &elements);
        else if (ok && !strcmp(a, "--steps"))
            ok = cli_arg_u32(v, 1, 1u << 20, &steps);
        else if (ok && !strcmp(a, "--size"))
            ok = cli_arg_u64(v, 1, 1ull << 40, &weights_size);
        else if (ok && !strcmp(a, "--trace"))
            trace = v;
        else if (ok && !strcmp(a, "--capture"))
            capture = v;
        else
            ok = false;
        if (!ok) {
            cli_arg_report(stderr, "demo", a, v, "");
            fprintf(stderr, "usage: nuvec demo [--device INDEX|NAME] [--elements 1..2^28] [--steps 1..2^20] "
                            "[--size BYTES] [--trace FILE.json] [--capture FILE.rdc]\n");
            return 2;
        }
        i++;
    }
    /* A capture needs RenderDoc's layer in the instance: ask for it before opening. */
    if (capture)
        setenv("NUVEC_CAPTURE", "1", 1);
    nu_device *d;
    nu_status st = nu_device_open(&desc, &d);
    if (st != NU_OK)
        return fail("opening the device", st);
    const nu_device_info *info = nu_device_get_info(d);
    printf("nuvec demo on device %u: %s (%s, %s)\n", info->index, info->name, nu_device_type_name(info->type),
           info->driver_info);
    printf("  memory: %s\n", nu_device_memory_choice(d)->reason);
    if (trace && (st = nu_trace_start(d, trace)) != NU_OK) {
        fail("starting the trace", st);
        nu_device_close(d);
        return 1;
    }
    if (capture && (st = nu_capture_start(d, capture)) != NU_OK) {
        fail("starting the capture", st);
        nu_device_close(d);
        return 1;
    }

    static const size_t sizes[] = {0, 1, 255, 4096, 100000, 1 << 20, 8 << 20, 48 << 20};
    enum { N = sizeof sizes / sizeof sizes[0] };
    nu_buffer *bufs[2][N] = {{0}};
    int bad = 0;
    print_stats(d, "opened:");
    for (int s = 0; s < 2 && !bad; s++) {
        nu_storage storage = s ? NU_STORAGE_PRIVATE : NU_STORAGE_SHARED;
        for (int i = 0; i < N && !bad; i++) {
            st = nu_buffer_new(d, sizes[i], storage, &bufs[s][i]);
            bad = st != NU_OK ? fail("allocating", st) : roundtrip(bufs[s][i], (unsigned)(i + 7 * s));
        }
        printf("  %s buffers of 0 B to 48 MiB written and read back: %s\n", s ? "private" : "shared ",
               bad ? "FAILED" : "ok");
    }
    print_stats(d, "16 buffers alive:");
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < N; i++)
            nu_buffer_free(bufs[s][i]);
    print_stats(d, "all freed (cached):");

    /* Reuse: the same sizes again come from the cache without new device memory. */
    nu_memory_stats before, after;
    nu_memory_get_stats(d, &before);
    for (int i = 0; i < N && !bad; i++) {
        st = nu_buffer_new(d, sizes[i], NU_STORAGE_PRIVATE, &bufs[1][i]);
        bad = st != NU_OK ? fail("reallocating", st) : 0;
    }
    nu_memory_get_stats(d, &after);
    printf("  reallocated from the cache: device memory held %s (%.2f -> %.2f MiB)\n",
           after.reserved == before.reserved ? "unchanged" : "CHANGED", before.reserved / 1048576.0,
           after.reserved / 1048576.0);
    for (int i = 0; i < N; i++)
        nu_buffer_free(bufs[1][i]);
    nu_memory_clear_cache(d);
    print_stats(d, "cache cleared:");

    /* The memory limit: a request past it fails cleanly and loses nothing. */
    nu_buffer *keep = NULL, *big = NULL;
    uint64_t old_limit;
    nu_buffer_from(d, "keep me", 8, NU_STORAGE_SHARED, &keep);
    nu_memory_set_limit(d, 16 << 20, &old_limit);
    st = nu_buffer_new(d, 32 << 20, NU_STORAGE_PRIVATE, &big);
    char check[8] = {0};
    nu_status rs = keep ? nu_buffer_read(keep, 0, check, 8) : NU_ERROR_INVALID_HANDLE;
    printf("  32 MiB under a 16 MiB limit: %s (%s); earlier buffer intact: %s\n", nu_status_string(st),
           nu_error_message(d), rs == NU_OK && !strcmp(check, "keep me") ? "yes" : "NO");
    bad |= st != NU_ERROR_OUT_OF_MEMORY || rs != NU_OK || strcmp(check, "keep me") != 0;
    nu_memory_set_limit(d, old_limit, NULL);
    nu_buffer_free(big);
    nu_buffer_free(keep);
    nu_memory_clear_cache(d);
    print_stats(d, "end:");

    /* The pipelined computation: steps in flight reading one input, intermediates freed while
     * their step runs; with and without reuse of that in-flight memory. */
    bool gpu = info->type != NU_DEVICE_CPU;
    if (!elements)
        elements = gpu ? 16u << 20 : 1u << 20;
    if (!steps)
        steps = gpu ? 64 : 16;
    printf("  pipeline: %u steps of %u floats (%.1f MiB each), 4 in flight, each reading the same input\n", steps,
           elements, elements * 4 / 1048576.0);
    pipeline_result warm; /* kernels' first dispatches compile on some drivers: not timed */
    pipeline_run(d, true, 2, elements, 4, NULL, &warm);
    for (int reuse = 1; reuse >= 0 && !bad; reuse--) {
        pipeline_result r;
        st = pipeline_run(d, reuse, steps, elements, 4, NULL, &r);
        if (st != NU_OK) {
            bad = fail("the pipeline", st);
            break;
        }
        printf("    %-26s %7.2f GB/s  peak active %7.2f MiB  peak held %7.2f MiB  cache at end %7.2f "
               "MiB  verified against the CPU: %s\n",
               reuse ? "with in-flight reuse:" : "without (nu_buffer_new):", r.gbps, r.peak / 1048576.0,
               r.held_peak / 1048576.0, r.cache / 1048576.0, r.verified ? "yes" : "NO");
        bad |= !r.verified;
        nu_memory_clear_cache(d);
    }
    if (!bad) {
        if (!weights_size)
            weights_size = gpu ? 2ull << 30 : 256ull << 20;
        bad = run_weights(d, weights_size, elements, steps);
    }
    if (capture) {
        st = nu_capture_stop(d);
        if (st != NU_OK)
            bad = fail("writing the capture", st);
        else
            printf("  capture written to %s (open it in RenderDoc: qrenderdoc %s)\n", capture, capture);
    }
    if (trace) {
        st = nu_trace_stop(d);
        if (st != NU_OK)
            bad = fail("writing the trace", st);
        else
            printf("  trace written to %s (open it in Perfetto or chrome://tracing)\n", trace);
    }
    nu_device_close(d);
    printf("nuvec demo: %s\n", bad ? "FAILED" : "all checks passed");
    return bad;
}
