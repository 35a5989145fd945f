/* tokenize.c: `nuvec tokenize MODEL (--prompt TEXT | --file FILE) [--no-bos] [--special] [--json]`:
 * the ids a text becomes, as `nuvec generate` feeds them (both call cli_tokenize_text), and each
 * id's text. The tokenizer is read without a device (nu_llm_tokenizer_open), so
 * vocabulary-only GGUF files work. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "nuvec_llm.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nuvec tokenize MODEL (--prompt TEXT | --file FILE) [--no-bos] [--special] [--json]\n"
            "  MODEL: a GGUF file (vocabulary-only files too), a Hugging Face folder or its tokenizer.json.\n"
            "  Prints the ids of the text as `nuvec generate` feeds them, one line a token: the id, a tab and\n"
            "  the token's text (special tokens as their text; \\n \\t \\r \\\\ escaped, bytes that are not\n"
            "  UTF-8 and other control bytes as \\xNN); a summary goes to stderr. --no-bos: no bos even where\n"
            "  the vocabulary adds one; --special: special tokens written in the text (<|eot_id|>, <s>) are\n"
            "  those tokens (default: text). --json prints {model, pre, count, tokens, pieces} (pieces: each\n"
            "  token's text, invalid UTF-8 as U+FFFD).\n");
}

nu_status cli_tokenize_text(const nu_llm_tokenizer *tok, const char *text, size_t len, bool bos, bool special,
                            int32_t **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    nu_llm_tokenize_options o = {bos ? NU_LLM_ADD_DEFAULT : NU_LLM_ADD_NO, NU_LLM_ADD_DEFAULT, special};
    size_t cap = len > NU_LLM_MAX_TEXT ? 1 : NU_LLM_TOKENIZE_MAX_IDS(len);
    if (!(*ids = malloc(cap * sizeof **ids)))
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    nu_status st = nu_llm_tokenize_ex(tok, text, len, &o, *ids, cap, n);
    if (st != NU_OK) {
        free(*ids);
        *ids = NULL;
    }
    return st;
}

/* The whole file, or NULL with errno set. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 1 << 16;
            char *b = ncap > (size_t)NU_LLM_MAX_TEXT + (1 << 16) ? NULL : realloc(buf, ncap);
            if (!b) {
                free(buf);
                fclose(f);
                errno = EFBIG;
                return NULL;
            }
            buf = b, cap = ncap;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    bool err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    *len = n;
    return buf;
}

/* s[0 .. n) for a terminal: UTF-8 characters as they are, \n \t \r \\ escaped, other control bytes
 * and bytes that are not UTF-8 as \xNN. */
static void print_escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = 2;
        while (c >= 0x80 && k <= 4 && i + k <= n && !nu_llm_utf8_valid(s + i, k))
            k++;
        if (c >= 0x80 && k <= 4 && i + k <= n) { /* a character */
            fwrite(s + i, 1, k, stdout);
            i += k;
            continue;
        }
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '\r')
            fputs("\\r", stdout);
        else if (c == '\\')
            fputs("\\\\", stdout);
        else if (c < 0x20 || c >= 0x7F)
            printf("\\x%02X", c);
        else
            putchar(c);
        i++;
    }
}

int cli_tokenize(int argc, char **argv)
{
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool bos = true, special = false, json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage(stdout), 0;
        if (!strcmp(a, "--no-bos"))
            bos = false;
        else if (!strcmp(a, "--special"))
            special = true;
        else if (!strcmp(a, "--json"))
            json = true;
        else if ((!strcmp(a, "--prompt") || !strcmp(a, "--file")) && i + 1 < argc)
            *(a[2] == 'p' ? &prompt : &file) = argv[++i];
        else if (a[0] != '-' && !model)
            model = a;
        else {
            fprintf(stderr, "nuvec tokenize: bad argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model || !prompt == !file) {
        fprintf(stderr, "nuvec tokenize: %s\n", !model ? "no MODEL" : prompt ? "--prompt and --file exclude each other"
                                                                           : "no --prompt or --file");
        usage(stderr);
        return 2;
    }
    size_t len = prompt ? strlen(prompt) : 0;
    char *text = NULL;
    if (file && !(text = read_file(file, &len))) {
        fprintf(stderr, "nuvec tokenize: cannot read %s: %s\n", file, strerror(errno));
        return 1;
    }
    nu_llm_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = 1;
    double t0 = cli_now_s();
    if (nu_llm_tokenizer_open(model, &tok) != NU_OK) {
        fprintf(stderr, "nuvec tokenize: %s\n", nu_llm_error_message());
        goto done;
    }
    double t1 = cli_now_s();
    nu_status st = cli_tokenize_text(tok, file ? text : prompt, len, bos, special, &ids, &n);
    double t2 = cli_now_s();
    if (st != NU_OK) {
        fprintf(stderr, "nuvec tokenize: %s\n",
                st == NU_ERROR_HOST_OUT_OF_MEMORY && !ids ? "out of memory" : nu_llm_error_message());
        goto done;
    }
    char *piece = malloc(nu_llm_tokenizer_max_piece(tok) + 64 * 1024);
    size_t piece_cap = nu_llm_tokenizer_max_piece(tok) + 64 * 1024;
    cJSON *o = json ? cJSON_CreateObject() : NULL, *ta = NULL, *pa = NULL;
    if (!piece || (json && !o)) {
        free(piece);
        cJSON_Delete(o);
        fprintf(stderr, "nuvec tokenize: out of memory\n");
        goto done;
    }
    if (o) {
        cJSON_AddStringToObject(o, "model", nu_llm_tokenizer_model(tok));
        cJSON_AddStringToObject(o, "pre", nu_llm_tokenizer_pre(tok));
        cJSON_AddNumberToObject(o, "count", (double)n);
        ta = cJSON_AddArrayToObject(o, "tokens");
        pa = cJSON_AddArrayToObject(o, "pieces");
    }
    nu_llm_decode_options one = {true, !json}; /* JSON: U+FFFD where a piece is not UTF-8 alone */
    for (size_t i = 0; i < n; i++) {
        size_t plen = 0;
        if (nu_llm_detokenize_ex(tok, ids + i, 1, &one, piece, piece_cap, &plen) != NU_OK)
            plen = 0;
        if (o) {
            cJSON_AddItemToArray(ta, cJSON_CreateNumber(ids[i]));
            cJSON_AddItemToArray(pa, cJSON_CreateString(piece));
        } else {
            printf("%d\t", ids[i]);
            print_escaped(piece, plen);
            putchar('\n');
        }
    }
    free(piece);
    if (o) {
        char *out = cJSON_PrintUnformatted(o);
        if (out)
            printf("%s\n", out);
        cJSON_free(out);
        cJSON_Delete(o);
    }
    fprintf(stderr, "%zu bytes, %zu tokens (%s%s%s); read in %.3f s, tokenized in %.3f s\n", len, n,
            nu_llm_tokenizer_model(tok), nu_llm_tokenizer_pre(tok)[0] ? ", " : "", nu_llm_tokenizer_pre(tok), t1 - t0,
            t2 - t1);
    rc = 0;
done:
    free(text);
    free(ids);
    nu_llm_tokenizer_free(tok);
    return rc;
}
