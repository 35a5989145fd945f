/* Time from process start to llama.cpp's first generated token, the peer of the "open the
 * 7B file to the first generated token" (llama-bench times pp/tg but not loading). Ours, built at
 * benchmark time by bench/llamacpp.sh against the fetched llama.h and shipped libllama; nothing
 * of llama.cpp is committed. Settings follow llama-bench's pp/tg runs: every layer on the GPU,
 * flash attention on, random prompt tokens (the first one BOS), greedy pick of the first token.
 * Usage: llamacpp_ttft MODEL.gguf [-p N] [-v]   Prints one JSON line on stdout.
 * NU_PEER_T0_NS (CLOCK_REALTIME nanoseconds, set by the script just before exec) marks the
 * process start; without it the clock starts at main(). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-backend.h"
#include "llama.h"

static int verbose;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* llama.cpp logs every tensor at load; keep warnings and errors unless -v. */
static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (verbose || level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static int usage(void)
{
    fprintf(stderr, "usage: llamacpp_ttft MODEL.gguf [-p PROMPT_TOKENS (1..65536, default 1)] [-v]\n");
    return 2;
}

int main(int argc, char **argv)
{
    double t_main = now_ms(), t0 = t_main;
    const char *model_path = NULL;
    long n_prompt = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-p") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            n_prompt = strtol(argv[++i], &end, 10);
            if (errno || *end || n_prompt < 1 || n_prompt > 65536) {
                fprintf(stderr, "llamacpp_ttft: -p wants 1..65536 tokens, not '%s'\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "-v") == 0) {
            verbose = 1;
        } else if (argv[i][0] == '-' || model_path) {
            return usage();
        } else {
            model_path = argv[i];
        }
    }
    if (!model_path)
        return usage();
    const char *t0_env = getenv("NU_PEER_T0_NS");
    if (t0_env && *t0_env) {
        char *end;
        double ns = strtod(t0_env, &end);
        /* A stale or garbled stamp would report nonsense: accept one from the last minute only. */
        if (*end || ns / 1e6 > t_main || t_main - ns / 1e6 > 60e3) {
            fprintf(stderr, "llamacpp_ttft: NU_PEER_T0_NS='%s' is not a recent CLOCK_REALTIME in ns\n", t0_env);
            return 2;
        }
        t0 = ns / 1e6;
    }

    llama_log_set(quiet_log, NULL);
    /* The shipped ggml loads its backends (Vulkan, the best CPU variant) from the binary's folder. */
    ggml_backend_load_all();
    llama_backend_init();
    double t_backends = now_ms();

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = -1; /* all layers */
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) {
        fprintf(stderr, "llamacpp_ttft: llama.cpp could not load '%s'\n", model_path);
        llama_backend_free();
        return 1;
    }
    double t_model = now_ms();

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_prompt + 128; /* as llama-bench sizes pp+tg */
    cp.n_batch = (uint32_t)n_prompt;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    int rc = 1;
    llama_token *tokens = NULL;
    if (!ctx) {
        fprintf(stderr, "llamacpp_ttft: llama.cpp could not create a context of %u tokens\n", cp.n_ctx);
        goto out;
    }
    double t_ctx = now_ms();

    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int32_t n_vocab = llama_vocab_n_tokens(vocab);
    tokens = malloc((size_t)n_prompt * sizeof *tokens);
    if (!tokens || n_vocab < 1) {
        fprintf(stderr, "llamacpp_ttft: %s\n", tokens ? "the model has no vocabulary" : "out of memory");
        goto out;
    }
    uint32_t seed = 12345; /* fixed, so runs see the same prompt */
    for (long i = 0; i < n_prompt; i++) {
        seed = seed * 1664525u + 1013904223u;
        tokens[i] = (llama_token)((seed >> 8) % (uint32_t)n_vocab);
    }
    llama_token bos = llama_vocab_bos(vocab);
    if (bos >= 0)
        tokens[0] = bos;
    int32_t err = llama_decode(ctx, llama_batch_get_one(tokens, (int32_t)n_prompt));
    if (err != 0) {
        fprintf(stderr, "llamacpp_ttft: llama_decode of the %ld-token prompt failed (%d)\n", n_prompt, err);
        goto out;
    }
    const float *logits = llama_get_logits_ith(ctx, -1); /* waits for the GPU */
    if (!logits) {
        fprintf(stderr, "llamacpp_ttft: llama.cpp returned no logits for the last prompt token\n");
        goto out;
    }
    int32_t best = 0;
    for (int32_t v = 1; v < n_vocab; v++)
        if (logits[v] > logits[best])
            best = v;
    double t_tok = now_ms();

    printf("{\"peer\":\"llama.cpp\",\"prompt_tokens\":%ld,\"first_token\":%d,"
           "\"start_to_main_ms\":%.3f,\"backends_ms\":%.3f,\"model_load_ms\":%.3f,"
           "\"context_ms\":%.3f,\"prompt_to_token_ms\":%.3f,\"ttft_ms\":%.3f}\n",
           n_prompt, best, t_main - t0, t_backends - t_main, t_model - t_backends, t_ctx - t_model,
           t_tok - t_ctx, t_tok - t0);
    rc = 0;
out:
    free(tokens);
    if (ctx)
        llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
