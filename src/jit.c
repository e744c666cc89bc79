#include "jit.h"

#include "numerics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* kernels_src/elu_expm1.h, elu_dd.h, elu_forward_f32.h, elu_forward_f64.h,
 * elu_kernel_args.h and elu.cu, embedded at build: a module's source is
 * these in this order (elu_dd.h for f32 and f64, each forward header for
 * its dtype alone), after its own defines. */
extern const char elu_src_elu_expm1[], elu_src_elu_dd[], elu_src_elu_forward_f32[],
    elu_src_elu_forward_f64[], elu_src_elu_kernel_args[], elu_src_elu[];

/* NVRTC options besides the target; part of the cache key. Split
 * compilation optimizes the kernels of a module on several threads: a
 * module of all the kernels compiles sooner, its kernels as fast. Not for
 * the generic module's quick parts, which a first call waits for: there
 * starting the threads only costs. An NVRTC that does not know an option
 * compiles without it. Measurements: docs/DESIGN.md, "Compiling". */
static const char STD_OPTION[] = "-std=c++17";
static const char SPLIT_OPTION[] = "-split-compile=0";
/* NVRTC 12.4 and later: leave out the runtime's declarations that the
 * kernels do not use (textures, launches from the device, cudaMalloc...):
 * a shorter front end for the same cubin, byte for byte. */
static const char MINIMAL_OPTION[] = "-minimal";
/* For the generic module's quick parts only: NVRTC's lightest
 * fast-compile level, the one that shortens their compile ("max"
 * lengthens it). Their kernels only bridge the compile of the whole
 * generic module, which keeps full optimization, as specialized ones do. */
static const char FAST_OPTION[] = "-Ofc=min";
/* Last, NVRTC 12.9 and later: no program cache of NVRTC's own. libelu
 * keeps what it compiles in its disk cache; NVRTC's, in the driver's
 * compute cache (~/.nv/ComputeCache, shared by the user's processes), only
 * repeats it, and while shared it made a process that exited during its
 * builder's compile, beside another process compiling, crash or hang
 * (test_exit_while_building beside test_gpu; docs/DESIGN.md, "Compiling"). */
static const char NO_CACHE_OPTION[] = "--no-cache";

/* The options of a compile, the target's first, into out[]: their count.
 * The newest come last, for compile_program to drop. */
enum { MAX_OPTIONS = 5 };
static int options_of(const struct elu_spec *spec, const char *arch_option,
                      const char *out[MAX_OPTIONS])
{
    const bool quick = spec->part != ELU_PART_ALL;
    int count = 0;
    out[count++] = arch_option;
    out[count++] = STD_OPTION;
    if (!quick)
        out[count++] = SPLIT_OPTION;
    out[count++] = MINIMAL_OPTION;
    if (quick)
        out[count++] = FAST_OPTION;
    out[count++] = NO_CACHE_OPTION;
    return count;
}

static const struct elu_nvrtc_api *nvrtc(elu_ctx *ctx, elu_status *status)
{
    const char *why;
    const struct elu_nvrtc_api *nv = elu_nvrtc_load(&why);
    if (!nv)
        *status = elu_fail(ctx, ELU_ERR_UNSUPPORTED, "NVRTC unavailable: %s "
                           "(set ELU_NVRTC_LIBRARY to its path)", why);
    return nv;
}

int elu_jit_nvrtc_version(void)
{
    const char *why;
    const struct elu_nvrtc_api *nv = elu_nvrtc_load(&why);
    int major = 0, minor = 0;
    if (!nv || nv->Version(&major, &minor) != 0)
        return 0;
    return 1000 * major + 10 * minor;
}

elu_status elu_jit_target(elu_ctx *ctx, int sm, enum elu_binary_kind kind,
                          struct elu_target *out)
{
    elu_status status = ELU_OK;
    const struct elu_nvrtc_api *nv = nvrtc(ctx, &status);
    if (!nv)
        return status;
    int count = 0;
    const int r = nv->GetNumSupportedArchs(&count);
    if (r != 0 || count <= 0 || count > 256)
        return elu_fail(ctx, ELU_ERR_UNSUPPORTED,
                        "NVRTC did not list its supported archs: %s, %d of them",
                        elu_nvrtc_result_text(nv, r).text, count);
    int archs[256];
    nv->GetSupportedArchs(archs);
    int best = 0; /* the list is ascending */
    for (int i = 0; i < count; i++) {
        if (archs[i] == sm && kind == ELU_BINARY_CUBIN) {
            *out = (struct elu_target){sm, ELU_BINARY_CUBIN};
            return ELU_OK;
        }
        if (archs[i] <= sm)
            best = archs[i];
    }
    if (!best)
        return elu_fail(ctx, ELU_ERR_UNSUPPORTED,
                        "sm_%d is older than every arch this NVRTC supports "
                        "(oldest: sm_%d)", sm, archs[0]);
    *out = (struct elu_target){best, ELU_BINARY_PTX};
    return ELU_OK;
}

/* "#define name value" for a constant of the dtype's arithmetic, by its
 * bit pattern: exact, and immune to the locale that printf("%a") obeys. */
static int define_constant(char *buf, size_t cap, int len, const char *name, double v,
                           elu_dtype t)
{
    if (t == ELU_F64) {
        unsigned long long bits;
        memcpy(&bits, &v, sizeof bits);
        return len + snprintf(buf + len, cap - (size_t)len,
                              "#define %s __longlong_as_double(0x%016llxLL)\n", name, bits);
    }
    const float f = (float)v;
    unsigned bits;
    memcpy(&bits, &f, sizeof bits);
    return len + snprintf(buf + len, cap - (size_t)len, "#define %s __int_as_float(0x%08x)\n",
                          name, bits);
}

/* The generated lines before the kernel files (see kernels_src/elu.cu):
 * the dtype; for a specialized kernel its constants, and whether the
 * exact forward takes them; for a quick forward part compiled to PTX, its
 * shape in packs (src/launch.c launches such a part so). Then the kernel
 * files. */
static char *specialized_source(const struct elu_spec *s, enum elu_binary_kind kind)
{
    char prefix[1024];
    const size_t cap = sizeof prefix;
    const elu_dtype t = s->coef.dtype;
    int len = snprintf(prefix, cap, "#define ELU_DTYPE %d\n", (int)t);
    if (s->generic)
        len += snprintf(prefix + len, cap - (size_t)len, "#define ELU_PART %d\n%s%s",
                        s->part == ELU_PART_ALL    ? ELU_PART_ALL_KERNELS
                        : s->part == ELU_PART_REST ? ELU_PART_OTHER_KERNELS
                                                   : ELU_PART_FORWARD_KERNEL,
                        s->part == ELU_PART_FORWARD_UNIT_NIP ? "#define ELU_UNIT_NIP 1\n" : "",
                        elu_quick_packs(s->part, kind) ? "#define ELU_QUICK_PACKS 1\n" : "");
    else {
        len = define_constant(prefix, cap, len, "ELU_NEG", s->coef.scale_alpha, t);
        len = define_constant(prefix, cap, len, "ELU_POS", s->coef.scale, t);
        len = define_constant(prefix, cap, len, "ELU_NIP", s->coef.input_scale, t);
    }
    if (!s->generic && elu_exact_forward_takes(&s->coef))
        snprintf(prefix + len, cap - (size_t)len, "#define ELU_EXACT 1\n%s",
                 s->coef.input_scale == 1 ? "#define ELU_UNIT_NIP 1\n" : "");
    const bool f32 = t == ELU_F32, f64 = t == ELU_F64;
    const char *const parts[] = {prefix,
                                 elu_src_elu_expm1,
                                 f32 || f64 ? elu_src_elu_dd : "",
                                 f32 ? elu_src_elu_forward_f32 : "",
                                 f64 ? elu_src_elu_forward_f64 : "",
                                 elu_src_elu_kernel_args,
                                 elu_src_elu};
    size_t size = 1;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        size += strlen(parts[i]);
    char *src = malloc(size);
    if (src) {
        *src = '\0';
        for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
            strcat(src, parts[i]);
    }
    return src;
}

static void target_option(const struct elu_target *t, char *buf, size_t size)
{
    snprintf(buf, size, "-arch=%s_%d",
             t->kind == ELU_BINARY_CUBIN ? "sm" : "compute", t->arch);
}

/* The key of head and src, hashed as one text; false when out of memory. */
static bool key_of(const char *head, const char *src, struct elu_cache_key *key)
{
    const size_t h = strlen(head), len = h + strlen(src);
    char *text = malloc(len + 1);
    if (!text)
        return false;
    memcpy(text, head, h);
    memcpy(text + h, src, len - h + 1);
    *key = elu_cache_key_of(text, len);
    free(text);
    return true;
}

struct elu_cache_key elu_jit_tuning_key(const char *device, int sm, elu_dtype dtype)
{
    char head[512];
    snprintf(head, sizeof head, "libelu %s cache-format %d tuning %d sm_%d %s\n",
             ELU_VERSION_STRING, ELU_CACHE_FORMAT, (int)dtype, sm, device);
    struct elu_cache_key key;
    if (!key_of(head, elu_src_elu, &key)) /* the header alone: still this device and dtype */
        key = elu_cache_key_of(head, strlen(head));
    return key;
}

/* spec's source (malloc'd), with t's -arch option and cache key; NULL when
 * out of memory. The key hashes everything that decides the binary. Not
 * NVRTC's version: a cubin or PTX from an older NVRTC serves as well, and
 * leaving it out lets a warm process find its kernels without loading
 * NVRTC (a new libelu, with new source, gets new keys). */
static char *source_and_key(const struct elu_spec *spec, const struct elu_target *t,
                            char arch_option[32], struct elu_cache_key *key)
{
    target_option(t, arch_option, 32);
    char *src = specialized_source(spec, t->kind);
    const char *options[MAX_OPTIONS];
    const int count = options_of(spec, arch_option, options);
    char head[256]; /* about 100 characters */
    int len = snprintf(head, sizeof head, "libelu %s cache-format %d kind %d",
                       ELU_VERSION_STRING, ELU_CACHE_FORMAT, (int)t->kind);
    for (int i = 0; i < count && len < (int)sizeof head; i++)
        len += snprintf(head + len, sizeof head - (size_t)len, " %s", options[i]);
    if (len < (int)sizeof head - 1)
        strcpy(head + len, "\n");
    if (src && !key_of(head, src, key)) {
        free(src);
        return NULL;
    }
    return src;
}

/* Whether NVRTC has compiled in this process (elu_jit_warm_up). */
static atomic_bool compiled_before;

/* src compiled with the first `count` options into *prog (NULL when it
 * could not be created), dropping the last ones while NVRTC does not know
 * them (the newest come last), never the first two: NVRTC's result. */
static int compile_program(const struct elu_nvrtc_api *nv, const char *src, const char *name,
                           const char *const *options, int count, elu_nvrtc_program *prog)
{
    int r = 0;
    *prog = NULL;
    for (; count >= 2; count--) {
        if (*prog)
            nv->DestroyProgram(prog);
        if ((r = nv->CreateProgram(prog, src, name, 0, NULL, NULL)) != 0) {
            *prog = NULL;
            return r;
        }
        r = nv->CompileProgram(*prog, count, options);
        /* Set once a compile has returned: NVRTC has registered its exit
         * handlers by then (elu_jit_warm_up). */
        atomic_store(&compiled_before, true);
        if (r != ELU_NVRTC_ERROR_INVALID_OPTION)
            break;
    }
    return r;
}

static elu_status compile(elu_ctx *ctx, const char *src, const char *arch_option,
                          const struct elu_spec *spec, const struct elu_target *t,
                          struct elu_binary *out)
{
    elu_status status = ELU_OK;
    const struct elu_nvrtc_api *nv = nvrtc(ctx, &status);
    if (!nv)
        return status;
    const char *options[MAX_OPTIONS];
    const int count = options_of(spec, arch_option, options);
    elu_nvrtc_program prog;
    int r = compile_program(nv, src, "elu.cu", options, count, &prog);
    if (!prog)
        return elu_fail(ctx, ELU_ERR_COMPILE, "nvrtcCreateProgram: %s",
                        elu_nvrtc_result_text(nv, r).text);
    ELU_COUNT(ctx, compiles);
    if (r != 0) {
        size_t log_size = 0;
        char *log = nv->GetProgramLogSize(prog, &log_size) == 0
                        ? calloc(1, log_size + 1) : NULL;
        if (log)
            nv->GetProgramLog(prog, log);
        nv->DestroyProgram(&prog);
        status = elu_fail(ctx, ELU_ERR_COMPILE, "NVRTC (%s): %s\n%s",
                          arch_option, elu_nvrtc_result_text(nv, r).text, log ? log : "");
        free(log);
        return status;
    }
    const bool cubin = t->kind == ELU_BINARY_CUBIN;
    size_t size = 0;
    r = cubin ? nv->GetCUBINSize(prog, &size) : nv->GetPTXSize(prog, &size);
    out->data = r == 0 && size > 0 ? malloc(size + 1) : NULL;
    if (out->data) {
        r = cubin ? nv->GetCUBIN(prog, out->data) : nv->GetPTX(prog, out->data);
        ((char *)out->data)[size] = '\0';
    }
    nv->DestroyProgram(&prog);
    if (!out->data || r != 0) {
        free(out->data);
        out->data = NULL;
        return elu_fail(ctx, r != 0 ? ELU_ERR_COMPILE : ELU_ERR_OUT_OF_MEMORY,
                        "cannot fetch the compiled binary: %s",
                        r != 0 ? elu_nvrtc_result_text(nv, r).text : "out of memory");
    }
    out->size = size;
    out->kind = t->kind;
    out->arch = t->arch;
    return ELU_OK;
}

void elu_jit_warm_up(elu_ctx *ctx, int sm)
{
    if (atomic_load(&compiled_before))
        return;
    elu_status status = ELU_OK;
    const struct elu_nvrtc_api *nv = nvrtc(ctx, &status);
    struct elu_target t;
    char arch_option[32];
    elu_nvrtc_program prog;
    if (!nv || elu_jit_target(ctx, sm, ELU_BINARY_CUBIN, &t) != ELU_OK)
        return;
    target_option(&t, arch_option, sizeof arch_option);
    const char *options[] = {arch_option, STD_OPTION, MINIMAL_OPTION, NO_CACHE_OPTION};
    compile_program(nv, "extern \"C\" __global__ void elu_warm_up() {}", "warm_up.cu",
                    options, 4, &prog);
    if (prog)
        nv->DestroyProgram(&prog);
}

bool elu_jit_cache_get(elu_ctx *ctx, const struct elu_cache_key *key,
                       enum elu_binary_kind kind, void **data, size_t *size,
                       enum elu_cache_result *seen)
{
    char why[ELU_PATH_MAX + 256];
    enum elu_binary_kind found_kind;
    enum elu_cache_result found =
        elu_cache_get(&ctx->cache, key, &found_kind, data, size, why, sizeof why);
    if (found == ELU_CACHE_HIT && found_kind != kind) {
        free(*data); /* the key covers the kind: only a forged entry */
        *data = NULL;
        snprintf(why, sizeof why, "cache entry of the wrong kind ignored");
        found = ELU_CACHE_REJECTED;
    }
    const bool met_before = found == *seen;
    *seen = found;
    switch (found) {
    case ELU_CACHE_HIT:
        ELU_COUNT(ctx, disk_hits);
        return true;
    case ELU_CACHE_MISS:
        return false;
    case ELU_CACHE_REJECTED:
        if (!met_before)
            ELU_COUNT(ctx, disk_rejects);
        break;
    case ELU_CACHE_UNREADABLE:
        if (!met_before)
            ELU_COUNT(ctx, disk_errors);
        break;
    }
    elu_fail(ctx, ELU_OK, "%s", why);
    return false;
}

bool elu_jit_cache_put(elu_ctx *ctx, const struct elu_cache_key *key,
                       enum elu_binary_kind kind, const char *description, const void *data,
                       size_t size, const char *otherwise)
{
    char why[ELU_PATH_MAX + 256];
    unsigned evicted = 0;
    if (!elu_cache_put(&ctx->cache, key, kind, description, data, size, &evicted, why,
                       sizeof why)) {
        ELU_COUNT(ctx, disk_errors);
        elu_fail(ctx, ELU_OK, "%s (%s)", why, otherwise);
        return false;
    }
    ELU_COUNT(ctx, disk_writes);
    atomic_fetch_add_explicit(&ctx->stats.disk_evictions, evicted, memory_order_relaxed);
    return true;
}

/* The binary for t from the disk cache; true on a verified hit. */
static bool from_disk(elu_ctx *ctx, const struct elu_cache_key *key,
                      const struct elu_target *t, struct elu_binary *out,
                      enum elu_cache_result *seen)
{
    if (!elu_jit_cache_get(ctx, key, t->kind, &out->data, &out->size, seen))
        return false;
    out->kind = t->kind;
    out->arch = t->arch;
    out->on_disk = true;
    return true;
}

/* For `elu-cache list`: what an entry holds, in words. */
static void describe(const struct elu_spec *spec, const char *arch_option,
                     char *buf, size_t size)
{
    static const char *const dtypes[] = {"f32", "f64", "f16", "bf16"};
    const int n = snprintf(buf, size, "%s ", dtypes[spec->coef.dtype]);
    if (spec->generic)
        snprintf(buf + n, size - (size_t)n, "generic %s (constants as arguments)",
                 spec->part == ELU_PART_ALL               ? "module"
                 : spec->part == ELU_PART_FORWARD          ? "quick forward"
                 : spec->part == ELU_PART_FORWARD_UNIT_NIP ? "quick forward, input_scale 1"
                                                           : "quick backward and strided");
    else
        snprintf(buf + n, size - (size_t)n, "scale*alpha=%.17g scale=%.17g input_scale=%.17g",
                 spec->coef.scale_alpha, spec->coef.scale, spec->coef.input_scale);
    const size_t used = strlen(buf);
    snprintf(buf + used, size - used, " %s NVRTC %d libelu %s", arch_option,
             elu_jit_nvrtc_version(), ELU_VERSION_STRING);
}

/* Compile, and store the result when the context has a disk cache. */
static elu_status compile_and_store(elu_ctx *ctx, const struct elu_spec *spec,
                                    const char *src, const char *arch_option,
                                    const struct elu_target *t,
                                    const struct elu_cache_key *key,
                                    struct elu_binary *out)
{
    const elu_status status = compile(ctx, src, arch_option, spec, t, out);
    if (status != ELU_OK || !ctx->disk_cache)
        return status;
    char description[ELU_CACHE_MAX_DESCRIPTION];
    describe(spec, arch_option, description, sizeof description);
    out->on_disk = elu_jit_cache_put(ctx, key, t->kind, description, out->data, out->size,
                                     "compiled in memory");
    return ELU_OK;
}

bool elu_jit_cached(elu_ctx *ctx, const struct elu_spec *spec, const struct elu_target *t,
                    struct elu_binary *out)
{
    *out = (struct elu_binary){0};
    char arch_option[32];
    struct elu_cache_key key;
    char *src = ctx->disk_cache ? source_and_key(spec, t, arch_option, &key) : NULL;
    enum elu_cache_result seen = ELU_CACHE_MISS;
    const bool hit = src && from_disk(ctx, &key, t, out, &seen);
    free(src);
    return hit;
}

elu_status elu_jit_obtain(elu_ctx *ctx, const struct elu_spec *spec,
                          const struct elu_target *t, struct elu_binary *out)
{
    *out = (struct elu_binary){0};
    char arch_option[32];
    struct elu_cache_key key;
    char *src = source_and_key(spec, t, arch_option, &key);
    if (!src)
        return elu_fail(ctx, ELU_ERR_OUT_OF_MEMORY, "out of memory");
    enum elu_cache_result seen = ELU_CACHE_MISS;
    if (ctx->disk_cache && from_disk(ctx, &key, t, out, &seen)) {
        free(src);
        return ELU_OK;
    }
    /* Processes starting together take turns per key: whoever waited finds
     * the entry the first one wrote. Without the lock, compile anyway. */
    int lock = -1;
    elu_status status = ELU_OK;
    if (ctx->disk_cache) {
        char why[ELU_PATH_MAX + 256];
        if ((lock = elu_cache_lock(&ctx->cache, &key, why, sizeof why)) < 0)
            elu_fail(ctx, ELU_OK, "%s (compiling without it)", why);
        else if (from_disk(ctx, &key, t, out, &seen)) {
            elu_cache_unlock(lock);
            free(src);
            return ELU_OK;
        }
    }
    status = compile_and_store(ctx, spec, src, arch_option, t, &key, out);
    elu_cache_unlock(lock);
    free(src);
    return status;
}
