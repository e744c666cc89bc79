/* The module table: for each specialization, its module (loaded from the
 * disk cache or compiled) or, until the builder has compiled it, a backed
 * entry that the dtype's generic kernels serve with its constants; the
 * generic modules themselves, in parts; and ELU_AUTOTUNE's launch shapes,
 * measured when a dtype's first specialized module loads. */
#include "gpu_internal.h"

#include "numerics.h"

#include <stdlib.h>
#include <string.h>

/* The kernels' names, by enum elu_kernel_index (kernels_src/elu_kernel_args.h). */
static const char *const KERNEL_NAMES[ELU_FN_COUNT] = {
    [ELU_FN_FORWARD] = "elu_forward",
    [ELU_FN_BACKWARD_INPUT] = "elu_backward_input",
    [ELU_FN_BACKWARD_OUTPUT] = "elu_backward_output",
    [ELU_FN_STRIDED] = "elu_strided",
    [ELU_FN_FORWARD_COMPUTED] = "elu_forward_computed",
    [ELU_FN_FORWARD_CONTIGUOUS] = "elu_forward_contiguous",
};

static bool same_spec(const struct elu_spec *a, const struct elu_spec *b)
{
    /* Bitwise: 0.0 and -0.0 compile to different kernels. */
    return a->generic == b->generic && a->part == b->part && a->coef.dtype == b->coef.dtype &&
           memcmp(&a->coef.scale_alpha, &b->coef.scale_alpha, sizeof(double)) == 0 &&
           memcmp(&a->coef.scale, &b->coef.scale, sizeof(double)) == 0 &&
           memcmp(&a->coef.input_scale, &b->coef.input_scale, sizeof(double)) == 0;
}

/* spec's entry: its module once built, else its backed entry, else NULL. */
static struct module *find(struct elu_gpu *g, const struct elu_spec *spec)
{
    const size_t count = atomic_load_explicit(&g->published, memory_order_acquire);
    struct module *backed = NULL;
    for (size_t i = 0; i < count; i++) {
        struct module *m = &g->modules[i];
        if (same_spec(&m->spec, spec)) {
            if (!m->backed)
                return m;
            backed = m;
        }
    }
    return backed;
}

/* The entry to fill next, under g->lock; NULL if the table is full (it is
 * sized so that it never is). */
static struct module *next_entry(elu_ctx *ctx)
{
    struct elu_gpu *g = ctx->gpu;
    const size_t count = atomic_load_explicit(&g->published, memory_order_relaxed);
    if (count < g->capacity)
        return &g->modules[count];
    elu_fail(ctx, ELU_ERR_OUT_OF_MEMORY, "the module table is full");
    return NULL;
}

/* Make the entry filled at next_entry() visible to lookups; under g->lock. */
static void publish(struct elu_gpu *g)
{
    const size_t count = atomic_load_explicit(&g->published, memory_order_relaxed);
    atomic_store_explicit(&g->published, count + 1, memory_order_release);
}

/* The generic kernels' constants argument for c, in the dtype's
 * arithmetic (float values are exact: c's are float-valued, and jit.c's
 * define_constant rounds the exact forward's as this does). */
union elu_coef_arg elu_modules_coef(const struct elu_coef *c)
{
    struct elu_exact_consts k = {0};
    const bool exact = elu_exact_forward_consts(c, &k);
    const int flags =
        exact ? ELU_COEF_EXACT | (c->input_scale == 1 ? ELU_COEF_UNIT_INPUT_SCALE : 0) : 0;
    union elu_coef_arg u;
    memset(&u, 0, sizeof u);
    if (c->dtype == ELU_F64)
        u.d = (struct elu_coef_f64){c->scale_alpha, c->scale, c->input_scale, k.x_min,
                                    k.x_max,        k.w_hi,   k.w_lo,         flags};
    else
        u.f = (struct elu_coef_f32){(float)c->scale_alpha, (float)c->scale, (float)c->input_scale,
                                    (float)k.x_min,        (float)k.x_max,  (float)k.w_hi,
                                    (float)k.w_lo,         flags};
    return u;
}

/* Copy a forward table to the device, done before any stream reads it:
 * from pageable memory, cuMemcpyHtoD may return before its DMA ends, and a
 * non-blocking stream does not wait for the legacy stream. */
static elu_cu_result upload_table(const struct elu_gpu *g, elu_cu_deviceptr to, const void *from)
{
    const elu_cu_result r = g->cu->MemcpyHtoD(to, from, ELU_JIT_TABLE_BYTES);
    return r != 0 ? r : g->cu->StreamSynchronize(NULL);
}

/* A specialized half-type module's forward as a table, as on the CPU: a
 * half type has 65536 values, so the correctly rounded result for each,
 * computed once per specialization (elu_cpu_forward_table, cheap beside a
 * compile, at compile time: the binary carries it, see jit.h) and looked
 * up by the kernel, is both exact and cheaper from memory than computing
 * expm1 in float, which bounds the generic module's computed forward
 * (docs/DESIGN.md, The half types). y is the binary's table, NULL for other
 * dtypes and the generic modules: m->table stays 0 then. */
static elu_status forward_table(elu_ctx *ctx, struct module *m, const void *y)
{
    if (!y) /* the kernel reads a specialized half type's table unchecked */
        return elu_jit_carries_table(&m->spec)
                   ? elu_fail(ctx, ELU_ERR_CUDA, "the binary lacks its forward table")
                   : ELU_OK;
    const struct elu_gpu *g = ctx->gpu;
    elu_cu_deviceptr table = 0;
    size_t bytes = 0;
    elu_cu_result r = g->cu->ModuleGetGlobal(&table, &bytes, m->handle, "elu_forward_table");
    if (r == 0 && bytes != ELU_JIT_TABLE_BYTES)
        r = 1; /* CUDA_ERROR_INVALID_VALUE: not our kernel source */
    if (r == 0)
        r = upload_table(g, table, y);
    if (r != 0)
        return elu_gpu_fail_cu(ctx, ELU_ERR_CUDA, "the forward table", r);
    m->table = table;
    return ELU_OK;
}

/* A backed entry for spec: its constants, for the generic kernels. */
static struct module backed_entry(const struct elu_spec *spec)
{
    return (struct module){.spec = *spec, .backed = true, .coef = elu_modules_coef(&spec->coef)};
}

struct tune_arg {
    const struct elu_gpu *g;
    const struct module *m;
};

static elu_cu_result tune_launch(void *arg, enum elu_kernel kernel, struct elu_shape shape,
                                 elu_cu_deviceptr a, elu_cu_deviceptr b, elu_cu_deviceptr out,
                                 size_t n, elu_cu_stream stream)
{
    const struct tune_arg *t = arg;
    return elu_launch_shaped(t->g, t->m, &t->m->coef, t->m->table, kernel, (int)kernel, shape,
                         (const void *)(uintptr_t)a, (const void *)(uintptr_t)b,
                         (void *)(uintptr_t)out, n, NULL, stream);
}

/* ELU_AUTOTUNE: whether m, the context's first specialized module of its
 * dtype, is to have the dtype's launch shapes measured; under g->lock. */
static bool to_tune(elu_ctx *ctx, const struct module *m)
{
    const struct elu_gpu *g = ctx->gpu;
    return ctx->autotune && !m->spec.generic && !g->tuned[m->spec.coef.dtype];
}

/* The dtype's launch shapes measured with m's kernels (m not yet
 * published), the primary context current: elu_tune's, which keeps the
 * rule's where it cannot measure. */
static void measure(elu_ctx *ctx, const struct module *m, struct elu_tuning *out)
{
    const struct elu_gpu *g = ctx->gpu;
    const struct elu_tune_device d = {g->cu, g->name, g->sm, g->resident_threads};
    struct tune_arg arg = {g, m};
    *out = g->rule;
    elu_tune(ctx, &d, m->spec.coef.dtype, tune_launch, &arg, out);
}

/* The shapes in force for m's dtype from now on, before m is published
 * (no launch reads a dtype's shapes until its first specialized module
 * is), under g->lock. */
static void adopt(struct elu_gpu *g, const struct module *m, const struct elu_tuning *t)
{
    g->tuning[m->spec.coef.dtype] = *t;
    g->tuned[m->spec.coef.dtype] = true;
}

/* ELU_AUTOTUNE under g->lock, where the caller holds it anyway. */
static void autotune(elu_ctx *ctx, const struct module *m)
{
    if (!to_tune(ctx, m))
        return;
    struct elu_tuning t;
    measure(ctx, m, &t);
    adopt(ctx->gpu, m, &t);
}

/* spec's binary in the form *kind asks for, set to the form made: a cubin
 * for this very GPU from the disk cache needs no NVRTC; else NVRTC says
 * which target it can make, and makes it if the cache lacks it. No lock
 * needed. */
elu_status elu_modules_obtain(elu_ctx *ctx, const struct elu_spec *spec,
                         enum elu_binary_kind *kind, struct elu_binary *bin)
{
    const struct elu_gpu *g = ctx->gpu;
    struct elu_target t = {g->sm, ELU_BINARY_CUBIN};
    elu_status status = ELU_OK;
    if (*kind != ELU_BINARY_CUBIN || !elu_jit_cached(ctx, spec, &t, bin)) {
        status = elu_jit_target(ctx, g->sm, *kind, &t);
        if (status == ELU_OK)
            status = elu_jit_obtain(ctx, spec, &t, bin);
    }
    *kind = t.kind;
    return status;
}

/* Whether spec's module holds kernel k. */
static bool holds(const struct elu_spec *spec, size_t k)
{
    if (k == COMPUTED || k == CONTIGUOUS)
        return spec->part == ELU_PART_ALL &&
               (elu_dtype_size(spec->coef.dtype) == 2) == (k == COMPUTED);
    return spec->part == ELU_PART_ALL ||
           (spec->part != ELU_PART_REST) == (k == ELU_KERNEL_FORWARD);
}

/* Load bin (freed here) as spec's module into m, the primary context
 * current. */
static elu_status install(elu_ctx *ctx, const struct elu_spec *spec, struct elu_binary *bin,
                          struct module *m)
{
    const struct elu_gpu *g = ctx->gpu;
    *m = (struct module){.spec = *spec};
    const char *what = bin->kind == ELU_BINARY_CUBIN ? "cuModuleLoadData (cubin)"
                                                     : "cuModuleLoadData (PTX)";
    const elu_cu_result r = g->cu->ModuleLoadData(&m->handle, bin->data);
    elu_status status = r == 0 ? ELU_OK : elu_gpu_fail_cu(ctx, ELU_ERR_CUDA, what, r);
    for (size_t k = 0; k < KERNELS && status == ELU_OK; k++) {
        if (!holds(spec, k))
            continue;
        const elu_cu_result e = g->cu->ModuleGetFunction(&m->fn[k], m->handle, KERNEL_NAMES[k]);
        if (e != 0)
            status = elu_gpu_fail_cu(ctx, ELU_ERR_CUDA, KERNEL_NAMES[k], e);
        int per_sm = 0;
        if (e == 0 && g->cu->OccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, m->fn[k], 128,
                                                                       0) == 0)
            m->wave[k] = (unsigned)per_sm * (unsigned)g->multiprocessors;
    }
    const bool table = elu_jit_carries_table(spec) && bin->size > ELU_JIT_TABLE_BYTES;
    if (status == ELU_OK)
        status = forward_table(ctx, m, table ? (const char *)bin->data + bin->size -
                                                   ELU_JIT_TABLE_BYTES
                                             : NULL);
    free(bin->data);
    bin->data = NULL;
    if (status != ELU_OK && r == 0)
        g->cu->ModuleUnload(m->handle);
    return status;
}

/* Load spec's module, compiling it if need be, and publish it; the caller
 * holds g->lock. A binary that the driver refuses (a PTX newer than the
 * driver, a stale cubin) is rebuilt once in the other form before giving
 * up. */
static elu_status load(elu_ctx *ctx, const struct elu_spec *spec, struct module **out)
{
    struct elu_gpu *g = ctx->gpu;
    struct module *m = next_entry(ctx);
    if (!m)
        return ELU_ERR_OUT_OF_MEMORY;
    const bool pushed = elu_gpu_enter(g);
    elu_status status = ELU_ERR_CUDA;
    enum elu_binary_kind kind = ELU_BINARY_CUBIN;
    for (int attempt = 0; attempt < 2 && status == ELU_ERR_CUDA; attempt++) {
        struct elu_binary bin = {0};
        if ((status = elu_modules_obtain(ctx, spec, &kind, &bin)) == ELU_OK)
            status = install(ctx, spec, &bin, m);
        if (kind != ELU_BINARY_CUBIN)
            break;
        kind = ELU_BINARY_PTX;
    }
    if (status == ELU_OK)
        autotune(ctx, m);
    elu_gpu_leave(g, pushed);
    if (status != ELU_OK)
        return status;
    publish(g);
    *out = m;
    return ELU_OK;
}

/* The quick generic forward part for c: compiled for input_scale 1 where
 * the exact forward takes c's (f32, f64). */
enum elu_part elu_modules_forward_part(const struct elu_coef *c)
{
    const bool exact_type = c->dtype == ELU_F32 || c->dtype == ELU_F64;
    return exact_type && c->input_scale == 1 ? ELU_PART_FORWARD_UNIT_NIP : ELU_PART_FORWARD;
}

static struct elu_spec generic_spec(elu_dtype dtype, enum elu_part part)
{
    return (struct elu_spec){{dtype, 0, 0, 0}, true, part};
}

elu_status elu_modules_generic_part(elu_ctx *ctx, elu_dtype dtype, enum elu_part part,
                                    const struct module **out)
{
    struct elu_gpu *g = ctx->gpu;
    const struct elu_spec spec = generic_spec(dtype, part);
    struct module *m = find(g, &spec);
    elu_status status = ELU_OK;
    if (!m) {
        pthread_mutex_lock(&g->lock);
        if (!(m = find(g, &spec)))
            status = load(ctx, &spec, &m);
        pthread_mutex_unlock(&g->lock);
    }
    *out = m;
    return status;
}

/* spec's module from the disk cache, without NVRTC, into m (under
 * g->lock, the primary context current): true when loaded. */
static bool load_cached(elu_ctx *ctx, const struct elu_spec *spec, struct module *m)
{
    struct elu_target t = {ctx->gpu->sm, ELU_BINARY_CUBIN};
    struct elu_binary bin;
    if (!elu_jit_cached(ctx, spec, &t, &bin) || install(ctx, spec, &bin, m) != ELU_OK)
        return false;
    autotune(ctx, m);
    return true;
}

/* spec's module from the disk cache, published; NULL when the cache lacks
 * it. Under g->lock. */
static struct module *publish_cached(elu_ctx *ctx, const struct elu_spec *spec)
{
    struct elu_gpu *g = ctx->gpu;
    struct module *m = next_entry(ctx);
    const bool pushed = elu_gpu_enter(g);
    const bool loaded = m && load_cached(ctx, spec, m);
    elu_gpu_leave(g, pushed);
    if (!loaded)
        return NULL;
    publish(g);
    return m;
}

const struct module *elu_modules_whole_generic(elu_ctx *ctx, elu_dtype dtype, bool *held)
{
    struct elu_gpu *g = ctx->gpu;
    const struct elu_spec spec = generic_spec(dtype, ELU_PART_ALL);
    const struct module *m = find(g, &spec);
    /* Once offered, no lock: a thread may hold it through a quick part's
     * compile, for which a call that has its kernels must not wait. */
    if (m || atomic_load(&g->generic_offered[dtype]))
        return m;
    pthread_mutex_lock(&g->lock);
    if (!(m = find(g, &spec)) && !atomic_load(&g->generic_offered[dtype])) {
        atomic_store(&g->generic_offered[dtype], true);
        if (!(m = publish_cached(ctx, &spec)) && elu_builder_queue(ctx, &spec)) {
            g->held++;
            *held = true;
        }
    }
    pthread_mutex_unlock(&g->lock);
    return m;
}

/* Whether spec (no module of its own yet; `backed` its entry, or NULL) may
 * have one within the cap, counting it if so; under g->lock. */
static bool claim(elu_ctx *ctx, struct module *backed)
{
    struct elu_gpu *g = ctx->gpu;
    if (backed && atomic_load(&backed->claimed))
        return true;
    if (atomic_load_explicit(&g->specialized, memory_order_relaxed) >=
        (size_t)ctx->max_specializations) {
        if (backed)
            atomic_store(&backed->refused, true);
        return false;
    }
    atomic_fetch_add_explicit(&g->specialized, 1, memory_order_relaxed);
    if (backed)
        atomic_store(&backed->claimed, true);
    return true;
}

/* Give up spec's claim after a failed build (under g->lock): its place
 * under the cap is freed, and it is not tried again. */
static void release(elu_ctx *ctx, const struct elu_spec *spec)
{
    struct module *m = spec->generic ? NULL : find(ctx->gpu, spec);
    if (m && m->backed && atomic_load(&m->claimed)) {
        atomic_store(&m->refused, true);
        atomic_store(&m->claimed, false);
        atomic_fetch_sub_explicit(&ctx->gpu->specialized, 1, memory_order_relaxed);
    }
}

void elu_modules_build_failed(elu_ctx *ctx, const struct elu_spec *spec)
{
    pthread_mutex_lock(&ctx->gpu->lock);
    release(ctx, spec);
    pthread_mutex_unlock(&ctx->gpu->lock);
}

void elu_modules_note_call(elu_ctx *ctx, struct module *m, bool now)
{
    const unsigned calls = atomic_fetch_add_explicit(&m->calls, 1, memory_order_relaxed) + 1;
    if ((!now && calls < ELU_HOT_CALLS) || atomic_load(&m->claimed) || atomic_load(&m->refused))
        return;
    pthread_mutex_lock(&ctx->gpu->lock);
    if (!atomic_load(&m->claimed) && claim(ctx, m) && !elu_builder_queue(ctx, &m->spec))
        release(ctx, &m->spec);
    pthread_mutex_unlock(&ctx->gpu->lock);
}

/* Whether spec's entry is there as wanted (its module when `built`), into
 * *out; or NULL where the cap is reached (backed entries, or for `built`
 * modules of their own) and the generic kernels serve with the call's
 * constants. */
static bool settled(elu_ctx *ctx, const struct elu_spec *spec, bool built, struct module **out)
{
    struct elu_gpu *g = ctx->gpu;
    *out = find(g, spec);
    if (*out)
        return !built || !(*out)->backed;
    return atomic_load_explicit(built ? &g->specialized : &g->tracked, memory_order_relaxed) >=
           (size_t)ctx->max_specializations;
}

/* A first call of spec, under g->lock: its module from the disk cache
 * (within the cap on modules of their own), else a backed entry: the
 * generic kernels serve it, as fast, and the builder compiles its module
 * only once it is in steady use (elu_modules_note_call). NULL past the cap
 * on backed entries. */
static elu_status serve(elu_ctx *ctx, const struct elu_spec *spec, struct module **out)
{
    struct elu_gpu *g = ctx->gpu;
    const bool room = atomic_load_explicit(&g->specialized, memory_order_relaxed) <
                      (size_t)ctx->max_specializations;
    if (room && (*out = publish_cached(ctx, spec)) != NULL) {
        claim(ctx, NULL);
        return ELU_OK;
    }
    *out = NULL;
    if (atomic_load_explicit(&g->tracked, memory_order_relaxed) >=
        (size_t)ctx->max_specializations)
        return ELU_OK;
    struct module *m = next_entry(ctx);
    if (!m)
        return ELU_ERR_OUT_OF_MEMORY;
    *m = backed_entry(spec);
    atomic_fetch_add_explicit(&g->tracked, 1, memory_order_relaxed);
    publish(g);
    *out = m;
    return ELU_OK;
}

/* spec's own module, loaded (compiled if need be) within the cap; NULL
 * past it. Under g->lock. */
static elu_status load_own(elu_ctx *ctx, const struct elu_spec *spec, struct module **out)
{
    struct module *backed = find(ctx->gpu, spec);
    const bool had = backed && atomic_load(&backed->claimed);
    *out = NULL;
    if (!claim(ctx, backed))
        return ELU_OK;
    const elu_status status = load(ctx, spec, out);
    if (status != ELU_OK && !had) { /* a failure keeps no place under the cap */
        atomic_fetch_sub_explicit(&ctx->gpu->specialized, 1, memory_order_relaxed);
        if (backed)
            atomic_store(&backed->claimed, false);
    }
    return status;
}

/* The entry for c (see settled). The hit path takes no lock; a miss loads,
 * backs or compiles under the table's lock, after looking again (another
 * thread may have meanwhile), so each entry is made once. */
elu_status elu_modules_entry_for(elu_ctx *ctx, const struct elu_coef *c, bool built,
                                 struct module **out)
{
    struct elu_gpu *g = ctx->gpu;
    elu_status status = elu_gpu_check_not_forked(ctx);
    if (status != ELU_OK)
        return status;
    const struct elu_spec spec = {*c, false, ELU_PART_ALL};
    if (settled(ctx, &spec, built, out)) {
        ELU_COUNT(ctx, memory_hits);
        return ELU_OK;
    }
    pthread_mutex_lock(&g->lock);
    if (settled(ctx, &spec, built, out))
        ELU_COUNT(ctx, memory_hits);
    else
        status = built ? load_own(ctx, &spec, out) : serve(ctx, &spec, out);
    pthread_mutex_unlock(&g->lock);
    return status;
}

elu_status elu_gpu_prepare(elu_ctx *ctx, const struct elu_coef *c)
{
    struct module *m;
    const struct module *whole;
    elu_status status = elu_modules_entry_for(ctx, c, true, &m);
    if (status == ELU_OK && !m) /* beyond the cap: the whole generic module */
        status = elu_modules_generic_part(ctx, c->dtype, ELU_PART_ALL, &whole);
    return status;
}

void elu_modules_finish_build(elu_ctx *ctx, const struct elu_spec *spec, struct elu_binary *bin)
{
    struct elu_gpu *g = ctx->gpu;
    pthread_mutex_lock(&g->lock);
    const bool tune = ctx->autotune && !spec->generic && !g->tuned[spec->coef.dtype];
    pthread_mutex_unlock(&g->lock);
    struct module built;
    struct elu_tuning tuning;
    const bool pushed = elu_gpu_enter(g);
    elu_status status = install(ctx, spec, bin, &built);
    if (status == ELU_OK && tune)
        measure(ctx, &built, &tuning);
    elu_gpu_leave(g, pushed);
    pthread_mutex_lock(&g->lock);
    /* A specialization replaces its backed entry; a generic module is new. */
    struct module *m = find(g, spec);
    const bool wanted = spec->generic ? !m : m && m->backed;
    if (wanted && !atomic_load(&g->closing) && (m = next_entry(ctx)) != NULL) {
        if (status == ELU_OK) {
            if (tune && !g->tuned[spec->coef.dtype])
                adopt(g, &built, &tuning);
            *m = built;
            publish(g);
        } else { /* refused by the driver: the other form */
            status = load(ctx, spec, &m);
        }
        if (status == ELU_OK)
            ELU_COUNT(ctx, background_builds);
        else
            release(ctx, spec);
    } else if (status == ELU_OK) { /* elu_prepare() or the context's end came first */
        const bool again = elu_gpu_enter(g);
        g->cu->ModuleUnload(built.handle);
        elu_gpu_leave(g, again);
    }
    pthread_mutex_unlock(&g->lock);
}
