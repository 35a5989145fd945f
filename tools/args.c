/* args.c: option values read strictly (args.h). */
#include "args.h"

#include <errno.h>
#include <stdlib.h>

bool cli_arg_u64(const char *text, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!text || *text < '0' || *text > '9') /* strtoull would take a sign or spaces */
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return false;
    *out = (uint64_t)v;
    return true;
}

bool cli_arg_u32(const char *text, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint64_t v;
    if (!cli_arg_u64(text, lo, hi, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

bool cli_arg_double(const char *text, double lo, double hi, double *out)
{
    if (!text || !*text)
        return false;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !(v >= lo && v <= hi))
        return false;
    *out = v;
    return true;
}

void cli_arg_report(FILE *f, const char *command, const char *arg, const char *value, const char *why)
{
    bool with_value = value && arg[0] == '-';
    bool with_why = why && *why;
    fprintf(f, "nuvec %s: bad argument '%s'%s%s%s%s\n", command, arg, with_value ? " " : "", with_value ? value : "",
            with_why ? ": " : "", with_why ? why : "");
}
