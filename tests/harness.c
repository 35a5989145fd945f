/* harness.c: devices for tests (see harness.h). */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/host.h"

/* Every test counts host allocations (leak and failure-injection checks), from the start. */
__attribute__((constructor)) static void count_host_allocations(void) { nu__host_count(1); }

nu_device *nt_open(void)
{
    nu_device_desc desc = {.validation = true};
    nu_device *d = NULL;
    nu_status st = nu_device_open(&desc, &d);
    if (st != NU_OK)
        fail_msg("nu_device_open: %s: %s", nu_status_string(st), nu_error_message(NULL));
    return d;
}

nu_device *nt_open_matrix_units(const char *test)
{
    nu_device_desc desc = {.validation = false};
    nu_device *d = NULL;
    nu_status st = nu_device_open(&desc, &d);
    if (st != NU_OK)
        fail_msg("nu_device_open: %s: %s", nu_status_string(st), nu_error_message(NULL));
    const nu_device_info *info = nu_device_get_info(d);
    if (!info->features[NU_FEATURE_COOPERATIVE_MATRIX]) {
        printf("%s: skipped: %s has no VK_KHR_cooperative_matrix\n", test, info->name);
        nu_device_close(d);
        skip();
    }
    return d;
}

nu_device *nt_open_subgroup_arithmetic(const char *test)
{
    nu_device *d = nt_open();
    const nu_device_info *info = nu_device_get_info(d);
    if (!(info->subgroup_operations & NU_SUBGROUP_ARITHMETIC)) {
        printf("%s: skipped: %s has no subgroup arithmetic\n", test, info->name);
        nt_close(d);
        skip();
    }
    return d;
}

/* cmocka (1.1) fails a group teardown without failing the program: a validation error found by
 * nt_close there would go unreported to ctest. The exit status says so instead. */
static int validation_failed;
static void exit_failed(void)
{
    if (validation_failed) {
        fprintf(stderr, "harness: the validation layer reported errors (see above): failing\n");
        fflush(NULL);
        _exit(1);
    }
}

void nt_close(nu_device *device)
{
    if (!device)
        return; /* the open failed, and said so */
    uint32_t errors = nu_device_validation_errors(device);
    const char *last = errors ? nu_error_message(device) : "";
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", last);
    nu_device_close(device);
    if (errors) {
        if (!validation_failed++)
            atexit(exit_failed);
        fail_msg("the validation layer reported %u error(s); last: %s", errors, msg);
    }
}

char *nt_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = 0;
    fclose(f);
    return text;
}

const char *nt_tmp_dir(void)
{
    const char *t = getenv("NUVEC_TEST_TMP");
    return t && *t ? t : "/tmp";
}

uint64_t nt_rand(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
