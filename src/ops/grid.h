/* grid.h: persistent dispatches, the host side of kernels/graph/grid_sync.glsl's device-wide
 * barrier (grid.c): the sync words, the spin bound, the check once the work completed, and the
 * chain kernel that measures and tests the mechanism (`nuvec bench graph`, tests/test_grid.c).
 *
 * A persistent dispatch is one dispatch of at most nu_kernel_resident_groups() workgroups that
 * runs several dependent steps, its workgroups meeting at a barrier between them: one dispatch
 * instead of a dispatch and a pipeline barrier per step. Where it is not known safe to have
 * more than one workgroup resident, it runs as one workgroup (barrier() between steps); the
 * other fallback is the ordinary one, a dispatch per step with the graph's level schedule. */
#ifndef NU_OPS_GRID_H
#define NU_OPS_GRID_H

#include <stdbool.h>
#include <stdint.h>

#include "nuvec/buffer.h"
#include "nuvec/command.h"
#include "vk/device.h"

/* Bytes of sync words (grid_sync.glsl's NuGridSync: arrived, generation, error, spare). */
#define NU__GRID_SYNC_SIZE 16u

/* A private buffer of zeroed sync words. It may serve any number of persistent dispatches one
 * after another (bound read-write, hazard tracking orders those that share it, which must not
 * run at once anyway); after a timeout, nu__grid_check zeroes it again. */
nu_status nu__grid_sync_new(nu_device *d, nu_buffer **out);

/* The polls a waiting workgroup makes before it gives up: 2^22 on GPUs (about a second at a few
 * hundred ns an L2 round trip), 2^25 on CPU devices (a lavapipe thread may be descheduled for
 * tens of ms on a loaded machine while the others poll). NUVEC_GRID_SPIN=N overrides it. */
uint32_t nu__grid_spin_default(const nu_device *d);

/* Whether persistent kernels use the Vulkan memory model variant on this device: only when asked
 * (NUVEC_GRID_SYNC=vmm) and where nuvec enabled vulkanMemoryModel (with cooperative matrices,
 * vk/logical.c). The default is the GLSL450 variant (coherent buffers and fences), valid on
 * every device and the one verified on lavapipe; the other is unverified: lavapipe (with the
 * feature forced on) gave wrong results with it, which may be lavapipe's or the variant's. */
bool nu__grid_vmm(const nu_device *d);

/* After the GPU work that used `sync` completed: NU_OK, or NU_ERROR_TIMEOUT ("grid barrier timed
 * out: workgroups not co-resident") when a barrier gave up (the results are not valid), and
 * then the words are zeroed for their next use. Reading fails as nu_buffer_read does
 * (NU_ERROR_BUFFER_IN_USE while GPU work on it is in flight). */
nu_status nu__grid_check(nu_buffer *sync);

/* The chain (kernels/graph/chain_body.glsl): `steps` dependent steps over `count` floats,
 *     x_s[i] = x_{s-1}[(i + shift) % count] + b[i],  x_{-1} = in,
 * in ONE dispatch of `groups` workgroups, step s into floats [(s % 2) * count, +count) of x. */
typedef struct nu__chain {
    nu_buffer *in, *b;       /* count floats each (read) */
    nu_buffer *x;            /* 2 * count floats (read-write): the result is half (steps - 1) % 2 */
    nu_buffer *sync;         /* nu__grid_sync_new's (read-write) */
    uint32_t count, steps, shift;
    uint32_t groups;         /* workgroups: 1 .. nu_kernel_resident_groups of the kernel */
    uint32_t sync_groups;    /* workgroups each barrier waits for (0: groups); more than groups
                                only to see the timeout work */
    uint32_t spin_limit;     /* 0: nu__grid_spin_default */
} nu__chain;

/* Records the chain into `c` (a command buffer or a graph recording) as one dispatch. Refused
 * (NU_ERROR_INVALID_ARGUMENT, nothing recorded): NULL arguments, count, steps or groups 0,
 * shift >= count, groups beyond nu_kernel_resident_groups, sync_groups below groups; too small
 * buffers are NU_ERROR_OUT_OF_RANGE (nu_commands_dispatch). */
nu_status nu__op_chain(nu_commands *c, const nu__chain *chain);

/* The chain's kernel on this device (the variant nu__grid_vmm picks), for
 * nu_kernel_resident_groups. */
nu_status nu__op_chain_kernel(nu_device *d, nu_kernel **out);

#endif
