/* elu-cache, run as a user would: its output and exit codes. The binary's
 * path comes in $ELU_CACHE_CLI (tests/meson.build). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cache.h"
#include "cuda_loader.h"
#include "jit.h"
#include "testutil.h"
#include "tune.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char output[65536];

/* Whether elu-cache runs as another user (for root, to whom every
 * directory is writable). */
static bool cli_as_nobody;
/* The tool's copy that nobody can run: the build tree may lie where nobody
 * cannot reach it (a clone in root's 0700 home). */
static char nobody_dir[512], nobody_cli[600];

#define NOBODY 65534

/* Run elu-cache with the arguments (NULL-terminated); its stdout and stderr
 * land in `output`, or its stdout in the file stdout_path when not NULL;
 * returns the exit code. */
static int run_cli_argv(const char *stdout_path, const char *const *args)
{
    const char *argv[32] = {cli_as_nobody ? nobody_cli : getenv("ELU_CACHE_CLI")};
    for (int i = 0; args[i]; i++) {
        assert_true(i + 2 < 32);
        argv[i + 1] = args[i];
    }
    int out[2];
    assert_int_equal(pipe(out), 0);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(out[1], 2);
        if (stdout_path && !freopen(stdout_path, "w", stdout))
            _exit(126);
        if (cli_as_nobody && (setgid(NOBODY) != 0 || setuid(NOBODY) != 0))
            _exit(125);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    size_t len = 0;
    for (ssize_t r; (r = read(out[0], output + len, sizeof output - 1 - len)) > 0;)
        len += (size_t)r;
    output[len] = '\0';
    close(out[0]);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int run_cli_to(const char *stdout_path, const char *first, ...)
{
    const char *args[32];
    int n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 31; a = va_arg(ap, const char *))
        args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    return run_cli_argv(stdout_path, args);
}

/* elu-cache ARGS..., NULL */
#define run_cli(...) run_cli_to(NULL, __VA_ARGS__)
/* elu-cache --dir tu_dir ARGS..., NULL */
#define cli(...) run_cli_to(NULL, "--dir", tu_dir, __VA_ARGS__)

/* An elu-cache command line (at most 7 arguments), where its stdout goes
 * (NULL: to `output`), its exit code, and what its output must hold
 * (NULL: anything). */
struct cli_case {
    const char *args[8];
    const char *stdout_path;
    int want;
    const char *said;
};

static void check_cli_cases(const struct cli_case *cases, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const struct cli_case *c = &cases[i];
        const int status = run_cli_argv(c->stdout_path, c->args);
        if (status == c->want && (!c->said || strstr(output, c->said)))
            continue;
        char line[512] = "";
        for (int a = 0; c->args[a]; a++)
            snprintf(line + strlen(line), sizeof line - strlen(line), " %s", c->args[a]);
        fail_msg("elu-cache%s: exit %d, want %d saying \"%s\": %s", line, status, c->want,
                 c->said ? c->said : "", output);
    }
}

static int lines(const char *text)
{
    int n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

static void test_help_and_usage(void **state)
{
    (void)state;
    assert_non_null(getenv("ELU_CACHE_CLI"));
    const struct cli_case cases[] = {
        {{"--help"}, "/dev/null", 0, NULL},
        {{"--dir", tu_dir, "frobnicate"}, NULL, 2, "--help"},
        {{"--dir", tu_dir, "warm"}, NULL, 2, NULL}, /* no --sm */
        {{"--dir", tu_dir, "warm", "--sm", "90", "--dtype", "f8"}, NULL, 2, NULL},
        {{"--dir", tu_dir, "trim", "--max-bytes", "lots"}, NULL, 2, NULL},
        {{"--dir", tu_dir, "list", "extra"}, NULL, 2, NULL},
    };
    check_cli_cases(cases, sizeof cases / sizeof *cases);
}

/* Help anywhere, exit 0; every malformed command line exit 2; options
 * after the command like before it; output that cannot be written, exit 1. */
static void test_command_line(void **state)
{
    (void)state;
    char dir_option[600];
    snprintf(dir_option, sizeof dir_option, "--dir=%s", tu_dir);
    const struct cli_case cases[] = {
        {{"--dir", tu_dir, "list", "--help"}, NULL, 0, "exit status:"},
        {{"--dir", tu_dir, "warm", "-h"}, NULL, 0, NULL},
        {{"--help"}, "/dev/full", 1, NULL},
        {{NULL}, NULL, 2, NULL},
        {{"--dir", tu_dir, "--dir", tu_dir, "list"}, NULL, 2, "--dir given twice"},
        {{"--dir", tu_dir, "warm", "--sm", "90", "--sm", "80"}, NULL, 2, NULL},
        {{"--dir", tu_dir, "trim", "--max-bytes"}, NULL, 2, "--max-bytes needs a value"},
        {{"--dir", tu_dir, "list", "--delete"}, NULL, 2, NULL},
        {{"--dir", tu_dir, "verify", "--delete=yes"}, NULL, 2, NULL},
        {{"--dir", tu_dir, "--frobnicate", "list"}, NULL, 2, NULL},
        {{"--dir", tu_dir, "clear", "extra"}, NULL, 2, NULL},
        {{"list", "--dir", tu_dir}, NULL, 0, NULL},
        {{"stats", dir_option}, NULL, 0, NULL},
        {{"stats", dir_option}, "/dev/full", 1, NULL},
    };
    check_cli_cases(cases, sizeof cases / sizeof *cases);
}

/* A file of `size` bytes named `name` in tu_dir. */
static void make_file(const char *name, size_t size)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", tu_dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < size; i++)
        fputc('x', f);
    fclose(f);
}

static bool exists(const char *dir, const char *name)
{
    char path[1024];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, &st) == 0;
}

#define KEY(c) c "0123456789abcdef0123456789abcde"

/* `--dir ""` (an unset variable) is refused, not taken for the default. */
static void test_empty_dir_refused(void **state)
{
    (void)state;
    setenv("ELU_CACHE_DIR", tu_dir, 1);
    make_file(KEY("a") ".bin", 100);
    assert_int_equal(run_cli("--dir", "", "clear", NULL), 2);
    assert_non_null(strstr(output, "--dir is empty"));
    assert_int_equal(run_cli("--dir=", "clear", NULL), 2);
    assert_true(exists(tu_dir, KEY("a") ".bin"));
}

/* Only warm creates the cache directory, and a usage error nothing: the
 * other commands on a missing directory say so and exit 3. */
static void test_nothing_created(void **state)
{
    (void)state;
    assert_int_equal(run_cli("frobnicate", NULL), 2); /* in the default directory */
    assert_int_equal(run_cli("--dir", NULL), 2);
    assert_int_equal(run_cli("list", "extra", NULL), 2);
    assert_int_equal(run_cli("warm", "--sm", "ninety", NULL), 2);
    assert_int_equal(run_cli("list", NULL), 3);
    assert_false(exists(tu_dir, "default"));
    char missing[600];
    snprintf(missing, sizeof missing, "%s/missing", tu_dir);
    static const char *const commands[][2] = {{"list"}, {"stats"}, {"verify"},
                                              {"verify", "--delete"}, {"trim"}, {"clear"}};
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        const int status = run_cli("--dir", missing, commands[i][0], commands[i][1], NULL);
        if (status != 3 || !strstr(output, "no cache directory"))
            fail_msg("%s %s: exit %d, %s", commands[i][0], commands[i][1] ? commands[i][1] : "",
                     status, output);
    }
    assert_false(exists(tu_dir, "missing"));
}

/* Every argument is read strictly and checked before any work: each of
 * these exits 2 without creating the directory. */
static void test_warm_checks_every_argument_first(void **state)
{
    (void)state;
    static const char *const bad[][6] = {
        {"--sm", "4294967386"}, {"--sm", "9"}, {"--sm", "10000"}, {"--sm", "-90"},
        {"--sm", "+90"}, {"--sm", " 90"}, {"--sm", "90 "}, {"--sm", "90.0"}, {"--sm", ""},
        {"--sm", "0x5a"}, {"--sm", "90", "--dtype", ""}, {"--sm", "90", "--dtype", ",,"},
        {"--sm", "90", "--dtype", "f32,"}, {"--sm", "90", "--dtype", "f32,f32"},
        {"--sm", "90", "--dtype", "f32,bogus,f64"}, {"--sm", "90", "--alpha", "1e-400"},
        {"--sm", "90", "--alpha", "1e400"}, {"--sm", "90", "--alpha", "inf"},
        {"--sm", "90", "--alpha", "nan"}, {"--sm", "90", "--alpha", "0x1p3"},
        {"--sm", "90", "--alpha", ""}, {"--sm", "90", "--alpha", "1e"},
        {"--sm", "90", "--scale", "1,5"}, {"--sm", "90", "--alpha", "2", "--selu"},
        {"--sm", "90", "--celu", "2", "--scale", "1"}, {"--sm", "90", "--celu", "2", "--selu"},
        {"--sm", "90", "--celu", "0"}, /* input_scale 1/0 */
        {"--sm", "90", "--alpha", "1e39", "--dtype", "f64,f32"}, /* beyond f32's range */
    };
    char dir[600];
    snprintf(dir, sizeof dir, "%s/cache", tu_dir);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *args[12] = {"--dir", dir, "warm"};
        for (int j = 0; j < 6 && bad[i][j]; j++)
            args[3 + j] = bad[i][j];
        const int status = run_cli_argv(NULL, args);
        if (status != 2 || exists(tu_dir, "cache"))
            fail_msg("warm %s %s %s %s: exit %d, %s", bad[i][0], bad[i][1],
                     bad[i][2] ? bad[i][2] : "", bad[i][3] ? bad[i][3] : "", status, output);
    }
}

static void test_trim_max_bytes_strict(void **state)
{
    (void)state;
    make_file(KEY("a") ".bin", 100);
    static const char *const bad[] = {"-1", "+5", "", " 5", "5 ", "1.5", "1e3", "0x10",
                                      "18446744073709551616"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (cli("trim", "--max-bytes", bad[i], NULL) != 2)
            fail_msg("--max-bytes \"%s\": %s", bad[i], output);
    assert_int_equal(cli("trim", "--max-bytes", "18446744073709551615", NULL), 0);
    assert_true(exists(tu_dir, KEY("a") ".bin"));
    assert_int_equal(cli("trim", "--max-bytes=0", NULL), 0);
    assert_false(exists(tu_dir, KEY("a") ".bin"));
}

/* What elu-cache finds under cache file names that libelu never makes:
 * links (to a file outside) and empty directories, which any command that
 * removes such a name removes (never what a link points to), and a
 * directory with something in it, which cannot go. */
static const char *const LINKS[] = {KEY("b") ".bin", KEY("c") ".lock",
                                    KEY("d") ".bin.tmp.x"};
static const char *const EMPTY_DIRS[] = {KEY("e") ".bin", KEY("f") ".lock"};
#define FULL_DIR KEY("9") ".bin"

static void plant_not_regular(void)
{
    char target[600], path[700];
    tu_rmdir(tu_dir);
    assert_int_equal(mkdir(tu_dir, 0700), 0);
    snprintf(target, sizeof target, "%s/target", tu_dir);
    make_file("target", 10);
    make_file(KEY("a") ".bin", 100);
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", tu_dir, LINKS[i]);
        assert_int_equal(symlink(target, path), 0);
    }
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", tu_dir, EMPTY_DIRS[i]);
        assert_int_equal(mkdir(path, 0700), 0);
    }
    snprintf(path, sizeof path, "%s/" FULL_DIR, tu_dir);
    assert_int_equal(mkdir(path, 0700), 0);
    make_file(FULL_DIR "/inside", 1);
}

/* After `command` exited with `status`: each of `names` is gone if `gone`,
 * else still there; the full directory is reported and stays, as does what
 * the links point to. */
static void check_removed(const char *command, int status, const char *const *names,
                          size_t count, bool gone)
{
    if (status != 1 || !strstr(output, "cannot remove") || !strstr(output, FULL_DIR) ||
        !exists(tu_dir, FULL_DIR) || !exists(tu_dir, "target"))
        fail_msg("%s: exit %d, %s", command, status, output);
    for (size_t i = 0; i < count; i++)
        if (exists(tu_dir, names[i]) == gone)
            fail_msg("%s: %s %s", command, names[i], gone ? "left" : "removed");
}

/* stats counts none of them as an entry; trim, verify --delete (among the
 * entries) and clear all remove the links and empty directories. */
static void test_not_regular_files(void **state)
{
    (void)state;
    plant_not_regular();
    assert_int_equal(cli("stats", NULL), 0);
    assert_non_null(strstr(output, "entries:     1\n"));
    assert_non_null(strstr(output, "bytes:       100\n"));
    assert_non_null(strstr(output, "lock files:  0\n"));
    assert_non_null(strstr(output, "not regular: 6"));

    const int trim_status = cli("trim", NULL);
    check_removed("trim", trim_status, LINKS, 3, true);
    check_removed("trim", trim_status, EMPTY_DIRS, 2, true);
    assert_true(exists(tu_dir, KEY("a") ".bin")); /* under the cap */

    plant_not_regular();
    const int verify_status = cli("verify", "--delete", NULL);
    const char *const entries[] = {LINKS[0], EMPTY_DIRS[0], KEY("a") ".bin"};
    const char *const others[] = {LINKS[1], LINKS[2], EMPTY_DIRS[1]};
    check_removed("verify --delete", verify_status, entries, 3, true);
    check_removed("verify --delete", verify_status, others, 3, false);

    plant_not_regular();
    const int clear_status = cli("clear", NULL);
    check_removed("clear", clear_status, LINKS, 3, true);
    check_removed("clear", clear_status, EMPTY_DIRS, 2, true);
    assert_false(exists(tu_dir, KEY("a") ".bin"));
}

/* A lock someone holds: trim leaves it quietly, clear says it could not. */
static void test_lock_in_use(void **state)
{
    (void)state;
    char path[700];
    snprintf(path, sizeof path, "%s/%s", tu_dir, KEY("a") ".lock");
    const int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX), 0);
    assert_int_equal(cli("trim", NULL), 0);
    assert_int_equal(cli("clear", NULL), 1);
    assert_non_null(strstr(output, "in use"));
    assert_true(exists(tu_dir, KEY("a") ".lock"));
    close(fd);
    assert_int_equal(cli("clear", NULL), 0);
    assert_false(exists(tu_dir, KEY("a") ".lock"));
}

/* A copy of the tool in a directory of its own that anyone may enter. */
static void copy_cli_for_nobody(void)
{
    if (*nobody_cli)
        return;
    tu_tempdir(nobody_dir, sizeof nobody_dir);
    assert_int_equal(chmod(nobody_dir, 0755), 0);
    snprintf(nobody_cli, sizeof nobody_cli, "%s/elu-cache", nobody_dir);
    const int from = open(getenv("ELU_CACHE_CLI"), O_RDONLY);
    const int to = open(nobody_cli, O_WRONLY | O_CREAT | O_EXCL, 0755);
    assert_true(from >= 0 && to >= 0);
    char buf[65536];
    for (ssize_t r; (r = read(from, buf, sizeof buf)) > 0;)
        assert_int_equal(write(to, buf, (size_t)r), r);
    close(from);
    close(to);
}

/* From here on (until called with false), elu-cache runs as a user to
 * whom permissions apply: for root, nobody, given tu_dir to own. */
static void permissions_apply(bool apply)
{
    cli_as_nobody = apply && geteuid() == 0;
    if (cli_as_nobody)
        copy_cli_for_nobody();
    if (geteuid() == 0)
        assert_int_equal(chown(tu_dir, apply ? NOBODY : 0, apply ? NOBODY : 0), 0);
}

/* In a directory elu-cache may not write, what it cannot remove is
 * reported and fails the command. */
static void test_read_only_directory(void **state)
{
    (void)state;
    make_file(KEY("a") ".bin", 100);
    make_file(KEY("b") ".bin", 100);
    permissions_apply(true);
    chmod(tu_dir, 0500);
    const int trim_status = cli("trim", "--max-bytes", "0", NULL);
    const bool trim_said = strstr(output, "cannot evict") && strstr(output, "(and 1 more)");
    const int clear_status = cli("clear", NULL);
    const bool clear_said = strstr(output, "cannot remove");
    const int verify_status = cli("verify", "--delete", NULL);
    const bool verify_said = strstr(output, "cannot remove") && !strstr(output, "(deleted)");
    chmod(tu_dir, 0700);
    permissions_apply(false);
    assert_int_equal(trim_status, 1);
    assert_true(trim_said);
    assert_int_equal(clear_status, 1);
    assert_true(clear_said);
    assert_int_equal(verify_status, 1);
    assert_true(verify_said);
    assert_true(exists(tu_dir, KEY("a") ".bin") && exists(tu_dir, KEY("b") ".bin"));
}

/* A good entry in tu_dir, and its path. */
static void put_entry(const char *text, char *path, size_t size)
{
    struct elu_cache c;
    char why[1024];
    unsigned evicted;
    assert_true(elu_cache_open(&c, tu_dir, why, sizeof why));
    const struct elu_cache_key key = elu_cache_key_of(text, strlen(text));
    assert_true(elu_cache_put(&c, &key, ELU_BINARY_PTX, text, "payload", 7, &evicted, why,
                              sizeof why));
    elu_cache_path(&c, &key, ".bin", path, size);
}

/* An entry that cannot be read (here for want of permission; as well for
 * want of descriptors or memory, or an I/O error) may be good: list marks
 * it "?", not BAD; verify --delete names it, keeps it and fails, and
 * deletes the bad one beside it. */
static void test_verify_keeps_unreadable_entry(void **state)
{
    (void)state;
    char good[700], expected[800];
    put_entry("good", good, sizeof good);
    make_file(KEY("b") ".bin", 100);
    chmod(good, 0);
    permissions_apply(true);
    const int list_status = cli("list", NULL);
    const bool listed = strstr(output, "  ?   ") && strstr(output, "Permission denied");
    const int status = cli("verify", "--delete", NULL);
    permissions_apply(false);
    chmod(good, 0600);
    assert_int_equal(list_status, 0);
    assert_true(listed);
    snprintf(expected, sizeof expected, "cannot read %s: Permission denied", good);
    if (status != 1 || !strstr(output, expected))
        fail_msg("exit %d, %s", status, output);
    assert_int_equal(access(good, F_OK), 0);
    assert_false(exists(tu_dir, KEY("b") ".bin"));
    assert_int_equal(cli("verify", NULL), 0);
}

/* A directory elu-cache cannot list: each command says so once, prints
 * nothing on stdout (no totals of nothing) and fails. */
static void test_unlistable_directory(void **state)
{
    (void)state;
    static const char *const commands[] = {"list", "stats", "verify", "trim", "clear"};
    char out_path[600], stdout_text[5][256] = {{0}}, said[5][4096];
    int status[5];
    make_file(KEY("a") ".bin", 100);
    snprintf(out_path, sizeof out_path, "%s/stdout", tu_dir);
    permissions_apply(true);
    chmod(tu_dir, 0300);
    for (size_t i = 0; i < 5; i++) {
        status[i] = run_cli_to(out_path, "--dir", tu_dir, commands[i], NULL);
        snprintf(said[i], sizeof said[i], "%.4000s", output);
        FILE *f = fopen(out_path, "r");
        assert_non_null(f);
        stdout_text[i][fread(stdout_text[i], 1, sizeof stdout_text[i] - 1, f)] = '\0';
        fclose(f);
    }
    chmod(tu_dir, 0700);
    permissions_apply(false);
    for (size_t i = 0; i < 5; i++) {
        const char *first = strstr(said[i], "cannot read");
        if (status[i] != 1 || *stdout_text[i] || !first ||
            strstr(first + 1, "cannot read"))
            fail_msg("%s: exit %d, stdout \"%s\", stderr \"%s\"", commands[i], status[i],
                     stdout_text[i], said[i]);
    }
    assert_true(exists(tu_dir, KEY("a") ".bin"));
}

/* An invalid libelu variable is warned of before anything is done; the
 * command does its work with the default, as libelu would. */
static void test_invalid_environment_warned(void **state)
{
    (void)state;
    make_file(KEY("a") ".bin", 100);
    static const char *const commands[] = {"stats", "trim"};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(run_cli_to("/dev/null", "--dir", tu_dir, commands[i], NULL), 0);
        assert_null(strstr(output, "warning"));
        setenv("ELU_CACHE_MAX_BYTES", "abc", 1);
        const int status = run_cli_to("/dev/null", "--dir", tu_dir, commands[i], NULL);
        unsetenv("ELU_CACHE_MAX_BYTES");
        if (status != 0 || !strstr(output, "warning: ELU_CACHE_MAX_BYTES=\"abc\" is not"))
            fail_msg("%s: exit %d, %s", commands[i], status, output);
    }
    assert_true(exists(tu_dir, KEY("a") ".bin")); /* the default cap held */
}

static void test_untrusted_directory(void **state)
{
    (void)state;
    chmod(tu_dir, 0777);
    assert_int_equal(cli("list", NULL), 1);
    assert_non_null(strstr(output, "writable by anyone"));
}

static void test_warm_list_stats_verify_trim_clear(void **state)
{
    (void)state;
    const char *why;
    if (!elu_nvrtc_load(&why))
        skip();
    assert_int_equal(cli("warm", "--dtype", "f32,bf16", "--sm=90", "--celu", "0.5", NULL), 0);
    assert_int_equal(lines(output), 2);
    assert_int_equal(cli("warm", "--sm", "80", "--selu", NULL), 0);
    assert_int_equal(cli("list", NULL), 0);
    assert_int_equal(lines(output), 4); /* with bf16's forward table */
    assert_non_null(strstr(output, "bf16 scale*alpha=0.5"));
    assert_non_null(strstr(output, "  table  "));
    assert_non_null(strstr(output, "-arch=sm_80"));
    assert_int_equal(cli("stats", NULL), 0);
    assert_non_null(strstr(output, "entries:     4"));
    assert_int_equal(cli("verify", NULL), 0);

    /* Damage one entry: verify names it and fails; --delete removes it. */
    char entry[1024];
    assert_int_equal(cli("list", NULL), 0);
    snprintf(entry, sizeof entry, "%s/%.32s.bin", tu_dir, output);
    FILE *f = fopen(entry, "r+b");
    fseek(f, -3, SEEK_END);
    fputc('!', f);
    fclose(f);
    assert_int_equal(cli("verify", NULL), 1);
    assert_non_null(strstr(output, "checksum mismatch"));
    assert_int_equal(cli("verify", "--delete", NULL), 1);
    assert_non_null(strstr(output, "(deleted)"));
    assert_int_equal(cli("verify", NULL), 0);

    assert_int_equal(cli("trim", "--max-bytes", "1", NULL), 0);
    assert_non_null(strstr(output, "evicted 3 entries"));
    assert_int_equal(cli("warm", "--sm", "90", NULL), 0);
    assert_int_equal(cli("clear", NULL), 0);
    assert_int_equal(cli("stats", NULL), 0);
    assert_non_null(strstr(output, "entries:     0"));
    assert_non_null(strstr(output, "lock files:  0"));
}

/* An ELU_AUTOTUNE record lists as kind "tune", with what it says, and
 * verifies like any entry. */
static void test_tuning_entry_listed(void **state)
{
    (void)state;
    struct elu_cache c;
    char why[1024];
    assert_true(elu_cache_open(&c, tu_dir, why, sizeof why));
    struct elu_tuning t;
    elu_tune_heuristic(132 * 2048, &t);
    const struct elu_cache_key key = elu_jit_tuning_key("NVIDIA H200", 90, ELU_F32);
    unsigned evicted;
    assert_true(elu_cache_put(&c, &key, ELU_BINARY_TUNING, "launch shapes for f32", &t,
                              sizeof t, &evicted, why, sizeof why));
    assert_int_equal(cli("list", NULL), 0);
    assert_non_null(strstr(output, "  tune   "));
    assert_non_null(strstr(output, "launch shapes for f32"));
    assert_int_equal(cli("verify", NULL), 0);
}

/* -------- --version, --json, warm's report, the man page -------- */

/* python3 -c script ARGS... (NULL-terminated), which says on stderr what it
 * finds wrong: whether it exits 0. */
static bool python_agrees(const char *script, ...)
{
    const char *argv[16] = {"python3", "-c", script};
    int n = 3;
    va_list ap;
    va_start(ap, script);
    for (const char *a; n < 15 && (a = va_arg(ap, const char *));)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* `elu-cache --version` anywhere: libelu's version, exit 0. */
static void test_version(void **state)
{
    (void)state;
    char expected[64];
    snprintf(expected, sizeof expected, "elu-cache (libelu) %s\n", elu_version_string());
    assert_int_equal(run_cli("--version", NULL), 0);
    assert_string_equal(output, expected);
    assert_int_equal(cli("list", "--version", NULL), 0);
    assert_string_equal(output, expected);
    assert_int_equal(run_cli("--version=1", NULL), 2);
}

/* list --json: an object per entry, in name order, every member there;
 * argv: the output, the directory, then KEY:STATE for each entry. */
static const char LIST_JSON_CHECK[] =
    "import datetime, json, os, sys\n"
    "path, directory, *expected = sys.argv[1:]\n"
    "doc = json.load(open(path, encoding='utf-8'))\n"
    "keys = [e['key'] for e in doc]\n"
    "assert keys == sorted(keys), keys\n"
    "assert sorted(e['key'] + ':' + e['state'] for e in doc) == sorted(expected), doc\n"
    "members = ['key', 'kind', 'size', 'last_use', 'last_use_epoch', 'state',\n"
    "           'description', 'problem']\n"
    "for e in doc:\n"
    "    assert list(e) == members, e\n"
    "    st = os.lstat(os.path.join(directory, e['key'] + '.bin'))\n"
    "    assert e['last_use_epoch'] == int(st.st_mtime), e\n"
    "    utc = datetime.datetime.fromtimestamp(int(st.st_mtime), datetime.timezone.utc)\n"
    "    assert e['last_use'] == utc.strftime('%Y-%m-%dT%H:%M:%SZ'), e\n"
    "    ok = e['state'] == 'ok'\n"
    "    assert (e['kind'] == 'ptx') == ok and (e['description'] == 'good') == ok, e\n"
    "    assert isinstance(e['problem'], str) != ok, e\n"
    "    assert e['size'] == (None if e['state'] == 'not regular' else st.st_size), e\n";

/* Every state list --json tells: ok, bad, not regular, and (for want of
 * permission) unreadable. */
static void test_list_json(void **state)
{
    (void)state;
    char good[700], out[600], ok[64], unreadable[64], link[700], target[600];
    assert_int_equal(cli("list", "--json", NULL), 0);
    assert_string_equal(output, "[]\n");
    put_entry("good", good, sizeof good);
    make_file(KEY("b") ".bin", 100);
    snprintf(target, sizeof target, "%s/target", tu_dir);
    snprintf(link, sizeof link, "%s/" KEY("c") ".bin", tu_dir);
    assert_int_equal(symlink(target, link), 0);
    snprintf(out, sizeof out, "%s/out.json", tu_dir);
    snprintf(ok, sizeof ok, "%.32s:ok", strrchr(good, '/') + 1);
    snprintf(unreadable, sizeof unreadable, "%.32s:unreadable", strrchr(good, '/') + 1);
    assert_int_equal(run_cli_to(out, "--dir", tu_dir, "list", "--json", NULL), 0);
    assert_true(python_agrees(LIST_JSON_CHECK, out, tu_dir, ok, KEY("b") ":bad",
                              KEY("c") ":not regular", NULL));

    chmod(good, 0);
    permissions_apply(true);
    const int status = run_cli_to(out, "--dir", tu_dir, "list", "--json", NULL);
    permissions_apply(false);
    chmod(good, 0600);
    assert_int_equal(status, 0);
    assert_true(python_agrees(LIST_JSON_CHECK, out, tu_dir, unreadable, KEY("b") ":bad",
                              KEY("c") ":not regular", NULL));
}

/* stats --json: the numbers of the text output; argv: the JSON, the text,
 * then entries, bytes, temp_files, lock_files, not_regular. */
static const char STATS_JSON_CHECK[] =
    "import json, sys, time\n"
    "doc = json.load(open(sys.argv[1], encoding='utf-8'))\n"
    "text = dict(line.split(':', 1) for line in open(sys.argv[2]).read().splitlines())\n"
    "text = {k: v.strip() for k, v in text.items()}\n"
    "assert list(doc) == ['directory', 'shared', 'entries', 'bytes', 'cap',\n"
    "    'last_use_oldest', 'last_use_oldest_epoch', 'last_use_newest',\n"
    "    'last_use_newest_epoch', 'temp_files', 'lock_files', 'not_regular'], doc\n"
    "counts = ['entries', 'bytes', 'temp_files', 'lock_files', 'not_regular']\n"
    "assert [doc[k] for k in counts] == [int(n) for n in sys.argv[3:]], doc\n"
    "assert text['directory'] == doc['directory'] + (' (shared)' if doc['shared'] else '')\n"
    "for k in counts:\n"
    "    assert text[k.replace('_', ' ')].split()[0] == str(doc[k]), (k, text, doc)\n"
    "assert text['cap'] == '%d bytes' % doc['cap'], doc\n"
    "def local(t):\n"
    "    return '-' if t is None else time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t))\n"
    "for end in ['oldest', 'newest']:\n"
    "    t = doc['last_use_' + end + '_epoch']\n"
    "    assert (t is None) == (doc['entries'] == 0), doc\n"
    "    assert end + ' ' + local(t) in text['last used'], (text, doc)\n"
    "    utc = None if t is None else time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(t))\n"
    "    assert doc['last_use_' + end] == utc, doc\n";

static void check_stats_json(const char *counts[5])
{
    char json[600], text[600];
    snprintf(json, sizeof json, "%s/stats.json", tu_dir);
    snprintf(text, sizeof text, "%s/stats.txt", tu_dir);
    assert_int_equal(run_cli_to(json, "--dir", tu_dir, "stats", "--json", NULL), 0);
    assert_int_equal(run_cli_to(text, "--dir", tu_dir, "stats", NULL), 0);
    assert_true(python_agrees(STATS_JSON_CHECK, json, text, counts[0], counts[1], counts[2],
                              counts[3], counts[4], NULL));
}

static void test_stats_json(void **state)
{
    (void)state;
    check_stats_json((const char *[5]){"0", "0", "0", "0", "0"});
    plant_not_regular();
    make_file(KEY("7") ".bin.tmp.1", 5);
    make_file(KEY("8") ".lock", 0);
    check_stats_json((const char *[5]){"1", "100", "1", "1", "6"});
}

/* What the JSON holds where a string holds the bytes given in hex: the
 * output (strict UTF-8, no raw control character but newlines between
 * members) decoded as Python decodes the bytes with errors='replace';
 * argv: the output, the member (of the document, or of its first element),
 * the hex. */
static const char JSON_STRING_CHECK[] =
    "import json, sys\n"
    "path, member, hex_bytes = sys.argv[1:]\n"
    "raw = open(path, 'rb').read()\n"
    "assert all(b >= 0x20 and b != 0x7f or b == 0x0a for b in raw), raw\n"
    "doc = json.loads(raw.decode('utf-8'))\n"
    "doc = doc[0] if isinstance(doc, list) else doc\n"
    "want = bytes.fromhex(hex_bytes).decode('utf-8', 'replace')\n"
    "assert doc[member] == want, (doc[member], want)\n";

static void hex_of(const char *bytes, size_t len, char *hex)
{
    for (size_t i = 0; i < len; i++)
        sprintf(hex + 2 * i, "%02x", (unsigned char)bytes[i]);
}

/* Quotes, backslashes, control characters, DEL, UTF-8 of 2, 3 and 4 bytes,
 * and what is not UTF-8: stray, overlong, truncated (also at the end),
 * surrogate, beyond U+10FFFF. '#' becomes a NUL in the entry. */
static const char ODD_TEXT[] = "q\" b\\ n\n t\t c\x01 e\x1b d\x7f #=nul 2\xc3\xa9 3\xe2\x82\xac "
                               "4\xf0\x9f\x98\x80 ff\xff 80\x80 c0\xc0\xaf e2\xe2\x82 "
                               "ed\xed\xa0\x80 f4\xf4\x90\x80\x80 end\xf0\x9f\x98";

/* An entry described by ODD_TEXT, its '#' made a NUL (and the checksum
 * made again: entries are read by length, and may hold any byte). */
static void put_odd_entry(void)
{
    struct elu_cache c;
    char why[1024], path[700];
    unsigned evicted;
    assert_true(elu_cache_open(&c, tu_dir, why, sizeof why));
    const struct elu_cache_key key = elu_cache_key_of("odd", 3);
    assert_true(elu_cache_put(&c, &key, ELU_BINARY_PTX, ODD_TEXT, "payload", 7, &evicted, why,
                              sizeof why));
    elu_cache_path(&c, &key, ".bin", path, sizeof path);
    char entry[ELU_CACHE_HEADER_SIZE + sizeof ODD_TEXT + 7];
    const size_t body = sizeof ODD_TEXT - 1 + 7;
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fread(entry, 1, sizeof entry, f), ELU_CACHE_HEADER_SIZE + body);
    *strchr(entry + ELU_CACHE_HEADER_SIZE, '#') = '\0';
    /* The checksum's place in the header (cache.h): after the magic, the
     * format, the kind, the key and the size. */
    const uint64_t checksum = XXH3_64bits(entry + ELU_CACHE_HEADER_SIZE, body);
    memcpy(entry + 8 + 4 + 4 + 16 + 8, &checksum, sizeof checksum);
    rewind(f);
    assert_int_equal(fwrite(entry, 1, ELU_CACHE_HEADER_SIZE + body, f),
                     ELU_CACHE_HEADER_SIZE + body);
    fclose(f);
}

/* A description and a directory of any bytes come out as valid JSON that
 * reads as those bytes, each sequence that is not UTF-8 as U+FFFD. */
static void test_json_strings_escaped(void **state)
{
    (void)state;
    char text[sizeof ODD_TEXT], hex[2 * sizeof ODD_TEXT + 1400], dir[700], out[700];
    put_odd_entry();
    memcpy(text, ODD_TEXT, sizeof text);
    *strchr(text, '#') = '\0';
    hex_of(text, sizeof text - 1, hex);
    snprintf(out, sizeof out, "%s/out.json", tu_dir);
    assert_int_equal(run_cli_to(out, "--dir", tu_dir, "list", "--json", NULL), 0);
    assert_true(python_agrees(JSON_STRING_CHECK, out, "description", hex, NULL));
    assert_int_equal(cli("verify", NULL), 0);

    snprintf(dir, sizeof dir, "%s/%s", tu_dir, "\"dir\" \\ \n\t\x1b\xff\xc3\xa9\xe2\x82");
    assert_int_equal(mkdir(dir, 0700), 0);
    hex_of(dir, strlen(dir), hex);
    assert_int_equal(run_cli_to(out, "--dir", dir, "stats", "--json", NULL), 0);
    assert_true(python_agrees(JSON_STRING_CHECK, out, "directory", hex, NULL));
}

/* --json is list's and stats' only; nothing is printed on stdout (not even
 * "[]") where the directory cannot be read: test_unlistable_directory's
 * case, with --json. */
static void test_json_only_where_it_belongs(void **state)
{
    (void)state;
    char out[600], said[256] = "";
    assert_int_equal(cli("verify", "--json", NULL), 2);
    assert_int_equal(cli("warm", "--sm", "90", "--json", NULL), 2);
    assert_int_equal(cli("list", "--json=yes", NULL), 2);
    snprintf(out, sizeof out, "%s/stdout", tu_dir);
    permissions_apply(true);
    chmod(tu_dir, 0300);
    const int list_status = run_cli_to(out, "--dir", tu_dir, "list", "--json", NULL);
    chmod(tu_dir, 0700);
    permissions_apply(false);
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    said[fread(said, 1, sizeof said - 1, f)] = '\0';
    fclose(f);
    assert_int_equal(list_status, 1);
    assert_string_equal(said, "");
}

/* Every entry in dir made bad (a file of junk in its place). */
static void spoil_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        const size_t len = strlen(e->d_name);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".bin") == 0)
            assert_int_equal(truncate(path, 100), 0);
    }
    closedir(d);
}

/* warm says per dtype whether it compiled or found the entry; what it
 * compiles in place of a bad entry, it says so. */
static void test_warm_says_compiled_or_found(void **state)
{
    (void)state;
    const char *why;
    if (!elu_nvrtc_load(&why))
        skip();
    char dir[600];
    snprintf(dir, sizeof dir, "%s/warm", tu_dir);
    static const char *const said[] = {
        "compiled f32 elu(alpha=1.5, scale=1, input_scale=1) sm_90\n"
        "compiled bf16 elu(alpha=1.5, scale=1, input_scale=1) sm_90\n",
        "found f32 elu(alpha=1.5, scale=1, input_scale=1) sm_90\n"
        "found bf16 elu(alpha=1.5, scale=1, input_scale=1) sm_90\n",
        "compiled f32 elu(alpha=1.5, scale=1, input_scale=1) sm_90 (in place of a bad entry)\n"
        "compiled bf16 elu(alpha=1.5, scale=1, input_scale=1) sm_90 (in place of a bad "
        "entry)\n"};
    for (size_t i = 0; i < 3; i++) {
        if (i == 2)
            spoil_entries(dir);
        const int status =
            run_cli("--dir", dir, "warm", "--sm", "90", "--dtype", "f32,bf16", "--alpha",
                    "1.5", NULL);
        if (status != 0 || strcmp(output, said[i]) != 0)
            fail_msg("warm %zu: exit %d, \"%s\"", i + 1, status, output);
    }
}

/* The man page and --help: the same options, commands and exit statuses;
 * argv: --help's output, the man page. */
static const char MAN_CHECK[] =
    "import re, sys\n"
    "usage = open(sys.argv[1]).read()\n"
    "man = open(sys.argv[2]).read()\n"
    "man = re.sub(r'\\\\f[BIRP]|\\\\[%&]|\\\\ ', '', man).replace('\\\\-', '-')\n"
    "def between(text, start, end):\n"
    "    return text.split(start, 1)[1].split(end, 1)[0]\n"
    "def options(text):\n"
    "    return set(re.findall(r'(?<![\\w-])--[a-z][a-z-]*', text))\n"
    "assert options(usage) == options(man), options(usage) ^ options(man)\n"
    "commands = re.findall(r'^  ([a-z]+) ', between(usage, 'commands:', '\\n\\n'), re.M)\n"
    "man_commands = re.findall(r'^\\.TP\\n\\.BR? ([a-z]+)',\n"
    "                          between(man, '.SH COMMANDS', '.SH OPTIONS'), re.M)\n"
    "assert commands == man_commands, (commands, man_commands)\n"
    "statuses = re.findall(r'^  (\\d)  ', usage.split('exit status:')[1], re.M)\n"
    "man_statuses = re.findall(r'^\\.B (\\d)$', between(man, '.SH EXIT STATUS', '.SH '), re.M)\n"
    "assert statuses == man_statuses == ['0', '1', '2', '3'], (statuses, man_statuses)\n";

static void test_man_page_matches_help(void **state)
{
    (void)state;
    const char *man = getenv("ELU_CACHE_MAN");
    char usage[600];
    assert_non_null(man);
    snprintf(usage, sizeof usage, "%s/usage", tu_dir);
    assert_int_equal(run_cli_to(usage, "--help", NULL), 0);
    assert_true(python_agrees(MAN_CHECK, usage, man, NULL));
}

/* tu_dir, and the default cache directory in it, not yet made: no test
 * reaches the user's. */
static int setup(void **state)
{
    tu_dir_setup(state);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/default", tu_dir);
    setenv("ELU_CACHE_DIR", dir, 1);
    return 0;
}

static int teardown(void **state)
{
    unsetenv("ELU_CACHE_DIR");
    return tu_dir_teardown(state);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_help_and_usage),
        T(test_command_line),
        T(test_empty_dir_refused),
        T(test_nothing_created),
        T(test_warm_checks_every_argument_first),
        T(test_trim_max_bytes_strict),
        T(test_not_regular_files),
        T(test_lock_in_use),
        T(test_read_only_directory),
        T(test_verify_keeps_unreadable_entry),
        T(test_unlistable_directory),
        T(test_invalid_environment_warned),
        T(test_untrusted_directory),
        T(test_warm_list_stats_verify_trim_clear),
        T(test_tuning_entry_listed),
        T(test_version),
        T(test_list_json),
        T(test_stats_json),
        T(test_json_strings_escaped),
        T(test_json_only_where_it_belongs),
        T(test_warm_says_compiled_or_found),
        T(test_man_page_matches_help),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (*nobody_dir)
        tu_rmdir(nobody_dir);
    return failed;
}
