/* The module table: an entry for each specialization and each generic
 * module, with its state (gpu_internal.h): the generic kernels serve a
 * specialization until its module, from the disk cache or compiled, is
 * READY. Builds run without the table's lock, by the thread that set the
 * entry BUILDING; ELU_AUTOTUNE measures a dtype's launch shapes with its
 * first specialized module, in that build. */
#include "builtin_ptx.h"
#include "gpu_internal.h"

#include "half_table.h"
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

/* spec's entry, or NULL. */
static struct module *find(struct elu_gpu *g, const struct elu_spec *spec)
{
    const size_t count = atomic_load_explicit(&g->published, memory_order_acquire);
    for (size_t i = 0; i < count; i++)
        if (same_spec(&g->modules[i].spec, spec))
            return &g->modules[i];
    return NULL;
}

static enum module_state state_of(const struct module *m)
{
    return (enum module_state)atomic_load_explicit(&m->state, memory_order_acquire);
}

bool elu_modules_ready(const struct module *m) { return state_of(m) == MODULE_READY; }

/* Under g->lock; the end of a build is told to those waiting for it. */
static void set_state(struct elu_gpu *g, struct module *m, enum module_state state)
{
    if (state_of(m) == MODULE_BUILDING)
        pthread_cond_broadcast(&g->settled);
    atomic_store_explicit(&m->state, (int)state, memory_order_release);
}

/* A new entry for spec in `state`, published, under g->lock; NULL if the
 * table is full (it is sized so that it never is). A specialization's
 * counts under `tracked`. */
static struct module *add(elu_ctx *ctx, const struct elu_spec *spec, enum module_state state)
{
    struct elu_gpu *g = ctx->gpu;
    const size_t count = atomic_load_explicit(&g->published, memory_order_relaxed);
    if (count == g->capacity) {
        elu_fail(ctx, ELU_ERR_OUT_OF_MEMORY, "the module table is full");
        return NULL;
    }
    struct module *m = &g->modules[count];
    m->spec = *spec;
    m->coef = elu_modules_coef(&spec->coef); /* a generic module's: unused */
    atomic_init(&m->state, (int)state);
    atomic_init(&m->calls, 0);
    if (!spec->generic)
        atomic_fetch_add_explicit(&g->tracked, 1, memory_order_relaxed);
    atomic_store_explicit(&g->published, count + 1, memory_order_release);
    return m;
}

/* A place under the cap on modules of their own, if there is one; under
 * g->lock. */
static bool claim(elu_ctx *ctx)
{
    struct elu_gpu *g = ctx->gpu;
    if (atomic_load_explicit(&g->specialized, memory_order_relaxed) >=
        (size_t)ctx->max_specializations)
        return false;
    atomic_fetch_add_explicit(&g->specialized, 1, memory_order_relaxed);
    return true;
}

static void unclaim(struct elu_gpu *g)
{
    atomic_fetch_sub_explicit(&g->specialized, 1, memory_order_relaxed);
}

/* The generic kernels' constants argument for c, in the dtype's
 * arithmetic (float values are exact: c's are float-valued). */
union elu_coef_arg elu_modules_coef(const struct elu_coef *c)
{
    const int flags = elu_exact_forward_takes(c)
                          ? ELU_COEF_EXACT | (c->input_scale == 1 ? ELU_COEF_UNIT_INPUT_SCALE : 0)
                          : 0;
    union elu_coef_arg u;
    memset(&u, 0, sizeof u);
    if (c->dtype == ELU_F64)
        u.d = (struct elu_coef_f64){c->scale_alpha, c->scale, c->input_scale, flags};
    else
        u.f = (struct elu_coef_f32){(float)c->scale_alpha, (float)c->scale, (float)c->input_scale,
                                    flags};
    return u;
}

/* Copy c's forward table into the module's elu_forward_table, done before
 * any stream reads it: from pageable memory, cuMemcpyHtoD may return
 * before its DMA ends, and a non-blocking stream does not wait for the
 * legacy stream. */
static elu_cu_result upload_table(const struct elu_gpu *g, elu_cu_deviceptr to, const void *from)
{
    const elu_cu_result r = g->cu->MemcpyHtoD(to, from, ELU_HALF_TABLE_BYTES);
    return r != 0 ? r : g->cu->StreamSynchronize(NULL);
}

/* A specialized half-type module's forward as a table, as on the CPU: a
 * half type has 65536 values, so the correctly rounded result for each,
 * computed once per specialization (cheap beside a compile, and kept in
 * the disk cache: half_table.h) and looked up by the kernel, is both exact
 * and cheaper from memory than computing expm1 in float, which bounds the
 * generic module's computed forward (docs/DESIGN.md, The half types). */
static elu_status forward_table(elu_ctx *ctx, const struct elu_spec *spec,
                                struct module_code *code)
{
    if (!elu_half_table_needed(spec))
        return ELU_OK;
    const struct elu_gpu *g = ctx->gpu;
    elu_cu_deviceptr table = 0;
    size_t bytes = 0;
    elu_cu_result r = g->cu->ModuleGetGlobal(&table, &bytes, code->handle, "elu_forward_table");
    if (r == 0 && bytes != ELU_HALF_TABLE_BYTES)
        r = ELU_CU_ERROR_INVALID_VALUE; /* not our kernel source */
    if (r != 0)
        return elu_gpu_fail_cu(ctx, ELU_ERR_CUDA, "the forward table", r);
    uint16_t *y = NULL;
    elu_status status = elu_half_table_obtain(ctx, &spec->coef, &y);
    if (status == ELU_OK && (r = upload_table(g, table, y)) != 0)
        status = elu_gpu_fail_cu(ctx, ELU_ERR_CUDA, "the forward table", r);
    if (status == ELU_OK)
        code->table = table;
    free(y);
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

/* Load bin (freed here) as spec's module into *code, the primary context
 * current. */
static elu_status install(elu_ctx *ctx, const struct elu_spec *spec, struct elu_binary *bin,
                          struct module_code *code)
{
    const struct elu_gpu *g = ctx->gpu;
    *code = (struct module_code){.waits = bin->arch >= 90,
                                 .quick_packs = elu_quick_packs(spec->part, bin->kind)};
    const char *what = bin->kind == ELU_BINARY_CUBIN ? "cuModuleLoadData (cubin)"
                                                     : "cuModuleLoadData (PTX)";
    const elu_cu_result r = g->cu->ModuleLoadData(&code->handle, bin->data);
    elu_status status = r == 0 ? ELU_OK : elu_gpu_fail_cu(ctx, ELU_ERR_CUDA, what, r);
    free(bin->data);
    bin->data = NULL;
    for (size_t k = 0; k < KERNELS && status == ELU_OK; k++) {
        if (!holds(spec, k))
            continue;
        const elu_cu_result e =
            g->cu->ModuleGetFunction(&code->fn[k], code->handle, KERNEL_NAMES[k]);
        if (e != 0)
            status = elu_gpu_fail_cu(ctx, ELU_ERR_CUDA, KERNEL_NAMES[k], e);
        int per_sm = 0;
        if (e == 0 && g->cu->OccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, code->fn[k],
                                                                       128, 0) == 0)
            code->wave[k] = (unsigned)per_sm * (unsigned)g->multiprocessors;
    }
    if (status == ELU_OK)
        status = forward_table(ctx, spec, code);
    if (status != ELU_OK && r == 0)
        g->cu->ModuleUnload(code->handle);
    if (status != ELU_OK)
        *code = (struct module_code){0};
    return status;
}

/* spec's binary in the form *kind asks for, set to the form made: a cubin
 * for this very GPU from the disk cache needs no NVRTC; else NVRTC says
 * which target it can make, and makes it if the cache lacks it. */
static elu_status obtain(elu_ctx *ctx, const struct elu_spec *spec, enum elu_binary_kind *kind,
                         struct elu_binary *bin)
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

/* A quick forward part from the PTX built into libelu (builtin_ptx.h),
 * which the driver compiles for this GPU: a dtype's first call waits for
 * that, and not for NVRTC (docs/DESIGN.md, Compiling). False where libelu
 * has none for spec or for this GPU, or the driver refuses it (a PTX newer
 * than the driver), its failure noted: NVRTC then compiles the part. */
static bool install_builtin(elu_ctx *ctx, const struct elu_spec *spec,
                            struct module_code *code)
{
    struct elu_binary bin = {.kind = ELU_BINARY_PTX};
    const char *ptx = elu_builtin_ptx(spec, &bin.arch);
    if (!ptx || bin.arch > ctx->gpu->sm)
        return false;
    bin.size = strlen(ptx) + 1;
    if (!(bin.data = malloc(bin.size))) /* install frees it */
        return false;
    memcpy(bin.data, ptx, bin.size);
    if (install(ctx, spec, &bin, code) != ELU_OK)
        return false;
    ELU_COUNT(ctx, builtin_ptx_loads);
    return true;
}

/* spec's module into *code, compiled if need be: a quick forward part
 * from the PTX built in where it can. A binary that the driver refuses (a
 * PTX newer than the driver, a stale cubin) is rebuilt once in the other
 * form before giving up. */
static elu_status compile_and_install(elu_ctx *ctx, const struct elu_spec *spec,
                                      struct module_code *code)
{
    if (install_builtin(ctx, spec, code))
        return ELU_OK;
    elu_status status = ELU_ERR_CUDA;
    enum elu_binary_kind kind = ELU_BINARY_CUBIN;
    for (int attempt = 0; attempt < 2 && status == ELU_ERR_CUDA; attempt++) {
        struct elu_binary bin = {0};
        if ((status = obtain(ctx, spec, &kind, &bin)) == ELU_OK)
            status = install(ctx, spec, &bin, code);
        free(bin.data);
        if (kind != ELU_BINARY_CUBIN)
            break;
        kind = ELU_BINARY_PTX;
    }
    return status;
}

/* spec's module into *code from the disk cache, without NVRTC: true when
 * loaded. */
static bool install_cached(elu_ctx *ctx, const struct elu_spec *spec, struct module_code *code)
{
    struct elu_target t = {ctx->gpu->sm, ELU_BINARY_CUBIN};
    struct elu_binary bin;
    return elu_jit_cached(ctx, spec, &t, &bin) && install(ctx, spec, &bin, code) == ELU_OK;
}

/* -------- ELU_AUTOTUNE -------- */

struct tune_arg {
    const struct elu_gpu *g;
    const struct module *m;
};

static elu_cu_result tune_launch(void *arg, enum elu_kernel kernel, struct elu_shape shape,
                                 elu_cu_deviceptr a, elu_cu_deviceptr b, elu_cu_deviceptr out,
                                 size_t n, elu_cu_stream stream)
{
    const struct tune_arg *t = arg;
    return elu_launch_shaped(t->g, t->m, &t->m->coef, t->m->built.table, kernel, (int)kernel,
                             shape, (const void *)(uintptr_t)a, (const void *)(uintptr_t)b,
                             (void *)(uintptr_t)out, n, NULL, stream);
}

/* A build in flight: its entry, and whether it measures its dtype's launch
 * shapes (ELU_AUTOTUNE: the first specialized module of its dtype), into
 * `tuning`. */
struct build {
    struct module *m;
    bool tune;
    struct elu_tuning tuning;
};

/* The dtype's launch shapes measured with b's kernels (not yet READY), the
 * primary context current: elu_tune's, which keeps the rule's where it
 * cannot measure. */
static void measure(elu_ctx *ctx, struct build *b)
{
    const struct elu_gpu *g = ctx->gpu;
    const struct elu_tune_device d = {g->cu, g->name, g->sm, g->resident_threads};
    struct tune_arg arg = {g, b->m};
    b->tuning = g->rule;
    elu_tune(ctx, &d, b->m->spec.coef.dtype, tune_launch, &arg, &b->tuning);
}

/* -------- builds -------- */

/* m BUILDING, by this thread; under g->lock. */
static struct build begin_build(elu_ctx *ctx, struct module *m)
{
    struct elu_gpu *g = ctx->gpu;
    set_state(g, m, MODULE_BUILDING);
    return (struct build){
        .m = m, .tune = ctx->autotune && !m->spec.generic && !g->tuned[m->spec.coef.dtype]};
}

/* b's module built into b->m->built (no other thread reads it until
 * READY), without g->lock: from the disk cache only when `cached_only`
 * (ELU_ERR_IO on a miss), else compiled if need be; measured, where b
 * tunes. */
static elu_status run_build(elu_ctx *ctx, struct build *b, bool cached_only)
{
    struct elu_gpu *g = ctx->gpu;
    const struct elu_spec *spec = &b->m->spec;
    const bool pushed = elu_gpu_enter(g);
    elu_status status = ELU_ERR_IO;
    if (!cached_only)
        status = compile_and_install(ctx, spec, &b->m->built);
    else if (install_cached(ctx, spec, &b->m->built))
        status = ELU_OK;
    if (status == ELU_OK && b->tune)
        measure(ctx, b);
    elu_gpu_leave(g, pushed);
    return status;
}

/* The end of b under g->lock: READY, the shapes it measured in force for
 * its dtype from now on (no launch reads a dtype's shapes until its first
 * specialized module is READY); else `otherwise`. */
static void end_build(elu_ctx *ctx, struct build *b, elu_status status,
                      enum module_state otherwise)
{
    struct elu_gpu *g = ctx->gpu;
    const elu_dtype dtype = b->m->spec.coef.dtype;
    if (status == ELU_OK && b->tune && !g->tuned[dtype]) {
        g->tuning[dtype] = b->tuning;
        g->tuned[dtype] = true;
    }
    set_state(g, b->m, status == ELU_OK ? MODULE_READY : otherwise);
}

/* m built on this thread, called and returning under g->lock, which it
 * lets go meanwhile (see run_build); `otherwise` its state if that fails. */
static elu_status build_here(elu_ctx *ctx, struct module *m, bool cached_only,
                             enum module_state otherwise)
{
    struct elu_gpu *g = ctx->gpu;
    struct build b = begin_build(ctx, m);
    pthread_mutex_unlock(&g->lock);
    const elu_status status = run_build(ctx, &b, cached_only);
    pthread_mutex_lock(&g->lock);
    end_build(ctx, &b, status, otherwise);
    return status;
}

/* m's state once no thread builds it; under g->lock. */
static enum module_state settled_state(struct elu_gpu *g, const struct module *m)
{
    enum module_state s;
    while ((s = state_of(m)) == MODULE_BUILDING)
        pthread_cond_wait(&g->settled, &g->lock);
    return s;
}

void elu_modules_build_queued(elu_ctx *ctx, struct module *m)
{
    struct elu_gpu *g = ctx->gpu;
    pthread_mutex_lock(&g->lock);
    if (state_of(m) == MODULE_QUEUED) {
        if (build_here(ctx, m, false, MODULE_FAILED) == ELU_OK)
            ELU_COUNT(ctx, background_builds);
        else if (!m->spec.generic) /* its place under the cap is freed */
            unclaim(g);
    }
    pthread_mutex_unlock(&g->lock);
}

/* -------- generic modules -------- */

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
    if (!m || !elu_modules_ready(m)) {
        pthread_mutex_lock(&g->lock);
        if (!(m = find(g, &spec)) && !(m = add(ctx, &spec, MODULE_QUEUED)))
            status = ELU_ERR_OUT_OF_MEMORY;
        else if (settled_state(g, m) != MODULE_READY) /* QUEUED or FAILED: built here */
            status = build_here(ctx, m, false, MODULE_FAILED);
        pthread_mutex_unlock(&g->lock);
    }
    *out = status == ELU_OK ? m : NULL;
    return status;
}

const struct module *elu_modules_whole_generic(elu_ctx *ctx, elu_dtype dtype, bool *held)
{
    struct elu_gpu *g = ctx->gpu;
    const struct elu_spec spec = generic_spec(dtype, ELU_PART_ALL);
    struct module *m = find(g, &spec);
    if (m)
        return elu_modules_ready(m) ? m : NULL;
    pthread_mutex_lock(&g->lock);
    if (!(m = find(g, &spec)) && (m = add(ctx, &spec, MODULE_QUEUED)) != NULL &&
        build_here(ctx, m, true, MODULE_QUEUED) != ELU_OK) {
        if (elu_builder_queue(ctx, m)) {
            g->held++;
            *held = true;
        } else {
            set_state(g, m, MODULE_FAILED);
        }
    }
    pthread_mutex_unlock(&g->lock);
    return m && elu_modules_ready(m) ? m : NULL;
}

/* -------- specializations -------- */

void elu_modules_note_call(elu_ctx *ctx, struct module *m, bool now)
{
    struct elu_gpu *g = ctx->gpu;
    const unsigned calls = atomic_fetch_add_explicit(&m->calls, 1, memory_order_relaxed) + 1;
    if ((!now && calls < ELU_HOT_CALLS) || state_of(m) != MODULE_SERVED)
        return;
    pthread_mutex_lock(&g->lock);
    if (state_of(m) == MODULE_SERVED) {
        if (!claim(ctx)) {
            set_state(g, m, MODULE_REFUSED);
        } else {
            set_state(g, m, MODULE_QUEUED);
            if (!elu_builder_queue(ctx, m)) {
                unclaim(g);
                set_state(g, m, MODULE_FAILED);
            }
        }
    }
    pthread_mutex_unlock(&g->lock);
}

/* Whether spec's entry is there as wanted (READY when `built`), into
 * *out; or NULL where the cap is reached (on entries, or for `built` on
 * modules of their own) and the generic kernels serve with the call's
 * constants. */
static bool settled(elu_ctx *ctx, const struct elu_spec *spec, bool built, struct module **out)
{
    struct elu_gpu *g = ctx->gpu;
    *out = find(g, spec);
    if (*out)
        return !built || elu_modules_ready(*out);
    return atomic_load_explicit(built ? &g->specialized : &g->tracked, memory_order_relaxed) >=
           (size_t)ctx->max_specializations;
}

/* A first call of spec, under g->lock: its module from the disk cache
 * (within the cap on modules of their own), else SERVED: the generic
 * kernels serve it, as fast, and the builder compiles its module only
 * once it is in steady use (elu_modules_note_call). */
static elu_status serve(elu_ctx *ctx, const struct elu_spec *spec, struct module **out)
{
    struct elu_gpu *g = ctx->gpu;
    struct module *m = add(ctx, spec, MODULE_SERVED);
    if (!m)
        return ELU_ERR_OUT_OF_MEMORY;
    if (claim(ctx) && build_here(ctx, m, true, MODULE_SERVED) != ELU_OK)
        unclaim(g);
    *out = m;
    return ELU_OK;
}

/* spec's own module, READY (built here if need be, or waited for) within
 * the cap; NULL past it. Under g->lock. */
static elu_status load_own(elu_ctx *ctx, const struct elu_spec *spec, struct module **out)
{
    struct elu_gpu *g = ctx->gpu;
    struct module *m = find(g, spec);
    const enum module_state s = m ? settled_state(g, m) : MODULE_SERVED;
    *out = NULL;
    if (s == MODULE_READY) {
        *out = m;
        return ELU_OK;
    }
    /* No entry made where failed builds of new constants have made as many
     * as the table holds. */
    if (!m && atomic_load_explicit(&g->tracked, memory_order_relaxed) >=
                  2 * (size_t)ctx->max_specializations)
        return ELU_OK;
    if (s != MODULE_QUEUED && !claim(ctx)) /* QUEUED has its place: taken over */
        return ELU_OK;
    if (!m && !(m = add(ctx, spec, MODULE_SERVED))) {
        unclaim(g);
        return ELU_ERR_OUT_OF_MEMORY;
    }
    const elu_status status = build_here(ctx, m, false, MODULE_FAILED);
    if (status == ELU_OK)
        *out = m;
    else
        unclaim(g);
    return status;
}

/* The entry for c (see settled). The hit path takes no lock; a miss makes
 * the entry under the table's lock, after looking again (another thread
 * may have meanwhile), so each entry is made once. */
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
