// graph/grid_sync.glsl: a device-wide step barrier for persistent dispatches ("megakernels"):
// the workgroups of one dispatch run a sequence of steps and wait for each other between them,
// so that a chain of dependent tiny ops costs one dispatch instead of one dispatch and one
// pipeline barrier per op.
//
// Use: define NU_GRID_BINDING (the sync buffer's binding), NU_GRID_CPU_ID (a specialisation
// constant id for the CPU-device polling, see below) and, for the Vulkan memory model path,
// NU_GRID_VMM, then include this. Declare every buffer that one step writes and a later
// step reads in another workgroup with NU_GRID_SHARED. Between steps call
//     if (!nu_grid_sync(groups, spin_limit)) return;
// from uniform control flow (every invocation of every workgroup, the same number of times).
// The host side is src/ops/grid.h: the sync buffer (16 bytes, zeroed once), the number of
// workgroups that may be resident at once (nu_kernel_resident_groups), the spin bound and the
// error check after the work completed.
//
// What it rests on.
// - Co-residency and forward progress: Vulkan guarantees neither that the workgroups of one
//   dispatch run at the same time nor that a workgroup waiting on another lets it progress. A
//   barrier over more workgroups than the device holds at once deadlocks, so the host dispatches
//   at most nu_kernel_resident_groups() workgroups (a conservative count, from the driver's
//   compute-unit count where it gives one), and every wait is bounded: after `spin_limit` polls
//   a waiting workgroup sets the sticky error word and leaves, every other workgroup sees the
//   word and leaves too, and the host reports NU_ERROR_TIMEOUT ("grid barrier timed out"). A
//   wrong guess costs one spin bound of GPU time, never a hang. A single workgroup needs no
//   device barrier: nu_grid_sync with groups 1 is a workgroup barrier.
// - Memory ordering, Vulkan memory model (NU_GRID_VMM; the device has vulkanMemoryModel, which
//   nuvec enables with cooperative matrices; opt-in, NUVEC_GRID_SYNC=vmm, and not yet verified on
//   a device: lavapipe with the feature forced on gave wrong results, its fault or this one's): a workgroup's step writes are ordered before its
//   first invocation's arrival by a control barrier with queue-family memory scope and
//   acquire-release semantics that also make the buffer writes available; the arrival is an
//   acquire-release atomic add at queue-family scope (all invocations of a dispatch are in one
//   queue family), the last arrival's generation increment a release, a waiter's generation
//   load an acquire that makes them visible, then a control barrier hands that on to its
//   workgroup. The arrivals form one release sequence (read-modify-writes continue it), so the
//   last arrival synchronizes with every earlier one and every waiter with the last: each step's
//   writes happen before every workgroup's next step. Data buffers are nonprivate (the model
//   orders only non-private accesses by inter-invocation synchronization).
// - Memory ordering, GLSL450 model (without NU_GRID_VMM): the same protocol with Coherent data
//   buffers (Vulkan maps Coherent to device-scope availability and visibility on each access),
//   memoryBarrierBuffer() (OpMemoryBarrier, device scope, acquire-release on uniform memory)
//   before the arrival and after the wait, and atomics for every access to the sync words
//   (atomicAdd(x, 0) reads; GLSL450 atomics are relaxed, hence the explicit fences).
// - Reuse without resets: the last arrival takes the barrier's `groups` arrivals off the count
//   before it advances the generation (a release, so no workgroup arrives at the next barrier
//   before the count is back). A waiter reads the generation before it arrives (ordered by the
//   arrival's release) and waits for it to change, so the generation's value does not matter:
//   the words stay valid from one barrier, and one dispatch, to the next. After a timeout the
//   count is wrong; the error word stays set (every later barrier fails at once, without
//   arriving) until the host zeroes the buffer (nu__grid_check does).
// - lavapipe (Mesa 22.3's llvmpipe), measured: its compute threads run one workgroup each at a
//   time, so up to its thread count of workgroups are co-resident (nu_kernel_resident_groups);
//   it ends any loop nest after 65535 iterations in all, silently, and hoists plain loads (even
//   volatile ones) out of loops. A first version of this barrier passed barriers early there
//   because of both; hence the atomic reads, the burst of polls per iteration and the check of
//   the generation (not of the loop's end) to tell a pass from a timeout.
// - Two persistent dispatches must not run at once (each may wait for workgroups the other
//   holds): binding the sync buffer read-write makes hazard tracking order dispatches sharing it.

#ifdef NU_GRID_VMM
// Without the pragma glslang declares the Vulkan model but marks no access non-private.
#pragma use_vulkan_memory_model
#extension GL_KHR_memory_scope_semantics : require
#define NU_GRID_SHARED nonprivate
#define NU_GRID_SYNC_QUALIFIERS nonprivate
#else
#define NU_GRID_SHARED coherent
#define NU_GRID_SYNC_QUALIFIERS volatile // glslang adds Coherent: volatile implies it
#endif

layout(std430, binding = NU_GRID_BINDING) NU_GRID_SYNC_QUALIFIERS buffer NuGridSync {
    uint arrived;    // workgroups arrived at the current barrier
    uint generation; // barriers completed (wraps around; only changes matter)
    uint error;      // non-zero: a barrier timed out (sticky until the host zeroes the buffer)
    uint spare;
} nu_grid;

shared bool nu_grid_failed;

#ifdef NU_GRID_VMM
#define NU_GRID_AR_ (gl_SemanticsAcquireRelease | gl_SemanticsMakeAvailable | gl_SemanticsMakeVisible)
uint nu_grid_load_(uint which)
{
    return which == 0u ? atomicLoad(nu_grid.generation, gl_ScopeQueueFamily, gl_StorageSemanticsBuffer,
                                    gl_SemanticsAcquire | gl_SemanticsMakeVisible)
                       : atomicLoad(nu_grid.error, gl_ScopeQueueFamily, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed);
}
// One poll an iteration of the wait loop.
#define NU_GRID_POLLS_ 1u
#define NU_GRID_POLL_BURST_ now = nu_grid_load_(0u);
#else
// CPU_POLLS (specialisation constant NU_GRID_CPU_ID, which the kernel defines; the host sets it
// on CPU devices): llvmpipe (lavapipe) hoists plain loads, even volatile ones, out of the wait
// loop, and ends a loop nest after 65535 iterations in all, silently (its guard against endless
// shader loops; the nest here is the kernel's loop over steps). So there the polls are atomic
// read-modify-writes, 256 of them an iteration in straight code, which gives a workgroup's
// waits in one dispatch about half a second in all. GPUs poll with a volatile (coherent) load.
layout(constant_id = NU_GRID_CPU_ID) const bool NU_GRID_CPU_POLLS = false;
uint nu_grid_load_(uint which)
{
    if (NU_GRID_CPU_POLLS)
        return which == 0u ? atomicAdd(nu_grid.generation, 0u) : atomicAdd(nu_grid.error, 0u);
    return which == 0u ? nu_grid.generation : nu_grid.error;
}
#define NU_GRID_POLLS_ (NU_GRID_CPU_POLLS ? 256u : 1u)
#define NU_GRID_POLL4_ now = nu_grid_load_(0u); now = nu_grid_load_(0u); now = nu_grid_load_(0u); now = nu_grid_load_(0u);
#define NU_GRID_POLL16_ NU_GRID_POLL4_ NU_GRID_POLL4_ NU_GRID_POLL4_ NU_GRID_POLL4_
#define NU_GRID_POLL64_ NU_GRID_POLL16_ NU_GRID_POLL16_ NU_GRID_POLL16_ NU_GRID_POLL16_
#define NU_GRID_POLL_BURST_                                                                        \
    now = nu_grid_load_(0u);                                                                     \
    if (NU_GRID_CPU_POLLS) {                                                                     \
        NU_GRID_POLL64_ NU_GRID_POLL64_ NU_GRID_POLL64_ NU_GRID_POLL16_ NU_GRID_POLL16_ NU_GRID_POLL16_ \
        NU_GRID_POLL4_ NU_GRID_POLL4_ NU_GRID_POLL4_ now = nu_grid_load_(0u); now = nu_grid_load_(0u); \
        now = nu_grid_load_(0u);                                                                 \
    }
#endif

// The device-wide barrier: returns once `groups` workgroups (those of this dispatch) all called
// it as often as this one, with every write to NU_GRID_SHARED buffers made before the call by
// any of them visible to reads after it. Returns false (in every invocation of the workgroup)
// when a barrier timed out, here or elsewhere: stop then; the results are not valid.
bool nu_grid_sync(uint groups, uint spin_limit)
{
#ifdef NU_GRID_VMM
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeQueueFamily, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                   NU_GRID_AR_);
#else
    memoryBarrierBuffer();
    barrier();
#endif
    if (gl_LocalInvocationIndex == 0u) {
        bool ok = nu_grid_load_(1u) == 0u;
        if (ok && groups > 1u) {
            uint gen = nu_grid_load_(0u);
#ifdef NU_GRID_VMM
            uint before = atomicAdd(nu_grid.arrived, 1u, gl_ScopeQueueFamily, gl_StorageSemanticsBuffer, NU_GRID_AR_);
#else
            memoryBarrierBuffer();
            uint before = atomicAdd(nu_grid.arrived, 1u);
#endif
            if (before + 1u == groups) {
#ifdef NU_GRID_VMM
                atomicAdd(nu_grid.arrived, 0u - groups, gl_ScopeQueueFamily, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed);
                atomicAdd(nu_grid.generation, 1u, gl_ScopeQueueFamily, gl_StorageSemanticsBuffer,
                          gl_SemanticsRelease | gl_SemanticsMakeAvailable);
#else
                atomicAdd(nu_grid.arrived, 0u - groups);
                memoryBarrierBuffer();
                atomicAdd(nu_grid.generation, 1u);
#endif
            } else {
                uint polls = 0u, now = gen;
                bool failed_elsewhere = false;
                while (now == gen && polls < spin_limit && !failed_elsewhere) {
                    NU_GRID_POLL_BURST_
                    polls += NU_GRID_POLLS_;
                    failed_elsewhere = nu_grid_load_(1u) != 0u; // another workgroup gave up
                }
                if (now == gen) {
#ifdef NU_GRID_VMM
                    atomicOr(nu_grid.error, 1u, gl_ScopeQueueFamily, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed);
#else
                    atomicOr(nu_grid.error, 1u);
#endif
                    ok = false;
                }
            }
        }
        nu_grid_failed = !ok;
    }
#ifdef NU_GRID_VMM
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeQueueFamily, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                   NU_GRID_AR_);
#else
    barrier();
    memoryBarrierBuffer();
#endif
    return !nu_grid_failed;
}
