/* ops.c: `nuvec bench ops`: the kernel library's ops (nuvec/ops.h) at the shapes a 7B Llama
 * decode uses (hidden 4096, FFN 11008, vocab 32000, 32 heads of 128) and elementwise ops at large
 * sizes (--size bytes a tensor: 2 GiB on a GPU, 32 MiB on a CPU device), as GB/s of the bytes
 * each op must move (every input read once, the output written once; for matrix-vector products
 * the weights' bytes) and as a fraction of the copy bandwidth measured in the same run (a
 * --size copy through nu_commands_copy: a compute shader). bench/torch_ops.py runs the same cases
 * through PyTorch on CUDA.
 *
 * Each case records `reps` repetitions of the op into one command buffer (repetitions write the
 * same output, so hazard tracking puts a barrier between them, as between the steps of a model)
 * between two GPU timestamps; the time per op is the median over runs of that span / reps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_util.h"
#include "exec/submit.h"

#define RUNS 5
#define TARGET_SECONDS_PER_RUN 0.02 /* each run records enough repetitions for about this long */
#define MAX_TENSORS 4

typedef enum op_kind { K_COPY, K_BINARY } op_kind;

typedef struct bench_case {
    const char *name;   /* "add", "copy" */
    const char *shape;  /* for the table: "4096", "2 GiB" */
    op_kind kind;
    int sub;            /* the op within its kind (nu_binary_op, ...) */
    nu_dtype dtype;     /* of the inputs */
    nu_dtype out_dtype;
    uint32_t rank;
    int64_t shape_v[4];
    double bytes;       /* moved per op */
    const char *target; /* the target for this case, for the table */
} bench_case;

typedef struct bench_tensors {
    nu_buffer *buf[MAX_TENSORS];
    nu_tensor t[MAX_TENSORS]; /* 0: dst */
    int count;
} bench_tensors;

static void usage(FILE *f)
{
    fprintf(f, "usage: nuvec bench ops [--json] [--device NAME] [--size BYTES] [--filter TEXT]\n"
               "  Every op at a 7B Llama decode's shapes and elementwise ops at --size bytes a tensor\n"
               "  (default 2 GiB on a GPU, 32 MiB on a CPU device): GB/s and the fraction of the copy\n"
               "  bandwidth measured in the same run. --filter runs the cases whose name contains TEXT.\n");
}

/* Tensors for a case, private buffers filled with small values (never zeros: zeros can run
 * faster than real data). */
static nu_status make_tensor(nu_device *d, nu_dtype dtype, uint32_t rank, const int64_t *shape, bench_tensors *bt)
{
    nu_tensor t = nu_tensor_make(NULL, 0, dtype, rank, shape);
    uint64_t bytes = nu_tensor_span_bytes(&t);
    nu_buffer *b;
    nu_status st = nu_buffer_new(d, bytes, NU_STORAGE_PRIVATE, &b);
    if (st != NU_OK)
        return st;
    nu_commands *c;
    if ((st = nu_commands_new(d, NU_QUEUE_COMPUTE, &c)) == NU_OK) {
        /* 0x3c003c00: 1.0 in F16 pairs, 2^-7-ish in F32 and BF16 pairs: finite everywhere. */
        st = nu_commands_fill(c, b, 0, bytes / 4 * 4, 0x3c003c00u);
        if (st == NU_OK)
            st = nu_commands_commit(c);
        if (st == NU_OK)
            st = nu_commands_wait(c, NU_WAIT_FOREVER);
        nu_commands_free(c);
    }
    if (st != NU_OK) {
        nu_buffer_free(b);
        return st;
    }
    t.buffer = b;
    bt->buf[bt->count] = b;
    bt->t[bt->count++] = t;
    return NU_OK;
}

static void free_tensors(bench_tensors *bt)
{
    for (int i = 0; i < bt->count; i++)
        nu_buffer_free(bt->buf[i]);
    bt->count = 0;
}

static nu_status setup(nu_device *d, const bench_case *k, bench_tensors *bt)
{
    nu_status st = make_tensor(d, k->out_dtype, k->rank, k->shape_v, bt);
    int inputs = k->kind == K_BINARY ? 2 : 1;
    for (int i = 0; i < inputs && st == NU_OK; i++)
        st = make_tensor(d, k->dtype, k->rank, k->shape_v, bt);
    return st;
}

static nu_status record(nu_commands *c, const bench_case *k, const bench_tensors *bt)
{
    switch (k->kind) {
    case K_COPY:
        return nu_commands_copy(c, bt->buf[0], 0, bt->buf[1], 0, nu_buffer_size(bt->buf[0]));
    case K_BINARY:
        return nu_op_binary(c, (nu_binary_op)k->sub, &bt->t[0], &bt->t[1], &bt->t[2]);
    }
    return NU_ERROR_INVALID_ARGUMENT;
}

/* Seconds per op: the median over RUNS of (GPU time of `reps` ops) / reps; < 0 on failure. */
static double time_case(bench_vk *vk, nu_device *d, const bench_case *k, const bench_tensors *bt, int *reps_out)
{
    int reps = 1;
    double per[RUNS];
    for (int run = -1; run < RUNS; run++) { /* run -1: warm-up, and sizes the repetitions */
        nu_commands *c;
        nu_status st = nu_commands_new(d, NU_QUEUE_COMPUTE, &c);
        if (st != NU_OK)
            return -1;
        bench_vk_timestamp_begin(vk, c->cmd);
        for (int r = 0; r < reps && st == NU_OK; r++)
            st = record(c, k, bt);
        bench_vk_timestamp_end(vk, c->cmd);
        if (st == NU_OK)
            st = nu_commands_commit(c);
        if (st == NU_OK)
            st = nu_commands_wait(c, NU_WAIT_FOREVER);
        nu_commands_free(c);
        if (st != NU_OK) {
            fprintf(stderr, "nuvec bench ops: %s: %s: %s\n", k->name, nu_status_string(st), nu_error_message(d));
            return -1;
        }
        double ns = bench_vk_timestamp_ns(vk);
        if (ns <= 0)
            return -1;
        if (run < 0) {
            double want = TARGET_SECONDS_PER_RUN * 1e9 / ns;
            reps = want < 1 ? 1 : want > 2000 ? 2000 : (int)want;
            continue;
        }
        per[run] = ns / 1e9 / reps;
    }
    *reps_out = reps;
    return bench_median(per, RUNS);
}

int bench_ops(int argc, char **argv)
{
    bool json = false;
    const char *select = NULL, *filter = NULL;
    long size_arg = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc) {
            if (!bench_parse_count("ops", "--size", argv[++i], 1 << 12, 1l << 40, &size_arg))
                return 2;
        } else if (!strcmp(argv[i], "--filter") && i + 1 < argc) {
            filter = argv[++i];
        } else {
            int rc = bench_common_option("ops", argc, argv, &i, &json, &select, usage);
            if (rc != BENCH_OPTION_TAKEN)
                return rc;
        }
    }
    nu_device *d;
    if (!bench_open("ops", select, &d))
        return 1;
    const nu_device_info *info = nu_device_get_info(d);
    uint64_t size = size_arg ? (uint64_t)size_arg : info->type == NU_DEVICE_CPU ? 32ull << 20 : 2ull << 30;
    if (size > info->max_storage_buffer_range)
        size = info->max_storage_buffer_range / 16 * 16;
    bench_vk vk;
    if (!bench_vk_init(&vk, d, "ops", true)) {
        nu_device_close(d);
        return 1;
    }
    char big[32];
    snprintf(big, sizeof big, "%.3g GiB", (double)size / (1u << 30));
    int64_t n32 = (int64_t)(size / 4), n16 = (int64_t)(size / 2);
    const char *ew = ">= 0.95x torch";
    bench_case cases[] = {
        {"copy", big, K_COPY, 0, NU_DTYPE_U32, NU_DTYPE_U32, 1, {n32}, 2.0 * (double)size, "the bandwidth"},
        {"add", big, K_BINARY, NU_BINARY_ADD, NU_DTYPE_F32, NU_DTYPE_F32, 1, {n32}, 3.0 * (double)size, ew},
        {"add", big, K_BINARY, NU_BINARY_ADD, NU_DTYPE_F16, NU_DTYPE_F16, 1, {n16}, 3.0 * (double)size, ew},
        {"add", big, K_BINARY, NU_BINARY_ADD, NU_DTYPE_BF16, NU_DTYPE_BF16, 1, {n16}, 3.0 * (double)size, ew},
        {"mul", big, K_BINARY, NU_BINARY_MUL, NU_DTYPE_F16, NU_DTYPE_F16, 1, {n16}, 3.0 * (double)size, ew},
        {"add", "4096", K_BINARY, NU_BINARY_ADD, NU_DTYPE_F32, NU_DTYPE_F32, 1, {4096}, 3.0 * 4096 * 4, ew},
        {"add", "4096", K_BINARY, NU_BINARY_ADD, NU_DTYPE_F16, NU_DTYPE_F16, 1, {4096}, 3.0 * 4096 * 2, ew},
        {"mul", "11008", K_BINARY, NU_BINARY_MUL, NU_DTYPE_F16, NU_DTYPE_F16, 1, {11008}, 3.0 * 11008 * 2, ew},
    };
    size_t ncases = sizeof cases / sizeof cases[0];
    double copy_gbps = 0;
    cJSON *root = json ? cJSON_CreateObject() : NULL, *rows = NULL;
    if (root) {
        bench_json_device(root, d);
        cJSON_AddNumberToObject(root, "size_bytes", (double)size);
        rows = cJSON_AddArrayToObject(root, "cases");
    } else {
        printf("nuvec bench ops on %s: GB/s of the bytes each op must move; 'of copy': against the\n"
               "copy bandwidth measured first (nu_commands_copy, %s)\n\n", info->name, big);
        printf("%-10s %-6s %-12s %10s %9s %8s %6s  %s\n", "op", "dtype", "shape", "us/op", "GB/s", "of copy", "reps",
               "target");
    }
    int failed = 0;
    for (size_t i = 0; i < ncases; i++) {
        const bench_case *k = &cases[i];
        if (filter && !strstr(k->name, filter) && i != 0)
            continue;
        bench_tensors bt = {0};
        nu_status st = setup(d, k, &bt);
        int reps = 0;
        double s = st == NU_OK ? time_case(&vk, d, k, &bt, &reps) : -1;
        free_tensors(&bt);
        nu_memory_clear_cache(d);
        if (s <= 0) {
            if (st != NU_OK)
                fprintf(stderr, "nuvec bench ops: %s: %s: %s\n", k->name, nu_status_string(st), nu_error_message(d));
            failed++;
            continue;
        }
        double gbps = k->bytes / s / 1e9;
        if (k->kind == K_COPY)
            copy_gbps = gbps;
        double frac = copy_gbps > 0 ? gbps / copy_gbps : 0;
        if (root) {
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "op", k->name);
            cJSON_AddStringToObject(r, "dtype", nu_dtype_name(k->dtype));
            cJSON_AddStringToObject(r, "shape", k->shape);
            cJSON_AddNumberToObject(r, "us_per_op", s * 1e6);
            cJSON_AddNumberToObject(r, "gbps", gbps);
            cJSON_AddNumberToObject(r, "fraction_of_copy", frac);
            cJSON_AddNumberToObject(r, "bytes", k->bytes);
            cJSON_AddNumberToObject(r, "reps", reps);
            cJSON_AddStringToObject(r, "target", k->target);
            cJSON_AddItemToArray(rows, r);
        } else {
            printf("%-10s %-6s %-12s %10.2f %9.1f %7.0f%% %6d  %s\n", k->name, nu_dtype_name(k->dtype), k->shape,
                   s * 1e6, gbps, frac * 100, reps, k->target);
        }
    }
    bench_vk_fini(&vk);
    nu_device_close(d);
    if (root) {
        cJSON_AddNumberToObject(root, "copy_gbps", copy_gbps);
        int rc = bench_json_print("ops", root);
        return rc ? rc : failed ? 1 : 0;
    }
    return failed ? 1 : 0;
}
