/* graph.c: `nuvec bench graph`: graphs (nuvec/graph.h) against the same work written by hand in
 * Vulkan (recorded once, resubmitted), in one run; bench/cuda_graph.cu is the CUDA side.
 *
 * Tiny dispatches of the builtin add_f32 (z = x + y over 64 floats, one workgroup of 256 threads)
 * and fma_f32 (d = a*b + c) on private buffers, in four programs:
 *   chain        `count` dependent dispatches: x[(i+1)&1] = x[i&1] + 1 (the first reads a zero
 *                buffer, so every launch computes the same): count levels, count-1 barriers
 *   independent  `count` dispatches writing their own 256 bytes of `out`: one level, no barrier
 *   layer        the dependency structure of one 7B Llama decode layer, 15 ops: rmsnorm, the q,
 *                k and v projections (independent), rope of q and of k, attention (fma: q*k + v),
 *                the o projection, the residual add, rmsnorm, gate and up (independent), swiglu,
 *                down, the residual add: 11 levels (bench/cuda_graph.cu has its CUDA twin)
 *   one          a single dispatch
 *   persistent   the chain's `count` dependent steps in ONE dispatch (src/ops/grid.h's chain kernel:
 *                x = prev + 1 over the same 64 floats, each step reading the previous step's
 *                output one element over, so across workgroups), in a graph: with one workgroup
 *                (barrier() between steps), and with nu_kernel_resident_groups workgroups, each a
 *                slice, meeting at the device-wide barrier of kernels/graph/grid_sync.glsl
 * The hand-written side records each program once with the schedule nuvec makes (nodes by
 * dependency level, one global compute-to-compute memory barrier between levels), the pipeline
 * bound when it changes, push descriptors and push constants, and resubmits it.
 * Measured (medians over --reps repetitions, after a checked warm-up):
 *   launch CPU   nu_graph_launch of the chain (one submission) against vkQueueSubmit of the
 *                recorded chain; also launches of the chain plus one axpy_f32 whose alpha is a
 *                parameter changed before each launch (read from memory; and with
 *                NU_GRAPH_PARAMS_RECORDED, the copy recorded anew), and launches after a slot was
 *                rebound (the copy recorded anew: the slow path of slots)
 *   GPU time     timestamps at both ends of the command buffer, per dispatch (chain, independent)
 *                and per layer; per step for the persistent chains (nuvec only: it has no
 *                hand-written twin; compare with the dependent dispatch's row)
 *   round trip   nu_graph_launch + nu_graph_wait of `one` against resubmit + spin on a timeline
 *                (--iterations of them)
 * Targets (the issue's, judged on the H200 beside CUDA graphs): launch CPU <= 5 us for a
 * 1,000-dispatch graph; GPU time per dependent dispatch <= 1.2x a CUDA graph's (0.85 us), per
 * independent one >= 3x faster than a CUDA graph's (1.18 us); the layer <= 1.2x its CUDA graph;
 * the round trip <= 1.05x hand-written resubmit + spin. Here: each against hand-written Vulkan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_util.h"
#include "exec/launch.h"
#include "ops/grid.h"
#include "memory/buffer.h"
#include "kernel/kernel.h"

#define DEFAULT_COUNT 1000
#define DEFAULT_REPS_GPU 21
#define DEFAULT_REPS_CPU 5
#define DEFAULT_ITERATIONS_GPU 2000
#define DEFAULT_ITERATIONS_CPU 200
#define ELEMS 64u
#define RANGE (ELEMS * 4u)
#define WAIT_NS 60000000000ull
#define LAYER_OPS 15

enum { P_CHAIN, P_INDEP, P_LAYER, P_ONE, PROGRAMS };
static const char *const program_keys[PROGRAMS] = {"chain", "independent", "layer", "one"};

/* A dispatch: kernel 0 add (dst, a, b), 1 fma (dst, a, b, c); buffers by index, 256-byte ranges
 * at slot `off` of each. */
typedef struct op {
    int kernel;
    int buf[4];
    uint32_t off[4];
} op;

typedef struct program {
    op *ops;
    uint32_t count;
    uint32_t *order, *level; /* the hand-written schedule */
    uint32_t levels;
    nu_graph *graph;
    VkCommandBuffer cmd;
} program;

/* The layer's buffers. */
enum { B_ZERO, B_ONE, B_ONE2, B_X0, B_X1, B_OUT, L_X, L_H, L_Q, L_K, L_V, L_QR, L_KR, L_ATT, L_O, L_X2, L_H2, L_G,
       L_U, L_S, L_D, L_X3, BUFFERS };

typedef struct bench {
    nu_device *d;
    bench_vk vk;
    nu_kernel *k[2];
    uint32_t count;
    int reps, iterations;
    bool block; /* a CPU device: GPU-time runs wait blocking (a spin takes a core from the device) */
    nu_buffer *b[BUFFERS];
    VkBuffer vb[BUFFERS];
    VkDeviceSize ob[BUFFERS];
    program p[PROGRAMS];
    uint32_t slot_one; /* the chain's constant 1s, a slot */
    /* results (us) */
    double launch_cpu, launch_rebind_cpu, launch_rebind_sets_cpu, submit_cpu;
    double launch_param_cpu[2]; /* a parameter changed before each launch: [from memory, re-recorded] */
    nu_kernel *axpy;
    double gpu[PROGRAMS][2]; /* [program][nuvec, hand], whole command buffer */
    double trip[2];
    double *samples;
    /* The persistent chains: [0] one workgroup, [1] `grid_groups` workgroups. */
    nu_buffer *sync, *px;
    uint32_t grid_groups;
    bool grid_vmm;
    double gpu_persistent[2];  /* us per step; -1: not run (one workgroup resident) */
    bool persistent_timeout[2]; /* a barrier timed out (workgroups not co-resident) */
} bench;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nuvec bench graph [--json] [--device NAME] [--count N] [--reps R] [--iterations N]\n"
            "  Graphs against hand-written Vulkan recorded once: CPU cost of launching a graph of N\n"
            "  dependent tiny dispatches (one submission), GPU time per dependent and independent\n"
            "  dispatch, a graph with one Llama decode layer's dependency structure (15 tiny ops), and\n"
            "  launch + wait of a one-dispatch graph.\n"
            "  --json           one JSON document instead of the table\n"
            "  --device NAME    an index or a name substring (default: NUVEC_DEVICE, else the\n"
            "                   default order)\n"
            "  --count N        dispatches in the chain and independent graphs (default %d)\n"
            "  --reps R         measured repetitions (default %d, %d on a CPU device)\n"
            "  --iterations N   round trips of the one-dispatch graph (default %d, %d on a CPU device)\n",
            DEFAULT_COUNT, DEFAULT_REPS_GPU, DEFAULT_REPS_CPU, DEFAULT_ITERATIONS_GPU, DEFAULT_ITERATIONS_CPU);
}

static void fail(const char *what, nu_status st)
{
    fprintf(stderr, "nuvec bench graph: %s: %s: %s\n", what, nu_status_string(st), nu_error_message(NULL));
}

/* ---- programs ---------------------------------------------------------------------------- */

static int arity(const op *o) { return o->kernel ? 4 : 3; }

static bool conflict(const op *a, const op *b)
{
    for (int i = 0; i < arity(a); i++)
        for (int j = 0; j < arity(b); j++)
            if ((i == 0 || j == 0) && a->buf[i] == b->buf[j] && a->off[i] == b->off[j])
                return true;
    return false;
}

/* The schedule by hand: a node's level is one more than the highest of the earlier nodes it
 * conflicts with; nodes ordered by level. */
static bool schedule(program *p)
{
    p->level = calloc(p->count, sizeof *p->level);
    p->order = calloc(p->count, sizeof *p->order);
    if (!p->level || !p->order)
        return false;
    p->levels = 0;
    for (uint32_t i = 0; i < p->count; i++) {
        uint32_t l = 0;
        /* Chains conflict with their neighbour: scanning back from it finds the deepest soon. */
        for (uint32_t j = i; j-- > 0;)
            if (p->level[j] + 1 > l && conflict(&p->ops[i], &p->ops[j]))
                l = p->level[j] + 1;
        p->level[i] = l;
        if (l + 1 > p->levels)
            p->levels = l + 1;
    }
    uint32_t n = 0;
    for (uint32_t l = 0; l < p->levels; l++)
        for (uint32_t i = 0; i < p->count; i++)
            if (p->level[i] == l)
                p->order[n++] = i;
    return true;
}

static bool make_programs(bench *b)
{
    for (int q = 0; q < PROGRAMS; q++) {
        uint32_t n = q == P_LAYER ? LAYER_OPS : q == P_ONE ? 1 : b->count;
        b->p[q].count = n;
        if (!(b->p[q].ops = calloc(n, sizeof(op))))
            return false;
    }
    for (uint32_t i = 0; i < b->count; i++) {
        b->p[P_CHAIN].ops[i] = (op){0, {i & 1 ? B_X0 : B_X1, i ? (i & 1 ? B_X1 : B_X0) : B_ZERO, B_ONE}, {0}};
        b->p[P_INDEP].ops[i] = (op){0, {B_OUT, B_ONE, B_ONE2}, {i, 0, 0}};
    }
    static const op layer[LAYER_OPS] = {
        {0, {L_H, L_X, L_X}, {0}},         /* rmsnorm */
        {0, {L_Q, L_H, B_ONE}, {0}},       /* q, k, v projections: independent */
        {0, {L_K, L_H, B_ONE}, {0}},
        {0, {L_V, L_H, B_ONE}, {0}},
        {0, {L_QR, L_Q, B_ONE}, {0}},      /* rope q, rope k */
        {0, {L_KR, L_K, B_ONE}, {0}},
        {1, {L_ATT, L_QR, L_KR, L_V}, {0}}, /* attention */
        {0, {L_O, L_ATT, B_ONE}, {0}},     /* o projection */
        {0, {L_X2, L_X, L_O}, {0}},        /* residual */
        {0, {L_H2, L_X2, L_X2}, {0}},      /* rmsnorm */
        {0, {L_G, L_H2, B_ONE}, {0}},      /* gate, up: independent */
        {0, {L_U, L_H2, B_ONE}, {0}},
        {0, {L_S, L_G, L_U}, {0}},         /* swiglu */
        {0, {L_D, L_S, B_ONE}, {0}},       /* down */
        {0, {L_X3, L_X2, L_D}, {0}},       /* residual */
    };
    memcpy(b->p[P_LAYER].ops, layer, sizeof layer);
    b->p[P_ONE].ops[0] = (op){0, {B_OUT, B_ONE, B_ONE2}, {0}};
    for (int q = 0; q < PROGRAMS; q++)
        if (!schedule(&b->p[q]))
            return false;
    return true;
}

static VkDeviceSize stride(const bench *b)
{
    VkDeviceSize a = b->d->info.min_storage_buffer_offset_alignment;
    return (RANGE + a - 1) / a * a;
}

static bool setup(bench *b)
{
    nu_status st = nu_kernel_builtin(b->d, "add_f32", &b->k[0]);
    if (st == NU_OK)
        st = nu_kernel_builtin(b->d, "fma_f32", &b->k[1]);
    if (st == NU_OK)
        st = nu_kernel_builtin(b->d, "axpy_f32", &b->axpy);
    for (int i = 0; i < BUFFERS && st == NU_OK; i++) {
        size_t size = i == B_OUT ? (size_t)(stride(b) * b->count) : RANGE;
        st = nu_buffer_new(b->d, size, NU_STORAGE_PRIVATE, &b->b[i]);
        if (st == NU_OK)
            st = nu__buffer_binding(b->b[i], &b->vb[i], &b->ob[i]);
    }
    if (st == NU_OK)
        st = nu__grid_sync_new(b->d, &b->sync);
    if (st == NU_OK)
        st = nu_buffer_new(b->d, 2 * RANGE, NU_STORAGE_PRIVATE, &b->px);
    float v[ELEMS];
    for (int i = 0; i < BUFFERS && st == NU_OK; i++) {
        float x = i == B_ONE || i == B_ONE2 || i == L_X ? 1.0f : 0.0f;
        for (unsigned e = 0; e < ELEMS; e++)
            v[e] = x;
        st = nu_buffer_write(b->b[i], 0, v, sizeof v);
    }
    if (st != NU_OK) {
        fail("setting up", st);
        return false;
    }
    int n = b->reps > b->iterations ? b->reps : b->iterations;
    return (b->samples = calloc((size_t)n, sizeof(double))) != NULL && make_programs(b);
}

/* ---- nuvec ------------------------------------------------------------------------------ */

static nu_status build_graph(bench *b, int q, const nu_graph_options *options)
{
    program *p = &b->p[q];
    nu_commands *c;
    nu_status st = nu_graph_record(b->d, &c);
    if (st != NU_OK)
        return st;
    if (q == P_CHAIN)
        st = nu_graph_slot(c, b->b[B_ONE], &b->slot_one);
    for (uint32_t i = 0; i < p->count && st == NU_OK; i++) {
        const op *o = &p->ops[i];
        nu_binding bind[4];
        for (int j = 0; j < arity(o); j++)
            bind[j] = (nu_binding){b->b[o->buf[j]], j ? NU_ACCESS_READ : NU_ACCESS_WRITE,
                                   (size_t)(o->off[j] * stride(b)), RANGE};
        static const uint32_t groups[3] = {1, 1, 1};
        uint32_t count = ELEMS;
        st = nu_commands_dispatch(c, b->k[o->kernel], groups, bind, (uint32_t)arity(o), &count, sizeof count);
    }
    if (st == NU_OK)
        st = nu_graph_new_with(c, options, &p->graph);
    if (st != NU_OK)
        nu_commands_free(c);
    else if (nu_graph_level_count(p->graph) != p->levels) {
        fprintf(stderr, "nuvec bench graph: %s: nuvec made %u levels, the benchmark %u\n", program_keys[q],
                nu_graph_level_count(p->graph), p->levels);
        return NU_ERROR_INVALID_ARGUMENT;
    }
    return st;
}

/* The chain and one more node, y += alpha x, with alpha a parameter: read from memory, or
 * (`rerecord`, NU_GRAPH_PARAMS_RECORDED) recorded, so that a change records the copy anew. */
static nu_status build_param_graph(bench *b, bool rerecord, nu_graph **out)
{
    *out = NULL;
    nu_commands *c;
    nu_status st = nu_graph_record(b->d, &c);
    const program *p = &b->p[P_CHAIN];
    static const uint32_t groups[3] = {1, 1, 1};
    uint32_t count = ELEMS, param;
    for (uint32_t i = 0; i < p->count && st == NU_OK; i++) {
        const op *o = &p->ops[i];
        nu_binding bind[3] = {{b->b[o->buf[0]], NU_ACCESS_WRITE, 0, RANGE}, {b->b[o->buf[1]], NU_ACCESS_READ, 0, RANGE},
                              {b->b[o->buf[2]], NU_ACCESS_READ, 0, RANGE}};
        st = nu_commands_dispatch(c, b->k[0], groups, bind, 3, &count, sizeof count);
    }
    struct {
        float alpha;
        uint32_t count;
    } push = {1.0f, ELEMS};
    nu_binding bind[2] = {{b->b[L_X3], NU_ACCESS_READ_WRITE, 0, RANGE},
                          {b->b[b->count & 1 ? B_X1 : B_X0], NU_ACCESS_READ, 0, RANGE}};
    if (st == NU_OK)
        st = nu_commands_dispatch(c, b->axpy, groups, bind, 2, &push, sizeof push);
    if (st == NU_OK)
        st = nu_graph_param(c, 0, 4, &param);
    nu_graph_options options = {.params = rerecord ? NU_GRAPH_PARAMS_RECORDED : NU_GRAPH_PARAMS_FROM_MEMORY};
    if (st == NU_OK)
        st = nu_graph_new_with(c, &options, out);
    if (st != NU_OK)
        nu_commands_free(c);
    return st;
}

/* One launch + wait; *cpu_us the launch call, *gpu_us the timestamps' difference. */
static bool run_graph(bench *b, int q, double *cpu_us, double *gpu_us)
{
    uint64_t t0 = bench_now_ns();
    nu_status st = nu_graph_launch(b->p[q].graph);
    uint64_t t1 = bench_now_ns();
    if (st == NU_OK)
        st = nu_graph_wait(b->p[q].graph, WAIT_NS);
    if (st != NU_OK) {
        fail("nu_graph_launch/wait", st);
        return false;
    }
    if (cpu_us)
        *cpu_us = (double)(t1 - t0) / 1e3;
    if (gpu_us) {
        double ns = bench_vk_timestamp_ns(&b->vk);
        *gpu_us = ns < 0 ? -1 : ns / 1e3;
    }
    return true;
}

/* ---- hand-written ------------------------------------------------------------------------ */

static bool record_hand(bench *b, int q)
{
    const nu__vk_device *vk = &b->d->vkd;
    program *p = &b->p[q];
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = b->vk.pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    if (vk->vkAllocateCommandBuffers(b->d->device, &ai, &p->cmd) != VK_SUCCESS ||
        vk->vkBeginCommandBuffer(p->cmd, &bi) != VK_SUCCESS)
        return false;
    bench_vk_timestamp_begin(&b->vk, p->cmd);
    VkPipeline bound = VK_NULL_HANDLE;
    for (uint32_t n = 0; n < p->count; n++) {
        const op *o = &p->ops[p->order[n]];
        if (n && p->level[p->order[n]] != p->level[p->order[n - 1]]) {
            VkMemoryBarrier2 mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2,
                                   .srcStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
                                   .srcAccessMask = VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT,
                                   .dstStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
                                   .dstAccessMask = VK_ACCESS_2_SHADER_STORAGE_READ_BIT |
                                                    VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT};
            VkDependencyInfo dep = {.sType = VK_STRUCTURE_TYPE_DEPENDENCY_INFO, .memoryBarrierCount = 1,
                                    .pMemoryBarriers = &mb};
            vk->vkCmdPipelineBarrier2(p->cmd, &dep);
        }
        nu_kernel *k = b->k[o->kernel];
        if (bound != k->pipeline) {
            vk->vkCmdBindPipeline(p->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipeline);
            bound = k->pipeline;
        }
        VkDescriptorBufferInfo info[4];
        for (int j = 0; j < arity(o); j++)
            info[j] = (VkDescriptorBufferInfo){b->vb[o->buf[j]], b->ob[o->buf[j]] + o->off[j] * stride(b), RANGE};
        VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstBinding = 0,
                                  .descriptorCount = (uint32_t)arity(o),
                                  .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = info};
        vk->vkCmdPushDescriptorSetKHR(p->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 1, &w);
        uint32_t count = ELEMS;
        vk->vkCmdPushConstants(p->cmd, k->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &count);
        vk->vkCmdDispatch(p->cmd, 1, 1, 1);
    }
    bench_vk_timestamp_end(&b->vk, p->cmd);
    return vk->vkEndCommandBuffer(p->cmd) == VK_SUCCESS;
}

/* `spin`: wait by spinning on the timeline (else blocking in vkWaitSemaphores). */
static bool run_hand(bench *b, int q, bool spin, double *cpu_us, double *gpu_us)
{
    uint64_t t0 = bench_now_ns();
    VkResult r = bench_vk_submit(&b->vk, b->p[q].cmd, VK_NULL_HANDLE);
    uint64_t t1 = bench_now_ns();
    if (r == VK_SUCCESS)
        r = bench_vk_wait(&b->vk, spin);
    if (r != VK_SUCCESS) {
        fprintf(stderr, "nuvec bench graph: hand-written Vulkan: %s\n", nu__vk_result_name(r));
        return false;
    }
    if (cpu_us)
        *cpu_us = (double)(t1 - t0) / 1e3;
    if (gpu_us) {
        double ns = bench_vk_timestamp_ns(&b->vk);
        *gpu_us = ns < 0 ? -1 : ns / 1e3;
    }
    return true;
}

/* ---- checks and measurements ----------------------------------------------------------- */

static bool expect(bench *b, int buf, size_t offset, float want, const char *who, int q)
{
    float v[ELEMS];
    nu_status st = nu_buffer_read(b->b[buf], offset, v, sizeof v);
    if (st != NU_OK) {
        fail("reading a result", st);
        return false;
    }
    for (unsigned e = 0; e < ELEMS; e++)
        if (v[e] != want) {
            fprintf(stderr, "nuvec bench graph: %s %s: element %u is %g, expected %g\n", who, program_keys[q], e,
                    v[e], want);
            return false;
        }
    return true;
}

static bool check(bench *b, int q, const char *who)
{
    switch (q) {
    case P_CHAIN:
        return expect(b, b->count & 1 ? B_X1 : B_X0, 0, (float)b->count, who, q);
    case P_INDEP:
        return expect(b, B_OUT, 0, 2, who, q) && expect(b, B_OUT, (size_t)((b->count - 1) * stride(b)), 2, who, q);
    case P_LAYER:
        return expect(b, L_X3, 0, 108, who, q); /* h 2, q k v 3, rope 4, att 19, o 20, x2 21, h2 42, g u 43, s 86, d 87 */
    default:
        return expect(b, B_OUT, 0, 2, who, q);
    }
}

static bool clear(bench *b)
{
    nu_commands *c;
    nu_status st = nu_commands_new(b->d, NU_QUEUE_COMPUTE, &c);
    for (int i = B_X0; i < BUFFERS && st == NU_OK; i++)
        if (i != L_X)
            st = nu_commands_fill(c, b->b[i], 0, nu_buffer_size(b->b[i]), 0);
    if (st == NU_OK)
        st = nu_commands_commit(c);
    if (st == NU_OK)
        st = nu_commands_wait(c, WAIT_NS);
    nu_commands_free(c);
    if (st != NU_OK)
        fail("clearing the outputs", st);
    return st == NU_OK;
}

/* The persistent chains: one graph with one dispatch of `groups` workgroups running the chain's
 * `count` steps; GPU time per step (timestamps as for the other programs), results checked
 * after the warm-up and the sync words after every launch (a timeout marks the row). */
static bool measure_persistent(bench *b, int v, uint32_t groups)
{
    nu_commands *c;
    nu_graph *g = NULL;
    nu__chain ch = {.in = b->b[B_ZERO], .b = b->b[B_ONE], .x = b->px, .sync = b->sync, .count = ELEMS,
                    .steps = b->count, .shift = 1, .groups = groups};
    nu_status st = nu_graph_record(b->d, &c);
    if (st == NU_OK) {
        st = nu__op_chain(c, &ch);
        if (st == NU_OK)
            st = nu_graph_new(c, &g); /* consumes c */
        if (st != NU_OK)
            nu_commands_free(c);
    }
    if (st != NU_OK) {
        fail("building the persistent chain", st);
        return false;
    }
    nu__graph_set_timestamps(g, b->vk.queries);
    bool ok = true;
    for (int r = -1; r < b->reps && ok; r++) {
        st = nu_graph_launch(g);
        if (st == NU_OK)
            st = nu_graph_wait(g, WAIT_NS);
        if (st == NU_OK)
            st = nu__grid_check(b->sync);
        if (st == NU_ERROR_TIMEOUT) {
            fprintf(stderr, "nuvec bench graph: persistent chain, %u workgroups: %s\n", groups, nu_error_message(b->d));
            b->persistent_timeout[v] = true;
            break;
        }
        if (st != NU_OK) {
            fail("launching the persistent chain", st);
            ok = false;
        } else if (r < 0) {
            static const char *const who[2] = {"nuvec (persistent, 1 workgroup)", "nuvec (persistent, device barrier)"};
            ok = expect(b, B_ZERO, 0, 0, who[v], P_CHAIN); /* the input is untouched */
            float x[ELEMS];
            if (ok && nu_buffer_read(b->px, (size_t)((b->count - 1) % 2) * RANGE, x, sizeof x) == NU_OK) {
                for (unsigned e = 0; e < ELEMS && ok; e++)
                    if (x[e] != (float)b->count) {
                        fprintf(stderr, "nuvec bench graph: %s: element %u is %g, expected %u\n", who[v], e, x[e],
                                b->count);
                        ok = false;
                    }
            } else
                ok = false;
        } else {
            double ns = bench_vk_timestamp_ns(&b->vk);
            b->samples[r] = ns < 0 ? -1 : ns / 1e3;
        }
    }
    if (ok && !b->persistent_timeout[v])
        b->gpu_persistent[v] = b->samples[0] < 0 ? -1 : bench_median(b->samples, b->reps) / b->count;
    nu_graph_free(g);
    return ok;
}

static bool measure(bench *b)
{
    /* Persistent chains first (their rows stay n/a where the device holds one workgroup). */
    nu_kernel *chain_kernel;
    nu_status pst = nu__op_chain_kernel(b->d, &chain_kernel);
    if (pst != NU_OK) {
        fail("opening the chain kernel", pst);
        return false;
    }
    b->grid_groups = nu_kernel_resident_groups(chain_kernel);
    b->grid_vmm = nu__grid_vmm(b->d);
    b->gpu_persistent[0] = b->gpu_persistent[1] = -1;
    if (!measure_persistent(b, 0, 1) || (b->grid_groups > 1 && !measure_persistent(b, 1, b->grid_groups)))
        return false;
    for (int q = 0; q < PROGRAMS; q++) {
        nu_status st = build_graph(b, q, NULL);
        if (st != NU_OK) {
            fail("building a graph", st);
            return false;
        }
        if (!record_hand(b, q)) {
            fprintf(stderr, "nuvec bench graph: recording the hand-written %s failed\n", program_keys[q]);
            return false;
        }
        nu__graph_set_timestamps(b->p[q].graph, b->vk.queries);
        /* Checked warm-ups, each side on cleared outputs. */
        if (!clear(b) || !run_graph(b, q, NULL, NULL) || !check(b, q, "nuvec") || !clear(b) ||
            !run_hand(b, q, !b->block, NULL, NULL) || !check(b, q, "hand-written"))
            return false;
        for (int side = 0; side < 2; side++) {
            for (int r = 0; r < b->reps; r++)
                if (!(side ? run_hand(b, q, !b->block, NULL, &b->samples[r]) : run_graph(b, q, NULL, &b->samples[r])))
                    return false;
            b->gpu[q][side] = b->samples[0] < 0 ? -1 : bench_median(b->samples, b->reps);
        }
    }
    /* Launch CPU cost of the chain: every copy recorded first (launches that change nothing). */
    program *chain = &b->p[P_CHAIN];
    nu__graph_set_timestamps(chain->graph, VK_NULL_HANDLE);
    for (int i = 0; i < 4; i++)
        if (!run_graph(b, P_CHAIN, NULL, NULL))
            return false;
    for (int r = 0; r < b->reps; r++)
        if (!run_graph(b, P_CHAIN, &b->samples[r], NULL))
            return false;
    b->launch_cpu = bench_median(b->samples, b->reps);
    for (int r = 0; r < b->reps; r++) {
        nu_status st = nu_graph_bind(chain->graph, b->slot_one, b->b[r & 1 ? B_ONE : B_ONE2], 0);
        if (st != NU_OK) {
            fail("nu_graph_bind", st);
            return false;
        }
        if (!run_graph(b, P_CHAIN, &b->samples[r], NULL))
            return false;
    }
    b->launch_rebind_cpu = bench_median(b->samples, b->reps);
    if (!check(b, P_CHAIN, "nuvec (rebound)"))
        return false;
    /* Rebinding through descriptor sets (NU_GRAPH_SLOTS_SETS), where the device has them. */
    b->launch_rebind_sets_cpu = -1;
    if (b->d->has_update_after_bind) {
        nu_graph *keep = chain->graph;
        nu_status st = build_graph(b, P_CHAIN, &(nu_graph_options){.slots = NU_GRAPH_SLOTS_SETS});
        for (int r = -4; r < b->reps && st == NU_OK; r++) {
            st = nu_graph_bind(chain->graph, b->slot_one, b->b[r & 1 ? B_ONE : B_ONE2], 0);
            uint64_t t0 = bench_now_ns();
            if (st == NU_OK)
                st = nu_graph_launch(chain->graph);
            uint64_t t1 = bench_now_ns();
            if (st == NU_OK)
                st = nu_graph_wait(chain->graph, WAIT_NS);
            if (r >= 0)
                b->samples[r] = (double)(t1 - t0) / 1e3;
        }
        if (st == NU_OK && !check(b, P_CHAIN, "nuvec (rebound through sets)"))
            st = NU_ERROR_VULKAN;
        nu_graph_free(chain->graph);
        chain->graph = keep;
        if (st != NU_OK) {
            fail("rebinding through descriptor sets", st);
            return false;
        }
        b->launch_rebind_sets_cpu = bench_median(b->samples, b->reps);
    }
    for (int r = 0; r < b->reps; r++)
        if (!run_hand(b, P_CHAIN, !b->block, &b->samples[r], NULL))
            return false;
    b->submit_cpu = bench_median(b->samples, b->reps);
    /* A parameter changed before every launch: from memory, and recorded anew. */
    for (int way = 0; way < 2; way++) {
        nu_graph *g;
        nu_status st = build_param_graph(b, way == 1, &g);
        for (int r = -4; r < b->reps && st == NU_OK; r++) {
            float alpha = (float)(r & 3);
            st = nu_graph_set_param(g, 0, &alpha, sizeof alpha);
            uint64_t t0 = bench_now_ns();
            if (st == NU_OK)
                st = nu_graph_launch(g);
            uint64_t t1 = bench_now_ns();
            if (st == NU_OK)
                st = nu_graph_wait(g, WAIT_NS);
            if (r >= 0)
                b->samples[r] = (double)(t1 - t0) / 1e3;
        }
        nu_graph_free(g);
        if (st != NU_OK) {
            fail("launching the graph with a parameter", st);
            return false;
        }
        b->launch_param_cpu[way] = bench_median(b->samples, b->reps);
    }
    /* Round trips of the one-dispatch graph, taking turns in blocks. */
    nu__graph_set_timestamps(b->p[P_ONE].graph, VK_NULL_HANDLE);
    double *s[2] = {calloc((size_t)b->iterations, sizeof(double)), calloc((size_t)b->iterations, sizeof(double))};
    if (!s[0] || !s[1]) {
        free(s[0]);
        free(s[1]);
        return false;
    }
    bool ok = true;
    for (int i = 0; i < b->iterations && ok; i += 50)
        for (int side = 0; side < 2 && ok; side++)
            for (int j = i; j < i + 50 && j < b->iterations && ok; j++) {
                uint64_t t0 = bench_now_ns();
                ok = side ? run_hand(b, P_ONE, true, NULL, NULL) : run_graph(b, P_ONE, NULL, NULL);
                s[side][j] = (double)(bench_now_ns() - t0) / 1e3;
            }
    for (int side = 0; side < 2 && ok; side++)
        b->trip[side] = bench_median(s[side], b->iterations);
    free(s[0]);
    free(s[1]);
    return ok;
}

/* ---- output ------------------------------------------------------------------------------ */

static double ratio(double a, double h) { return a > 0 && h > 0 ? a / h : -1; }

static void row(const char *what, double nuvec, double hand, double per)
{
    char r[32], x[32], y[32];
    if (nuvec < 0 || hand < 0) {
        printf("%-62s | %10s | %10s | %7s\n", what, "n/a", "n/a", "");
        return;
    }
    printf("%-62s | %10s | %10s | %7s\n", what, bench_us_text(x, sizeof x, nuvec / per),
           bench_us_text(y, sizeof y, hand / per), bench_ratio_text(r, sizeof r, ratio(nuvec, hand)));
}

/* A row with nuvec's value only (the persistent chains have no hand-written twin). */
static void persistent_row(const char *what, double us, bool timed_out)
{
    char x[32];
    printf("%-62s | %10s | %10s | %7s\n", what, timed_out ? "timed out" : us < 0 ? "n/a" : bench_us_text(x, sizeof x, us),
           "n/a", "");
}

static void print_table(const bench *b)
{
    printf("nuvec bench graph on %s: add_f32 / fma_f32 over %u floats (1 workgroup) per dispatch, private\n"
           "buffers; hand-written Vulkan recorded once with the same schedule and resubmitted; medians of\n"
           "%d repetitions (round trips: %d). GPU time: timestamps at both ends of the command buffer%s.\n\n",
           b->d->info.name, ELEMS, b->reps, b->iterations,
           b->block ? " (hand-written work waited for in vkWaitSemaphores there: a spin takes a core from a CPU device)"
                    : "");
    printf("%-62s | %10s | %10s | %7s\n", "us", "nuvec", "Vulkan", "ratio");
    char what[96];
    snprintf(what, sizeof what, "launch CPU: %u-dispatch chain, one submission", b->count);
    row(what, b->launch_cpu, b->submit_cpu, 1);
    row("launch CPU, a parameter changed (read from memory)", b->launch_param_cpu[0], b->submit_cpu, 1);
    row("launch CPU, a parameter changed (copy re-recorded)", b->launch_param_cpu[1], b->submit_cpu, 1);
    row("launch CPU, a slot rebound (copy re-recorded)", b->launch_rebind_cpu, b->submit_cpu, 1);
    row("launch CPU, a slot rebound (descriptor sets, opt-in)", b->launch_rebind_sets_cpu, b->submit_cpu, 1);
    snprintf(what, sizeof what, "GPU per dependent dispatch (%u chained)", b->count);
    row(what, b->gpu[P_CHAIN][0], b->gpu[P_CHAIN][1], b->count);
    snprintf(what, sizeof what, "GPU per dependent step, one persistent dispatch (1 workgroup)");
    persistent_row(what, b->gpu_persistent[0], b->persistent_timeout[0]);
    snprintf(what, sizeof what, "  (%u workgroups, device barrier)", b->grid_groups);
    persistent_row(what, b->gpu_persistent[1], b->persistent_timeout[1]);
    snprintf(what, sizeof what, "GPU per independent dispatch (%u)", b->count);
    row(what, b->gpu[P_INDEP][0], b->gpu[P_INDEP][1], b->count);
    snprintf(what, sizeof what, "GPU per decode layer (%d ops, %u levels)", LAYER_OPS, b->p[P_LAYER].levels);
    row(what, b->gpu[P_LAYER][0], b->gpu[P_LAYER][1], 1);
    row("launch + wait, one-dispatch graph (vs resubmit + spin)", b->trip[0], b->trip[1], 1);
    printf("\nTargets (the issue's, on the H200; CUDA's side is bench/cuda_graph.cu): launch CPU <= 5 us\n"
           "(here %.2f us for %u dispatches); dependent <= 1.2x a CUDA graph's 0.85 us, independent >= 3x\n"
           "faster than its 1.18 us; the layer <= 1.2x its CUDA graph; round trip <= 1.05x resubmit + spin\n"
           "(here %.2fx). Results checked against the expected values (warm-ups, and the rebound chain).\n",
           b->launch_cpu, b->count, ratio(b->trip[0], b->trip[1]));
    printf("Persistent chains: %u steps in one dispatch (%s memory model variant); per step against nuvec's\n"
           "dependent dispatch: %.2fx (1 workgroup), %.2fx (%u workgroups; 'n/a' where one is resident,\n"
           "'timed out' where a barrier gave up: workgroups not co-resident).\n",
           b->count, b->grid_vmm ? "Vulkan" : "GLSL450", ratio(b->gpu_persistent[0], b->gpu[P_CHAIN][0] / b->count),
           ratio(b->gpu_persistent[1], b->gpu[P_CHAIN][0] / b->count), b->grid_groups);
}

static void add_pair(cJSON *o, const char *key, double nuvec, double hand)
{
    cJSON *p = cJSON_AddObjectToObject(o, key);
    cJSON_AddNumberToObject(p, "nuvec_us", nuvec);
    cJSON_AddNumberToObject(p, "vulkan_us", hand);
    cJSON_AddNumberToObject(p, "ratio", ratio(nuvec, hand));
}

static int print_json(const bench *b)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return 1;
    cJSON_AddStringToObject(root, "benchmark", "graph");
    bench_json_device(root, b->d);
    cJSON *m = cJSON_AddObjectToObject(root, "method");
    cJSON_AddNumberToObject(m, "count", b->count);
    cJSON_AddNumberToObject(m, "repetitions", b->reps);
    cJSON_AddNumberToObject(m, "iterations", b->iterations);
    cJSON_AddNumberToObject(m, "elements_per_dispatch", ELEMS);
    cJSON_AddNumberToObject(m, "layer_ops", LAYER_OPS);
    cJSON_AddNumberToObject(m, "layer_levels", b->p[P_LAYER].levels);
    cJSON_AddBoolToObject(m, "gpu_timestamps", b->vk.queries != VK_NULL_HANDLE);
    cJSON_AddNumberToObject(m, "persistent_steps", b->count);
    cJSON_AddNumberToObject(m, "persistent_groups", b->grid_groups);
    cJSON_AddBoolToObject(m, "persistent_vulkan_memory_model", b->grid_vmm);
    cJSON *r = cJSON_AddObjectToObject(root, "results");
    add_pair(r, "launch_cpu", b->launch_cpu, b->submit_cpu);
    add_pair(r, "launch_cpu_param_from_memory", b->launch_param_cpu[0], b->submit_cpu);
    add_pair(r, "launch_cpu_param_rerecorded", b->launch_param_cpu[1], b->submit_cpu);
    add_pair(r, "launch_cpu_rebound", b->launch_rebind_cpu, b->submit_cpu);
    add_pair(r, "launch_cpu_rebound_sets", b->launch_rebind_sets_cpu, b->submit_cpu);
    add_pair(r, "gpu_per_dependent_dispatch", b->gpu[P_CHAIN][0] / b->count, b->gpu[P_CHAIN][1] / b->count);
    for (int v = 0; v < 2; v++) {
        cJSON *p = cJSON_AddObjectToObject(r, v ? "gpu_per_dependent_step_persistent_grid"
                                                : "gpu_per_dependent_step_persistent_one_group");
        cJSON_AddNumberToObject(p, "nuvec_us", b->gpu_persistent[v]);
        cJSON_AddNumberToObject(p, "groups", v ? b->grid_groups : 1);
        cJSON_AddBoolToObject(p, "timed_out", b->persistent_timeout[v]);
        cJSON_AddNumberToObject(p, "ratio_to_dependent_dispatch",
                                ratio(b->gpu_persistent[v], b->gpu[P_CHAIN][0] / b->count));
    }
    add_pair(r, "gpu_per_independent_dispatch", b->gpu[P_INDEP][0] / b->count, b->gpu[P_INDEP][1] / b->count);
    add_pair(r, "gpu_per_layer", b->gpu[P_LAYER][0], b->gpu[P_LAYER][1]);
    add_pair(r, "round_trip", b->trip[0], b->trip[1]);
    return bench_json_print("graph", root);
}

static void teardown(bench *b)
{
    for (int q = 0; q < PROGRAMS; q++) {
        nu_graph_free(b->p[q].graph);
        free(b->p[q].ops);
        free(b->p[q].order);
        free(b->p[q].level);
    }
    for (int i = 0; i < BUFFERS; i++)
        nu_buffer_free(b->b[i]);
    nu_kernel_free(b->k[0]);
    nu_kernel_free(b->k[1]);
    nu_kernel_free(b->axpy);
    nu_buffer_free(b->sync);
    nu_buffer_free(b->px);
    free(b->samples);
    bench_vk_fini(&b->vk);
}

int bench_graph(int argc, char **argv)
{
    bool json = false;
    const char *select = NULL;
    long count = 0, reps = 0, iterations = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--count") && i + 1 < argc) {
            if (!bench_parse_count("graph", "--count", argv[++i], 2, 100000, &count))
                return 2;
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            if (!bench_parse_count("graph", "--reps", argv[++i], 1, 10000, &reps))
                return 2;
        } else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) {
            if (!bench_parse_count("graph", "--iterations", argv[++i], 1, 1000000, &iterations))
                return 2;
        } else {
            int rc = bench_common_option("graph", argc, argv, &i, &json, &select, usage);
            if (rc != BENCH_OPTION_TAKEN)
                return rc;
        }
    }
    bench b;
    memset(&b, 0, sizeof b);
    if (!bench_open("graph", select, &b.d))
        return 1;
    bool cpu = b.d->info.type == NU_DEVICE_CPU;
    b.block = cpu;
    b.count = (uint32_t)(count ? count : DEFAULT_COUNT);
    b.reps = (int)(reps ? reps : cpu ? DEFAULT_REPS_CPU : DEFAULT_REPS_GPU);
    b.iterations = (int)(iterations ? iterations : cpu ? DEFAULT_ITERATIONS_CPU : DEFAULT_ITERATIONS_GPU);
    int rc = 1;
    if (bench_vk_init(&b.vk, b.d, "graph", false) && setup(&b) && measure(&b))
        rc = json ? print_json(&b) : (print_table(&b), 0);
    nu_device_wait_idle(b.d, WAIT_NS);
    teardown(&b);
    nu_device_close(b.d);
    return rc;
}
