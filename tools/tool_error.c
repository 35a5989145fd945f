/* tool_error.c: the tools' failure messages (tool_error.h). */
#include "tool_error.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char message[1024];

nu_status tool_fail(nu_status status, const char *fmt, ...)
{
    char buf[sizeof message]; /* fmt's arguments may be the message itself */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    snprintf(message, sizeof message, "%s", buf);
    return status;
}

const char *tool_error_message(void) { return message; }
