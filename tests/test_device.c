/* test_device.c: enumerating, choosing and opening devices, several at once, and what they
 * report. */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#include "vk/device.h"

static void enumerate_lists_devices(void **state)
{
    uint32_t n = 0;
    NT_OK(nu_device_enumerate(NULL, 0, &n));
    assert_true(n >= 1);
    nu_device_info *infos = calloc(n, sizeof *infos);
    uint32_t m = 0;
    NT_OK(nu_device_enumerate(infos, n, &m));
    assert_int_equal(m, n);
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(infos[i].index, i);
        assert_true(strlen(infos[i].name) > 0);
        assert_true(infos[i].heap_count >= 1);
        assert_true(infos[i].memory_type_count >= 1);
        for (uint32_t t = 0; t < infos[i].memory_type_count; t++)
            assert_true(infos[i].memory_types[t].heap < infos[i].heap_count);
    }
    free(infos);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_device_enumerate(NULL, 3, &n));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_device_enumerate(NULL, 0, NULL));
}

static void the_default_device_reports_what_it_offers(void **state)
{
    nu_device *d = nt_open();
    const nu_device_info *info = nu_device_get_info(d);
    assert_true(info->features[NU_FEATURE_TIMELINE_SEMAPHORE]);
    assert_true(info->features[NU_FEATURE_SYNCHRONIZATION2]);
    assert_true(info->features[NU_FEATURE_DEBUG_UTILS]);
    assert_true(info->subgroup_size >= 1);
    assert_true(info->max_workgroup_invocations >= 128);
    assert_true(info->max_storage_buffer_range >= (1u << 27));
    assert_true(info->max_allocation_size > 0);
    assert_true(info->compute_queue_family != UINT32_MAX);
    assert_string_not_equal(nu_device_type_name(info->type), "");
    for (int f = 0; f < NU_FEATURE_COUNT; f++)
        assert_string_not_equal(nu_feature_name((nu_feature)f), "unknown");
    /* Matrix-unit shapes only with the feature (lavapipe has none); each a real product. */
    if (!info->features[NU_FEATURE_COOPERATIVE_MATRIX])
        assert_int_equal(info->cooperative_matrix_count, 0);
    assert_true(info->cooperative_matrix_count <= NU_MAX_COOPERATIVE_MATRIX_SHAPES);
    for (uint32_t i = 0; i < info->cooperative_matrix_count; i++) {
        const nu_cooperative_matrix_shape *cm = &info->cooperative_matrix[i];
        assert_true(cm->m >= 1 && cm->n >= 1 && cm->k >= 1);
        assert_true(cm->a <= NU_DTYPE_COUNT && cm->result <= NU_DTYPE_COUNT);
    }
    const nu_memory_choice *m = nu_device_memory_choice(d);
    assert_true(m->shared_type < info->memory_type_count);
    assert_true(m->private_type < info->memory_type_count);
    assert_true(info->memory_types[m->shared_type].flags & NU_MEMORY_HOST_VISIBLE);
    assert_true(strlen(m->reason) > 10);
    if (info->unified_memory)
        assert_true(m->shared_device_local);
    /* The default memory limit is the size of the heap private buffers use. */
    nu_memory_stats s;
    NT_OK(nu_memory_get_stats(d, &s));
    assert_int_equal(s.memory_limit, info->heaps[info->memory_types[m->private_type].heap].size);
    assert_int_equal(s.cache_limit, s.memory_limit);
    assert_int_equal(s.active + s.cache + s.buffers, 0);
    nt_close(d);
}

static void devices_are_chosen_by_name_or_index(void **state)
{
    nu_device_info info;
    uint32_t n = 0;
    NT_OK(nu_device_enumerate(&info, 1, &n));
    /* By index. */
    nu_device_desc desc = {.select = "0", .validation = true};
    nu_device *d;
    NT_OK(nu_device_open(&desc, &d));
    assert_string_equal(nu_device_get_info(d)->name, info.name);
    nt_close(d);
    /* By a case-changed substring of the name. */
    char sub[8] = {0};
    for (int i = 0; i < 4 && info.name[i]; i++)
        sub[i] = (char)(info.name[i] ^ ((info.name[i] >= 'a' && info.name[i] <= 'z') ? 0x20 : 0));
    desc.select = sub;
    NT_OK(nu_device_open(&desc, &d));
    assert_int_equal(nu_device_get_info(d)->index, 0);
    nt_close(d);
}

static void unknown_devices_are_refused_with_the_choices(void **state)
{
    nu_device *d = (nu_device *)1;
    nu_device_desc desc = {.select = "no-such-gpu"};
    NT_STATUS(NU_ERROR_NO_DEVICE, nu_device_open(&desc, &d));
    assert_null(d);
    const char *msg = nu_error_message(NULL);
    assert_non_null(strstr(msg, "no-such-gpu"));
    assert_non_null(strstr(msg, "0: ")); /* lists what there is */
    desc.select = "4096";
    NT_STATUS(NU_ERROR_NO_DEVICE, nu_device_open(&desc, &d));
    /* The environment variable, when the descriptor names nothing. */
    setenv("NUVEC_DEVICE", "still-no-such-gpu", 1);
    NT_STATUS(NU_ERROR_NO_DEVICE, nu_device_open(NULL, &d));
    assert_non_null(strstr(nu_error_message(NULL), "NUVEC_DEVICE"));
    setenv("NUVEC_DEVICE", "0", 1);
    NT_OK(nu_device_open(NULL, &d));
    nt_close(d);
    unsetenv("NUVEC_DEVICE");
    nu_device_desc bad = {.shared_memory = (nu_shared_memory)9};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_device_open(&bad, &d));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_device_open(NULL, NULL));
}

static void several_devices_are_independent(void **state)
{
    nu_device *a = nt_open(), *b = nt_open();
    nu_buffer *x, *y;
    NT_OK(nu_buffer_from(a, "a", 2, NU_STORAGE_PRIVATE, &x));
    NT_OK(nu_buffer_from(b, "bb", 3, NU_STORAGE_PRIVATE, &y));
    NT_OK(nu_memory_set_limit(a, 1 << 20, NULL));
    nu_memory_stats sa, sb;
    nu_memory_get_stats(a, &sa);
    nu_memory_get_stats(b, &sb);
    assert_int_equal(sa.buffers, 1);
    assert_int_equal(sb.buffers, 1);
    assert_int_equal(sa.memory_limit, 1 << 20);
    assert_true(sb.memory_limit > (1u << 20));
    /* A failure on one device leaves its message there, not on the other. */
    nu_buffer *big;
    NT_STATUS(NU_ERROR_OUT_OF_MEMORY, nu_buffer_new(a, 2 << 20, NU_STORAGE_SHARED, &big));
    assert_true(strlen(nu_error_message(a)) > 0);
    assert_string_equal(nu_error_message(b), "");
    char out[3];
    NT_OK(nu_buffer_read(y, 0, out, 3));
    assert_string_equal(out, "bb");
    NT_OK(nu_buffer_free(x));
    nt_close(a);
    NT_OK(nu_buffer_read(y, 0, out, 3));
    NT_OK(nu_buffer_free(y));
    nt_close(b);
}

static void shared_memory_can_be_chosen(void **state)
{
    nu_device_desc desc = {.validation = true, .shared_memory = NU_SHARED_MEMORY_HOST};
    nu_device *d;
    NT_OK(nu_device_open(&desc, &d));
    const nu_memory_choice *m = nu_device_memory_choice(d);
    assert_true(nu_device_get_info(d)->memory_types[m->shared_type].flags & NU_MEMORY_HOST_VISIBLE);
    nu_buffer *b;
    NT_OK(nu_buffer_from(d, "x", 2, NU_STORAGE_SHARED, &b));
    NT_OK(nu_buffer_free(b));
    nt_close(d);
}

static void status_strings_name_every_status(void **state)
{
    for (int s = 0; s < NU_STATUS_COUNT; s++)
        assert_string_not_equal(nu_status_string((nu_status)s), "unknown status");
    assert_string_equal(nu_status_string((nu_status)999), "unknown status");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(enumerate_lists_devices),
        cmocka_unit_test(the_default_device_reports_what_it_offers),
        cmocka_unit_test(devices_are_chosen_by_name_or_index),
        cmocka_unit_test(unknown_devices_are_refused_with_the_choices),
        cmocka_unit_test(several_devices_are_independent),
        cmocka_unit_test(shared_memory_can_be_chosen),
        cmocka_unit_test(status_strings_name_every_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
