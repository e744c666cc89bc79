/* NVRTC compilation and the disk cache. NVRTC works without a GPU, so these
 * run for real on CI; they skip only where NVRTC cannot be loaded. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "builtin_ptx.h"
#include "cache.h"
#include "cuda_loader.h"
#include "jit.h"
#include "testutil.h"

#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void need_nvrtc(void)
{
    const char *why;
    if (!elu_nvrtc_load(&why)) {
        fprintf(stderr, "skipping: NVRTC unavailable: %s\n", why);
        skip();
    }
}

/* The only entry in tu_dir, read whole and parsed into *e (which points into
 * the returned bytes). */
static unsigned char *read_entry(char *path, size_t path_size, size_t *size,
                                 struct elu_cache_entry *e)
{
    assert_true(tu_only_entry(tu_dir, path, path_size));
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    rewind(f);
    unsigned char *data = malloc(*size + 1);
    assert_int_equal(fread(data, 1, *size, f), *size);
    fclose(f);
    data[*size] = 0;
    const char *bad = elu_cache_parse(data, *size, NULL, e);
    if (bad)
        fail_msg("%s: %s", path, bad);
    return data;
}

static void write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, size, f), size);
    fclose(f);
}

static void test_precompile_cubins(void **state)
{
    (void)state;
    need_nvrtc();
    const int sms[] = {75, 80, 90};
    for (int d = 0; d < 4; d++) {
        for (int i = 0; i < 3; i++) {
            elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = tu_dir);
            const elu_params p = elu_params_selu(tu_dtypes[d]);
            assert_int_equal(elu_precompile(ctx, &p, sms[i]), ELU_OK);
            const elu_ctx_stats s = tu_stats(ctx);
            const bool half = tu_dtypes[d] == ELU_F16 || tu_dtypes[d] == ELU_BF16;
            assert_int_equal(s.compiles, 1);
            /* and, once for every sm, a half type's forward table */
            assert_int_equal(s.disk_writes, 1 + (half && i == 0));
            char path[1024];
            size_t size;
            struct elu_cache_entry entry;
            unsigned char *e = read_entry(path, sizeof path, &size, &entry);
            assert_int_equal(entry.kind, ELU_BINARY_CUBIN);
            char *about = strndup(entry.description, entry.description_len);
            assert_true(strncmp(about, tu_dtype_names[d], strlen(tu_dtype_names[d])) == 0);
            free(about);
            const unsigned char *elf = entry.payload;
            assert_memory_equal(elf, "\x7f" "ELF", 4);
            assert_int_equal(elf[4], 2);                   /* 64-bit */
            assert_int_equal(elf[18] | elf[19] << 8, 190); /* EM_CUDA */
            free(e);
            struct stat st;
            assert_int_equal(stat(path, &st), 0);
            assert_int_equal(st.st_mode & 0777, 0600);
            unlink(path);
            elu_ctx_destroy(ctx);
        }
    }
}

/* An arch newer than NVRTC knows gets PTX for the newest one it does. */
static void test_ptx_fallback(void **state)
{
    (void)state;
    need_nvrtc();
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = tu_dir);
    const elu_params p = elu_params_elu(ELU_F16, 1.0);
    assert_int_equal(elu_precompile(ctx, &p, 9990), ELU_OK);
    char path[1024];
    size_t size;
    struct elu_cache_entry entry;
    unsigned char *e = read_entry(path, sizeof path, &size, &entry);
    assert_int_equal(entry.kind, ELU_BINARY_PTX);
    char *ptx = strndup(entry.payload, entry.size);
    assert_non_null(strstr(ptx, ".version"));
    assert_non_null(strstr(ptx, ".target sm_"));
    assert_non_null(strstr(ptx, ".entry elu_forward"));
    assert_non_null(strstr(ptx, ".entry elu_backward_output"));
    assert_non_null(strstr(ptx, ".entry elu_strided"));
    free(ptx);
    free(e);
    /* Older than every arch NVRTC supports. */
    assert_int_equal(elu_precompile(ctx, &p, 20), ELU_ERR_UNSUPPORTED);
    elu_ctx_destroy(ctx);
}

static void test_round_trip(void **state)
{
    (void)state;
    need_nvrtc();
    const elu_params p = elu_params_celu(ELU_F32, 0.7);
    elu_ctx *a = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = tu_dir),
            *b = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = tu_dir);
    assert_int_equal(elu_precompile(a, &p, 90), ELU_OK);
    assert_int_equal(elu_precompile(b, &p, 90), ELU_OK);
    elu_ctx_stats sa = tu_stats(a), sb = tu_stats(b);
    assert_int_equal(sa.compiles, 1);
    assert_int_equal(sa.disk_writes, 1);
    assert_int_equal(sb.compiles, 0);
    assert_int_equal(sb.disk_hits, 1);
    /* Another specialization is another entry. */
    const elu_params q = elu_params_celu(ELU_F32, 0.8);
    assert_int_equal(elu_precompile(b, &q, 90), ELU_OK);
    assert_int_equal(tu_stats(b).compiles, 1);
    elu_ctx_destroy(a);
    elu_ctx_destroy(b);
}

/* Damage the entry with `damage`, then check that a new context rejects it,
 * recompiles and leaves a valid entry that a third context hits. */
static void check_recovers(void (*damage)(const char *path, unsigned char *e,
                                          size_t size))
{
    const elu_params p = elu_params_elu(ELU_BF16, 1.25);
    elu_ctx *a = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = tu_dir);
    assert_int_equal(elu_precompile(a, &p, 80), ELU_OK);
    char path[1024];
    size_t size;
    struct elu_cache_entry entry;
    unsigned char *e = read_entry(path, sizeof path, &size, &entry);
    damage(path, e, size);
    free(e);
    elu_ctx *b = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = tu_dir),
            *c = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = tu_dir);
    assert_int_equal(elu_precompile(b, &p, 80), ELU_OK);
    const elu_ctx_stats sb = tu_stats(b);
    assert_int_equal(sb.disk_rejects, 1);
    assert_int_equal(sb.compiles, 1);
    assert_int_equal(sb.disk_writes, 1);
    assert_non_null(strstr(elu_ctx_last_error(b), "rejected"));
    assert_int_equal(elu_precompile(c, &p, 80), ELU_OK);
    assert_int_equal(tu_stats(c).disk_hits, 2); /* the binary and its table */
    assert_int_equal(tu_stats(c).compiles, 0);
    elu_ctx_destroy(a);
    elu_ctx_destroy(b);
    elu_ctx_destroy(c);
}

static void flip_payload_byte(const char *path, unsigned char *e, size_t size)
{
    e[size - 7] ^= 0x40;
    write_file(path, e, size);
}

static void truncate_entry(const char *path, unsigned char *e, size_t size)
{
    write_file(path, e, size / 2);
}

/* A valid entry of another key, planted under this key's name. */
static void plant_other_key(const char *path, unsigned char *e, size_t size)
{
    (void)e;
    (void)size;
    elu_ctx *other = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = tu_dir);
    const elu_params q = elu_params_elu(ELU_BF16, 1.5);
    char other_path[1024];
    assert_int_equal(elu_precompile(other, &q, 80), ELU_OK);
    elu_ctx_destroy(other);
    /* Two entries now; move the new one over the old. */
    unlink(path);
    assert_true(tu_only_entry(tu_dir, other_path, sizeof other_path));
    assert_int_equal(rename(other_path, path), 0);
}

static void garbage_header(const char *path, unsigned char *e, size_t size)
{
    memset(e, 'x', 16);
    write_file(path, e, size);
}

static void test_corrupt_entry_replaced(void **state)
{
    (void)state;
    need_nvrtc();
    check_recovers(flip_payload_byte);
}

static void test_truncated_entry_replaced(void **state)
{
    (void)state;
    need_nvrtc();
    check_recovers(truncate_entry);
}

static void test_wrong_key_entry_replaced(void **state)
{
    (void)state;
    need_nvrtc();
    check_recovers(plant_other_key);
}

static void test_garbage_entry_replaced(void **state)
{
    (void)state;
    need_nvrtc();
    check_recovers(garbage_header);
}

/* A cache directory that cannot exist: below a regular file. Root ignores
 * permission bits, so this is the failure every user can hit. */
static void test_uncreatable_cache_dir(void **state)
{
    (void)state;
    char file[600], sub[700];
    snprintf(file, sizeof file, "%s/plain-file", tu_dir);
    write_file(file, "x", 1);
    snprintf(sub, sizeof sub, "%s/cache", file);
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = sub);
    elu_ctx_info info;
    assert_int_equal(elu_ctx_get_info(ctx, &info), ELU_OK);
    assert_false(info.disk_cache);
    assert_string_equal(info.cache_dir, "");
    assert_int_equal(tu_stats(ctx).disk_errors, 1);
    assert_non_null(strstr(elu_ctx_last_error(ctx), "plain-file"));
    float x[4] = {-1, 1, -2, 2}, y[4];
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    assert_int_equal(elu_run(ctx, &p, x, y, 4, NULL), ELU_OK);
    assert_int_equal(elu_prepare(ctx, &p), ELU_OK);
    assert_int_equal(elu_precompile(ctx, &p, 90), ELU_ERR_IO);
    elu_ctx_destroy(ctx);
}

static void test_cache_dir_created_private(void **state)
{
    (void)state;
    char nested[700];
    snprintf(nested, sizeof nested, "%s/a/b/elu", tu_dir);
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = nested);
    struct stat st;
    assert_int_equal(stat(nested, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    elu_ctx_info info;
    elu_ctx_get_info(ctx, &info);
    assert_true(info.disk_cache);
    assert_string_equal(info.cache_dir, nested);
    elu_ctx_destroy(ctx);
}

/* ELU_CACHE_DIR and ELU_CACHE_DISABLE, read at context creation. */
static void test_cache_environment(void **state)
{
    (void)state;
    elu_ctx_info info;
    setenv("ELU_CACHE_DIR", tu_dir, 1);
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU);
    elu_ctx_get_info(ctx, &info);
    assert_string_equal(info.cache_dir, tu_dir);
    elu_ctx_destroy(ctx);
    setenv("ELU_CACHE_DISABLE", "1", 1);
    ctx = tu_ctx(.backend = ELU_BACKEND_CPU);
    elu_ctx_get_info(ctx, &info);
    assert_false(info.disk_cache);
    elu_ctx_destroy(ctx);
    unsetenv("ELU_CACHE_DISABLE");
    unsetenv("ELU_CACHE_DIR");
}

/* Two processes compile the same key at once: both succeed and the entry
 * left behind is valid. */
static void test_two_processes_same_key(void **state)
{
    (void)state;
    need_nvrtc();
    const elu_params p = elu_params_elu(ELU_F64, 0.9);
    pid_t pids[2];
    for (int i = 0; i < 2; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = tu_dir);
            _exit(elu_precompile(ctx, &p, 90) == ELU_OK ? 0 : 1);
        }
    }
    for (int i = 0; i < 2; i++) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    char path[1024];
    assert_true(tu_only_entry(tu_dir, path, sizeof path)); /* no temp left over */
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = tu_dir);
    assert_int_equal(elu_precompile(ctx, &p, 90), ELU_OK);
    assert_int_equal(tu_stats(ctx).disk_hits, 1);
    assert_int_equal(tu_stats(ctx).compiles, 0);
    elu_ctx_destroy(ctx);
}

/* Whether the binary's bytes hold name, NUL-terminated (a symbol). */
static bool holds_symbol(const struct elu_binary *b, const char *name)
{
    const size_t len = strlen(name) + 1;
    for (size_t i = 0; i + len <= b->size; i++)
        if (memcmp((const char *)b->data + i, name, len) == 0)
            return true;
    return false;
}

/* Each dtype's generic module, whole and in its quick parts: each compiles,
 * and holds its own kernels only, and none a forward table. */
static void test_generic_parts(void **state)
{
    (void)state;
    need_nvrtc();
    static const char *const rest[] = {"elu_backward_input", "elu_backward_output",
                                       "elu_strided"};
    for (int d = 0; d < 4; d++) {
        elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = tu_dir);
        struct elu_target t;
        assert_int_equal(elu_jit_target(ctx, 90, ELU_BINARY_CUBIN, &t), ELU_OK);
        static const enum elu_part parts[] = {ELU_PART_FORWARD, ELU_PART_FORWARD_UNIT_NIP,
                                              ELU_PART_REST, ELU_PART_ALL};
        const bool half = tu_dtypes[d] == ELU_F16 || tu_dtypes[d] == ELU_BF16;
        for (int i = 0; i < 4; i++) {
            const enum elu_part part = parts[i];
            const bool whole = part == ELU_PART_ALL;
            const struct elu_spec spec = {{tu_dtypes[d], 0, 0, 0}, true, part};
            struct elu_binary bin;
            const elu_status status = elu_jit_obtain(ctx, &spec, &t, &bin);
            if (status != ELU_OK)
                fail_msg("%s part %d: %s", tu_dtype_names[d], (int)part, elu_ctx_last_error(ctx));
            assert_int_equal(holds_symbol(&bin, "elu_forward"), part != ELU_PART_REST);
            for (int k = 0; k < 3; k++)
                assert_int_equal(holds_symbol(&bin, rest[k]), part == ELU_PART_REST || whole);
            assert_int_equal(holds_symbol(&bin, "elu_forward_computed"), whole && half);
            assert_int_equal(holds_symbol(&bin, "elu_forward_contiguous"), whole && !half);
            assert_false(holds_symbol(&bin, "elu_forward_table")); /* no table to allocate */
            free(bin.data);
        }
        assert_int_equal(tu_stats(ctx).compiles, 4);
        elu_ctx_destroy(ctx);
    }
}

/* The PTX built in (where the build had NVRTC): text for an arch that
 * NVRTC targets, for each quick forward part, with its kernel, which
 * loads its packs whole (a vector load); none for other modules. */
static void test_builtin_ptx(void **state)
{
    (void)state;
    int arch = 0;
    const struct elu_spec f32 = {{ELU_F32, 0, 0, 0}, true, ELU_PART_FORWARD};
    if (!elu_builtin_ptx(&f32, &arch)) {
        fprintf(stderr, "skipping: libelu was built without PTX (no NVRTC at build)\n");
        skip();
    }
    for (int d = 0; d < 4; d++) {
        const bool half = tu_dtypes[d] == ELU_F16 || tu_dtypes[d] == ELU_BF16;
        for (enum elu_part part = ELU_PART_ALL; part <= ELU_PART_FORWARD_UNIT_NIP; part++) {
            const struct elu_spec spec = {{tu_dtypes[d], 0, 0, 0}, true, part};
            const char *ptx = elu_builtin_ptx(&spec, &arch);
            const bool expected =
                part == ELU_PART_FORWARD || (part == ELU_PART_FORWARD_UNIT_NIP && !half);
            assert_int_equal(ptx != NULL, expected);
            if (!ptx)
                continue;
            assert_true(arch >= 75 && arch <= 90);
            assert_non_null(strstr(ptx, ".entry elu_forward("));
            assert_non_null(strstr(ptx, "ld.global.v"));
            assert_null(strstr(ptx, ".entry elu_backward_input("));
        }
        const struct elu_spec specialized = {{tu_dtypes[d], 1, 1, 1}, false, ELU_PART_FORWARD};
        assert_null(elu_builtin_ptx(&specialized, &arch));
    }
}

/* The files under dir, through its subdirectories (nftw's callback has no
 * argument of ours: the count is this file's, for the one child process
 * that counts). */
static int files_counted;
static int count_file(const char *path, const struct stat *st, int type, struct FTW *at)
{
    (void)path, (void)st, (void)at;
    files_counted += type == FTW_F;
    return 0;
}
static int files_under(const char *dir)
{
    files_counted = 0;
    nftw(dir, count_file, 16, FTW_PHYS);
    return files_counted;
}

/* test_nvrtc_cache_unused's new process (nothing of CUDA or NVRTC set up
 * before it sets CUDA_CACHE_PATH): 77 where a plain NVRTC compile leaves
 * that cache empty (it needs the CUDA driver, and NVRTC 12.9 or later);
 * else 0 if libelu's compile then adds no file to it. */
static int nvrtc_cache_child(const char *dir)
{
    char nv_dir[4200];
    snprintf(nv_dir, sizeof nv_dir, "%s/nv", dir);
    setenv("CUDA_CACHE_PATH", nv_dir, 1);
    const char *why;
    const struct elu_nvrtc_api *nv = elu_nvrtc_load(&why);
    elu_nvrtc_program prog;
    if (!nv || nv->CreateProgram(&prog, "extern \"C\" __global__ void k(float *y) { *y = 1; }",
                                 "k.cu", 0, NULL, NULL) != 0)
        return 1;
    /* A cubin for sm_90, as libelu's compile below makes. */
    const char *const options[] = {"-arch=sm_90"};
    const int compiled = nv->CompileProgram(prog, 1, options);
    nv->DestroyProgram(&prog);
    const int before = files_under(nv_dir);
    if (compiled != 0)
        return 1;
    if (before == 0)
        return 77;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    const elu_params p = elu_params_selu(ELU_F32);
    const elu_status status = elu_precompile(ctx, &p, 90);
    elu_ctx_destroy(ctx);
    const int after = files_under(nv_dir);
    fprintf(stderr, "NVRTC's own cache: %d files after a plain compile, %d after libelu's\n",
            before, after);
    return status == ELU_OK && after == before ? 0 : 2;
}

extern char **environ;

/* libelu's compiles leave NVRTC's own program cache (CUDA 12.9 and later,
 * in the driver's compute cache) alone: libelu keeps its own. Where that
 * cache is not in use (no CUDA driver, as on CI), there is nothing to
 * check: skipped. */
static void test_nvrtc_cache_unused(void **state)
{
    (void)state;
    need_nvrtc();
    char self[] = "/proc/self/exe", flag[] = "--nvrtc-cache-child";
    char *argv[] = {self, flag, tu_dir, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, self, NULL, NULL, argv, environ), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77) {
        fprintf(stderr, "skipping: NVRTC's own cache is not in use here\n");
        skip();
    }
    assert_int_equal(WEXITSTATUS(status), 0);
}

#define T(f) cmocka_unit_test_setup_teardown(f, tu_dir_setup, tu_dir_teardown)

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--nvrtc-cache-child") == 0)
        return nvrtc_cache_child(argv[2]);
    tu_seed();
    const struct CMUnitTest tests[] = {
        T(test_precompile_cubins),
        T(test_generic_parts),
        T(test_builtin_ptx),
        T(test_ptx_fallback),
        T(test_round_trip),
        T(test_corrupt_entry_replaced),
        T(test_truncated_entry_replaced),
        T(test_wrong_key_entry_replaced),
        T(test_garbage_entry_replaced),
        T(test_uncreatable_cache_dir),
        T(test_cache_dir_created_private),
        T(test_cache_environment),
        T(test_two_processes_same_key),
        T(test_nvrtc_cache_unused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
