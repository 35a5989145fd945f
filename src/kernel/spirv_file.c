/* spirv_file.c: a kernel's SPIR-V read from a file (nu_kernel_desc.path), for kernel.c (spirv.h,
 * nu__spirv_read_file). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/host.h"
#include "kernel/spirv.h"

nu_status nu__spirv_read_file(nu_device *d, const char *path, uint32_t **words, size_t *bytes)
{
    *words = NULL;
    *bytes = 0;
    char why[256];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return nu__fail(d, NU_ERROR_IO, "cannot open kernel file '%s': %s", path,
                        strerror_r(errno, why, sizeof why));
    struct stat s;
    if (fstat(fd, &s) != 0) {
        int e = errno;
        close(fd);
        return nu__fail(d, NU_ERROR_IO, "cannot read kernel file '%s': %s", path, strerror_r(e, why, sizeof why));
    }
    if (S_ISDIR(s.st_mode)) {
        close(fd);
        return nu__fail(d, NU_ERROR_IO, "cannot read kernel file '%s': %s", path,
                        strerror_r(EISDIR, why, sizeof why));
    }
    if (s.st_size > (off_t)NU__SPIRV_MAX) {
        close(fd);
        return nu__fail(d, NU_ERROR_FORMAT, "kernel file '%s' is %lld bytes: too large for SPIR-V", path,
                        (long long)s.st_size);
    }
    size_t size = (size_t)s.st_size;
    uint32_t *buf = nu__malloc(size + 4);
    if (!buf) {
        close(fd);
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory reading kernel file '%s'", path);
    }
    /* Read until end of file (the size may have changed since fstat; the buffer bounds it). */
    size_t got = 0;
    for (;;) {
        ssize_t k = read(fd, (char *)buf + got, size + 4 - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            close(fd);
            nu__free(buf);
            return nu__fail(d, NU_ERROR_IO, "cannot read kernel file '%s': %s", path,
                            strerror_r(e, why, sizeof why));
        }
        if (k == 0 || got + (size_t)k == size + 4) {
            got += (size_t)k;
            break;
        }
        got += (size_t)k;
    }
    close(fd);
    if (got > size) {
        nu__free(buf);
        return nu__fail(d, NU_ERROR_IO, "kernel file '%s' grew while being read", path);
    }
    *words = buf;
    *bytes = got;
    return NU_OK;
}
