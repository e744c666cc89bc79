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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char output[65536];

/* Run elu-cache with the arguments (NULL-terminated) on tu_dir; its stdout and
 * stderr land in `output`; returns the exit code. */
static int cli(const char *first, ...)
{
    const char *argv[16] = {getenv("ELU_CACHE_CLI"), "--dir", tu_dir};
    int argc = 3;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 15; a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    int out[2];
    assert_int_equal(pipe(out), 0);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(out[1], 2);
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
    const char *argv[] = {getenv("ELU_CACHE_CLI"), "--help", NULL};
    const pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout))
            _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(cli("frobnicate", NULL), 2);
    assert_non_null(strstr(output, "--help"));
    assert_int_equal(cli("warm", NULL), 2); /* no --sm */
    assert_int_equal(cli("warm", "--sm", "90", "--dtype", "f8", NULL), 2);
    assert_int_equal(cli("trim", "--max-bytes", "lots", NULL), 2);
    assert_int_equal(cli("list", "extra", NULL), 2);
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
    assert_int_equal(cli("warm", "--sm", "90", "--dtype", "f32,bf16", "--celu", "0.5", NULL), 0);
    assert_int_equal(lines(output), 2);
    assert_int_equal(cli("warm", "--sm", "80", "--selu", NULL), 0);
    assert_int_equal(cli("list", NULL), 0);
    assert_int_equal(lines(output), 3);
    assert_non_null(strstr(output, "bf16 scale*alpha=0.5"));
    assert_non_null(strstr(output, "-arch=sm_80"));
    assert_int_equal(cli("stats", NULL), 0);
    assert_non_null(strstr(output, "entries:     3"));
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
    assert_non_null(strstr(output, "evicted 2 entries"));
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

#define T(f) cmocka_unit_test_setup_teardown(f, tu_dir_setup, tu_dir_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_help_and_usage),
        T(test_untrusted_directory),
        T(test_warm_list_stats_verify_trim_clear),
        T(test_tuning_entry_listed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
