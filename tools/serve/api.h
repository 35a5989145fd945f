/* api.h: the OpenAI-compatible schema of `nuvec serve`: request bodies parsed into plain structs
 * (every field's type and range checked, the parameter named in the error), and the response,
 * chunk and error bodies written. Pure functions of their inputs (no model, no HTTP), so the
 * fuzz target (fuzz/fuzz_serve_request.c) drives the parser directly. */
#ifndef SERVE_API_H
#define SERVE_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum api_kind {
    API_CHAT,        /* POST /v1/chat/completions */
    API_COMPLETION,  /* POST /v1/completions */
    API_TOKENIZE,    /* POST /tokenize {"content": text, "add_special": bool, "parse_special": bool} */
    API_DETOKENIZE,  /* POST /detokenize {"tokens": [ids]} */
    API_TEMPLATE,    /* POST /apply-template {"messages": [...]} */
} api_kind;

/* What a request may ask for at most (the server's limits). */
typedef struct api_limits {
    uint32_t max_tokens;      /* max_tokens above this is refused */
    uint32_t max_stop;        /* stop strings (OpenAI: 4) */
    uint32_t max_stop_bytes;  /* bytes of one stop string */
    uint32_t max_ids;         /* token ids in a prompt or /detokenize body */
} api_limits;

/* A parsed request. Strings are NUL-terminated copies owned by the struct (api_params_clear). */
typedef struct api_params {
    api_kind kind;
    char *model;              /* "model", NULL when absent */
    char *messages;           /* chat, apply-template: the messages as JSON text, each content a string */
    char *prompt;             /* completion: the prompt's text; tokenize: content (NULL: ids given) */
    int32_t *ids;             /* completion: a prompt of token ids; detokenize: the tokens */
    uint32_t n_ids;
    bool stream, include_usage, return_tokens;
    bool ignore_eos;          /* extension (llama.cpp's server has it too): generate through
                               * end-of-generation tokens, for benchmarks of fixed lengths */
    uint32_t max_tokens;      /* 0: until the end of the context (or the server's limit) */
    float temperature;        /* default 1, as OpenAI's */
    float top_p;              /* default 1 */
    uint32_t top_k;           /* default 0 (off) */
    uint64_t seed;
    bool has_seed;
    char **stop;              /* n_stop strings, none empty */
    uint32_t n_stop;
    bool add_special;         /* tokenize: bos where the vocabulary adds one (default true) */
    bool with_pieces;         /* tokenize: {"id", "piece"} objects instead of ids */
} api_params;

/* An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}. */
typedef struct api_error {
    int status;               /* the HTTP status */
    const char *type;         /* "invalid_request_error", "not_found_error", "server_error", ... */
    const char *code;         /* NULL, or "context_length_exceeded", "model_not_found", ... */
    char param[48];           /* the parameter at fault ("" for none) */
    char message[320];
} api_error;

/* Sets *err (printf-style message) and returns status. */
int api_fail(api_error *err, int status, const char *type, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Parses body[0 .. len) as a request of `kind`: 0 with *out filled, or an HTTP status (400 for
 * malformed JSON, a wrong type or a value out of range, naming the parameter) with *err set
 * and *out cleared. Unknown members are ignored, as OpenAI's server does; parameters nuvec does
 * not run (n > 1, logprobs, penalties, tools, response_format other than text) are refused by
 * name rather than ignored. */
int api_parse(api_kind kind, const char *body, size_t len, const api_limits *lim, api_params *out, api_error *err);
void api_params_clear(api_params *p);

/* The error body (malloc'd JSON text). */
char *api_error_json(const api_error *err);

/* The text s[0 .. len) with each invalid UTF-8 sequence (and each NUL, which the C strings
 * these texts travel in cannot hold) replaced by U+FFFD, appended to
 * (*buf, *n, *cap) (grown with realloc; NUL-terminated): what JSON may carry. false when out of
 * memory. */
bool api_append_utf8(char **buf, size_t *n, size_t *cap, const char *s, size_t len);

#endif
