/* nuvec: the command-line tool. `nuvec help` lists the subcommands. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "nuvec.h"

double cli_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void usage(FILE *f)
{
    fprintf(f,
            "nuvec %s: a GPU compute runtime on Vulkan\n"
            "usage: nuvec COMMAND [options]\n"
            "  info [--json]            every Vulkan device: memory heaps and types, features, limits\n"
            "  demo [--device NAME] [--elements N] [--steps N] [--trace FILE.json] [--capture FILE.rdc]\n"
            "                           a self-check on the default device (NUVEC_DEVICE chooses), and a\n"
            "                           pipelined computation with and without reuse of in-flight memory\n"
            "  load FILE.safetensors [--to-gpu] [--device NAME]\n"
            "                           lists the tensors; --to-gpu moves them into device memory (GB/s)\n"
            "  make-gguf [--arch A] --shape NAME --dtype f16|q8_0|q4_0|bf16|f32 --out FILE [--seed S] [--layers N]\n"
            "                           a GGUF model of random weights (llama, qwen2, qwen3, gemma2, gemma3, phi3)\n"
            "  bench NAME [--json]      benchmarks: alloc, dispatch, submit, graph, pipeline, upload, ops, llm\n"
            "                           (nuvec bench --help)\n"
            "  generate MODEL [--prompt TEXT | --tokens ID,ID,...] [-n N] [--temp T] [--top-k K] [--top-p P]\n"
            "           [--seed S] [--json]  a Llama model's continuation, streamed (nuvec generate --help)\n"
            "  quantize IN OUT --type q4_k_m|q4_k_s|q5_k_m|q5_k_s|q6_k|q8_0|q4_0|q4_1|q5_0|q5_1|iq4_nl|iq4_xs|f16|bf16|f32\n"
            "           [--threads N]   a Llama GGUF file or Hugging Face folder as a GGUF file of that type,\n"
            "                           llama-quantize's per-tensor mix (nuvec quantize --help)\n"
            "  tokenize MODEL (--prompt TEXT | --file FILE) [--no-bos] [--special] [--json]\n"
            "                           the token ids of a text, as generate feeds them (no device needed)\n"
            "  template MODEL --messages FILE.json [--add-generation-prompt] [--tools FILE.json]\n"
            "           [--template FILE.jinja]  the prompt a chat template renders (nuvec template --help)\n"
            "  chat MODEL [--system TEXT]  an interactive conversation, streamed (nuvec chat --help)\n"
            "  serve MODEL [--host 127.0.0.1] [--port 8080] [--parallel N] [--ctx N]\n"
            "                           an OpenAI-compatible HTTP server (nuvec serve --help)\n"
            "  help                     this text\n"
            "Environment: NUVEC_DEVICE=index|name chooses the device; NUVEC_VALIDATION=1 loads the\n"
            "Khronos validation layer with synchronisation validation.\n",
            NUVEC_VERSION_STRING);
}

int cli_stream_out(const char *t, size_t n)
{
    errno = 0;
    if (fwrite(t, 1, n, stdout) == n && fflush(stdout) == 0)
        return 0;
    return errno ? errno : EIO;
}

/* The command argv[1] runs; its exit status. */
static int run_command(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "info"))
        return cli_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "demo"))
        return cli_demo(argc - 1, argv + 1);
    if (!strcmp(argv[1], "load"))
        return cli_load(argc - 1, argv + 1);
    if (!strcmp(argv[1], "generate"))
        return cli_generate(argc - 1, argv + 1);
    if (!strcmp(argv[1], "tokenize"))
        return cli_tokenize(argc - 1, argv + 1);
    if (!strcmp(argv[1], "template"))
        return cli_template(argc - 1, argv + 1);
    if (!strcmp(argv[1], "chat"))
        return cli_chat(argc - 1, argv + 1);
    if (!strcmp(argv[1], "serve"))
        return cli_serve(argc - 1, argv + 1);
    if (!strcmp(argv[1], "make-gguf"))
        return cli_make_gguf(argc - 1, argv + 1);
    if (!strcmp(argv[1], "quantize"))
        return cli_quantize(argc - 1, argv + 1);
    if (!strcmp(argv[1], "bench"))
        return cli_bench(argc - 1, argv + 1);
    fprintf(stderr, "nuvec: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}

int main(int argc, char **argv)
{
    /* A reader of stdout that goes away (`nuvec generate ... | head -1`) makes writes fail with
     * EPIPE instead of killing the process, so that a command still closes what it opened (a
     * model's trace, NUVEC_TRACE, is written at close). */
    signal(SIGPIPE, SIG_IGN);
    int rc = run_command(argc, argv);
    /* A command that finished but whose output did not all get out (generate and chat stop and say
     * so themselves) ends with status 1 and says so, as the shell's tools do. */
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (rc == 0) {
            fprintf(stderr, "nuvec: standard output: %s\n", strerror(errno ? errno : EIO));
            rc = 1;
        }
    }
    return rc;
}
