/* llm_util.h: what the libnuvec_llm tests share: LLM_OK (a call that must succeed; on failure the
 * test fails with its status and nu_llm_error_message()) and LLM_STATUS (a call that must return
 * `status`, with a message when it fails). */
#ifndef NUVEC_TEST_LLM_UTIL_H
#define NUVEC_TEST_LLM_UTIL_H

#include "harness.h"
#include "nuvec_llm.h"

#define LLM_OK(expr)                                                                           \
    do {                                                                                       \
        nu_status st_ = (expr);                                                                \
        if (st_ != NU_OK)                                                                      \
            fail_msg("%s: %s: %s", #expr, nu_status_string(st_), nu_llm_error_message());      \
    } while (0)
#define LLM_STATUS(status, expr)                                                               \
    do {                                                                                       \
        nu_status st_ = (expr);                                                                \
        if (st_ != (status))                                                                   \
            fail_msg("%s: expected %s, got %s: %s", #expr, nu_status_string(status),           \
                     nu_status_string(st_), nu_llm_error_message());                           \
        if (st_ != NU_OK && !nu_llm_error_message()[0])                                        \
            fail_msg("%s: no message", #expr);                                                 \
    } while (0)

#endif
