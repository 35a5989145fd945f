/* schedule.c: a graph's schedule, the level pass (see schedule.h; why its barriers are these is
 * hazard.c's strategy). */
#include "exec/schedule.h"

#include <string.h>

#include "core/error.h"
#include "core/host.h"

void nu__schedule_init(nu__schedule *s)
{
    memset(s, 0, sizeof *s);
    nu__hazards_init(&s->plan);
}

void nu__schedule_fini(nu__schedule *s)
{
    nu__hazards_fini(&s->plan);
    nu__free(s->order);
    nu__free(s->level);
    nu__free(s->level_first);
    nu__free(s->barriers);
    memset(s, 0, sizeof *s);
}

static nu_status oom(const nu__list *l)
{
    return nu__fail(l->device, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory scheduling a graph");
}

/* Room for `levels` levels: the level starts and barriers, and what each level does. */
static nu_status reserve_levels(nu__schedule *s, uint32_t levels)
{
    if (levels + 1 <= s->level_capacity)
        return NU_OK;
    uint32_t want = levels + 1;
    uint32_t *first = nu__realloc(s->level_first, want * sizeof *first);
    if (!first)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    s->level_first = first;
    VkMemoryBarrier2 *barriers = nu__realloc(s->barriers, want * sizeof *barriers);
    if (!barriers)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    s->barriers = barriers;
    s->level_capacity = want;
    return NU_OK;
}

nu_status nu__schedule_make(nu__schedule *s, const nu__list *l, VkBuffer placeholder, bool in_order)
{
    uint32_t n = l->cmd_count;
    if (n > s->cmd_capacity) {
        uint32_t *order = nu__realloc(s->order, n * sizeof *order);
        if (order)
            s->order = order;
        uint32_t *level = order ? nu__realloc(s->level, n * sizeof *level) : NULL;
        if (level)
            s->level = level;
        if (!level)
            return oom(l);
        s->cmd_capacity = n;
    }
    s->level_count = 0;
    /* Each command's level: the planner's, by levels; or in order, where each barrier it asks
     * for starts the next level (so the levels never decrease and the order stays the same). */
    nu__hazards_reset(&s->plan);
    uint32_t levels = 0, barriers = 0;
    for (uint32_t i = 0; i < n; i++) {
        const nu__cmd *c = &l->cmds[i];
        nu__access a[NU__HAZARD_MAX_ACCESSES];
        for (uint32_t j = 0; j < c->ref_count; j++) {
            const nu__ref *r = &l->refs[c->ref_first + j];
            nu__span sp = nu__list_span(l, r, placeholder);
            a[j] = (nu__access){.piece = (uint64_t)sp.vk, .base = sp.base, .start = sp.start, .end = sp.end,
                                .write = r->write, .stage = nu__work_stage(c->work),
                                .access = nu__work_access(c->work, r->write)};
        }
        nu_status st;
        if (in_order) {
            int32_t use[NU__HAZARD_MAX_ACCESSES];
            bool barrier;
            VkPipelineStageFlags2 src_stage;
            VkAccessFlags2 src_access;
            st = nu__hazards_track(&s->plan, a, c->ref_count, use, &barrier, &src_stage, &src_access);
            barriers += barrier;
            s->level[i] = barriers;
        } else {
            st = nu__hazards_level(&s->plan, a, c->ref_count, &s->level[i]);
        }
        if (st != NU_OK)
            return oom(l);
        if (s->level[i] + 1 > levels)
            levels = s->level[i] + 1;
    }
    if (reserve_levels(s, levels) != NU_OK)
        return oom(l);
    /* What each level does (stages, writes) and what it and the levels after it do (stages,
     * accesses): the barriers' two halves. A read-write binding is read too. */
    VkPipelineStageFlags2 *stages = nu__calloc(2 * (size_t)levels + 2, sizeof *stages);
    VkAccessFlags2 *access = nu__calloc(2 * (size_t)levels + 2, sizeof *access);
    if (!stages || !access) {
        nu__free(stages);
        nu__free(access);
        return oom(l);
    }
    VkPipelineStageFlags2 *later_stages = stages + levels + 1;
    VkAccessFlags2 *writes = access + levels + 1;
    memset(s->level_first, 0, (levels + 1) * sizeof *s->level_first);
    for (uint32_t i = 0; i < n; i++) {
        const nu__cmd *c = &l->cmds[i];
        uint32_t lv = s->level[i];
        s->level_first[lv + 1]++;
        stages[lv] |= nu__work_stage(c->work);
        for (uint32_t j = 0; j < c->ref_count; j++) {
            bool w = l->refs[c->ref_first + j].write;
            access[lv] |= nu__work_access(c->work, w);
            if (w)
                writes[lv] |= nu__work_access(c->work, true);
        }
        if (c->work == NU__WORK_DISPATCH)
            access[lv] |= VK_ACCESS_2_SHADER_STORAGE_READ_BIT;
    }
    for (uint32_t lv = levels; lv-- > 0;) {
        later_stages[lv] = stages[lv] | later_stages[lv + 1];
        access[lv] |= access[lv + 1];
    }
    for (uint32_t lv = 1; lv < levels; lv++)
        s->barriers[lv] = nu__hazard_level_barrier(stages[lv - 1], writes[lv - 1], later_stages[lv], access[lv]);
    for (uint32_t lv = 0; lv < levels; lv++)
        s->level_first[lv + 1] += s->level_first[lv];
    /* The order: by level, stably. Each level is filled from its end backwards, which leaves
     * level_first[lv + 1] at level lv's start; the starts are then moved back by one. */
    for (uint32_t i = n; i-- > 0;)
        s->order[--s->level_first[s->level[i] + 1]] = i;
    for (uint32_t lv = 0; lv < levels; lv++)
        s->level_first[lv + 1] = lv + 1 < levels ? s->level_first[lv + 2] : n;
    nu__free(stages);
    nu__free(access);
    s->level_count = levels;
    return NU_OK;
}
