/* hazard.c: the hazard planner (see hazard.h): which commands must wait for which, and the
 * barriers that make them wait, for command buffers and graphs alike.
 *
 * Barrier strategy (the one place it is written down):
 * - Memory is identified by piece (the allocator's block VkBuffer and the buffer's offset in
 *   it): a piece that GPU work of an uncommitted command buffer (or a graph) uses is never
 *   handed out again, so within one recording a piece is one buffer, and buffers sharing a
 *   block do not share ranges. Two commands conflict when they touch overlapping bytes of one
 *   piece and one of the two writes (RAW, WAR or WAW); reads after reads, and accesses to
 *   disjoint bytes, never conflict, so independent dispatches run concurrently.
 * - Every command gets a level: its commands' accesses are planned in recording order, and a
 *   command that conflicts with an earlier one must run after it, at a higher level. Between
 *   two levels there is one global VkMemoryBarrier2 (the cheapest barrier on current drivers,
 *   and it orders a whole level at once); its source half is what the level before it did (its
 *   stages, and its writes as the access mask: only writes need making available).
 * - In order (a command buffer, planned as it is recorded: nu__hazards_track): a command's
 *   level is the current one unless it conflicts with an access recorded since the last
 *   barrier (the "epoch"), then the next; the barrier is recorded right before it. Its
 *   destination half is every stage and access nuvec records on the queue (compute shader
 *   storage reads and writes, copies, clears): later commands rely on it without a barrier of
 *   their own, and what they will be is not known yet. After it the epoch starts empty:
 *   Vulkan's execution dependencies chain (and memory made visible to a stage stays visible
 *   to later commands of that stage), so it orders all earlier epochs too. One barrier
 *   settles every conflict of the command: the fewest barriers possible for commands kept in
 *   recording order.
 * - By levels (a graph, planned once for many launches: nu__hazards_level): a command's level
 *   is one more than the highest level of the earlier commands it conflicts with (0 without
 *   any), whatever came in between; the graph's schedule then encodes level by level, so
 *   conflicting commands keep their recorded order and independent ones share a level even
 *   when recorded far apart. The whole recording is known, so the barrier before level l
 *   narrows its destination half to the stages and accesses of the levels from l on (a
 *   compute-only graph waits only on the compute shader stage). Each of these barriers is
 *   needed (a command depends on some command of the level right before its own) and one
 *   suffices (an earlier barrier already covered the later levels, and dependencies chain).
 *   The in-order plan is the special case where levels never decrease.
 * - Across command buffers, graph launches and queues, barriers cannot help (a recording is
 *   made before it is known what runs before it): commit and launch make the submission wait
 *   on timeline semaphores for the queue positions of conflicting earlier work (submit.c,
 *   use.c). The program's order is the order of commits and launches.
 * - Empty ranges (an empty buffer, or a range at a buffer's end) touch no memory of their
 *   buffer and are no use of it. Vulkan still needs a buffer bound: each empty binding of a
 *   recording gets the next slot of the device's placeholder, planned like any range only
 *   because the validation layer assumes a kernel touches all it binds; slots do not overlap,
 *   so unrelated empty bindings order nothing.
 * - Downloads copy into host-visible staging memory that the host reads once the command buffer
 *   completed: a last barrier makes the copies' writes available to the host stage (the
 *   timeline semaphore's signal then makes them visible to the waiting host). */
#include "exec/hazard.h"

#include <string.h>

#include "core/host.h"

struct nu__hazard_slot {
    uint64_t piece, base;
    uint32_t epoch;   /* the epoch its ranges and bounds belong to; 0: never used */
    int32_t head;     /* first range of this epoch, -1 for none */
    int32_t use;      /* the caller's index for the piece, -1 until set */
    uint32_t generation; /* occupied when equal to the tracker's (nu__hazards_reset bumps it) */
    uint64_t rmin, rmax, wmin, wmax; /* bounds of this epoch's reads and writes (empty: min > max) */
};

struct nu__hazard_range {
    uint64_t start, end;
    uint32_t level;   /* by levels: the command's (in order: unset, every range of an epoch is its) */
    bool write;
    int32_t next;
};

void nu__hazards_init(nu__hazards *h)
{
    memset(h, 0, sizeof *h);
    h->epoch = 1;
    h->generation = 1;
}

void nu__hazards_reset(nu__hazards *h)
{
    h->used = 0;
    h->range_count = 0;
    h->stages = 0;
    h->writes = 0;
    h->barriers = 0;
    if (++h->generation == 0) {
        /* Wrapped: make every slot empty explicitly. */
        memset(h->slots, 0, (size_t)h->capacity * sizeof *h->slots);
        h->generation = 1;
    }
}

void nu__hazards_fini(nu__hazards *h)
{
    nu__free(h->slots);
    nu__free(h->ranges);
    memset(h, 0, sizeof *h);
}

static uint32_t hash(uint64_t piece, uint64_t base)
{
    uint64_t x = piece * 0x9e3779b97f4a7c15ull ^ (base + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
    return (uint32_t)(x ^ (x >> 29) ^ (x >> 47));
}

static nu__hazard_slot *find(const nu__hazards *h, uint64_t piece, uint64_t base)
{
    if (!h->capacity)
        return NULL;
    uint32_t mask = h->capacity - 1;
    for (uint32_t i = hash(piece, base) & mask;; i = (i + 1) & mask) {
        nu__hazard_slot *s = &h->slots[i];
        if (s->generation != h->generation)
            return NULL;
        if (s->piece == piece && s->base == base)
            return s;
    }
}

static bool overlaps(uint64_t s1, uint64_t e1, uint64_t s2, uint64_t e2) { return s1 < e2 && s2 < e1; }

/* The slot of a piece, inserted (empty) if new. Room must have been reserved. */
static nu__hazard_slot *find_or_insert(nu__hazards *h, uint64_t piece, uint64_t base)
{
    uint32_t mask = h->capacity - 1;
    for (uint32_t j = hash(piece, base) & mask;; j = (j + 1) & mask) {
        nu__hazard_slot *s = &h->slots[j];
        if (s->generation != h->generation) {
            s->generation = h->generation;
            s->piece = piece;
            s->base = base;
            s->epoch = 0;
            s->use = -1;
            h->used++;
            return s;
        }
        if (s->piece == piece && s->base == base)
            return s;
    }
}

static bool slot_conflicts(const nu__hazards *h, const nu__hazard_slot *s, const nu__access *a)
{
    if (s->epoch != h->epoch)
        return false;
    bool near_w = s->wmin < s->wmax && overlaps(a->start, a->end, s->wmin, s->wmax);
    bool near_r = a->write && s->rmin < s->rmax && overlaps(a->start, a->end, s->rmin, s->rmax);
    if (!near_w && !near_r)
        return false;
    for (int32_t r = s->head; r >= 0; r = h->ranges[r].next) {
        const nu__hazard_range *g = &h->ranges[r];
        if ((g->write || a->write) && overlaps(a->start, a->end, g->start, g->end))
            return true;
    }
    return false;
}

/* Adds an access to its piece's list for this epoch; returns the piece's caller index. */
static int32_t append(nu__hazards *h, nu__hazard_slot *s, const nu__access *a)
{
    if (s->epoch != h->epoch) {
        s->epoch = h->epoch;
        s->head = -1;
        s->rmin = s->wmin = UINT64_MAX;
        s->rmax = s->wmax = 0;
    } else if (s->head >= 0) {
        /* The same access as the last one to this piece (a buffer read by every command):
         * already listed. */
        const nu__hazard_range *last = &h->ranges[s->head];
        if (last->start == a->start && last->end == a->end && last->write == a->write) {
            h->stages |= a->stage;
            return s->use;
        }
    }
    /* In order, a range's level is never read (all of an epoch's are its): not written either,
     * on the recording's hot path. */
    nu__hazard_range *r = &h->ranges[h->range_count];
    r->start = a->start;
    r->end = a->end;
    r->write = a->write;
    r->next = s->head;
    s->head = (int32_t)h->range_count++;
    if (a->write) {
        s->wmin = a->start < s->wmin ? a->start : s->wmin;
        s->wmax = a->end > s->wmax ? a->end : s->wmax;
        h->writes |= a->access;
    } else {
        s->rmin = a->start < s->rmin ? a->start : s->rmin;
        s->rmax = a->end > s->rmax ? a->end : s->rmax;
    }
    h->stages |= a->stage;
    return s->use;
}

bool nu__hazards_conflict(const nu__hazards *h, const nu__access *a, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        const nu__hazard_slot *s = find(h, a[i].piece, a[i].base);
        if (s && slot_conflicts(h, s, &a[i]))
            return true;
    }
    return false;
}

void nu__hazards_barrier(nu__hazards *h, VkPipelineStageFlags2 *src_stages, VkAccessFlags2 *src_access)
{
    *src_stages = h->stages ? h->stages : VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT;
    *src_access = h->writes;
    h->stages = 0;
    h->writes = 0;
    h->range_count = 0;
    h->barriers++;
    if (++h->epoch == 0) {
        /* Wrapped: forget every slot's epoch so none looks current. */
        for (uint32_t i = 0; i < h->capacity; i++)
            h->slots[i].epoch = 0;
        h->epoch = 1;
    }
}

static nu_status grow_slots(nu__hazards *h, uint32_t want_used)
{
    if ((uint64_t)want_used * 2 <= h->capacity)
        return NU_OK;
    uint32_t cap = h->capacity ? h->capacity : 64;
    while ((uint64_t)want_used * 2 > cap)
        cap *= 2;
    nu__hazard_slot *slots = nu__calloc(cap, sizeof *slots);
    if (!slots)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < h->capacity; i++) {
        nu__hazard_slot *s = &h->slots[i];
        if (s->generation != h->generation)
            continue;
        uint32_t j = hash(s->piece, s->base) & (cap - 1);
        while (slots[j].generation == h->generation)
            j = (j + 1) & (cap - 1);
        slots[j] = *s;
    }
    nu__free(h->slots);
    h->slots = slots;
    h->capacity = cap;
    return NU_OK;
}

static nu_status grow_ranges(nu__hazards *h, uint32_t want)
{
    if (want <= h->range_capacity)
        return NU_OK;
    uint32_t cap = h->range_capacity ? h->range_capacity : 64;
    while (cap < want)
        cap *= 2;
    nu__hazard_range *r = nu__realloc(h->ranges, (size_t)cap * sizeof *r);
    if (!r)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    h->ranges = r;
    h->range_capacity = cap;
    return NU_OK;
}

nu_status nu__hazards_add(nu__hazards *h, const nu__access *a, uint32_t n, int32_t *use)
{
    /* Reserve first, so that a failure changes nothing. */
    if (grow_slots(h, h->used + n) != NU_OK || grow_ranges(h, h->range_count + n) != NU_OK)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < n; i++) {
        int32_t u = append(h, find_or_insert(h, a[i].piece, a[i].base), &a[i]);
        if (use)
            use[i] = u;
    }
    return NU_OK;
}

void nu__hazards_set_use(nu__hazards *h, uint64_t piece, uint64_t base, int32_t use)
{
    nu__hazard_slot *s = find(h, piece, base);
    if (s)
        s->use = use;
}

int32_t nu__hazards_get_use(const nu__hazards *h, uint64_t piece, uint64_t base)
{
    const nu__hazard_slot *s = find(h, piece, base);
    return s ? s->use : -1;
}

nu_status nu__hazards_track(nu__hazards *h, const nu__access *a, uint32_t n, int32_t *use, bool *barrier,
                            VkPipelineStageFlags2 *src_stages, VkAccessFlags2 *src_access)
{
    *barrier = false;
    if (grow_slots(h, h->used + n) != NU_OK || grow_ranges(h, h->range_count + n) != NU_OK)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    nu__hazard_slot *slot[NU__HAZARD_MAX_ACCESSES];
    bool conflict = false;
    for (uint32_t i = 0; i < n; i++) {
        slot[i] = find_or_insert(h, a[i].piece, a[i].base);
        conflict = conflict || slot_conflicts(h, slot[i], &a[i]);
    }
    if (conflict) {
        nu__hazards_barrier(h, src_stages, src_access);
        *barrier = true;
    }
    for (uint32_t i = 0; i < n; i++)
        use[i] = append(h, slot[i], &a[i]);
    return NU_OK;
}

/* ---- by levels ------------------------------------------------------------------------- */

/* One more than the highest level of the slot's ranges that `a` conflicts with (0: none). */
static uint32_t conflict_level(const nu__hazards *h, const nu__hazard_slot *s, const nu__access *a)
{
    if (s->epoch != h->epoch)
        return 0;
    bool near_w = s->wmin < s->wmax && overlaps(a->start, a->end, s->wmin, s->wmax);
    bool near_r = a->write && s->rmin < s->rmax && overlaps(a->start, a->end, s->rmin, s->rmax);
    if (!near_w && !near_r)
        return 0;
    uint32_t level = 0;
    for (int32_t r = s->head; r >= 0; r = h->ranges[r].next) {
        const nu__hazard_range *g = &h->ranges[r];
        if ((g->write || a->write) && overlaps(a->start, a->end, g->start, g->end) && g->level + 1 > level)
            level = g->level + 1;
    }
    return level;
}

/* Adds `a` at `level`, first dropping the slot's ranges it makes redundant: one inside a's
 * range at a level not above it, which a later access cannot conflict with without conflicting
 * with `a` at least as high (a write covers anything; a read covers reads). The slot's bounds
 * stay as they were (a superset is still a correct filter). */
static void place(nu__hazards *h, nu__hazard_slot *s, const nu__access *a, uint32_t level)
{
    if (s->epoch != h->epoch) {
        s->epoch = h->epoch;
        s->head = -1;
        s->rmin = s->wmin = UINT64_MAX;
        s->rmax = s->wmax = 0;
    } else if ((s->wmin < s->wmax && overlaps(a->start, a->end, s->wmin, s->wmax)) ||
               (s->rmin < s->rmax && overlaps(a->start, a->end, s->rmin, s->rmax))) {
        int32_t *link = &s->head;
        while (*link >= 0) {
            nu__hazard_range *b = &h->ranges[*link];
            if (b->start >= a->start && b->end <= a->end && b->level <= level && (a->write || !b->write))
                *link = b->next;
            else
                link = &b->next;
        }
    }
    nu__hazard_range *r = &h->ranges[h->range_count];
    *r = (nu__hazard_range){a->start, a->end, level, a->write, s->head};
    s->head = (int32_t)h->range_count++;
    if (a->write) {
        s->wmin = a->start < s->wmin ? a->start : s->wmin;
        s->wmax = a->end > s->wmax ? a->end : s->wmax;
    } else {
        s->rmin = a->start < s->rmin ? a->start : s->rmin;
        s->rmax = a->end > s->rmax ? a->end : s->rmax;
    }
}

nu_status nu__hazards_level(nu__hazards *h, const nu__access *a, uint32_t n, uint32_t *level)
{
    *level = 0;
    if (grow_slots(h, h->used + n) != NU_OK || grow_ranges(h, h->range_count + n) != NU_OK)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    nu__hazard_slot *slot[NU__HAZARD_MAX_ACCESSES];
    uint32_t l = 0;
    for (uint32_t i = 0; i < n; i++) {
        slot[i] = find_or_insert(h, a[i].piece, a[i].base);
        uint32_t c = conflict_level(h, slot[i], &a[i]);
        l = c > l ? c : l;
    }
    for (uint32_t i = 0; i < n; i++)
        place(h, slot[i], &a[i], l);
    *level = l;
    return NU_OK;
}

/* ---- the barriers ----------------------------------------------------------------------- */

VkMemoryBarrier2 nu__hazard_barrier(bool compute_queue, VkPipelineStageFlags2 src_stage, VkAccessFlags2 src_access)
{
    return (VkMemoryBarrier2){
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2,
        .srcStageMask = src_stage,
        .srcAccessMask = src_access,
        .dstStageMask = VK_PIPELINE_STAGE_2_COPY_BIT | VK_PIPELINE_STAGE_2_CLEAR_BIT |
                        (compute_queue ? VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT : 0),
        .dstAccessMask = VK_ACCESS_2_TRANSFER_READ_BIT | VK_ACCESS_2_TRANSFER_WRITE_BIT |
                         (compute_queue ? VK_ACCESS_2_SHADER_STORAGE_READ_BIT | VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT : 0),
    };
}

VkMemoryBarrier2 nu__hazard_level_barrier(VkPipelineStageFlags2 src_stage, VkAccessFlags2 src_access,
                                          VkPipelineStageFlags2 dst_stage, VkAccessFlags2 dst_access)
{
    return (VkMemoryBarrier2){.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2, .srcStageMask = src_stage,
                              .srcAccessMask = src_access, .dstStageMask = dst_stage, .dstAccessMask = dst_access};
}

VkMemoryBarrier2 nu__hazard_host_barrier(void)
{
    return (VkMemoryBarrier2){.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2,
                              .srcStageMask = VK_PIPELINE_STAGE_2_COPY_BIT,
                              .srcAccessMask = VK_ACCESS_2_TRANSFER_WRITE_BIT,
                              .dstStageMask = VK_PIPELINE_STAGE_2_HOST_BIT,
                              .dstAccessMask = VK_ACCESS_2_HOST_READ_BIT};
}
