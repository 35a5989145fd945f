/* chat.c: `nuvec chat MODEL [--system TEXT]`: an interactive conversation on the terminal. Each
 * turn renders the whole conversation with the chat template (tools/serve/prompt.c), keeps the
 * longest prefix of it that the model's sequence already holds (earlier turns are not prefilled
 * again), runs the rest through nu_llm_model_step and streams the reply. /reset starts over;
 * Ctrl-C stops the reply in progress (the program goes on); /exit or end of input quits. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "args.h"
#include "cli.h"
#include "devices.h"
#include "nuvec.h"
#include "nuvec_llm.h"
#include "serve/prompt.h"
#include "serve/text.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* Waits at the prompt until stdin has input (true) or Ctrl-C comes (false). SIGINT is blocked from
 * the flag's check until ppoll unblocks it atomically, so a Ctrl-C that arrives after the prompt is
 * printed but before the wait is not lost (a blocking read would sleep through it). stdin is
 * unbuffered (main), so no line waits in stdio's buffer unseen by the poll. */
static bool wait_for_input(void)
{
    sigset_t block, before;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &before);
    bool input = false;
    while (!interrupted) {
        struct pollfd fd = {.fd = 0, .events = POLLIN};
        int r = ppoll(&fd, 1, NULL, &before);
        if (r > 0) {
            input = true;
            break;
        }
        if (r < 0 && errno != EINTR) {
            input = true; /* the read says what is wrong */
            break;
        }
    }
    sigprocmask(SIG_SETMASK, &before, NULL);
    return input;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nuvec chat MODEL [--system TEXT] [--chat-template FILE] [-n N] [--temp T] [--top-k K]\n"
            "                  [--top-p P] [--seed S] [--ctx N] [--device NAME | --devices LIST [--split layer]\n"
            "                  [--split-weights W,W,...]]\n"
            "  An interactive conversation: type a message and Enter; the reply streams. /reset forgets\n"
            "  the conversation (the system message stays), /exit or end of input quits, Ctrl-C stops a\n"
            "  reply. -n: tokens a reply has at most (default: until the context ends); --temp (default\n"
            "  0.8), --top-k (40), --top-p (0.95), --seed shape sampling (--temp 0: greedy). Each turn\n"
            "  reports on stderr how many of its prompt's tokens were in the cache already. --devices 0,1:\n"
            "  the model split by layers over those devices (as `nuvec generate`).\n");
}

typedef struct chat {
    nu_llm_model *m;
    const nu_llm_config *cfg;
    const nu_llm_tokenizer *tok;
    chat_prompt prompt;
    cJSON *messages;
    nu_llm_sampler *sampler;
    float *logits;
    nu_llm_row *rows;
    uint32_t ctx, max_reply;
    bool greedy;
} chat;

static void add_message(chat *c, const char *role, const char *text)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", text);
    cJSON_AddItemToArray(c->messages, m);
}

/* Writes n bytes of the reply to stdout (cli_stream_out); false, with the reason in err, where
 * stdout fails (its reader gone: EPIPE). */
static bool reply_out(const char *t, size_t n, char *err, size_t err_size)
{
    int e = cli_stream_out(t, n);
    if (e)
        snprintf(err, err_size, "standard output: %s", strerror(e));
    return !e;
}

/* One turn: the conversation's prompt, the part the cache lacks run, the reply streamed. 0; -1
 * where it failed (said on stderr; the message is to be dropped); -2 where stdout failed. */
static int turn(chat *c)
{
    char *json = cJSON_PrintUnformatted(c->messages), *text = NULL;
    int32_t *ids = NULL;
    uint32_t n = 0;
    api_error e;
    int rc = json ? chat_prompt_render(&c->prompt, json, strlen(json), &text, &e) : -1;
    if (!rc)
        rc = chat_prompt_tokenize(c->tok, c->prompt.bos, text, strlen(text), true, &ids, &n, &e);
    free(json);
    free(text);
    if (rc) {
        fprintf(stderr, "nuvec chat: %s\n", rc > 0 ? e.message : "out of memory");
        return -1;
    }
    if (n >= c->ctx) {
        fprintf(stderr, "nuvec chat: the conversation needs %u tokens; the context holds %u: /reset to start over\n", n,
                c->ctx);
        free(ids);
        return -1;
    }
    const int32_t *held;
    uint32_t have = nu_llm_model_seq_length(c->m, 0, &held), same = 0;
    while (same < have && same < n - 1 && held[same] == ids[same])
        same++;
    nu_llm_model_seq_truncate(c->m, 0, same);
    nu_llm_output out = c->greedy ? NU_LLM_OUTPUT_ARGMAX : NU_LLM_OUTPUT_LOGITS;
    for (uint32_t i = same; i < n; i++)
        c->rows[i - same] = (nu_llm_row){ids[i], 0, i + 1 == n ? out : NU_LLM_OUTPUT_NONE};
    gen_text g;
    char *const *stops = c->prompt.builtin ? chat_prompt_builtin_stops : NULL;
    gen_text_init(&g, c->tok, ids[n - 1], stops, stops ? 2 : 0);
    uint32_t rows = n - same, produced = 0;
    double t0 = cli_now_s();
    char err[300] = "";
    bool stopped = false, closed = false;
    interrupted = 0;
    while (!interrupted) {
        int32_t id;
        if (nu_llm_model_step(c->m, c->rows, rows, c->logits, &id) != NU_OK) {
            snprintf(err, sizeof err, "%s", nu_llm_error_message());
            break;
        }
        if (!c->greedy && nu_llm_sample(c->sampler, c->logits, c->cfg->vocab, &id) != NU_OK) {
            snprintf(err, sizeof err, "%s", nu_llm_error_message());
            break;
        }
        produced++;
        if (gen_text_is_eog(c->tok, c->cfg, id))
            break;
        if (!gen_text_push(&g, id, err, sizeof err))
            break;
        size_t ready = gen_text_ready(&g, false);
        if (!reply_out(g.raw + g.released, ready - g.released, err, sizeof err)) {
            closed = true;
            break;
        }
        g.released = ready;
        if (g.stopped || produced >= c->max_reply || n + produced > c->ctx)
            break;
        c->rows[0] = (nu_llm_row){id, 0, out};
        rows = 1;
    }
    stopped = interrupted;
    size_t ready = gen_text_ready(&g, true);
    const char *end = stopped ? " [stopped]\n" : "\n";
    if (!closed && (!reply_out(g.raw ? g.raw + g.released : "", ready - g.released, err, sizeof err) ||
                    !reply_out(end, strlen(end), err, sizeof err)))
        closed = true;
    double s = cli_now_s() - t0;
    if (err[0])
        fprintf(stderr, "nuvec chat: %s\n", err);
    fprintf(stderr, "[prompt %u tokens, %u cached; reply %u tokens, %.1f tokens/s]\n", n, same, produced,
            s > 0 ? produced / s : 0.0);
    if (!err[0])
        add_message(c, "assistant", g.raw ? g.raw : "");
    gen_text_free(&g);
    free(ids);
    interrupted = 0;
    return closed ? -2 : err[0] ? -1 : 0;
}

int cli_chat(int argc, char **argv)
{
    const char *path = NULL, *system_text = NULL, *tpl = NULL;
    uint32_t n = 0, top_k = 40, ctx = 0;
    uint64_t seed = 0;
    double temp = 0.8, top_p = 0.95;
    nu_device_desc dd = {0};
    cli_devices devs = {0};
    char why[512] = "";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage(stdout), 0;
        else if (a[0] == '-' && !v)
            ok = false;
        else if (!strcmp(a, "--system"))
            system_text = argv[++i];
        else if (!strcmp(a, "--chat-template"))
            tpl = argv[++i];
        else if (!strcmp(a, "--device"))
            dd.select = argv[++i];
        else if (cli_devices_option(&devs, a, v, &ok, why, sizeof why))
            i++;
        else if (!strcmp(a, "-n"))
            ok = cli_arg_u32(argv[++i], 1, UINT32_MAX, &n);
        else if (!strcmp(a, "--temp"))
            ok = cli_arg_double(argv[++i], 0, 100, &temp);
        else if (!strcmp(a, "--top-k"))
            ok = cli_arg_u32(argv[++i], 0, UINT32_MAX, &top_k);
        else if (!strcmp(a, "--top-p"))
            ok = cli_arg_double(argv[++i], 0, 1, &top_p);
        else if (!strcmp(a, "--seed"))
            ok = cli_arg_u64(argv[++i], 0, UINT64_MAX, &seed);
        else if (!strcmp(a, "--ctx"))
            ok = cli_arg_u32(argv[++i], 2, UINT32_MAX, &ctx);
        else if (a[0] != '-' && !path)
            path = a;
        else
            ok = false;
        if (!ok) {
            cli_arg_report(stderr, "chat", a, v, why);
            usage(stderr);
            return 2;
        }
    }
    if (!cli_devices_check(&devs, dd.select, why, sizeof why)) {
        fprintf(stderr, "nuvec chat: %s\n", why);
        usage(stderr);
        return 2;
    }
    if (!path) {
        fprintf(stderr, "nuvec chat: no MODEL\n");
        usage(stderr);
        return 2;
    }
    int rc = 1;
    nu_device *d = NULL;
    chat c = {0};
    bool have_prompt = false;
    char msg[512], *line = NULL;
    size_t line_cap = 0;
    nu_llm_model_options mo = {.max_positions = ctx};
    if (devs.count ? cli_devices_open(&devs, dd.validation, why, sizeof why) != NU_OK : nu_device_open(&dd, &d) != NU_OK) {
        fprintf(stderr, "nuvec chat: no device: %s\n", devs.count ? why : nu_error_message(NULL));
        return 1;
    }
    if (cli_model_open(&devs, d, path, &mo, &c.m) != NU_OK) {
        fprintf(stderr, "nuvec chat: %s\n", nu_llm_error_message());
        goto done;
    }
    cli_describe_split(c.m, why, sizeof why);
    if (*why)
        fprintf(stderr, "nuvec chat: %s\n", why);
    c.cfg = nu_llm_model_config(c.m);
    c.tok = nu_llm_model_tokenizer(c.m);
    c.ctx = mo.max_positions ? mo.max_positions : c.cfg->max_positions;
    c.max_reply = n ? n : c.ctx;
    c.greedy = temp == 0;
    if (!c.tok) {
        fprintf(stderr, "nuvec chat: the model has no tokenizer: %s\n", nu_llm_model_tokenizer_note(c.m));
        goto done;
    }
    if (chat_prompt_open(&c.prompt, path, tpl, c.tok, msg, sizeof msg)) {
        fprintf(stderr, "nuvec chat: %s\n", msg);
        goto done;
    }
    have_prompt = true;
    nu_llm_sampler_params sp = {(float)temp, top_k, (float)top_p, seed};
    c.messages = cJSON_CreateArray();
    c.logits = malloc((size_t)c.cfg->vocab * sizeof *c.logits);
    c.rows = malloc((size_t)c.ctx * sizeof *c.rows);
    if (!c.messages || !c.logits || !c.rows || nu_llm_sampler_new(&sp, &c.sampler) != NU_OK) {
        fprintf(stderr, "nuvec chat: %s\n", c.messages && c.logits && c.rows ? nu_llm_error_message() : "out of memory");
        goto done;
    }
    if (system_text)
        add_message(&c, "system", system_text);
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint; /* no SA_RESTART: a read at the prompt returns */
    sigaction(SIGINT, &sa, NULL);
    fprintf(stderr, "nuvec chat: %s, %u positions, chat template: %s. /reset, /exit, Ctrl-C stops a reply.\n", path,
            c.ctx, c.prompt.origin);
    setvbuf(stdin, NULL, _IONBF, 0); /* wait_for_input polls the descriptor */
    for (;;) {
        char out_err[300];
        if (!reply_out("> ", 2, out_err, sizeof out_err)) {
            fprintf(stderr, "nuvec chat: %s\n", out_err);
            goto done;
        }
        errno = 0;
        ssize_t got = wait_for_input() ? getline(&line, &line_cap, stdin) : -1;
        if (got < 0 && interrupted)
            errno = EINTR;
        if (got < 0) {
            if (errno == EINTR) { /* Ctrl-C at the prompt: a new prompt */
                clearerr(stdin);
                interrupted = 0;
                printf("\n");
                continue;
            }
            printf("\n");
            break;
        }
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = 0;
        if (!got)
            continue;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit"))
            break;
        if (!strcmp(line, "/reset")) {
            cJSON_Delete(c.messages);
            c.messages = cJSON_CreateArray();
            if (!c.messages)
                goto done;
            if (system_text)
                add_message(&c, "system", system_text);
            nu_llm_model_seq_truncate(c.m, 0, 0);
            printf("(the conversation is reset)\n");
            continue;
        }
        add_message(&c, "user", line);
        int t = turn(&c);
        if (t == -2) /* stdout gone (said on stderr): the chat ends, status 1 */
            goto done;
        if (t) /* the message is dropped: the conversation stays as it was */
            cJSON_DeleteItemFromArray(c.messages, cJSON_GetArraySize(c.messages) - 1);
    }
    rc = 0;
done:
    free(line);
    free(c.logits);
    free(c.rows);
    cJSON_Delete(c.messages);
    nu_llm_sampler_free(c.sampler);
    if (have_prompt)
        chat_prompt_close(&c.prompt);
    nu_llm_model_free(c.m);
    nu_device_close(d);
    cli_devices_close(&devs);
    return rc;
}
