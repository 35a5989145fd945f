/* resident.c: how many workgroups of a kernel may run at once as one persistent dispatch
 * (nu_kernel_resident_groups, nuvec/kernel.h).
 *
 * Vulkan promises neither that the workgroups of a dispatch run concurrently nor that one
 * waiting for another lets it make progress, and it has no occupancy query. So the rule is
 * conservative and per driver, and every device-wide barrier is bounded (a wrong count costs a
 * timeout, kernels/graph/grid_sync.glsl):
 * - GPUs whose driver reports its compute units (nu_device_info.compute_units: NVIDIA's SMs,
 *   AMD's CUs, Arm's cores): one workgroup per unit. Any valid workgroup fits on one unit,
 *   so an otherwise idle device holds them all; several per unit would depend on registers and
 *   shared memory, which Vulkan does not expose.
 * - Mesa's lavapipe: llvmpipe runs a dispatch's workgroups on its compute thread pool, one
 *   workgroup at a time per thread, to completion; a dispatch of more workgroups than threads
 *   gives each thread a run of them in turn (lp_cs_tpool.c), so a barrier over them deadlocks.
 *   The pool has LP_NUM_THREADS threads, else one per CPU (none with one CPU: the groups then
 *   run one by one), at most LP_MAX_THREADS (16 in Mesa 22; more later): the count here is
 *   that, taking the smaller of the online and the usable CPUs.
 * - Anything else: 1 (a single workgroup needs no device barrier).
 * NUVEC_RESIDENT_GROUPS=N overrides the rule, for experiments (a timeout, not a hang, if wrong). */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernel/kernel.h"

#define LLVMPIPE_MAX_THREADS 16u

/* A positive decimal number from the environment, or 0 (unset or not one). */
static uint32_t env_count(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    return *end || n == 0 || n > UINT32_MAX ? 0 : (uint32_t)n;
}

static uint32_t llvmpipe_threads(void)
{
    uint32_t n = env_count("LP_NUM_THREADS");
    if (!n) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < online)
            online = CPU_COUNT(&set);
        n = online > 1 ? (uint32_t)online : 1;
    }
    return n < LLVMPIPE_MAX_THREADS ? n : LLVMPIPE_MAX_THREADS;
}

uint32_t nu_kernel_resident_groups(const nu_kernel *kernel)
{
    if (!kernel)
        return 0;
    const nu_device_info *in = &kernel->device->info;
    uint32_t n = env_count("NUVEC_RESIDENT_GROUPS");
    if (!n) {
        if (in->type == NU_DEVICE_CPU && strstr(in->driver_name, "llvmpipe"))
            n = llvmpipe_threads();
        else if (in->type != NU_DEVICE_CPU && in->compute_units)
            n = in->compute_units;
        else
            n = 1;
    }
    return n < in->max_workgroup_count[0] ? n : in->max_workgroup_count[0];
}
