/* test_llm_tokenizer_models.c: the tokenizers of real vocabularies, read from their files: the
 * tiny models' (aidreams260K's SentencePiece vocabulary from GGUF and tokenizer.json, stories260K's
 * placeholder) and llama.cpp's tokenizer test suite (vocab/: Llama 2 and Phi-3 SentencePiece,
 * Llama 3, Qwen2, GPT-2, StarCoder and DeepSeek byte-level BPE): every case gives exactly
 * llama.cpp's ids (add_special and parse_special false, as its test-tokenizer-0) and decodes back to
 * its text; special tokens parsed, bos added and the end-of-generation sets as llama.cpp 0ad4a86
 * gives them; a 1 MB text's time. The GGUF reader's refusals, on files written by the tools'
 * writer. No device needed. */
#include "harness.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "gguf_write.h"
#include "llm_tokenizer_util.h"
#include "nuvec/gguf.h"

#define END_OF_SENTENCE_TEXT "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"

/* A GGUF file's tokenizer arrays read with nuvec's GGUF reader (pieces point into the file). */
typedef struct gguf_vocab {
    char *file;
    nu_gguf *gguf;
    nu_llm_vocab v;
    nu_llm_piece *pieces;
    float *scores;
    int32_t *types;
} gguf_vocab;

static void model_path(char *path, size_t n, const char *model, const char *file)
{
    snprintf(path, n, "%s/%s/%s", models_dir(), model, file);
    struct stat st;
    if (stat(path, &st) != 0)
        fail_msg("%s is missing (set NUVEC_MODELS_DIR to the folder of the test models)", path);
}

static void load_gguf_vocab(gguf_vocab *g, const char *model)
{
    char path[4096];
    model_path(path, sizeof path, model, "model.gguf");
    struct stat st;
    stat(path, &st);
    g->file = nt_read_file(path);
    NT_OK(nu_gguf_parse(g->file, (size_t)st.st_size, &g->gguf));
    nu_gguf_value tokens, scores, types;
    NT_OK(nu_gguf_find(g->gguf, "tokenizer.ggml.tokens", &tokens));
    NT_OK(nu_gguf_find(g->gguf, "tokenizer.ggml.scores", &scores));
    NT_OK(nu_gguf_find(g->gguf, "tokenizer.ggml.token_type", &types));
    uint64_t n = tokens.length;
    assert_true(n > 0 && n < (1u << 24) && scores.length == n && types.length == n);
    g->pieces = calloc(n, sizeof *g->pieces);
    g->scores = calloc(n, sizeof *g->scores);
    g->types = calloc(n, sizeof *g->types);
    assert_true(g->pieces && g->scores && g->types);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len;
        NT_OK(nu_gguf_array_string(&tokens, i, &g->pieces[i].text, &len));
        g->pieces[i].length = (size_t)len;
    }
    memcpy(g->scores, scores.data, n * 4);
    memcpy(g->types, types.data, n * 4);
    nu_llm_vocab *v = &g->v;
    uint32_t bos, eos, unk;
    NT_OK(nu_gguf_get_u32(g->gguf, "tokenizer.ggml.bos_token_id", NULL, &bos));
    NT_OK(nu_gguf_get_u32(g->gguf, "tokenizer.ggml.eos_token_id", NULL, &eos));
    NT_OK(nu_gguf_get_u32(g->gguf, "tokenizer.ggml.unknown_token_id", NULL, &unk));
    NT_OK(nu_gguf_get_bool(g->gguf, "tokenizer.ggml.add_bos_token", NULL, &v->add_bos));
    bool yes = true;
    NT_OK(nu_gguf_get_bool(g->gguf, "tokenizer.ggml.add_space_prefix", &yes, &v->add_space_prefix));
    v->count = (uint32_t)n;
    v->pieces = g->pieces;
    v->scores = g->scores;
    v->types = g->types;
    v->bos = (int32_t)bos, v->eos = (int32_t)eos, v->unk = (int32_t)unk;
}

static void free_gguf_vocab(gguf_vocab *g)
{
    nu_gguf_close(g->gguf);
    free(g->file);
    free(g->pieces);
    free(g->scores);
    free(g->types);
}

/* Opens `model`/`file` with nu_llm_tokenizer_open. */
static nu_llm_tokenizer *open_model(const char *model, const char *file)
{
    char path[4096];
    model_path(path, sizeof path, model, file);
    nu_llm_tokenizer *t = NULL;
    LLM_OK(nu_llm_tokenizer_open(path, &t));
    return t;
}

/* Both tokenizers give the same ids for text (bos as each vocabulary says). */
static void same_ids(const nu_llm_tokenizer *a, const nu_llm_tokenizer *b, const char *text, size_t len)
{
    size_t cap = NU_LLM_TOKENIZE_MAX_IDS(len), na, nb;
    int32_t *x = malloc(cap * sizeof *x), *y = malloc(cap * sizeof *y);
    assert_true(x && y);
    LLM_OK(nu_llm_tokenize_ex(a, text, len, NULL, x, cap, &na));
    LLM_OK(nu_llm_tokenize_ex(b, text, len, NULL, y, cap, &nb));
    if (na != nb || memcmp(x, y, na * sizeof *x))
        fail_msg("\"%.*s\": %zu ids and %zu ids differ", (int)(len > 60 ? 60 : len), text, na, nb);
    free(x);
    free(y);
}

/* ---- The tiny models ---------------------------------------------------------------------- */

static const char *ROUND_TRIPS[] = {
    "I dream of",
    "My thoughts drift",
    "I remember",
    "Hello, world!",
    "  two leading spaces and a trailing one ",
    "tabs\tand\nnew lines\r\n",
    "Numbers 0.000000 and 3.14159, 42%",
    "caf\xC3\xA9 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9",
    "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE6\x96\x87",          /* Japanese */
    "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD0\xBC\xD0\xB8\xD1\x80", /* Russian */
    "emoji \xF0\x9F\x98\x80\xF0\x9F\x8C\x8C!",
    "<s> literal specials </s> and <unk>",
    "Dimensions unfold, as I softly refine, as I softly refine.",
    "a",
    " ",
    "\x01\x02\x7F",
};

static void aidreams_vocabulary(void **state)
{
    (void)state;
    gguf_vocab g = {0};
    load_gguf_vocab(&g, "aidreams260K");
    nu_llm_vocab *v = &g.v;
    assert_int_equal(v->count, 512);
    assert_int_equal(v->bos, 1);
    assert_int_equal(v->eos, 2);
    assert_int_equal(v->unk, 0);
    assert_true(v->add_bos && v->add_space_prefix);
    nu_llm_tokenizer *t = NULL;
    LLM_OK(nu_llm_tokenizer_new(v, &t));

    /* The README's ids (bos included), from llama.cpp. */
    static const struct {
        const char *text;
        int32_t ids[16];
        size_t n;
    } known[] = {
        {"I dream of", {1, 303, 281, 269, 435, 447, 275}, 7},
        {"My thoughts drift", {1, 429, 478, 451, 277, 437, 444, 305, 293, 281, 322, 443, 434}, 13},
        {"I remember", {1, 303, 306, 447, 430, 371, 261}, 7},
    };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        int32_t ids[64];
        size_t n;
        LLM_OK(nu_llm_tokenize(t, known[k].text, strlen(known[k].text), -1, ids, 64, &n));
        assert_int_equal(n, known[k].n);
        assert_memory_equal(ids, known[k].ids, n * sizeof *ids);
        char *back = detok(t, ids, n);
        assert_string_equal(back, known[k].text);
        free(back);
    }
    /* The README's greedy continuation decodes to its text. */
    static const int32_t cont[] = {1,   303, 281, 269, 435, 447, 275, 429, 464, 448, 464, 464, 464, 464, 464,
                                   464, 448, 429, 468, 342, 358, 402, 327, 446, 299, 303, 266, 437, 443, 434,
                                   438, 451, 306, 443, 259, 430, 446, 299, 303, 266, 437, 443, 434, 438, 451,
                                   306, 443};
    char *s = detok(t, cont, sizeof cont / sizeof cont[0]);
    assert_string_equal(s, "I dream of 0.000000. Dimensions unfold, as I softly refine, as I softly ref");
    free(s);

    /* Round trips, and the plain rule, on fixed and random strings. */
    for (size_t k = 0; k < sizeof ROUND_TRIPS / sizeof ROUND_TRIPS[0]; k++) {
        const char *text = ROUND_TRIPS[k];
        size_t len = strlen(text), n;
        int32_t ids[512];
        LLM_OK(nu_llm_tokenize(t, text, len, 1, ids, 512, &n));
        char *back = detok(t, ids, n);
        if (strcmp(back, text) != 0)
            fail_msg("round trip of \"%s\" gave \"%s\"", text, back);
        free(back);
        check_against_reference(t, v, text, len);
    }
    uint64_t rng = 99;
    static const char *parts[] = {"the ", "dream", " of", "\xC3\xA9", " ", "ing", "x", "\n", "\xE2\x98\x83", "Q",
                                  "0.", "whisper", "s", ",", "  "};
    for (int k = 0; k < 300; k++) {
        char text[400];
        size_t len = 0;
        int n_parts = (int)(nt_rand(&rng) % 30);
        for (int p = 0; p < n_parts; p++) {
            const char *part = parts[nt_rand(&rng) % (sizeof parts / sizeof parts[0])];
            memcpy(text + len, part, strlen(part));
            len += strlen(part);
        }
        text[len] = 0;
        check_against_reference(t, v, text, len);
        int32_t ids[1300];
        size_t n;
        LLM_OK(nu_llm_tokenize(t, text, len, 1, ids, 1300, &n));
        char *back = detok(t, ids, n);
        assert_string_equal(back, text);
        free(back);
    }
    /* The same tokenizer read by nu_llm_tokenizer_open from the GGUF file and from the Hugging
     * Face folder (tokenizer.json; its post-processor adds bos). */
    nu_llm_tokenizer *from_gguf = open_model("aidreams260K", "model.gguf");
    nu_llm_tokenizer *from_hf = open_model("aidreams260K", "hf");
    assert_int_equal(nu_llm_tokenizer_count(from_hf), 512);
    assert_true(nu_llm_tokenizer_add_bos(from_hf) && nu_llm_tokenizer_bos(from_hf) == 1);
    assert_true(nu_llm_tokenizer_eos(from_hf) == 2 && nu_llm_tokenizer_is_eog(from_hf, 2));
    assert_string_equal(nu_llm_tokenizer_model(from_hf), "llama");
    for (size_t k = 0; k < sizeof ROUND_TRIPS / sizeof ROUND_TRIPS[0]; k++) {
        same_ids(t, from_gguf, ROUND_TRIPS[k], strlen(ROUND_TRIPS[k]));
        same_ids(t, from_hf, ROUND_TRIPS[k], strlen(ROUND_TRIPS[k]));
    }
    nu_llm_tokenizer_free(from_gguf);
    nu_llm_tokenizer_free(from_hf);
    nu_llm_tokenizer_free(t);
    free_gguf_vocab(&g);
}

/* Hugging Face's BPE over tokenizer.json, written plainly: the text normalised as its normalizer
 * says (U+2581 in front, spaces as U+2581), split into characters (ids from its vocab, else byte
 * fallback), then the adjacent pair of the lowest merge rank merged, leftmost first, until none
 * is left. Its merges were derived from the scores, so it must agree with the tokenizer. */
typedef struct hf_bpe {
    cJSON *root, *vocab;
    char **merge_left, **merge_right;
    int merges;
} hf_bpe;

static int hf_id(const hf_bpe *h, const char *s, size_t n)
{
    char key[64];
    if (n >= sizeof key)
        return -1;
    memcpy(key, s, n);
    key[n] = 0;
    cJSON *e = cJSON_GetObjectItemCaseSensitive(h->vocab, key);
    return cJSON_IsNumber(e) ? e->valueint : -1;
}

static int hf_rank(const hf_bpe *h, const char *a, size_t an, const char *b, size_t bn)
{
    for (int r = 0; r < h->merges; r++)
        if (strlen(h->merge_left[r]) == an && strlen(h->merge_right[r]) == bn && memcmp(h->merge_left[r], a, an) == 0 &&
            memcmp(h->merge_right[r], b, bn) == 0)
            return r;
    return -1;
}

static int32_t hf_piece(const void *h, const char *s, size_t n) { return hf_id(h, s, n); }

static int32_t hf_byte(const void *h, int b)
{
    char piece[8];
    snprintf(piece, sizeof piece, "<0x%02X>", b);
    return hf_id(h, piece, 6);
}

static size_t hf_tokenize(const hf_bpe *h, const char *text, size_t len, int32_t *ids)
{
    char *norm;
    size_t (*sym)[3];
    size_t n = ref_symbols(text, len, true, &norm, &sym);
    for (;;) {
        int best_rank = -1;
        size_t best = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            int r = hf_rank(h, norm + sym[i][0], sym[i][1], norm + sym[i + 1][0], sym[i + 1][1]);
            if (r >= 0 && (best_rank < 0 || r < best_rank)) {
                best_rank = r;
                best = i;
            }
        }
        if (best_rank < 0)
            break;
        sym[best][1] += sym[best + 1][1];
        memmove(sym + best + 1, sym + best + 2, (n - best - 2) * sizeof *sym);
        n--;
    }
    size_t out = ref_emit(hf_piece, hf_byte, h, norm, sym, n, ids);
    free(norm);
    free(sym);
    return out;
}

/* tokenizer.json (Hugging Face) holds the same vocabulary: the same piece for every id, and its
 * BPE merges give the same ids. */
static void aidreams_tokenizer_json_agrees(void **state)
{
    (void)state;
    gguf_vocab g = {0};
    load_gguf_vocab(&g, "aidreams260K");
    char path[4096];
    snprintf(path, sizeof path, "%s/aidreams260K/hf/tokenizer.json", models_dir());
    char *json = nt_read_file(path);
    hf_bpe h = {0};
    h.root = cJSON_Parse(json);
    assert_non_null(h.root);
    cJSON *model = cJSON_GetObjectItemCaseSensitive(h.root, "model");
    h.vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    assert_true(cJSON_IsObject(h.vocab));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback")));
    int seen = 0;
    for (cJSON *e = h.vocab->child; e; e = e->next) {
        assert_true(cJSON_IsNumber(e));
        int id = e->valueint;
        assert_true(id >= 0 && id < (int)g.v.count);
        const nu_llm_piece *p = &g.pieces[id];
        if (p->length != strlen(e->string) || memcmp(p->text, e->string, p->length) != 0)
            fail_msg("id %d: GGUF \"%.*s\", tokenizer.json \"%s\"", id, (int)p->length, p->text, e->string);
        seen++;
    }
    assert_int_equal(seen, (int)g.v.count);

    /* Merges: ["a", "b"] pairs (or "a b" strings, the older form). */
    cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    h.merges = cJSON_GetArraySize(merges);
    assert_true(h.merges > 0);
    h.merge_left = calloc((size_t)h.merges, sizeof *h.merge_left);
    h.merge_right = calloc((size_t)h.merges, sizeof *h.merge_right);
    assert_true(h.merge_left && h.merge_right);
    int r = 0;
    for (cJSON *m = merges->child; m; m = m->next, r++) {
        if (cJSON_IsArray(m)) {
            h.merge_left[r] = strdup(cJSON_GetArrayItem(m, 0)->valuestring);
            h.merge_right[r] = strdup(cJSON_GetArrayItem(m, 1)->valuestring);
        } else {
            assert_true(cJSON_IsString(m));
            const char *sp = strchr(m->valuestring, ' ');
            assert_non_null(sp);
            h.merge_left[r] = strndup(m->valuestring, (size_t)(sp - m->valuestring));
            h.merge_right[r] = strdup(sp + 1);
        }
    }
    nu_llm_tokenizer *t = NULL;
    LLM_OK(nu_llm_tokenizer_new(&g.v, &t));
    uint64_t rng = 7;
    static const char *parts[] = {"the ", "dream", " of", "\xC3\xA9", " ", "ing", "x", "\n", "\xE2\x98\x83", "Q",
                                  "0.", "whisper", "s", ",", "  ", "I ", "softly", "refine", "vector", "es"};
    for (int k = 0; k < 300 + (int)(sizeof ROUND_TRIPS / sizeof ROUND_TRIPS[0]); k++) {
        char text[400];
        size_t len = 0;
        if (k < (int)(sizeof ROUND_TRIPS / sizeof ROUND_TRIPS[0])) {
            if (strstr(ROUND_TRIPS[k], "<s>"))
                continue; /* Hugging Face reads <s> in text as the special token */
            len = strlen(ROUND_TRIPS[k]);
            memcpy(text, ROUND_TRIPS[k], len);
        } else {
            int n_parts = (int)(nt_rand(&rng) % 30);
            for (int p = 0; p < n_parts; p++) {
                const char *part = parts[nt_rand(&rng) % (sizeof parts / sizeof parts[0])];
                memcpy(text + len, part, strlen(part));
                len += strlen(part);
            }
        }
        if (len == 0)
            continue; /* Hugging Face prepends U+2581 to empty text too; SentencePiece does not */
        int32_t got[1300], want[1300];
        size_t n;
        LLM_OK(nu_llm_tokenize(t, text, len, 0, got, 1300, &n));
        size_t m = hf_tokenize(&h, text, len, want);
        size_t i = 0;
        while (i < n && i < m && got[i] == want[i])
            i++;
        if (n != m || i != n)
            fail_msg("\"%.*s\": %zu ids, Hugging Face's BPE %zu; first difference at %zu", (int)len, text, n, m, i);
    }
    nu_llm_tokenizer_free(t);
    for (int i = 0; i < h.merges; i++) {
        free(h.merge_left[i]);
        free(h.merge_right[i]);
    }
    free(h.merge_left);
    free(h.merge_right);
    cJSON_Delete(h.root);
    free(json);
    free_gguf_vocab(&g);
}

/* stories260K's placeholder vocabulary: text becomes byte tokens only (README). */
static void stories_placeholder_vocabulary(void **state)
{
    (void)state;
    gguf_vocab g = {0};
    load_gguf_vocab(&g, "stories260K");
    nu_llm_tokenizer *t = NULL;
    LLM_OK(nu_llm_tokenizer_new(&g.v, &t));
    int32_t ids[32];
    size_t n;
    LLM_OK(nu_llm_tokenize(t, "Hi", 2, -1, ids, 32, &n));
    assert_int_equal(n, 6); /* bos, then U+2581's three bytes, 'H', 'i' */
    const int32_t want[] = {1, 3 + 0xE2, 3 + 0x96, 3 + 0x81, 3 + 'H', 3 + 'i'};
    assert_memory_equal(ids, want, sizeof want);
    nu_llm_tokenizer_free(t);
    free_gguf_vocab(&g);
}


/* ---- llama.cpp's tokenizer tests (vocab/) ------------------------------------------------------ */

/* What llama.cpp 0ad4a86 says of each vocabulary (llama_vocab_bos, _eos, _get_add_bos and
 * llama_vocab_is_eog over all ids, run once against its shipped library). */
static const struct vocab_facts {
    const char *name, *model, *pre;
    int32_t bos, eos;
    bool add_bos;
    int32_t eog[4];
    size_t n_eog;
} VOCABS[] = {
    {"llama-spm", "llama", "", 1, 2, true, {2}, 1},
    {"phi-3", "llama", "", 1, 32000, true, {2, 32000, 32007}, 3},
    {"llama-bpe", "gpt2", "llama-bpe", 128000, 128001, true, {128001, 128009}, 2},
    {"qwen2", "gpt2", "qwen2", 151643, 151643, false, {128247, 151643, 151645}, 3},
    {"gpt-2", "gpt2", "gpt-2", 50256, 50256, false, {50256}, 1},
    {"starcoder", "gpt2", "starcoder", 0, 0, false, {0, 4}, 2},
    {"deepseek-llm", "gpt2", "deepseek-llm", 100000, 100001, true, {100001}, 1},
};

static nu_llm_tokenizer *open_vocab(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "vocab/ggml-vocab-%s.gguf", name);
    return open_model(".", path);
}

/* The .inp file's texts (each followed by a line __ggml_vocab_test__) and the .out file's lines of
 * ids, as test-tokenizer-0 reads them. */
typedef struct vocab_case {
    const char *text;
    size_t len;
    int32_t ids[512];
    size_t n;
} vocab_case;

static size_t read_cases(const char *name, char **inp, char **outp, vocab_case *cases, size_t cap)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf.inp", models_dir(), name);
    char *in = *inp = nt_read_file(path);
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf.out", models_dir(), name);
    char *out = *outp = nt_read_file(path);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t n = 0;
    for (char *p = in, *line = out; *p && n < cap; n++) {
        char *end = strstr(p, sep), *eol = strchr(line, '\n');
        assert_non_null(eol);
        *eol = 0;
        vocab_case *c = &cases[n];
        c->text = p;
        c->len = end ? (size_t)(end - p) : strlen(p);
        c->n = 0;
        for (char *q = line; *q;) {
            char *next;
            long id = strtol(q, &next, 10);
            if (next == q)
                break;
            assert_true(c->n < 512);
            c->ids[c->n++] = (int32_t)id;
            q = next;
        }
        line = eol + 1;
        p = end ? end + strlen(sep) : p + c->len;
    }
    return n;
}

/* Every case: the ids exactly; decoding gives the text back (llama.cpp's own decoding does too,
 * but for two cases on the vocabularies where it cleans up spaces, " ?" and such: nuvec does not
 * clean up, so its decoding is lossless), and so does the streaming detokenizer. */
static void vocab_files_match_llama_cpp(void **state)
{
    (void)state;
    static vocab_case cases[64];
    for (size_t v = 0; v < sizeof VOCABS / sizeof VOCABS[0]; v++) {
        const struct vocab_facts *f = &VOCABS[v];
        nu_llm_tokenizer *t = open_vocab(f->name);
        assert_string_equal(nu_llm_tokenizer_model(t), f->model);
        assert_string_equal(nu_llm_tokenizer_pre(t), f->pre);
        assert_int_equal(nu_llm_tokenizer_bos(t), f->bos);
        assert_int_equal(nu_llm_tokenizer_eos(t), f->eos);
        assert_int_equal(nu_llm_tokenizer_add_bos(t), f->add_bos);
        int32_t eog[16];
        assert_int_equal(nu_llm_tokenizer_eog(t, eog, 16), f->n_eog);
        assert_memory_equal(eog, f->eog, f->n_eog * sizeof *eog);
        char *inp, *outp;
        size_t n = read_cases(f->name, &inp, &outp, cases, 64);
        assert_true(n >= 40);
        nu_llm_detokenizer *d;
        LLM_OK(nu_llm_detokenizer_new(t, NULL, &d));
        nu_llm_tokenize_options plain = {NU_LLM_ADD_NO, NU_LLM_ADD_NO, false};
        for (size_t k = 0; k < n; k++) {
            const vocab_case *c = &cases[k];
            int32_t ids[2048];
            size_t got;
            LLM_OK(nu_llm_tokenize_ex(t, c->text, c->len, &plain, ids, 2048, &got));
            if (got != c->n || memcmp(ids, c->ids, got * sizeof *ids)) {
                size_t i = 0;
                while (i < got && i < c->n && ids[i] == c->ids[i])
                    i++;
                fail_msg("%s: \"%.*s\": %zu ids, llama.cpp %zu; first difference at %zu", f->name,
                         (int)(c->len > 60 ? 60 : c->len), c->text, got, c->n, i);
            }
            char *back = detok(t, c->ids, c->n);
            if (strlen(back) != c->len || memcmp(back, c->text, c->len))
                fail_msg("%s: \"%.*s\" decoded to \"%s\"", f->name, (int)c->len, c->text, back);
            free(back);
            char streamed[8192];
            size_t at = 0;
            for (size_t i = 0; i < c->n; i++) {
                const char *piece;
                LLM_OK(nu_llm_detokenizer_push(d, c->ids[i], &piece, &got));
                assert_true(at + got <= sizeof streamed);
                memcpy(streamed + at, piece, got);
                at += got;
            }
            const char *rest;
            LLM_OK(nu_llm_detokenizer_flush(d, &rest, &got));
            assert_int_equal(got, 0);
            if (at != c->len || memcmp(streamed, c->text, at))
                fail_msg("%s: \"%.*s\" streamed as \"%.*s\"", f->name, (int)c->len, c->text, (int)at, streamed);
        }
        print_message("%s (%s, %s): %zu cases\n", f->name, f->model, f->pre[0] ? f->pre : "-", n);
        nu_llm_detokenizer_free(d);
        free(inp);
        free(outp);
        nu_llm_tokenizer_free(t);
    }
}

/* Special tokens written in the text, and bos, as llama.cpp gives them (llama_tokenize with
 * add_special / parse_special; its results, run once): Llama 3's and Qwen2's chat markers,
 * Phi-3's (rstrip: the whitespace after them goes), SentencePiece's <s> and <unk>, StarCoder's
 * FIM tokens, DeepSeek's user-defined characters (split out even without parse_special). */
static void special_tokens_match_llama_cpp(void **state)
{
    (void)state;
    static const struct {
        const char *vocab, *text;
        bool add, parse;
        int32_t ids[16];
        size_t n;
    } cases[] = {
        {"llama-bpe", "<|begin_of_text|>Hello<|eot_id|>\n<|start_header_id|>user<|end_header_id|>\n\nHi", false, true,
         {128000, 9906, 128009, 198, 128006, 882, 128007, 271, 13347}, 9},
        {"llama-bpe", "<|eot_id|>Hello", true, false, {128000, 27, 91, 68, 354, 851, 91, 29, 9906}, 9},
        {"llama-bpe", " <|eot_id|> x", true, true, {128000, 220, 128009, 865}, 4},
        {"qwen2", "<|im_start|>user\nHi<|im_end|>\n", false, true, {151644, 872, 198, 13048, 151645, 198}, 6},
        {"qwen2", "<|im_start|>", false, false, {27, 91, 318, 4906, 91, 29}, 6},
        {"qwen2", "[PAD151650]x", false, true, {151650, 87}, 2},
        {"phi-3", "<|user|>\nHello<|end|>\n<|assistant|>", true, true, {1, 32010, 15043, 32007, 32001}, 5},
        {"phi-3", "<|user|>\nHello</s> x", true, false, {1, 529, 29989, 1792, 29989, 29958, 13, 10994, 829, 29879, 29958, 921}, 12},
        {"phi-3", "</s>  x", true, true, {1, 2, 921}, 3},
        {"llama-spm", "<s>Hello</s> world", false, true, {1, 15043, 2, 29871, 3186}, 5},
        {"llama-spm", "<s>Hello</s>", true, false, {1, 529, 29879, 29958, 10994, 829, 29879, 29958}, 8},
        {"llama-spm", "<unk> x", true, true, {1, 0, 29871, 921}, 4},
        {"starcoder", "<fim_prefix>def f():<fim_suffix>\n<fim_middle>", false, true, {1, 610, 315, 2284, 3, 222, 2}, 7},
        {"starcoder", "<fim_prefix>", false, false, {65, 107, 468, 100, 4271, 67}, 6},
        {"deepseek-llm", "Br\xC3\xB8" "d \xC3\xB8l \xC3\xB8re", false, false, {11153, 100002, 67, 207, 100002, 75, 207, 100002, 248}, 9},
        {"deepseek-llm", "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>Hi" END_OF_SENTENCE_TEXT, true, true,
         {100000, 100000, 11007, 100001}, 4},
        {"gpt-2", "a<|endoftext|>b", false, true, {64, 50256, 65}, 3},
        {"gpt-2", "a<|endoftext|>b", false, false, {64, 27, 91, 437, 1659, 5239, 91, 29, 65}, 9},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        nu_llm_tokenizer *t = open_vocab(cases[k].vocab);
        nu_llm_tokenize_options o = {cases[k].add ? NU_LLM_ADD_DEFAULT : NU_LLM_ADD_NO,
                                     cases[k].add ? NU_LLM_ADD_DEFAULT : NU_LLM_ADD_NO, cases[k].parse};
        int32_t ids[64];
        size_t n;
        LLM_OK(nu_llm_tokenize_ex(t, cases[k].text, strlen(cases[k].text), &o, ids, 64, &n));
        if (n != cases[k].n || memcmp(ids, cases[k].ids, n * sizeof *ids))
            fail_msg("%s: \"%s\" (%s, %s): %zu ids, llama.cpp %zu", cases[k].vocab, cases[k].text,
                     cases[k].add ? "bos" : "no bos", cases[k].parse ? "special" : "text", n, cases[k].n);
        nu_llm_tokenizer_free(t);
    }
}

/* A 1 MB text: words, numbers, punctuation, other scripts, emoji, runs of spaces and newlines. */
static void a_megabyte_of_text(void **state)
{
    (void)state;
    static const char *const words[] = {"the ", "quick ", "brown ", "fox, ", "jumps ", "\xC3\xBC" "ber ",
                                        "\xE6\x97\xA5\xE6\x9C\xAC ", "\xF0\x9F\xA6\x99 ", "1234567 ", "\n",
                                        "don't ", "   ", "na\xC3\xAFve ", "(x)->y; "};
    size_t len = 1 << 20, at = 0;
    char *text = malloc(len);
    assert_non_null(text);
    uint64_t rng = 3;
    while (at < len) {
        const char *w = words[nt_rand(&rng) % (sizeof words / sizeof words[0])];
        size_t n = strlen(w);
        if (at + n > len)
            break;
        memcpy(text + at, w, n);
        at += n;
    }
    static const char *const vocabs[] = {"llama-bpe", "qwen2", "llama-spm"};
    for (size_t v = 0; v < 3; v++) {
        nu_llm_tokenizer *t = open_vocab(vocabs[v]);
        size_t cap = NU_LLM_TOKENIZE_MAX_IDS(at), n;
        int32_t *ids = malloc(cap * sizeof *ids);
        assert_non_null(ids);
        clock_t c0 = clock();
        LLM_OK(nu_llm_tokenize_ex(t, text, at, NULL, ids, cap, &n));
        double s = (double)(clock() - c0) / CLOCKS_PER_SEC;
        char *back = detok(t, ids, n);
        assert_true(strlen(back) == at && !memcmp(back, text, at));
        print_message("%s: %zu bytes -> %zu ids in %.3f s of CPU\n", vocabs[v], at, n, s);
        assert_true(s < 10); /* O(n^2) would take hours; sanitizers and a loaded machine slow it */
        free(back);
        free(ids);
        nu_llm_tokenizer_free(t);
    }
    free(text);
}

/* ---- The GGUF reader's refusals (files written by the tools' writer) ----------------------- */

/* A small byte-level vocabulary: the 256 bytes of GPT-2's alphabet, "ab", "\xC4\xA0" "a" (" a"),
 * <|begin_of_text|>, <|eot_id|>; merges "a b" and "Ġ a". Each field can be spoiled. */
typedef struct mini_vocab {
    const char *model, *pre;
    const char *merge0;          /* the first merge */
    uint32_t types_count;        /* token_type's length (0: the tokens') */
    int32_t bad_type_at, bad_type;
    uint32_t bos;
    bool no_merges, no_model, scores_as_strings, drop_byte_a;
} mini_vocab;

#define MINI_TOKENS 260

static char mini_text[MINI_TOKENS][24];

static void write_mini(const char *path, const mini_vocab *m)
{
    const char *tokens[MINI_TOKENS];
    int32_t types[MINI_TOKENS];
    for (int b = 0; b < 256; b++) {
        alphabet(b, mini_text[b]);
        types[b] = NU_LLM_TOKEN_NORMAL;
    }
    if (m->drop_byte_a)
        strcpy(mini_text['A'], "A2");
    strcpy(mini_text[256], "ab");
    strcpy(mini_text[257], "\xC4\xA0" "a");
    strcpy(mini_text[258], "<|begin_of_text|>");
    strcpy(mini_text[259], "<|eot_id|>");
    types[256] = types[257] = NU_LLM_TOKEN_NORMAL;
    types[258] = types[259] = NU_LLM_TOKEN_CONTROL;
    for (int i = 0; i < MINI_TOKENS; i++)
        tokens[i] = mini_text[i];
    if (m->bad_type_at)
        types[m->bad_type_at] = m->bad_type;
    const char *merges[] = {m->merge0 ? m->merge0 : "a b", "\xC4\xA0 a"};
    gguf_writer *w;
    NT_OK(gguf_writer_new(0, &w));
    NT_OK(gguf_writer_string(w, "general.architecture", "llama"));
    if (!m->no_model)
        NT_OK(gguf_writer_string(w, "tokenizer.ggml.model", m->model ? m->model : "gpt2"));
    NT_OK(gguf_writer_string(w, "tokenizer.ggml.pre", m->pre ? m->pre : "llama-bpe"));
    NT_OK(gguf_writer_string_array(w, "tokenizer.ggml.tokens", tokens, MINI_TOKENS));
    NT_OK(gguf_writer_array(w, "tokenizer.ggml.token_type", NU_GGUF_INT32, types,
                            m->types_count ? m->types_count : MINI_TOKENS));
    if (m->scores_as_strings)
        NT_OK(gguf_writer_string_array(w, "tokenizer.ggml.scores", tokens, MINI_TOKENS));
    if (!m->no_merges)
        NT_OK(gguf_writer_string_array(w, "tokenizer.ggml.merges", merges, 2));
    NT_OK(gguf_writer_u32(w, "tokenizer.ggml.bos_token_id", m->bos ? m->bos : 258));
    NT_OK(gguf_writer_u32(w, "tokenizer.ggml.eos_token_id", 259));
    NT_OK(gguf_writer_string(w, "tokenizer.chat_template", "{{ bos_token }}{{ messages }}"));
    /* One tensor: the writer copies its (empty) tensor infos from a NULL pointer otherwise,
     * which UBSan refuses. */
    uint64_t one = 1;
    float zero = 0;
    NT_OK(gguf_writer_tensor(w, "t", NU_DTYPE_F32, 1, &one));
    NT_OK(gguf_writer_begin(w, path));
    NT_OK(gguf_writer_data(w, &zero, sizeof zero));
    NT_OK(gguf_writer_finish(w));
    gguf_writer_free(w);
}

static void gguf_reader(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_mini.gguf", nt_tmp_dir());
    mini_vocab m = {0};
    write_mini(path, &m);
    nu_llm_tokenizer *t = NULL;
    LLM_OK(nu_llm_tokenizer_open(path, &t));
    assert_string_equal(nu_llm_tokenizer_model(t), "gpt2");
    assert_string_equal(nu_llm_tokenizer_pre(t), "llama-bpe");
    assert_true(nu_llm_tokenizer_add_bos(t)); /* llama-bpe's default, the file says nothing */
    assert_string_equal(nu_llm_tokenizer_chat_template(t), "{{ bos_token }}{{ messages }}");
    assert_int_equal(nu_llm_tokenizer_special(t, NU_LLM_SPECIAL_EOT), 259);
    int32_t ids[16];
    size_t n;
    LLM_OK(nu_llm_tokenize_ex(t, "ab a abab!", 10, NULL, ids, 16, &n));
    /* "ab" is a token whole (llama-bpe ignores merges then); " abab" merges "a b" (rank 0) twice,
     * leaving the space alone, before "Ġ a" (rank 1) could apply; bytes are tokens 0 .. 255. */
    const int32_t want[] = {258, 256, 257, ' ', 256, 256, '!'};
    assert_int_equal(n, sizeof want / sizeof want[0]);
    assert_memory_equal(ids, want, sizeof want);
    char *back = detok(t, ids, n);
    assert_string_equal(back, "ab a abab!");
    free(back);
    nu_llm_tokenizer_free(t);

    struct {
        mini_vocab m;
        nu_status status;
        const char *words;
    } bad[] = {
        {{.pre = "not-a-pre"}, NU_ERROR_UNSUPPORTED, "\"not-a-pre\""},
        {{.model = "bert"}, NU_ERROR_UNSUPPORTED, "bert"},
        {{.merge0 = "ab"}, NU_ERROR_FORMAT, "merge 0 \"ab\" is not two pieces"},
        {{.merge0 = "a z"}, NU_ERROR_FORMAT, "\"az\" is not a token"},
        {{.types_count = 10}, NU_ERROR_FORMAT, "has 10 elements"},
        {{.bos = 9999}, NU_ERROR_FORMAT, "9999"},
        {{.bad_type_at = 7, .bad_type = 9}, NU_ERROR_FORMAT, "type 9"},
        {{.no_merges = true}, NU_ERROR_FORMAT, "merges"},
        {{.no_model = true}, NU_ERROR_FORMAT, "tokenizer.ggml.model"},
        {{.drop_byte_a = true}, NU_ERROR_FORMAT, "no token for byte 0x41"},
        {{.scores_as_strings = true}, NU_ERROR_FORMAT, "tokenizer.ggml.scores"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        write_mini(path, &bad[k].m);
        t = (nu_llm_tokenizer *)&m;
        LLM_STATUS(bad[k].status, nu_llm_tokenizer_open(path, &t));
        assert_null(t);
        if (!strstr(nu_llm_error_message(), bad[k].words) || !strstr(nu_llm_error_message(), path))
            fail_msg("case %zu: \"%s\" lacks \"%s\" or the path", k, nu_llm_error_message(), bad[k].words);
    }
    remove(path);
}

/* nu_llm_tokenizer_open's refusals of paths. */
static void open_refusals(void **state)
{
    (void)state;
    char path[4096];
    nu_llm_tokenizer *t = (nu_llm_tokenizer *)path;
    LLM_STATUS(NU_ERROR_IO, nu_llm_tokenizer_open("/no/such/file.gguf", &t));
    assert_null(t);
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_tokenizer_open(NULL, &t));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_tokenizer_open("x", NULL));
    snprintf(path, sizeof path, "%s/stories260K/hf", models_dir()); /* a folder without tokenizer.json */
    LLM_STATUS(NU_ERROR_IO, nu_llm_tokenizer_open(path, &t));
    assert_non_null(strstr(nu_llm_error_message(), "tokenizer.json"));
    static const struct {
        const char *name, *bytes;
        nu_status status;
    } files[] = {
        {"junk.gguf", "not a GGUF file", NU_ERROR_FORMAT},
        {"empty.gguf", "", NU_ERROR_FORMAT},
        {"junk.json", "{\"model\": ", NU_ERROR_FORMAT},
        {"wordpiece.json", "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", NU_ERROR_UNSUPPORTED},
    };
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        snprintf(path, sizeof path, "%s/%s", nt_tmp_dir(), files[k].name);
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fputs(files[k].bytes, f);
        fclose(f);
        LLM_STATUS(files[k].status, nu_llm_tokenizer_open(path, &t));
        assert_null(t);
        remove(path);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(aidreams_vocabulary),
        cmocka_unit_test(aidreams_tokenizer_json_agrees),
        cmocka_unit_test(stories_placeholder_vocabulary),
        cmocka_unit_test(vocab_files_match_llama_cpp),
        cmocka_unit_test(special_tokens_match_llama_cpp),
        cmocka_unit_test(a_megabyte_of_text),
        cmocka_unit_test(gguf_reader),
        cmocka_unit_test(open_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
