/* source.c: where chat templates come from (a GGUF file's tokenizer.chat_template, a Hugging Face
 * folder's chat_template.jinja / tokenizer_config.json / chat_template.json) and the render
 * context Hugging Face's apply_chat_template builds (nuvec_llm/chat.h). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common.h" /* llm/common.h */
#include "jinja.h"
#include "nuvec/gguf.h"

#define FN "nu_llm_chat_template_from_model"
#define MAX_FILE ((size_t)64 << 20)

static char *dup_n(const char *s, size_t n)
{
    char *d = nu_llm__malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static char *dup_s(const char *s) { return s ? dup_n(s, strlen(s)) : NULL; }

void nu_llm_chat_template_clear(nu_llm_chat_template *t)
{
    if (!t)
        return;
    nu_llm__free(t->source);
    nu_llm__free(t->name);
    nu_llm__free(t->bos_token);
    nu_llm__free(t->eos_token);
    memset(t, 0, sizeof *t);
}

static nu_status oom(nu_llm_chat_template *t)
{
    nu_llm_chat_template_clear(t);
    return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": out of host memory");
}

/* ---- GGUF ---------------------------------------------------------------------------------------- */

/* The text of token `key`'s id (NULL when the file names none). */
static nu_status gguf_token(nu_gguf *g, const char *path, const char *key, char **out)
{
    *out = NULL;
    if (!nu_gguf_has(g, key))
        return NU_OK;
    uint32_t id;
    nu_gguf_value tokens;
    const char *text;
    uint64_t len;
    if (nu_gguf_get_u32(g, key, NULL, &id) != NU_OK || nu_gguf_find(g, "tokenizer.ggml.tokens", &tokens) != NU_OK ||
        nu_gguf_array_string(&tokens, id, &text, &len) != NU_OK)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s: %s: %s", path, key, nu_error_message(NULL));
    *out = dup_n(text, len);
    return *out ? NU_OK : NU_ERROR_HOST_OUT_OF_MEMORY;
}

static nu_status from_gguf(const char *path, const char *name, bool tools, nu_llm_chat_template *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return nu_llm__fail(NU_ERROR_IO, FN ": cannot open %s", path);
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_size == 0) {
        close(fd);
        return nu_llm__fail(NU_ERROR_IO, FN ": %s is not a readable file", path);
    }
    size_t size = (size_t)sb.st_size;
    void *bytes = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (bytes == MAP_FAILED)
        return nu_llm__fail(NU_ERROR_IO, FN ": cannot map %s", path);
    nu_gguf *g = NULL;
    nu_status s = nu_gguf_parse(bytes, size, &g);
    if (s != NU_OK) {
        munmap(bytes, size);
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s: %s", path, nu_error_message(NULL));
    }
    char key[256];
    if (!name && tools && nu_gguf_has(g, "tokenizer.chat_template.tool_use"))
        name = "tool_use";
    if (!name || !strcmp(name, "default"))
        snprintf(key, sizeof key, "tokenizer.chat_template");
    else
        snprintf(key, sizeof key, "tokenizer.chat_template.%s", name);
    const char *text;
    uint64_t len;
    if (!nu_gguf_has(g, key)) {
        char names[512] = "";
        for (uint64_t i = 0; i < nu_gguf_kv_count(g); i++) {
            const char *k;
            nu_gguf_value v;
            if (nu_gguf_kv(g, i, &k, &v) == NU_OK && !strncmp(k, "tokenizer.chat_template.", 24)) {
                size_t n = strlen(names);
                snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", k + 24);
            }
        }
        nu_gguf_close(g);
        munmap(bytes, size);
        if (names[0])
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s has no %s (named templates: %s)", path, key, names);
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s has no chat template (%s)", path, key);
    }
    if ((s = nu_gguf_get_string(g, key, NULL, &text, &len)) != NU_OK) {
        nu_gguf_close(g);
        munmap(bytes, size);
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s: %s", path, nu_error_message(NULL));
    }
    out->source = dup_n(text, len);
    out->length = len;
    out->name = name ? dup_s(name) : NULL;
    if (!out->source || (name && !out->name))
        s = NU_ERROR_HOST_OUT_OF_MEMORY;
    if (s == NU_OK)
        s = gguf_token(g, path, "tokenizer.ggml.bos_token_id", &out->bos_token);
    if (s == NU_OK)
        s = gguf_token(g, path, "tokenizer.ggml.eos_token_id", &out->eos_token);
    nu_gguf_close(g);
    munmap(bytes, size);
    if (s == NU_ERROR_HOST_OUT_OF_MEMORY)
        return oom(out);
    if (s != NU_OK)
        nu_llm_chat_template_clear(out);
    return s;
}

/* ---- Hugging Face folders ---------------------------------------------------------------------- */

/* Reads dir/name whole; NU_ERROR_IO with *text NULL when it does not exist. */
static nu_status read_file(const char *dir, const char *name, char **text, size_t *len)
{
    char path[4096];
    *text = NULL;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NU_ERROR_IO;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            char *nb = cap <= MAX_FILE ? nu_llm__malloc(cap + 1) : NULL;
            if (!nb) {
                nu_llm__free(buf);
                fclose(f);
                return cap > MAX_FILE ? nu_llm__fail(NU_ERROR_FORMAT, FN ": %s is over 64 MiB", path)
                                      : nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": out of host memory");
            }
            if (n)
                memcpy(nb, buf, n);
            nu_llm__free(buf);
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    bool err = ferror(f);
    fclose(f);
    if (err) {
        nu_llm__free(buf);
        return nu_llm__fail(NU_ERROR_IO, FN ": cannot read %s", path);
    }
    buf[n] = 0;
    *text = buf;
    *len = n;
    return NU_OK;
}

/* A token of tokenizer_config.json: a string, or an AddedToken object's "content". */
static nu_status hf_token(const cJSON *cfg, const char *key, char **out)
{
    *out = NULL;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(t))
        t = cJSON_GetObjectItemCaseSensitive(t, "content");
    if (!cJSON_IsString(t))
        return NU_OK;
    *out = dup_s(t->valuestring);
    return *out ? NU_OK : NU_ERROR_HOST_OUT_OF_MEMORY;
}

/* chat_template as tokenizer_config.json or chat_template.json has it: a string or a list of
 * {"name", "template"}. */
static nu_status hf_pick(const char *file, const cJSON *ct, const char *name, bool tools, nu_llm_chat_template *out)
{
    if (cJSON_IsString(ct)) {
        if (name && strcmp(name, "default"))
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s has a single chat template, not one named '%s'", file, name);
        out->source = dup_s(ct->valuestring);
        return out->source ? NU_OK : NU_ERROR_HOST_OUT_OF_MEMORY;
    }
    if (!cJSON_IsArray(ct))
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s: chat_template is neither a string nor a list", file);
    const cJSON *def = NULL, *tool = NULL, *want = NULL, *e;
    char names[512] = "";
    cJSON_ArrayForEach(e, ct) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name"), *t = cJSON_GetObjectItemCaseSensitive(e, "template");
        if (!cJSON_IsString(n) || !cJSON_IsString(t))
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s: a chat_template entry without a name and a template", file);
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "", n->valuestring);
        if (!strcmp(n->valuestring, "default"))
            def = e;
        if (!strcmp(n->valuestring, "tool_use"))
            tool = e;
        if (name && !strcmp(n->valuestring, name))
            want = e;
    }
    if (!name)
        want = tools && tool ? tool : def;
    if (!want) {
        if (name)
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s has no chat template named '%s' (it has: %s)", file, name, names);
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s has no default chat template (it has: %s); choose one by name", file,
                            names);
    }
    out->source = dup_s(cJSON_GetObjectItemCaseSensitive(want, "template")->valuestring);
    out->name = dup_s(cJSON_GetObjectItemCaseSensitive(want, "name")->valuestring);
    return out->source && out->name ? NU_OK : NU_ERROR_HOST_OUT_OF_MEMORY;
}

static nu_status from_folder(const char *dir, const char *name, bool tools, nu_llm_chat_template *out)
{
    struct stat sb;
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode))
        return nu_llm__fail(NU_ERROR_IO, FN ": %s is neither a .gguf file nor a folder", dir);
    char *text = NULL;
    size_t len = 0;
    nu_status s = read_file(dir, "tokenizer_config.json", &text, &len);
    if (s != NU_OK && s != NU_ERROR_IO)
        return s;
    cJSON *cfg = NULL;
    if (text) {
        cfg = cJSON_ParseWithLength(text, len);
        nu_llm__free(text);
        if (!cfg)
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s/tokenizer_config.json is not valid JSON", dir);
    }
    if ((s = read_file(dir, "chat_template.jinja", &text, &len)) == NU_OK) {
        if (name && strcmp(name, "default")) {
            nu_llm__free(text);
            cJSON_Delete(cfg);
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s/chat_template.jinja is a single template, not one named '%s'", dir,
                                name);
        }
        out->source = text;
    } else if (s != NU_ERROR_IO) {
        cJSON_Delete(cfg);
        return s;
    } else {
        s = NU_OK;
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
        char file[64] = "tokenizer_config.json";
        cJSON *cj = NULL;
        if (!ct) {
            if (read_file(dir, "chat_template.json", &text, &len) == NU_OK) {
                cj = cJSON_ParseWithLength(text, len);
                nu_llm__free(text);
                ct = cJSON_GetObjectItemCaseSensitive(cj, "chat_template");
                snprintf(file, sizeof file, "chat_template.json");
            }
        }
        if (!ct)
            s = nu_llm__fail(NU_ERROR_FORMAT, FN ": %s has no chat template (no chat_template.jinja, and no chat_template "
                             "in tokenizer_config.json or chat_template.json)", dir);
        else
            s = hf_pick(file, ct, name, tools, out);
        cJSON_Delete(cj);
    }
    if (s == NU_OK && out->source)
        out->length = strlen(out->source);
    if (s == NU_OK && cfg)
        s = hf_token(cfg, "bos_token", &out->bos_token);
    if (s == NU_OK && cfg)
        s = hf_token(cfg, "eos_token", &out->eos_token);
    cJSON_Delete(cfg);
    if (s == NU_ERROR_HOST_OUT_OF_MEMORY)
        return oom(out);
    if (s != NU_OK)
        nu_llm_chat_template_clear(out);
    return s;
}

nu_status nu_llm_chat_template_from_model(const char *path, const char *name, bool tools, nu_llm_chat_template *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!path || !out)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, FN ": NULL %s", path ? "out" : "path");
    size_t n = strlen(path);
    if (n >= 5 && !strcmp(path + n - 5, ".gguf"))
        return from_gguf(path, name, tools, out);
    return from_folder(path, name, tools, out);
}

/* ---- Render contexts ---------------------------------------------------------------------------- */

/* Whether text[0 .. len) is JSON of the wanted kind (JT_LIST or JT_DICT), failing with a message
 * naming `what` otherwise. */
static nu_status check_json(const char *what, const char *text, size_t len, jt want)
{
    jstate *st = nu_llm__calloc(1, sizeof *st);
    if (!st)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_chat_context: out of host memory");
    jmp_buf jb;
    st->jmp = &jb;
    st->depth_limit = 1000;
    st->arena.limit = (size_t)1 << 30;
    nu_status s = NU_OK;
    if (setjmp(jb)) {
        s = nu_llm__fail(st->failure == NU_LLM_TEMPLATE_MEMORY ? NU_ERROR_HOST_OUT_OF_MEMORY : NU_ERROR_INVALID_ARGUMENT,
                         "nu_llm_chat_context: %s", st->message);
    } else {
        jv v = j_json_parse(st, text, len, what);
        if (v.t != want)
            s = nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_chat_context: %s is not a JSON %s", what,
                             want == JT_LIST ? "array" : "object");
    }
    j_arena_free(&st->arena);
    nu_llm__free(st);
    return s;
}

typedef struct textbuf {
    char *p;
    size_t len, cap;
    bool failed;
} textbuf;

static void tb_add(textbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = nu_llm__malloc(cap);
        if (!p) {
            b->failed = true;
            return;
        }
        if (b->len)
            memcpy(p, b->p, b->len);
        nu_llm__free(b->p);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void tb_adds(textbuf *b, const char *s) { tb_add(b, s, strlen(s)); }

static void tb_json_string(textbuf *b, const char *s)
{
    tb_adds(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c, esc[2] = 0;
            tb_adds(b, esc);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            tb_adds(b, esc);
        } else {
            tb_add(b, s, 1);
        }
    }
    tb_adds(b, "\"");
}

nu_status nu_llm_chat_context(const nu_llm_chat_request *req, char **out, size_t *out_length)
{
    if (out)
        *out = NULL;
    if (out_length)
        *out_length = 0;
    if (!req || !out || !out_length || !req->messages)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_chat_context: NULL %s",
                            !req ? "request" : !out || !out_length ? "out" : "messages");
    nu_status s = check_json("messages", req->messages, req->messages_length, JT_LIST);
    if (s == NU_OK && req->tools)
        s = check_json("tools", req->tools, req->tools_length, JT_LIST);
    if (s == NU_OK && req->extra)
        s = check_json("extra", req->extra, req->extra_length, JT_DICT);
    const char *tokens[2] = {req->bos_token, req->eos_token};
    for (int i = 0; s == NU_OK && i < 2; i++)
        if (tokens[i] && !j_utf8_valid(tokens[i], strlen(tokens[i]), NULL))
            s = nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_chat_context: %s is not valid UTF-8",
                             i ? "eos_token" : "bos_token");
    if (s != NU_OK)
        return s;
    textbuf b = {0};
    tb_adds(&b, "{\"messages\": ");
    tb_add(&b, req->messages, req->messages_length);
    tb_adds(&b, ", \"tools\": ");
    if (req->tools)
        tb_add(&b, req->tools, req->tools_length);
    else
        tb_adds(&b, "null");
    tb_adds(&b, ", \"documents\": null, \"add_generation_prompt\": ");
    tb_adds(&b, req->add_generation_prompt ? "true" : "false");
    if (req->bos_token) {
        tb_adds(&b, ", \"bos_token\": ");
        tb_json_string(&b, req->bos_token);
    }
    if (req->eos_token) {
        tb_adds(&b, ", \"eos_token\": ");
        tb_json_string(&b, req->eos_token);
    }
    if (req->extra) {
        /* the object's members without its braces */
        const char *p = req->extra, *end = p + req->extra_length;
        while (p < end && *p != '{')
            p++;
        while (end > p && end[-1] != '}')
            end--;
        const char *q = p + 1;
        while (q < end - 1 && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
            q++;
        if (q < end - 1) {
            tb_adds(&b, ", ");
            tb_add(&b, p + 1, (size_t)(end - 1 - (p + 1)));
        }
    }
    tb_adds(&b, "}");
    if (b.failed) {
        nu_llm__free(b.p);
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_chat_context: out of host memory");
    }
    *out = b.p;
    *out_length = b.len;
    return NU_OK;
}
