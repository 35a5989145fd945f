/* upload.c: `nuvec bench upload`: moving a weights file that is in the page cache into device
 * memory, against the bus limit measured in the same run.
 *
 * The file: a safetensors file of SIZE bytes (default 16 GiB on a GPU, 512 MiB on a CPU
 * device), 1 GiB F32 tensors of pseudo-random bytes, written once (or --file), flushed, and
 * read once so that it sits in the page cache (the residency is measured with mincore).
 *   pinned copy     hand-written Vulkan: vkCmdCopyBuffer from host memory the driver allocated
 *                   (pinned) into device memory, on the transfer queue: the bus limit, 1.00x.
 *   nuvec move      nu_buffer_map_file + nu_buffer_move_ranges of the whole file into a device
 *                   buffer allocated beforehand, as the pinned copy's is (DMA from the file's
 *                   pages, or from staging buffers that threads fill while earlier chunks are
 *                   copied). The bandwidth the target is about.
 *   nuvec move+alloc nu_buffer_map_file + nu_buffer_move_to_device: the same with the device
 *                   buffer's allocation timed too (end to end).
 *   nuvec tensors   nu_safetensors_open + nu_safetensors_to_device of every tensor.
 *   read + write    read() into malloc'd memory + nu_buffer_write (a CPU copy, then a staged one).
 * Each is run --reps times (median GB/s). Then the time to first GPU use: map_file + a GPU copy
 * of the whole file, against read() into a shared buffer + the same copy.
 * Targets (the issue's, on the H200): nuvec move >= 0.9x the pinned copy, >= 2x PyTorch's
 * safetensors.torch.load_file(device="cuda") (bench/torch_upload.py on the same file). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "bench_util.h"
#include "memory/buffer.h"

#define TENSOR_BYTES (1ull << 30)
#define PINNED_CHUNK (256ull << 20)
#define TARGET_RATIO 0.9

enum { V_PINNED, V_MOVE, V_MOVE_ALLOC, V_TENSORS, V_READ, VARIANTS };
static const char *const keys[VARIANTS] = {"pinned_copy", "nuvec_move", "nuvec_move_to_device", "nuvec_safetensors",
                                           "read_write"};
static const char *const text[VARIANTS] = {
    "Vulkan: pinned host memory -> device (vkCmdCopyBuffer)",
    "nuvec: map_file + move_ranges (destination allocated)",
    "nuvec: map_file + move_to_device (allocation timed)",
    "nuvec: safetensors_open + to_device (all tensors)",
    "read() + nu_buffer_write",
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nuvec bench upload [--json] [--device NAME] [--size BYTES[K|M|G]] [--file PATH] [--keep]\n"
            "                          [--reps N] [--chunk BYTES[K|M|G]] [--threads N]\n"
            "  A safetensors file in the page cache moved into device memory: nuvec's move (zero-copy\n"
            "  DMA, or staged where the driver cannot import the file's pages) against a hand-written\n"
            "  copy from pinned host memory (the bus limit) and read() + write.\n"
            "  --size BYTES     the file's size (default 16G on a GPU, 512M on a CPU device)\n"
            "  --file PATH      the file to write (default $TMPDIR/nuvec-upload.safetensors, removed\n"
            "                   afterwards unless --keep); an existing safetensors file is used as is\n"
            "  --reps N         runs of each variant (default 3; the median is reported)\n"
            "  --chunk, --threads  nu_move_options (defaults: 4 MiB, up to 8 threads)\n"
            "  --json           one JSON document instead of the table\n"
            "  --device NAME    an index or a name substring\n");
}

static bool parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20 : *end == 'G' || *end == 'g' ? 30 : 0;
    if (shift)
        end++;
    if (errno || end == s || *end || v == 0 || v > (UINT64_MAX >> shift))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

/* Writes the weights file: a header of 1 GiB F32 tensors (the last one smaller), data holes
 * filled with pseudo-random bytes, then flushed so that no writeback runs during the timing. */
static bool write_weights(const char *path, uint64_t size)
{
    size_t count = (size_t)((size + TENSOR_BYTES - 1) / TENSOR_BYTES);
    nu_tensor_write *t = calloc(count, sizeof *t);
    char (*names)[32] = calloc(count, sizeof *names);
    if (!t || !names)
        return false;
    for (size_t i = 0; i < count; i++) {
        uint64_t bytes = i + 1 < count ? TENSOR_BYTES : size - TENSOR_BYTES * (count - 1);
        snprintf(names[i], sizeof names[i], "layers.%zu.weight", i);
        t[i] = (nu_tensor_write){.name = names[i], .dtype = NU_DTYPE_F32, .rank = 1, .shape = {bytes / 4}};
    }
    const char *k = "format", *v = "nuvec bench upload";
    nu_status st = nu_safetensors_write(path, t, count, &k, &v, 1);
    free(t);
    free(names);
    if (st != NU_OK) {
        fprintf(stderr, "nuvec bench upload: %s\n", nu_error_message(NULL));
        return false;
    }
    int fd = open(path, O_WRONLY);
    struct stat s;
    if (fd < 0 || fstat(fd, &s) != 0)
        return false;
    uint64_t data = (uint64_t)s.st_size - size / 4 * 4, seed = 0x9e3779b97f4a7c15ull;
    size_t block = 64 << 20;
    uint64_t *buf = malloc(block);
    bool ok = buf != NULL;
    for (uint64_t at = data; ok && at < (uint64_t)s.st_size; at += block) {
        for (size_t i = 0; i < block / 8; i++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            buf[i] = seed;
        }
        size_t n = (uint64_t)s.st_size - at < block ? (size_t)((uint64_t)s.st_size - at) : block;
        ok = pwrite(fd, buf, n, (off_t)at) == (ssize_t)n;
    }
    free(buf);
    ok = ok && fdatasync(fd) == 0;
    close(fd);
    return ok;
}

/* Reads the file once (into the page cache) and returns the resident fraction. */
static double warm_page_cache(const char *path)
{
    int fd = open(path, O_RDONLY);
    struct stat s;
    if (fd < 0 || fstat(fd, &s) != 0 || s.st_size == 0)
        return 0;
    uint8_t *p = mmap(NULL, (size_t)s.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return 0;
    long page = sysconf(_SC_PAGESIZE);
    size_t pages = ((size_t)s.st_size + (size_t)page - 1) / (size_t)page, resident = 0;
    volatile uint8_t sum = 0;
    for (size_t i = 0; i < pages; i++)
        sum += p[i * (size_t)page];
    (void)sum;
    unsigned char *vec = malloc(pages);
    if (vec && mincore(p, (size_t)s.st_size, vec) == 0)
        for (size_t i = 0; i < pages; i++)
            resident += vec[i] & 1;
    free(vec);
    munmap(p, (size_t)s.st_size);
    return (double)resident / (double)pages;
}

/* The bus limit: `size` bytes copied from two pinned host buffers of PINNED_CHUNK into `dst`
 * by vkCmdCopyBuffer on the transfer queue, in one submission. Returns seconds, < 0 on failure. */
static double pinned_copy(nu_device *d, nu_buffer *dst, uint64_t size)
{
    VkBuffer dvb;
    VkDeviceSize doff;
    if (nu__buffer_binding(dst, &dvb, &doff) != NU_OK)
        return -1;
    nu__queue *q = d->transfer;
    VkDevice dev = d->device;
    uint64_t chunk = size < PINNED_CHUNK ? size : PINNED_CHUNK;
    VkDeviceMemory mem = VK_NULL_HANDLE;
    VkBuffer src = VK_NULL_HANDLE;
    VkCommandPool pool = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    double seconds = -1;
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = chunk,
                               .memoryTypeIndex = d->memory_type[NU__KIND_SHARED]};
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = chunk,
                             .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT, .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = q->family};
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkCommandBuffer cmd;
    VkCommandBufferAllocateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    if (d->vkd.vkAllocateMemory(dev, &ai, NULL, &mem) != VK_SUCCESS ||
        d->vkd.vkCreateBuffer(dev, &bi, NULL, &src) != VK_SUCCESS ||
        d->vkd.vkBindBufferMemory(dev, src, mem, 0) != VK_SUCCESS ||
        d->vkd.vkCreateCommandPool(dev, &pi, NULL, &pool) != VK_SUCCESS ||
        d->vkd.vkCreateFence(dev, &fi, NULL, &fence) != VK_SUCCESS)
        goto out;
    ci.commandPool = pool;
    if (d->vkd.vkAllocateCommandBuffers(dev, &ci, &cmd) != VK_SUCCESS)
        goto out;
    VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                      .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    d->vkd.vkBeginCommandBuffer(cmd, &begin);
    for (uint64_t at = 0; at < size; at += chunk) {
        VkBufferCopy r = {.srcOffset = 0, .dstOffset = doff + at, .size = size - at < chunk ? size - at : chunk};
        d->vkd.vkCmdCopyBuffer(cmd, src, dvb, 1, &r);
    }
    if (d->vkd.vkEndCommandBuffer(cmd) != VK_SUCCESS)
        goto out;
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    uint64_t t0 = bench_now_ns();
    pthread_mutex_lock(&q->lock);
    VkResult r = d->vkd.vkQueueSubmit(q->queue, 1, &si, fence);
    pthread_mutex_unlock(&q->lock);
    if (r == VK_SUCCESS && d->vkd.vkWaitForFences(dev, 1, &fence, VK_TRUE, 120000000000ull) == VK_SUCCESS)
        seconds = (double)(bench_now_ns() - t0) / 1e9;
out:
    if (fence)
        d->vkd.vkDestroyFence(dev, fence, NULL);
    if (pool)
        d->vkd.vkDestroyCommandPool(dev, pool, NULL);
    if (src)
        d->vkd.vkDestroyBuffer(dev, src, NULL);
    if (mem)
        d->vkd.vkFreeMemory(dev, mem, NULL);
    return seconds;
}

typedef struct run {
    nu_device *d;
    const char *path;
    uint64_t size;   /* bytes of tensor data moved */
    uint64_t file_size;
    nu_move_options o;
} run;

static double now_s(void) { return (double)bench_now_ns() / 1e9; }

/* read() of the whole file into dst, as a program without nuvec loads weights. */
static bool read_whole(const char *path, void *dst, uint64_t size)
{
    int fd = open(path, O_RDONLY);
    bool ok = fd >= 0;
    for (uint64_t done = 0; ok && done < size;) {
        ssize_t n = pread(fd, (uint8_t *)dst + done, (size_t)(size - done > (1u << 30) ? 1u << 30 : size - done),
                          (off_t)done);
        ok = n > 0;
        done += ok ? (uint64_t)n : 0;
    }
    if (fd >= 0)
        close(fd);
    return ok;
}

/* One timed run of variant v; seconds, < 0 on failure (the message is printed). */
static double run_once(run *r, int v)
{
    nu_device *d = r->d;
    nu_status st = NU_OK;
    double t = -1;
    if (v == V_PINNED) {
        nu_buffer *dst;
        if ((st = nu_buffer_new(d, r->size, NU_STORAGE_PRIVATE, &dst)) == NU_OK) {
            t = pinned_copy(d, dst, r->size);
            if (t < 0)
                fprintf(stderr, "nuvec bench upload: the pinned copy failed\n");
            nu_buffer_free(dst);
        }
    } else if (v == V_MOVE) {
        nu_buffer *f, *dst;
        if ((st = nu_buffer_new(d, (size_t)r->file_size, NU_STORAGE_PRIVATE, &dst)) == NU_OK) {
            double t0 = now_s();
            if ((st = nu_buffer_map_file(d, r->path, &f)) == NU_OK) {
                nu_range_copy whole = {.src_offset = 0, .dst_offset = 0, .size = r->file_size};
                if ((st = nu_buffer_move_ranges(dst, f, &whole, 1, &r->o)) == NU_OK)
                    t = now_s() - t0;
                nu_buffer_free(f);
            }
            nu_buffer_free(dst);
        }
    } else if (v == V_MOVE_ALLOC) {
        double t0 = now_s();
        nu_buffer *f, *dst = NULL;
        if ((st = nu_buffer_map_file(d, r->path, &f)) == NU_OK) {
            st = nu_buffer_move_to_device(f, 0, (size_t)r->file_size, &r->o, &dst);
            if (st == NU_OK)
                t = now_s() - t0;
            nu_buffer_free(dst);
            nu_buffer_free(f);
        }
    } else if (v == V_TENSORS) {
        double t0 = now_s();
        nu_safetensors *sf;
        nu_buffer *dst = NULL;
        if ((st = nu_safetensors_open(d, r->path, &sf)) == NU_OK) {
            st = nu_safetensors_to_device(sf, NULL, 0, &r->o, &dst, NULL);
            if (st == NU_OK)
                t = now_s() - t0;
            nu_buffer_free(dst);
            nu_safetensors_close(sf);
        }
    } else {
        double t0 = now_s();
        uint8_t *host = malloc((size_t)r->file_size);
        bool ok = host && read_whole(r->path, host, r->file_size);
        nu_buffer *dst;
        if (!ok)
            fprintf(stderr, "nuvec bench upload: reading %s failed\n", r->path);
        else if ((st = nu_buffer_new(d, (size_t)r->file_size, NU_STORAGE_PRIVATE, &dst)) == NU_OK) {
            if ((st = nu_buffer_write(dst, 0, host, (size_t)r->file_size)) == NU_OK)
                t = now_s() - t0;
            nu_buffer_free(dst);
        }
        free(host);
    }
    if (st != NU_OK)
        fprintf(stderr, "nuvec bench upload: %s: %s: %s\n", keys[v], nu_status_string(st), nu_error_message(d));
    nu_device_wait_idle(d, NU_WAIT_FOREVER);
    nu_memory_clear_cache(d);
    return t;
}

/* Time to first GPU use: the file in a buffer and a GPU copy of all of it completed. */
static double first_use(run *r, bool mapped)
{
    nu_device *d = r->d;
    double t0 = now_s(), t = -1;
    nu_buffer *src = NULL, *dst = NULL;
    nu_commands *c = NULL;
    nu_status st;
    if (mapped) {
        st = nu_buffer_map_file(d, r->path, &src);
    } else {
        st = nu_buffer_new(d, (size_t)r->file_size, NU_STORAGE_SHARED, &src);
        void *p = NULL;
        if (st == NU_OK && (st = nu_buffer_contents_mut(src, &p)) == NU_OK) {
            if (!read_whole(r->path, p, r->file_size))
                st = NU_ERROR_IO;
        }
    }
    if (st == NU_OK)
        st = nu_buffer_new(d, (size_t)r->file_size, NU_STORAGE_PRIVATE, &dst);
    if (st == NU_OK)
        st = nu_commands_new(d, NU_QUEUE_TRANSFER, &c);
    if (st == NU_OK)
        st = nu_commands_copy(c, dst, 0, src, 0, (size_t)r->file_size);
    if (st == NU_OK)
        st = nu_commands_commit(c);
    if (st == NU_OK)
        st = nu_commands_wait(c, NU_WAIT_FOREVER);
    if (st == NU_OK)
        t = now_s() - t0;
    else
        fprintf(stderr, "nuvec bench upload: first use (%s): %s: %s\n", mapped ? "map_file" : "read", nu_status_string(st),
                nu_error_message(d));
    nu_commands_free(c);
    nu_buffer_free(dst);
    nu_buffer_free(src);
    nu_device_wait_idle(d, NU_WAIT_FOREVER);
    nu_memory_clear_cache(d);
    return t;
}

int bench_upload(int argc, char **argv)
{
    bool json = false, keep = false;
    const char *select = NULL, *path = NULL;
    uint64_t size = 0;
    long reps = 3, threads = 0;
    nu_move_options o = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc) {
            if (!parse_bytes(argv[++i], &size)) {
                fprintf(stderr, "nuvec bench upload: --size: '%s' is not a size in bytes (K, M, G suffixes)\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--chunk") && i + 1 < argc) {
            if (!parse_bytes(argv[++i], &o.chunk_size)) {
                fprintf(stderr, "nuvec bench upload: --chunk: '%s' is not a size in bytes\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--file") && i + 1 < argc) {
            path = argv[++i];
        } else if (!strcmp(argv[i], "--keep")) {
            keep = true;
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            if (!bench_parse_count("upload", "--reps", argv[++i], 1, 100, &reps))
                return 2;
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            if (!bench_parse_count("upload", "--threads", argv[++i], 1, 64, &threads))
                return 2;
        } else {
            int rc = bench_common_option("upload", argc, argv, &i, &json, &select, usage);
            if (rc != BENCH_OPTION_TAKEN)
                return rc;
        }
    }
    o.threads = (uint32_t)threads;
    nu_device *d;
    if (!bench_open("upload", select, &d))
        return 1;
    const nu_device_info *info = nu_device_get_info(d);
    bool gpu = info->type != NU_DEVICE_CPU;
    if (!size)
        size = gpu ? 16ull << 30 : 512ull << 20;
    size = size / 4 * 4;
    char default_path[512];
    if (!path) {
        const char *tmp = getenv("TMPDIR");
        snprintf(default_path, sizeof default_path, "%s/nuvec-upload.safetensors", tmp && *tmp ? tmp : "/tmp");
        path = default_path;
    }
    bool created = false;
    struct stat s;
    nu_safetensors *sf = NULL;
    if (stat(path, &s) != 0) {
        if (!json)
            printf("writing %s (%.2f GiB)...\n", path, size / 1073741824.0);
        fflush(stdout);
        if (!write_weights(path, size)) {
            fprintf(stderr, "nuvec bench upload: cannot write %s: %s\n", path, strerror(errno));
            unlink(path);
            nu_device_close(d);
            return 1;
        }
        created = true;
    }
    nu_status st = nu_safetensors_open(d, path, &sf);
    if (st != NU_OK || stat(path, &s) != 0) {
        fprintf(stderr, "nuvec bench upload: %s: %s\n", path, nu_error_message(d));
        if (created && !keep)
            unlink(path);
        nu_device_close(d);
        return 1;
    }
    run r = {.d = d, .path = path, .size = nu_safetensors_data_size(sf), .file_size = (uint64_t)s.st_size, .o = o};
    size_t tensors = nu_safetensors_count(sf);
    nu_safetensors_close(sf);
    double resident = warm_page_cache(path);

    double gbps[VARIANTS][100], med[VARIANTS];
    bool ok = true;
    for (long rep = 0; rep < reps && ok; rep++)
        for (int v = 0; v < VARIANTS && ok; v++) {
            double t = run_once(&r, v);
            uint64_t bytes = v == V_PINNED || v == V_TENSORS ? r.size : r.file_size;
            ok = t > 0;
            gbps[v][rep] = ok ? (double)bytes / t / 1e9 : 0;
        }
    double first[2] = {first_use(&r, true), first_use(&r, false)};
    ok = ok && first[0] > 0 && first[1] > 0;
    if (ok)
        for (int v = 0; v < VARIANTS; v++)
            med[v] = bench_median(gbps[v], (int)reps);
    if (created && !keep)
        unlink(path);
    if (!ok) {
        nu_device_close(d);
        return 1;
    }
    if (json) {
        cJSON *root = cJSON_CreateObject();
        bench_json_device(root, d);
        cJSON_AddStringToObject(root, "file", path);
        cJSON_AddNumberToObject(root, "file_bytes", (double)r.file_size);
        cJSON_AddNumberToObject(root, "tensors", (double)tensors);
        cJSON_AddNumberToObject(root, "page_cache_resident", resident);
        cJSON_AddNumberToObject(root, "reps", (double)reps);
        cJSON *res = cJSON_AddObjectToObject(root, "gbps_median");
        for (int v = 0; v < VARIANTS; v++)
            cJSON_AddNumberToObject(res, keys[v], med[v]);
        cJSON_AddNumberToObject(root, "move_vs_pinned", med[V_MOVE] / med[V_PINNED]);
        cJSON_AddNumberToObject(root, "move_to_device_vs_pinned", med[V_MOVE_ALLOC] / med[V_PINNED]);
        cJSON_AddNumberToObject(root, "safetensors_vs_pinned", med[V_TENSORS] / med[V_PINNED]);
        cJSON *fu = cJSON_AddObjectToObject(root, "first_gpu_use_ms");
        cJSON_AddNumberToObject(fu, "map_file", first[0] * 1e3);
        cJSON_AddNumberToObject(fu, "read", first[1] * 1e3);
        nu_device_close(d);
        return bench_json_print("upload", root);
    }
    printf("nuvec bench upload on device %u: %s\n", info->index, info->name);
    printf("%s: %.2f GiB, %zu tensors, %.0f%% in the page cache; median of %ld runs\n\n", path,
           r.file_size / 1073741824.0, tensors, resident * 100, reps);
    printf("%-56s | %8s | %s\n", "", "GB/s", "vs pinned");
    char ratio[32];
    for (int v = 0; v < VARIANTS; v++)
        printf("%-56s | %8.2f | %s\n", text[v], med[v], bench_ratio_text(ratio, sizeof ratio, med[v] / med[V_PINNED]));
    printf("\ntime to first GPU use (the file in a buffer, then a GPU copy of all of it):\n");
    printf("  map_file: %.1f ms    read() into a shared buffer: %.1f ms    (%s)\n", first[0] * 1e3, first[1] * 1e3,
           bench_ratio_text(ratio, sizeof ratio, first[1] / first[0]));
    printf("\ntarget on a GPU: nuvec move >= %.1fx the pinned copy: %s\n", TARGET_RATIO,
           !gpu ? "(not meaningful on a CPU device)" : med[V_MOVE] / med[V_PINNED] >= TARGET_RATIO ? "met" : "NOT met");
    nu_device_close(d);
    return 0;
}
