/* The public entry points: argument checks, then routing to the CPU or GPU
 * path. Nothing here computes or compiles. */
#include "cache.h"
#include "cpu.h"
#include "cpu_isa.h"
#include "env.h"
#include "gpu.h"
#include "half_table.h"
#include "internal.h"
#include "jit.h"
#include "layout.h"
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

#define KNOWN_FLAGS (ELU_NO_DISK_CACHE | ELU_PREWARM | ELU_AUTOTUNE | ELU_NO_PDL)
#define MAX_CPU_THREADS 1024
#define MAX_PREWARM 4096
#define TEXT_(x) #x
#define TEXT(x) TEXT_(x) /* a macro's value as a string literal */

/* New fields come from `reserved`: the struct keeps its size (on LP64). */
_Static_assert(sizeof(void *) != 8 || sizeof(elu_options) == 96,
               "elu_options keeps its size");

/* What is wrong with the options on their own (NULL if nothing): the same
 * answer whatever the environment says. */
static const char *options_problem(const elu_options *o)
{
    bool reserved_zero = true;
    for (size_t i = 0; i < sizeof o->reserved / sizeof *o->reserved; i++)
        reserved_zero = reserved_zero && o->reserved[i] == 0;
    return o->backend < ELU_BACKEND_AUTO || o->backend > ELU_BACKEND_CUDA ? "unknown backend"
           : o->device < 0                               ? "negative device"
           : o->flags & ~(uint32_t)KNOWN_FLAGS           ? "unknown flags"
           : o->cpu_threads < 0 || o->cpu_threads > MAX_CPU_THREADS
               ? "cpu_threads out of range (0 to " TEXT(MAX_CPU_THREADS) ")"
           : o->max_specializations < 0 || o->max_specializations > MAX_MAX_SPECIALIZATIONS
               ? "max_specializations out of range (0 to " TEXT(MAX_MAX_SPECIALIZATIONS) ")"
           : o->prewarm_count > MAX_PREWARM
               ? "prewarm_count out of range (0 to " TEXT(MAX_PREWARM) ")"
           : o->prewarm_count && !o->prewarm ? "prewarm is NULL with a count"
           : o->cpu_parallel_user && !o->cpu_parallel ? "cpu_parallel_user without cpu_parallel"
           : !reserved_zero                  ? "reserved fields are not zero"
                                             : NULL;
}

static elu_status coef_of(elu_ctx *ctx, const elu_params *p, struct elu_coef *c);

/* Whether an option is on: its flag, or its environment variable (a flag
 * as env.h reads them). */
static bool option_on(const elu_options *o, uint32_t flag, const char *variable)
{
    return (o->flags & flag) || elu_env_flag(variable);
}

/* The prewarm list, checked whether or not ELU_PREWARM is on; *out gets
 * its coefficients, or NULL for an empty list. */
static elu_status prewarm_coefs(elu_ctx *ctx, const elu_options *o, struct elu_coef **out)
{
    *out = NULL;
    if (!o->prewarm_count)
        return ELU_OK;
    struct elu_coef *c = calloc(o->prewarm_count, sizeof *c);
    if (!c)
        return ELU_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < o->prewarm_count; i++) {
        const elu_status status = coef_of(ctx, &o->prewarm[i], &c[i]);
        if (status != ELU_OK) {
            char why[ELU_ERRMSG_MAX];
            snprintf(why, sizeof why, "%s", elu_ctx_last_error(ctx));
            free(c);
            return elu_fail(ctx, status, "prewarm[%zu]: %s", i, why);
        }
    }
    *out = c;
    return ELU_OK;
}

/* ELU_PREWARM (the flag or the environment variable): in a CUDA context,
 * start the thread, which takes c. */
static elu_status start_prewarm(elu_ctx *ctx, const elu_options *o, struct elu_coef *c)
{
    if (!ctx->gpu || !option_on(o, ELU_PREWARM, "ELU_PREWARM")) {
        free(c);
        return ELU_OK;
    }
    return elu_gpu_prewarm(ctx, c, o->prewarm_count);
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

/* A context that could not be finished: its reason under ELU_DEBUG, then
 * gone. */
static elu_status fail_create(elu_ctx *ctx, elu_status status)
{
    debug_print("elu_ctx_create failed", elu_ctx_last_error(ctx));
    elu_ctx_destroy(ctx);
    return status;
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

/* The CPU side of a new context: threads, workers, tables, and the
 * settings the GPU side reads. */
static void set_up_cpu(elu_ctx *ctx, const elu_options *o)
{
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    ctx->cpu_threads = o->cpu_threads ? o->cpu_threads
                       : online > MAX_CPU_THREADS ? MAX_CPU_THREADS
                       : online > 0               ? (int)online
                                                  : 1;
    ctx->pool = o->cpu_parallel
                    ? elu_pool_create_external(ctx->cpu_threads, o->cpu_parallel,
                                               o->cpu_parallel_user)
                    : elu_pool_create(ctx->cpu_threads);
    ctx->tables = elu_cpu_tables_create();
    ctx->max_specializations = o->max_specializations ? o->max_specializations
                                                      : DEFAULT_MAX_SPECIALIZATIONS;
    ctx->backend = ELU_BACKEND_CPU;
    ctx->device = -1;
    ctx->autotune = option_on(o, ELU_AUTOTUNE, "ELU_AUTOTUNE");
    ctx->no_pdl = option_on(o, ELU_NO_PDL, "ELU_NO_PDL");
}

/* The GPU, unless the options ask for the CPU: a failure is the context's
 * with ELU_BACKEND_CUDA (its reason, and the notes, in the last error), a
 * fallback to the CPU noted with AUTO. */
static elu_status set_up_gpu(elu_ctx *ctx, const elu_options *o, char *notes, size_t size)
{
    if (o->backend == ELU_BACKEND_CPU)
        return ELU_OK;
    const elu_status status = elu_gpu_open(ctx, o->device);
    if (status == ELU_OK) {
        ctx->backend = ELU_BACKEND_CUDA;
        ctx->device = o->device;
        return ELU_OK;
    }
    if (o->backend == ELU_BACKEND_CUDA) {
        elu_report(notes, size, "%s", elu_ctx_last_error(ctx));
        return elu_fail(ctx, status, "%s", notes);
    }
    elu_report(notes, size, "using the CPU: %s", elu_ctx_last_error(ctx));
    return ELU_OK;
}

elu_status elu_ctx_create(elu_ctx **out, const elu_options *opts)
{
    if (!out)
        return ELU_ERR_INVALID_ARG;
    *out = NULL;
    elu_options defaults;
    elu_options_default(&defaults);
    const elu_options *o = opts ? opts : &defaults;
    const char *problem = options_problem(o);
    if (problem) {
        debug_print("elu_ctx_create", problem);
        return ELU_ERR_INVALID_ARG;
    }
    elu_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return ELU_ERR_OUT_OF_MEMORY;
    ctx->id = elu_new_ctx_id();
    struct elu_coef *prewarm;
    elu_status status = prewarm_coefs(ctx, o, &prewarm);
    if (status != ELU_OK)
        return fail_create(ctx, status);
    set_up_cpu(ctx, o);
    /* What the context falls back on and why, every reason kept. */
    char notes[ELU_ERRMSG_MAX] = "";
    elu_env_check(notes, sizeof notes);
    if (*elu_cpu_isa_fallback())
        elu_report(notes, sizeof notes, "%s", elu_cpu_isa_fallback());
    open_disk_cache(ctx, o, notes, sizeof notes);
    if ((status = set_up_gpu(ctx, o, notes, sizeof notes)) != ELU_OK) {
        free(prewarm);
        return fail_create(ctx, status);
    }
    report_creation(ctx, notes);
    if ((status = start_prewarm(ctx, o, prewarm)) != ELU_OK)
        return fail_create(ctx, status);
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
        .builtin_ptx_loads = atomic_load(&s->builtin_ptx_loads),
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
        c->scale_alpha = p->scale * p->alpha;
        c->scale = p->scale;
        c->input_scale = p->input_scale;
    } else {
        CHECK(ctx, fabs(p->alpha) <= FLT_MAX && fabs(p->scale) <= FLT_MAX &&
                       fabs(p->input_scale) <= FLT_MAX,
              "constants exceed the float range of this dtype's arithmetic");
        const float alpha = (float)p->alpha, scale = (float)p->scale;
        const float neg = alpha * scale;
        c->scale_alpha = neg;
        c->scale = scale;
        c->input_scale = (float)p->input_scale;
    }
    CHECK(ctx, isfinite(c->scale_alpha), "scale * alpha overflows");
    return ELU_OK;
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

/* Whether buffer k of a layout (NULL: n contiguous elements) at base can
 * be addressed without overflow. */
static bool addressable(const void *base, const struct elu_layout *l, int k, size_t n,
                        size_t size)
{
    int64_t lo = 0, hi = (int64_t)(n * size);
    return n * size <= ELU_LAYOUT_MAX_SPAN && (!l || elu_layout_span(l, k, size, &lo, &hi)) &&
           elu_layout_fits(base, lo, hi);
}

/* Whether writing `out` could change input k (a: 0, b: 1) before it is
 * read, or write one of its own elements twice: any shared byte, unless
 * both are the very same view (in place). */
static elu_status check_overlap(elu_ctx *ctx, const void *out, const void *in, int k,
                                size_t n, size_t size, const struct elu_layout *l)
{
    if (!l) {
        const uintptr_t x = (uintptr_t)out, y = (uintptr_t)in, bytes = n * size;
        CHECK(ctx, x == y || x >= y + bytes || y >= x + bytes,
              "the output overlaps input %d partially", k);
        return ELU_OK;
    }
    const enum elu_overlap shared = elu_layout_overlap(l, 2, out, k, in, size);
    return shared == ELU_OVERLAP_NONE ? ELU_OK
           : shared == ELU_OVERLAP_SOME
               ? elu_fail(ctx, ELU_ERR_INVALID_ARG,
                          "the output shares memory with input %d other than in place", k)
               : elu_fail(ctx, ELU_ERR_UNSUPPORTED, "cannot tell whether the output shares "
                          "memory with input %d (strides of no common shape): pass a copy", k);
}

elu_status elu_check_buffers(elu_ctx *ctx, const void *a, const void *b, void *out,
                                size_t n, size_t size, const struct elu_layout *l)
{
    const void *const buffers[3] = {a, b, out};
    for (int k = 0; k < 3; k++) {
        CHECK(ctx, (uintptr_t)buffers[k] % size == 0,
              "buffer %d (%p) is not aligned to its %zu-byte elements", k, buffers[k], size);
        CHECK(ctx, !buffers[k] || addressable(buffers[k], l, k, n, size),
              "buffer %d's elements reach beyond the address space (n %zu, %s)", k, n,
              l ? "its strides" : "contiguous");
    }
    const enum elu_overlap repeats = l ? elu_layout_self_overlap(l, 2) : ELU_OVERLAP_NONE;
    if (repeats == ELU_OVERLAP_SOME)
        return elu_fail(ctx, ELU_ERR_INVALID_ARG, "the output has elements that share "
                        "memory (a stride of 0, or strides that alias)");
    if (repeats == ELU_OVERLAP_UNKNOWN)
        return elu_fail(ctx, ELU_ERR_UNSUPPORTED, "cannot tell whether the output's elements "
                        "share memory (strides of no common shape): pass a copy");
    elu_status status = check_overlap(ctx, out, a, 0, n, size, l);
    if (status == ELU_OK && b)
        status = check_overlap(ctx, out, b, 1, n, size, l);
    return status;
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
    if ((status = elu_check_buffers(ctx, a, backward ? b : NULL, out, n, size, layout)) != ELU_OK)
        return status;
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
    uint16_t *table = NULL;
    if (bin.on_disk && elu_half_table_needed(&spec))
        status = elu_half_table_obtain(ctx, &c, &table);
    free(table);
    if (bin.on_disk)
        return status;
    char why[ELU_ERRMSG_MAX];
    snprintf(why, sizeof why, "%s", elu_ctx_last_error(ctx));
    return elu_fail(ctx, ELU_ERR_IO, "compiled, but not stored: %s", why);
}
