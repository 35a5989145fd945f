/* bench/probes/vulkan_staging.c: hand-written Vulkan host-to-device copy rates (pinned sources
 * of 4 MiB to 1 GiB, cached and uncached host memory), and a staged file move: worker threads
 * fill a ring of pinned staging slots from a file in the page cache (memcpy from a mapping, or
 * pread), the main thread submits one vkCmdCopyBuffer per slot on the transfer queue (or the
 * compute queue with PROBE_COMPUTE=1), signalling a timeline semaphore. What told nuvec's mover
 * how many chunks to keep in flight (bench/RESULTS.md, 2026-11-30). A throwaway measurement kept
 * for its numbers; not built by the Makefile:
 *   gcc -O2 -pthread bench/probes/vulkan_staging.c -lvulkan -o /tmp/vulkan_staging
 *   /tmp/vulkan_staging /tmp/probe.bin 8     (writes an 8 GiB file there if it is not one) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <vulkan/vulkan.h>

#define CK(x) do { VkResult r_ = (x); if (r_) { fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, r_); exit(1); } } while (0)
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

static VkDevice dev;
static VkPhysicalDevice pd;
static VkQueue q;
static uint32_t qf;
static VkPhysicalDeviceMemoryProperties mp;
static VkCommandPool pool;

static uint32_t find_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid)
{
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
        if ((bits >> i & 1) && (mp.memoryTypes[i].propertyFlags & want) == want && !(mp.memoryTypes[i].propertyFlags & avoid))
            return i;
    return UINT32_MAX;
}

typedef struct { VkBuffer buf; VkDeviceMemory mem; void *ptr; } vbuf;
static vbuf make(VkDeviceSize size, uint32_t type)
{
    vbuf b = {0};
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
                             .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    CK(vkCreateBuffer(dev, &bi, NULL, &b.buf));
    VkMemoryRequirements mr; vkGetBufferMemoryRequirements(dev, b.buf, &mr);
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = mr.size, .memoryTypeIndex = type};
    CK(vkAllocateMemory(dev, &ai, NULL, &b.mem));
    CK(vkBindBufferMemory(dev, b.buf, b.mem, 0));
    if (mp.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) CK(vkMapMemory(dev, b.mem, 0, VK_WHOLE_SIZE, 0, &b.ptr));
    return b;
}

static VkSemaphore tl;
static uint64_t submitted;
static void submit_copy(VkCommandBuffer cb, VkBuffer src, VkDeviceSize soff, VkBuffer dst, VkDeviceSize doff, VkDeviceSize n, uint64_t signal)
{
    VkCommandBufferBeginInfo bb = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    CK(vkBeginCommandBuffer(cb, &bb));
    VkBufferCopy r = {soff, doff, n};
    vkCmdCopyBuffer(cb, src, dst, 1, &r);
    CK(vkEndCommandBuffer(cb));
    VkTimelineSemaphoreSubmitInfo ts = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO, .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &signal};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &ts, .commandBufferCount = 1, .pCommandBuffers = &cb, .signalSemaphoreCount = 1, .pSignalSemaphores = &tl};
    CK(vkQueueSubmit(q, 1, &si, VK_NULL_HANDLE));
}
static void wait_value(uint64_t v)
{
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1, .pSemaphores = &tl, .pValues = &v};
    CK(vkWaitSemaphores(dev, &wi, UINT64_MAX));
}

/* staged move */
static uint8_t *map;
static int fd;
static size_t fsize, chunk;
static size_t nchunks;
static unsigned nslots;
static vbuf *slots;
static _Atomic size_t next_chunk;
static _Atomic uint64_t *filled;   /* filled[k]: chunk k in slot k % nslots ready */
static _Atomic uint64_t copied;    /* chunks whose copies completed (semaphore value) */
static int mode; /* 0 memcpy from map, 1 pread */
static uint64_t sem_base;

static void *worker(void *a)
{
    (void)a;
    for (;;) {
        size_t k = atomic_fetch_add(&next_chunk, 1);
        if (k >= nchunks) break;
        /* slot k % nslots is free once chunk k - nslots was copied */
        if (k >= nslots) {
            uint64_t need = k - nslots + 1;
            uint64_t v;
            while ((v = atomic_load(&copied)) < need) {
                CK(vkGetSemaphoreCounterValue(dev, tl, &v));
                if (v - sem_base >= need) { break; }
                uint64_t w = sem_base + need;
                VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1, .pSemaphores = &tl, .pValues = &w};
                vkWaitSemaphores(dev, &wi, 1000000);
            }
        }
        size_t off = k * chunk, n = fsize - off < chunk ? fsize - off : chunk;
        uint8_t *d = slots[k % nslots].ptr;
        if (mode == 0) memcpy(d, map + off, n);
        else { size_t done = 0; while (done < n) { ssize_t r = pread(fd, d + done, n - done, off + done); if (r <= 0) { perror("pread"); exit(1); } done += r; } }
        atomic_store(&filled[k], 1);
    }
    return NULL;
}

static double staged(vbuf dst, size_t ch, unsigned threads, unsigned slots_n, int md, uint32_t type)
{
    chunk = ch; nchunks = (fsize + ch - 1) / ch; nslots = slots_n; mode = md;
    slots = calloc(nslots, sizeof *slots);
    for (unsigned i = 0; i < nslots; i++) { slots[i] = make(ch, type); memset(slots[i].ptr, 0, ch); }
    filled = calloc(nchunks, sizeof *filled);
    atomic_store(&next_chunk, 0);
    uint64_t base = submitted;
    sem_base = base;
    atomic_store(&copied, 0);
    /* semaphore values: base + k + 1 when chunk k is copied. Workers compare against copied count: */
    VkCommandBuffer *cbs = calloc(nchunks, sizeof *cbs);
    VkCommandBufferAllocateInfo ca = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = (uint32_t)nchunks};
    CK(vkAllocateCommandBuffers(dev, &ca, cbs));
    pthread_t th[32];
    double t0 = now();
    for (unsigned i = 0; i < threads; i++) pthread_create(&th[i], NULL, worker, NULL);
    for (size_t k = 0; k < nchunks; k++) {
        while (!atomic_load(&filled[k])) {
            uint64_t v; CK(vkGetSemaphoreCounterValue(dev, tl, &v));
            atomic_store(&copied, v - base);
        }
        size_t off = k * ch, n = fsize - off < ch ? fsize - off : ch;
        submit_copy(cbs[k], slots[k % nslots].buf, 0, dst.buf, off, n, base + k + 1);
        uint64_t v; CK(vkGetSemaphoreCounterValue(dev, tl, &v));
        atomic_store(&copied, v - base);
    }
    wait_value(base + nchunks);
    atomic_store(&copied, nchunks);
    double t1 = now();
    submitted = base + nchunks;
    for (unsigned i = 0; i < threads; i++) pthread_join(th[i], NULL);
    vkFreeCommandBuffers(dev, pool, (uint32_t)nchunks, cbs);
    for (unsigned i = 0; i < nslots; i++) { vkDestroyBuffer(dev, slots[i].buf, NULL); vkFreeMemory(dev, slots[i].mem, NULL); }
    free(slots); free(filled); free(cbs);
    return fsize / (t1 - t0) / 1e9;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/tmp/probe.bin";
    fsize = (size_t)((argc > 2 ? atof(argv[2]) : 8) * (1ull << 30));
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance inst; CK(vkCreateInstance(&ii, NULL, &inst));
    uint32_t n = 8; VkPhysicalDevice pds[8]; CK(vkEnumeratePhysicalDevices(inst, &n, pds));
    pd = pds[0];
    for (uint32_t i = 0; i < n; i++) { VkPhysicalDeviceProperties p; vkGetPhysicalDeviceProperties(pds[i], &p); if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) { pd = pds[i]; break; } }
    VkPhysicalDeviceProperties pp; vkGetPhysicalDeviceProperties(pd, &pp);
    printf("device %s\n", pp.deviceName);
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++) printf("  type %u flags 0x%x heap %u\n", i, mp.memoryTypes[i].propertyFlags, mp.memoryTypes[i].heapIndex);
    uint32_t nq = 16; VkQueueFamilyProperties qp[16]; vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qp);
    qf = 0;
    for (uint32_t i = 0; i < nq; i++) if ((qp[i].queueFlags & VK_QUEUE_TRANSFER_BIT) && !(qp[i].queueFlags & (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT))) { qf = i; break; }
    int use_compute = getenv("PROBE_COMPUTE") != NULL;
    if (use_compute) for (uint32_t i = 0; i < nq; i++) if ((qp[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && !(qp[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) { qf = i; break; }
    printf("queue family %u flags 0x%x\n", qf, qp[qf].queueFlags);
    float prio = 1;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = qf, .queueCount = 1, .pQueuePriorities = &prio};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .timelineSemaphore = VK_TRUE};
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &f12, .queueCreateInfoCount = 1, .pQueueCreateInfos = &qi};
    CK(vkCreateDevice(pd, &di, NULL, &dev));
    vkGetDeviceQueue(dev, qf, 0, &q);
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, .queueFamilyIndex = qf};
    CK(vkCreateCommandPool(dev, &pci, NULL, &pool));
    VkSemaphoreTypeCreateInfo st = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO, .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &st};
    CK(vkCreateSemaphore(dev, &sci, NULL, &tl));

    /* the file */
    struct stat sb;
    if (stat(path, &sb) || (size_t)sb.st_size != fsize) {
        int w = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
        size_t b = 64 << 20; uint8_t *buf = malloc(b);
        for (size_t i = 0; i < b; i++) buf[i] = (uint8_t)(i * 7 + 1);
        for (size_t o = 0; o < fsize; o += b) if (write(w, buf, b) != (ssize_t)b) { perror("write"); return 1; }
        close(w); free(buf);
    }
    fd = open(path, O_RDONLY);
    map = mmap(NULL, fsize, PROT_READ, MAP_SHARED, fd, 0);

    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 1 << 20, .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    VkBuffer tmp; CK(vkCreateBuffer(dev, &bi, NULL, &tmp));
    VkMemoryRequirements mr; vkGetBufferMemoryRequirements(dev, tmp, &mr); vkDestroyBuffer(dev, tmp, NULL);
    uint32_t t_dev = find_type(mr.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
    uint32_t t_cached = find_type(mr.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    uint32_t t_wc = find_type(mr.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (t_dev == UINT32_MAX) t_dev = find_type(mr.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
    if (t_cached == UINT32_MAX) t_cached = find_type(mr.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, 0);
    printf("types: device %u, host cached %u, host uncached %u\n", t_dev, t_cached, t_wc);
    vbuf dst = make(fsize, t_dev);

    VkCommandBuffer cb;
    VkCommandBufferAllocateInfo ca = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    CK(vkAllocateCommandBuffers(dev, &ca, &cb));
    /* pinned reference: one 256 MiB / 1 GiB pinned buffer copied repeatedly, one submission */
    uint32_t types[2] = {t_cached, t_wc};
    for (int ti = 0; ti < 2; ti++) {
        if (types[ti] == UINT32_MAX) continue;
        size_t sizes[] = {4ull << 20, 64ull << 20, 1ull << 30};
        for (int si = 0; si < 3; si++) {
            vbuf src = make(sizes[si], types[ti]); memset(src.ptr, 3, sizes[si]);
            double best = 0;
            for (int rep = 0; rep < 3; rep++) {
                VkCommandBufferBeginInfo bb = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
                CK(vkBeginCommandBuffer(cb, &bb));
                for (size_t o = 0; o < fsize; o += sizes[si]) { VkBufferCopy r = {0, o, fsize - o < sizes[si] ? fsize - o : sizes[si]}; vkCmdCopyBuffer(cb, src.buf, dst.buf, 1, &r); }
                CK(vkEndCommandBuffer(cb));
                uint64_t sig = ++submitted;
                VkTimelineSemaphoreSubmitInfo ts = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO, .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &sig};
                VkSubmitInfo sbi = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &ts, .commandBufferCount = 1, .pCommandBuffers = &cb, .signalSemaphoreCount = 1, .pSignalSemaphores = &tl};
                double t0 = now();
                CK(vkQueueSubmit(q, 1, &sbi, VK_NULL_HANDLE));
                wait_value(sig);
                double g = fsize / (now() - t0) / 1e9; if (g > best) best = g;
            }
            printf("pinned type %u (%s), src %zu MiB: %.2f GB/s\n", types[ti], ti ? "uncached" : "cached", sizes[si] >> 20, best);
            vkDestroyBuffer(dev, src.buf, NULL); vkFreeMemory(dev, src.mem, NULL);
        }
    }
    printf("\nstaged: %-6s %-7s %-5s %-7s %-8s %s\n", "chunk", "threads", "slots", "mode", "type", "GB/s");
    struct { size_t ch; unsigned th, sl; int md; uint32_t ty; } cfg[] = {
        {4 << 20, 8, 10, 1, 0}, {4 << 20, 8, 10, 0, 0}, {4 << 20, 8, 32, 0, 0}, {4 << 20, 12, 32, 0, 0},
        {8 << 20, 8, 16, 0, 0}, {16 << 20, 8, 16, 0, 0}, {16 << 20, 12, 24, 0, 0}, {4 << 20, 8, 32, 1, 0},
        {16 << 20, 12, 24, 1, 0}, {4 << 20, 8, 32, 0, 1}, {16 << 20, 12, 24, 0, 1}, {2 << 20, 8, 32, 0, 0},
    };
    for (size_t i = 0; i < sizeof cfg / sizeof *cfg; i++) {
        uint32_t ty = cfg[i].ty ? t_wc : t_cached;
        if (ty == UINT32_MAX) continue;
        double best = 0;
        for (int rep = 0; rep < 2; rep++) { double g = staged(dst, cfg[i].ch, cfg[i].th, cfg[i].sl, cfg[i].md, ty); if (g > best) best = g; }
        printf("staged: %-6zu %-7u %-5u %-7s %-8s %.2f\n", cfg[i].ch >> 20, cfg[i].th, cfg[i].sl, cfg[i].md ? "pread" : "memcpy", cfg[i].ty ? "uncached" : "cached", best);
    }
    return 0;
}
