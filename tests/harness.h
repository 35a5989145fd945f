/* harness.h: what every test uses: cmocka, and devices opened under validation. */
#ifndef NU_TEST_HARNESS_H
#define NU_TEST_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "nuvec.h"

/* Opens the default device (NUVEC_DEVICE may choose) with the validation layer and
 * synchronisation validation on; fails the test if it cannot. */
nu_device *nt_open(void);
/* The default device opened without the validation layer for a test of the matrix-unit kernels
 * (Debian 12's layer predates VK_KHR_cooperative_matrix, and nuvec leaves the extension off under
 * it); where the device has no cooperative matrices (lavapipe) the test is skipped, saying so
 * under the test's name. */
nu_device *nt_open_matrix_units(const char *test);
/* nt_open, for a test of kernels that need subgroup arithmetic: where the device has none the
 * test is skipped, saying so under the test's name. */
nu_device *nt_open_subgroup_arithmetic(const char *test);
/* Closes it, failing the test if the validation layer reported any error. */
void nt_close(nu_device *device);
/* Fails the test, printing the status and message, unless st == NU_OK. */
#define NT_OK(expr)                                                                            \
    do {                                                                                       \
        nu_status nt_st_ = (expr);                                                             \
        if (nt_st_ != NU_OK)                                                                   \
            fail_msg("%s: %s: %s", #expr, nu_status_string(nt_st_), nu_error_message(NULL));   \
    } while (0)
/* Fails the test unless `expr` returns `status`, and prints the message it left. */
#define NT_STATUS(status, expr)                                                                \
    do {                                                                                       \
        nu_status nt_st_ = (expr);                                                             \
        if (nt_st_ != (status))                                                                \
            fail_msg("%s: expected %s, got %s: %s", #expr, nu_status_string(status),           \
                     nu_status_string(nt_st_), nu_error_message(NULL));                        \
    } while (0)
/* The whole file, NUL-terminated (free() it); fails the test when it cannot be read. */
char *nt_read_file(const char *path);
/* The folder tests write their files in: NUVEC_TEST_TMP, else /tmp. */
const char *nt_tmp_dir(void);
/* A deterministic pseudo-random generator for test data. */
uint64_t nt_rand(uint64_t *state);

#endif
