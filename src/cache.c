#include "cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

static const char MAGIC[8] = {'E', 'L', 'U', 'C', 'A', 'C', 'H', 'E'};

struct header {
    char magic[8];
    uint32_t format;
    uint32_t kind;
    uint8_t key[16];
    uint64_t size;
    uint64_t checksum;
};
_Static_assert(sizeof(struct header) == ELU_CACHE_HEADER_SIZE,
               "the entry header has no padding");

struct elu_cache_key elu_cache_key_of(const char *text, size_t len)
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(text, len));
    struct elu_cache_key k;
    memcpy(k.bytes, c.digest, sizeof k.bytes);
    return k;
}

/* mkdir -p with mode 0700 for what it creates. */
static bool make_dirs(char *path, char *why, size_t why_size)
{
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        const char saved = *p;
        *p = '\0';
        const bool ok = mkdir(path, 0700) == 0 || errno == EEXIST;
        const int err = errno;
        *p = saved;
        if (!ok) {
            snprintf(why, why_size, "cannot create cache directory %s: %s",
                     path, strerror(err));
            return false;
        }
        if (saved == '\0')
            break;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(why, why_size, "cache path %s is not a directory", path);
        return false;
    }
    return true;
}

bool elu_cache_open_dir(const char *requested, char *dir, size_t dir_size,
                        char *why, size_t why_size)
{
    const char *env = getenv("ELU_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int len;
    if (requested && *requested)
        len = snprintf(dir, dir_size, "%s", requested);
    else if (env && *env)
        len = snprintf(dir, dir_size, "%s", env);
    else if (xdg && *xdg == '/')
        len = snprintf(dir, dir_size, "%s/elu", xdg);
    else if (home && *home == '/')
        len = snprintf(dir, dir_size, "%s/.cache/elu", home);
    else {
        snprintf(why, why_size, "no cache directory: HOME and XDG_CACHE_HOME "
                                "are unset and ELU_CACHE_DIR is not given");
        return false;
    }
    if (len < 0 || (size_t)len >= dir_size) {
        snprintf(why, why_size, "cache directory path is too long");
        return false;
    }
    return make_dirs(dir, why, why_size);
}

void elu_cache_entry_path(const char *dir, const struct elu_cache_key *key,
                          char *path, size_t size)
{
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", key->bytes[i]);
    snprintf(path, size, "%s/%s.bin", dir, hex);
}

static bool read_all(int fd, void *buf, size_t size)
{
    for (size_t done = 0; done < size;) {
        const ssize_t r = read(fd, (char *)buf + done, size - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        done += (size_t)r;
    }
    return true;
}

static bool write_all(int fd, const void *buf, size_t size)
{
    for (size_t done = 0; done < size;) {
        const ssize_t w = write(fd, (const char *)buf + done, size - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        done += (size_t)w;
    }
    return true;
}

/* NULL if the header and file size agree with key; else what is wrong. */
static const char *check_header(const struct header *h,
                                const struct elu_cache_key *key,
                                off_t file_size)
{
    if (memcmp(h->magic, MAGIC, sizeof MAGIC) != 0)
        return "bad magic";
    if (h->format != ELU_CACHE_FORMAT)
        return "other format version";
    if (h->kind != ELU_BINARY_CUBIN && h->kind != ELU_BINARY_PTX)
        return "unknown payload kind";
    if (memcmp(h->key, key->bytes, sizeof h->key) != 0)
        return "key mismatch";
    if (h->size == 0 || h->size > ELU_CACHE_MAX_PAYLOAD ||
        (uint64_t)file_size != ELU_CACHE_HEADER_SIZE + h->size)
        return "size mismatch (truncated?)";
    return NULL;
}

enum elu_cache_result elu_cache_get(const char *dir,
                                    const struct elu_cache_key *key,
                                    enum elu_binary_kind *kind, void **payload,
                                    size_t *size, char *why, size_t why_size)
{
    char path[4200];
    elu_cache_entry_path(dir, key, path, sizeof path);
    const int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return ELU_CACHE_MISS;
    struct header h;
    struct stat st;
    const char *bad = NULL;
    char *data = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        bad = "not a regular file";
    else if (!read_all(fd, &h, sizeof h))
        bad = "short header";
    else
        bad = check_header(&h, key, st.st_size);
    if (!bad && !(data = malloc(h.size + 1)))
        bad = "out of memory";
    else if (!bad && !read_all(fd, data, h.size))
        bad = "short payload";
    else if (!bad && XXH3_64bits(data, h.size) != h.checksum)
        bad = "checksum mismatch";
    close(fd);
    if (bad) {
        free(data);
        snprintf(why, why_size, "cache entry %s rejected: %s", path, bad);
        unlink(path);
        return ELU_CACHE_REJECTED;
    }
    data[h.size] = '\0';
    *kind = (enum elu_binary_kind)h.kind;
    *payload = data;
    *size = h.size;
    return ELU_CACHE_HIT;
}

bool elu_cache_put(const char *dir, const struct elu_cache_key *key,
                   enum elu_binary_kind kind, const void *payload, size_t size,
                   char *why, size_t why_size)
{
    char path[4200], tmp[4300];
    elu_cache_entry_path(dir, key, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
    const int fd = mkstemp(tmp); /* O_EXCL, mode 0600 */
    if (fd < 0) {
        snprintf(why, why_size, "cannot create %s: %s", tmp, strerror(errno));
        return false;
    }
    struct header h;
    memcpy(h.magic, MAGIC, sizeof MAGIC);
    h.format = ELU_CACHE_FORMAT;
    h.kind = (uint32_t)kind;
    memcpy(h.key, key->bytes, sizeof h.key);
    h.size = size;
    h.checksum = XXH3_64bits(payload, size);
    const bool ok = write_all(fd, &h, sizeof h) &&
                    write_all(fd, payload, size) && fsync(fd) == 0;
    const int err = errno;
    if (close(fd) != 0 || !ok || rename(tmp, path) != 0) {
        snprintf(why, why_size, "cannot write cache entry %s: %s", path,
                 strerror(ok ? errno : err));
        unlink(tmp);
        return false;
    }
    return true;
}
