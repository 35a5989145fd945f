/* args.h: option values of the `nuvec` subcommands (and of `nuvec bench`), read strictly: the
 * whole text, in decimal, within the range the option allows. A value that is not one gets
 * exit status 2 and a message naming the option, never a silent default or a wrapped number. */
#ifndef ARGS_H
#define ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* A whole number lo..hi written in decimal digits (no sign, no spaces, nothing after). */
bool cli_arg_u64(const char *text, uint64_t lo, uint64_t hi, uint64_t *out);
bool cli_arg_u32(const char *text, uint32_t lo, uint32_t hi, uint32_t *out);
/* A decimal number (strtod's forms) lo..hi; NaN is in no range. */
bool cli_arg_double(const char *text, double lo, double hi, double *out);

/* "nuvec COMMAND: bad argument 'ARG' VALUE: WHY" on f (VALUE where ARG is an option and a value
 * follows it, WHY where not empty). */
void cli_arg_report(FILE *f, const char *command, const char *arg, const char *value, const char *why);

#endif
