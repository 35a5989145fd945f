/* generate.c: `nuvec generate MODEL [--prompt TEXT | --tokens ID,ID,...] [-n N] [--temp T] [--top-k K]
 * [--top-p P] [--seed S] [--json]`: runs a Llama model (libnuvec_llm) on the default device,
 * streaming the text (or, without a tokenizer, the ids) as tokens come; --json prints one object
 * at the end instead. Greedy (--temp 0) with the decode graph goes through
 * nu_llm_model_decode_greedy (the ids stay on the GPU, tokens queued ahead, each streamed from
 * its callback); sampling and --no-graph decode token by token with the logits read back. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "args.h"
#include "cli.h"
#include "devices.h"
#include "llm_memory.h"
#include "nuvec.h"
#include "nuvec_llm.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nuvec generate MODEL [--prompt TEXT | --tokens ID,ID,...] [-n N] [--temp T] [--top-k K]\n"
            "                      [--top-p P] [--seed S] [--json] [--device NAME] [--kv-f16] [--f16-weights]\n"
            "                      [--max-positions N] [--max-memory BYTES] [--no-graph]\n"
            "                      [--devices LIST [--split layer] [--split-weights W,W,...]]\n"
            "  MODEL: a GGUF file (.gguf: its vocabulary gives text) or a Hugging Face folder (config.json,\n"
            "  *.safetensors; tokenizer.json for text).\n"
            "  --prompt TEXT is tokenized as `nuvec tokenize` shows (BOS first where the vocabulary adds one);\n"
            "  --tokens gives the ids as they are (default: BOS alone). -n: tokens to generate (default 64;\n"
            "  stops early at an end-of-generation token: EOS, EOT, <|im_end|>, ...). --temp 0 (default) is greedy;\n"
            "  --top-k, --top-p and --seed (default 0) shape sampling. --json prints {prompt_tokens, tokens,\n"
            "  text (valid UTF-8: U+FFFD for bytes that are not), prefill_tokens_per_s, decode_tokens_per_s}.\n"
            "  The text streamed is valid UTF-8 too. --kv-f16: an F16 KV cache (default F32);\n"
            "  --f16-weights: matrices stored as F16; --max-positions: the KV cache's length; --no-graph:\n"
            "  decode records a command buffer per token instead of launching the decode graph; --max-memory:\n"
            "  refuse a model that needs more device memory (said before anything moves). --json adds\n"
            "  device_memory {weights, kv_cache, activations, total, peaks, ...} in bytes; without it the\n"
            "  same goes to stderr in one line. Greedy decode\n"
            "  with the graph keeps the ids on the GPU (nu_llm_model_decode_greedy); sampling and --no-graph\n"
            "  read the logits back each token. --devices 0,1 (indices or names, as --device; the same one\n"
            "  twice too) splits the model by layers over them, in proportion to --split-weights (default:\n"
            "  each device's free memory); the split is said on stderr.\n");
}

/* "1,2,3" into ids (nuvec's ids are int32). */
static bool parse_ids(const char *s, int32_t **ids, size_t *n)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    *ids = malloc(cap * sizeof **ids);
    *n = 0;
    if (!*ids)
        return false;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX || (*end && *end != ','))
            return false;
        (*ids)[(*n)++] = (int32_t)v;
        if (!*end)
            return true;
        p = end + 1;
    }
}

/* The text as it comes: a nu_llm_detokenizer gives valid UTF-8 (a character split across tokens
 * is held until it is whole; invalid bytes as U+FFFD), printed (print) and kept (for --json). */
typedef struct streamer {
    const nu_llm_tokenizer *tok;
    nu_llm_detokenizer *detok;
    bool print;
    int closed; /* errno of a failed write to stdout (its reader gone: EPIPE), 0 while it takes the text */
    char *text; /* all the text given (for --json) */
    size_t ntext, captext;
} streamer;

/* A failed write to stdout (cli_stream_out: a reader that went away gives EPIPE) ends the
 * generation, so that the model is still closed (a trace written). */
static bool print_out(streamer *s, const char *t, size_t n)
{
    s->closed = cli_stream_out(t, n);
    return !s->closed;
}

static bool stream_text(streamer *s, const char *t, size_t n)
{
    if (s->print && !print_out(s, t, n))
        return false;
    if (s->ntext + n + 1 > s->captext) {
        size_t ncap = (s->ntext + n + 1) * 2;
        char *b = realloc(s->text, ncap);
        if (!b)
            return false;
        s->text = b, s->captext = ncap;
    }
    memcpy(s->text + s->ntext, t, n);
    s->ntext += n;
    s->text[s->ntext] = 0;
    return true;
}

static bool stream_token(streamer *s, int32_t id)
{
    if (!s->tok) {
        char b[16];
        int len = snprintf(b, sizeof b, " %d", id);
        return !s->print || print_out(s, b, (size_t)len);
    }
    const char *t;
    size_t n;
    return nu_llm_detokenizer_push(s->detok, id, &t, &n) == NU_OK && stream_text(s, t, n);
}

/* Says why streaming token id (a prompt's or a generated one; NU_LLM_NO_TOKEN: the detokenizer's
 * last bytes) failed: stdout closed, or the detokenizer or the host's memory. */
static void stream_failed(const streamer *s, int32_t id)
{
    if (s->closed)
        fprintf(stderr, "\nnuvec generate: standard output: %s; generation stopped\n", strerror(s->closed));
    else if (id == NU_LLM_NO_TOKEN)
        fprintf(stderr, "\nnuvec generate: the text's last bytes: %s\n", nu_llm_error_message());
    else
        fprintf(stderr, "\nnuvec generate: token %d: %s\n", id, nu_llm_error_message());
}

/* Generation ends at the vocabulary's end-of-generation tokens (eos, eot, <|im_end|>, ...), or
 * without a tokenizer at the config's eos. */
static bool stops(const streamer *s, const nu_llm_config *cfg, int32_t id)
{
    return id == cfg->eos || (s->tok && nu_llm_tokenizer_is_eog(s->tok, id));
}

/* Greedy decode's on_token: streams the token; a failure stops the decode and is kept, and so
 * does an end-of-generation token (it is kept in out). */
typedef struct greedy_stream {
    streamer *s;
    const nu_llm_config *cfg;
    int32_t failed_id; /* the token stream_token failed on, or NU_LLM_NO_TOKEN */
} greedy_stream;

static bool on_greedy_token(void *user, int32_t id)
{
    greedy_stream *g = user;
    if (!stream_token(g->s, id)) {
        g->failed_id = id;
        return false;
    }
    return !stops(g->s, g->cfg, id);
}

int cli_generate(int argc, char **argv)
{
    const char *model_path = NULL, *prompt = NULL, *tokens = NULL;
    uint64_t n = 64, seed = 0, top_k = 0, maxpos = 0, maxmem = 0;
    double temp = 0, top_p = 0;
    bool json = false;
    nu_device_desc desc = {0};
    nu_llm_model_options mo = {0};
    cli_devices devs = {0};
    char why[512] = "";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage(stdout), 0;
        else if (!strcmp(a, "--json"))
            json = true;
        else if (!strcmp(a, "--kv-f16"))
            mo.kv_dtype = NU_DTYPE_F16;
        else if (!strcmp(a, "--f16-weights"))
            mo.weights_f16 = true;
        else if (!strcmp(a, "--no-graph"))
            mo.decode_by_commands = true;
        else if (a[0] == '-' && !v)
            ok = false;
        else if (!strcmp(a, "--prompt"))
            prompt = argv[++i];
        else if (!strcmp(a, "--tokens"))
            tokens = argv[++i];
        else if (!strcmp(a, "--device"))
            desc.select = argv[++i];
        else if (cli_devices_option(&devs, a, v, &ok, why, sizeof why))
            i++;
        else if (!strcmp(a, "-n"))
            ok = cli_arg_u64(argv[++i], 0, 1u << 24, &n);
        else if (!strcmp(a, "--seed"))
            ok = cli_arg_u64(argv[++i], 0, UINT64_MAX, &seed);
        else if (!strcmp(a, "--top-k"))
            ok = cli_arg_u64(argv[++i], 0, UINT32_MAX, &top_k);
        else if (!strcmp(a, "--max-positions"))
            ok = cli_arg_u64(argv[++i], 0, UINT32_MAX, &maxpos);
        else if (!strcmp(a, "--max-memory"))
            ok = cli_arg_u64(argv[++i], 1, UINT64_MAX, &maxmem);
        else if (!strcmp(a, "--temp"))
            ok = cli_arg_double(argv[++i], -HUGE_VAL, HUGE_VAL, &temp); /* ranges: nu_llm_sampler_new */
        else if (!strcmp(a, "--top-p"))
            ok = cli_arg_double(argv[++i], -HUGE_VAL, HUGE_VAL, &top_p);
        else if (a[0] != '-' && !model_path)
            model_path = a;
        else
            ok = false;
        if (!ok) {
            cli_arg_report(stderr, "generate", a, v, why);
            usage(stderr);
            return 2;
        }
    }
    if (!cli_devices_check(&devs, desc.select, why, sizeof why)) {
        fprintf(stderr, "nuvec generate: %s\n", why);
        usage(stderr);
        return 2;
    }
    if (!model_path || (prompt && tokens)) {
        fprintf(stderr, "nuvec generate: %s\n", !model_path ? "no MODEL" : "--prompt and --tokens exclude each other");
        usage(stderr);
        return 2;
    }
    mo.max_positions = (uint32_t)maxpos;
    mo.max_memory = maxmem;
    mo.measure_peaks = true; /* the peaks reported below (this process owns the device) */
    int rc = 1;
    nu_device *d = NULL;
    nu_llm_model *m = NULL;
    nu_llm_sampler *sampler = NULL;
    int32_t *ids = NULL, *out = NULL;
    float *logits = NULL;
    size_t nids = 0, nout = 0;
    streamer s = {0};
    nu_status st = devs.count ? cli_devices_open(&devs, desc.validation, why, sizeof why) : nu_device_open(&desc, &d);
    if (st != NU_OK) {
        fprintf(stderr, "nuvec generate: no device: %s\n", devs.count ? why : nu_error_message(NULL));
        return 1;
    }
    if ((st = cli_model_open(&devs, d, model_path, &mo, &m)) != NU_OK) {
        fprintf(stderr, "nuvec generate: %s\n", nu_llm_error_message());
        goto done;
    }
    cli_describe_split(m, why, sizeof why);
    if (*why)
        fprintf(stderr, "nuvec generate: %s\n", why);
    const nu_llm_config *cfg = nu_llm_model_config(m);
    const nu_llm_tokenizer *tok = nu_llm_model_tokenizer(m);
    if (prompt) {
        if (!tok) {
            fprintf(stderr, "nuvec generate: --prompt needs a tokenizer: %s (give --tokens)\n", nu_llm_model_tokenizer_note(m));
            goto done;
        }
        if ((st = cli_tokenize_text(tok, prompt, strlen(prompt), true, false, &ids, &nids)) != NU_OK) {
            fprintf(stderr, "nuvec generate: tokenizing the prompt: %s\n",
                    st == NU_ERROR_HOST_OUT_OF_MEMORY && !ids ? "out of memory" : nu_llm_error_message());
            goto done;
        }
    } else if (tokens) {
        if (!parse_ids(tokens, &ids, &nids)) {
            fprintf(stderr, "nuvec generate: --tokens '%s' is not a list of ids like 1,2,3\n", tokens);
            goto done;
        }
    } else {
        if (cfg->bos < 0) {
            fprintf(stderr, "nuvec generate: the model names no BOS token: give --prompt or --tokens\n");
            goto done;
        }
        if (!(ids = malloc(sizeof *ids)))
            goto done;
        ids[0] = cfg->bos, nids = 1;
    }
    nu_llm_sampler_params sp = {(float)temp, (uint32_t)top_k, (float)top_p, seed};
    if (nu_llm_sampler_new(&sp, &sampler) != NU_OK) {
        fprintf(stderr, "nuvec generate: %s\n", nu_llm_error_message());
        goto done;
    }
    /* The cache holds the prompt and every generated token but the last. */
    uint32_t P = mo.max_positions ? mo.max_positions : cfg->max_positions;
    if (nids <= P && n > P - nids + 1)
        n = P - nids + 1;
    logits = malloc((size_t)cfg->vocab * sizeof *logits);
    out = malloc((size_t)(n ? n : 1) * sizeof *out);
    s.tok = tok;
    s.print = !json;
    if (!logits || !out || (tok && nu_llm_detokenizer_new(tok, NULL, &s.detok) != NU_OK))
        goto done;
    if (!json) { /* the prompt as text (or ids) first */
        for (size_t i = 0; i < nids; i++)
            if (!stream_token(&s, ids[i])) {
                stream_failed(&s, ids[i]);
                goto done;
            }
    } else if (tok && nids) { /* the last prompt token sets how the first one generated decodes */
        const char *t;
        size_t n_t;
        nu_llm_detokenizer_push(s.detok, ids[nids - 1], &t, &n_t);
    }
    double t0 = cli_now_s();
    if (nu_llm_model_prefill(m, ids, nids, logits) != NU_OK) {
        fprintf(stderr, "\nnuvec generate: %s\n", nu_llm_error_message());
        goto done;
    }
    double t1 = cli_now_s(), decode_s = 0;
    size_t decodes = 0;
    size_t text_from = s.ntext;
    /* Greedy with the decode graph: the first token from the prompt's logits, the rest by greedy
     * decode (ids on the GPU, tokens queued ahead), streamed as they arrive. */
    bool by_gpu = temp == 0 && !mo.decode_by_commands;
    if (by_gpu && n > 0) {
        int32_t first;
        if (nu_llm_sample(sampler, logits, cfg->vocab, &first) != NU_OK) {
            fprintf(stderr, "\nnuvec generate: %s\n", nu_llm_error_message());
            goto done;
        }
        out[nout++] = first;
        if (!stream_token(&s, first)) {
            stream_failed(&s, first);
            goto done;
        }
        if (!stops(&s, cfg, first) && nout < n) {
            greedy_stream gs = {&s, cfg, NU_LLM_NO_TOKEN};
            uint32_t produced = 0;
            double a = cli_now_s();
            nu_status gst = nu_llm_model_decode_greedy(m, first, (uint32_t)(n - 1), out + 1, &produced, cfg->eos,
                                                       on_greedy_token, &gs);
            decode_s = cli_now_s() - a;
            if (gs.failed_id != NU_LLM_NO_TOKEN) {
                stream_failed(&s, gs.failed_id);
                goto done;
            }
            if (gst != NU_OK) {
                fprintf(stderr, "\nnuvec generate: %s\n", nu_llm_error_message());
                goto done;
            }
            nout += produced;
            decodes = produced;
        }
    }
    for (; !by_gpu && nout < n; ) {
        int32_t next;
        if (nu_llm_sample(sampler, logits, cfg->vocab, &next) != NU_OK) {
            fprintf(stderr, "\nnuvec generate: %s\n", nu_llm_error_message());
            goto done;
        }
        out[nout++] = next;
        if (!stream_token(&s, next)) {
            stream_failed(&s, next);
            goto done;
        }
        if (stops(&s, cfg, next) || nout == n)
            break;
        double a = cli_now_s();
        if (nu_llm_model_decode(m, next, logits) != NU_OK) {
            fprintf(stderr, "\nnuvec generate: %s\n", nu_llm_error_message());
            goto done;
        }
        decode_s += cli_now_s() - a;
        decodes++;
    }
    if (tok) { /* a character the last tokens left unfinished, as U+FFFD */
        const char *t;
        size_t n_t;
        if (nu_llm_detokenizer_flush(s.detok, &t, &n_t) != NU_OK || !stream_text(&s, t, n_t)) {
            stream_failed(&s, NU_LLM_NO_TOKEN);
            goto done;
        }
    }
    double prefill_tps = t1 > t0 ? (double)nids / (t1 - t0) : 0, decode_tps = decode_s > 0 ? (double)decodes / decode_s : 0;
    if (json) {
        cJSON *o = cJSON_CreateObject(), *pa = cJSON_AddArrayToObject(o, "prompt_tokens"),
              *ta = cJSON_AddArrayToObject(o, "tokens");
        for (size_t i = 0; i < nids; i++)
            cJSON_AddItemToArray(pa, cJSON_CreateNumber(ids[i]));
        for (size_t i = 0; i < nout; i++)
            cJSON_AddItemToArray(ta, cJSON_CreateNumber(out[i]));
        if (tok)
            cJSON_AddStringToObject(o, "text", s.text ? s.text + text_from : "");
        else
            cJSON_AddNullToObject(o, "text");
        cJSON_AddNumberToObject(o, "prefill_tokens_per_s", prefill_tps);
        cJSON_AddNumberToObject(o, "decode_tokens_per_s", decode_tps);
        cli_llm_memory_json(o, m);
        char *text = cJSON_PrintUnformatted(o);
        if (text)
            printf("%s\n", text);
        cJSON_free(text);
        cJSON_Delete(o);
    } else {
        printf("\n");
        fflush(stdout);
        fprintf(stderr, "prompt %zu tokens, %.1f tokens/s; generated %zu, decode %.1f tokens/s\n", nids, prefill_tps, nout,
                decode_tps);
        cli_llm_memory_line(stderr, m);
    }
    rc = 0;
done:
    free(ids);
    free(out);
    free(logits);
    nu_llm_detokenizer_free(s.detok);
    free(s.text);
    nu_llm_sampler_free(sampler);
    nu_llm_model_free(m);
    nu_device_close(d);
    cli_devices_close(&devs);
    return rc;
}
