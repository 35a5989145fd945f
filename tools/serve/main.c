/* main.c: `nuvec serve MODEL [options]`: an OpenAI-compatible HTTP server over libnuvec_llm.
 * It listens first (GET /health answers 503 while the model loads), then opens the model with
 * --parallel sequence slots and starts the engine. SIGTERM or SIGINT drains: no new connections,
 * the requests under way finish (up to --drain-timeout, then they are cancelled), and it exits 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "cli.h"
#include "devices.h"
#include "http.h"
#include "nuvec.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nuvec serve MODEL [--host 127.0.0.1] [--port 8080] [--parallel N] [--ctx N] [--queue N]\n"
            "                   [--batch N] [--max-tokens N] [--max-body BYTES] [--threads N] [--timeout S]\n"
            "                   [--drain-timeout S] [--chat-template FILE] [--alias NAME] [--device NAME]\n"
            "                   [--kv-f16] [--f16-weights] [--max-memory BYTES]\n"
            "                   [--devices LIST [--split layer] [--split-weights W,W,...]]\n"
            "  An OpenAI-compatible server: POST /v1/chat/completions and /v1/completions (stream or not),\n"
            "  GET /v1/models, /health (503 while loading), /metrics (Prometheus), POST /tokenize,\n"
            "  /detokenize, /apply-template, and a chat page at /.\n"
            "  --parallel: slots decoded together (default 4); --ctx: positions a slot holds (default the\n"
            "  model's, at most 4096); --queue: requests that may wait for a slot beyond those (default 64;\n"
            "  past it 429); --batch: prompt tokens a step takes at most (default 512); --max-tokens: the\n"
            "  most a request may generate (default --ctx); --max-body: request bytes (default 1 MiB);\n"
            "  --threads: HTTP threads (default 4); --timeout: idle connection seconds (default 30);\n"
            "  --drain-timeout: seconds a SIGTERM waits for requests (default 30); --chat-template: a Jinja\n"
            "  file instead of the model's (ChatML when the model has none); --alias: the model's name in\n"
            "  the API (default the file or folder name); --devices 0,1: the model split by layers over\n"
            "  those devices (as `nuvec generate`). docs/serving.md has the details.\n");
}

/* The model's name in the API: the path's last part, less ".gguf"; a Hugging Face folder named
 * like the test models' (hf) takes its parent's name. */
static void model_name(const char *path, char *out, size_t cap)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = 0;
    char *base = strrchr(buf, '/');
    base = base ? base + 1 : buf;
    if (n > 5 && !strcmp(buf + n - 5, ".gguf"))
        buf[n - 5] = 0;
    if ((!strcmp(base, "hf") || !strncmp(base, "hf-", 3)) && base > buf + 1) {
        base[-1] = 0;
        char *parent = strrchr(buf, '/');
        snprintf(out, cap, "%s", parent ? parent + 1 : buf);
        return;
    }
    snprintf(out, cap, "%s", base);
}

int cli_serve(int argc, char **argv)
{
    const char *path = NULL, *host = "127.0.0.1", *tpl = NULL, *alias = NULL;
    uint64_t port = 8080, parallel = 4, ctx = 0, queue = 64, batch = 512, max_tokens = 0, max_body = 1 << 20,
             threads = 4, timeout = 30, drain = 30, maxmem = 0;
    nu_device_desc dd = {0};
    nu_llm_model_options mo = {0};
    cli_devices devs = {0};
    char why[512] = "";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage(stdout), 0;
        else if (!strcmp(a, "--kv-f16"))
            mo.kv_dtype = NU_DTYPE_F16;
        else if (!strcmp(a, "--f16-weights"))
            mo.weights_f16 = true;
        else if (a[0] == '-' && !v)
            ok = false;
        else if (!strcmp(a, "--host"))
            host = argv[++i];
        else if (!strcmp(a, "--chat-template"))
            tpl = argv[++i];
        else if (!strcmp(a, "--alias"))
            alias = argv[++i];
        else if (!strcmp(a, "--device"))
            dd.select = argv[++i];
        else if (cli_devices_option(&devs, a, v, &ok, why, sizeof why))
            i++;
        else if (!strcmp(a, "--port"))
            ok = cli_arg_u64(argv[++i], 0, 65535, &port);
        else if (!strcmp(a, "--parallel"))
            ok = cli_arg_u64(argv[++i], 1, 1024, &parallel);
        else if (!strcmp(a, "--ctx"))
            ok = cli_arg_u64(argv[++i], 2, UINT32_MAX, &ctx);
        else if (!strcmp(a, "--queue"))
            ok = cli_arg_u64(argv[++i], 0, 1 << 20, &queue);
        else if (!strcmp(a, "--batch"))
            ok = cli_arg_u64(argv[++i], 1, 1 << 16, &batch);
        else if (!strcmp(a, "--max-tokens"))
            ok = cli_arg_u64(argv[++i], 1, UINT32_MAX, &max_tokens);
        else if (!strcmp(a, "--max-body"))
            ok = cli_arg_u64(argv[++i], 64, (uint64_t)1 << 30, &max_body);
        else if (!strcmp(a, "--threads"))
            ok = cli_arg_u64(argv[++i], 1, 256, &threads);
        else if (!strcmp(a, "--timeout"))
            ok = cli_arg_u64(argv[++i], 1, 86400, &timeout);
        else if (!strcmp(a, "--drain-timeout"))
            ok = cli_arg_u64(argv[++i], 0, 86400, &drain);
        else if (!strcmp(a, "--max-memory"))
            ok = cli_arg_u64(argv[++i], 1, UINT64_MAX, &maxmem);
        else if (a[0] != '-' && !path)
            path = a;
        else
            ok = false;
        if (!ok) {
            cli_arg_report(stderr, "serve", a, v, why);
            usage(stderr);
            return 2;
        }
    }
    if (!cli_devices_check(&devs, dd.select, why, sizeof why)) {
        fprintf(stderr, "nuvec serve: %s\n", why);
        usage(stderr);
        return 2;
    }
    if (!path) {
        fprintf(stderr, "nuvec serve: no MODEL\n");
        usage(stderr);
        return 2;
    }
    /* Signals go to the main thread's sigwait (blocked before any thread starts); a client
     * that hangs up must not kill the process. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    char name[256], msg[512];
    model_name(path, name, sizeof name);
    srv_metrics mx;
    memset(&mx, 0, sizeof mx);
    srv_state s = {.host = host, .port = (uint16_t)port, .threads = (uint32_t)threads, .max_connections = 256,
                   .timeout_s = (uint32_t)timeout, .max_body = max_body, .mx = &mx, .model_name = alias ? alias : name};
    atomic_init(&s.ready, SRV_LOADING);
    if (srv_http_start(&s, msg, sizeof msg)) {
        fprintf(stderr, "nuvec serve: %s\n", msg);
        return 1;
    }
    fprintf(stderr, "nuvec serve: listening on http://%s%s%s:%u/ (loading %s)\n", strchr(host, ':') ? "[" : "", host,
            strchr(host, ':') ? "]" : "", s.port, path);
    int rc = 1;
    nu_device *d = NULL;
    nu_llm_model *m = NULL;
    chat_prompt prompt = {0};
    bool have_prompt = false;
    if (devs.count ? cli_devices_open(&devs, dd.validation, why, sizeof why) != NU_OK : nu_device_open(&dd, &d) != NU_OK) {
        fprintf(stderr, "nuvec serve: no device: %s\n", devs.count ? why : nu_error_message(NULL));
        goto done;
    }
    /* The KV cache: --ctx positions for each slot (and the model's own slot 0, which the engine
     * takes through acquire like the others). */
    mo.slots = (uint32_t)parallel;
    mo.max_memory = maxmem;
    /* --ctx, or 4096 where the model holds more (a failed open for a max_positions beyond the
     * model's costs nothing: it is refused before any weight moves). */
    mo.max_positions = ctx ? (uint32_t)ctx : 4096;
    nu_status st = cli_model_open(&devs, d, path, &mo, &m);
    if (st == NU_ERROR_INVALID_ARGUMENT && !ctx && strstr(nu_llm_error_message(), "max_positions")) {
        mo.max_positions = 0;
        st = cli_model_open(&devs, d, path, &mo, &m);
    }
    if (st != NU_OK) {
        fprintf(stderr, "nuvec serve: %s\n", nu_llm_error_message());
        goto done;
    }
    cli_describe_split(m, why, sizeof why);
    if (*why)
        fprintf(stderr, "nuvec serve: %s\n", why);
    const nu_llm_config *cfg = nu_llm_model_config(m);
    uint32_t positions = mo.max_positions ? mo.max_positions : cfg->max_positions;
    if (chat_prompt_open(&prompt, path, tpl, nu_llm_model_tokenizer(m), msg, sizeof msg)) {
        fprintf(stderr, "nuvec serve: %s\n", msg);
        goto done;
    }
    have_prompt = true;
    /* The model's own slot 0 is released so that the engine hands it out like the others. */
    nu_llm_model_seq_release(m, 0);
    s.tok = nu_llm_model_tokenizer(m);
    s.cfg = cfg;
    s.prompt = &prompt;
    s.ctx = positions;
    s.limits = (api_limits){.max_tokens = max_tokens ? (uint32_t)max_tokens : positions, .max_stop = 4,
                            .max_stop_bytes = 256, .max_ids = positions};
    srv_engine_options eo = {.queue = (uint32_t)queue, .batch = (uint32_t)batch, .ctx = positions};
    if (!(s.engine = srv_engine_start(m, &eo, &mx))) {
        fprintf(stderr, "nuvec serve: cannot start the engine: %s\n", nu_llm_error_message());
        goto done;
    }
    atomic_store(&s.ready, SRV_READY);
    fprintf(stderr, "nuvec serve: ready: model '%s', %u slots of %u positions, chat template: %s\n", s.model_name,
            nu_llm_model_slots(m), positions, prompt.origin);
    if (!s.tok)
        fprintf(stderr, "nuvec serve: the model has no tokenizer (%s): prompts must be token ids\n",
                nu_llm_model_tokenizer_note(m));
    int sig = 0;
    while (sigwait(&sigs, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
        ;
    fprintf(stderr, "nuvec serve: %s: draining (up to %llu s)\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
            (unsigned long long)drain);
    atomic_store(&s.ready, SRV_DRAINING);
    srv_http_quiesce(&s);
    srv_engine_drain(s.engine, (double)drain);
    /* The answers are out when MHD is done with their connections (each drops its request). */
    for (int i = 0; i < 1000 && atomic_load(&mx.live_requests) > 0; i++)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    rc = 0;
done:
    /* Requests are finished (their connections resumed): MHD may stop. */
    srv_http_stop(&s);
    srv_engine_stop(s.engine);
    if (have_prompt)
        chat_prompt_close(&prompt);
    nu_llm_model_free(m);
    nu_device_close(d);
    cli_devices_close(&devs);
    if (!rc)
        fprintf(stderr, "nuvec serve: stopped\n");
    return rc;
}
