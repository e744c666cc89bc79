#include "cache.h"

#include "env.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
/* xxHash compiled in, header only: libelu needs no libxxhash at run time. */
#define XXH_INLINE_ALL
#include <xxhash.h>

static const char MAGIC[8] = {'E', 'L', 'U', 'C', 'A', 'C', 'H', 'E'};

struct header {
    char magic[8];
    uint32_t format;
    uint32_t kind;
    uint8_t key[16];
    uint64_t size;
    uint64_t checksum; /* of description and payload */
    uint32_t description_len;
    uint32_t zero;
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

/* -------- trust -------- */

static bool in_our_groups(gid_t gid)
{
    gid_t groups[256];
    const int n = getgroups(256, groups);
    bool found = gid == getegid();
    for (int i = 0; i < n && !found; i++)
        found = groups[i] == gid;
    return found;
}

/* NULL if a directory with this stat may hold our cache, else why not. */
static const char *untrusted_dir(const struct stat *st, bool shared)
{
    if (!S_ISDIR(st->st_mode))
        return "not a directory";
    if (st->st_mode & S_IWOTH)
        return "writable by anyone";
    if (!shared) {
        if (st->st_uid != geteuid())
            return "owned by another user";
        if (st->st_mode & S_IWGRP)
            return "writable by its group (ELU_CACHE_SHARED=1 shares a cache)";
        return NULL;
    }
    if (st->st_uid != geteuid() && !in_our_groups(st->st_gid))
        return "owned by another user and group";
    if ((st->st_mode & S_IWGRP) && !(st->st_mode & S_ISGID))
        return "group-writable without the setgid bit";
    return NULL;
}

/* NULL if an entry (or lock) file with this stat may be trusted. */
static const char *untrusted_file(const struct stat *st, bool shared)
{
    if (!S_ISREG(st->st_mode))
        return "not a regular file";
    if (st->st_nlink != 1)
        return "hard-linked elsewhere";
    if (st->st_mode & S_IWOTH)
        return "writable by anyone";
    if (st->st_mode & S_IWGRP)
        return "writable by its group";
    if (st->st_uid == geteuid() || (shared && in_our_groups(st->st_gid)))
        return NULL;
    return "owned by another user";
}

/* -------- the directory -------- */

/* mkdir -p: parents 0700, the directory itself `mode` (exactly: the umask
 * would strip a shared directory's group bits). */
static bool make_dirs(char *path, mode_t mode, char *why, size_t why_size)
{
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        const char saved = *p;
        *p = '\0';
        const bool leaf = saved == '\0';
        const bool made = mkdir(path, leaf ? mode : 0700) == 0;
        const int err = errno;
        if (made && leaf && mode != 0700)
            chmod(path, mode);
        *p = saved;
        if (!made && err != EEXIST) {
            snprintf(why, why_size, "cannot create cache directory %s: %s", path,
                     strerror(err));
            return false;
        }
        if (leaf)
            return true;
    }
}

/* Why a variable's value names no directory the cache can go under. */
static const char *unusable(const char *value, char *buf, size_t size)
{
    if (!value || !*value)
        return "unset";
    snprintf(buf, size, "relative (\"%.200s\")", value);
    return buf;
}

/* c->dir, by the order elu_cache_open gives; false, saying why, if none. */
static bool choose_dir(struct elu_cache *c, const char *requested, char *why,
                       size_t why_size)
{
    const char *env = elu_env_text("ELU_CACHE_DIR");
    /* Not libelu's: the XDG spec has relative values ignored. */
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int len;
    if (requested && *requested)
        len = snprintf(c->dir, sizeof c->dir, "%s", requested);
    else if (env)
        len = snprintf(c->dir, sizeof c->dir, "%s", env);
    else if (xdg && *xdg == '/')
        len = snprintf(c->dir, sizeof c->dir, "%s/elu", xdg);
    else if (home && *home == '/')
        len = snprintf(c->dir, sizeof c->dir, "%s/.cache/elu", home);
    else {
        char xdg_is[256], home_is[256];
        snprintf(why, why_size, "no cache directory: ELU_CACHE_DIR is unset, XDG_CACHE_HOME "
                 "is %s and HOME is %s", unusable(xdg, xdg_is, sizeof xdg_is),
                 unusable(home, home_is, sizeof home_is));
        return false;
    }
    if (len < 0 || (size_t)len >= sizeof c->dir) {
        snprintf(why, why_size, "cache directory path is too long");
        return false;
    }
    return true;
}

/* `create`: make the directory when it is missing; else *missing says
 * whether it is. */
static bool open_dir(struct elu_cache *c, const char *requested, bool create,
                     bool *missing, char *why, size_t why_size)
{
    c->shared = elu_env_flag("ELU_CACHE_SHARED");
    c->max_bytes = elu_env_number("ELU_CACHE_MAX_BYTES");
    c->lock_timeout_ms = elu_env_number("ELU_CACHE_LOCK_TIMEOUT_MS");
    *missing = false;
    if (!choose_dir(c, requested, why, why_size) ||
        (create && !make_dirs(c->dir, c->shared ? 02770 : 0700, why, why_size)))
        return false;
    struct stat st;
    const bool found = stat(c->dir, &st) == 0;
    *missing = !found && errno == ENOENT;
    const char *bad = !found ? strerror(errno) : untrusted_dir(&st, c->shared);
    if (bad) {
        snprintf(why, why_size, "cache directory %s is not used: %s", c->dir, bad);
        return false;
    }
    return true;
}

bool elu_cache_open(struct elu_cache *c, const char *requested, char *why,
                    size_t why_size)
{
    bool missing;
    return open_dir(c, requested, true, &missing, why, why_size);
}

bool elu_cache_open_existing(struct elu_cache *c, const char *requested, bool *missing,
                             char *why, size_t why_size)
{
    return open_dir(c, requested, false, missing, why, why_size);
}

void elu_cache_path(const struct elu_cache *c, const struct elu_cache_key *key,
                    const char *suffix, char *path, size_t size)
{
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", key->bytes[i]);
    snprintf(path, size, "%s/%s%s", c->dir, hex, suffix);
}

/* -------- entries -------- */

const char *elu_cache_parse(const void *data, size_t len,
                            const struct elu_cache_key *key,
                            struct elu_cache_entry *out)
{
    struct header h;
    if (len < sizeof h)
        return "short header";
    memcpy(&h, data, sizeof h);
    if (memcmp(h.magic, MAGIC, sizeof MAGIC) != 0)
        return "bad magic";
    if (h.format != ELU_CACHE_FORMAT || h.zero != 0)
        return "other format version";
    if (h.kind < ELU_BINARY_CUBIN || h.kind > ELU_BINARY_TABLE)
        return "unknown payload kind";
    if (key && memcmp(h.key, key->bytes, sizeof h.key) != 0)
        return "key mismatch";
    if (h.description_len > ELU_CACHE_MAX_DESCRIPTION || h.size == 0 ||
        h.size > ELU_CACHE_MAX_PAYLOAD ||
        (uint64_t)len != sizeof h + h.description_len + h.size)
        return "size mismatch (truncated?)";
    const char *body = (const char *)data + sizeof h;
    if (XXH3_64bits(body, h.description_len + h.size) != h.checksum)
        return "checksum mismatch";
    out->kind = (enum elu_binary_kind)h.kind;
    memcpy(out->key.bytes, h.key, sizeof h.key);
    out->description = body;
    out->description_len = h.description_len;
    out->payload = body + h.description_len;
    out->size = h.size;
    return NULL;
}

/* NULL once size bytes are read, else why not. */
static const char *read_all(int fd, void *buf, size_t size)
{
    for (size_t done = 0; done < size;) {
        const ssize_t r = read(fd, (char *)buf + done, size - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return strerror(errno);
        if (r == 0)
            return "the file shrank while read";
        done += (size_t)r;
    }
    return NULL;
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

static enum elu_cache_result verdict(enum elu_cache_result result, const char *text,
                                     char *why, size_t why_size)
{
    snprintf(why, why_size, "%s", text);
    return result;
}

/* open() failed with err. No file is a miss. A symbolic link (ELOOP, under
 * O_NOFOLLOW) or a socket or device (ENXIO) is a planted file. Anything
 * else (no descriptor or memory left, no permission, an I/O error) says
 * nothing about the entry. */
static enum elu_cache_result open_failed(int err, const char *path,
                                         struct elu_cache_file *f, char *why,
                                         size_t why_size)
{
    if (err == ENOENT)
        return verdict(ELU_CACHE_MISS, strerror(err), why, why_size);
    if (err != ELOOP && err != ENXIO)
        return verdict(ELU_CACHE_UNREADABLE, strerror(err), why, why_size);
    lstat(path, &f->st);
    return verdict(ELU_CACHE_REJECTED, err == ELOOP ? "a symbolic link" : "not a regular file",
                   why, why_size);
}

/* Check the open entry file fd, then read it whole into *f. */
static enum elu_cache_result read_open(const struct elu_cache *c, int fd,
                                       struct elu_cache_file *f, char *why,
                                       size_t why_size)
{
    const size_t largest = ELU_CACHE_HEADER_SIZE + ELU_CACHE_MAX_DESCRIPTION + ELU_CACHE_MAX_PAYLOAD;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return verdict(ELU_CACHE_UNREADABLE, strerror(errno), why, why_size);
    f->st = st;
    const char *untrusted = untrusted_file(&st, c->shared);
    if (!untrusted && (uint64_t)st.st_size > largest)
        untrusted = "too large";
    if (untrusted)
        return verdict(ELU_CACHE_REJECTED, untrusted, why, why_size);
    const size_t size = (size_t)st.st_size;
    char *data = malloc(size + 1);
    const char *failed = data ? read_all(fd, data, size) : "out of memory";
    if (failed) {
        free(data);
        return verdict(ELU_CACHE_UNREADABLE, failed, why, why_size);
    }
    f->data = data;
    f->len = size;
    return ELU_CACHE_HIT;
}

/* HIT once the entry file at path is read whole, unverified. */
static enum elu_cache_result read_entry(const struct elu_cache *c, const char *path,
                                        struct elu_cache_file *f, char *why,
                                        size_t why_size)
{
    *f = (struct elu_cache_file){0};
    /* O_NOFOLLOW: no symlink swaps; O_NONBLOCK: a planted FIFO cannot hang us. */
    const int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return open_failed(errno, path, f, why, why_size);
    const enum elu_cache_result result = read_open(c, fd, f, why, why_size);
    close(fd);
    return result;
}

enum elu_cache_result elu_cache_load(const struct elu_cache *c, const char *path,
                                     const struct elu_cache_key *key,
                                     struct elu_cache_file *f, struct elu_cache_entry *e,
                                     char *why, size_t why_size)
{
    const enum elu_cache_result read = read_entry(c, path, f, why, why_size);
    const char *parse_error =
        read == ELU_CACHE_HIT ? elu_cache_parse(f->data, f->len, key, e) : NULL;
    return parse_error ? verdict(ELU_CACHE_REJECTED, parse_error, why, why_size) : read;
}

bool elu_cache_remove(const char *path, const struct stat *found, char *why,
                      size_t why_size)
{
    struct stat now;
    const bool there = lstat(path, &now) == 0;
    if (there && (now.st_dev != found->st_dev || now.st_ino != found->st_ino))
        return true; /* replaced: what was found is gone */
    if (there && (S_ISDIR(now.st_mode) ? rmdir(path) : unlink(path)) == 0)
        return true;
    if (errno == ENOENT) /* another process removed it first */
        return true;
    snprintf(why, why_size, "%s", strerror(errno));
    return false;
}

enum elu_cache_result elu_cache_get(const struct elu_cache *c,
                                    const struct elu_cache_key *key,
                                    enum elu_binary_kind *kind, void **payload,
                                    size_t *size, char *why, size_t why_size)
{
    char path[4200], bad[256];
    elu_cache_path(c, key, ".bin", path, sizeof path);
    struct elu_cache_file f;
    struct elu_cache_entry e;
    const enum elu_cache_result found =
        elu_cache_load(c, path, key, &f, &e, bad, sizeof bad);
    if (found == ELU_CACHE_REJECTED) {
        snprintf(why, why_size, "cache entry %s rejected: %s", path, bad);
        /* Best effort: what stays is rejected again next time. */
        elu_cache_remove(path, &f.st, NULL, 0);
    } else if (found == ELU_CACHE_UNREADABLE) {
        snprintf(why, why_size, "cache entry %s unreadable, left in place: %s", path, bad);
    }
    if (found != ELU_CACHE_HIT) {
        free(f.data);
        return found;
    }
    /* The payload moves to the front of the buffer it came in. */
    memmove(f.data, e.payload, e.size);
    f.data[e.size] = '\0';
    *kind = e.kind;
    *payload = f.data;
    *size = e.size;
    utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW); /* last use: now */
    return ELU_CACHE_HIT;
}

bool elu_cache_put(const struct elu_cache *c, const struct elu_cache_key *key,
                   enum elu_binary_kind kind, const char *description,
                   const void *payload, size_t size, unsigned *evicted,
                   char *why, size_t why_size)
{
    char path[4200], tmp[4300];
    elu_cache_path(c, key, ".bin", path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
    *evicted = 0;
    const int fd = mkstemp(tmp); /* O_EXCL, mode 0600 */
    if (fd < 0) {
        snprintf(why, why_size, "cannot create %s: %s", tmp, strerror(errno));
        return false;
    }
    const size_t dlen = strnlen(description, ELU_CACHE_MAX_DESCRIPTION);
    struct header h = {.format = ELU_CACHE_FORMAT, .kind = (uint32_t)kind,
                       .size = size, .description_len = (uint32_t)dlen};
    memcpy(h.magic, MAGIC, sizeof MAGIC);
    memcpy(h.key, key->bytes, sizeof h.key);
    XXH3_state_t *state = XXH3_createState();
    bool ok = state && XXH3_64bits_reset(state) == XXH_OK &&
              XXH3_64bits_update(state, description, dlen) == XXH_OK &&
              XXH3_64bits_update(state, payload, size) == XXH_OK;
    h.checksum = ok ? XXH3_64bits_digest(state) : 0;
    XXH3_freeState(state);
    /* No fsync. After a crash the rename may be on disk and the data not,
     * leaving the entry empty, short or with zeroed blocks; a reader
     * verifies every entry (magic, key, sizes, XXH3-64 of the rest) and
     * replaces such a one, so a crash costs a compile, never a wrong
     * kernel. An fsync would put a disk flush (up to hundreds of
     * milliseconds on a busy disk) in every compile's way to protect only
     * what a compile rebuilds. */
    ok = ok && (!c->shared || fchmod(fd, 0640) == 0) && write_all(fd, &h, sizeof h) &&
         write_all(fd, description, dlen) && write_all(fd, payload, size);
    const int err = errno;
    if (close(fd) != 0 || !ok || rename(tmp, path) != 0) {
        snprintf(why, why_size, "cannot write cache entry %s: %s", path,
                 strerror(ok ? errno : err));
        unlink(tmp);
        return false;
    }
    *evicted = elu_cache_evict(c, c->max_bytes, key);
    return true;
}

/* -------- the size cap -------- */

struct candidate {
    char name[40];
    uint64_t size;
    struct timespec used;
};

static bool is_entry_name(const char *name)
{
    if (strlen(name) != 36 || strcmp(name + 32, ".bin") != 0)
        return false;
    return strspn(name, "0123456789abcdef") == 32;
}

static int oldest_first(const void *a, const void *b)
{
    const struct candidate *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec)
        return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
    if (x->used.tv_nsec != y->used.tv_nsec)
        return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The entries of the directory open as d into *list (malloc'd), regular
 * files only: a temp file being written is never one of them. False when
 * out of memory. */
static bool list_entries(DIR *d, struct candidate **list, size_t *count,
                         uint64_t *total)
{
    size_t capacity = 0;
    *list = NULL;
    *count = 0;
    *total = 0;
    for (struct dirent *e; (e = readdir(d));) {
        struct stat st;
        if (!is_entry_name(e->d_name) ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        if (*count == capacity) {
            capacity = capacity ? 2 * capacity : 64;
            struct candidate *grown = realloc(*list, capacity * sizeof **list);
            if (!grown)
                return false;
            *list = grown;
        }
        struct candidate *cand = &(*list)[(*count)++];
        snprintf(cand->name, sizeof cand->name, "%s", e->d_name);
        cand->size = (uint64_t)st.st_size;
        cand->used = st.st_mtim;
        *total += cand->size;
    }
    return true;
}

/* Remove the least recently used of the `count` entries in list, sparing
 * keep_name, until at most max_bytes of `total` are left. False, with *why
 * set, when some could not be removed. */
static bool evict_oldest(const struct elu_cache *c, int dir_fd, struct candidate *list,
                         size_t count, uint64_t total, uint64_t max_bytes,
                         const char *keep_name, unsigned *evicted, char *why,
                         size_t why_size)
{
    qsort(list, count, sizeof *list, oldest_first);
    unsigned failed = 0;
    for (size_t i = 0; i < count && total > max_bytes; i++) {
        if (strcmp(list[i].name, keep_name) == 0)
            continue;
        if (unlinkat(dir_fd, list[i].name, 0) == 0) {
            (*evicted)++;
        } else if (errno != ENOENT) { /* ENOENT: another process evicted it first */
            if (failed++ == 0)
                snprintf(why, why_size, "cannot evict %s/%s: %s", c->dir, list[i].name,
                         strerror(errno));
            continue;
        }
        total -= list[i].size;
    }
    if (failed > 1 && why_size > 0) {
        const size_t used = strlen(why);
        snprintf(why + used, why_size - used, " (and %u more)", failed - 1);
    }
    return failed == 0;
}

bool elu_cache_evict_checked(const struct elu_cache *c, uint64_t max_bytes,
                             const struct elu_cache_key *keep, unsigned *evicted,
                             char *why, size_t why_size)
{
    char keep_name[4200] = "";
    if (keep) {
        elu_cache_path(c, keep, ".bin", keep_name, sizeof keep_name);
        memmove(keep_name, strrchr(keep_name, '/') + 1, 37);
    }
    *evicted = 0;
    DIR *d = opendir(c->dir);
    if (!d) {
        snprintf(why, why_size, "cannot read %s: %s", c->dir, strerror(errno));
        return false;
    }
    struct candidate *list;
    size_t count;
    uint64_t total;
    bool ok = list_entries(d, &list, &count, &total);
    if (!ok)
        snprintf(why, why_size, "out of memory listing %s", c->dir);
    else if (total > max_bytes)
        ok = evict_oldest(c, dirfd(d), list, count, total, max_bytes, keep_name, evicted,
                          why, why_size);
    closedir(d);
    free(list);
    return ok;
}

/* What elu_cache_put names its temp files: the entry's name, ".tmp." and
 * mkstemp's six characters. */
static bool is_temp_name(const char *name)
{
    return strlen(name) == 32 + strlen(".bin.tmp.XXXXXX") &&
           strspn(name, "0123456789abcdef") == 32 && strncmp(name + 32, ".bin.tmp.", 9) == 0;
}

/* Remove the temp files of c's directory that no writer is still writing:
 * a writer killed between creating its temp file and renaming it leaves
 * the file, which no reader opens and nothing else would remove. A live
 * writer's is as old as its write, milliseconds. */
static void remove_stale_temps(const struct elu_cache *c)
{
    DIR *d = opendir(c->dir);
    if (!d)
        return;
    const time_t now = time(NULL);
    for (struct dirent *e; (e = readdir(d));) {
        struct stat st;
        if (is_temp_name(e->d_name) &&
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(st.st_mode) && now - st.st_mtime > ELU_CACHE_STALE_TEMP_SECONDS)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

unsigned elu_cache_evict(const struct elu_cache *c, uint64_t max_bytes,
                         const struct elu_cache_key *keep)
{
    unsigned evicted;
    /* Best effort: what is left over is tried again after the next put. */
    remove_stale_temps(c);
    elu_cache_evict_checked(c, max_bytes, keep, &evicted, NULL, 0);
    return evicted;
}

/* -------- stampedes -------- */

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

int elu_cache_lock(const struct elu_cache *c, const struct elu_cache_key *key,
                   char *why, size_t why_size)
{
    char path[4200];
    elu_cache_path(c, key, ".lock", path, sizeof path);
    const int fd = open(path, O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                        c->shared ? 0640 : 0600);
    struct stat st;
    const char *bad = fd < 0 ? strerror(errno)
                      : fstat(fd, &st) != 0 ? strerror(errno)
                                            : untrusted_file(&st, c->shared);
    /* The monotonic clock: sleeps may run long, the clock may be set. */
    const uint64_t deadline = now_ms() + c->lock_timeout_ms;
    while (!bad) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return fd;
        if (errno != EWOULDBLOCK && errno != EINTR)
            bad = strerror(errno); /* e.g. ENOLCK on some network file systems */
        else if (now_ms() >= deadline)
            bad = "timed out waiting for another process";
        else
            nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    snprintf(why, why_size, "cannot lock %s: %s", path, bad);
    if (fd >= 0)
        close(fd);
    return -1;
}

void elu_cache_unlock(int fd)
{
    if (fd >= 0) {
        flock(fd, LOCK_UN);
        close(fd);
    }
}
