/* nuvec_llm/chat.h: chat templates. A model's chat template (GGUF tokenizer.chat_template, or a
 * Hugging Face folder's tokenizer_config.json chat_template) is a Jinja program that turns a
 * conversation into the prompt the model was trained on. nuvec renders it with its own Jinja
 * engine (C, no Python), which aims at byte-for-byte what Hugging Face's apply_chat_template
 * renders: Jinja2 3.1's semantics in an ImmutableSandboxedEnvironment with trim_blocks,
 * lstrip_blocks and the loopcontrols extension; transformers' tojson (json.dumps with
 * ensure_ascii=False, indent, separators, sort_keys), raise_exception(message),
 * strftime_now(format) and {% generation %} blocks.
 *
 * Covered: {{ }}, {% %} and {# #} with Jinja2's whitespace control (-, +, trim_blocks,
 * lstrip_blocks), raw blocks; for (else, loop filters, recursive, the loop variable),
 * if/elif/else, set (names, tuples, namespace attributes, blocks with filters), macros (defaults,
 * varargs, kwargs, caller), call and filter blocks, with, break/continue; Python's values as
 * Jinja2 sees them (None, bools, 64-bit ints, floats printed as Python prints them, strings,
 * lists, tuples, dicts in insertion order, Undefined as Jinja2's default Undefined), operators,
 * comparisons, slicing, the string, dict and list methods templates call, the sandbox's refusals
 * (list.append and other mutations raise, as in Hugging Face), and Jinja2's builtin filters and
 * tests except those named below.
 * Refused by name (NU_ERROR_UNSUPPORTED), never rendered differently: extends, include, import,
 * block, autoescape; the filters groupby, random, urlize, wordwrap, filesizeformat, pprint,
 * xmlattr, urlencode, striptags; lipsum; printing a function or a generator (Python prints an
 * address); a macro made in a for loop and called after it (Jinja2 reads its internal 'missing'
 * sentinel there); integers beyond 64 bits; \N{...} escapes; non-ASCII names; a few string
 * methods (casefold, encode, expandtabs, translate, ..., named when called). Unknown filters and
 * tests fail at parse time, or when run inside an if, as Jinja2 does.
 *
 * Limits (nu_llm_render_options) bound a render's steps, nesting, memory and output, so that a
 * hostile template can neither hang nor exhaust memory; the parser bounds nesting (64 levels of
 * blocks, about 100 of brackets) and takes at most 16 MiB of source.
 *
 * Thread safety: a parsed template is immutable; any number of threads may render it at once.
 * Failures set nu_llm_error_message() on the calling thread, as all nu_llm_ calls. */
#ifndef NUVEC_LLM_CHAT_H
#define NUVEC_LLM_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nuvec/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nu_llm_template nu_llm_template;

/* What went wrong, for callers that answer differently (a server returns RAISED's message to
 * the client as a bad request). */
typedef enum nu_llm_template_failure {
    NU_LLM_TEMPLATE_OK = 0,
    NU_LLM_TEMPLATE_SYNTAX,      /* parse: not valid Jinja (Jinja2 refuses it too): NU_ERROR_FORMAT */
    NU_LLM_TEMPLATE_UNSUPPORTED, /* a construct the engine lacks, named: NU_ERROR_UNSUPPORTED */
    NU_LLM_TEMPLATE_RAISED,      /* the template called raise_exception(message): NU_ERROR_FORMAT */
    NU_LLM_TEMPLATE_ERROR,       /* an error Jinja2 raises too: an undefined value used, a type
                                  * error, an unsafe attribute, ...: NU_ERROR_FORMAT */
    NU_LLM_TEMPLATE_LIMIT,       /* a limit of nu_llm_render_options: NU_ERROR_OUT_OF_RANGE */
    NU_LLM_TEMPLATE_ARGUMENT,    /* NULL pointers, a source that is not UTF-8 or over 16 MiB, a
                                  * context that is not a JSON object: NU_ERROR_INVALID_ARGUMENT */
    NU_LLM_TEMPLATE_MEMORY,      /* out of host memory: NU_ERROR_HOST_OUT_OF_MEMORY */
} nu_llm_template_failure;

typedef struct nu_llm_template_error {
    nu_llm_template_failure kind;
    uint32_t line;               /* the template's line (1-based); 0 when none applies */
    char message[512];           /* RAISED: the template's message as given (truncated to fit);
                                  * otherwise the engine's, as nu_llm_error_message() without
                                  * the line */
} nu_llm_template_error;

/* Parses `length` bytes of Jinja source (UTF-8; \r\n and \r read as \n, and one final newline
 * dropped, as Jinja2). NU_ERROR_FORMAT for a syntax error, NU_ERROR_UNSUPPORTED for a construct
 * named above, NU_ERROR_INVALID_ARGUMENT (NULL pointers, invalid UTF-8, a source over 16 MiB),
 * NU_ERROR_HOST_OUT_OF_MEMORY; the message names the line. `error` may be NULL; it is filled
 * on success too (kind OK). */
nu_status nu_llm_template_parse(const char *source, size_t length, nu_llm_template **out,
                                nu_llm_template_error *error);
void nu_llm_template_free(nu_llm_template *tpl);

/* Zero means default. */
typedef struct nu_llm_render_options {
    int64_t now;            /* strftime_now's time: seconds since 1970 UTC, shown in the local
                             * time zone (TZ); 0: the clock's current time */
    size_t output_limit;    /* bytes of output, and of any block captured on the way: 16 MiB */
    size_t memory_limit;    /* bytes of host memory the render may take: 256 MiB */
    uint64_t step_limit;    /* evaluation steps (an expression, a statement, a loop iteration, or
                             * 64 bytes of string work each): 50,000,000 (about a second) */
    uint32_t depth_limit;   /* nesting of evaluation (calls, recursive loops, nested expressions):
                             * 1000, about 200 levels of macro recursion (Jinja2 under Python's
                             * recursion limit takes about 190); 1000 need about 256 KiB of stack */
} nu_llm_render_options;

/* Renders `tpl` with the members of the JSON object context[0 .. context_length) as its
 * variables (JSON as Python's json.loads reads it: integers stay integers, objects keep their
 * order). Hugging Face's variables are messages, tools (null when there are none),
 * add_generation_prompt, bos_token, eos_token (nu_llm_chat_context builds them), plus any the
 * template reads (enable_thinking, ...). *out gets the text, NUL-terminated (the NUL not counted
 * in *out_length), allocated with malloc: free() it. options NULL: defaults. Errors: see
 * nu_llm_template_failure; *out is NULL and *out_length 0 then. */
nu_status nu_llm_template_render(const nu_llm_template *tpl, const char *context, size_t context_length,
                                 const nu_llm_render_options *options, char **out, size_t *out_length,
                                 nu_llm_template_error *error);

/* ---- Templates from models, and contexts ---------------------------------------------------- */

/* A model's chat template and the token texts it is rendered with. */
typedef struct nu_llm_chat_template {
    char *source;           /* the Jinja text, NUL-terminated */
    size_t length;
    char *name;             /* the chosen template's name ("default", "tool_use", ...), NULL
                             * when the model has a single unnamed one */
    char *bos_token;        /* NUL-terminated, NULL when the model has none */
    char *eos_token;
} nu_llm_chat_template;

/* Reads the chat template of the model at `path`:
 *  - a GGUF file (a path ending in .gguf): tokenizer.chat_template, or
 *    tokenizer.chat_template.<name> for a named one; bos_token / eos_token are the texts of
 *    tokenizer.ggml.tokens at tokenizer.ggml.bos_token_id / eos_token_id;
 *  - a Hugging Face folder: chat_template.jinja if present, else tokenizer_config.json's
 *    chat_template (a string, or a list of {"name", "template"}), else chat_template.json's;
 *    bos_token / eos_token from tokenizer_config.json (strings or AddedToken objects).
 * `name` picks a named template; NULL chooses as transformers does: "tool_use" when `tools` and
 * the model has one, else "default". NU_ERROR_IO (no such file or folder), NU_ERROR_FORMAT (a
 * malformed file, no chat template, no template of that name: the message lists the names),
 * NU_ERROR_INVALID_ARGUMENT, NU_ERROR_HOST_OUT_OF_MEMORY. `out` is zeroed on failure. */
nu_status nu_llm_chat_template_from_model(const char *path, const char *name, bool tools,
                                          nu_llm_chat_template *out);
/* Frees what nu_llm_chat_template_from_model filled and zeroes it (NULL is ignored). */
void nu_llm_chat_template_clear(nu_llm_chat_template *t);

/* What a chat request gives the template. JSON texts are used as they are (numbers keep their
 * spelling's type). */
typedef struct nu_llm_chat_request {
    const char *messages;   /* a JSON array of messages (role, content, tool_calls, ...) */
    size_t messages_length;
    const char *tools;      /* a JSON array of tool definitions, or NULL (tools is then null) */
    size_t tools_length;
    bool add_generation_prompt;
    const char *bos_token;  /* NUL-terminated; NULL: the variable is left undefined */
    const char *eos_token;
    const char *extra;      /* a JSON object whose members become variables too (for example
                             * {"enable_thinking": false}); they override the others. NULL: none */
    size_t extra_length;
} nu_llm_chat_request;

/* The render context Hugging Face's apply_chat_template gives a template, as JSON text:
 * {"messages": ..., "tools": ... or null, "documents": null, "add_generation_prompt": ...,
 * "bos_token": ..., "eos_token": ..., extra's members}. *out is malloc'd (free() it),
 * NUL-terminated. NU_ERROR_INVALID_ARGUMENT for NULL pointers or JSON of the wrong shape (the
 * message names which and where), NU_ERROR_HOST_OUT_OF_MEMORY. */
nu_status nu_llm_chat_context(const nu_llm_chat_request *request, char **out, size_t *out_length);

#ifdef __cplusplus
}
#endif
#endif
