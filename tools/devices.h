/* devices.h: the commands' --devices LIST and --split-weights W,W,... (nuvec generate, chat, serve
 * and bench llm): the devices a model is split over by layers (nu_llm_model_open_split), each by
 * index or name as --device takes one, the same one more than once too; and opening the model on
 * them, or on the one device. */
#ifndef TOOLS_DEVICES_H
#define TOOLS_DEVICES_H

#include <stdbool.h>
#include <stddef.h>

#include "nuvec.h"
#include "nuvec_llm.h"

typedef struct cli_devices {
    char names[NU_LLM_MAX_DEVICES][64]; /* as given */
    nu_device *device[NU_LLM_MAX_DEVICES];
    uint32_t count;                     /* 0: --devices not given */
    double weights[NU_LLM_MAX_DEVICES];
    uint32_t weight_count;              /* 0: --split-weights not given (by free memory) */
} cli_devices;

/* --devices "0,1" (indices or names, commas between; 1 to NU_LLM_MAX_DEVICES): false with *why. */
bool cli_devices_parse(cli_devices *d, const char *list, char *why, size_t why_size);
/* --split-weights "3,1" (positive numbers, one a device): false with *why. */
bool cli_split_weights_parse(cli_devices *d, const char *list, char *why, size_t why_size);
/* --split MODE: "layer" (the only split nuvec runs) or a refusal with *why. */
bool cli_split_mode_parse(const char *mode, char *why, size_t why_size);
/* Whether `arg` is --devices, --split-weights or --split: then *ok says whether `value` (not NULL)
 * is good for it (else *why says why). */
bool cli_devices_option(cli_devices *d, const char *arg, const char *value, bool *ok, char *why, size_t why_size);
/* The checks across options: weights for as many devices as --devices names, and --device not with
 * --devices (`single`: --device's value or NULL). */
bool cli_devices_check(const cli_devices *d, const char *single, char *why, size_t why_size);

/* Opens the devices (validation as `validation`); on failure closes what it opened and says why. */
nu_status cli_devices_open(cli_devices *d, bool validation, char *why, size_t why_size);
void cli_devices_close(cli_devices *d);
/* The model on the devices (split by layers where there are several), or on `single` where
 * --devices was not given. */
nu_status cli_model_open(const cli_devices *d, nu_device *single, const char *path, const nu_llm_model_options *o,
                         nu_llm_model **out);
/* "layers 0-15 on NAME (index i), 16-31 on ..." for a split model ("" for one device). */
void cli_describe_split(const nu_llm_model *m, char *out, size_t size);

#endif
