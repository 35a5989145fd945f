/* test_capture.c: RenderDoc captures. The reference's capture test translated (the refusals,
 * one capture at a time, the file written at the path given, an existing file refused), and a
 * capture on lavapipe opened with RenderDoc's own renderdoccmd, in which the recorded dispatches
 * are found by their kernels' names. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/host.h"

static char dir[512];

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* Runs first: no capture layer asked for. */
static void capture_paths_and_the_environment_are_checked(void **state)
{
    unsetenv("NUVEC_CAPTURE");
    unsetenv("ENABLE_VULKAN_RENDERDOC_CAPTURE");
    snprintf(dir, sizeof dir, "%s/nuvec-capture-%d", nt_tmp_dir(), (int)getpid());
    mkdir(dir, 0755);
    nu_device *d = nt_open();
    char p[600];
    snprintf(p, sizeof p, "%s/trace.txt", dir);
    NT_STATUS(NU_ERROR_CAPTURE, nu_capture_start(d, p));
    assert_non_null(strstr(nu_error_message(d), ".rdc"));
    snprintf(p, sizeof p, "%s/trace.rdc", dir);
    NT_STATUS(NU_ERROR_CAPTURE, nu_capture_start(d, p));
    assert_non_null(strstr(nu_error_message(d), "NUVEC_CAPTURE=1"));
    NT_OK(nu_capture_stop(d)); /* no capture running: nothing to do */
    nt_close(d);
}

static void a_capture_holds_the_dispatches_by_name(void **state)
{
    setenv("NUVEC_CAPTURE", "1", 1);
    int64_t live = nu__host_live(); /* nuvec's own allocations: none may be left */
    nu_device *d = nt_open();
    char p[600], again[600], xml[700], cmd[2048];
    snprintf(p, sizeof p, "%s/trace.rdc", dir);
    snprintf(again, sizeof again, "%s/again.rdc", dir);
    NT_OK(nu_capture_start(d, p));
    NT_STATUS(NU_ERROR_CAPTURE, nu_capture_start(d, again)); /* one at a time */
    assert_non_null(strstr(nu_error_message(d), "another capture"));

    nu_kernel *add;
    NT_OK(nu_kernel_builtin(d, "add_f32", &add));
    nu_buffer *a, *b;
    NT_OK(nu_buffer_new(d, 4096, NU_STORAGE_PRIVATE, &a));
    NT_OK(nu_buffer_new(d, 4096, NU_STORAGE_PRIVATE, &b));
    NT_OK(nu_buffer_set_name(a, "weights"));
    NT_OK(nu_buffer_set_name(b, "activations"));
    assert_string_equal(nu_buffer_name(b), "activations");
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_OK(nu_commands_set_name(c, "layer 0"));
    NT_OK(nu_commands_fill(c, a, 0, 4096, 0x3f800000u));
    uint32_t n = 1024, groups[3] = {4, 1, 1};
    nu_binding bind[3] = {{b, NU_ACCESS_WRITE, 0, 0}, {a, NU_ACCESS_READ, 0, 0}, {a, NU_ACCESS_READ, 0, 0}};
    NT_OK(nu_commands_dispatch(c, add, groups, bind, 3, &n, 4));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_capture_stop(d)); /* waits for the work */
    assert_true(exists(p));
    NT_OK(nu_capture_stop(d));
    NT_STATUS(NU_ERROR_CAPTURE, nu_capture_start(d, p)); /* the file exists now */
    assert_non_null(strstr(nu_error_message(d), "already exists"));
    nu_commands_free(c);
    nu_buffer_free(a);
    nu_buffer_free(b);
    nu_kernel_free(add);
    nt_close(d);
    unsetenv("NUVEC_CAPTURE");
    unsetenv("ENABLE_VULKAN_RENDERDOC_CAPTURE");
    assert_int_equal(nu__host_live(), live);

    /* RenderDoc's own tool opens it; the dispatches are there under the kernels' names. */
    snprintf(xml, sizeof xml, "%s/trace.xml", dir);
    char log[600];
    snprintf(log, sizeof log, "%s/convert.log", dir);
    snprintf(cmd, sizeof cmd, "renderdoccmd convert -f '%s' -o '%s' -c xml > '%s' 2>&1", p, xml, log);
    if (system(cmd) != 0) {
        char *said = nt_read_file(log);
        fail_msg("renderdoccmd could not open %s (is renderdoccmd installed? make test installs it); it said: %.800s",
                 p, said);
    }
    unlink(log);
    char *text = nt_read_file(xml);
    assert_non_null(strstr(text, "vkCmdDispatch"));
    assert_non_null(strstr(text, "add_f32"));
    assert_non_null(strstr(text, "fill_u32"));
    assert_non_null(strstr(text, "add_f32(activations, weights, weights)")); /* the dispatch's label */
    assert_non_null(strstr(text, "layer 0"));                                /* the command buffer's name */
    free(text);
    unlink(xml);
    unlink(p);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(capture_paths_and_the_environment_are_checked),
        cmocka_unit_test(a_capture_holds_the_dispatches_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
