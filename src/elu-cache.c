/* elu-cache: look after libelu's disk cache. See `elu-cache --help`. */
#include "cache.h"
#include "elu-cache-json.h"
#include "elu.h"
#include "env.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Exit codes, as HELP documents them. */
enum { OK = 0, FAILED = 1, USAGE = 2, NO_CACHE = 3 };

static const char HELP[] =
    "usage: elu-cache [--dir DIR] COMMAND [OPTIONS]\n"
    "       elu-cache --help | --version\n"
    "\n"
    "Look after libelu's disk cache of compiled kernels. DIR defaults to\n"
    "$ELU_CACHE_DIR, else $XDG_CACHE_HOME/elu, else $HOME/.cache/elu; only\n"
    "warm creates it. Options go before or after COMMAND, each at most once,\n"
    "as --option VALUE or --option=VALUE.\n"
    "\n"
    "commands:\n"
    "  list [--json]         one line per entry: key, kind, size, last use, what\n"
    "                        (kind BAD: what is wrong; ?: why it cannot be read)\n"
    "  stats [--json]        entries, bytes, the size cap, leftovers\n"
    "  verify [--delete]     check every entry; exit 1 if any is bad or cannot\n"
    "                        be read (--delete removes the bad ones; one that\n"
    "                        cannot be read may be good, and stays)\n"
    "  trim [--max-bytes N]  evict least recently used entries down to N bytes\n"
    "                        (default: $ELU_CACHE_MAX_BYTES or 256 MiB), and\n"
    "                        remove stale temp files, unused lock files, and\n"
    "                        links and empty directories (see below)\n"
    "  clear                 remove every entry, temp and lock file\n"
    "  warm --sm SM [--dtype f32,f64,f16,bf16] [--alpha A] [--scale S]\n"
    "       [--input-scale I] [--selu | --celu A]\n"
    "                        compile ahead of time into the cache, with NVRTC\n"
    "                        only: no GPU needed (for images and CI). SM is\n"
    "                        10 * major + minor, e.g. 90 for sm_90; --selu and\n"
    "                        --celu set all three constants. For each dtype\n"
    "                        it says whether it compiled the entry or found\n"
    "                        it in the cache\n"
    "\n"
    "--json: one JSON document on stdout instead (its fields: elu-cache(1)),\n"
    "in UTF-8: each run of bytes that is not UTF-8 in a description or path\n"
    "comes out as U+FFFD. --version: the version of libelu.\n"
    "\n"
    "A symbolic link or an empty directory under a cache file's name is in\n"
    "libelu's way: verify --delete, trim and clear remove it (a link, never\n"
    "what it points to). An invalid libelu variable (e.g. ELU_CACHE_MAX_BYTES)\n"
    "is warned of on stderr, and its default holds, as in libelu.\n"
    "\n"
    "exit status:\n"
    "  0  done\n"
    "  1  something could not be done (stderr says what), or verify found\n"
    "     bad entries\n"
    "  2  usage error: nothing was done\n"
    "  3  the cache directory does not exist: nothing was done\n";

__attribute__((format(printf, 1, 0))) static void complain(const char *format, va_list ap)
{
    fputs("elu-cache: ", stderr);
    vfprintf(stderr, format, ap);
}

__attribute__((format(printf, 1, 2))) static int usage(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    complain(format, ap);
    va_end(ap);
    fputs(" (see elu-cache --help)\n", stderr);
    return USAGE;
}

__attribute__((format(printf, 1, 2))) static int failure(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    complain(format, ap);
    va_end(ap);
    fputc('\n', stderr);
    return FAILED;
}

static int worse(int a, int b)
{
    return a > b ? a : b;
}

/* -------- the command line -------- */

enum command { LIST, STATS, VERIFY, TRIM, CLEAR, WARM, COMMAND_COUNT };

static const char *const COMMAND_NAMES[COMMAND_COUNT] = {"list", "stats", "verify",
                                                         "trim", "clear", "warm"};

enum option { DIR_OPT, JSON, DELETE, MAX_BYTES, SM, DTYPE, ALPHA, SCALE, INPUT_SCALE,
              SELU, CELU, OPTION_COUNT };

#define ALL_COMMANDS ((1u << COMMAND_COUNT) - 1)

static const struct {
    const char *name;
    bool takes_value;
    unsigned commands; /* a bit for each command that takes it */
} OPTIONS[OPTION_COUNT] = {
    [DIR_OPT] = {"--dir", true, ALL_COMMANDS},
    [JSON] = {"--json", false, (1u << LIST) | (1u << STATS)},
    [DELETE] = {"--delete", false, 1u << VERIFY},
    [MAX_BYTES] = {"--max-bytes", true, 1u << TRIM},
    [SM] = {"--sm", true, 1u << WARM},
    [DTYPE] = {"--dtype", true, 1u << WARM},
    [ALPHA] = {"--alpha", true, 1u << WARM},
    [SCALE] = {"--scale", true, 1u << WARM},
    [INPUT_SCALE] = {"--input-scale", true, 1u << WARM},
    [SELU] = {"--selu", false, 1u << WARM},
    [CELU] = {"--celu", true, 1u << WARM},
};

/* What parse_command_line returns for --help and --version, which are
 * answered wherever they stand, whatever else the command line holds. */
#define HELP_ASKED (-1)
#define VERSION_ASKED (-2)

struct command_line {
    enum command command; /* COMMAND_COUNT: none given */
    const char *value[OPTION_COUNT]; /* NULL: not given; a flag's is its name */
};

static enum command command_named(const char *name)
{
    enum command c = 0;
    while (c < COMMAND_COUNT && strcmp(name, COMMAND_NAMES[c]) != 0)
        c++;
    return c;
}

/* Take argv[*i], an option, with its value: after '=', or the next argument. */
static int take_option(int argc, char **argv, int *i, struct command_line *cl)
{
    const char *arg = argv[*i], *equals = strchr(arg, '=');
    const size_t name_len = equals ? (size_t)(equals - arg) : strlen(arg);
    enum option o = 0;
    while (o < OPTION_COUNT && (strncmp(arg, OPTIONS[o].name, name_len) != 0 ||
                                OPTIONS[o].name[name_len] != '\0'))
        o++;
    if (o == OPTION_COUNT)
        return usage("unknown option %s", arg);
    const char *name = OPTIONS[o].name;
    if (cl->value[o])
        return usage("%s given twice", name);
    if (!OPTIONS[o].takes_value && equals)
        return usage("%s takes no value", name);
    if (OPTIONS[o].takes_value && !equals && *i + 1 == argc)
        return usage("%s needs a value", name);
    cl->value[o] = !OPTIONS[o].takes_value ? name : equals ? equals + 1 : argv[++*i];
    return OK;
}

/* Everything but the values' contents, which each command reads. */
static int parse_command_line(int argc, char **argv, struct command_line *cl)
{
    *cl = (struct command_line){.command = COMMAND_COUNT};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int status = OK;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
            return HELP_ASKED;
        if (strcmp(arg, "--version") == 0)
            return VERSION_ASKED;
        if (arg[0] == '-')
            status = take_option(argc, argv, &i, cl);
        else if (cl->command != COMMAND_COUNT)
            status = usage("unexpected argument %s", arg);
        else if ((cl->command = command_named(arg)) == COMMAND_COUNT)
            status = usage("unknown command %s", arg);
        if (status != OK)
            return status;
    }
    if (cl->command == COMMAND_COUNT)
        return usage("no command");
    for (enum option o = 0; o < OPTION_COUNT; o++)
        if (cl->value[o] && !(OPTIONS[o].commands & (1u << cl->command)))
            return usage("%s is not an option of %s", OPTIONS[o].name,
                         COMMAND_NAMES[cl->command]);
    /* An empty --dir is most likely an unset variable: the default
     * directory in its place could be the wrong one to clear. */
    if (cl->value[DIR_OPT] && !*cl->value[DIR_OPT])
        return usage("--dir is empty (leave it out for the default directory)");
    return OK;
}

/* Every numeric argument is read here, so that all refuse alike: anything
 * but the whole argument in plain decimal (no blanks, no plus, no minus on
 * a whole number, no hex, inf or nan), a real that overflows or underflows,
 * a whole number outside [min, max]. */
static bool plain_decimal(const char *text, bool real)
{
    const char *digits = text + (real && text[0] == '-');
    const bool starts_well = isdigit((unsigned char)digits[0]) || (real && digits[0] == '.');
    return starts_well &&
           strspn(digits, real ? "0123456789.eE+-" : "0123456789") == strlen(digits);
}

static int parse_whole(const char *option, const char *text, uint64_t min, uint64_t max,
                       uint64_t *out)
{
    if (!plain_decimal(text, false))
        return usage("%s takes a whole number, not \"%s\"", option, text);
    errno = 0;
    const unsigned long long value = strtoull(text, NULL, 10);
    if (errno == ERANGE || value < min || value > max)
        return usage("%s takes %" PRIu64 " to %" PRIu64 ", not %s", option, min, max, text);
    *out = value;
    return OK;
}

static int parse_real(const char *option, const char *text, double *out)
{
    char *end = NULL;
    errno = 0;
    const double value = plain_decimal(text, true) ? strtod(text, &end) : 0;
    if (!end || *end != '\0')
        return usage("%s takes a decimal number, not \"%s\"", option, text);
    if (errno == ERANGE)
        return usage("%s %s is beyond the range of a double", option, text);
    *out = value;
    return OK;
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

/* The directory's names, in name order. */
struct listing {
    struct dirent **names;
    int count;
};

static int scan(const struct elu_cache *c, struct listing *l)
{
    l->count = scandir(c->dir, &l->names, NULL, alphasort);
    return l->count < 0 ? failure("cannot read %s: %s", c->dir, strerror(errno)) : OK;
}

/* Call visit for everything in l named as ours, with its lstat (not what a
 * symbolic link points to); l is used up. */
static int visit_all(const struct elu_cache *c, struct listing *l, visit_fn visit,
                     void *arg)
{
    int status = OK;
    for (int i = 0; i < l->count; i++) {
        const enum file_kind kind = kind_of(l->names[i]->d_name);
        char path[4400];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", c->dir, l->names[i]->d_name);
        if (kind != OTHER && lstat(path, &st) == 0)
            status = worse(status, visit(c, l->names[i]->d_name, kind, &st, arg));
        else if (kind != OTHER && errno != ENOENT) /* ENOENT: another process removed it */
            status = worse(status, failure("cannot stat %s: %s", path, strerror(errno)));
        free(l->names[i]);
    }
    free(l->names);
    return status;
}

static int walk(const struct elu_cache *c, visit_fn visit, void *arg)
{
    struct listing l;
    const int status = scan(c, &l);
    return status == OK ? visit_all(c, &l, visit, arg) : status;
}

/* Remove what was found at path as st: a file, a symbolic link (not what it
 * points to) or an empty directory, unless replaced since. Whether it is
 * gone; says why not. */
static bool remove_found(const char *path, const struct stat *st)
{
    char why[256];
    if (elu_cache_remove(path, st, why, sizeof why))
        return true;
    failure("cannot remove %s: %s", path, why);
    return false;
}

/* The key that an entry's name spells (kind_of has checked its digits). */
static struct elu_cache_key key_named(const char *name)
{
    struct elu_cache_key key;
    for (int i = 0; i < 16; i++)
        sscanf(name + 2 * i, "%2hhx", &key.bytes[i]);
    return key;
}

/* Read and verify the entry `name` with libelu's own checks: HIT with *e
 * set, else *why says what is wrong (MISS: removed since it was listed).
 * f->data is to be freed. */
static enum elu_cache_result check(const struct elu_cache *c, const char *name,
                                   struct elu_cache_file *f, struct elu_cache_entry *e,
                                   char *why, size_t why_size)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    const struct elu_cache_key key = key_named(name);
    return elu_cache_load(c, path, &key, f, e, why, why_size);
}

/* Last use, for people in local time; for programs in UTC (ISO 8601). */
static void format_time(const struct timespec *t, bool utc, char *buf, size_t size)
{
    struct tm tm;
    if (!(utc ? gmtime_r(&t->tv_sec, &tm) : localtime_r(&t->tv_sec, &tm)))
        snprintf(buf, size, "?"); /* a year beyond an int */
    else
        strftime(buf, size, utc ? "%Y-%m-%dT%H:%M:%SZ" : "%Y-%m-%d %H:%M:%S", &tm);
}

/* -------- JSON members -------- */

/* The string s (len bytes), or null when s is NULL. */
static void json_text(const char *s, size_t len)
{
    if (s)
        json_string(stdout, s, len);
    else
        fputs("null", stdout);
}

static void json_cstring(const char *s)
{
    json_text(s, s ? strlen(s) : 0);
}

/* The members `name` (ISO 8601, UTC) and `name`_epoch (seconds since the
 * epoch) for t, separated by sep; both null when t is NULL. */
static void json_time(const char *name, const struct timespec *t, const char *sep)
{
    char when[32];
    if (!t) {
        printf("\"%s\": null%s\"%s_epoch\": null", name, sep, name);
        return;
    }
    format_time(t, true, when, sizeof when);
    printf("\"%s\": \"%s\"%s\"%s_epoch\": %lld", name, when, sep, name, (long long)t->tv_sec);
}

/* -------- list, stats, verify -------- */

/* An entry as list found it. */
struct listed {
    const char *name;
    const struct stat *st; /* its lstat */
    enum elu_cache_result found; /* check()'s verdict */
    struct elu_cache_entry e; /* when found is ELU_CACHE_HIT */
    char why[256]; /* otherwise */
};

static const char *kind_name(enum elu_binary_kind kind)
{
    static const char *const names[] = {[ELU_BINARY_CUBIN] = "cubin", [ELU_BINARY_PTX] = "ptx",
                                        [ELU_BINARY_TUNING] = "tune", [ELU_BINARY_TABLE] = "table"};
    return names[kind];
}

static void list_text(const struct listed *x)
{
    char when[32], size[24] = "-";
    format_time(&x->st->st_mtim, false, when, sizeof when);
    if (S_ISREG(x->st->st_mode))
        snprintf(size, sizeof size, "%lld", (long long)x->st->st_size);
    if (x->found == ELU_CACHE_HIT)
        printf("%.32s  %-5s  %9s  %s  %.*s\n", x->name, kind_name(x->e.kind), size, when,
               (int)x->e.description_len, x->e.description);
    else
        printf("%.32s  %-5s  %9s  %s  %s\n", x->name,
               x->found == ELU_CACHE_REJECTED ? "BAD" : "?", size, when, x->why);
}

/* Something else under an entry's name is in the way, whatever it holds. */
static const char *state_of(const struct listed *x)
{
    if (!S_ISREG(x->st->st_mode))
        return "not regular";
    return x->found == ELU_CACHE_HIT        ? "ok"
           : x->found == ELU_CACHE_REJECTED ? "bad"
                                            : "unreadable";
}

/* An element of list --json's array, on a line of its own. */
static void list_json(const struct listed *x, bool first)
{
    const bool ok = x->found == ELU_CACHE_HIT;
    printf("%s  {\"key\": \"%.32s\", \"kind\": ", first ? "\n" : ",\n", x->name);
    json_cstring(ok ? kind_name(x->e.kind) : NULL);
    if (S_ISREG(x->st->st_mode))
        printf(", \"size\": %lld, ", (long long)x->st->st_size);
    else
        fputs(", \"size\": null, ", stdout);
    json_time("last_use", &x->st->st_mtim, ", ");
    printf(", \"state\": \"%s\", \"description\": ", state_of(x));
    json_text(ok ? x->e.description : NULL, x->e.description_len);
    fputs(", \"problem\": ", stdout);
    json_cstring(ok ? NULL : x->why);
    putchar('}');
}

struct list_run {
    bool json;
    long printed;
};

static int list_one(const struct elu_cache *c, const char *name, enum file_kind kind,
                    const struct stat *st, void *arg)
{
    struct list_run *run = arg;
    if (kind != ENTRY)
        return OK;
    struct elu_cache_file f;
    struct listed x = {.name = name, .st = st};
    x.found = check(c, name, &f, &x.e, x.why, sizeof x.why);
    if (x.found != ELU_CACHE_MISS) { /* MISS: removed since it was listed */
        if (run->json)
            list_json(&x, run->printed++ == 0);
        else
            list_text(&x);
    }
    free(f.data);
    return OK;
}

/* Nothing is printed, not even an empty array, unless the directory can
 * be read. */
static int list(const struct elu_cache *c, bool json)
{
    struct listing l;
    if (scan(c, &l) != OK)
        return FAILED;
    struct list_run run = {json, 0};
    if (json)
        putchar('[');
    const int status = visit_all(c, &l, list_one, &run);
    if (json)
        fputs(run.printed ? "\n]\n" : "]\n", stdout);
    return status;
}

struct totals {
    long entries, temps, locks, not_regular;
    long long bytes;
    struct timespec oldest, newest;
};

static int count_one(const struct elu_cache *c, const char *name, enum file_kind kind,
                     const struct stat *st, void *arg)
{
    (void)c;
    (void)name;
    struct totals *t = arg;
    if (!S_ISREG(st->st_mode))
        t->not_regular++;
    else if (kind == TEMP)
        t->temps++;
    else if (kind == LOCK)
        t->locks++;
    if (kind != ENTRY || !S_ISREG(st->st_mode))
        return OK;
    if (t->entries++ == 0 || st->st_mtim.tv_sec < t->oldest.tv_sec)
        t->oldest = st->st_mtim;
    if (st->st_mtim.tv_sec >= t->newest.tv_sec)
        t->newest = st->st_mtim;
    t->bytes += st->st_size;
    return OK;
}

static void stats_text(const struct elu_cache *c, const struct totals *t)
{
    char oldest[32] = "-", newest[32] = "-";
    if (t->entries) {
        format_time(&t->oldest, false, oldest, sizeof oldest);
        format_time(&t->newest, false, newest, sizeof newest);
    }
    printf("directory:   %s%s\n", c->dir, c->shared ? " (shared)" : "");
    printf("entries:     %ld\n", t->entries);
    printf("bytes:       %lld\n", t->bytes);
    printf("cap:         %llu bytes\n", (unsigned long long)c->max_bytes);
    printf("last used:   oldest %s, newest %s\n", oldest, newest);
    printf("temp files:  %ld\nlock files:  %ld\n", t->temps, t->locks);
    printf("not regular: %ld (directories, links... under a cache file's name)\n",
           t->not_regular);
}

/* The numbers of stats_text, a member a line. */
static void stats_json(const struct elu_cache *c, const struct totals *t)
{
    fputs("{\n  \"directory\": ", stdout);
    json_cstring(c->dir);
    printf(",\n  \"shared\": %s,\n  \"entries\": %ld,\n  \"bytes\": %lld,\n"
           "  \"cap\": %llu,\n  ",
           c->shared ? "true" : "false", t->entries, t->bytes,
           (unsigned long long)c->max_bytes);
    json_time("last_use_oldest", t->entries ? &t->oldest : NULL, ",\n  ");
    fputs(",\n  ", stdout);
    json_time("last_use_newest", t->entries ? &t->newest : NULL, ",\n  ");
    printf(",\n  \"temp_files\": %ld,\n  \"lock_files\": %ld,\n  \"not_regular\": %ld\n}\n",
           t->temps, t->locks, t->not_regular);
}

static int stats(const struct elu_cache *c, bool json)
{
    struct listing l;
    struct totals t = {0};
    if (scan(c, &l) != OK)
        return FAILED;
    const int status = visit_all(c, &l, count_one, &t);
    (json ? stats_json : stats_text)(c, &t);
    return status;
}

/* Only what was read and proven bad goes: an entry that could not be read
 * (no descriptor or memory left, no permission, an I/O error) may be good. */
static int verify_one(const struct elu_cache *c, const char *name, enum file_kind kind,
                      const struct stat *st, void *arg)
{
    (void)st;
    if (kind != ENTRY)
        return OK;
    struct elu_cache_file f;
    struct elu_cache_entry e;
    char why[256], path[4400];
    const enum elu_cache_result found = check(c, name, &f, &e, why, sizeof why);
    free(f.data);
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    if (found == ELU_CACHE_UNREADABLE)
        return failure("cannot read %s: %s", path, why);
    if (found != ELU_CACHE_REJECTED)
        return OK;
    const bool deleted = *(const bool *)arg && remove_found(path, &f.st);
    printf("%s: %s%s\n", path, why, deleted ? " (deleted)" : "");
    return FAILED;
}

/* -------- trim, clear -------- */

struct sweep {
    bool everything; /* clear: entries too, temp files of any age, every lock */
    long removed;
};

static int sweep_remove(const char *path, const struct stat *st, struct sweep *s)
{
    if (!remove_found(path, st))
        return FAILED;
    s->removed++;
    return OK;
}

/* Remove a lock file that nobody holds, taking it first. A process that
 * opened it just before may still lock the old file while another makes a
 * new one: then a kernel is compiled twice, nothing worse. A lock in use
 * is left: by trim as it should be, by clear as a failure. */
static int sweep_lock(const char *path, const struct stat *st, struct sweep *s)
{
    const int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? OK
                               : failure("cannot open lock file %s: %s", path, strerror(errno));
    int status;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
        status = sweep_remove(path, st, s);
    else if (errno != EWOULDBLOCK)
        status = failure("cannot take lock file %s: %s", path, strerror(errno));
    else
        status = s->everything ? failure("lock file %s is in use: left", path) : OK;
    close(fd);
    return status;
}

static int sweep_one(const struct elu_cache *c, const char *name, enum file_kind kind,
                     const struct stat *st, void *arg)
{
    struct sweep *s = arg;
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    /* libelu makes and locks regular files only: anything else under their
     * names is in its way (an entry that is a link or directory is rejected
     * on every read, and cannot be written over). */
    if (!S_ISREG(st->st_mode))
        return sweep_remove(path, st, s);
    if (kind == LOCK)
        return sweep_lock(path, st, s);
    const bool stale = time(NULL) - st->st_mtim.tv_sec > ELU_CACHE_STALE_TEMP_SECONDS;
    return s->everything || (kind == TEMP && stale) ? sweep_remove(path, st, s) : OK;
}

/* Nothing is done, nor printed, unless the directory can be read. */
static int trim(const struct elu_cache *c, uint64_t max_bytes)
{
    struct listing l;
    if (scan(c, &l) != OK)
        return FAILED;
    unsigned evicted;
    char why[4600];
    int status = OK;
    if (!elu_cache_evict_checked(c, max_bytes, NULL, &evicted, why, sizeof why))
        status = failure("%s", why);
    struct sweep s = {false, 0};
    status = worse(status, visit_all(c, &l, sweep_one, &s));
    printf("evicted %u entries; removed %ld leftovers (stale temp files, unused locks, "
           "links and empty directories)\n", evicted, s.removed);
    return status;
}

static int clear(const struct elu_cache *c)
{
    struct listing l;
    if (scan(c, &l) != OK)
        return FAILED;
    struct sweep s = {true, 0};
    const int status = visit_all(c, &l, sweep_one, &s);
    printf("removed %ld files\n", s.removed);
    return status;
}

/* -------- warm -------- */

static const char *const DTYPE_NAMES[] = {
    [ELU_F32] = "f32", [ELU_F64] = "f64", [ELU_F16] = "f16", [ELU_BF16] = "bf16"};
#define DTYPE_COUNT (sizeof DTYPE_NAMES / sizeof *DTYPE_NAMES)

struct warm_request {
    uint64_t sm;
    elu_dtype dtypes[DTYPE_COUNT]; /* in the order given */
    size_t dtype_count;
    elu_params params; /* for every dtype */
};

/* "f32,bf16": known names, each once, none empty. */
static int parse_dtypes(const char *list, struct warm_request *w)
{
    for (const char *item = list;; item++) {
        const size_t len = strcspn(item, ",");
        size_t t = 0;
        while (t < DTYPE_COUNT &&
               (strncmp(item, DTYPE_NAMES[t], len) != 0 || DTYPE_NAMES[t][len] != '\0'))
            t++;
        if (t == DTYPE_COUNT)
            return usage("--dtype takes f32, f64, f16 or bf16, comma-separated, not "
                         "\"%.*s\"", (int)len, item);
        for (size_t i = 0; i < w->dtype_count; i++)
            if (w->dtypes[i] == (elu_dtype)t)
                return usage("--dtype names %s twice", DTYPE_NAMES[t]);
        w->dtypes[w->dtype_count++] = (elu_dtype)t;
        item += len;
        if (*item == '\0')
            return OK;
    }
}

static int parse_constants(const struct command_line *cl, elu_params *p)
{
    const char *const *value = cl->value;
    if ((value[SELU] || value[CELU]) &&
        (value[ALPHA] || value[SCALE] || value[INPUT_SCALE] || (value[SELU] && value[CELU])))
        return usage("--selu and --celu set all three constants: they go with none of "
                     "--alpha, --scale, --input-scale, nor with each other");
    *p = value[SELU] ? elu_params_selu(ELU_F32) : elu_params_elu(ELU_F32, 1.0);
    double celu_alpha = 1.0;
    const struct {
        enum option option;
        double *to;
    } reals[] = {{ALPHA, &p->alpha}, {SCALE, &p->scale}, {INPUT_SCALE, &p->input_scale},
                 {CELU, &celu_alpha}};
    for (size_t i = 0; i < sizeof reals / sizeof *reals; i++) {
        const enum option o = reals[i].option;
        if (value[o] && parse_real(OPTIONS[o].name, value[o], reals[i].to) != OK)
            return USAGE;
    }
    if (value[CELU])
        *p = elu_params_celu(ELU_F32, celu_alpha);
    return OK;
}

static int cpu_ctx(const char *cache_dir, elu_ctx **ctx)
{
    elu_options o;
    elu_options_default(&o);
    o.backend = ELU_BACKEND_CPU;
    o.cache_dir = cache_dir;
    o.flags = cache_dir ? 0 : ELU_NO_DISK_CACHE;
    o.cpu_threads = 1; /* nothing is computed */
    const elu_status s = elu_ctx_create(ctx, &o);
    return s == ELU_OK ? OK : failure("cannot create a CPU context: %s", elu_status_str(s));
}

/* The library's own checks of the constants, for every dtype, before
 * anything is compiled: in a CPU context, elu_prepare checks p and does
 * nothing more. */
static int check_constants(const struct warm_request *w)
{
    elu_ctx *ctx;
    int status = cpu_ctx(NULL, &ctx);
    for (size_t i = 0; status == OK && i < w->dtype_count; i++) {
        elu_params p = w->params;
        p.dtype = w->dtypes[i];
        if (elu_prepare(ctx, &p) != ELU_OK)
            status = usage("%s: %s", DTYPE_NAMES[p.dtype], elu_ctx_last_error(ctx));
    }
    elu_ctx_destroy(ctx);
    return status;
}

static int parse_warm(const struct command_line *cl, struct warm_request *w)
{
    *w = (struct warm_request){0};
    if (!cl->value[SM])
        return usage("warm needs --sm, e.g. --sm 90");
    /* elu_precompile's range: 10 * major + minor */
    int status = parse_whole("--sm", cl->value[SM], 10, 9999, &w->sm);
    if (status == OK)
        status = parse_dtypes(cl->value[DTYPE] ? cl->value[DTYPE] : "f32", w);
    if (status == OK)
        status = parse_constants(cl, &w->params);
    return status == OK ? check_constants(w) : status;
}

/* Compile p for sm into the cache, or find it there, and say which. */
static int warm_one(elu_ctx *ctx, const elu_params *p, int sm)
{
    char what[192];
    /* %.15g: a constant given in up to 15 digits reads as it was given */
    snprintf(what, sizeof what, "%s elu(alpha=%.15g, scale=%.15g, input_scale=%.15g) sm_%d",
             DTYPE_NAMES[p->dtype], p->alpha, p->scale, p->input_scale, sm);
    elu_ctx_stats before, after;
    elu_ctx_get_stats(ctx, &before);
    const elu_status s = elu_precompile(ctx, p, sm);
    elu_ctx_get_stats(ctx, &after);
    if (s != ELU_OK)
        return failure("%s: %s: %s", what, elu_status_str(s), elu_ctx_last_error(ctx));
    /* elu_precompile obtains one binary: compiled, or else a disk hit. */
    printf("%s %s%s\n", after.compiles > before.compiles ? "compiled" : "found", what,
           after.disk_rejects > before.disk_rejects ? " (in place of a bad entry)" : "");
    return OK;
}

static int warm(const struct elu_cache *c, const struct warm_request *w)
{
    elu_ctx *ctx;
    int status = cpu_ctx(c->dir, &ctx);
    for (size_t i = 0; ctx && i < w->dtype_count; i++) {
        elu_params p = w->params;
        p.dtype = w->dtypes[i];
        status = worse(status, warm_one(ctx, &p, (int)w->sm));
    }
    elu_ctx_destroy(ctx);
    return status;
}

/* -------- main -------- */

/* What libelu ignores in the environment, said before anything is done:
 * its defaults hold here too (ELU_CACHE_MAX_BYTES: trim's default, stats'
 * cap). */
static void warn_of_environment(void)
{
    char report[2048] = "";
    if (elu_env_check(report, sizeof report))
        fprintf(stderr, "elu-cache: warning: %s\n", report);
}

/* Only warm creates the directory: the other commands have nothing to do
 * without one, and a mistyped --dir must not leave one behind. */
static int open_cache(const char *dir, bool create, struct elu_cache *c)
{
    char why[4400];
    bool missing = false;
    if (create ? elu_cache_open(c, dir, why, sizeof why)
               : elu_cache_open_existing(c, dir, &missing, why, sizeof why))
        return OK;
    if (missing) {
        fprintf(stderr, "elu-cache: there is no cache directory %s\n", c->dir);
        return NO_CACHE;
    }
    return failure("%s", why);
}

static int run(const struct command_line *cl)
{
    struct warm_request w;
    uint64_t max_bytes = 0;
    int status = OK;
    warn_of_environment();
    if (cl->command == WARM)
        status = parse_warm(cl, &w);
    else if (cl->command == TRIM && cl->value[MAX_BYTES])
        status = parse_whole("--max-bytes", cl->value[MAX_BYTES], 0, UINT64_MAX, &max_bytes);
    struct elu_cache c;
    if (status == OK)
        status = open_cache(cl->value[DIR_OPT], cl->command == WARM, &c);
    if (status != OK)
        return status;
    bool delete = cl->value[DELETE] != NULL;
    const bool json = cl->value[JSON] != NULL;
    switch (cl->command) {
    case LIST:
        return list(&c, json);
    case STATS:
        return stats(&c, json);
    case VERIFY:
        return walk(&c, verify_one, &delete);
    case TRIM:
        return trim(&c, cl->value[MAX_BYTES] ? max_bytes : c.max_bytes);
    case CLEAR:
        return clear(&c);
    case WARM:
    default:
        return warm(&c, &w);
    }
}

int main(int argc, char **argv)
{
    struct command_line cl;
    int status = parse_command_line(argc, argv, &cl);
    if (status == HELP_ASKED) {
        fputs(HELP, stdout);
        status = OK;
    } else if (status == VERSION_ASKED) {
        printf("elu-cache (libelu) %s\n", elu_version_string());
        status = OK;
    } else if (status == OK) {
        status = run(&cl);
    }
    /* Output that could not be written (a full disk) is a failure too. */
    if (fflush(stdout) != 0 || ferror(stdout))
        status = worse(status, failure("cannot write the output: %s", strerror(errno)));
    return status;
}
