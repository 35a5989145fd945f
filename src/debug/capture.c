/* capture.c: GPU captures through RenderDoc's in-application API (see nuvec/capture.h).
 *
 * RenderDoc's Vulkan layer is implicit and enabled by ENABLE_VULKAN_RENDERDOC_CAPTURE=1 at
 * instance creation; NUVEC_CAPTURE=1 sets that for the devices nuvec opens. When the layer came
 * with the device's instance, librenderdoc.so is loaded in the process and its API is found with
 * dlopen(RTLD_NOLOAD): nuvec never links RenderDoc. RenderDoc names its files from a template, so
 * the capture is written next to the requested path and renamed to it at stop. */
#include "debug/capture.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <errno.h>
#include <renderdoc_app.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/host.h"
#include "nuvec/command.h"

/* A device's captures: RenderDoc's API when its layer came with the instance, and the running
 * capture. `lock` orders start and stop; `running` is what recording reads (any thread). */
struct nu__capture {
    RENDERDOC_API_1_4_1 *api;
    pthread_mutex_t lock;
    char *path;           /* of the running capture, or NULL */
    uint32_t count;       /* RenderDoc's captures before it started */
    atomic_bool running;
};

void nu__capture_prepare(void)
{
    if (nu__env_on("NUVEC_CAPTURE"))
        setenv("ENABLE_VULKAN_RENDERDOC_CAPTURE", "1", 1);
}

bool nu__capture_running(nu_device *d)
{
    return d->capture && atomic_load_explicit(&d->capture->running, memory_order_acquire);
}

nu_status nu__capture_attach(nu_device *d)
{
    struct nu__capture *c = nu__calloc(1, sizeof *c);
    if (!c)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory opening a device");
    pthread_mutex_init(&c->lock, NULL);
    atomic_init(&c->running, false);
    d->capture = c;
    const char *v = getenv("ENABLE_VULKAN_RENDERDOC_CAPTURE");
    if (!v || strcmp(v, "1") != 0)
        return NU_OK; /* the layer was not asked for: this instance has none, whatever is loaded */
    /* Kept loaded once there (RTLD_NODELETE): RenderDoc hooks the process and must not be
     * unloaded with the instance. */
    void *lib = dlopen("librenderdoc.so", RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    if (!lib)
        return NU_OK;
    pRENDERDOC_GetAPI get = NULL;
    void *sym = dlsym(lib, "RENDERDOC_GetAPI");
    memcpy(&get, &sym, sizeof get);
    RENDERDOC_API_1_4_1 *api = NULL;
    if (get && get(eRENDERDOC_API_Version_1_4_1, (void **)&api) == 1)
        c->api = api;
    return NU_OK;
}

nu_status nu_capture_start(nu_device *d, const char *path)
{
    if (!d || !path)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "nu_capture_start: NULL device or path");
    size_t n = strlen(path);
    if (n < 5 || strcmp(path + n - 4, ".rdc") != 0)
        return nu__fail(d, NU_ERROR_CAPTURE, "the capture file must end in .rdc: %s", path);
    struct stat st;
    if (stat(path, &st) == 0)
        return nu__fail(d, NU_ERROR_CAPTURE, "the capture file already exists: %s", path);
    struct nu__capture *c = d->capture;
    RENDERDOC_API_1_4_1 *api = c->api;
    if (!api)
        return nu__fail(d, NU_ERROR_CAPTURE,
                        "captures are disabled for this device: set NUVEC_CAPTURE=1 (or RenderDoc's "
                        "ENABLE_VULKAN_RENDERDOC_CAPTURE=1) before opening it, with RenderDoc installed "
                        "(Debian: librenderdoc)");
    pthread_mutex_lock(&c->lock);
    if (c->path || api->IsFrameCapturing()) {
        pthread_mutex_unlock(&c->lock);
        return nu__fail(d, NU_ERROR_CAPTURE, "another capture is running (one at a time): %s not started", path);
    }
    char *copy = nu__strdup(path);
    char *template = nu__malloc(n + 16);
    if (!copy || !template) {
        pthread_mutex_unlock(&c->lock);
        nu__free(copy);
        nu__free(template);
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory starting a capture");
    }
    /* RenderDoc appends its own suffix to the template: write beside the path, rename at stop. */
    snprintf(template, n + 16, "%.*s.nuvec", (int)(n - 4), path);
    api->SetCaptureFilePathTemplate(template);
    nu__free(template);
    c->count = api->GetNumCaptures();
    api->StartFrameCapture(RENDERDOC_DEVICEPOINTER_FROM_VKINSTANCE(d->instance), NULL);
    c->path = copy;
    atomic_store_explicit(&c->running, true, memory_order_release);
    pthread_mutex_unlock(&c->lock);
    return NU_OK;
}

nu_status nu_capture_stop(nu_device *d)
{
    if (!d)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_capture_stop: NULL device");
    struct nu__capture *c = d->capture;
    pthread_mutex_lock(&c->lock);
    if (!c->path) {
        pthread_mutex_unlock(&c->lock);
        return NU_OK;
    }
    RENDERDOC_API_1_4_1 *api = c->api;
    nu_status st = nu_device_wait_idle(d, NU_WAIT_FOREVER);
    uint32_t ended = api->EndFrameCapture(RENDERDOC_DEVICEPOINTER_FROM_VKINSTANCE(d->instance), NULL);
    uint32_t n = api->GetNumCaptures();
    char written[4096];
    uint32_t len = sizeof written;
    uint64_t when;
    if (st == NU_OK && (!ended || n <= c->count || !api->GetCapture(n - 1, written, &len, &when)))
        st = nu__fail(d, NU_ERROR_CAPTURE, "RenderDoc wrote no capture for %s", c->path);
    if (st == NU_OK && rename(written, c->path) != 0)
        st = nu__fail(d, NU_ERROR_IO, "moving the capture %s to %s: %s", written, c->path, strerror(errno));
    atomic_store_explicit(&c->running, false, memory_order_release);
    nu__free(c->path);
    c->path = NULL;
    pthread_mutex_unlock(&c->lock);
    return st;
}

void nu__capture_fini(nu_device *d)
{
    if (!d->capture)
        return;
    if (nu__capture_running(d)) {
        nu_status st = nu_capture_stop(d);
        if (st != NU_OK)
            fprintf(stderr, "nuvec: the capture was not written: %s\n", nu_error_message(d));
    }
    pthread_mutex_destroy(&d->capture->lock);
    nu__free(d->capture);
    d->capture = NULL;
}
