/* elu-cache: look after libelu's disk cache. See `elu-cache --help`. */
#include "cache.h"
#include "elu.h"

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

/* Exit codes. */
enum { OK = 0, FAILED = 1, USAGE = 2 };

/* A temp file younger than this may belong to a writer at work. */
#define STALE_TEMP_SECONDS 600

static const char HELP[] =
    "usage: elu-cache [--dir DIR] COMMAND [OPTIONS]\n"
    "\n"
    "Look after libelu's disk cache of compiled kernels. DIR defaults to\n"
    "$ELU_CACHE_DIR, else $XDG_CACHE_HOME/elu, else $HOME/.cache/elu.\n"
    "\n"
    "commands:\n"
    "  list                  one line per entry: key, kind, size, last use, what\n"
    "  stats                 entries, bytes, the size cap, leftovers\n"
    "  verify [--delete]     check every entry; exit 1 if any is bad (--delete\n"
    "                        removes those)\n"
    "  trim [--max-bytes N]  evict least recently used entries down to N bytes\n"
    "                        (default: $ELU_CACHE_MAX_BYTES or 256 MiB), and\n"
    "                        remove stale temp files and unused lock files\n"
    "  clear                 remove every entry, temp and lock file\n"
    "  warm --sm SM [--dtype f32,f64,f16,bf16] [--alpha A] [--scale S]\n"
    "       [--input-scale I] [--selu | --celu A]\n"
    "                        compile ahead of time into the cache, with NVRTC\n"
    "                        only: no GPU needed (for images and CI)\n"
    "\n"
    "exit status: 0 done, 1 failed (or bad entries found), 2 usage error\n";

static int usage(const char *what)
{
    fprintf(stderr, "elu-cache: %s (see elu-cache --help)\n", what);
    return USAGE;
}

/* -------- walking the directory -------- */

enum file_kind { ENTRY, TEMP, LOCK, OTHER };

static enum file_kind kind_of(const char *name)
{
    const size_t hex = strspn(name, "0123456789abcdef");
    if (hex != 32)
        return OTHER;
    if (strcmp(name + 32, ".bin") == 0)
        return ENTRY;
    if (strcmp(name + 32, ".lock") == 0)
        return LOCK;
    return strncmp(name + 32, ".bin.tmp.", 9) == 0 ? TEMP : OTHER;
}

typedef int (*visit_fn)(const struct elu_cache *c, const char *name,
                        enum file_kind kind, const struct stat *st, void *arg);

/* Call visit for every file of ours in the directory, in name order. */
static int walk(const struct elu_cache *c, visit_fn visit, void *arg)
{
    struct dirent **names;
    const int n = scandir(c->dir, &names, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "elu-cache: cannot read %s: %s\n", c->dir, strerror(errno));
        return FAILED;
    }
    int status = OK;
    for (int i = 0; i < n; i++) {
        const enum file_kind kind = kind_of(names[i]->d_name);
        char path[4400];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", c->dir, names[i]->d_name);
        if (kind != OTHER && lstat(path, &st) == 0) {
            const int r = visit(c, names[i]->d_name, kind, &st, arg);
            status = r > status ? r : status;
        }
        free(names[i]);
    }
    free(names);
    return status;
}

/* Read and verify an entry; NULL if good, else what is wrong. */
static const char *check(const struct elu_cache *c, const char *name, void **data,
                         struct elu_cache_entry *e, char *why, size_t why_size)
{
    char path[4400];
    size_t len;
    bool missing;
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    *data = elu_cache_read(c, path, &len, &missing, why, why_size);
    if (!*data)
        return why;
    const char *bad = elu_cache_parse(*data, len, NULL, e);
    char hex[33];
    for (int i = 0; !bad && i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", e->key.bytes[i]);
    if (!bad && strncmp(hex, name, 32) != 0)
        bad = "its key is not its name";
    return bad;
}

static void format_time(const struct timespec *t, char *buf, size_t size)
{
    struct tm tm;
    localtime_r(&t->tv_sec, &tm);
    strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
}

/* -------- commands -------- */

static int list_one(const struct elu_cache *c, const char *name, enum file_kind kind,
                    const struct stat *st, void *arg)
{
    (void)arg;
    if (kind != ENTRY)
        return OK;
    void *data;
    struct elu_cache_entry e;
    char why[256], when[32];
    const char *bad = check(c, name, &data, &e, why, sizeof why);
    format_time(&st->st_mtim, when, sizeof when);
    if (bad)
        printf("%.32s  BAD    %9lld  %s  %s\n", name, (long long)st->st_size, when, bad);
    else
        printf("%.32s  %-5s  %9lld  %s  %.*s\n", name,
               e.kind == ELU_BINARY_CUBIN ? "cubin" : e.kind == ELU_BINARY_PTX ? "ptx" : "tune", (long long)st->st_size,
               when, (int)e.description_len, e.description);
    free(data);
    return OK;
}

struct totals {
    long entries, temps, locks;
    long long bytes;
    struct timespec oldest, newest;
};

static int count_one(const struct elu_cache *c, const char *name, enum file_kind kind,
                     const struct stat *st, void *arg)
{
    (void)c;
    (void)name;
    struct totals *t = arg;
    if (kind == TEMP)
        t->temps++;
    if (kind == LOCK)
        t->locks++;
    if (kind != ENTRY)
        return OK;
    if (t->entries++ == 0 || st->st_mtim.tv_sec < t->oldest.tv_sec)
        t->oldest = st->st_mtim;
    if (st->st_mtim.tv_sec >= t->newest.tv_sec)
        t->newest = st->st_mtim;
    t->bytes += st->st_size;
    return OK;
}

static int stats(const struct elu_cache *c)
{
    struct totals t = {0};
    const int status = walk(c, count_one, &t);
    char oldest[32] = "-", newest[32] = "-";
    if (t.entries) {
        format_time(&t.oldest, oldest, sizeof oldest);
        format_time(&t.newest, newest, sizeof newest);
    }
    printf("directory:   %s%s\n", c->dir, c->shared ? " (shared)" : "");
    printf("entries:     %ld\n", t.entries);
    printf("bytes:       %lld\n", t.bytes);
    printf("cap:         %llu bytes\n", (unsigned long long)c->max_bytes);
    printf("last used:   oldest %s, newest %s\n", oldest, newest);
    printf("temp files:  %ld\nlock files:  %ld\n", t.temps, t.locks);
    return status;
}

static int verify_one(const struct elu_cache *c, const char *name, enum file_kind kind,
                      const struct stat *st, void *arg)
{
    (void)st;
    if (kind != ENTRY)
        return OK;
    void *data;
    struct elu_cache_entry e;
    char why[256];
    const char *bad = check(c, name, &data, &e, why, sizeof why);
    free(data);
    if (!bad)
        return OK;
    const bool delete = *(const bool *)arg;
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    printf("%s: %s%s\n", path, bad, delete && unlink(path) == 0 ? " (deleted)" : "");
    return FAILED;
}

/* Remove a lock file nobody holds (taking it ourselves first). A process
 * that opened it just before may still lock the old file while another
 * makes a new one: then a kernel is compiled twice, nothing worse. */
static void remove_unused_lock(const char *path)
{
    const int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
        unlink(path);
    if (fd >= 0)
        close(fd);
}

struct sweep {
    bool everything; /* clear: entries too, and temp files of any age */
    long removed;
};

static int sweep_one(const struct elu_cache *c, const char *name, enum file_kind kind,
                     const struct stat *st, void *arg)
{
    struct sweep *s = arg;
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    const bool stale = time(NULL) - st->st_mtim.tv_sec > STALE_TEMP_SECONDS;
    if (kind == LOCK) {
        remove_unused_lock(path);
        return OK;
    }
    if ((kind == TEMP && (stale || s->everything)) || (kind == ENTRY && s->everything)) {
        if (unlink(path) != 0) {
            fprintf(stderr, "elu-cache: cannot remove %s: %s\n", path, strerror(errno));
            return FAILED;
        }
        s->removed++;
    }
    return OK;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 10);
    *out = v;
    return *s && *end == '\0' && errno == 0;
}

static int trim(const struct elu_cache *c, int argc, char **argv)
{
    uint64_t max = c->max_bytes;
    if (argc == 2 && strcmp(argv[0], "--max-bytes") == 0) {
        if (!parse_u64(argv[1], &max))
            return usage("--max-bytes takes a number of bytes");
    } else if (argc != 0) {
        return usage("trim takes only --max-bytes N");
    }
    const unsigned evicted = elu_cache_evict(c, max, NULL);
    struct sweep s = {false, 0};
    const int status = walk(c, sweep_one, &s);
    printf("evicted %u entries; removed %ld stale temp files\n", evicted, s.removed);
    return status;
}

static int clear(const struct elu_cache *c)
{
    struct sweep s = {true, 0};
    const int status = walk(c, sweep_one, &s);
    printf("removed %ld files\n", s.removed);
    return status;
}

/* -------- warm -------- */

struct warm_request {
    int sm;
    char dtypes[64];
    double alpha, scale, input_scale;
};

static int parse_warm(int argc, char **argv, struct warm_request *w)
{
    *w = (struct warm_request){0, "f32", 1.0, 1.0, 1.0};
    for (int i = 0; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (strcmp(opt, "--selu") == 0) {
            const elu_params p = elu_params_selu(ELU_F32);
            w->alpha = p.alpha;
            w->scale = p.scale;
            w->input_scale = 1.0;
            continue;
        }
        if (!val)
            return usage("an option of warm lacks its value");
        i++;
        if (strcmp(opt, "--dtype") == 0) {
            snprintf(w->dtypes, sizeof w->dtypes, "%s", val);
            continue;
        }
        if (strcmp(opt, "--sm") == 0)
            w->sm = (int)strtol(val, &end, 10);
        else if (strcmp(opt, "--alpha") == 0)
            w->alpha = strtod(val, &end);
        else if (strcmp(opt, "--scale") == 0)
            w->scale = strtod(val, &end);
        else if (strcmp(opt, "--input-scale") == 0)
            w->input_scale = strtod(val, &end);
        else if (strcmp(opt, "--celu") == 0) {
            w->alpha = strtod(val, &end);
            w->scale = 1.0;
            w->input_scale = 1.0 / w->alpha;
        } else
            return usage("unknown option of warm");
        if (!end || *end != '\0')
            return usage("a value of warm is not a number");
    }
    return w->sm > 0 ? OK : usage("warm needs --sm, e.g. --sm 90");
}

static int warm(const struct elu_cache *c, int argc, char **argv)
{
    struct warm_request w;
    const int parsed = parse_warm(argc, argv, &w);
    if (parsed != OK)
        return parsed;
    elu_options o;
    elu_options_default(&o);
    o.backend = ELU_BACKEND_CPU;
    o.cache_dir = c->dir;
    elu_ctx *ctx;
    if (elu_ctx_create(&ctx, &o) != ELU_OK)
        return FAILED;
    static const char *const names[] = {"f32", "f64", "f16", "bf16"};
    int status = OK;
    for (char *save = NULL, *name = strtok_r(w.dtypes, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        int t = 0;
        while (t < 4 && strcmp(name, names[t]) != 0)
            t++;
        if (t == 4) {
            status = usage("--dtype takes f32, f64, f16 or bf16, comma-separated");
            break;
        }
        const elu_params p = {(elu_dtype)t, w.alpha, w.scale, w.input_scale};
        const elu_status s = elu_precompile(ctx, &p, w.sm);
        if (s == ELU_OK)
            printf("%s sm_%d: ready\n", name, w.sm);
        else
            fprintf(stderr, "elu-cache: %s sm_%d: %s: %s\n", name, w.sm,
                    elu_status_str(s), elu_ctx_last_error(ctx));
        status = s == ELU_OK ? status : FAILED;
    }
    elu_ctx_destroy(ctx);
    return status;
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    int i = 1;
    if (i < argc && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)) {
        fputs(HELP, stdout);
        return OK;
    }
    if (i + 1 < argc && strcmp(argv[i], "--dir") == 0) {
        dir = argv[i + 1];
        i += 2;
    }
    if (i >= argc)
        return usage("no command");
    const char *command = argv[i++];
    struct elu_cache c;
    char why[4400];
    if (!elu_cache_open(&c, dir, why, sizeof why)) {
        fprintf(stderr, "elu-cache: %s\n", why);
        return FAILED;
    }
    if (strcmp(command, "list") == 0 && i == argc)
        return walk(&c, list_one, NULL);
    if (strcmp(command, "stats") == 0 && i == argc)
        return stats(&c);
    if (strcmp(command, "verify") == 0) {
        bool delete = i < argc && strcmp(argv[i], "--delete") == 0;
        if (i + delete == argc)
            return walk(&c, verify_one, &delete);
    }
    if (strcmp(command, "trim") == 0)
        return trim(&c, argc - i, argv + i);
    if (strcmp(command, "clear") == 0 && i == argc)
        return clear(&c);
    if (strcmp(command, "warm") == 0)
        return warm(&c, argc - i, argv + i);
    return usage("unknown command or stray arguments");
}
