/* cli.h: the subcommands of the `nuvec` command-line tool. Each takes the arguments after
 * its own name (argv[0] is the subcommand) and returns the process exit status. */
#ifndef CLI_H
#define CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nuvec/status.h"

int cli_info(int argc, char **argv);   /* tools/info.c: devices, memory, features */
int cli_demo(int argc, char **argv);   /* tools/demo.c: the `make demo` self-check */
int cli_load(int argc, char **argv);   /* tools/load.c: list a safetensors file, move it to the GPU */
int cli_bench(int argc, char **argv);  /* bench/bench.c: benchmarks, `nuvec bench NAME` */
int cli_make_gguf(int argc, char **argv); /* tools/make_gguf.c: random-weight Llama GGUF files */
int cli_generate(int argc, char **argv); /* tools/generate.c: a Llama model's text (libnuvec_llm) */
int cli_quantize(int argc, char **argv); /* tools/quantize.c: GGUF files of llama-quantize's types */
int cli_tokenize(int argc, char **argv); /* tools/tokenize.c: a text's token ids (libnuvec_llm) */

/* A text's ids as `nuvec generate` feeds them (tools/tokenize.c): bos where the vocabulary adds one
 * (unless !bos), special tokens in the text read as tokens if `special`; *ids malloc'ed (NULL on
 * failure, with nu_llm_error_message() unless out of memory). */
typedef struct nu_llm_tokenizer nu_llm_tokenizer; /* nuvec_llm/tokenizer.h */
nu_status cli_tokenize_text(const nu_llm_tokenizer *tok, const char *text, size_t len, bool bos, bool special,
                            int32_t **ids, size_t *n);
int cli_chat(int argc, char **argv);     /* tools/chat.c: an interactive conversation */
int cli_serve(int argc, char **argv);    /* tools/serve/: an OpenAI-compatible HTTP server */
int cli_template(int argc, char **argv); /* tools/template.c: a chat template's prompt (libnuvec_llm) */

double cli_now_s(void); /* seconds on the monotonic clock, for the subcommands' timings (tools/nuvec.c) */
/* Writes n bytes to stdout and flushes them (text streamed as it comes: generate, chat); 0, or the
 * errno of the failure (EPIPE where the reader went away: main ignores SIGPIPE). tools/nuvec.c */
int cli_stream_out(const char *t, size_t n);

#endif
