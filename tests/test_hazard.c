/* test_hazard.c: the hazard tracker's rules, without a GPU: which commands need a barrier. */
#include "harness.h"

#include "exec/hazard.h"
#include "core/host.h"

static nu__access acc(uint64_t piece, uint64_t start, uint64_t end, bool write)
{
    return (nu__access){.piece = piece, .base = 0, .start = start, .end = end, .write = write,
                        .stage = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
                        .access = write ? VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT : VK_ACCESS_2_SHADER_STORAGE_READ_BIT};
}

/* Records a command: returns whether it needed a barrier. */
static bool command(nu__hazards *h, const nu__access *a, uint32_t n)
{
    bool conflict = nu__hazards_conflict(h, a, n);
    if (conflict) {
        VkPipelineStageFlags2 s;
        VkAccessFlags2 w;
        nu__hazards_barrier(h, &s, &w);
    }
    int32_t use[8];
    assert_int_equal(nu__hazards_add(h, a, n, use), NU_OK);
    return conflict;
}

static void each_hazard_kind_and_nothing_else(void **state)
{
    nu__hazards h;
    nu__hazards_init(&h);
    nu__access w = acc(1, 0, 100, true), r = acc(1, 0, 100, false);
    assert_false(command(&h, &r, 1));  /* first access */
    assert_false(command(&h, &r, 1));  /* read after read: nothing */
    assert_true(command(&h, &w, 1));   /* write after read */
    assert_true(command(&h, &r, 1));   /* read after write */
    assert_true(command(&h, &w, 1));   /* write after read (the read of the last epoch) */
    assert_true(command(&h, &w, 1));   /* write after write */
    assert_int_equal(h.barriers, 4);
    nu__hazards_fini(&h);
}

static void disjoint_ranges_and_pieces_do_not_serialise(void **state)
{
    nu__hazards h;
    nu__hazards_init(&h);
    for (uint64_t i = 0; i < 1000; i++) {
        nu__access w = acc(7, i * 64, i * 64 + 64, true); /* slices of one piece */
        assert_false(command(&h, &w, 1));
        nu__access o = acc(100 + i, 0, 64, true); /* other pieces */
        assert_false(command(&h, &o, 1));
    }
    assert_int_equal(h.barriers, 0);
    /* Touching bytes: [0,64) and [64,128) do not overlap; [63,65) overlaps both. */
    nu__access edge = acc(7, 63, 65, false);
    assert_true(command(&h, &edge, 1));
    /* The same range of the same offset in another piece is another memory. */
    nu__access other = acc(8, 63, 65, true);
    assert_false(command(&h, &other, 1));
    nu__hazards_fini(&h);
}

static void one_command_never_conflicts_with_itself(void **state)
{
    nu__hazards h;
    nu__hazards_init(&h);
    nu__access a[2] = {acc(1, 0, 64, false), acc(1, 64, 128, true)};
    assert_false(command(&h, a, 2));
    /* The next command reading what the first wrote needs the barrier. */
    nu__access r = acc(1, 100, 110, false);
    assert_true(command(&h, &r, 1));
    /* And one barrier settles several conflicts at once. */
    nu__access both[2] = {acc(1, 0, 10, true), acc(1, 100, 110, true)};
    assert_true(command(&h, both, 2));
    assert_int_equal(h.barriers, 2);
    nu__hazards_fini(&h);
}

static void barriers_carry_what_the_epoch_did(void **state)
{
    nu__hazards h;
    nu__hazards_init(&h);
    nu__access w = acc(1, 0, 4, true);
    w.stage = VK_PIPELINE_STAGE_2_COPY_BIT;
    w.access = VK_ACCESS_2_TRANSFER_WRITE_BIT;
    nu__access r = acc(2, 0, 4, false);
    int32_t use[2];
    assert_int_equal(nu__hazards_add(&h, &w, 1, use), NU_OK);
    assert_int_equal(use[0], -1);
    assert_int_equal(nu__hazards_add(&h, &r, 1, use), NU_OK);
    VkPipelineStageFlags2 s;
    VkAccessFlags2 a;
    nu__hazards_barrier(&h, &s, &a);
    assert_true(s & VK_PIPELINE_STAGE_2_COPY_BIT);
    assert_true(s & VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT);
    assert_int_equal(a, VK_ACCESS_2_TRANSFER_WRITE_BIT); /* only writes need making available */
    /* Uses stay across epochs. */
    nu__hazards_set_use(&h, 1, 0, 5);
    assert_int_equal(nu__hazards_get_use(&h, 1, 0), 5);
    assert_int_equal(nu__hazards_add(&h, &w, 1, use), NU_OK);
    assert_int_equal(use[0], 5);
    nu__hazards_fini(&h);
}

static void a_failed_add_changes_nothing(void **state)
{
    nu__hazards h;
    nu__hazards_init(&h);
    nu__access w = acc(1, 0, 4, true);
    nu__host_fail_after(0, 1);
    int32_t use[1];
    assert_int_equal(nu__hazards_add(&h, &w, 1, use), NU_ERROR_HOST_OUT_OF_MEMORY);
    nu__host_fail_after(-1, 0);
    assert_false(nu__hazards_conflict(&h, &w, 1));
    assert_int_equal(nu__hazards_add(&h, &w, 1, use), NU_OK);
    assert_true(nu__hazards_conflict(&h, &w, 1));
    nu__hazards_fini(&h);
}

/* By levels (a graph's schedule): a command goes one above the highest command it conflicts
 * with, whatever was recorded in between; independent commands share a level. */
static uint32_t level(nu__hazards *h, const nu__access *a, uint32_t n)
{
    uint32_t l = 99;
    assert_int_equal(nu__hazards_level(h, a, n, &l), NU_OK);
    return l;
}

static void levels_follow_conflicts_only(void **state)
{
    nu__hazards h;
    nu__hazards_init(&h);
    nu__access wa = acc(1, 0, 64, true), ra = acc(1, 0, 64, false), wb = acc(2, 0, 64, true);
    nu__access rb = acc(2, 0, 64, false), wc = acc(3, 0, 64, true);
    assert_int_equal(level(&h, &wa, 1), 0);  /* a = ... */
    assert_int_equal(level(&h, &ra, 1), 1);  /* ... = a: after the write */
    assert_int_equal(level(&h, &ra, 1), 1);  /* read after read: the same level */
    assert_int_equal(level(&h, &wb, 1), 0);  /* independent of all before it: level 0 again */
    assert_int_equal(level(&h, &wa, 1), 2);  /* write after the reads at level 1 */
    nu__access both[2] = {rb, wc};
    assert_int_equal(level(&h, both, 2), 1); /* reads b (written at 0), writes c (new) */
    assert_int_equal(level(&h, &wc, 1), 2);  /* write after write */
    /* Disjoint bytes of a piece, and other pieces' same offsets, order nothing. */
    nu__access far = acc(1, 64, 128, true), other = acc(9, 0, 64, true);
    assert_int_equal(level(&h, &far, 1), 0);
    assert_int_equal(level(&h, &other, 1), 0);
    assert_int_equal(h.barriers, 0); /* levels are no barriers: the schedule places them */
    nu__hazards_fini(&h);
}

/* Accesses made redundant by a later one covering them are dropped, and what a later command
 * conflicts with is still found at the right level. */
static void covered_accesses_keep_their_order(void **state)
{
    nu__hazards h;
    nu__hazards_init(&h);
    nu__access part = acc(1, 16, 32, true), whole_r = acc(1, 0, 64, false), whole_w = acc(1, 0, 64, true);
    assert_int_equal(level(&h, &part, 1), 0);     /* writes [16,32) */
    assert_int_equal(level(&h, &whole_r, 1), 1);  /* reads over it */
    /* A write inside the read range conflicts with the read at 1 (the write at 0 it covers
     * would give less). */
    nu__access inner = acc(1, 20, 24, true);
    assert_int_equal(level(&h, &inner, 1), 2);
    /* A chain on piece 50 that also reads piece 1 at rising levels: each read covers the one
     * before it (dropped), and a write after them all goes above the highest. */
    for (uint32_t i = 0; i < 100; i++) {
        nu__access step[2] = {acc(1, 0, 64, false), acc(50, 0, 4, true)};
        assert_int_equal(level(&h, step, 2), 3 + i); /* after inner (2), then after the last step */
    }
    assert_int_equal(level(&h, &whole_w, 1), 103);
    /* A read covering a read at a higher level does not replace it: a later write must still
     * go above the higher one. */
    nu__access w6 = acc(6, 0, 4, true), up[2] = {acc(6, 0, 4, false), acc(5, 0, 16, false)};
    nu__access wide = acc(5, 0, 64, false), w5 = acc(5, 0, 4, true);
    assert_int_equal(level(&h, &w6, 1), 0);
    assert_int_equal(level(&h, up, 2), 1);
    assert_int_equal(level(&h, &wide, 1), 0);
    assert_int_equal(level(&h, &w5, 1), 2);
    nu__hazards_fini(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(each_hazard_kind_and_nothing_else),
        cmocka_unit_test(disjoint_ranges_and_pieces_do_not_serialise),
        cmocka_unit_test(one_command_never_conflicts_with_itself),
        cmocka_unit_test(barriers_carry_what_the_epoch_did),
        cmocka_unit_test(a_failed_add_changes_nothing),
        cmocka_unit_test(levels_follow_conflicts_only),
        cmocka_unit_test(covered_accesses_keep_their_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
