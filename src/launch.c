/* Launches: the geometry of each kernel's grid, its arguments (one struct,
 * kernels_src/elu_kernel_args.h), which module's kernel runs a call, and
 * the launch itself, with programmatic dependent launch where the GPU has
 * it. */
#include "gpu_internal.h"

#include <limits.h>
#include <stdint.h>

/* Blocks to cover n elements in one pass of the grid, each thread taking
 * per_thread of them: one pass beats a grid-stride loop over a resident
 * wave, as the block scheduler keeps every SM fed (docs/DESIGN.md, Launch
 * geometry). */
static size_t blocks_for(size_t n, size_t per_thread, size_t threads)
{
    const size_t per_block = per_thread * threads;
    return n ? (n + per_block - 1) / per_block : 1;
}

/* The elements before the first whole pack of `bytes` (kernels_src/elu.cu's
 * map): up to the pack boundary where a, b and out are equally misaligned,
 * else all n, which then go one by one. Worked out here once rather than
 * in every thread: together with the forward's one pass without a loop,
 * that speeds every dtype's forward where the operands sit in L2; the half
 * types' table kernel, which keeps its loop, gained nothing or lost
 * (docs/DESIGN.md, Launch geometry). */
static unsigned long long pack_head(const void *a, const void *b, const void *out, size_t n,
                                    size_t size, size_t bytes)
{
    const uintptr_t mis = (uintptr_t)a % bytes;
    if ((uintptr_t)b % bytes != mis || (uintptr_t)out % bytes != mis || mis % size)
        return n;
    const size_t before = (bytes - mis) % bytes / size;
    return before < n ? before : n;
}

/* Whether a contiguous kernel has no loop over its packs
 * (kernels_src/elu.cu's ONE_PASS, or a loop that runs once: the half
 * types' forward table kernel), so that its grid must cover them in one
 * pass: every forward, and the half types' backward. */
static bool one_pass(enum elu_kernel kernel, size_t size)
{
    return kernel == ELU_KERNEL_FORWARD || size == 2;
}

/* The f32 and f64 backward's grid where one pass of it (blocks_for) takes
 * up to BALANCED_WAVES waves of the blocks the GPU holds at once (`wave`,
 * of 128 threads): as few blocks as need the same number of passes of the
 * kernel's grid-stride loop, so that no last wave runs part full while
 * the operands sit in L2, which speeds the backward there. The forward
 * lost with it, and the half types' backward gained more from one pass
 * without a loop (kernels_src/elu.cu's map; docs/DESIGN.md, Launch
 * geometry). */
#define BALANCED_WAVES 4
static unsigned balanced_blocks(unsigned blocks, unsigned wave, unsigned threads)
{
    const size_t resident = (size_t)wave * 128 / threads;
    if (resident == 0 || blocks <= resident || blocks > BALANCED_WAVES * resident)
        return blocks;
    const size_t passes = (blocks + resident - 1) / resident;
    return (unsigned)((blocks + passes - 1) / passes);
}

/* Whether an f32 or f64 forward takes elu_forward_contiguous, whose blocks
 * take their packs in a row rather than a grid apart: where its operands,
 * read and written, outgrow L2 and stream from memory. In a row, each
 * block's loads fall within one run of memory, as PyTorch's kernels' do;
 * a grid apart, a thread's two packs lie half the input apart. In a row
 * is faster from memory, a grid apart faster in L2 (docs/DESIGN.md,
 * Launch geometry). */
static bool contiguous_packs(const struct elu_gpu *g, size_t operand_bytes)
{
    return g->l2_bytes && operand_bytes > g->l2_bytes / 2;
}

/* The most elements for which a half type's forward takes
 * elu_forward_computed (packs of 8 bytes) rather than the table's kernel.
 * Up to there the operands sit in L2, and the table's lookups, which start
 * each kernel out of L1, cost more than computing; beyond, the table wins.
 * bf16's lookups gather in fewer lines, so its crossover comes sooner
 * (docs/DESIGN.md, The half types). */
static size_t computed_max(elu_dtype dtype)
{
    return dtype == ELU_F16 ? (size_t)1 << 20 : (size_t)1 << 19;
}

/* Launch fn, of m's module, on a grid of gx * gy blocks of `threads`;
 * where g->pdl and m's kernels wait, with programmatic dependent launch
 * (ELU_NO_PDL): every kernel begins by waiting for the kernels before it
 * in the stream (kernels_src/elu.cu's after_previous_kernels), so it may
 * start while the one before it drains. That pays most where kernels are
 * short (docs/DESIGN.md, Programmatic dependent launch). */
static elu_cu_result launch(const struct elu_gpu *g, const struct module *m,
                            elu_cu_function fn, unsigned gx, unsigned gy, unsigned threads,
                            elu_stream stream, void **params)
{
    if (!g->pdl || !m->built.waits)
        return g->cu->LaunchKernel(fn, gx, gy, 1, threads, 1, 1, 0, stream, params, NULL);
    struct elu_cu_launch_attribute early = {
        .id = ELU_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, .value.value = 1};
    const struct elu_cu_launch_config config = {
        {gx, gy, 1}, {threads, 1, 1}, 0, stream, &early, 1};
    return g->cu->LaunchKernelEx(&config, fn, params, NULL);
}

/* A launch of the quick generic forward kernel compiled by NVRTC to a
 * cubin (elu_quick_packs), which has no loop: one thread per element, in rows of ROW_BLOCKS blocks (blockIdx.y the row) so
 * that any n fits the grid's limits (2^31 - 1 blocks across, 65535 down):
 * up to 2^44 bytes (2^41 f64 elements). Blocks of QUICK_BLOCK_BYTES of
 * input (f64's 128 threads, f32's 256, the half types' 512), the fastest
 * for each dtype of the sizes tried (docs/DESIGN.md, Specialized and
 * generic kernels). Rows begin at 256 MiB of input, which the exhaustive
 * GPU tests reach. */
#define ROW_BLOCKS ((size_t)1 << 18)
#define MAX_ROWS 65535
#define QUICK_BLOCK_BYTES 1024
static elu_cu_result launch_rows(const struct elu_gpu *g, const struct module *m,
                                 elu_cu_function fn, size_t n, elu_stream stream,
                                 void **params)
{
    const elu_dtype dtype = m->spec.coef.dtype;
    const unsigned threads = QUICK_BLOCK_BYTES / (unsigned)elu_dtype_size(dtype);
    const size_t blocks = n ? (n - 1) / threads + 1 : 1;
    const size_t rows = (blocks - 1) / ROW_BLOCKS + 1;
    if (rows > MAX_ROWS)
        return ELU_CU_ERROR_INVALID_VALUE;
    const size_t across = rows > 1 ? ROW_BLOCKS : blocks;
    return launch(g, m, fn, (unsigned)across, (unsigned)rows, threads, stream, params);
}

/* One launch of a kernel of m's module (specialized or generic), the
 * primary context current; `coef` and `table` are the generic kernels'
 * constants and forward table. The shape is the contiguous kernels' (the
 * strided kernel takes one element per thread, and `kind`: the kernel, or
 * FWD_PYTORCH). A half type's forward of up to computed_max elements runs
 * elu_forward_computed where the module has it. */
elu_cu_result elu_launch_shaped(const struct elu_gpu *g, const struct module *m,
                                   const union elu_coef_arg *coef, elu_cu_deviceptr table,
                                   enum elu_kernel kernel, int kind, struct elu_shape shape,
                                   const void *a, const void *b, void *out, size_t n,
                                   const struct elu_layout *layout, elu_stream stream)
{
    if (layout) {
        struct elu_strided_args args = {a, b ? b : a, out, n, (const void *)(uintptr_t)table,
                                        *coef, *layout, kind};
        void *params[] = {&args};
        const size_t blocks = blocks_for(n, 1, shape.threads);
        return launch(g, m, m->built.fn[STRIDED], blocks > INT_MAX ? INT_MAX : (unsigned)blocks,
                      1, shape.threads, stream, params);
    }
    const size_t size = elu_dtype_size(m->spec.coef.dtype);
    const bool quick = m->spec.part == ELU_PART_FORWARD || m->spec.part == ELU_PART_FORWARD_UNIT_NIP;
    const bool computed =
        kernel == ELU_KERNEL_FORWARD && m->built.fn[COMPUTED] && n <= computed_max(m->spec.coef.dtype);
    /* The bytes of a pack, and how many each thread takes (kernels_src/elu.cu). */
    const size_t pack_bytes = quick ? ELU_QUICK_PACK_BYTES(size) : computed ? 8 : 16;
    const size_t packs = quick || computed ? 1 : shape.packs;
    struct elu_contiguous_args args = {a, b ? b : a, out, n,
                                       pack_head(a, b ? b : a, out, n, size, pack_bytes),
                                       (const void *)(uintptr_t)table, *coef};
    void *params[] = {&args};
    if (quick && !m->built.quick_packs)
        return launch_rows(g, m, m->built.fn[kernel], n, stream, params);
    const size_t per_thread = packs * pack_bytes / size;
    const bool contiguous = !computed && kernel == ELU_KERNEL_FORWARD && m->built.fn[CONTIGUOUS] &&
                            shape.packs == elu_max_packs(kernel) && contiguous_packs(g, n * size);
    const size_t fn = computed ? COMPUTED : contiguous ? CONTIGUOUS : kernel;
    const size_t needed = blocks_for(n, per_thread, shape.threads);
    /* A grid short of a one-pass kernel's packs would leave elements
     * unwritten (past 2^39 elements or more, by the kernel). */
    const bool single = one_pass(kernel, size);
    if (single && needed > INT_MAX)
        return ELU_CU_ERROR_INVALID_VALUE;
    unsigned blocks = needed > INT_MAX ? INT_MAX : (unsigned)needed;
    if (!single)
        blocks = balanced_blocks(blocks, m->built.wave[fn], shape.threads);
    return launch(g, m, m->built.fn[fn], blocks, 1, shape.threads, stream, params);
}

/* Whether the generic forward kernel, exact only, takes these constants:
 * the exact method's (the half types' computed forward takes any). */
static bool generic_forward_takes(const union elu_coef_arg *coef, elu_dtype dtype)
{
    if (dtype == ELU_F16 || dtype == ELU_BF16)
        return true;
    return ((dtype == ELU_F64 ? coef->d.flags : coef->f.flags) & ELU_COEF_EXACT) != 0;
}

/* What one launch of `kernel` for c runs: the module that holds it
 * (specialized, or a generic part), the generic kernels' constants and
 * table, the strided kernel's kind, and the layout (NULL: contiguous). */
struct plan {
    const struct module *code;
    union elu_coef_arg coef;
    elu_cu_deviceptr table;
    int kind;
    const struct elu_layout *layout;
    struct elu_layout line; /* where the layout is the elements in a line */
};

/* The generic kernels for a launch of `kernel` for c: the dtype's whole
 * generic module once built, else its quick parts; elu_strided's
 * FWD_PYTORCH where the generic forward does not take the constants. */
static elu_status plan_generic(elu_ctx *ctx, const struct elu_coef *c, enum elu_kernel kernel,
                               size_t n, struct plan *p)
{
    if (kernel == ELU_KERNEL_FORWARD && !generic_forward_takes(&p->coef, c->dtype)) {
        p->kind = ELU_KIND_FORWARD_PYTORCH;
        if (!p->layout) {
            p->line = (struct elu_layout){.ndim = 1, .shape = {(int64_t)n},
                                          .stride = {{1}, {1}, {1}}};
            p->layout = &p->line;
        }
    }
    bool held = false;
    elu_status status = ELU_OK;
    if ((p->code = elu_modules_whole_generic(ctx, c->dtype, &held)) == NULL) {
        const enum elu_part part = p->layout || kernel != ELU_KERNEL_FORWARD
                                       ? ELU_PART_REST
                                       : elu_modules_forward_part(c);
        status = elu_modules_generic_part(ctx, c->dtype, part, &p->code);
    }
    /* Held even where the whole module is ready: another thread may have
     * built it (elu_prepare) since this call queued it. */
    if (held)
        elu_builder_let_go(ctx->gpu);
    return status;
}

static elu_status plan_launch(elu_ctx *ctx, const struct elu_coef *c, enum elu_kernel kernel,
                              size_t n, struct plan *p)
{
    struct module *m;
    const elu_status status = elu_modules_entry_for(ctx, c, false, &m);
    if (status != ELU_OK)
        return status;
    p->code = m;
    p->coef = m ? m->coef : elu_modules_coef(c);
    p->kind = (int)kernel;
    if (m && elu_modules_ready(m)) {
        p->table = m->built.table;
        return ELU_OK;
    }
    if (m)
        elu_modules_note_call(ctx, m, false);
    return plan_generic(ctx, c, kernel, n, p);
}

elu_status elu_gpu_launch(elu_ctx *ctx, const struct elu_coef *c,
                          enum elu_kernel kernel, const void *a, const void *b,
                          void *out, size_t n, const struct elu_layout *layout,
                          elu_stream stream)
{
    struct plan p = {.layout = layout};
    const elu_status status = plan_launch(ctx, c, kernel, n, &p);
    if (status != ELU_OK)
        return status;
    const struct elu_gpu *g = ctx->gpu;
    const bool generic = p.code->spec.generic;
    const struct elu_tuning *tuning = generic ? &g->rule : &g->tuning[c->dtype];
    const struct elu_shape shape =
        p.layout ? (struct elu_shape){128, 1}
                 : tuning->shape[kernel][elu_size_class(n * elu_dtype_size(c->dtype))];
    const bool pushed = elu_gpu_enter(g);
    const elu_cu_result r = elu_launch_shaped(g, p.code, &p.coef, p.table, kernel, p.kind, shape,
                                          a, b, out, n, p.layout, stream);
    elu_gpu_leave(g, pushed);
    if (r != 0)
        return elu_gpu_fail_cu(ctx, ELU_ERR_CUDA,
                               g->pdl && p.code->built.waits ? "cuLaunchKernelEx"
                                                             : "cuLaunchKernel", r);
    ELU_COUNT(ctx, gpu_launches);
    if (generic)
        ELU_COUNT(ctx, generic_launches);
    return ELU_OK;
}
