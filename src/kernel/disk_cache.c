/* disk_cache.c: kernels' pipeline cache on disk (see disk_cache.h).
 *
 * One VkPipelineCache per device, created from the file of an earlier run and
 * written back at close, so that a second run skips the driver's compilation. The file is
 * named after the device (vendor, device id, driver version, pipelineCacheUUID), so another
 * device or driver never reads it. It starts with nuvec's own 24-byte header (magic, size of
 * the data, a 64-bit hash of it) followed by Vulkan's data exactly as vkGetPipelineCacheData
 * gave it: a file that is truncated, corrupted or written by something else is ignored before
 * the driver sees it (drivers are not all robust against damaged caches), as is one whose
 * VkPipelineCacheHeaderVersionOne does not match the device. It is written to a temporary file
 * in the same directory and renamed over the old one, so readers never see a partial file;
 * failing to save is silent (one line on stderr with NUVEC_VERBOSE). */
#include "kernel/disk_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/hash.h"
#include "core/host.h"

static bool verbose(void) { return nu__env_on("NUVEC_VERBOSE"); }

/* nuvec's header before Vulkan's data. All fields little-endian. */
#define FILE_MAGIC "nuvecpc1"
#define FILE_MAX (1ull << 30)

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* printf into a new string. */
__attribute__((format(printf, 1, 2))) static char *str_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = nu__malloc((size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* The cache file's path into *out, NULL when the disk cache is off or has no place. */
nu_status nu__disk_cache_path(nu_device *d, char **out)
{
    *out = NULL;
    const char *dir = getenv("NUVEC_CACHE_DIR");
    const char *sub = "";
    if (dir && strcmp(dir, "off") == 0)
        return NU_OK;
    if (!dir || !*dir) {
        dir = getenv("XDG_CACHE_HOME");
        sub = "/nuvec";
        if (!dir || dir[0] != '/') { /* the XDG spec: relative paths are invalid, ignore them */
            dir = getenv("HOME");
            sub = "/.cache/nuvec";
            if (!dir || !*dir)
                return NU_OK;
        }
    }
    VkPhysicalDeviceProperties p;
    d->vki.vkGetPhysicalDeviceProperties(d->physical, &p);
    char uuid[2 * VK_UUID_SIZE + 1];
    for (unsigned i = 0; i < VK_UUID_SIZE; i++)
        snprintf(uuid + 2 * i, 3, "%02x", p.pipelineCacheUUID[i]);
    *out = str_printf("%s%s/pipelines-%08x-%08x-%08x-%s.bin", dir, sub, p.vendorID, p.deviceID, p.driverVersion,
                      uuid);
    if (!*out)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory naming the pipeline cache file");
    return NU_OK;
}

/* Whether `data` is Vulkan pipeline cache data made by this device. */
static bool header_matches(nu_device *d, const unsigned char *data, size_t size)
{
    VkPhysicalDeviceProperties p;
    d->vki.vkGetPhysicalDeviceProperties(d->physical, &p);
    if (size < 16 + VK_UUID_SIZE)
        return false;
    uint32_t header_size = get32(data);
    return header_size >= 16 + VK_UUID_SIZE && header_size <= size &&
           get32(data + 4) == VK_PIPELINE_CACHE_HEADER_VERSION_ONE && get32(data + 8) == p.vendorID &&
           get32(data + 12) == p.deviceID && memcmp(data + 16, p.pipelineCacheUUID, VK_UUID_SIZE) == 0;
}

/* Reads the cache file; NULL when there is none or it does not fit this device. Nothing here
 * is an error: the disk cache only saves time. */
unsigned char *nu__disk_cache_load(nu_device *d, const char *path, size_t *size)
{
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat s;
    unsigned char *buf = NULL;
    const char *why = NULL;
    if (fstat(fd, &s) != 0 || !S_ISREG(s.st_mode) || s.st_size < NU__DISK_CACHE_HEADER || (uint64_t)s.st_size > FILE_MAX) {
        why = "not a regular file of a plausible size";
    } else if (!(buf = nu__malloc((size_t)s.st_size))) {
        why = "out of host memory";
    } else {
        size_t got = 0, want = (size_t)s.st_size;
        while (got < want) {
            ssize_t k = read(fd, buf + got, want - got);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                break;
            got += (size_t)k;
        }
        if (got != want)
            why = "cannot be read whole";
        else if (memcmp(buf, FILE_MAGIC, 8) != 0 || get64(buf + 8) != want - NU__DISK_CACHE_HEADER)
            why = "not a nuvec pipeline cache, or truncated";
        else if (get64(buf + 16) != nu__hash_bytes(0, buf + NU__DISK_CACHE_HEADER, want - NU__DISK_CACHE_HEADER))
            why = "corrupted (checksum mismatch)";
        else if (!header_matches(d, buf + NU__DISK_CACHE_HEADER, want - NU__DISK_CACHE_HEADER))
            why = "made by another device or driver";
    }
    close(fd);
    if (why) {
        if (verbose())
            fprintf(stderr, "nuvec: ignoring the pipeline cache %s: %s\n", path, why);
        nu__free(buf);
        return NULL;
    }
    *size = (size_t)s.st_size - NU__DISK_CACHE_HEADER;
    return buf;
}

/* mkdir -p for the directory part of `path`. */
static int make_parents(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        int rc = mkdir(path, 0700);
        int e = errno;
        *p = '/';
        if (rc != 0 && e != EEXIST)
            return -1;
    }
    return 0;
}

const char *nu__disk_cache_save(nu_device *d, VkPipelineCache cache, const char *path, size_t loaded_bytes,
                                uint64_t loaded_hash, char *err, size_t err_size)
{
    size_t size = 0;
    VkResult r = d->vkd.vkGetPipelineCacheData(d->device, cache, &size, NULL);
    if (r != VK_SUCCESS) {
        snprintf(err, err_size, "vkGetPipelineCacheData: %s", nu__vk_result_name(r));
        return err;
    }
    unsigned char *buf = nu__malloc(NU__DISK_CACHE_HEADER + size);
    if (!buf)
        return "out of host memory";
    r = d->vkd.vkGetPipelineCacheData(d->device, cache, &size, buf + NU__DISK_CACHE_HEADER);
    if (r != VK_SUCCESS) { /* VK_INCOMPLETE included: the size cannot grow without new pipelines */
        nu__free(buf);
        snprintf(err, err_size, "vkGetPipelineCacheData: %s", nu__vk_result_name(r));
        return err;
    }
    uint64_t h = nu__hash_bytes(0, buf + NU__DISK_CACHE_HEADER, size);
    if (loaded_bytes == size && loaded_hash == h) {
        nu__free(buf); /* nothing new */
        return NULL;
    }
    memcpy(buf, FILE_MAGIC, 8);
    put64(buf + 8, size);
    put64(buf + 16, h);

    const char *why = NULL;
    char *tmp = str_printf("%s.XXXXXX", path);
    int fd = -1;
    if (!tmp) {
        why = "out of host memory";
    } else if (make_parents(tmp) != 0) {
        snprintf(err, err_size, "cannot create its directory: %s", strerror_r(errno, (char[128]){0}, 128));
        why = err;
    } else if ((fd = mkstemp(tmp)) < 0) {
        snprintf(err, err_size, "cannot create a temporary file: %s", strerror_r(errno, (char[128]){0}, 128));
        why = err;
    } else {
        size_t done = 0, total = NU__DISK_CACHE_HEADER + size;
        while (done < total) {
            ssize_t k = write(fd, buf + done, total - done);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                break;
            done += (size_t)k;
        }
        int close_rc = close(fd);
        if (done != total || close_rc != 0) {
            snprintf(err, err_size, "writing failed: %s", strerror_r(errno, (char[128]){0}, 128));
            why = err;
        } else if (rename(tmp, path) != 0) {
            snprintf(err, err_size, "rename failed: %s", strerror_r(errno, (char[128]){0}, 128));
            why = err;
        }
        if (why)
            unlink(tmp);
    }
    nu__free(tmp);
    nu__free(buf);
    return why;
}
