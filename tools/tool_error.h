/* tool_error.h: failure messages of the tools' own code (the GGUF writer, make-gguf, quantize),
 * which, like libnuvec_llm, sees only nuvec's public headers and so keeps its messages apart from
 * nuvec's: a tools function that fails records what went wrong with tool_fail (wrapping nuvec's
 * nu_error_message where a nuvec call failed), and its caller reads tool_error_message().
 * Thread safety: the message is per thread. */
#ifndef TOOLS_TOOL_ERROR_H
#define TOOLS_TOOL_ERROR_H

#include "nuvec/status.h"

/* Records `fmt` as this thread's last tools failure message; returns `status`. */
nu_status tool_fail(nu_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The message of this thread's last tools failure ("" before any). Valid until the next tool_fail
 * on this thread. */
const char *tool_error_message(void);

#endif
