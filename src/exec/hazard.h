/* hazard.h: which barriers a command buffer needs (the rules are in hazard.c's comment).
 *
 * The tracker sees each recorded command's accesses (memory piece, byte range, read or
 * write, pipeline stage) in recording order and answers whether the command must wait for
 * earlier ones: read-after-write, write-after-read or write-after-write on overlapping bytes
 * of the same piece. It keeps only the accesses since the last barrier (one "epoch"). It knows
 * nothing of Vulkan beyond the stage and access flags it accumulates for the barrier. */
#ifndef NU_HAZARD_H
#define NU_HAZARD_H

#include <stdbool.h>
#include <stdint.h>

#include "nuvec/status.h"

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

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
/* The caller's index for a piece (-1: none yet). */
int32_t nu__hazards_get_use(const nu__hazards *h, uint64_t piece, uint64_t base);
/* Records the caller's index for a piece nu__hazards_add reported as new (use == -1). */
void nu__hazards_set_use(nu__hazards *h, uint64_t piece, uint64_t base, int32_t use);

/* The barriers nuvec records, built here beside the strategy that says why (hazard.c). */
/* Between an epoch (its stages and writes: nu__hazards_track's src_stage, src_access) and
 * everything recorded after it, on a compute queue (copies, clears and compute shaders) or a
 * transfer-only one (copies and clears). */
VkMemoryBarrier2 nu__hazard_barrier(bool compute_queue, VkPipelineStageFlags2 src_stage, VkAccessFlags2 src_access);
/* At the end of a command buffer whose copies wrote host-visible memory the host reads at
 * completion (downloads). */
VkMemoryBarrier2 nu__hazard_host_barrier(void);

#endif
