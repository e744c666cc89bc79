/* The disk cache as an attacker and an unlucky user meet it: directories
 * and entries it must not trust, symlink swaps, hard links, planted files,
 * stampedes of processes, killed writers, full disks, unwritable or
 * missing directories, and the size cap. NVRTC compiles for real (it needs
 * no GPU); the tests that need another user run as root only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cache.h"
#include "cuda_loader.h"
#include "env.h"
#include "half_table.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOBODY 65534

static char base[512], dir[600];

static int setup(void **state)
{
    (void)state;
    tu_tempdir(base, sizeof base);
    chmod(base, 0755); /* so that another user's child can reach dir */
    snprintf(dir, sizeof dir, "%s/cache", base);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmdir(base);
    return 0;
}

static void need_nvrtc(void)
{
    const char *why;
    if (!elu_nvrtc_load(&why))
        skip();
}

static void need_root(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "skipping: needs root to act as another user\n");
        skip();
    }
}

static void sleep_ms(long ms)
{
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000}, NULL);
}

static bool cache_used(const elu_ctx *ctx)
{
    elu_ctx_info info;
    elu_ctx_get_info(ctx, &info);
    return info.disk_cache;
}

/* A context on dir must refuse the directory, saying `why`, count one disk
 * error and still run; `what` names the directory's state. */
static void check_refused(const char *what, const char *why)
{
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    const char *said = elu_ctx_last_error(ctx);
    if (cache_used(ctx) || !strstr(said, why) || tu_stats(ctx).disk_errors != 1)
        fail_msg("%s: cache %s, %llu disk errors, \"%s\"; want it refused once, saying "
                 "\"%s\"", what, cache_used(ctx) ? "used" : "refused",
                 (unsigned long long)tu_stats(ctx).disk_errors, said, why);
    float x[2] = {-1, 1}, y[2];
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    assert_int_equal(elu_run(ctx, &p, x, y, 2, NULL), ELU_OK);
    elu_ctx_destroy(ctx);
}

static void test_untrusted_directories(void **state)
{
    (void)state;
    assert_int_equal(mkdir(dir, 0700), 0);
    const struct {
        const char *what;
        mode_t mode;
        bool shared; /* ELU_CACHE_SHARED=1 */
        const char *why;
    } refused[] = {
        {"0770", 0770, false, "writable by its group"},
        {"0777", 0777, false, "writable by anyone"},
        {"0770, shared", 0770, true, "without the setgid bit"},
        {"02777, shared", 02777, true, "writable by anyone"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        chmod(dir, refused[i].mode);
        if (refused[i].shared)
            setenv("ELU_CACHE_SHARED", "1", 1);
        check_refused(refused[i].what, refused[i].why);
        unsetenv("ELU_CACHE_SHARED");
    }
    setenv("ELU_CACHE_SHARED", "1", 1);
    chmod(dir, 02770); /* a proper shared cache */
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    assert_true(cache_used(ctx));
    elu_ctx_destroy(ctx);
    unsetenv("ELU_CACHE_SHARED");
    if (geteuid() == 0) {
        chmod(dir, 0700);
        assert_int_equal(chown(dir, NOBODY, NOBODY), 0);
        check_refused("another user's", "owned by another user");
    }
}

static void test_shared_cache_created_setgid(void **state)
{
    (void)state;
    need_nvrtc();
    setenv("ELU_CACHE_SHARED", "1", 1);
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 07777, 02770);
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    assert_int_equal(elu_precompile(ctx, &p, 80), ELU_OK);
    char entry[1024];
    assert_true(tu_only_entry(dir, entry, sizeof entry));
    assert_int_equal(stat(entry, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    elu_ctx_destroy(ctx);
    unsetenv("ELU_CACHE_SHARED");
}

/* Make the entry of p for sm_80, tamper with it, and check that the next
 * context rejects it, rebuilds it, and that the result verifies. */
static void check_tamper(void (*tamper)(const char *entry), const char *why)
{
    const elu_params p = elu_params_selu(ELU_F32);
    elu_ctx *first = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    assert_int_equal(elu_precompile(first, &p, 80), ELU_OK);
    elu_ctx_destroy(first);
    char entry[1024];
    assert_true(tu_only_entry(dir, entry, sizeof entry));
    tamper(entry);
    elu_ctx *second = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    assert_int_equal(elu_precompile(second, &p, 80), ELU_OK);
    assert_int_equal(tu_stats(second).disk_rejects, 1);
    assert_int_equal(tu_stats(second).compiles, 1);
    if (!strstr(elu_ctx_last_error(second), why))
        fail_msg("expected \"%s\" in \"%s\"", why, elu_ctx_last_error(second));
    elu_ctx_destroy(second);
    elu_ctx *third = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    assert_int_equal(elu_precompile(third, &p, 80), ELU_OK);
    assert_int_equal(tu_stats(third).disk_hits, 1);
    elu_ctx_destroy(third);
}

static char victim[700];

static void swap_for_symlink(const char *entry)
{
    snprintf(victim, sizeof victim, "%s/victim", base);
    assert_int_equal(rename(entry, victim), 0); /* a valid entry, elsewhere */
    assert_int_equal(symlink(victim, entry), 0);
}

static void hard_link_elsewhere(const char *entry)
{
    snprintf(victim, sizeof victim, "%s/second-name", base);
    assert_int_equal(link(entry, victim), 0);
}

static void give_to_nobody(const char *entry) { assert_int_equal(chown(entry, NOBODY, NOBODY), 0); }

static void make_group_writable(const char *entry) { assert_int_equal(chmod(entry, 0660), 0); }

static void plant_fifo(const char *entry)
{
    unlink(entry);
    assert_int_equal(mkfifo(entry, 0600), 0); /* opening it must not hang */
}

static void test_symlink_swap(void **state)
{
    (void)state;
    need_nvrtc();
    check_tamper(swap_for_symlink, "symbolic link");
    struct stat st; /* the link went, its target stayed */
    assert_int_equal(lstat(victim, &st), 0);
    assert_true(S_ISREG(st.st_mode));
}

static void test_hard_link(void **state)
{
    (void)state;
    need_nvrtc();
    check_tamper(hard_link_elsewhere, "hard-linked");
}

static void test_planted_by_another_user(void **state)
{
    (void)state;
    need_nvrtc();
    need_root();
    check_tamper(give_to_nobody, "owned by another user");
}

static void test_group_writable_entry(void **state)
{
    (void)state;
    need_nvrtc();
    check_tamper(make_group_writable, "writable by its group");
}

static void test_planted_fifo(void **state)
{
    (void)state;
    need_nvrtc();
    check_tamper(plant_fifo, "not a regular file");
}

/* 16 processes start together on an empty cache and want the same three
 * kernels: each is compiled once in all, and every process succeeds. */
static void test_stampede(void **state)
{
    (void)state;
    need_nvrtc();
    enum { PROCS = 16 };
    int go[2], counts[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(counts), 0);
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        if ((pids[i] = fork()) == 0) {
            char byte;
            close(go[1]);
            if (read(go[0], &byte, 1) != 0) /* wait until the start is given */
                _exit(3);
            elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
            bool ok = true;
            for (int k = 0; k < 3; k++) {
                const elu_params p = elu_params_celu(tu_dtypes[k], 0.5 + k);
                ok = ok && elu_precompile(ctx, &p, 90) == ELU_OK;
            }
            const uint64_t compiles = tu_stats(ctx).compiles;
            ok = ok && write(counts[1], &compiles, sizeof compiles) == sizeof compiles;
            _exit(ok ? 0 : 1);
        }
    }
    close(go[0]);
    close(go[1]); /* everyone starts now */
    close(counts[1]);
    uint64_t total = 0, one;
    while (read(counts[0], &one, sizeof one) == sizeof one)
        total += one;
    close(counts[0]);
    for (int i = 0; i < PROCS; i++) {
        int status;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    fprintf(stderr, "%d processes, 3 kernels: %llu compiles in all\n", PROCS,
            (unsigned long long)total);
    assert_int_equal(total, 3);
}

/* A lock that is never released: after the timeout, compile without it. */
static void test_lock_timeout_falls_back(void **state)
{
    (void)state;
    need_nvrtc();
    const elu_params p = elu_params_elu(ELU_F32, 0.25);
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    assert_int_equal(elu_precompile(ctx, &p, 80), ELU_OK);
    elu_ctx_destroy(ctx);
    char entry[1024], lock[1100];
    assert_true(tu_only_entry(dir, entry, sizeof entry));
    snprintf(lock, sizeof lock, "%.*s.lock", (int)(strlen(entry) - 4), entry);
    unlink(entry);
    const int fd = open(lock, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX), 0); /* a stuck process holds it */
    setenv("ELU_CACHE_LOCK_TIMEOUT_MS", "100", 1);
    ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    assert_int_equal(elu_precompile(ctx, &p, 80), ELU_OK);
    assert_non_null(strstr(elu_ctx_last_error(ctx), "timed out"));
    assert_int_equal(tu_stats(ctx).disk_writes, 1);
    elu_ctx_destroy(ctx);
    unsetenv("ELU_CACHE_LOCK_TIMEOUT_MS");
    close(fd);
}

/* An entry written to dir for `key`, and its path. */
static struct elu_cache cache_with_entry(const struct elu_cache_key *key, char *path,
                                         size_t size)
{
    struct elu_cache cache;
    char why[1024];
    unsigned evicted;
    assert_true(elu_cache_open(&cache, dir, why, sizeof why));
    assert_true(elu_cache_put(&cache, key, ELU_BINARY_PTX, "a test entry", "payload", 7,
                              &evicted, why, sizeof why));
    elu_cache_path(&cache, key, ".bin", path, size);
    return cache;
}

/* A writer of new entries into dir (for sm_80, constants of its own),
 * killed at a random moment after its first write, mostly while it
 * compiles or writes another: how many writes it finished and said so. */
static unsigned killed_writer(int round)
{
    int done[2];
    assert_int_equal(pipe(done), 0);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(done[0]);
        elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
        for (int k = 0;; k++) {
            const elu_params p = elu_params_elu(ELU_F32, 1.0 + round * 100 + k);
            if (elu_precompile(ctx, &p, 80) != ELU_OK || write(done[1], "w", 1) != 1)
                _exit(1);
        }
    }
    close(done[1]);
    char byte;
    unsigned written = read(done[0], &byte, 1) == 1; /* the first, or the writer failed */
    sleep_ms((long)(tu_rand() % 400));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    while (read(done[0], &byte, 1) == 1)
        written++;
    close(done[0]);
    return written;
}

/* elu_cache_put's temp files in dir, each passed to `each` unless NULL:
 * how many there are. */
static int temp_files(void (*each)(const char *path))
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int count = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strstr(e->d_name, ".bin.tmp."))
            continue;
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (each)
            each(path);
        count++;
    }
    closedir(d);
    return count;
}

/* The file at path made older than a temp file a live writer could have. */
static void make_stale(const char *path)
{
    const struct timespec then = {time(NULL) - ELU_CACHE_STALE_TEMP_SECONDS - 60, 0};
    assert_int_equal(utimensat(AT_FDCWD, path, (const struct timespec[2]){then, then}, 0), 0);
}

/* Writers killed at random moments leave no entry that fails to verify,
 * and lose none they finished. Those killed between creating a temp file
 * and renaming it leave the temp file: once stale, the next write removes
 * it (test_stale_temp_files_removed kills one there for certain). */
static void test_killed_writers(void **state)
{
    (void)state;
    need_nvrtc();
    enum { ROUNDS = 12 };
    unsigned written = 0;
    for (int round = 0; round < ROUNDS; round++)
        written += killed_writer(round);
    struct elu_cache cache;
    char why[512];
    assert_true(elu_cache_open(&cache, dir, why, sizeof why));
    DIR *d = opendir(dir);
    unsigned entries = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 4, ".bin") != 0)
            continue; /* temp files: no reader ever opens them */
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct elu_cache_file file;
        struct elu_cache_entry entry;
        if (elu_cache_load(&cache, path, NULL, &file, &entry, why, sizeof why) !=
            ELU_CACHE_HIT)
            fail_msg("%s: %s", path, why);
        free(file.data);
        entries++;
    }
    closedir(d);
    const int temps = temp_files(make_stale);
    fprintf(stderr, "%d killed writers: %u writes finished, %u entries, all valid; %d temp "
            "files left\n", ROUNDS, written, entries, temps);
    /* Each writer finished one write at least, and may have finished one
     * more than it could say before it was killed. */
    if (written < ROUNDS || entries < written || entries > written + ROUNDS)
        fail_msg("%u writes finished, %u entries", written, entries);
    const struct elu_cache_key key = elu_cache_key_of("after", 5);
    char entry[1200];
    cache_with_entry(&key, entry, sizeof entry);
    assert_int_equal(temp_files(NULL), 0);
}

/* Run `body` in a child (another user's when `as_nobody`), return its code. */
static int child(int (*body)(void), bool as_nobody)
{
    const pid_t pid = fork();
    if (pid == 0) {
        if (as_nobody && (setgid(NOBODY) != 0 || setuid(NOBODY) != 0))
            _exit(90);
        _exit(body());
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

/* The write fails: elu_precompile reports it, runs are unaffected. */
static int expect_write_failure(void)
{
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    const elu_params p = elu_params_elu(ELU_F64, 0.5);
    float x[2] = {-1, 1}, y[2];
    const elu_params q = elu_params_elu(ELU_F32, 1.0);
    const elu_status status = elu_precompile(ctx, &p, 80);
    fprintf(stderr, "  %s: %s\n", elu_status_str(status), elu_ctx_last_error(ctx));
    const int code = status != ELU_ERR_IO ? 1
                     : tu_stats(ctx).disk_errors != 1 ? 2
                     : elu_run(ctx, &q, x, y, 2, NULL) != ELU_OK ? 3 : 0;
    elu_ctx_destroy(ctx);
    return code;
}

static int with_file_size_limit(void)
{
    signal(SIGXFSZ, SIG_IGN); /* write() then fails with EFBIG */
    struct rlimit limit = {1000, 1000};
    setrlimit(RLIMIT_FSIZE, &limit);
    return expect_write_failure();
}

static void test_file_size_limit(void **state)
{
    (void)state;
    need_nvrtc();
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(child(with_file_size_limit, false), 0);
    char entry[1024];
    assert_false(tu_only_entry(dir, entry, sizeof entry)); /* nothing partial */
}

/* A writer killed mid-write, for certain: its entry is larger than the
 * file size limit, and the write past the limit ends the process with
 * SIGXFSZ (its core dump off). */
static int killed_mid_write(void)
{
    static const char payload[4096];
    const struct rlimit no_core = {0, 0}, limit = {1000, 1000};
    signal(SIGXFSZ, SIG_DFL);
    setrlimit(RLIMIT_CORE, &no_core);
    struct elu_cache cache;
    char why[1024];
    unsigned evicted;
    const struct elu_cache_key key = elu_cache_key_of("killed", 6);
    if (!elu_cache_open(&cache, dir, why, sizeof why) || setrlimit(RLIMIT_FSIZE, &limit) != 0)
        return 1;
    elu_cache_put(&cache, &key, ELU_BINARY_PTX, "too large", payload, sizeof payload,
                  &evicted, why, sizeof why);
    return 2; /* not killed */
}

/* A writer killed between creating its temp file and renaming it leaves
 * the temp file. The next write keeps it while a live writer's could be
 * as old, and removes it once older; nothing else goes: not entries, nor
 * other files, however old. */
static void test_stale_temp_files_removed(void **state)
{
    (void)state;
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(child(killed_mid_write, false), 100 + SIGXFSZ);
    assert_int_equal(temp_files(NULL), 1);
    const struct elu_cache_key first = elu_cache_key_of("first", 5),
                               second = elu_cache_key_of("second", 6);
    char entry[1200], other[700];
    cache_with_entry(&first, entry, sizeof entry);
    assert_int_equal(temp_files(NULL), 1); /* young: maybe a writer's */
    make_stale(entry);
    snprintf(other, sizeof other, "%s/notes", dir);
    FILE *f = fopen(other, "w");
    assert_non_null(f);
    fclose(f);
    make_stale(other);
    assert_int_equal(temp_files(make_stale), 1);
    char second_entry[1200];
    cache_with_entry(&second, second_entry, sizeof second_entry);
    assert_int_equal(temp_files(NULL), 0);
    assert_int_equal(access(other, F_OK), 0);
    assert_int_equal(access(entry, F_OK), 0);
}

static void test_read_only_directory(void **state)
{
    (void)state;
    need_nvrtc();
    need_root(); /* root writes anywhere: the child is another user */
    assert_int_equal(mkdir(dir, 0500), 0);
    assert_int_equal(chown(dir, NOBODY, NOBODY), 0);
    assert_int_equal(child(expect_write_failure, true), 0);
}

static int cannot_create(void)
{
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    const bool ok = !cache_used(ctx) && strstr(elu_ctx_last_error(ctx), "Permission denied");
    elu_ctx_destroy(ctx);
    return ok ? 0 : 1;
}

static void test_directory_not_creatable(void **state)
{
    (void)state;
    need_root();
    chmod(base, 0755); /* others may enter but not create */
    assert_int_equal(child(cannot_create, true), 0);
}

static void test_cache_path_is_a_file(void **state)
{
    (void)state;
    FILE *f = fopen(dir, "w");
    fclose(f);
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    assert_false(cache_used(ctx));
    assert_non_null(strstr(elu_ctx_last_error(ctx), "not a directory"));
    elu_ctx_destroy(ctx);
}

static void test_home_unset(void **state)
{
    (void)state;
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    unsetenv("HOME");
    unsetenv("XDG_CACHE_HOME");
    unsetenv("ELU_CACHE_DIR");
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU);
    assert_false(cache_used(ctx));
    assert_non_null(strstr(elu_ctx_last_error(ctx), "HOME"));
    float x[2] = {-1, 1}, y[2];
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    assert_int_equal(elu_run(ctx, &p, x, y, 2, NULL), ELU_OK);
    elu_ctx_destroy(ctx);
    if (home)
        setenv("HOME", home, 1);
    free(home);
}

static void test_home_relative(void **state)
{
    (void)state;
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    unsetenv("ELU_CACHE_DIR");
    setenv("XDG_CACHE_HOME", "relative/xdg", 1);
    setenv("HOME", "relative/home", 1);
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU);
    assert_false(cache_used(ctx));
    const char *why = elu_ctx_last_error(ctx);
    if (!strstr(why, "XDG_CACHE_HOME is relative") || !strstr(why, "HOME is relative"))
        fail_msg("\"%s\" does not say HOME is relative", why);
    elu_ctx_destroy(ctx);
    unsetenv("XDG_CACHE_HOME");
    if (home)
        setenv("HOME", home, 1);
    free(home);
}

/* The cache opened on dir with one variable set. */
static struct elu_cache opened_with(const char *name, const char *value)
{
    setenv(name, value, 1);
    struct elu_cache cache;
    char why[1024];
    assert_true(elu_cache_open(&cache, dir, why, sizeof why));
    unsetenv(name);
    return cache;
}

/* Every wait for a lock ends: a value that is not a whole number of
 * milliseconds within an hour leaves the default; 0 is not to wait. */
static void test_lock_timeout_bounded(void **state)
{
    (void)state;
    const char *const invalid[] = {"-5", "abc", "1e99", "3600001", "18446744073709551611"};
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++)
        if (opened_with("ELU_CACHE_LOCK_TIMEOUT_MS", invalid[i]).lock_timeout_ms !=
            ELU_CACHE_LOCK_TIMEOUT_MS)
            fail_msg("ELU_CACHE_LOCK_TIMEOUT_MS=%s did not leave the default", invalid[i]);
    const struct elu_cache cache = opened_with("ELU_CACHE_LOCK_TIMEOUT_MS", "0");
    assert_int_equal(cache.lock_timeout_ms, 0);
    const struct elu_cache_key key = elu_cache_key_of("held", 4);
    char why[1024];
    const int held = elu_cache_lock(&cache, &key, why, sizeof why);
    assert_true(held >= 0);
    assert_int_equal(elu_cache_lock(&cache, &key, why, sizeof why), -1); /* at once */
    assert_non_null(strstr(why, "timed out"));
    elu_cache_unlock(held);
}

static void test_max_bytes_checked(void **state)
{
    (void)state;
    const char *const invalid[] = {"-1", "99999999999999999999", "0", "abc", "1e99", "256M"};
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++)
        if (opened_with("ELU_CACHE_MAX_BYTES", invalid[i]).max_bytes !=
            ELU_CACHE_DEFAULT_MAX_BYTES)
            fail_msg("ELU_CACHE_MAX_BYTES=%s did not leave the default", invalid[i]);
    assert_int_equal(opened_with("ELU_CACHE_MAX_BYTES", "1").max_bytes, 1);
}

static enum elu_cache_result get(const struct elu_cache *cache, const struct elu_cache_key *key,
                                 char *why, size_t why_size)
{
    enum elu_binary_kind kind;
    void *payload = NULL;
    size_t size = 0;
    const enum elu_cache_result r = elu_cache_get(cache, key, &kind, &payload, &size, why,
                                                  why_size);
    if (r == ELU_CACHE_HIT)
        assert_memory_equal(payload, "payload", 8);
    free(payload);
    return r;
}

/* A read that fails for want of a descriptor says nothing about the entry:
 * it stays, and serves once descriptors are back. */
static void test_transient_read_failure_keeps_entry(void **state)
{
    (void)state;
    const struct elu_cache_key key = elu_cache_key_of("transient", 9);
    char path[1200], why[1400];
    const struct elu_cache cache = cache_with_entry(&key, path, sizeof path);
    struct rlimit saved, tight;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    const int lowest = dup(0); /* the lowest free descriptor */
    close(lowest);
    tight = (struct rlimit){(rlim_t)lowest, saved.rlim_max};
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &tight), 0);
    const enum elu_cache_result starved = get(&cache, &key, why, sizeof why);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    assert_int_not_equal(starved, ELU_CACHE_HIT);
    assert_int_not_equal(starved, ELU_CACHE_REJECTED);
    assert_non_null(strstr(why, "Too many open files"));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(get(&cache, &key, why, sizeof why), ELU_CACHE_HIT);
}

/* A kernel precompiled into dir by a context of its own; its entry's path. */
static bool precompiled(const elu_params *p, char *entry, size_t size)
{
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    const bool stored =
        elu_precompile(ctx, p, 80) == ELU_OK && tu_only_entry(dir, entry, size);
    elu_ctx_destroy(ctx);
    return stored;
}

/* p precompiled again, by a new context: its status, and its counters. */
static elu_status precompiled_again(const elu_params *p, elu_ctx_stats *s)
{
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    const elu_status status = elu_precompile(ctx, p, 80);
    *s = tu_stats(ctx);
    fprintf(stderr, "  %s: %s; disk_rejects %llu, disk_errors %llu\n",
            elu_status_str(status), elu_ctx_last_error(ctx),
            (unsigned long long)s->disk_rejects, (unsigned long long)s->disk_errors);
    elu_ctx_destroy(ctx);
    return status;
}

/* An entry that cannot be read, found so before the key's lock and under
 * it: one failure. The kernel is compiled and stored over it. */
static int unreadable_entry_counted_once(void)
{
    const elu_params p = elu_params_elu(ELU_F32, 0.25);
    char entry[1024];
    elu_ctx_stats s;
    if (!precompiled(&p, entry, sizeof entry) || chmod(entry, 0) != 0)
        return 1;
    const elu_status status = precompiled_again(&p, &s);
    return status != ELU_OK || s.disk_errors != 1 || s.compiles != 1 ||
           s.disk_writes != 1;
}

/* A bad entry that cannot be removed (the directory is read-only), found
 * so twice: one reject; and the write that fails, one error. */
static int unremovable_entry_rejected_once(void)
{
    const elu_params p = elu_params_elu(ELU_F32, 0.25);
    char entry[1024];
    elu_ctx_stats s;
    if (!precompiled(&p, entry, sizeof entry) || truncate(entry, 10) != 0 ||
        chmod(dir, 0500) != 0)
        return 1;
    const elu_status status = precompiled_again(&p, &s);
    chmod(dir, 0700);
    return status != ELU_ERR_IO || s.disk_rejects != 1 || s.disk_errors != 1;
}

static void test_failure_met_twice_counted_once(void **state)
{
    (void)state;
    need_nvrtc();
    /* Root reads and writes anything: the child is another user. */
    const bool as_nobody = geteuid() == 0;
    int (*const bodies[])(void) = {unreadable_entry_counted_once,
                                   unremovable_entry_rejected_once};
    int failed = 0;
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(mkdir(dir, 0700), 0);
        if (as_nobody)
            assert_int_equal(chown(dir, NOBODY, NOBODY), 0);
        failed += child(bodies[i], as_nobody) != 0;
        tu_rmdir(dir);
    }
    assert_int_equal(failed, 0);
}

/* The entry shapes a crash can leave, the rename on disk and the data not
 * (entries are not synced): each is rejected and removed, never served. */
static void test_crash_left_entries_rejected(void **state)
{
    (void)state;
    const struct elu_cache_key key = elu_cache_key_of("crash", 5);
    char path[1200], why[1400];
    for (int shape = 0; shape < 3; shape++) {
        const struct elu_cache cache = cache_with_entry(&key, path, sizeof path);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        const int fd = open(path, O_WRONLY);
        assert_true(fd >= 0);
        char zeros[4096] = {0};
        if (shape == 0) /* empty */
            assert_int_equal(ftruncate(fd, 0), 0);
        else if (shape == 1) /* all zeros */
            assert_int_equal(pwrite(fd, zeros, (size_t)st.st_size, 0), st.st_size);
        else /* the payload's block zeroed, the header intact */
            assert_int_equal(pwrite(fd, zeros, 4, st.st_size - 4), 4);
        close(fd);
        assert_int_equal(get(&cache, &key, why, sizeof why), ELU_CACHE_REJECTED);
        assert_int_equal(stat(path, &st), -1);
    }
}

/* The cap keeps the most recently used entries; a hit renews an entry. */
static void test_size_cap_evicts_least_recently_used(void **state)
{
    (void)state;
    need_nvrtc();
    elu_ctx *probe = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    const elu_params first = elu_params_elu(ELU_F32, 0.1);
    assert_int_equal(elu_precompile(probe, &first, 80), ELU_OK);
    char entry[1024];
    assert_true(tu_only_entry(dir, entry, sizeof entry));
    struct stat st;
    stat(entry, &st);
    elu_ctx_destroy(probe);
    char cap[32];
    snprintf(cap, sizeof cap, "%lld", (long long)(st.st_size * 3 + st.st_size / 2));
    setenv("ELU_CACHE_MAX_BYTES", cap, 1); /* room for three */
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    for (int k = 1; k < 6; k++) {
        const elu_params p = elu_params_elu(ELU_F32, 0.1 + k);
        if (k >= 3) /* keep the first in use: a disk hit renews it */
            assert_int_equal(elu_precompile(ctx, &first, 80), ELU_OK);
        sleep_ms(20); /* distinct stamps */
        assert_int_equal(elu_precompile(ctx, &p, 80), ELU_OK);
    }
    assert_int_equal(tu_stats(ctx).disk_evictions, 3);
    elu_ctx_destroy(ctx);
    /* Survivors: the renewed first entry and the two newest. */
    elu_ctx *check = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    const double alphas[] = {0.1, 4.1, 5.1};
    for (int i = 0; i < 3; i++) {
        const elu_params p = elu_params_elu(ELU_F32, alphas[i]);
        assert_int_equal(elu_precompile(check, &p, 80), ELU_OK);
    }
    assert_int_equal(tu_stats(check).compiles, 0);
    elu_ctx_destroy(check);
    unsetenv("ELU_CACHE_MAX_BYTES");
}

/* A half type's forward table is an entry of its own, which a second
 * context finds: the table the CPU path computes. */
static void test_half_table_entry(void **state)
{
    (void)state;
    const struct elu_coef c = {ELU_BF16, 0.7f, 1.0, (float)(1 / 0.7)};
    uint16_t *computed = elu_half_forward_table(&c);
    for (int round = 0; round < 2; round++) {
        elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
        uint16_t *table = NULL;
        assert_int_equal(elu_half_table_obtain(ctx, &c, &table), ELU_OK);
        assert_memory_equal(table, computed, ELU_HALF_TABLE_BYTES);
        assert_int_equal(tu_stats(ctx).disk_writes, round == 0);
        assert_int_equal(tu_stats(ctx).disk_hits, round == 1);
        free(table);
        elu_ctx_destroy(ctx);
    }
    char entry[1024];
    assert_int_equal(tu_entries(dir, entry, sizeof entry), 0); /* tables are not counted */
    struct elu_cache cache;
    char why[ELU_PATH_MAX + 256];
    enum elu_binary_kind kind;
    void *payload;
    size_t size;
    const struct elu_cache_key key = elu_half_table_key(&c);
    assert_true(elu_cache_open(&cache, dir, why, sizeof why));
    assert_int_equal(elu_cache_get(&cache, &key, &kind, &payload, &size, why, sizeof why),
                     ELU_CACHE_HIT);
    assert_int_equal(kind, ELU_BINARY_TABLE);
    assert_int_equal(size, ELU_HALF_TABLE_BYTES);
    free(payload);
    free(computed);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    tu_seed();
    const struct CMUnitTest tests[] = {
        T(test_untrusted_directories),
        T(test_shared_cache_created_setgid),
        T(test_symlink_swap),
        T(test_hard_link),
        T(test_planted_by_another_user),
        T(test_group_writable_entry),
        T(test_planted_fifo),
        T(test_stampede),
        T(test_lock_timeout_falls_back),
        T(test_killed_writers),
        T(test_stale_temp_files_removed),
        T(test_file_size_limit),
        T(test_read_only_directory),
        T(test_directory_not_creatable),
        T(test_cache_path_is_a_file),
        T(test_home_unset),
        T(test_home_relative),
        T(test_lock_timeout_bounded),
        T(test_max_bytes_checked),
        T(test_transient_read_failure_keeps_entry),
        T(test_failure_met_twice_counted_once),
        T(test_crash_left_entries_rejected),
        T(test_size_cap_evicts_least_recently_used),
        T(test_half_table_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
