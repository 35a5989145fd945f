/* test_llm_tokenizer_json.c: byte-level BPE from Hugging Face's tokenizer.json (llm/tokenizer/
 * json_vocab.c, hf_vocab.c), no device needed. The files are written by the test from llama.cpp's
 * vocabularies (vocab/: Llama 3, Qwen2 and GPT-2 GGUF files) the way their Hugging Face originals
 * have them (a Split regex and ByteLevel, or ByteLevel with its own regex; merges as pairs or as
 * "a b" strings; added tokens; a TemplateProcessing post-processor; tokenizer_config.json,
 * generation_config.json): every one of llama.cpp's test cases gives the same ids as from the GGUF
 * file, and bos, eos, the end-of-generation set and the chat template come from the folder's
 * files. Then the reader's refusals on small files. */
#include "harness.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "llm_tokenizer_util.h"
#include "nuvec/gguf.h"

/* The pre-tokenizers' expressions as the models' tokenizer.json files write them. */
#define LLAMA3_RX                                                                                      \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
    "\\s+(?!\\S)|\\s+"
#define QWEN2_RX                                                                                       \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"      \
    "\\s+(?!\\S)|\\s+"

static void write_json(const char *path, cJSON *root)
{
    char *text = cJSON_PrintUnformatted(root);
    assert_non_null(text);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    fclose(f);
    cJSON_free(text);
    cJSON_Delete(root);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A folder under the test's tmp dir, emptied of the files the tests write. */
static void folder(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", nt_tmp_dir(), name);
    mkdir(out, 0755);
    static const char *const files[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json",
                                        "config.json"};
    for (size_t i = 0; i < 4; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", out, files[i]);
        remove(p);
    }
}

static void file_in(char *out, size_t n, const char *dir, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

/* tokenizer.json of a GGUF vocabulary: model.vocab for the normal tokens, added_tokens for the
 * others (control ones "special"), the GGUF's merges (as pairs, or as "a b" strings), and the
 * given pre-tokenizer, normalizer and post-processor. */
static cJSON *json_of_gguf(const char *vocab, bool pairs, cJSON *pre, cJSON *normalizer, cJSON *post, bool ignore_merges)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", models_dir(), vocab);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    char *bytes = nt_read_file(path);
    nu_gguf *g;
    NT_OK(nu_gguf_parse(bytes, (size_t)st.st_size, &g));
    nu_gguf_value tokens, types, merges;
    NT_OK(nu_gguf_find(g, "tokenizer.ggml.tokens", &tokens));
    NT_OK(nu_gguf_find(g, "tokenizer.ggml.token_type", &types));
    NT_OK(nu_gguf_find(g, "tokenizer.ggml.merges", &merges));
    cJSON *root = cJSON_CreateObject(), *model = cJSON_CreateObject(), *v = cJSON_CreateObject();
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens"), *m = cJSON_CreateArray();
    char text[512];
    for (uint64_t i = 0; i < tokens.length; i++) {
        const char *s;
        uint64_t n;
        NT_OK(nu_gguf_array_string(&tokens, i, &s, &n));
        assert_true(n < sizeof text);
        memcpy(text, s, n);
        text[n] = 0;
        int32_t type;
        memcpy(&type, (const char *)types.data + 4 * i, 4);
        if (type == NU_LLM_TOKEN_NORMAL) {
            cJSON_AddNumberToObject(v, text, (double)i);
            continue;
        }
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", (double)i);
        cJSON_AddStringToObject(a, "content", text);
        cJSON_AddBoolToObject(a, "special", type == NU_LLM_TOKEN_CONTROL);
        cJSON_AddBoolToObject(a, "lstrip", false);
        cJSON_AddBoolToObject(a, "rstrip", false);
        cJSON_AddItemToArray(added, a);
    }
    for (uint64_t i = 0; i < merges.length; i++) {
        const char *s;
        uint64_t n;
        NT_OK(nu_gguf_array_string(&merges, i, &s, &n));
        memcpy(text, s, n);
        text[n] = 0;
        char *sp = strchr(text + 1, ' ');
        assert_non_null(sp);
        if (!pairs) {
            cJSON_AddItemToArray(m, cJSON_CreateString(text));
            continue;
        }
        *sp = 0;
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateString(text));
        cJSON_AddItemToArray(pair, cJSON_CreateString(sp + 1));
        cJSON_AddItemToArray(m, pair);
    }
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddBoolToObject(model, "byte_fallback", false);
    cJSON_AddBoolToObject(model, "ignore_merges", ignore_merges);
    cJSON_AddItemToObject(model, "vocab", v);
    cJSON_AddItemToObject(model, "merges", m);
    cJSON_AddItemToObject(root, "model", model);
    cJSON_AddItemToObject(root, "pre_tokenizer", pre);
    cJSON_AddItemToObject(root, "normalizer", normalizer ? normalizer : cJSON_CreateNull());
    cJSON_AddItemToObject(root, "post_processor", post ? post : cJSON_CreateNull());
    nu_gguf_close(g);
    free(bytes);
    return root;
}

static cJSON *parse(const char *json)
{
    cJSON *j = cJSON_Parse(json);
    assert_non_null(j);
    return j;
}

static cJSON *split_and_byte_level(const char *rx)
{
    cJSON *seq = parse("{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\"},"
                       " \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": "
                       "false, \"trim_offsets\": true, \"use_regex\": false}]}");
    cJSON *pattern = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(seq, "pretokenizers"), 0), "pattern");
    cJSON_ReplaceItemInObject(pattern, "Regex", cJSON_CreateString(rx));
    return seq;
}

/* The cases of llama.cpp's test files give the same ids from both tokenizers (no bos). */
static void same_on_the_cases(const nu_llm_tokenizer *a, const nu_llm_tokenizer *b, const char *vocab)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf.inp", models_dir(), vocab);
    char *inp = nt_read_file(path);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    nu_llm_tokenize_options o = {NU_LLM_ADD_NO, NU_LLM_ADD_NO, false};
    int cases = 0;
    for (char *p = inp; *p; cases++) {
        char *end = strstr(p, sep);
        size_t len = end ? (size_t)(end - p) : strlen(p), na, nb;
        int32_t x[2048], y[2048];
        LLM_OK(nu_llm_tokenize_ex(a, p, len, &o, x, 2048, &na));
        LLM_OK(nu_llm_tokenize_ex(b, p, len, &o, y, 2048, &nb));
        if (na != nb || memcmp(x, y, na * sizeof *x))
            fail_msg("%s: \"%.*s\": %zu ids from the GGUF file, %zu from tokenizer.json", vocab, (int)len, p, na, nb);
        p = end ? end + strlen(sep) : p + len;
    }
    assert_true(cases >= 40);
    free(inp);
}

static nu_llm_tokenizer *open_path(const char *path)
{
    nu_llm_tokenizer *t = NULL;
    LLM_OK(nu_llm_tokenizer_open(path, &t));
    return t;
}

static nu_llm_tokenizer *open_vocab_gguf(const char *vocab)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", models_dir(), vocab);
    return open_path(path);
}

/* Llama 3: a Split regex then ByteLevel, ignore_merges, merges as pairs, bos from the template;
 * tokenizer_config.json's eos, generation_config.json's list of end-of-generation ids. */
static void llama3_folder(void **state)
{
    (void)state;
    char dir[4096], path[4200];
    folder(dir, sizeof dir, "tokenizer_llama3");
    cJSON *post = parse("{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": "
                        "\"<|begin_of_text|>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}]}");
    file_in(path, sizeof path, dir, "tokenizer.json");
    write_json(path, json_of_gguf("llama-bpe", true, split_and_byte_level(LLAMA3_RX), NULL, post, true));
    file_in(path, sizeof path, dir, "tokenizer_config.json");
    write_text(path, "{\"bos_token\": \"<|begin_of_text|>\", \"eos_token\": {\"content\": \"<|eot_id|>\"}, "
                     "\"chat_template\": \"{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}\"}");
    file_in(path, sizeof path, dir, "generation_config.json");
    write_text(path, "{\"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009]}");
    nu_llm_tokenizer *json = open_path(dir), *gguf = open_vocab_gguf("llama-bpe");
    assert_string_equal(nu_llm_tokenizer_model(json), "gpt2");
    assert_string_equal(nu_llm_tokenizer_pre(json), "tokenizer.json");
    assert_int_equal(nu_llm_tokenizer_count(json), 128256);
    assert_true(nu_llm_tokenizer_add_bos(json) && !nu_llm_tokenizer_add_eos(json));
    assert_int_equal(nu_llm_tokenizer_bos(json), 128000);
    assert_int_equal(nu_llm_tokenizer_eos(json), 128009);
    int32_t eog[8];
    assert_int_equal(nu_llm_tokenizer_eog(json, eog, 8), 3);
    assert_memory_equal(eog, ((int32_t[]){128001, 128008, 128009}), 3 * sizeof *eog);
    assert_string_equal(nu_llm_tokenizer_chat_template(json),
                        "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}");
    same_on_the_cases(gguf, json, "llama-bpe");
    int32_t ids[16];
    size_t n;
    LLM_OK(nu_llm_tokenize_ex(json, "Hello", 5, NULL, ids, 16, &n));
    assert_true(n == 2 && ids[0] == 128000 && ids[1] == 9906);
    nu_llm_tokenizer_free(json);
    /* tokenizer_config.json's add_bos_token wins over the template; the .json path opens too. */
    file_in(path, sizeof path, dir, "tokenizer_config.json");
    write_text(path, "{\"add_bos_token\": false, \"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, "
                     "{\"name\": \"default\", \"template\": \"D\"}]}");
    file_in(path, sizeof path, dir, "tokenizer.json");
    json = open_path(path);
    assert_false(nu_llm_tokenizer_add_bos(json));
    assert_string_equal(nu_llm_tokenizer_chat_template(json), "D");
    nu_llm_tokenizer_free(json);
    nu_llm_tokenizer_free(gguf);
}

/* Qwen2: a Split regex, an NFC normalizer (not applied, as llama.cpp), merges as "a b" strings,
 * no bos. GPT-2: ByteLevel with its own regex. */
static void qwen2_and_gpt2_files(void **state)
{
    (void)state;
    char dir[4096], path[4200];
    folder(dir, sizeof dir, "tokenizer_qwen2");
    file_in(path, sizeof path, dir, "tokenizer.json");
    write_json(path, json_of_gguf("qwen2", false, split_and_byte_level(QWEN2_RX), parse("{\"type\": \"NFC\"}"), NULL,
                                  false));
    nu_llm_tokenizer *json = open_path(path), *gguf = open_vocab_gguf("qwen2");
    assert_false(nu_llm_tokenizer_add_bos(json));
    same_on_the_cases(gguf, json, "qwen2");
    nu_llm_tokenizer_free(json);
    nu_llm_tokenizer_free(gguf);

    folder(dir, sizeof dir, "tokenizer_gpt2");
    file_in(path, sizeof path, dir, "tokenizer.json");
    write_json(path, json_of_gguf("gpt-2", true, parse("{\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                                                       "\"use_regex\": true}"), NULL, NULL, false));
    json = open_path(path);
    gguf = open_vocab_gguf("gpt-2");
    same_on_the_cases(gguf, json, "gpt-2");
    assert_true(nu_llm_tokenizer_is_eog(json, 50256)); /* <|endoftext|>, by its text */
    nu_llm_tokenizer_free(json);
    nu_llm_tokenizer_free(gguf);
}

/* Small tokenizer.json files the reader refuses, each for its reason. */
static void refusals(void **state)
{
    (void)state;
    /* VOCAB stands for three tokens, UNKVOCAB for four with an unknown one. */
    static const struct {
        const char *json;
        nu_status status;
        const char *words;
    } bad[] = {
        {"{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", NU_ERROR_UNSUPPORTED, "Unigram"},
        {"{\"model\": {\"type\": \"BPE\", VOCAB, \"merges\": [\"a b\"]}, \"pre_tokenizer\": null}", NU_ERROR_UNSUPPORTED,
         "neither byte-level"},
        {"{\"model\": {\"type\": \"BPE\", VOCAB, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Whitespace\"}}",
         NU_ERROR_UNSUPPORTED, "Whitespace"},
        {"{\"model\": {\"type\": \"BPE\", VOCAB, \"merges\": []}, \"normalizer\": {\"type\": \"Lowercase\"}, "
         "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}}", NU_ERROR_UNSUPPORTED, "Lowercase"},
        {"{\"model\": {\"type\": \"BPE\", VOCAB, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": "
         "{\"Regex\": \"a\"}, \"behavior\": \"Removed\"}}", NU_ERROR_UNSUPPORTED, "Removed"},
        {"{\"model\": {\"type\": \"BPE\", \"continuing_subword_prefix\": \"##\", VOCAB, \"merges\": []}}",
         NU_ERROR_UNSUPPORTED, "continuing_subword_prefix"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 2}, \"merges\": []}, \"added_tokens\": [{\"id\": "
         "2, \"content\": \"b\"}], \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}", NU_ERROR_FORMAT, "no token has id 1"},
        {"{\"model\": {\"type\": \"BPE\", VOCAB, \"merges\": []}, \"added_tokens\": [{\"id\": 1, \"content\": \"x\"}], "
         "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}}", NU_ERROR_FORMAT, "id 1 is both"},
        {"{\"model\": {\"type\": \"BPE\", VOCAB, \"merges\": [7]}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         NU_ERROR_FORMAT, "merge 0"},
        {"{\"model\": {\"type\": \"BPE\", UNKVOCAB, \"merges\": [\"a c\"]}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         NU_ERROR_FORMAT, "\"c\" is not a token"},
        {"{\"model\": {\"type\": \"BPE\", VOCAB, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         NU_ERROR_FORMAT, "no token for byte"}, /* most bytes have none, and there is no unk */
        {"[1, 2]", NU_ERROR_FORMAT, "no \"model\""},
    };
    char dir[4096], path[4200];
    folder(dir, sizeof dir, "tokenizer_bad");
    file_in(path, sizeof path, dir, "tokenizer.json");
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char json[1024] = "";
        const char *in = bad[k].json, *at;
        while ((at = strstr(in, "VOCAB"))) {
            bool unk = at - in >= 3 && !strncmp(at - 3, "UNK", 3);
            strncat(json, in, (size_t)(at - in) - (unk ? 3 : 0));
            strcat(json, unk ? "\"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"<unk>\": 3}, \"unk_token\": \"<unk>\""
                             : "\"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}");
            in = at + 5;
        }
        strcat(json, in);
        write_text(path, json);
        nu_llm_tokenizer *t = (nu_llm_tokenizer *)json;
        LLM_STATUS(bad[k].status, nu_llm_tokenizer_open(dir, &t));
        assert_null(t);
        if (!strstr(nu_llm_error_message(), bad[k].words) || !strstr(nu_llm_error_message(), "tokenizer.json"))
            fail_msg("case %zu: \"%s\" lacks \"%s\" or the file", k, nu_llm_error_message(), bad[k].words);
    }
    /* A tokenizer_config.json that is not JSON is an error too (a missing one is not). */
    write_text(path, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"<0x41>\": 0}, \"merges\": [], \"byte_fallback\": true,"
                     " \"unk_token\": \"<0x41>\"}}");
    nu_llm_tokenizer *t = NULL;
    LLM_OK(nu_llm_tokenizer_open(dir, &t));
    nu_llm_tokenizer_free(t);
    file_in(path, sizeof path, dir, "tokenizer_config.json");
    write_text(path, "{");
    LLM_STATUS(NU_ERROR_FORMAT, nu_llm_tokenizer_open(dir, &t));
    assert_non_null(strstr(nu_llm_error_message(), "tokenizer_config.json"));
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(llama3_folder),
        cmocka_unit_test(qwen2_and_gpt2_files),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
