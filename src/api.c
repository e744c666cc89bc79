/* The public entry points: argument checks, then routing to the CPU or GPU
 * path. Nothing here computes or compiles. */
#include "cache.h"
#include "cpu.h"
#include "env.h"
#include "gpu.h"
#include "internal.h"
#include "jit.h"
#include "pool.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Validate or return ELU_ERR_INVALID_ARG with the message (dav1d's
 * validate_input_or_ret). */
#define CHECK(ctx, cond, ...)                                         \
    do {                                                              \
        if (!(cond))                                                  \
            return elu_fail((ctx), ELU_ERR_INVALID_ARG, __VA_ARGS__); \
    } while (0)

#define DEFAULT_MAX_SPECIALIZATIONS 64
#define MAX_MAX_SPECIALIZATIONS 4096

unsigned elu_version_number(void) { return ELU_VERSION_NUMBER; }
const char *elu_version_string(void) { return ELU_VERSION_STRING; }

const char *elu_status_str(elu_status status)
{
    switch (status) {
#define ELU_STATUS_CASE_(name, value, text) \
    case name:                              \
        return text;
        ELU_STATUS_MAP(ELU_STATUS_CASE_)
#undef ELU_STATUS_CASE_
    }
    return "unknown status";
}

size_t elu_dtype_size(elu_dtype dtype)
{
    switch (dtype) {
    case ELU_F32: return 4;
    case ELU_F64: return 8;
    case ELU_F16:
    case ELU_BF16: return 2;
    }
    return 0;
}

elu_params elu_params_elu(elu_dtype dtype, double alpha)
{
    return (elu_params){dtype, alpha, 1.0, 1.0};
}

elu_params elu_params_selu(elu_dtype dtype)
{
    /* torch.nn.functional.selu's constants. */
    return (elu_params){dtype, 1.6732632423543772848170429916717,
                        1.0507009873554804934193349852946, 1.0};
}

elu_params elu_params_celu(elu_dtype dtype, double alpha)
{
    return (elu_params){dtype, alpha, 1.0, 1.0 / alpha};
}

void elu_options_default(elu_options *opts)
{
    if (opts)
        *opts = (elu_options){.backend = ELU_BACKEND_AUTO};
}

/* -------- context -------- */

static elu_status check_options(const elu_options *o)
{
    bool reserved_zero = true;
    for (size_t i = 0; i < sizeof o->reserved / sizeof *o->reserved; i++)
        reserved_zero = reserved_zero && o->reserved[i] == 0;
    if (o->backend < ELU_BACKEND_AUTO || o->backend > ELU_BACKEND_CUDA ||
        o->device < 0 || o->cpu_threads < 0 || o->max_specializations < 0 ||
        o->max_specializations > MAX_MAX_SPECIALIZATIONS || !reserved_zero ||
        (o->prewarm_count && !o->prewarm))
        return ELU_ERR_INVALID_ARG;
    return ELU_OK;
}

static elu_status coef_of(elu_ctx *ctx, const elu_params *p, struct elu_coef *c);

/* Whether an option is on: its flag, or its environment variable (a flag
 * as env.h reads them). */
static bool option_on(const elu_options *o, uint32_t flag, const char *variable)
{
    return (o->flags & flag) || elu_env_flag(variable);
}

/* ELU_PREWARM (the flag or the environment variable): check the list, and
 * in a CUDA context start the thread. */
static elu_status start_prewarm(elu_ctx *ctx, const elu_options *o)
{
    if (!option_on(o, ELU_PREWARM, "ELU_PREWARM"))
        return ELU_OK;
    struct elu_coef *c = calloc(o->prewarm_count + 1, sizeof *c);
    if (!c)
        return ELU_ERR_OUT_OF_MEMORY;
    elu_status status = ELU_OK;
    for (size_t i = 0; i < o->prewarm_count && status == ELU_OK; i++)
        status = coef_of(ctx, &o->prewarm[i], &c[i]);
    if (status == ELU_OK && ctx->gpu)
        status = elu_gpu_prewarm(ctx, c, o->prewarm_count); /* takes c */
    else
        free(c);
    return status;
}

/* Open the disk cache unless it is turned off. When it is not in use,
 * ctx->cache_off says why, and a failure goes to `notes` too. */
static void open_disk_cache(elu_ctx *ctx, const elu_options *o, char *notes, size_t size)
{
    char why[sizeof ctx->cache_off];
    if (o->flags & ELU_NO_DISK_CACHE)
        snprintf(why, sizeof why, "elu_options.flags has ELU_NO_DISK_CACHE");
    else if (elu_env_flag("ELU_CACHE_DISABLE"))
        snprintf(why, sizeof why, "ELU_CACHE_DISABLE=%.64s", elu_env_text("ELU_CACHE_DISABLE"));
    else if ((ctx->disk_cache = elu_cache_open(&ctx->cache, o->cache_dir, why, sizeof why)))
        return;
    else {
        ELU_COUNT(ctx, disk_errors);
        elu_report(notes, size, "%s (compiling in memory)", why);
    }
    snprintf(ctx->cache_off, sizeof ctx->cache_off, "%s", why);
}

static void debug_print(const char *what, const char *detail)
{
    if (elu_env_flag("ELU_DEBUG"))
        fprintf(stderr, "libelu: %s: %s\n", what, detail);
}

/* A new context says what it falls back on (`notes`) in its last error,
 * and under ELU_DEBUG what it is as well. */
static void report_creation(elu_ctx *ctx, const char *notes)
{
    if (*notes)
        elu_fail(ctx, ELU_OK, "%s", notes);
    char line[ELU_ERRMSG_MAX + ELU_PATH_MAX + 256];
    snprintf(line, sizeof line, "%s backend, CPU kernels %s, disk cache %s%s%s%s",
             ctx->backend == ELU_BACKEND_CUDA ? "CUDA" : "CPU", elu_cpu_isa_name(),
             ctx->disk_cache ? ctx->cache.dir : "off: ",
             ctx->disk_cache ? "" : ctx->cache_off, *notes ? "; " : "", notes);
    debug_print("elu_ctx_create", line);
}

elu_status elu_ctx_create(elu_ctx **out, const elu_options *opts)
{
    if (!out)
        return ELU_ERR_INVALID_ARG;
    *out = NULL;
    elu_options defaults;
    elu_options_default(&defaults);
    const elu_options *o = opts ? opts : &defaults;
    if (check_options(o) != ELU_OK)
        return ELU_ERR_INVALID_ARG;
    elu_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return ELU_ERR_OUT_OF_MEMORY;
    ctx->id = elu_new_ctx_id();
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    ctx->cpu_threads = o->cpu_threads ? o->cpu_threads : online > 0 ? (int)online : 1;
    ctx->pool = elu_pool_create(ctx->cpu_threads);
    ctx->tables = elu_cpu_tables_create();
    ctx->max_specializations = o->max_specializations ? o->max_specializations
                                                      : DEFAULT_MAX_SPECIALIZATIONS;
    ctx->backend = ELU_BACKEND_CPU;
    ctx->device = -1;
    ctx->autotune = option_on(o, ELU_AUTOTUNE, "ELU_AUTOTUNE");
    ctx->no_pdl = option_on(o, ELU_NO_PDL, "ELU_NO_PDL");
    /* What the context falls back on and why, every reason kept. */
    char notes[ELU_ERRMSG_MAX] = "";
    elu_env_check(notes, sizeof notes);
    if (*elu_cpu_isa_fallback())
        elu_report(notes, sizeof notes, "%s", elu_cpu_isa_fallback());
    open_disk_cache(ctx, o, notes, sizeof notes);
    if (o->backend != ELU_BACKEND_CPU) {
        const elu_status status = elu_gpu_open(ctx, o->device);
        if (status == ELU_OK) {
            ctx->backend = ELU_BACKEND_CUDA;
            ctx->device = o->device;
        } else if (o->backend == ELU_BACKEND_CUDA) {
            elu_report(notes, sizeof notes, "%s", elu_ctx_last_error(ctx));
            debug_print("elu_ctx_create failed", notes);
            elu_ctx_destroy(ctx);
            return status;
        } else {
            elu_report(notes, sizeof notes, "using the CPU: %s", elu_ctx_last_error(ctx));
        }
    }
    report_creation(ctx, notes);
    const elu_status status = start_prewarm(ctx, o);
    if (status != ELU_OK) {
        debug_print("elu_ctx_create", elu_ctx_last_error(ctx));
        elu_ctx_destroy(ctx);
        return status;
    }
    *out = ctx;
    return ELU_OK;
}

void elu_ctx_destroy(elu_ctx *ctx)
{
    if (!ctx)
        return;
    elu_gpu_close(ctx);
    elu_pool_destroy(ctx->pool);
    elu_cpu_tables_destroy(ctx->tables);
    free(ctx);
}

elu_status elu_ctx_get_info(const elu_ctx *ctx, elu_ctx_info *info)
{
    if (!ctx || !info)
        return ELU_ERR_INVALID_ARG;
    *info = (elu_ctx_info){.backend = ctx->backend, .device = -1};
    if (ctx->gpu)
        elu_gpu_describe(ctx, info);
    info->nvrtc_version = elu_jit_nvrtc_version();
    info->cpu_threads = ctx->cpu_threads;
    info->disk_cache = ctx->disk_cache;
    snprintf(info->cpu_isa, sizeof info->cpu_isa, "%s", elu_cpu_isa_name());
    snprintf(info->cache_dir, sizeof info->cache_dir, "%s",
             ctx->disk_cache ? ctx->cache.dir : "");
    return ELU_OK;
}

elu_status elu_ctx_get_stats(const elu_ctx *ctx, elu_ctx_stats *stats)
{
    if (!ctx || !stats)
        return ELU_ERR_INVALID_ARG;
    const struct elu_counters *s = &ctx->stats;
    *stats = (elu_ctx_stats){
        .compiles = atomic_load(&s->compiles),
        .disk_hits = atomic_load(&s->disk_hits),
        .disk_writes = atomic_load(&s->disk_writes),
        .disk_rejects = atomic_load(&s->disk_rejects),
        .disk_errors = atomic_load(&s->disk_errors),
        .disk_evictions = atomic_load(&s->disk_evictions),
        .memory_hits = atomic_load(&s->memory_hits),
        .gpu_launches = atomic_load(&s->gpu_launches),
        .generic_launches = atomic_load(&s->generic_launches),
        .cpu_runs = atomic_load(&s->cpu_runs),
        .autotunes = atomic_load(&s->autotunes),
        .background_builds = atomic_load(&s->background_builds),
    };
    return ELU_OK;
}

/* -------- argument checks -------- */

/* PyTorch's rounding of the constants: each to the arithmetic type, and
 * scale * alpha formed in it. */
static elu_status coef_of(elu_ctx *ctx, const elu_params *p, struct elu_coef *c)
{
    if (!ctx)
        return ELU_ERR_INVALID_ARG;
    CHECK(ctx, p, "params is NULL");
    CHECK(ctx, elu_dtype_size(p->dtype), "unknown dtype %d", (int)p->dtype);
    CHECK(ctx, isfinite(p->alpha) && isfinite(p->scale) && isfinite(p->input_scale),
          "alpha, scale and input_scale must be finite");
    c->dtype = p->dtype;
    if (p->dtype == ELU_F64) {
        c->neg = p->scale * p->alpha;
        c->pos = p->scale;
        c->nip = p->input_scale;
    } else {
        CHECK(ctx, fabs(p->alpha) <= FLT_MAX && fabs(p->scale) <= FLT_MAX &&
                       fabs(p->input_scale) <= FLT_MAX,
              "constants exceed the float range of this dtype's arithmetic");
        const float alpha = (float)p->alpha, scale = (float)p->scale;
        const float neg = alpha * scale;
        c->neg = neg;
        c->pos = scale;
        c->nip = (float)p->input_scale;
    }
    CHECK(ctx, isfinite(c->neg), "scale * alpha overflows");
    return ELU_OK;
}

/* Whether [a, a+bytes) and [b, b+bytes) overlap other than exactly. */
static bool partial_overlap(const void *a, const void *b, size_t bytes)
{
    const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x != y && x < y + bytes && y < x + bytes;
}

/* Decide where the buffers are processed: all on this context's GPU, or
 * all in host memory. */
static elu_status placement(elu_ctx *ctx, const void *const *ptrs, int count,
                            bool *on_gpu)
{
    *on_gpu = false;
    if (!ctx->gpu)
        return ELU_OK;
    enum elu_place first = ELU_PLACE_HOST;
    for (int i = 0; i < count; i++) {
        enum elu_place place;
        const elu_status status = elu_gpu_locate(ctx, ptrs[i], &place);
        if (status != ELU_OK)
            return status;
        CHECK(ctx, place != ELU_PLACE_OTHER_DEVICE,
              "buffer %d is on another device than the context's", i);
        CHECK(ctx, i == 0 || place == first,
              "buffers are in different memory spaces (host and device)");
        first = place;
    }
    *on_gpu = first == ELU_PLACE_DEVICE;
    return ELU_OK;
}

/* -------- running -------- */

/* The bytes [lo, hi) that buffer k of a strided layout spans. */
static void extent(const void *base, const struct elu_layout *l, int k, size_t size,
                   uintptr_t *lo, uintptr_t *hi)
{
    int64_t low = 0, high = 0;
    for (int d = 0; d < l->ndim; d++) {
        const int64_t span = (l->shape[d] - 1) * l->stride[k][d];
        low += span < 0 ? span : 0;
        high += span > 0 ? span : 0;
    }
    *lo = (uintptr_t)base + (uintptr_t)(low * (int64_t)size);
    *hi = (uintptr_t)base + (uintptr_t)((high + 1) * (int64_t)size);
}

/* Whether writing `out` could change input k (a: 0, b: 1) before it is read:
 * any shared byte, unless both are the very same view (in place). */
static bool strided_overlap(const void *out, const void *in, int k,
                            const struct elu_layout *l, size_t size)
{
    uintptr_t out_lo, out_hi, in_lo, in_hi;
    extent(out, l, 2, size, &out_lo, &out_hi);
    extent(in, l, k, size, &in_lo, &in_hi);
    if (out_hi <= in_lo || in_hi <= out_lo)
        return false;
    bool same = out == in;
    for (int d = 0; d < l->ndim; d++)
        same = same && (l->shape[d] == 1 || l->stride[2][d] == l->stride[k][d]);
    return !same;
}

/* Whether two output elements share memory: a broadcast (stride 0). */
static bool output_repeats(const struct elu_layout *l)
{
    for (int d = 0; d < l->ndim; d++)
        if (l->shape[d] > 1 && l->stride[2][d] == 0)
            return true;
    return false;
}

static bool overlap(const void *out, const void *in, int k, size_t n, size_t size,
                    const struct elu_layout *l)
{
    return l ? strided_overlap(out, in, k, l, size) : partial_overlap(out, in, n * size);
}

elu_status elu_run_any(elu_ctx *ctx, const elu_params *p, enum elu_kernel kernel,
                       const void *a, const void *b, void *out, size_t n,
                       const struct elu_layout *layout, elu_stream stream)
{
    struct elu_coef c;
    elu_status status = coef_of(ctx, p, &c);
    if (status != ELU_OK)
        return status;
    CHECK(ctx, kernel != ELU_KERNEL_BACKWARD_OUTPUT || p->alpha >= 0,
          "backward from the output needs alpha >= 0 (got %g)", p->alpha);
    if (n == 0)
        return ELU_OK;
    const size_t size = elu_dtype_size(c.dtype);
    const bool backward = kernel != ELU_KERNEL_FORWARD;
    CHECK(ctx, a && out && (b || !backward), "a buffer is NULL");
    CHECK(ctx, n <= SIZE_MAX / size, "n is too large");
    CHECK(ctx, !layout || !output_repeats(layout),
          "the output repeats elements (a stride of 0)");
    CHECK(ctx, !overlap(out, a, 0, n, size, layout) &&
                   !(backward && overlap(out, b, 1, n, size, layout)),
          "the output overlaps an input partially");
    const void *const ptrs[] = {a, out, b};
    bool on_gpu;
    if ((status = placement(ctx, ptrs, backward ? 3 : 2, &on_gpu)) != ELU_OK)
        return status;
    if (on_gpu)
        return elu_gpu_launch(ctx, &c, kernel, a, b, out, n, layout, stream);
    if (layout)
        elu_cpu_run_strided(&c, kernel, a, b, out, n, layout);
    else
        elu_cpu_run(&c, kernel, a, b, out, n, ctx->pool, ctx->tables);
    ELU_COUNT(ctx, cpu_runs);
    return ELU_OK;
}

elu_status elu_run(elu_ctx *ctx, const elu_params *p, const void *x, void *y,
                   size_t n, elu_stream stream)
{
    return elu_run_any(ctx, p, ELU_KERNEL_FORWARD, x, NULL, y, n, NULL, stream);
}

elu_status elu_run_backward(elu_ctx *ctx, const elu_params *p,
                            const void *grad_y, const void *saved,
                            bool saved_is_output, void *grad_x, size_t n,
                            elu_stream stream)
{
    return elu_run_any(ctx, p,
                       saved_is_output ? ELU_KERNEL_BACKWARD_OUTPUT
                                       : ELU_KERNEL_BACKWARD_INPUT,
                       grad_y, saved, grad_x, n, NULL, stream);
}

elu_status elu_prepare(elu_ctx *ctx, const elu_params *p)
{
    struct elu_coef c;
    const elu_status status = coef_of(ctx, p, &c);
    if (status != ELU_OK || !ctx->gpu)
        return status;
    return elu_gpu_prepare(ctx, &c);
}

elu_status elu_precompile(elu_ctx *ctx, const elu_params *p, int sm)
{
    struct elu_coef c;
    elu_status status = coef_of(ctx, p, &c);
    if (status != ELU_OK)
        return status;
    CHECK(ctx, sm >= 10 && sm < 10000, "sm %d is not a compute capability", sm);
    if (!ctx->disk_cache)
        return elu_fail(ctx, ELU_ERR_IO, "the disk cache is off for this context (%s): "
                        "nothing to precompile into", ctx->cache_off);
    struct elu_target t;
    struct elu_binary bin;
    const struct elu_spec spec = {c, false, ELU_PART_ALL};
    if ((status = elu_jit_target(ctx, sm, ELU_BINARY_CUBIN, &t)) != ELU_OK ||
        (status = elu_jit_obtain(ctx, &spec, &t, &bin)) != ELU_OK)
        return status;
    free(bin.data);
    if (bin.on_disk)
        return ELU_OK;
    char why[ELU_ERRMSG_MAX];
    snprintf(why, sizeof why, "%s", elu_ctx_last_error(ctx));
    return elu_fail(ctx, ELU_ERR_IO, "compiled, but not stored: %s", why);
}
