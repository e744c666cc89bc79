/* What the library's files share: the context, the specialization it runs,
 * counters and error reporting. Not installed. */
#ifndef ELU_INTERNAL_H
#define ELU_INTERNAL_H

#include "cache.h"
#include "elu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define ELU_ERRMSG_MAX 8192
#define ELU_PATH_MAX 4096

/* The constants after PyTorch's rounding: float-valued (stored exactly in a
 * double) for F32, F16 and BF16; double for F64. These, not the raw
 * alpha/scale/input_scale, identify a specialization. */
struct elu_coef {
    elu_dtype dtype;
    double scale_alpha; /* scale * alpha, formed in the arithmetic type */
    double scale;
    double input_scale;
};

/* Which kernels a module holds (kernels_src/elu.cu's ELU_PART): all of
 * them (a specialized module, or a dtype's whole generic module), or one
 * of the generic module's quick parts, which serve a dtype's first calls
 * until the whole module is built. The quick forward comes in two parts
 * for f32 and f64, one for input_scale 1 (compiled with ELU_UNIT_NIP): a
 * choice at run time would lengthen the cold first call's compile. */
enum elu_part { ELU_PART_ALL, ELU_PART_FORWARD, ELU_PART_REST, ELU_PART_FORWARD_UNIT_NIP };

/* What one compiled module is specialized on. */
struct elu_spec {
    struct elu_coef coef; /* a generic module's: the dtype alone */
    bool generic;         /* constants as kernel arguments, not compiled in */
    enum elu_part part;   /* ELU_PART_ALL unless a quick generic part */
};

/* The three kernels, on either path. */
enum elu_kernel {
    ELU_KERNEL_FORWARD,         /* a = x */
    ELU_KERNEL_BACKWARD_INPUT,  /* a = grad_y, b = x */
    ELU_KERNEL_BACKWARD_OUTPUT  /* a = grad_y, b = y */
};

/* The views the DLPack entry points take (struct elu_layout, a kernel
 * argument too) and everything else the kernels take. */
#include "elu_kernel_args.h"
#define ELU_SAME_(x, y) ((int)(x) == (int)(y))
_Static_assert(ELU_SAME_(ELU_KERNEL_FORWARD, ELU_FN_FORWARD) &&
                   ELU_SAME_(ELU_KERNEL_FORWARD, ELU_KIND_FORWARD) &&
                   ELU_SAME_(ELU_KERNEL_BACKWARD_INPUT, ELU_FN_BACKWARD_INPUT) &&
                   ELU_SAME_(ELU_KERNEL_BACKWARD_INPUT, ELU_KIND_BACKWARD_INPUT) &&
                   ELU_SAME_(ELU_KERNEL_BACKWARD_OUTPUT, ELU_FN_BACKWARD_OUTPUT) &&
                   ELU_SAME_(ELU_KERNEL_BACKWARD_OUTPUT, ELU_KIND_BACKWARD_OUTPUT),
               "enum elu_kernel indexes the kernels and names elu_strided's kinds");
#undef ELU_SAME_

struct elu_counters {
    atomic_uint_fast64_t compiles, disk_hits, disk_writes, disk_rejects,
        disk_errors, disk_evictions, memory_hits, gpu_launches, generic_launches,
        cpu_runs, autotunes, background_builds, builtin_ptx_loads;
};

struct elu_gpu;  /* gpu_internal.h */
struct elu_pool; /* pool.c */
struct elu_cpu_tables; /* cpu.c */

struct elu_ctx {
    uint64_t id;           /* unique in the process: keys its error messages */
    elu_backend backend;   /* CPU or CUDA, never AUTO */
    int device;            /* the CUDA device ordinal, or -1 */
    int cpu_threads;
    struct elu_pool *pool; /* cpu_threads - 1 workers, or NULL */
    struct elu_cpu_tables *tables; /* the half types' forward tables */
    int max_specializations;
    bool disk_cache;
    bool autotune;           /* ELU_AUTOTUNE */
    bool no_pdl;             /* ELU_NO_PDL */
    struct elu_cache cache;  /* valid when disk_cache */
    char cache_off[ELU_PATH_MAX + 256]; /* why not, when !disk_cache */
    struct elu_gpu *gpu;   /* NULL in a CPU context */
    struct elu_counters stats;
};

#define ELU_COUNT(ctx, field) \
    atomic_fetch_add_explicit(&(ctx)->stats.field, 1, memory_order_relaxed)

/* api.c: what every run entry point shares once its buffers are known:
 * the constants, the checks, the choice of path. `layout` is NULL for n
 * contiguous elements; b is NULL for the forward kernel. */
elu_status elu_run_any(elu_ctx *ctx, const elu_params *p, enum elu_kernel kernel,
                       const void *a, const void *b, void *out, size_t n,
                       const struct elu_layout *layout, elu_stream stream);

/* api.c: the checks of a run's buffers, n elements of `size` bytes each
 * (b NULL unless the kernel reads it), before anything is run: every
 * address computable without overflow, no output element sharing memory
 * with another or with an input's, other than in place. */
elu_status elu_check_buffers(elu_ctx *ctx, const void *a, const void *b, void *out,
                             size_t n, size_t size, const struct elu_layout *l);

/* errors.c: record printf-style detail as this thread's last error on ctx
 * and return status; and a fresh context id. */
uint64_t elu_new_ctx_id(void);
elu_status elu_fail(elu_ctx *ctx, elu_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
