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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(each_hazard_kind_and_nothing_else),
        cmocka_unit_test(disjoint_ranges_and_pieces_do_not_serialise),
        cmocka_unit_test(one_command_never_conflicts_with_itself),
        cmocka_unit_test(barriers_carry_what_the_epoch_did),
        cmocka_unit_test(a_failed_add_changes_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
