/* load.c: `nuvec load FILE.safetensors [--to-gpu]`: lists a weights file's tensors and, with
 * --to-gpu, moves them all into device memory, with a progress bar on a terminal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "nuvec.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: nuvec load FILE.safetensors [--to-gpu] [--device NAME] [--quiet] [--chunk MIB] [--threads N]\n"
               "  Lists the tensors (name, dtype, shape, bytes, offset in the file); --to-gpu moves them\n"
               "  all into one private buffer on the device (DMA from the mapped file, or through pinned\n"
               "  staging memory where the device cannot import it), then prints GB/s.\n"
               "  --quiet lists nothing but the totals; --chunk and --threads tune the move\n"
               "  (nu_move_options: MiB imported or staged at a time, default 4; threads, default 8).\n");
}

typedef struct bar {
    double start, last_draw;
    bool drawn;
} bar;

static void draw(void *user, uint64_t done, uint64_t total)
{
    bar *b = user;
    double t = cli_now_s();
    if (done < total && t - b->last_draw < 0.1)
        return;
    b->last_draw = t;
    b->drawn = true;
    int width = 40, filled = total ? (int)((double)done / (double)total * width) : width;
    char cells[64];
    for (int i = 0; i < width; i++)
        cells[i] = i < filled ? '#' : '.';
    cells[width] = 0;
    double secs = t - b->start;
    fprintf(stderr, "\r[%s] %5.1f%%  %.2f / %.2f GiB  %.1f GB/s ", cells, total ? 100.0 * (double)done / (double)total : 100,
            done / 1073741824.0, total / 1073741824.0, secs > 0 ? (double)done / secs / 1e9 : 0);
    fflush(stderr);
}

static void shape_text(const nu_tensor_info *t, char *out, size_t n)
{
    size_t at = (size_t)snprintf(out, n, "[");
    for (uint32_t i = 0; i < t->rank && at < n; i++)
        at += (size_t)snprintf(out + at, n - at, i ? ", %llu" : "%llu", (unsigned long long)t->shape[i]);
    if (at < n)
        snprintf(out + at, n - at, "]");
}

int cli_load(int argc, char **argv)
{
    const char *path = NULL;
    bool to_gpu = false, quiet = false;
    nu_device_desc desc = {0};
    nu_move_options o = {0};
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "--chunk") || !strcmp(argv[i], "--threads")) && i + 1 < argc) {
            uint64_t v;
            if (!cli_arg_u64(argv[i + 1], 1, argv[i][2] == 'c' ? 1u << 20 : 16, &v)) {
                fprintf(stderr, "nuvec load: %s: '%s' is not a count in range\n", argv[i], argv[i + 1]);
                return 2;
            }
            if (argv[i][2] == 'c')
                o.chunk_size = (uint64_t)v << 20;
            else
                o.threads = (uint32_t)v;
            i++;
        } else if (!strcmp(argv[i], "--to-gpu"))
            to_gpu = true;
        else if (!strcmp(argv[i], "--quiet"))
            quiet = true;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            desc.select = argv[++i];
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else {
            fprintf(stderr, "nuvec load: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    nu_device *d;
    nu_status st = nu_device_open(&desc, &d);
    if (st != NU_OK) {
        fprintf(stderr, "nuvec load: %s: %s\n", nu_status_string(st), nu_error_message(NULL));
        return 1;
    }
    double t0 = cli_now_s();
    nu_safetensors *f;
    if ((st = nu_safetensors_open(d, path, &f)) != NU_OK) {
        fprintf(stderr, "nuvec load: %s: %s\n", nu_status_string(st), nu_error_message(d));
        nu_device_close(d);
        return 1;
    }
    double opened = cli_now_s() - t0;
    size_t n = nu_safetensors_count(f);
    if (!quiet) {
        printf("%-48s %-8s %-24s %14s %14s\n", "tensor", "dtype", "shape", "bytes", "offset");
        for (size_t i = 0; i < n; i++) {
            const nu_tensor_info *t = nu_safetensors_tensor(f, i);
            char shape[256];
            shape_text(t, shape, sizeof shape);
            printf("%-48s %-8s %-24s %14llu %14llu\n", t->name, nu_dtype_name(t->dtype), shape,
                   (unsigned long long)t->size, (unsigned long long)t->offset);
        }
    }
    nu_buffer *file = nu_safetensors_buffer(f);
    uint64_t bytes = nu_safetensors_data_size(f);
    printf("%s: %zu tensors, %.3f GiB of data; opened in %.2f ms (%s)\n", path, n, bytes / 1073741824.0, opened * 1e3,
           nu_buffer_is_zero_copy(file) ? "mapped, zero-copy" : "copied: the device cannot import the file's pages");
    int rc = 0;
    if (to_gpu) {
        bar b = {.start = cli_now_s()};
        o.progress = isatty(2) ? draw : NULL;
        o.user = &b;
        nu_buffer *dev_buf = NULL;
        st = nu_safetensors_to_device(f, NULL, 0, &o, &dev_buf, NULL);
        double secs = cli_now_s() - b.start;
        if (b.drawn)
            fprintf(stderr, "\n");
        if (st != NU_OK) {
            fprintf(stderr, "nuvec load: --to-gpu: %s: %s\n", nu_status_string(st), nu_error_message(d));
            rc = 1;
        } else {
            printf("moved %.3f GiB to %s in %.3f s: %.2f GB/s (chunks of %llu MiB, %u threads)\n",
                   bytes / 1073741824.0, nu_device_get_info(d)->name, secs, secs > 0 ? (double)bytes / secs / 1e9 : 0,
                   (unsigned long long)((o.chunk_size ? o.chunk_size : 4ull << 20) >> 20), o.threads ? o.threads : 8);
        }
        nu_buffer_free(dev_buf);
    }
    nu_safetensors_close(f);
    nu_device_close(d);
    return rc;
}
