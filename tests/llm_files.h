/* llm_files.h: model files the llm tests make for themselves: a GGUF file copied with metadata
 * keys dropped, added or replaced and tensors added (tools/gguf_write.h writes it), so that a test
 * can give the runtime a real model that says one thing more or less. */
#ifndef TESTS_LLM_FILES_H
#define TESTS_LLM_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nuvec.h"

/* A metadata key to add (or to replace, when the file has it): UINT32, INT32, FLOAT32, BOOL or
 * STRING, from `number`, `flag` or `string`. */
typedef struct llm_gguf_key {
    const char *key;
    nu_gguf_type type;
    double number;
    bool flag;
    const char *string;
} llm_gguf_key;

/* A tensor to add: F32, rank 1 or 2 (nuvec order), its elements from `data` (NULL: every element
 * `value`). */
typedef struct llm_gguf_tensor {
    const char *name;
    uint32_t rank;
    uint64_t shape[2];
    float value;
    const float *data;
} llm_gguf_tensor;

/* A tensor of the file to write in another dtype: its data decoded to floats (nu_dequantize, or
 * as they are for F32) and encoded again (nu_quantize). */
typedef struct llm_gguf_retype {
    const char *name;
    nu_dtype dtype;
} llm_gguf_retype;

typedef struct llm_gguf_edit {
    const char *const *drop; /* keys to leave out */
    size_t drop_count;
    const llm_gguf_key *keys;
    size_t key_count;
    const llm_gguf_tensor *tensors; /* written after the file's own */
    size_t tensor_count;
    /* Every metadata key of the GGUF file keys_from that starts with keys_prefix ("tokenizer.";
     * required with keys_from), but those dropped or replaced above, in place of the source's keys
     * of that prefix: another file's vocabulary. */
    const char *keys_from, *keys_prefix;
    const llm_gguf_retype *retypes;
    size_t retype_count;
    /* Called with each of the file's tensors' bytes (a copy, in the dtype written) before they
     * are written, to change them in place (NULL: none). */
    void (*edit_data)(void *user, const nu_gguf_tensor_info *t, uint8_t *data, uint64_t size);
    void *user;
} llm_gguf_edit;

/* Writes `dst`: `src` with `edit` applied (edit NULL: a plain copy): the source's keys (less
 * those dropped, replaced or of keys_prefix), keys_from's keys of keys_prefix, the added keys;
 * the source's tensors (retyped, edited), then the added ones. false (and a message on stderr)
 * when src or keys_from cannot be read, a retype fails, or dst cannot be written. */
bool llm_copy_gguf(const char *src, const char *dst, const llm_gguf_edit *edit);

/* Writes the safetensors file `dst`: `src`'s tensors and one more, `name`, F32 zeros of `shape`
 * (rank 1 or 2). false when src cannot be read or dst written. */
bool llm_copy_safetensors_with(const char *src, const char *dst, const char *name, uint32_t rank,
                               const uint64_t *shape);

/* aidreams260K's config.json (the shared models' hf/ folder) as text, with key `key` set to the
 * JSON `value` (added when new; value NULL: removed; key NULL: unchanged). Static storage. */
const char *llm_config_with(const char *key, const char *value);

/* A folder `dir` with `config` as config.json (NULL: none) and, when `weights` is not NULL, a link
 * named model.safetensors to that file. Returns dir. */
const char *llm_make_folder(const char *dir, const char *config, const char *weights);

/* prefix + name under the tests' tmp folder (nt_tmp_dir()); static storage, 8 in rotation. */
const char *llm_tmp_path(const char *prefix, const char *name);

/* `rel` under the test models' folder (NUVEC_MODELS_DIR in the environment, else the build's);
 * fails the test when it is missing. Static storage. */
const char *llm_model_path(const char *rel);
/* A whole file, malloc'ed (NULL where it cannot be read or is empty; *size its length). */
uint8_t *llm_read_file(const char *path, size_t *size);

/* Fails the test unless opening `path` as a model returns `status` with a message that says
 * `words`, and leaves the out-parameter NULL. */
void llm_expect_refused(nu_device *d, const char *path, nu_status status, const char *words);

#endif
