/* respond.h: generation responses in OpenAI's shapes (respond.c). The request must be done for
 * respond_whole and for a finishing or usage chunk (its counts are final then). */
#ifndef SERVE_RESPOND_H
#define SERVE_RESPOND_H

#include <stdbool.h>
#include <stddef.h>

#include "engine.h"

/* {"id", "object": "chat.completion" | "text_completion", "created", "model", "choices": [one],
 * "usage": {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details.cached_tokens}};
 * with return_tokens, the choice has "tokens" (the ids generated). malloc'd; NULL when out of
 * memory. */
char *respond_whole(const srv_request *r, const char *model);

/* What one stream chunk carries. */
typedef struct respond_delta {
    bool role;              /* chat's first chunk: delta.role "assistant" */
    const char *text;       /* NULL: no content */
    const int32_t *toks;    /* with return_tokens: the ids since the last chunk */
    size_t n_toks;
    bool finish;            /* the last chunk with a choice: finish_reason set */
    bool usage_only;        /* stream_options.include_usage's chunk: no choice, usage */
} respond_delta;

char *respond_chunk(const srv_request *r, const char *model, const respond_delta *d);

#endif
