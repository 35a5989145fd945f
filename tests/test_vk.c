/* test_vk.c: the Vulkan loader and its drivers (vk.c). The drivers the process's first instance
 * loads stay loaded: after a device is closed they are still there, and opening and closing
 * devices again loads no shared object anew (the loader would otherwise load and unload every
 * driver with each instance; NVIDIA's can be loaded only ~32 times per process). Runs in its
 * own process, so the first device opened here is the process's first. */
#include "harness.h"

#include <link.h>
#include <stdlib.h>
#include <string.h>

typedef struct objects {
    char **names;
    size_t count;
    unsigned long long adds; /* objects ever loaded into the process (dlpi_adds) */
} objects;

static int note(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    objects *o = arg;
    o->adds = info->dlpi_adds;
    if (info->dlpi_name && *info->dlpi_name) {
        o->names = realloc(o->names, (o->count + 1) * sizeof *o->names);
        o->names[o->count++] = strdup(info->dlpi_name);
    }
    return 0;
}

static objects loaded_now(void)
{
    objects o = {0};
    dl_iterate_phdr(note, &o);
    return o;
}

static bool has(const objects *o, const char *name)
{
    for (size_t i = 0; i < o->count; i++)
        if (strcmp(o->names[i], name) == 0)
            return true;
    return false;
}

static void drop(objects *o)
{
    for (size_t i = 0; i < o->count; i++)
        free(o->names[i]);
    free(o->names);
}

static void drivers_stay_loaded_after_the_first_device(void **state)
{
    objects at_start = loaded_now();
    nu_device *d = nt_open();
    objects while_open = loaded_now();
    nt_close(d);
    objects after_close = loaded_now();

    /* Everything the first device brought in (the loader, the drivers, the layers) is kept. */
    size_t brought = 0;
    for (size_t i = 0; i < while_open.count; i++) {
        if (has(&at_start, while_open.names[i]))
            continue;
        brought++;
        if (!has(&after_close, while_open.names[i]))
            fail_msg("%s was loaded for the first device and unloaded when it closed", while_open.names[i]);
    }
    assert_true(brought >= 2); /* at least the loader and one driver */

    /* 40 more devices in turn load nothing again. */
    for (int i = 0; i < 40; i++) {
        d = nt_open();
        nt_close(d);
    }
    objects after_cycles = loaded_now();
    if (after_cycles.adds != after_close.adds)
        fail_msg("40 open/close cycles loaded %llu shared objects anew (drivers reloaded per device)",
                 after_cycles.adds - after_close.adds);
    drop(&at_start);
    drop(&while_open);
    drop(&after_close);
    drop(&after_cycles);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(drivers_stay_loaded_after_the_first_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
