/* hazard.h: the hazard planner: which recorded commands must wait for which, and the barriers
 * that make them wait (the strategy is hazard.c's comment). One planner for command buffers and
 * graphs.
 *
 * The tracker sees each recorded command's accesses (memory piece, byte range, read or write,
 * pipeline stage) in recording order and gives the command a level: read-after-write,
 * write-after-read or write-after-write on overlapping bytes of the same piece put it above the
 * command it conflicts with. In order (nu__hazards_track: a command buffer, planned as it is
 * recorded) levels never decrease, a new level is a barrier right before the command, and only
 * the accesses since the last barrier (one "epoch") are kept. By levels (nu__hazards_level: a
 * graph, planned whole) a command goes one above the highest command it conflicts with, and the
 * accesses that later commands could still conflict with are kept. A tracker is used in one
 * way between resets. It knows nothing of Vulkan beyond the stage and access flags. */
#ifndef NU_HAZARD_H
#define NU_HAZARD_H

#include <stdbool.h>
#include <stdint.h>

#include "nuvec/status.h"

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

/* What a command does, for its accesses' stage and access flags. */
typedef enum nu__work {
    NU__WORK_DISPATCH, /* a compute shader's storage reads and writes */
    NU__WORK_COPY,     /* vkCmdCopyBuffer (copies, uploads, downloads) */
    NU__WORK_FILL,     /* vkCmdFillBuffer */
} nu__work;

static inline VkPipelineStageFlags2 nu__work_stage(nu__work w)
{
    /* A fill is a clear, and a transfer too on some implementations: both stages. */
    return w == NU__WORK_DISPATCH ? VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT
           : w == NU__WORK_COPY   ? VK_PIPELINE_STAGE_2_COPY_BIT
                                  : VK_PIPELINE_STAGE_2_CLEAR_BIT | VK_PIPELINE_STAGE_2_COPY_BIT;
}

static inline VkAccessFlags2 nu__work_access(nu__work w, bool write)
{
    if (w == NU__WORK_DISPATCH)
        return write ? VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT : VK_ACCESS_2_SHADER_STORAGE_READ_BIT;
    return write ? VK_ACCESS_2_TRANSFER_WRITE_BIT : VK_ACCESS_2_TRANSFER_READ_BIT;
}

/* One access of one command. `piece` and `base` identify the memory: the VkBuffer of the
 * allocator's block and the piece's offset in it (pieces never overlap while GPU work of the
 * command buffer uses them); [start, end) is the byte range within that VkBuffer. */
typedef struct nu__access {
    uint64_t piece;
    uint64_t base;
    uint64_t start, end;
    bool write;
    VkPipelineStageFlags2 stage;
    VkAccessFlags2 access;
} nu__access;

typedef struct nu__hazard_slot nu__hazard_slot;
typedef struct nu__hazard_range nu__hazard_range;

typedef struct nu__hazards {
    uint32_t epoch;                /* bumped by each barrier: older slots' ranges are stale */
    nu__hazard_slot *slots;        /* open addressing, power-of-two capacity */
    uint32_t capacity, used;
    nu__hazard_range *ranges;      /* this epoch's ranges, linked per slot */
    uint32_t range_count, range_capacity;
    /* What the epoch's commands did: the source half of the next barrier. */
    VkPipelineStageFlags2 stages;
    VkAccessFlags2 writes;
    uint32_t barriers;             /* barriers so far (for tests and benchmarks) */
    uint32_t generation;           /* slots of other generations are empty */
} nu__hazards;

void nu__hazards_init(nu__hazards *h);
void nu__hazards_fini(nu__hazards *h);
/* Forgets everything tracked, keeping the memory (a recycled command buffer): O(1). */
void nu__hazards_reset(nu__hazards *h);

/* Whether a command with these accesses conflicts with an access since the last barrier.
 * Accesses of one command never conflict with each other. */
bool nu__hazards_conflict(const nu__hazards *h, const nu__access *a, uint32_t n);

/* Starts a new epoch; *src_stages / *src_access get what the barrier must wait for (the
 * epoch's stages and its writes). */
void nu__hazards_barrier(nu__hazards *h, VkPipelineStageFlags2 *src_stages, VkAccessFlags2 *src_access);

/* Adds a command's accesses to the epoch. `*first_use` (one per access, may be NULL) is set
 * when the piece is new to the command buffer, and `*use` to the index the caller gave the
 * piece when first seen (nu__hazards_set_use). NU_ERROR_HOST_OUT_OF_MEMORY leaves the tracker
 * as it was. */
nu_status nu__hazards_add(nu__hazards *h, const nu__access *a, uint32_t n, int32_t *use);
/* The most accesses one command has (nu__hazards_track). */
#define NU__HAZARD_MAX_ACCESSES 16

/* conflict + barrier + add in one pass over the pieces (one hash probe each): adds a command's
 * accesses, first starting a new epoch if any conflicts (then *barrier is set, with the
 * barrier's source half in *src_stages / *src_access). use[i] gets each piece's caller index
 * (-1: new). n <= NU__HAZARD_MAX_ACCESSES. NU_ERROR_HOST_OUT_OF_MEMORY changes nothing. */
nu_status nu__hazards_track(nu__hazards *h, const nu__access *a, uint32_t n, int32_t *use, bool *barrier,
                            VkPipelineStageFlags2 *src_stages, VkAccessFlags2 *src_access);
/* By levels: the command's level (0 when it conflicts with no access added before, else one
 * more than the highest level of those it conflicts with), its accesses added at that level.
 * n <= NU__HAZARD_MAX_ACCESSES. NU_ERROR_HOST_OUT_OF_MEMORY changes nothing. */
nu_status nu__hazards_level(nu__hazards *h, const nu__access *a, uint32_t n, uint32_t *level);
/* The caller's index for a piece (-1: none yet). */
int32_t nu__hazards_get_use(const nu__hazards *h, uint64_t piece, uint64_t base);
/* Records the caller's index for a piece nu__hazards_add reported as new (use == -1). */
void nu__hazards_set_use(nu__hazards *h, uint64_t piece, uint64_t base, int32_t use);

/* The barriers nuvec records, built here beside the strategy that says why (hazard.c). */
/* In order: between an epoch (its stages and writes: nu__hazards_track's src_stage, src_access)
 * and everything recorded after it, on a compute queue (copies, clears and compute shaders) or a
 * transfer-only one (copies and clears). */
VkMemoryBarrier2 nu__hazard_barrier(bool compute_queue, VkPipelineStageFlags2 src_stage, VkAccessFlags2 src_access);
/* By levels: between what a level did (its stages and writes) and what the levels after it do
 * (their stages and accesses): the destination half narrowed to the known rest of the work. */
VkMemoryBarrier2 nu__hazard_level_barrier(VkPipelineStageFlags2 src_stage, VkAccessFlags2 src_access,
                                          VkPipelineStageFlags2 dst_stage, VkAccessFlags2 dst_access);
/* At the end of a command buffer whose copies wrote host-visible memory the host reads at
 * completion (downloads). */
VkMemoryBarrier2 nu__hazard_host_barrier(void);

#endif
