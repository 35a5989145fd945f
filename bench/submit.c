/* submit.c: `nuvec bench submit`: the round trip of one small dispatch -- what an inference
 * loop pays per synchronous step -- through nuvec against hand-written Vulkan, in one run.
 *
 * The work: the builtin fill_u32 over 1 KiB (256 words, one workgroup) of a private buffer.
 *   nuvec         nu_commands_new + nu_commands_dispatch + nu_commands_commit + nu_commands_wait
 *                 + nu_commands_free, every iteration (nuvec has no re-submission); also each
 *                 phase on its own.
 *   fence         a command buffer recorded once (pipeline, push descriptor, push constants,
 *                 dispatch), resubmitted with a fence, then vkWaitForFences + vkResetFences: what
 *                 a plain Vulkan program does (586 us on the H200: the driver's blocking wait).
 *   timeline spin the same, signalling a timeline semaphore, waited for by spinning on
 *                 vkGetSemaphoreCounterValue.
 *   timeline wait the same, waited for in vkWaitSemaphores (blocking).
 *   record + spin what nuvec does, by hand: every iteration resets a transient command pool,
 *                 records the dispatch (pipeline, push descriptor, push constants), submits it
 *                 signalling a timeline semaphore, and spins on it. The floor for a runtime that
 *                 records each step (the others resubmit work recorded once).
 * The variants take turns in blocks of BLOCK iterations (after WARMUP untimed each), so that
 * clock and cache states are shared; median, 10th and 90th percentiles per variant.
 * Target (the issue's, on the H200): nuvec <= 15 us (CUDA launch + synchronise: 10 us). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_util.h"
#include "memory/buffer.h"
#include "kernel/kernel.h"

#define DEFAULT_ITERATIONS_GPU 2000
#define DEFAULT_ITERATIONS_CPU 500 /* lavapipe: ~100-200 us each */
#define BLOCK 50
#define WARMUP 20
#define WORDS 256u
#define TARGET_US 15.0
#define WAIT_NS 60000000000ull
#define HAND_VALUE 0x5eed0000u

enum { V_NUVEC, V_FENCE, V_SPIN, V_BLOCK, V_RECORD, VARIANTS };
static const char *const variant_keys[VARIANTS] = {"nuvec", "vulkan_fence", "vulkan_timeline_spin",
                                                    "vulkan_timeline_wait", "vulkan_record_spin"};
static const char *const variant_text[VARIANTS] = {
    "nuvec: new+dispatch+commit+wait+free",
    "Vulkan: resubmit + vkWaitForFences",
    "Vulkan: resubmit + spin on timeline",
    "Vulkan: resubmit + vkWaitSemaphores",
    "Vulkan: record + submit + spin",
};
enum { P_RECORD, P_COMMIT, P_WAIT, P_FREE, PHASES };
static const char *const phase_keys[PHASES] = {"record_us", "commit_us", "wait_us", "free_us"};
static const char *const phase_text[PHASES] = {"new + dispatch", "commit", "wait", "free"};

typedef struct stats {
    double median, p10, p90;
} stats;

typedef struct bench {
    nu_device *d;
    bench_vk vk;
    bench_vk vk_record; /* the record + spin variant's transient pool and timeline */
    nu_kernel *fill;
    nu_buffer *buf;
    VkBuffer vb;
    VkDeviceSize off;
    int iterations;
    bool scaled;
    double *samples[VARIANTS];
    double *phases[PHASES];
    int n[VARIANTS];
    stats res[VARIANTS];
    double phase_median[PHASES];
    double *submit;     /* vkQueueSubmit of the timeline-spin variant, us */
    double submit_median;
    double *record[PHASES]; /* the record + spin variant's phases (record, submit, spin), us */
    double record_median[PHASES];
    uint32_t last_nuvec_value;
} bench;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nuvec bench submit [--json] [--device NAME] [--iterations N]\n"
            "  Round trip of one small dispatch (fill_u32 over 1 KiB): nuvec's new + dispatch +\n"
            "  commit + wait + free against hand-written Vulkan resubmitting a recorded command\n"
            "  buffer and waiting with a fence, a timeline-semaphore spin, or vkWaitSemaphores, and\n"
            "  recording the dispatch anew each time (as nuvec does) with a timeline-semaphore spin.\n"
            "  --json           one JSON document instead of the table\n"
            "  --device NAME    an index or a name substring (default: NUVEC_DEVICE, else the\n"
            "                   default order)\n"
            "  --iterations N   timed round trips per variant (default %d, %d on a CPU device)\n",
            DEFAULT_ITERATIONS_GPU, DEFAULT_ITERATIONS_CPU);
}

static void fail(const char *what, nu_status st)
{
    fprintf(stderr, "nuvec bench submit: %s: %s: %s\n", what, nu_status_string(st), nu_error_message(NULL));
}

/* The hand-written dispatch: fill_u32 writing HAND_VALUE into the buffer. */
static VkResult record_fill(bench *b, VkCommandBuffer cmd, VkCommandBufferUsageFlags flags)
{
    const nu__vk_device *vk = &b->d->vkd;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .flags = flags};
    VkResult r = vk->vkBeginCommandBuffer(cmd, &bi);
    if (r != VK_SUCCESS)
        return r;
    VkDescriptorBufferInfo info = {b->vb, b->off, WORDS * 4};
    VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstBinding = 0,
                              .descriptorCount = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                              .pBufferInfo = &info};
    uint32_t push[2] = {HAND_VALUE, WORDS};
    vk->vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, b->fill->pipeline);
    vk->vkCmdPushDescriptorSetKHR(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, b->fill->layout, 0, 1, &w);
    vk->vkCmdPushConstants(cmd, b->fill->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof push, push);
    vk->vkCmdDispatch(cmd, 1, 1, 1);
    return vk->vkEndCommandBuffer(cmd);
}

static bool setup(bench *b)
{
    nu_status st = nu_kernel_builtin(b->d, "fill_u32", &b->fill);
    if (st == NU_OK)
        st = nu_buffer_new(b->d, WORDS * 4, NU_STORAGE_PRIVATE, &b->buf);
    if (st == NU_OK)
        st = nu__buffer_binding(b->buf, &b->vb, &b->off);
    if (st != NU_OK) {
        fail("setting up", st);
        return false;
    }
    for (int v = 0; v < VARIANTS; v++)
        if (!(b->samples[v] = calloc((size_t)b->iterations, sizeof(double))))
            return false;
    for (int p = 0; p < PHASES; p++)
        if (!(b->phases[p] = calloc((size_t)b->iterations, sizeof(double))))
            return false;
    if (!(b->submit = calloc((size_t)b->iterations, sizeof(double))))
        return false;
    for (int p = 0; p < P_FREE; p++)
        if (!(b->record[p] = calloc((size_t)b->iterations, sizeof(double))))
            return false;
    /* The hand-written command buffer, recorded once and resubmitted. */
    VkResult r = record_fill(b, b->vk.cmd, 0);
    if (r != VK_SUCCESS) {
        fprintf(stderr, "nuvec bench submit: recording the hand-written command buffer: %s\n", nu__vk_result_name(r));
        return false;
    }
    return true;
}

static void teardown(bench *b)
{
    for (int v = 0; v < VARIANTS; v++)
        free(b->samples[v]);
    for (int p = 0; p < PHASES; p++)
        free(b->phases[p]);
    free(b->submit);
    for (int p = 0; p < P_FREE; p++)
        free(b->record[p]);
    nu_buffer_free(b->buf);
    nu_kernel_free(b->fill);
    bench_vk_fini(&b->vk);
    bench_vk_fini(&b->vk_record);
}

/* One nuvec round trip; `ph` (may be NULL) gets the phases in us. */
static bool round_nuvec(bench *b, uint32_t value, double *total_us, double ph[PHASES])
{
    static const uint32_t groups[3] = {1, 1, 1};
    uint32_t push[2] = {value, WORDS};
    nu_binding bind = {b->buf, NU_ACCESS_WRITE, 0, 0};
    nu_commands *c = NULL;
    uint64_t t0 = bench_now_ns();
    nu_status st = nu_commands_new(b->d, NU_QUEUE_COMPUTE, &c);
    if (st == NU_OK)
        st = nu_commands_dispatch(c, b->fill, groups, &bind, 1, push, sizeof push);
    uint64_t t1 = bench_now_ns();
    if (st == NU_OK)
        st = nu_commands_commit(c);
    uint64_t t2 = bench_now_ns();
    if (st == NU_OK)
        st = nu_commands_wait(c, WAIT_NS);
    uint64_t t3 = bench_now_ns();
    nu_commands_free(c);
    uint64_t t4 = bench_now_ns();
    if (st != NU_OK) {
        fail("nuvec round trip", st);
        return false;
    }
    *total_us = (double)(t4 - t0) / 1e3;
    if (ph) {
        ph[P_RECORD] = (double)(t1 - t0) / 1e3;
        ph[P_COMMIT] = (double)(t2 - t1) / 1e3;
        ph[P_WAIT] = (double)(t3 - t2) / 1e3;
        ph[P_FREE] = (double)(t4 - t3) / 1e3;
    }
    b->last_nuvec_value = value;
    return true;
}

/* The hand-written equivalent of nuvec's round trip; `ph` (may be NULL) gets its phases. */
static bool round_record(bench *b, double *total_us, double ph[PHASES])
{
    const nu__vk_device *vk = &b->d->vkd;
    bench_vk *v = &b->vk_record;
    const char *what = "vkResetCommandPool";
    uint64_t t0 = bench_now_ns();
    VkResult r = vk->vkResetCommandPool(b->d->device, v->pool, 0);
    if (r == VK_SUCCESS) {
        what = "recording";
        r = record_fill(b, v->cmd, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
    }
    uint64_t t1 = bench_now_ns();
    if (r == VK_SUCCESS) {
        what = "vkQueueSubmit";
        r = bench_vk_submit(v, v->cmd, VK_NULL_HANDLE);
    }
    uint64_t t2 = bench_now_ns();
    if (r == VK_SUCCESS) {
        what = "spinning on the timeline semaphore";
        r = bench_vk_wait(v, true);
    }
    uint64_t t3 = bench_now_ns();
    if (r != VK_SUCCESS) {
        fprintf(stderr, "nuvec bench submit: %s: %s: %s\n", variant_keys[V_RECORD], what, nu__vk_result_name(r));
        return false;
    }
    *total_us = (double)(t3 - t0) / 1e3;
    if (ph) {
        ph[P_RECORD] = (double)(t1 - t0) / 1e3;
        ph[P_COMMIT] = (double)(t2 - t1) / 1e3;
        ph[P_WAIT] = (double)(t3 - t2) / 1e3;
    }
    return true;
}

static bool round_hand(bench *b, int variant, double *total_us, double *submit_us)
{
    const nu__vk_device *vk = &b->d->vkd;
    const char *what = "vkQueueSubmit";
    uint64_t t0 = bench_now_ns();
    VkResult r;
    if (variant == V_FENCE) {
        r = bench_vk_submit(&b->vk, b->vk.cmd, b->vk.fence);
        if (r == VK_SUCCESS) {
            what = "vkWaitForFences";
            r = vk->vkWaitForFences(b->d->device, 1, &b->vk.fence, VK_TRUE, WAIT_NS);
        }
        if (r == VK_SUCCESS) {
            what = "vkResetFences";
            r = vk->vkResetFences(b->d->device, 1, &b->vk.fence);
        }
    } else {
        r = bench_vk_submit(&b->vk, b->vk.cmd, VK_NULL_HANDLE);
        if (submit_us)
            *submit_us = (double)(bench_now_ns() - t0) / 1e3;
        if (r == VK_SUCCESS) {
            what = variant == V_SPIN ? "spinning on the timeline semaphore" : "vkWaitSemaphores";
            r = bench_vk_wait(&b->vk, variant == V_SPIN);
        }
    }
    uint64_t t1 = bench_now_ns();
    if (r != VK_SUCCESS) {
        fprintf(stderr, "nuvec bench submit: %s: %s: %s\n", variant_keys[variant], what, nu__vk_result_name(r));
        return false;
    }
    *total_us = (double)(t1 - t0) / 1e3;
    return true;
}

static bool round_any(bench *b, int v, uint32_t i, double *us, double *ph)
{
    if (v == V_NUVEC)
        return round_nuvec(b, i + 1, us, ph);
    if (v == V_RECORD)
        return round_record(b, us, ph);
    return round_hand(b, v, us, v == V_SPIN && ph ? ph : NULL);
}

static bool check(bench *b, uint32_t expected, const char *who)
{
    uint32_t w[WORDS];
    nu_status st = nu_buffer_read(b->buf, 0, w, sizeof w);
    if (st != NU_OK) {
        fail("reading the buffer", st);
        return false;
    }
    for (unsigned i = 0; i < WORDS; i++) {
        if (w[i] != expected) {
            fprintf(stderr, "nuvec bench submit: %s: word %u is 0x%x, expected 0x%x\n", who, i, w[i], expected);
            return false;
        }
    }
    return true;
}

static void summarise(double *v, int n, stats *s)
{
    s->median = bench_median(v, n); /* sorts */
    s->p10 = bench_percentile_sorted(v, n, 10);
    s->p90 = bench_percentile_sorted(v, n, 90);
}

static bool measure(bench *b)
{
    double us, ph[PHASES];
    /* Warm-up, with each variant's result checked once. */
    for (int v = 0; v < VARIANTS; v++) {
        for (int i = 0; i < WARMUP; i++)
            if (!round_any(b, v, (uint32_t)i, &us, NULL))
                return false;
        if (!check(b, v == V_NUVEC ? b->last_nuvec_value : HAND_VALUE, variant_keys[v]))
            return false;
    }
    uint32_t value = 1000;
    while (b->n[VARIANTS - 1] < b->iterations) {
        for (int v = 0; v < VARIANTS; v++) {
            for (int i = 0; i < BLOCK && b->n[v] < b->iterations; i++) {
                if (!round_any(b, v, value++, &us, ph))
                    return false;
                if (v == V_NUVEC)
                    for (int p = 0; p < PHASES; p++)
                        b->phases[p][b->n[v]] = ph[p];
                if (v == V_SPIN)
                    b->submit[b->n[v]] = ph[0];
                if (v == V_RECORD)
                    for (int p = 0; p < P_FREE; p++)
                        b->record[p][b->n[v]] = ph[p];
                b->samples[v][b->n[v]++] = us;
            }
        }
    }
    if (!check(b, HAND_VALUE, "after the measurement"))
        return false;
    for (int v = 0; v < VARIANTS; v++)
        summarise(b->samples[v], b->n[v], &b->res[v]);
    for (int p = 0; p < PHASES; p++)
        b->phase_median[p] = bench_median(b->phases[p], b->n[V_NUVEC]);
    b->submit_median = bench_median(b->submit, b->n[V_SPIN]);
    for (int p = 0; p < P_FREE; p++)
        b->record_median[p] = bench_median(b->record[p], b->n[V_RECORD]);
    return true;
}

static bool judged(const bench *b) { return b->d->info.type == NU_DEVICE_DISCRETE_GPU; }

static void print_table(const bench *b)
{
    const nu_device_info *in = &b->d->info;
    char m[32], lo[32], hi[32], q[32];
    printf("nuvec bench submit on device %u: %s (%s; %s %s)\n", in->index, in->name, nu_device_type_name(in->type),
           in->driver_name, in->driver_info);
    printf("one dispatch of fill_u32 over 1 KiB (1 workgroup), recorded, submitted and waited for;\n"
           "%d round trips per variant%s, in turns of %d after %d untimed each\n\n",
           b->iterations, b->scaled ? " (scaled down from 2000: a CPU device; --iterations changes it)" : "", BLOCK,
           WARMUP);
    printf("%-40s | %9s | %9s | %9s | %11s\n", "round trip (us)", "median", "p10", "p90", "nuvec/this");
    for (int v = 0; v < VARIANTS; v++) {
        const stats *s = &b->res[v];
        printf("%-40s | %9s | %9s | %9s | %11s\n", variant_text[v], bench_us_text(m, sizeof m, s->median),
               bench_us_text(lo, sizeof lo, s->p10), bench_us_text(hi, sizeof hi, s->p90),
               v == V_NUVEC ? "" : bench_ratio_text(q, sizeof q, b->res[V_NUVEC].median / s->median));
        if (v == V_NUVEC)
            for (int p = 0; p < PHASES; p++)
                printf("  %-38s | %9s |\n", phase_text[p], bench_us_text(m, sizeof m, b->phase_median[p]));
        if (v == V_SPIN)
            printf("  %-38s | %9s |\n", "vkQueueSubmit", bench_us_text(m, sizeof m, b->submit_median));
        if (v == V_RECORD) {
            static const char *const what[P_FREE] = {"reset pool + record", "vkQueueSubmit", "spin"};
            for (int p = 0; p < P_FREE; p++)
                printf("  %-38s | %9s |\n", what[p], bench_us_text(m, sizeof m, b->record_median[p]));
        }
    }
    double us = b->res[V_NUVEC].median;
    if (judged(b))
        printf("\nTarget on %s: nuvec round trip <= %.0f us: %s (median %s us; CUDA launch + synchronise: 10 us)\n",
               in->name, TARGET_US, us <= TARGET_US ? "met" : "NOT met", bench_us_text(m, sizeof m, us));
    else
        printf("\nTarget nuvec round trip <= %.0f us: not judged on a %s (H200 target; here median %s us)\n",
               TARGET_US, nu_device_type_name(in->type), bench_us_text(m, sizeof m, us));
}

static int print_json(const bench *b)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "benchmark", "submit");
    cJSON_AddStringToObject(root, "nuvec_version", NUVEC_VERSION_STRING);
    bench_json_device(root, b->d);
    cJSON *m = cJSON_AddObjectToObject(root, "method");
    cJSON_AddStringToObject(m, "work", "fill_u32 over 1 KiB, one workgroup, private buffer");
    cJSON_AddNumberToObject(m, "iterations", b->iterations);
    cJSON_AddBoolToObject(m, "iterations_scaled_for_cpu", b->scaled);
    cJSON_AddNumberToObject(m, "block", BLOCK);
    cJSON_AddNumberToObject(m, "warmup", WARMUP);
    cJSON_AddStringToObject(m, "statistic", "median");
    cJSON *res = cJSON_AddObjectToObject(root, "results");
    for (int v = 0; v < VARIANTS; v++) {
        cJSON *o = cJSON_AddObjectToObject(res, variant_keys[v]);
        cJSON_AddStringToObject(o, "what", variant_text[v]);
        cJSON_AddNumberToObject(o, "median_us", b->res[v].median);
        cJSON_AddNumberToObject(o, "p10_us", b->res[v].p10);
        cJSON_AddNumberToObject(o, "p90_us", b->res[v].p90);
        if (v == V_NUVEC)
            for (int p = 0; p < PHASES; p++)
                cJSON_AddNumberToObject(o, phase_keys[p], b->phase_median[p]);
        else
            cJSON_AddNumberToObject(o, "nuvec_over_this", b->res[V_NUVEC].median / b->res[v].median);
        if (v == V_SPIN)
            cJSON_AddNumberToObject(o, "submit_us", b->submit_median);
        if (v == V_RECORD)
            for (int p = 0; p < P_FREE; p++)
                cJSON_AddNumberToObject(o, phase_keys[p], b->record_median[p]);
    }
    cJSON *t = cJSON_AddObjectToObject(root, "targets");
    cJSON_AddNumberToObject(t, "max_nuvec_us", TARGET_US);
    if (judged(b))
        cJSON_AddBoolToObject(t, "nuvec_us_met", b->res[V_NUVEC].median <= TARGET_US);
    else
        cJSON_AddNullToObject(t, "nuvec_us_met");
    return bench_json_print("submit", root);
}

int bench_submit(int argc, char **argv)
{
    bool json = false;
    const char *select = NULL;
    long iterations = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iterations") && i + 1 < argc) {
            if (!bench_parse_count("submit", "--iterations", argv[++i], 1, 1000000, &iterations))
                return 2;
        } else {
            int rc = bench_common_option("submit", argc, argv, &i, &json, &select, usage);
            if (rc != BENCH_OPTION_TAKEN)
                return rc;
        }
    }
    bench b;
    memset(&b, 0, sizeof b);
    if (!bench_open("submit", select, &b.d))
        return 1;
    bool cpu = b.d->info.type == NU_DEVICE_CPU;
    b.iterations = (int)(iterations ? iterations : cpu ? DEFAULT_ITERATIONS_CPU : DEFAULT_ITERATIONS_GPU);
    b.scaled = !iterations && cpu;
    int rc = 1;
    if (bench_vk_init(&b.vk, b.d, "submit", false) && bench_vk_init(&b.vk_record, b.d, "submit", true) &&
        setup(&b) && measure(&b))
        rc = json ? print_json(&b) : (print_table(&b), 0);
    else if (b.d)
        fprintf(stderr, "nuvec bench submit: failed\n");
    nu_device_wait_idle(b.d, WAIT_NS);
    teardown(&b);
    nu_device_close(b.d);
    return rc;
}
