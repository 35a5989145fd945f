/* dispatch.c: `nuvec bench dispatch`: what recording and running many tiny dispatches costs
 * through nuvec (automatic hazard tracking) against the same work written by hand in Vulkan,
 * with the same kernel, the same buffers and the minimal correct barriers, in the same run.
 *
 * The kernel has 4 bindings: the builtin fma_f32 (d = a*b + c: 0 dst, 1 a, 2 b, 3 c; push
 * {uint count}), or while nuvec has no such builtin, add_f32's SPIR-V created with a 4-binding
 * layout (binding 3 bound but unused; the recording costs the same). Each dispatch is one
 * workgroup of 256 threads over 64 floats (256-byte ranges), on private buffers. Two patterns,
 * `count` dispatches into one command buffer each:
 *   dependent    a chain: dispatch i reads x[i&1] and writes x[(i+1)&1] (b, c: two constant
 *                inputs), so each needs a barrier after the previous one: count-1 barriers.
 *   independent  dispatch i writes its own 256-byte range of `out` and reads three constant
 *                inputs (a, b, c): no barrier at all, and the dispatches may run concurrently.
 * Measured per repetition, nuvec and hand-written alternately (the first repetition is a
 * warm-up whose results are checked: the chain must leave `count` in x[count&1], each
 * independent range 2.0):
 *   record   CPU ns per dispatch: nu_commands_dispatch (checks, hazard tracking, buffer uses,
 *            push descriptors) against the hand-written vkCmdPushDescriptorSetKHR (4 buffers) +
 *            vkCmdPushConstants + vkCmdDispatch (+ the barrier by hand, where the chain needs one)
 *            after one vkCmdBindPipeline.
 *   gpu      GPU time between timestamps written at the start and the end of the command buffer
 *            (for nuvec, through its VkCommandBuffer just before commit).
 *   wall     commit + wait (nuvec) against vkQueueSubmit + a spin on a timeline semaphore, and
 *            (the same hand-written work once more) + a blocking vkWaitSemaphores; the commit /
 *            vkQueueSubmit part on its own.
 * Then what the driver's calls cost in the hand-written recording, cumulatively (vkCmdDispatch
 * alone, + push constants, + push descriptors, + a barrier): the floor under nuvec's recording.
 * Statistic: the median over repetitions. Targets (the issue's): record <= 1.2x hand-written and
 * <= 0.5 us (the H200 host: judged on discrete GPUs only), GPU time <= 1.05x hand-written,
 * barriers exactly count-1 (dependent) and 0 (independent). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_util.h"
#include "memory/buffer.h"
#include "kernel/kernel.h"
#include "kernel/builtins.h"
#include "exec/commands.h"

#define DEFAULT_COUNT_GPU 10000
#define DEFAULT_COUNT_CPU 1000 /* lavapipe takes ~100 us a dispatch */
#define DEFAULT_REPS_GPU 9
#define DEFAULT_REPS_CPU 7
#define ELEMS 64u                     /* floats per dispatch */
#define RANGE (ELEMS * sizeof(float)) /* bytes per binding */
#define TARGET_RECORD_RATIO 1.2
#define TARGET_RECORD_NS 500.0
#define TARGET_GPU_RATIO 1.05
#define WAIT_NS 60000000000ull

enum { NUVEC = 0, HAND = 1 };
enum { DEPENDENT = 0, INDEPENDENT = 1 };
static const char *const pattern_names[2] = {"dependent", "independent"};

typedef struct result {
    double record_ns[2]; /* per dispatch */
    double gpu_us[2];    /* the whole command buffer; negative: no timestamps */
    double wall_us[2];   /* commit/submit to the end of the wait */
    double commit_us[2]; /* of which nu_commands_commit / vkQueueSubmit */
    double block_wall_us; /* hand-written, waited for in a blocking vkWaitSemaphores */
    uint32_t barriers;   /* nuvec's, in each measured repetition (the largest seen) */
    uint32_t barriers_min;
    bool checked[2];     /* the warm-up's results were right */
} result;

typedef struct bench {
    nu_device *d;
    bench_vk vk;
    nu_kernel *k;
    bool fma;
    uint32_t count;
    bool count_scaled; /* the CPU default was used */
    int reps;
    VkDeviceSize stride; /* bytes between independent dispatches' ranges */
    nu_buffer *x[2], *in[3], *out;
    VkBuffer vx[2], vin[3], vout;
    VkDeviceSize ox[2], oin[3], oout;
    double *samples[2][5][2]; /* [pattern][record, gpu, wall, commit, blocking wall][impl] */
    result res[2];
    bool hand_transient; /* the hand-written pool is TRANSIENT and reset whole, like nuvec's */
    double calls_ns[4];  /* hand-written recording per dispatch: see record_calls */
} bench;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nuvec bench dispatch [--json] [--device NAME] [--count N] [--reps R]\n"
            "                            [--hand-pool transient|resettable]\n"
            "  CPU cost of recording one dispatch with 4 bindings (hazard tracking included) and GPU\n"
            "  time of N dependent (a chain: count-1 barriers) and N independent (no barrier) tiny\n"
            "  dispatches in one command buffer, nuvec against the same work written by hand in\n"
            "  Vulkan (same kernel and buffers, the minimal barriers by hand).\n"
            "  --json           one JSON document instead of the table\n"
            "  --device NAME    an index or a name substring (default: NUVEC_DEVICE, else the\n"
            "                   default order)\n"
            "  --count N        dispatches per command buffer (default %d, %d on a CPU device)\n"
            "  --reps R         measured repetitions, after one checked warm-up (default %d, %d on\n"
            "                   a CPU device); medians are reported\n"
            "  --hand-pool P    the hand-written command pool: resettable (default: RESET_COMMAND_BUFFER,\n"
            "                   vkResetCommandBuffer) or transient (TRANSIENT, vkResetCommandPool, as nuvec)\n",
            DEFAULT_COUNT_GPU, DEFAULT_COUNT_CPU, DEFAULT_REPS_GPU, DEFAULT_REPS_CPU);
}

static void fail(const char *what, nu_status st)
{
    fprintf(stderr, "nuvec bench dispatch: %s: %s: %s\n", what, nu_status_string(st), nu_error_message(NULL));
}

/* ---- setup ------------------------------------------------------------------------------- */

/* fma_f32 when nuvec has it, else add_f32's code with a 4-binding layout. */
static bool choose_kernel(bench *b)
{
    nu_kernel *k = NULL;
    if (nu_kernel_builtin(b->d, "fma_f32", &k) == NU_OK) {
        if (nu_kernel_bindings(k) == 4 && nu_kernel_push_constant_size(k) == 4) {
            b->k = k;
            b->fma = true;
            return true;
        }
        nu_kernel_free(k);
    }
    const nu__kernel_spirv *spv = nu__kernel_find("add_f32");
    if (!spv) {
        fprintf(stderr, "nuvec bench dispatch: neither fma_f32 nor add_f32 is built in\n");
        return false;
    }
    nu_kernel_desc desc = {.spirv = spv->words, .spirv_size = spv->word_count * 4, .name = "add_f32 (4 bindings)",
                           .bindings = 4, .push_constant_size = 4};
    nu_status st = nu_kernel_new(b->d, &desc, &b->k);
    if (st != NU_OK) {
        fail("creating add_f32 with 4 bindings", st);
        return false;
    }
    return true;
}

static nu_status new_buffer(bench *b, size_t size, nu_buffer **out, VkBuffer *vb, VkDeviceSize *off)
{
    nu_status st = nu_buffer_new(b->d, size, NU_STORAGE_PRIVATE, out);
    if (st == NU_OK)
        st = nu__buffer_binding(*out, vb, off);
    return st;
}

static bool setup(bench *b)
{
    VkDeviceSize align = b->d->info.min_storage_buffer_offset_alignment;
    if (!align)
        align = 1;
    b->stride = (RANGE + align - 1) / align * align;
    nu_status st = NU_OK;
    for (int i = 0; i < 2 && st == NU_OK; i++)
        st = new_buffer(b, RANGE, &b->x[i], &b->vx[i], &b->ox[i]);
    for (int i = 0; i < 3 && st == NU_OK; i++)
        st = new_buffer(b, RANGE, &b->in[i], &b->vin[i], &b->oin[i]);
    if (st == NU_OK)
        st = new_buffer(b, (size_t)(b->stride * b->count), &b->out, &b->vout, &b->oout);
    float ones[ELEMS];
    for (unsigned i = 0; i < ELEMS; i++)
        ones[i] = 1.0f;
    for (int i = 0; i < 3 && st == NU_OK; i++)
        st = nu_buffer_write(b->in[i], 0, ones, sizeof ones);
    if (st != NU_OK) {
        fail("creating the buffers", st);
        return false;
    }
    for (int p = 0; p < 2; p++)
        for (int m = 0; m < 5; m++)
            for (int i = 0; i < 2; i++) {
                b->samples[p][m][i] = calloc((size_t)b->reps, sizeof(double));
                if (!b->samples[p][m][i]) {
                    fprintf(stderr, "nuvec bench dispatch: out of host memory\n");
                    return false;
                }
            }
    return true;
}

static void teardown(bench *b)
{
    for (int p = 0; p < 2; p++)
        for (int m = 0; m < 5; m++)
            for (int i = 0; i < 2; i++)
                free(b->samples[p][m][i]);
    for (int i = 0; i < 2; i++)
        nu_buffer_free(b->x[i]);
    for (int i = 0; i < 3; i++)
        nu_buffer_free(b->in[i]);
    nu_buffer_free(b->out);
    nu_kernel_free(b->k);
    bench_vk_fini(&b->vk);
}

/* ---- recording --------------------------------------------------------------------------- */

static nu_status record_nuvec(bench *b, int pattern, nu_commands *c)
{
    static const uint32_t groups[3] = {1, 1, 1};
    const uint32_t push = ELEMS;
    nu_binding bind[4];
    nu_status st = NU_OK;
    if (pattern == DEPENDENT) {
        bind[2] = (nu_binding){b->in[0], NU_ACCESS_READ, 0, RANGE};
        bind[3] = (nu_binding){b->in[1], NU_ACCESS_READ, 0, RANGE};
        for (uint32_t i = 0; i < b->count && st == NU_OK; i++) {
            bind[0] = (nu_binding){b->x[(i + 1) & 1], NU_ACCESS_WRITE, 0, RANGE};
            bind[1] = (nu_binding){b->x[i & 1], NU_ACCESS_READ, 0, RANGE};
            st = nu_commands_dispatch(c, b->k, groups, bind, 4, &push, sizeof push);
        }
    } else {
        for (int j = 0; j < 3; j++)
            bind[j + 1] = (nu_binding){b->in[j], NU_ACCESS_READ, 0, RANGE};
        for (uint32_t i = 0; i < b->count && st == NU_OK; i++) {
            bind[0] = (nu_binding){b->out, NU_ACCESS_WRITE, (size_t)(i * b->stride), RANGE};
            st = nu_commands_dispatch(c, b->k, groups, bind, 4, &push, sizeof push);
        }
    }
    return st;
}

/* What the hand-written recording hands the driver: the four buffers' descriptor write and the
 * global memory barrier before a dependent dispatch. It points into itself: fill it in place. */
typedef struct hand_calls {
    VkDescriptorBufferInfo info[4];
    VkWriteDescriptorSet w;
    VkMemoryBarrier2 mb;
    VkDependencyInfo dep;
} hand_calls;

static void hand_calls_init(hand_calls *h)
{
    h->w = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstBinding = 0,
                                  .descriptorCount = 4, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                  .pBufferInfo = h->info};
    h->mb = (VkMemoryBarrier2){.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2,
                               .srcStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
                               .srcAccessMask = VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT,
                               .dstStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
                               .dstAccessMask = VK_ACCESS_2_SHADER_STORAGE_READ_BIT | VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT};
    h->dep = (VkDependencyInfo){.sType = VK_STRUCTURE_TYPE_DEPENDENCY_INFO, .memoryBarrierCount = 1,
                                .pMemoryBarriers = &h->mb};
}

/* Resets the hand-written command buffer (the whole pool where it is TRANSIENT, like nuvec's) and
 * begins it for one submission; *what names the call that failed. */
static VkResult begin_hand(bench *b, const char **what)
{
    const nu__vk_device *vk = &b->d->vkd;
    *what = b->hand_transient ? "vkResetCommandPool" : "vkResetCommandBuffer";
    VkResult r = b->hand_transient ? vk->vkResetCommandPool(b->d->device, b->vk.pool, 0)
                                   : vk->vkResetCommandBuffer(b->vk.cmd, 0);
    if (r == VK_SUCCESS) {
        *what = "vkBeginCommandBuffer";
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        r = vk->vkBeginCommandBuffer(b->vk.cmd, &bi);
    }
    return r;
}

/* The same work as a Vulkan programmer writes it: the pipeline bound once; per dispatch the four
 * buffers pushed, the push constants, the dispatch; in the chain, one global memory barrier
 * before each dispatch but the first (the previous dispatch wrote what this one reads, and read
 * what this one writes) -- the barrier nuvec records too. */
static void record_hand(bench *b, int pattern, VkCommandBuffer cmd)
{
    const nu__vk_device *vk = &b->d->vkd;
    const uint32_t push = ELEMS;
    VkPipelineLayout layout = b->k->layout;
    hand_calls h;
    hand_calls_init(&h);
    vk->vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, b->k->pipeline);
    if (pattern == DEPENDENT) {
        h.info[2] = (VkDescriptorBufferInfo){b->vin[0], b->oin[0], RANGE};
        h.info[3] = (VkDescriptorBufferInfo){b->vin[1], b->oin[1], RANGE};
        for (uint32_t i = 0; i < b->count; i++) {
            if (i)
                vk->vkCmdPipelineBarrier2(cmd, &h.dep);
            h.info[0] = (VkDescriptorBufferInfo){b->vx[(i + 1) & 1], b->ox[(i + 1) & 1], RANGE};
            h.info[1] = (VkDescriptorBufferInfo){b->vx[i & 1], b->ox[i & 1], RANGE};
            vk->vkCmdPushDescriptorSetKHR(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &h.w);
            vk->vkCmdPushConstants(cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof push, &push);
            vk->vkCmdDispatch(cmd, 1, 1, 1);
        }
    } else {
        for (int j = 0; j < 3; j++)
            h.info[j + 1] = (VkDescriptorBufferInfo){b->vin[j], b->oin[j], RANGE};
        for (uint32_t i = 0; i < b->count; i++) {
            h.info[0] = (VkDescriptorBufferInfo){b->vout, b->oout + i * b->stride, RANGE};
            vk->vkCmdPushDescriptorSetKHR(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &h.w);
            vk->vkCmdPushConstants(cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof push, &push);
            vk->vkCmdDispatch(cmd, 1, 1, 1);
        }
    }
}

/* ---- one run ------------------------------------------------------------------------------ */

typedef struct sample {
    double record_ns, gpu_us, wall_us, commit_us;
    uint32_t barriers;
} sample;

static bool run_nuvec(bench *b, int pattern, sample *s)
{
    nu_commands *c;
    nu_status st = nu_commands_new(b->d, NU_QUEUE_COMPUTE, &c);
    if (st != NU_OK) {
        fail("nu_commands_new", st);
        return false;
    }
    bench_vk_timestamp_begin(&b->vk, c->s.cmd);
    uint64_t t0 = bench_now_ns();
    st = record_nuvec(b, pattern, c);
    uint64_t t1 = bench_now_ns();
    if (st != NU_OK) {
        fail("nu_commands_dispatch", st);
        nu_commands_free(c);
        return false;
    }
    bench_vk_timestamp_end(&b->vk, c->s.cmd);
    s->barriers = c->hazards.barriers;
    uint64_t t2 = bench_now_ns();
    st = nu_commands_commit(c);
    uint64_t tc = bench_now_ns();
    if (st == NU_OK)
        st = nu_commands_wait(c, WAIT_NS);
    uint64_t t3 = bench_now_ns();
    nu_commands_free(c);
    if (st != NU_OK) {
        fail("nu_commands_commit/wait", st);
        return false;
    }
    s->record_ns = (double)(t1 - t0) / b->count;
    s->wall_us = (double)(t3 - t2) / 1e3;
    s->commit_us = (double)(tc - t2) / 1e3;
    double gpu = bench_vk_timestamp_ns(&b->vk);
    s->gpu_us = gpu < 0 ? -1 : gpu / 1e3;
    return true;
}

static bool run_hand(bench *b, int pattern, bool spin, sample *s)
{
    const nu__vk_device *vk = &b->d->vkd;
    VkCommandBuffer cmd = b->vk.cmd;
    const char *what;
    VkResult r = begin_hand(b, &what);
    uint64_t t0 = 0, t1 = 0, t2 = 0, tc = 0, t3 = 0;
    if (r == VK_SUCCESS) {
        bench_vk_timestamp_begin(&b->vk, cmd);
        t0 = bench_now_ns();
        record_hand(b, pattern, cmd);
        t1 = bench_now_ns();
        bench_vk_timestamp_end(&b->vk, cmd);
        what = "vkEndCommandBuffer";
        r = vk->vkEndCommandBuffer(cmd);
    }
    if (r == VK_SUCCESS) {
        what = "vkQueueSubmit";
        t2 = bench_now_ns();
        r = bench_vk_submit(&b->vk, cmd, VK_NULL_HANDLE);
        tc = bench_now_ns();
        if (r == VK_SUCCESS) {
            what = "waiting for the timeline semaphore";
            r = bench_vk_wait(&b->vk, spin);
        }
        t3 = bench_now_ns();
    }
    if (r != VK_SUCCESS) {
        fprintf(stderr, "nuvec bench dispatch: hand-written Vulkan: %s: %s\n", what, nu__vk_result_name(r));
        return false;
    }
    s->record_ns = (double)(t1 - t0) / b->count;
    s->wall_us = (double)(t3 - t2) / 1e3;
    s->commit_us = (double)(tc - t2) / 1e3;
    double gpu = bench_vk_timestamp_ns(&b->vk);
    s->gpu_us = gpu < 0 ? -1 : gpu / 1e3;
    s->barriers = pattern == DEPENDENT ? b->count - 1 : 0;
    return true;
}

/* What the driver's calls cost, cumulatively, in the hand-written recording: vkCmdDispatch alone,
 * + vkCmdPushConstants, + vkCmdPushDescriptorSetKHR (4 buffers), + a barrier, per dispatch
 * (median over repetitions of `count` dispatches). Recorded only: the command buffer is reset
 * unsubmitted (the first variants bind no buffers). */
static bool record_calls(bench *b)
{
    const nu__vk_device *vk = &b->d->vkd;
    VkCommandBuffer cmd = b->vk.cmd;
    const uint32_t push = ELEMS;
    VkPipelineLayout layout = b->k->layout;
    hand_calls h;
    hand_calls_init(&h);
    for (int j = 0; j < 3; j++)
        h.info[j + 1] = (VkDescriptorBufferInfo){b->vin[j], b->oin[j], RANGE};
    double *v = b->samples[0][0][0]; /* reused: measure() is done with it */
    for (int level = 0; level < 4; level++) {
        for (int rep = -1; rep < b->reps; rep++) {
            const char *what;
            VkResult r = begin_hand(b, &what);
            if (r != VK_SUCCESS) {
                fprintf(stderr, "nuvec bench dispatch: recording the call breakdown: %s\n", nu__vk_result_name(r));
                return false;
            }
            vk->vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, b->k->pipeline);
            uint64_t t0 = bench_now_ns();
            for (uint32_t i = 0; i < b->count; i++) {
                if (level >= 3 && i)
                    vk->vkCmdPipelineBarrier2(cmd, &h.dep);
                if (level >= 2) {
                    h.info[0] = (VkDescriptorBufferInfo){b->vout, b->oout + i * b->stride, RANGE};
                    vk->vkCmdPushDescriptorSetKHR(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &h.w);
                }
                if (level >= 1)
                    vk->vkCmdPushConstants(cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof push, &push);
                vk->vkCmdDispatch(cmd, 1, 1, 1);
            }
            uint64_t t1 = bench_now_ns();
            vk->vkEndCommandBuffer(cmd);
            if (rep >= 0)
                v[rep] = (double)(t1 - t0) / b->count;
        }
        b->calls_ns[level] = bench_median(v, b->reps);
    }
    return true;
}

/* ---- checking the warm-up's results -------------------------------------------------------- */

static bool clear_outputs(bench *b)
{
    float zero[ELEMS] = {0};
    nu_status st = NU_OK;
    for (int i = 0; i < 2 && st == NU_OK; i++)
        st = nu_buffer_write(b->x[i], 0, zero, sizeof zero);
    size_t size = (size_t)(b->stride * b->count);
    float *z = calloc(1, size);
    if (!z) {
        fprintf(stderr, "nuvec bench dispatch: out of host memory\n");
        return false;
    }
    if (st == NU_OK)
        st = nu_buffer_write(b->out, 0, z, size);
    free(z);
    if (st != NU_OK)
        fail("clearing the outputs", st);
    return st == NU_OK;
}

/* The chain leaves `count` in x[count&1]; each independent range holds 1+1 (or 1*1+1). */
static bool check_outputs(bench *b, int pattern, const char *who)
{
    nu_status st;
    if (pattern == DEPENDENT) {
        float v[ELEMS];
        if ((st = nu_buffer_read(b->x[b->count & 1], 0, v, sizeof v)) != NU_OK) {
            fail("reading the chain's result", st);
            return false;
        }
        for (unsigned i = 0; i < ELEMS; i++) {
            if (v[i] != (float)b->count) {
                fprintf(stderr, "nuvec bench dispatch: %s, dependent: element %u is %g, expected %u\n", who, i,
                        (double)v[i], b->count);
                return false;
            }
        }
        return true;
    }
    size_t size = (size_t)(b->stride * b->count);
    float *v = malloc(size);
    if (!v) {
        fprintf(stderr, "nuvec bench dispatch: out of host memory\n");
        return false;
    }
    bool ok = true;
    if ((st = nu_buffer_read(b->out, 0, v, size)) != NU_OK) {
        fail("reading the independent results", st);
        ok = false;
    }
    for (uint32_t i = 0; ok && i < b->count; i++) {
        const float *r = v + i * (b->stride / sizeof(float));
        for (unsigned j = 0; ok && j < ELEMS; j++) {
            if (r[j] != 2.0f) {
                fprintf(stderr, "nuvec bench dispatch: %s, independent: dispatch %u element %u is %g, expected 2\n",
                        who, i, j, (double)r[j]);
                ok = false;
            }
        }
    }
    free(v);
    return ok;
}

/* ---- measuring ---------------------------------------------------------------------------- */

static bool measure(bench *b)
{
    for (int p = 0; p < 2; p++) {
        b->res[p].barriers = 0;
        b->res[p].barriers_min = UINT32_MAX;
    }
    for (int rep = -1; rep < b->reps; rep++) {
        for (int p = 0; p < 2; p++) {
            for (int j = 0; j < 2; j++) {
                /* Alternate which goes first, so that neither always runs on a warmer cache. */
                int impl = (rep & 1) ? 1 - j : j;
                const char *who = impl == NUVEC ? "nuvec" : "hand-written Vulkan";
                if (rep < 0 && !clear_outputs(b))
                    return false;
                sample s;
                /* On a CPU device a spinning wait takes a core from the device's own threads. */
                bool spin = b->d->info.type != NU_DEVICE_CPU;
                if (!(impl == NUVEC ? run_nuvec(b, p, &s) : run_hand(b, p, spin, &s)))
                    return false;
                if (rep < 0) {
                    b->res[p].checked[impl] = check_outputs(b, p, who);
                    if (!b->res[p].checked[impl])
                        return false;
                    continue;
                }
                b->samples[p][0][impl][rep] = s.record_ns;
                b->samples[p][1][impl][rep] = s.gpu_us;
                b->samples[p][2][impl][rep] = s.wall_us;
                b->samples[p][3][impl][rep] = s.commit_us;
                if (impl == HAND) {
                    /* Once more, waited for in a blocking vkWaitSemaphores (as nuvec waits after
                     * its spin): how much of nuvec's wall time is the driver's blocking wait. */
                    sample sb;
                    if (!run_hand(b, p, false, &sb))
                        return false;
                    b->samples[p][4][HAND][rep] = sb.wall_us;
                }
                if (impl == NUVEC) {
                    if (s.barriers > b->res[p].barriers)
                        b->res[p].barriers = s.barriers;
                    if (s.barriers < b->res[p].barriers_min)
                        b->res[p].barriers_min = s.barriers;
                }
            }
        }
    }
    for (int p = 0; p < 2; p++) {
        result *r = &b->res[p];
        for (int i = 0; i < 2; i++) {
            r->record_ns[i] = bench_median(b->samples[p][0][i], b->reps);
            r->gpu_us[i] = b->vk.queries ? bench_median(b->samples[p][1][i], b->reps) : -1;
            r->wall_us[i] = bench_median(b->samples[p][2][i], b->reps);
            r->commit_us[i] = bench_median(b->samples[p][3][i], b->reps);
        }
        r->block_wall_us = bench_median(b->samples[p][4][HAND], b->reps);
    }
    return true;
}

/* ---- output -------------------------------------------------------------------------------- */

static uint32_t expected_barriers(const bench *b, int p) { return p == DEPENDENT ? b->count - 1 : 0; }

static bool barriers_right(const bench *b, int p)
{
    return b->res[p].barriers == expected_barriers(b, p) && b->res[p].barriers_min == expected_barriers(b, p);
}

static bool judged_absolute(const bench *b) { return b->d->info.type == NU_DEVICE_DISCRETE_GPU; }

static double ratio(double a, double h) { return a > 0 && h > 0 ? a / h : -1; }

static const char *kernel_text(const bench *b)
{
    return b->fma ? "fma_f32 (d = a*b + c; bindings dst, a, b, c)"
                  : "add_f32's SPIR-V with a 4-binding layout (dst, a, b, c; c bound but unused): no fma_f32 builtin";
}

static const char *met(bool ok) { return ok ? "met" : "NOT met"; }

static void print_table(const bench *b)
{
    const nu_device_info *in = &b->d->info;
    char a[32], h[32], q[32];
    printf("nuvec bench dispatch on device %u: %s (%s; %s %s)\n", in->index, in->name, nu_device_type_name(in->type),
           in->driver_name, in->driver_info);
    printf("kernel: %s; one workgroup of 256 threads over %u floats per dispatch\n", kernel_text(b), ELEMS);
    printf("%u dispatches per command buffer%s; median of %d repetitions after a checked warm-up\n", b->count,
           b->count_scaled ? " (scaled down from 10000: a CPU device; --count changes it)" : "", b->reps);
    printf("hand-written: vkCmdBindPipeline once, then per dispatch vkCmdPushDescriptorSetKHR (4 buffers) +\n"
           "vkCmdPushConstants + vkCmdDispatch, and in the chain one global VkMemoryBarrier2 (compute\n"
           "write -> compute read|write) before each dispatch but the first; submitted on nuvec's queue and\n"
           "waited for %s. GPU time: timestamps at both ends of the command buffer%s.\n\n",
           in->type == NU_DEVICE_CPU ? "in vkWaitSemaphores (a spin would take a core from this CPU device)"
                                     : "by spinning on a timeline semaphore",
           b->vk.queries ? "" : " (not available on this device: n/a)");
    printf("%-44s | %12s | %12s | %10s\n", "", "nuvec", "hand-written", "nuvec/hand");
    for (int p = 0; p < 2; p++) {
        const result *r = &b->res[p];
        char label[64];
        snprintf(label, sizeof label, "record one dispatch, %s (ns)", pattern_names[p]);
        snprintf(a, sizeof a, "%.1f", r->record_ns[NUVEC]);
        snprintf(h, sizeof h, "%.1f", r->record_ns[HAND]);
        printf("%-44s | %12s | %12s | %10s\n", label, a, h,
               bench_ratio_text(q, sizeof q, ratio(r->record_ns[NUVEC], r->record_ns[HAND])));
    }
    for (int p = 0; p < 2; p++) {
        const result *r = &b->res[p];
        char label[64];
        snprintf(label, sizeof label, "GPU time per dispatch, %s (us)", pattern_names[p]);
        printf("%-44s | %12s | %12s | %10s\n", label,
               bench_us_text(a, sizeof a, r->gpu_us[NUVEC] < 0 ? -1 : r->gpu_us[NUVEC] / b->count),
               bench_us_text(h, sizeof h, r->gpu_us[HAND] < 0 ? -1 : r->gpu_us[HAND] / b->count),
               bench_ratio_text(q, sizeof q, ratio(r->gpu_us[NUVEC], r->gpu_us[HAND])));
    }
    for (int p = 0; p < 2; p++) {
        const result *r = &b->res[p];
        char label[64];
        snprintf(label, sizeof label, "commit+wait of all %u, %s (us)", b->count, pattern_names[p]);
        printf("%-44s | %12s | %12s | %10s\n", label, bench_us_text(a, sizeof a, r->wall_us[NUVEC]),
               bench_us_text(h, sizeof h, r->wall_us[HAND]),
               bench_ratio_text(q, sizeof q, ratio(r->wall_us[NUVEC], r->wall_us[HAND])));
        printf("%-44s | %12s | %12s | %10s\n", "  of which commit / vkQueueSubmit (us)",
               bench_us_text(a, sizeof a, r->commit_us[NUVEC]), bench_us_text(h, sizeof h, r->commit_us[HAND]),
               bench_ratio_text(q, sizeof q, ratio(r->commit_us[NUVEC], r->commit_us[HAND])));
        printf("%-44s | %12s | %12s | %10s\n", "  hand-written, blocking vkWaitSemaphores", "",
               bench_us_text(h, sizeof h, r->block_wall_us),
               bench_ratio_text(q, sizeof q, ratio(r->wall_us[NUVEC], r->block_wall_us)));
    }
    printf("\nhand-written recording per dispatch, cumulative (ns): vkCmdDispatch %.1f, + vkCmdPushConstants\n"
           "%.1f, + vkCmdPushDescriptorSetKHR(4) %.1f, + a barrier %.1f (recorded only, never submitted)\n",
           b->calls_ns[0], b->calls_ns[1], b->calls_ns[2], b->calls_ns[3]);
    printf("\nbarriers nuvec recorded: dependent %" PRIu32 " (expected %" PRIu32 "), independent %" PRIu32
           " (expected 0)\n",
           b->res[DEPENDENT].barriers, expected_barriers(b, DEPENDENT), b->res[INDEPENDENT].barriers);
    printf("results checked (warm-up): chain = %u and every independent range = 2, nuvec and hand-written: ok\n",
           b->count);

    const result *d = &b->res[DEPENDENT], *i = &b->res[INDEPENDENT];
    double rd = ratio(d->record_ns[NUVEC], d->record_ns[HAND]), ri = ratio(i->record_ns[NUVEC], i->record_ns[HAND]);
    double worst_ns = d->record_ns[NUVEC] > i->record_ns[NUVEC] ? d->record_ns[NUVEC] : i->record_ns[NUVEC];
    printf("\nTargets on %s:\n", in->name);
    printf("  record <= %.1fx hand-written: %s (dependent %s, independent %s)\n", TARGET_RECORD_RATIO,
           met(rd <= TARGET_RECORD_RATIO && ri <= TARGET_RECORD_RATIO), bench_ratio_text(a, sizeof a, rd),
           bench_ratio_text(h, sizeof h, ri));
    if (judged_absolute(b))
        printf("  record <= %.0f ns: %s (worst %.1f ns)\n", TARGET_RECORD_NS, met(worst_ns <= TARGET_RECORD_NS),
               worst_ns);
    else
        printf("  record <= %.0f ns: not judged on a %s (H200 target; here worst %.1f ns)\n", TARGET_RECORD_NS,
               nu_device_type_name(in->type), worst_ns);
    if (b->vk.queries) {
        double gd = ratio(d->gpu_us[NUVEC], d->gpu_us[HAND]), gi = ratio(i->gpu_us[NUVEC], i->gpu_us[HAND]);
        printf("  GPU time <= %.2fx hand-written: %s (dependent %s, independent %s)\n", TARGET_GPU_RATIO,
               met(gd <= TARGET_GPU_RATIO && gi <= TARGET_GPU_RATIO), bench_ratio_text(a, sizeof a, gd),
               bench_ratio_text(h, sizeof h, gi));
    } else {
        printf("  GPU time <= %.2fx hand-written: not measured (no timestamps)\n", TARGET_GPU_RATIO);
    }
    printf("  barriers exactly %u and 0: %s\n", expected_barriers(b, DEPENDENT),
           met(barriers_right(b, DEPENDENT) && barriers_right(b, INDEPENDENT)));
}

static void add_pair(cJSON *o, const char *key, double nuvec, double hand)
{
    cJSON *x = cJSON_AddObjectToObject(o, key);
    if (nuvec >= 0)
        cJSON_AddNumberToObject(x, "nuvec", nuvec);
    else
        cJSON_AddNullToObject(x, "nuvec");
    if (hand >= 0)
        cJSON_AddNumberToObject(x, "vulkan", hand);
    else
        cJSON_AddNullToObject(x, "vulkan");
    double q = ratio(nuvec, hand);
    if (q > 0)
        cJSON_AddNumberToObject(x, "ratio", q);
    else
        cJSON_AddNullToObject(x, "ratio");
}

static int print_json(const bench *b)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "benchmark", "dispatch");
    cJSON_AddStringToObject(root, "nuvec_version", NUVEC_VERSION_STRING);
    bench_json_device(root, b->d);
    cJSON *m = cJSON_AddObjectToObject(root, "method");
    cJSON_AddStringToObject(m, "kernel", b->fma ? "fma_f32" : "add_f32 with 4 bindings");
    cJSON_AddNumberToObject(m, "bindings", 4);
    cJSON_AddNumberToObject(m, "elements_per_dispatch", ELEMS);
    cJSON_AddNumberToObject(m, "count", b->count);
    cJSON_AddBoolToObject(m, "count_scaled_for_cpu", b->count_scaled);
    cJSON_AddNumberToObject(m, "repetitions", b->reps);
    cJSON_AddStringToObject(m, "statistic", "median");
    cJSON_AddBoolToObject(m, "gpu_timestamps", b->vk.queries != VK_NULL_HANDLE);
    cJSON_AddStringToObject(m, "vulkan",
                            "vkCmdBindPipeline once; per dispatch vkCmdPushDescriptorSetKHR(4) + vkCmdPushConstants "
                            "+ vkCmdDispatch; chain: global VkMemoryBarrier2 compute write -> compute read|write "
                            "before each dispatch but the first");
    cJSON_AddStringToObject(m, "vulkan_wait",
                            b->d->info.type == NU_DEVICE_CPU ? "vkWaitSemaphores (CPU device)"
                                                             : "spin on vkGetSemaphoreCounterValue");
    cJSON_AddStringToObject(m, "vulkan_pool", b->hand_transient ? "transient, vkResetCommandPool"
                                                                 : "resettable buffer, vkResetCommandBuffer");
    cJSON *res = cJSON_AddObjectToObject(root, "results");
    cJSON *calls = cJSON_AddObjectToObject(res, "vulkan_record_ns_per_dispatch_cumulative");
    cJSON_AddNumberToObject(calls, "dispatch", b->calls_ns[0]);
    cJSON_AddNumberToObject(calls, "push_constants", b->calls_ns[1]);
    cJSON_AddNumberToObject(calls, "push_descriptors", b->calls_ns[2]);
    cJSON_AddNumberToObject(calls, "barrier", b->calls_ns[3]);
    for (int p = 0; p < 2; p++) {
        const result *r = &b->res[p];
        cJSON *o = cJSON_AddObjectToObject(res, pattern_names[p]);
        add_pair(o, "record_ns_per_dispatch", r->record_ns[NUVEC], r->record_ns[HAND]);
        add_pair(o, "gpu_us_per_dispatch", r->gpu_us[NUVEC] < 0 ? -1 : r->gpu_us[NUVEC] / b->count,
                 r->gpu_us[HAND] < 0 ? -1 : r->gpu_us[HAND] / b->count);
        add_pair(o, "gpu_us_total", r->gpu_us[NUVEC], r->gpu_us[HAND]);
        add_pair(o, "wall_us_total", r->wall_us[NUVEC], r->wall_us[HAND]);
        add_pair(o, "commit_us", r->commit_us[NUVEC], r->commit_us[HAND]);
        add_pair(o, "wall_us_total_vulkan_blocking_wait", r->wall_us[NUVEC], r->block_wall_us);
        cJSON_AddNumberToObject(o, "barriers", r->barriers);
        cJSON_AddNumberToObject(o, "barriers_expected", expected_barriers(b, p));
        cJSON_AddBoolToObject(o, "checked", r->checked[NUVEC] && r->checked[HAND]);
    }
    const result *d = &b->res[DEPENDENT], *i = &b->res[INDEPENDENT];
    double rd = ratio(d->record_ns[NUVEC], d->record_ns[HAND]), ri = ratio(i->record_ns[NUVEC], i->record_ns[HAND]);
    double worst_ns = d->record_ns[NUVEC] > i->record_ns[NUVEC] ? d->record_ns[NUVEC] : i->record_ns[NUVEC];
    cJSON *t = cJSON_AddObjectToObject(root, "targets");
    cJSON_AddNumberToObject(t, "max_record_ratio", TARGET_RECORD_RATIO);
    cJSON_AddNumberToObject(t, "max_record_ns", TARGET_RECORD_NS);
    cJSON_AddNumberToObject(t, "max_gpu_ratio", TARGET_GPU_RATIO);
    cJSON_AddBoolToObject(t, "record_ratio_met", rd <= TARGET_RECORD_RATIO && ri <= TARGET_RECORD_RATIO);
    if (judged_absolute(b))
        cJSON_AddBoolToObject(t, "record_ns_met", worst_ns <= TARGET_RECORD_NS);
    else
        cJSON_AddNullToObject(t, "record_ns_met");
    if (b->vk.queries) {
        double gd = ratio(d->gpu_us[NUVEC], d->gpu_us[HAND]), gi = ratio(i->gpu_us[NUVEC], i->gpu_us[HAND]);
        cJSON_AddBoolToObject(t, "gpu_ratio_met", gd <= TARGET_GPU_RATIO && gi <= TARGET_GPU_RATIO);
    } else {
        cJSON_AddNullToObject(t, "gpu_ratio_met");
    }
    cJSON_AddBoolToObject(t, "barriers_met", barriers_right(b, DEPENDENT) && barriers_right(b, INDEPENDENT));
    return bench_json_print("dispatch", root);
}

/* ---- the command ---------------------------------------------------------------------------- */

int bench_dispatch(int argc, char **argv)
{
    bool json = false;
    const char *select = NULL;
    long count = 0, reps = 0;
    bool hand_transient = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--count") && i + 1 < argc) {
            if (!bench_parse_count("dispatch", "--count", argv[++i], 2, 1000000, &count))
                return 2;
        } else if (!strcmp(argv[i], "--hand-pool") && i + 1 < argc) {
            i++;
            if (!strcmp(argv[i], "transient")) {
                hand_transient = true;
            } else if (strcmp(argv[i], "resettable") != 0) {
                fprintf(stderr, "nuvec bench dispatch: --hand-pool wants transient or resettable, not '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            if (!bench_parse_count("dispatch", "--reps", argv[++i], 1, 1000, &reps))
                return 2;
        } else {
            int rc = bench_common_option("dispatch", argc, argv, &i, &json, &select, usage);
            if (rc != BENCH_OPTION_TAKEN)
                return rc;
        }
    }
    bench b;
    memset(&b, 0, sizeof b);
    b.hand_transient = hand_transient;
    if (!bench_open("dispatch", select, &b.d))
        return 1;
    bool cpu = b.d->info.type == NU_DEVICE_CPU;
    b.count = (uint32_t)(count ? count : cpu ? DEFAULT_COUNT_CPU : DEFAULT_COUNT_GPU);
    b.count_scaled = !count && cpu;
    b.reps = (int)(reps ? reps : cpu ? DEFAULT_REPS_CPU : DEFAULT_REPS_GPU);
    int rc = 1;
    if (bench_vk_init(&b.vk, b.d, "dispatch", hand_transient) && choose_kernel(&b) && setup(&b) && measure(&b) &&
        record_calls(&b)) {
        bool barriers = barriers_right(&b, DEPENDENT) && barriers_right(&b, INDEPENDENT);
        rc = json ? print_json(&b) : (print_table(&b), 0);
        if (!barriers) {
            fprintf(stderr, "nuvec bench dispatch: nuvec recorded %u / %u barriers, expected %u / 0\n",
                    b.res[DEPENDENT].barriers, b.res[INDEPENDENT].barriers, expected_barriers(&b, DEPENDENT));
            rc = 1;
        }
    }
    nu_device_wait_idle(b.d, WAIT_NS);
    teardown(&b);
    nu_device_close(b.d);
    return rc;
}
