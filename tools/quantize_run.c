/* quantize_run.c: qz_quantize (quantize.h): a Llama model (a GGUF file, or a Hugging Face folder)
 * written as a GGUF file of one of llama-quantize's file types, each tensor's type chosen as
 * llama-quantize chooses it (tools/quantize_mix.h) and quantized by nu_quantize.
 *
 * Streaming: the input is mapped and read a chunk of rows at a time by worker threads, which
 * decode each row to floats (nu_dequantize) and encode it (nu_quantize) into one of two batch
 * buffers, while the main thread writes the other batch, in order, through the GGUF writer. The
 * output goes to OUT.partial-PID, renamed to OUT once whole: a failure leaves no OUT behind (and
 * an OUT that existed stays as it was). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quantize.h"
#include "tool_error.h"

#define CHUNK_BYTES (1u << 20) /* output bytes a chunk of rows aims at */

static uint64_t row_bytes(nu_dtype t, uint64_t cols) { return cols / nu_dtype_block_elements(t) * nu_dtype_block_bytes(t); }

static uint64_t rows_of(const qz_tensor *t)
{
    uint64_t rows = 1;
    for (uint32_t d = 0; d + 1 < t->rank; d++)
        rows *= t->shape[d];
    return rows;
}

static int by_llama_order(const void *a, const void *b)
{
    return quant_compare_names((*(qz_tensor *const *)a)->name, (*(qz_tensor *const *)b)->name);
}

/* Each tensor's output type, in llama-quantize's order (its counters depend on it); refuses what
 * cannot be written: types nuvec does not decode, and quantized inputs without --allow-requantize. */
static nu_status plan(qz_input *in, const qz_request *o)
{
    qz_tensor **order = malloc((in->count ? in->count : 1) * sizeof *order);
    if (!order)
        return tool_fail(NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory");
    for (size_t i = 0; i < in->count; i++)
        order[i] = &in->tensors[i];
    qsort(order, in->count, sizeof *order, by_llama_order);
    quant_walk walk = {0};
    nu_status st = NU_OK;
    for (size_t i = 0; st == NU_OK && i < in->count; i++) {
        qz_tensor *t = order[i];
        st = quant_choose(&o->mix, &in->model, &walk, t->name, t->rank, t->shape, t->current, &t->out, t->note,
                          sizeof t->note);
        if (st != NU_OK)
            break;
        if (t->dtype == NU_DTYPE_COUNT)
            st = tool_fail(NU_ERROR_UNSUPPORTED, "tensor %s is %s, a type nuvec does not read", t->name, t->type_name);
        else if (t->out != t->dtype && nu_dtype_block_elements(t->dtype) > 1 && !o->allow_requantize)
            st = tool_fail(NU_ERROR_UNSUPPORTED,
                          "tensor %s is already %s: quantizing it to %s rounds it twice; --allow-requantize does it anyway",
                          t->name, nu_dtype_name(t->dtype), nu_dtype_name(t->out));
    }
    free(order);
    return st;
}

/* ---- the workers ---- */

typedef struct chunk {
    const qz_tensor *t;
    uint64_t row0, rows;
    size_t bytes;
} chunk;

typedef struct pool {
    pthread_mutex_t lock;
    pthread_cond_t work, done;
    const chunk *chunks;
    uint8_t *buf[2];
    size_t slot;              /* bytes a chunk's output may take in a buffer */
    uint64_t batch;           /* the batch being made: chunks [first, end) into buf[batch % 2] */
    size_t first, end, next, finished;
    uint64_t max_cols;
    bool stop;
    nu_status st;             /* the first failure */
    char message[1024];
} pool;

/* Rows [row0, row0 + rows) of t in its output type at `out`; `x` has room for a row of floats. */
static nu_status make_chunk(const qz_tensor *t, uint64_t row0, uint64_t rows, uint8_t *out, float *x)
{
    const uint64_t cols = t->shape[t->rank - 1], in_bytes = row_bytes(t->dtype, cols), out_bytes = row_bytes(t->out, cols);
    const uint64_t per_head = t->rope_heads ? rows_of(t) / t->rope_heads : 0;
    for (uint64_t r = row0; r < row0 + rows; r++, out += out_bytes) {
        uint64_t from = r;
        if (per_head) {
            /* GGUF's row 2i + p of a head is transformers' row p * per_head / 2 + i of it. */
            const uint64_t j = r % per_head;
            from = r - j + (j % 2) * (per_head / 2) + j / 2;
        }
        const uint8_t *src = t->data + from * in_bytes;
        if (t->out == t->dtype) {
            memcpy(out, src, (size_t)out_bytes);
            continue;
        }
        nu_status st = nu_dequantize(t->dtype, src, x, cols);
        if (st == NU_OK)
            st = nu_quantize(t->out, x, out, cols, NULL);
        if (st != NU_OK)
            return tool_fail(st, "tensor %s, row %llu: %s", t->name, (unsigned long long)r, nu_error_message(NULL));
    }
    return NU_OK;
}

static void *worker(void *arg)
{
    pool *p = arg;
    float *x = malloc((size_t)p->max_cols * sizeof *x);
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && p->next >= p->end)
            pthread_cond_wait(&p->work, &p->lock);
        if (p->stop)
            break;
        const size_t c = p->next++;
        uint8_t *out = p->buf[p->batch % 2] + (c - p->first) * p->slot;
        pthread_mutex_unlock(&p->lock);
        const chunk *k = &p->chunks[c];
        nu_status st = x ? make_chunk(k->t, k->row0, k->rows, out, x)
                         : tool_fail(NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory for a row of %s", k->t->name);
        pthread_mutex_lock(&p->lock);
        if (st != NU_OK && p->st == NU_OK) {
            p->st = st;
            snprintf(p->message, sizeof p->message, "%s", tool_error_message());
        }
        if (++p->finished == p->end - p->first)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    free(x);
    return NULL;
}

/* The input's tensors in chunks of rows of about CHUNK_BYTES of output. */
static chunk *make_chunks(const qz_input *in, size_t *count, size_t *slot, uint64_t *max_cols)
{
    size_t n = 0;
    *slot = CHUNK_BYTES;
    *max_cols = 1;
    for (int pass = 0; pass < 2; pass++) {
        chunk *list = pass ? calloc(n ? n : 1, sizeof *list) : NULL;
        if (pass && !list)
            return NULL;
        n = 0;
        for (size_t i = 0; i < in->count; i++) {
            const qz_tensor *t = &in->tensors[i];
            const uint64_t cols = t->shape[t->rank - 1], rb = row_bytes(t->out, cols), rows = rows_of(t);
            const uint64_t per = rb >= CHUNK_BYTES ? 1 : CHUNK_BYTES / rb;
            *slot = rb > *slot ? (size_t)rb : *slot;
            *max_cols = cols > *max_cols ? cols : *max_cols;
            for (uint64_t r = 0; r < rows; r += per, n++)
                if (pass)
                    list[n] = (chunk){t, r, rows - r < per ? rows - r : per, (size_t)((rows - r < per ? rows - r : per) * rb)};
        }
        if (pass) {
            *count = n;
            return list;
        }
    }
    return NULL;
}

/* Makes every chunk on `threads` workers and writes them in order. */
static nu_status run(const qz_input *in, gguf_writer *w, uint32_t threads)
{
    size_t count = 0;
    pool p = {.st = NU_OK};
    chunk *chunks = make_chunks(in, &count, &p.slot, &p.max_cols);
    const size_t per_batch = 2 * (size_t)threads;
    p.chunks = chunks;
    p.buf[0] = chunks ? malloc(per_batch * p.slot) : NULL;
    p.buf[1] = chunks ? malloc(per_batch * p.slot) : NULL;
    if (!chunks || !p.buf[0] || !p.buf[1]) {
        free(chunks), free(p.buf[0]), free(p.buf[1]);
        return tool_fail(NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory for the chunks in flight");
    }
    pthread_mutex_init(&p.lock, NULL);
    pthread_cond_init(&p.work, NULL);
    pthread_cond_init(&p.done, NULL);
    pthread_t tid[QZ_MAX_THREADS];
    uint32_t started = 0;
    while (started < threads && pthread_create(&tid[started], NULL, worker, &p) == 0)
        started++;
    nu_status st = started ? NU_OK : tool_fail(NU_ERROR_HOST_OUT_OF_MEMORY, "cannot start a worker thread");
    pthread_mutex_lock(&p.lock);
    size_t first = 0;
    p.first = p.next = 0;
    p.end = count < per_batch ? count : per_batch;
    pthread_cond_broadcast(&p.work);
    while (st == NU_OK && first < count) {
        while (p.finished < p.end - p.first)
            pthread_cond_wait(&p.done, &p.lock);
        if (p.st != NU_OK) {
            st = tool_fail(p.st, "%s", p.message);
            break;
        }
        /* This batch is made: start the next into the other buffer, then write this one. */
        const size_t end = p.end;
        const uint8_t *made = p.buf[p.batch % 2];
        p.batch++;
        p.first = p.next = end;
        p.end = count - end < per_batch ? count : end + per_batch;
        p.finished = 0;
        pthread_cond_broadcast(&p.work);
        pthread_mutex_unlock(&p.lock);
        for (size_t c = first; st == NU_OK && c < end; c++) {
            st = gguf_writer_data(w, made + (c - first) * p.slot, chunks[c].bytes);
            /* Done with these rows (all of a tensor's where they came permuted). */
            const qz_tensor *t = chunks[c].t;
            const uint64_t rb = t->size / rows_of(t);
            if (!t->rope_heads)
                qz_release(t->data + chunks[c].row0 * rb, chunks[c].rows * rb);
            else if (c + 1 == count || chunks[c + 1].t != t)
                qz_release(t->data, t->size);
        }
        pthread_mutex_lock(&p.lock);
        first = end;
    }
    p.stop = true;
    pthread_cond_broadcast(&p.work);
    pthread_mutex_unlock(&p.lock);
    for (uint32_t i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&p.lock);
    pthread_cond_destroy(&p.work);
    pthread_cond_destroy(&p.done);
    free(chunks), free(p.buf[0]), free(p.buf[1]);
    return st;
}

static uint32_t default_threads(void)
{
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus < 1 ? 4 : cpus > QZ_MAX_THREADS ? QZ_MAX_THREADS : (uint32_t)cpus;
}

static void print_plan(const qz_input *in, FILE *f)
{
    for (size_t i = 0; i < in->count; i++) {
        const qz_tensor *t = &in->tensors[i];
        char shape[64] = "";
        for (uint32_t d = 0; d < t->rank; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%llu", d ? ", " : "", (unsigned long long)t->shape[d]);
        fprintf(f, "[%4zu/%4zu] %-32s [%s] %s -> %s%s%s%s\n", i + 1, in->count, t->name, shape, t->type_name,
               nu_dtype_name(t->out), t->note[0] ? " (" : "", t->note, t->note[0] ? ")" : "");
    }
}

/* Writes the planned output to `path`; returns the data section's bytes in *bytes. */
static nu_status write_output(qz_input *in, const qz_request *o, const char *path, uint64_t *bytes)
{
    gguf_writer *w;
    nu_status st = gguf_writer_new(in->alignment, &w);
    if (st != NU_OK)
        return st;
    st = in->metadata(in, w, o->mix.preset->file_type);
    for (size_t i = 0; st == NU_OK && i < in->count; i++)
        st = gguf_writer_tensor(w, in->tensors[i].name, in->tensors[i].out, in->tensors[i].rank, in->tensors[i].shape);
    *bytes = gguf_writer_data_size(w);
    if (st == NU_OK)
        st = gguf_writer_begin(w, path);
    if (st == NU_OK)
        st = run(in, w, o->threads ? o->threads : default_threads());
    if (st == NU_OK)
        st = gguf_writer_finish(w);
    gguf_writer_free(w);
    return st;
}

nu_status qz_quantize(const qz_request *r, qz_result *result)
{
    memset(result, 0, sizeof *result);
    if (!r->in || !r->out || !r->mix.preset || r->threads > QZ_MAX_THREADS)
        return tool_fail(NU_ERROR_INVALID_ARGUMENT, "quantize: no input, output or file type, or over %d threads",
                        QZ_MAX_THREADS);
    struct stat si, so;
    if (stat(r->in, &si) != 0)
        return tool_fail(NU_ERROR_IO, "%s: %s", r->in, strerror(errno));
    if (stat(r->out, &so) == 0 && so.st_dev == si.st_dev && so.st_ino == si.st_ino)
        return tool_fail(NU_ERROR_INVALID_ARGUMENT, "OUT %s is the input itself", r->out);
    qz_input *in = NULL;
    nu_status st = S_ISDIR(si.st_mode) ? qz_open_hf(r->in, &in) : qz_open_gguf(r->in, &in);
    if (st == NU_OK && in->note[0] && r->notes)
        fprintf(r->notes, "nuvec quantize: %s: %s\n", r->in, in->note);
    if (st == NU_OK)
        st = plan(in, r);
    char *tmp = NULL;
    if (st == NU_OK) {
        if (r->plan)
            print_plan(in, r->plan);
        const size_t n = strlen(r->out) + 32;
        if (!(tmp = malloc(n)))
            st = tool_fail(NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory");
        else
            snprintf(tmp, n, "%s.partial-%ld", r->out, (long)getpid());
    }
    if (st == NU_OK && (st = write_output(in, r, tmp, &result->out_bytes)) == NU_OK && rename(tmp, r->out) != 0)
        st = tool_fail(NU_ERROR_IO, "cannot rename %s to %s: %s", tmp, r->out, strerror(errno));
    if (tmp && st != NU_OK)
        unlink(tmp);
    free(tmp);
    if (st == NU_OK) {
        result->tensors = in->count;
        for (size_t i = 0; i < in->count; i++) {
            uint64_t e = 1;
            for (uint32_t d = 0; d < in->tensors[i].rank; d++)
                e *= in->tensors[i].shape[d];
            result->elements += e;
            result->in_bytes += in->tensors[i].size;
        }
    } else {
        result->out_bytes = 0;
    }
    if (in)
        in->close(in);
    return st;
}
