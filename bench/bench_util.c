/* bench_util.c: see bench_util.h. */
#include "bench_util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double bench_percentile_sorted(const double *v, int n, double p)
{
    if (n <= 0)
        return 0;
    int i = (int)ceil(p / 100.0 * n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

const char *bench_ratio_text(char *buf, size_t len, double ratio)
{
    if (!(ratio > 0))
        snprintf(buf, len, "n/a");
    else if (ratio >= 100)
        snprintf(buf, len, "%.0fx", ratio);
    else if (ratio >= 10)
        snprintf(buf, len, "%.1fx", ratio);
    else if (ratio >= 0.01)
        snprintf(buf, len, "%.2fx", ratio);
    else
        snprintf(buf, len, "%.2gx", ratio);
    return buf;
}

const char *bench_us_text(char *buf, size_t len, double us)
{
    if (us < 0)
        snprintf(buf, len, "n/a");
    else if (us < 1)
        snprintf(buf, len, "%.3f", us);
    else if (us < 10)
        snprintf(buf, len, "%.2f", us);
    else if (us < 100)
        snprintf(buf, len, "%.1f", us);
    else
        snprintf(buf, len, "%.0f", us);
    return buf;
}

bool bench_parse_count(const char *bench, const char *opt, const char *text, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long n = strtol(text, &end, 10);
    if (errno || end == text || *end || n < lo || n > hi) {
        fprintf(stderr, "nuvec bench %s: %s wants a number from %ld to %ld, not '%s'\n", bench, opt, lo, hi, text);
        return false;
    }
    *out = n;
    return true;
}

int bench_common_option(const char *bench, int argc, char **argv, int *i, bool *json, const char **select,
                           void (*usage)(FILE *f))
{
    const char *arg = argv[*i];
    if (!strcmp(arg, "--json")) {
        *json = true;
    } else if (!strcmp(arg, "--device") && *i + 1 < argc) {
        *select = argv[++*i];
    } else if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
        usage(stdout);
        return 0;
    } else {
        fprintf(stderr, "nuvec bench %s: unknown or incomplete option '%s'\n", bench, arg);
        usage(stderr);
        return 2;
    }
    return BENCH_OPTION_TAKEN;
}

void bench_no_validation(const char *bench)
{
    /* Validation intercepts every Vulkan call: its numbers would measure the layer. */
    const char *val = getenv("NUVEC_VALIDATION");
    if (val && *val && strcmp(val, "0") != 0) {
        fprintf(stderr, "nuvec bench %s: ignoring NUVEC_VALIDATION=%s (benchmarks run without validation)\n", bench,
                val);
        unsetenv("NUVEC_VALIDATION");
    }
}

bool bench_open(const char *bench, const char *select, nu_device **out)
{
    bench_no_validation(bench);
    nu_device_desc desc = {.select = select, .validation = false};
    nu_status st = nu_device_open(&desc, out);
    if (st != NU_OK) {
        fprintf(stderr, "nuvec bench %s: %s: %s\n", bench, nu_status_string(st), nu_error_message(NULL));
        return false;
    }
    return true;
}

void bench_json_device(cJSON *root, const nu_device *d)
{
    const nu_device_info *in = &d->info;
    char a[64];
    cJSON *dev = cJSON_AddObjectToObject(root, "device");
    cJSON_AddNumberToObject(dev, "index", in->index);
    cJSON_AddStringToObject(dev, "name", in->name);
    cJSON_AddStringToObject(dev, "type", nu_device_type_name(in->type));
    cJSON_AddStringToObject(dev, "driver_name", in->driver_name);
    cJSON_AddStringToObject(dev, "driver_info", in->driver_info);
    uint32_t v = in->api_version;
    snprintf(a, sizeof a, "%u.%u.%u", (v >> 22) & 0x7fu, (v >> 12) & 0x3ffu, v & 0xfffu);
    cJSON_AddStringToObject(dev, "api_version", a);
}

int bench_json_print(const char *bench, cJSON *root)
{
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "nuvec bench %s: out of host memory printing JSON\n", bench);
        return 1;
    }
    printf("%s\n", text);
    cJSON_free(text);
    return 0;
}

/* ---- the hand-written Vulkan path --------------------------------------------------------- */

bool bench_vk_init(bench_vk *v, nu_device *d, const char *bench, bool transient)
{
    const nu__vk_device *vk = &d->vkd;
    memset(v, 0, sizeof *v);
    v->d = d;
    const char *what = "vkCreateCommandPool";
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = transient ? VK_COMMAND_POOL_CREATE_TRANSIENT_BIT
                                                     : VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = d->compute->family};
    VkResult r = vk->vkCreateCommandPool(d->device, &pi, NULL, &v->pool);
    if (r == VK_SUCCESS) {
        what = "vkAllocateCommandBuffers";
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                          .commandPool = v->pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                          .commandBufferCount = 1};
        r = vk->vkAllocateCommandBuffers(d->device, &ai, &v->cmd);
    }
    if (r == VK_SUCCESS) {
        what = "vkCreateSemaphore (timeline)";
        VkSemaphoreTypeCreateInfo ti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                        .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
        VkSemaphoreCreateInfo si = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti};
        r = vk->vkCreateSemaphore(d->device, &si, NULL, &v->timeline);
    }
    if (r == VK_SUCCESS) {
        what = "vkCreateFence";
        VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        r = vk->vkCreateFence(d->device, &fi, NULL, &v->fence);
    }
    if (r != VK_SUCCESS) {
        fprintf(stderr, "nuvec bench %s: %s: %s\n", bench, what, nu__vk_result_name(r));
        bench_vk_fini(v);
        return false;
    }
    /* Timestamps: where the compute family writes them (timestampValidBits) and the device
     * reports a period. Without them the GPU columns say n/a; wall times remain. */
    uint32_t n = 0;
    d->vki.vkGetPhysicalDeviceQueueFamilyProperties(d->physical, &n, NULL);
    VkQueueFamilyProperties *fam = calloc(n ? n : 1, sizeof *fam);
    uint32_t bits = 0;
    if (fam) {
        d->vki.vkGetPhysicalDeviceQueueFamilyProperties(d->physical, &n, fam);
        if (d->compute->family < n)
            bits = fam[d->compute->family].timestampValidBits;
        free(fam);
    }
    if (bits && d->info.timestamp_period > 0) {
        v->timestamp_mask = bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
        VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                    .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 2};
        if (vk->vkCreateQueryPool(d->device, &qi, NULL, &v->queries) != VK_SUCCESS)
            v->queries = VK_NULL_HANDLE;
    }
    return true;
}

void bench_vk_fini(bench_vk *v)
{
    if (!v->d)
        return;
    const nu__vk_device *vk = &v->d->vkd;
    VkDevice dev = v->d->device;
    if (v->queries)
        vk->vkDestroyQueryPool(dev, v->queries, NULL);
    if (v->fence)
        vk->vkDestroyFence(dev, v->fence, NULL);
    if (v->timeline)
        vk->vkDestroySemaphore(dev, v->timeline, NULL);
    if (v->pool)
        vk->vkDestroyCommandPool(dev, v->pool, NULL); /* frees its command buffer */
    memset(v, 0, sizeof *v);
}

VkResult bench_vk_submit(bench_vk *v, VkCommandBuffer cmd, VkFence fence)
{
    nu_device *d = v->d;
    uint64_t value = v->value + 1;
    VkTimelineSemaphoreSubmitInfo ti = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                        .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &value};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &ti, .commandBufferCount = 1,
                       .pCommandBuffers = &cmd, .signalSemaphoreCount = 1, .pSignalSemaphores = &v->timeline};
    if (fence) {
        si.pNext = NULL;
        si.signalSemaphoreCount = 0;
        si.pSignalSemaphores = NULL;
    }
    /* nuvec's queue: vkQueueSubmit needs it externally synchronised with nuvec's own submits. */
    pthread_mutex_lock(&d->compute->lock);
    VkResult r = d->vkd.vkQueueSubmit(d->compute->queue, 1, &si, fence);
    pthread_mutex_unlock(&d->compute->lock);
    if (r == VK_SUCCESS && !fence)
        v->value = value;
    return r;
}

VkResult bench_vk_wait(bench_vk *v, bool spin)
{
    const nu__vk_device *vk = &v->d->vkd;
    const uint64_t limit = 60000000000ull;
    if (!spin) {
        VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1,
                                  .pSemaphores = &v->timeline, .pValues = &v->value};
        return vk->vkWaitSemaphores(v->d->device, &wi, limit);
    }
    uint64_t start = bench_now_ns();
    for (unsigned i = 0;; i++) {
        uint64_t cur = 0;
        VkResult r = vk->vkGetSemaphoreCounterValue(v->d->device, v->timeline, &cur);
        if (r != VK_SUCCESS)
            return r;
        if (cur >= v->value)
            return VK_SUCCESS;
        if ((i & 1023) == 1023 && bench_now_ns() - start > limit)
            return VK_TIMEOUT;
    }
}

void bench_vk_timestamp_begin(bench_vk *v, VkCommandBuffer cmd)
{
    if (!v->queries)
        return;
    v->d->vkd.vkCmdResetQueryPool(cmd, v->queries, 0, 2);
    v->d->vkd.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, v->queries, 0);
}

void bench_vk_timestamp_end(bench_vk *v, VkCommandBuffer cmd)
{
    if (v->queries)
        v->d->vkd.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, v->queries, 1);
}

double bench_vk_timestamp_ns(bench_vk *v)
{
    if (!v->queries)
        return -1;
    uint64_t t[2];
    VkResult r = v->d->vkd.vkGetQueryPoolResults(v->d->device, v->queries, 0, 2, sizeof t, t, sizeof t[0],
                                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    if (r != VK_SUCCESS)
        return -1;
    return (double)((t[1] - t[0]) & v->timestamp_mask) * v->d->info.timestamp_period;
}
