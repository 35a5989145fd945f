/* llm_memory.h: a model's device memory (nu_llm_model_memory) as the tools report it
 * (tools/llm_memory.c): as "device_memory": {weights, kv_cache, activations, total, ...} in bytes
 * in `parent`, for `nuvec generate --json` and `nuvec bench llm --json`, or one line for people. */
#ifndef TOOLS_LLM_MEMORY_H
#define TOOLS_LLM_MEMORY_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "nuvec_llm.h"

void cli_llm_memory_json(cJSON *parent, const nu_llm_model *m);
void cli_llm_memory_line(FILE *f, const nu_llm_model *m);

#endif
