/*
 * libelu: ELU, SELU and CELU, forward and backward, with PyTorch's semantics,
 * on NVIDIA GPUs (libcuda and NVRTC loaded at run time, kernels compiled for
 * the GPU present and kept in a per-user disk cache) and on the CPU. This
 * header is the whole API.
 *
 * - Functions that can fail return ELU_OK (0) or a negative elu_status;
 *   elu_ctx_last_error() has the detail. Input structs are read during the
 *   call only; nothing is allocated for the caller but contexts.
 * - Every function may be called from any thread, a context from many at
 *   once; only elu_ctx_destroy() needs its other calls returned. Loaded
 *   kernels launch without a lock. A CUDA context serves one device,
 *   compiling for it; contexts on different devices run independently and
 *   concurrently.
 * - Environment variables (the README lists them): empty is unset; a flag is
 *   1, true, yes, on or 0, false, no, off, in any case; a number is decimal
 *   digits only, within range. Invalid values are ignored, defaults holding,
 *   and reported by each context created meanwhile (elu_ctx_last_error(),
 *   stderr under ELU_DEBUG=1).
 * - fork(): after libelu initialized CUDA (in the process or an ancestor), a
 *   child makes no driver call: inherited CUDA contexts return ELU_ERR_CUDA
 *   from calls that would (and destroy safely), new ELU_BACKEND_CUDA
 *   contexts fail with ELU_ERR_NO_DEVICE, and ELU_BACKEND_AUTO falls back to
 *   the CPU, saying why. CPU contexts work whatever the parent's threads
 *   were doing; one created before the fork runs on the calling thread
 *   alone. Without that CUDA initialization, a child may use the GPU.
 * - Not from a shared library's constructor run by dlopen(): a CUDA context's
 *   background thread loads NVRTC, which waits for that dlopen() to return,
 *   so a call may wait 10 s for it, and elu_ctx_destroy() or a call that
 *   needs a compile there never returns. CPU contexts are not affected.
 */
#ifndef ELU_H
#define ELU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(ELU_STATIC)
#define ELU_API
#elif defined(_WIN32)
#define ELU_API __declspec(dllimport)
#else
#define ELU_API __attribute__((visibility("default")))
#endif

/* ---- Version ------------------------------------------------------------ */

/* ELU_VERSION_MAJOR, _MINOR, _PATCH, _NUMBER (MAJOR * 10000 + MINOR * 100 +
 * PATCH) and _STRING ("0.2.0"): this header's version. */
#include "elu_version.h"

/** @return ELU_VERSION_NUMBER of the library loaded at run time. */
ELU_API unsigned elu_version_number(void);

/** @return ELU_VERSION_STRING of the library loaded at run time. */
ELU_API const char *elu_version_string(void);

/* ---- Status codes ------------------------------------------------------- */

/* X(name, value, description): the enum and elu_status_str(). Values are
 * pinned and never reused. */
#define ELU_STATUS_MAP(X)                                                     \
    X(ELU_OK, 0, "success")                                                   \
    X(ELU_ERR_INVALID_ARG, -1, "invalid argument")                            \
    X(ELU_ERR_UNSUPPORTED, -2, "unsupported (missing NVRTC, arch or feature)") \
    X(ELU_ERR_NO_DEVICE, -3, "no usable CUDA driver or device")               \
    X(ELU_ERR_COMPILE, -4, "kernel compilation failed")                       \
    X(ELU_ERR_CUDA, -5, "CUDA driver call failed")                            \
    X(ELU_ERR_OUT_OF_MEMORY, -6, "out of memory")                             \
    X(ELU_ERR_IO, -7, "disk cache I/O failed")

typedef enum elu_status {
#define ELU_STATUS_ENUM_(name, value, text) name = value,
    ELU_STATUS_MAP(ELU_STATUS_ENUM_)
#undef ELU_STATUS_ENUM_
} elu_status;

/** @return a static name for status, "unknown status" for any other value;
 *  never NULL. */
ELU_API const char *elu_status_str(elu_status status);

/* ---- Data types and parameters ------------------------------------------ */

/** F16 and BF16 are binary16 and bfloat16 bits in uint16_t, computed in
 *  float as PyTorch does. */
typedef enum elu_dtype {
    ELU_F32 = 0,
    ELU_F64 = 1,
    ELU_F16 = 2,
    ELU_BF16 = 3
} elu_dtype;

/** @return the bytes of one element, or 0 for an unknown dtype. */
ELU_API size_t elu_dtype_size(elu_dtype dtype);

/** y = x > 0 ? scale * x : scale * alpha * expm1(input_scale * x), each
 *  constant rounded to the arithmetic type (double for F64, else float) and
 *  scale * alpha formed in it, as in torch.nn.functional.elu. NaN stays NaN,
 *  -inf gives -scale * alpha, -0.0 stays -0.0. The constants, and scale *
 *  alpha, must be finite in the arithmetic type. */
typedef struct elu_params {
    elu_dtype dtype;
    double alpha;
    double scale;
    double input_scale;
} elu_params;

/** @return ELU: scale = input_scale = 1. */
ELU_API elu_params elu_params_elu(elu_dtype dtype, double alpha);

/** @return SELU, with PyTorch's alpha and scale. */
ELU_API elu_params elu_params_selu(elu_dtype dtype);

/** @return CELU: scale = 1, input_scale = 1 / alpha (alpha 0: elu_run()
 *  refuses it). */
ELU_API elu_params elu_params_celu(elu_dtype dtype, double alpha);

/* ---- Context ------------------------------------------------------------ */

/** One backend, one device, its compiled kernels and disk cache. */
typedef struct elu_ctx elu_ctx;

/** The type behind CUstream and cudaStream_t, so either converts without a
 *  cast; NULL is the legacy default stream. */
typedef struct CUstream_st *elu_stream;

typedef enum elu_backend {
    /** CUDA when libcuda loads, cuInit succeeds and the device exists; else
     *  the CPU, elu_ctx_last_error() saying why. */
    ELU_BACKEND_AUTO = 0,
    ELU_BACKEND_CPU = 1, /**< never touches CUDA */
    ELU_BACKEND_CUDA = 2 /**< CUDA, or elu_ctx_create() fails */
} elu_backend;

/** elu_options.flags. The last three are also set by the environment
 *  variable of their name, and do nothing in a CPU context. */
enum {
    /** No disk cache: compile in memory, in every process. (NVRTC's own
     *  program cache is never used.) */
    ELU_NO_DISK_CACHE = 1u << 0,
    /** A thread started at creation sets up each of elu_options.prewarm as
     *  its first elu_run() would (from the disk cache, else both directions'
     *  generic kernels), has its own kernels compiled at once rather than
     *  after ELU_HOT_CALLS calls, then warms NVRTC up if nothing compiled: a
     *  first elu_run() after start-up then launches at once.
     *  Calls needing what it loads wait. Its failures are not reported: the
     *  call that needs the specialization retries, and reports. */
    ELU_PREWARM = 1u << 1,
    /** Measure the specialized kernels' launch shapes (threads per block,
     *  elements per thread) for operands below 32 MiB rather than derive
     *  them from the device's attributes: at a context's first load of a
     *  dtype's specialized kernels, they come from the disk cache (per GPU
     *  model, dtype and libelu), or are timed on a private stream in 48 MiB
     *  of device memory (freed after) and stored (elu_ctx_stats.autotunes).
     *  A failure keeps the derived shapes, noted in elu_ctx_last_error().
     *  Measure on an otherwise idle GPU, never under stream capture. */
    ELU_AUTOTUNE = 1u << 2,
    /** No programmatic dependent launch. By default (compute capability 9.0
     *  and up, CUDA 12.3 driver and up) a kernel may start as the previous
     *  one in its stream ends, its blocks waiting for that kernel to finish
     *  and its writes to show before touching memory: results and order are
     *  unchanged. It lets the next kernel start early likewise where that
     *  one uses PDL too (and so, as CUDA requires, waits before it reads). */
    ELU_NO_PDL = 1u << 3
};

/** An application's thread pool, for elu_options.cpu_parallel: calls
 *  part(arg, i) once for every i in [0, parts), on any of its threads or
 *  the calling one, and returns when all have returned. user is
 *  elu_options.cpu_parallel_user. It may be called from several threads
 *  at once, and part never calls back into libelu's pool. */
typedef void (*elu_parallel_fn)(void *user, void (*part)(void *arg, int index), void *arg,
                                int parts);

/** Fill with elu_options_default(), then set fields. New fields will come
 *  from `reserved`, with defaults that keep this behaviour. */
typedef struct elu_options {
    elu_backend backend; /**< default ELU_BACKEND_AUTO */
    int device;          /**< CUDA device ordinal; default 0 */
    /** Disk cache directory (copied); default NULL: $ELU_CACHE_DIR, else
     *  $XDG_CACHE_HOME/elu, else $HOME/.cache/elu. */
    const char *cache_dir;
    uint32_t flags; /**< ELU_NO_DISK_CACHE...; default 0; other bits invalid */
    /** CPU threads, 0 to 1024; default 0: the online CPUs, at most 1024. The
     *  cpu_threads - 1 workers start at creation; a call uses them from
     *  32768 elements a thread, or computes alone while another has them.
     *  After a call the workers poll for the next one for 50 microseconds
     *  before they sleep. */
    int cpu_threads;
    /** Specializations (dtype and constants) a context keeps track of, 0 to
     *  4096; default 0: 64. Beyond, the generic kernels serve
     *  (elu_ctx_stats.generic_launches), and none gets kernels of its own. */
    int max_specializations;
    /** For ELU_PREWARM: prewarm_count (at most 4096) parameters, copied at
     *  creation, each valid for elu_prepare() whether or not ELU_PREWARM is
     *  set; NULL when the count is 0. Default none. */
    const elu_params *prewarm;
    size_t prewarm_count;
    /** The CPU path's threads; default NULL: the context's own workers.
     *  Else a call splits its work into parts as it would for cpu_threads
     *  threads and hands them to cpu_parallel, and the context starts no
     *  worker: for an application whose own pool stays busy between calls
     *  (OpenMP's threads poll for work a while after each), where two
     *  pools would take turns on the same cores. In a fork child of the
     *  process that made the context the parts run on the calling thread.
     *  libelu's Python package hands PyTorch's at::parallel_for. */
    elu_parallel_fn cpu_parallel;
    void *cpu_parallel_user; /**< passed to cpu_parallel; default NULL */
    uint64_t reserved[4];    /**< must stay zero */
} elu_options;

/** Fills *opts with the defaults above; NULL is ignored. */
ELU_API void elu_options_default(elu_options *opts);

/** Creates a context; a CUDA one uses the device's primary context (the
 *  CUDA runtime's and PyTorch's), so cudaMalloc pointers work. opts NULL:
 *  the defaults. *out gets the context, NULL on failure; out must not be NULL.
 *  @return ELU_OK; ELU_ERR_INVALID_ARG (NULL out, an unknown backend or flag,
 *          a negative device, a field out of range, non-zero reserved, NULL
 *          prewarm with a count, invalid prewarm parameters, a
 *          cpu_parallel_user without cpu_parallel);
 *          ELU_ERR_NO_DEVICE (ELU_BACKEND_CUDA, no usable driver or device);
 *          ELU_ERR_CUDA (primary context not retained); ELU_ERR_OUT_OF_MEMORY.
 *  A failure's detail goes to stderr under ELU_DEBUG=1. A new context's
 *  elu_ctx_last_error() lists its fallbacks, "; "-separated (the CPU for
 *  CUDA, no disk cache, CPU kernels other than ELU_CPU_ISA's, invalid
 *  variables), else ""; ELU_DEBUG=1 prints them with its backend, CPU
 *  kernels and disk cache. */
ELU_API elu_status elu_ctx_create(elu_ctx **out, const elu_options *opts);

/** Destroys ctx (NULL: no-op) and unloads its kernels. No call on ctx may be
 *  in flight, and its queued GPU work must have finished. Waits for the
 *  context's background threads, at most the compile under way (prewarm's,
 *  or one queued by elu_run()), and drops queued ones. A process that ends
 *  (exit(), a return from main) with contexts left waits alike for the
 *  compiles under way, and starts no other. */
ELU_API void elu_ctx_destroy(elu_ctx *ctx);

/** @return this thread's latest failure or fallback on ctx (NVRTC log,
 *  CUresult name, dlerror() text, path and errno) or "", valid until its
 *  next call on ctx; never another thread's. Kept for the 8 contexts it last
 *  had one for. NULL ctx: a static message. */
ELU_API const char *elu_ctx_last_error(const elu_ctx *ctx);

/* ---- Running ------------------------------------------------------------ */

/** Calls of the same constants after which elu_run() has them compiled into
 *  kernels of their own (the generic kernels serve until then). */
#define ELU_HOT_CALLS 16

/** y[i] = ELU(x[i]) for i < n; x and y aligned to the element size, equal
 *  or apart, NULL only when n == 0.
 *
 *  In a CUDA context, device and managed memory runs on the GPU, async on
 *  `stream`, allocating and synchronizing nothing (capturable in a CUDA
 *  graph after elu_prepare(); captured before, the generic kernels stay);
 *  host memory runs on the CPU before return. A CPU context cannot tell
 *  device memory from host memory: give it host memory only.
 *  A new specialization's kernels come from the disk cache, or else the
 *  dtype's generic kernels serve it (constants as arguments, the same
 *  results, at the same speed once built): quick ones, at a dtype's first
 *  use (the forward's PTX built into libelu where its build had NVRTC, the
 *  driver compiling it; else compiled or loaded), until a context thread
 *  has built the dtype's whole generic module (in the disk cache for later
 *  processes). At its ELU_HOT_CALLS-th call, a context thread compiles
 *  kernels specialized on its constants, for later calls and the disk
 *  cache (elu_ctx_stats.background_builds): constants that change from
 *  call to call compile nothing.
 *
 *  The forward, F32: correctly rounded (for input_scale > 0), the float
 *  nearest scale_alpha * expm1(x * input_scale), ties to even, where
 *  scale_alpha is float(scale) * float(alpha) rounded to float, and x *
 *  float(input_scale) is exact; x > 0 gives float(scale) * x rounded.
 *  F64: correctly rounded, for the constants given below, the double
 *  nearest scale_alpha * expm1(x * input_scale), ties to even, where
 *  scale_alpha is scale * alpha rounded to double and x * input_scale is
 *  exact; x > 0 gives scale * x rounded. F16 and BF16: correctly rounded
 *  (computed in float, the formula exact).
 *  CPU: vector kernels for the best of AVX-512 and AVX2 the processor has
 *  and ELU_CPU_ISA allows, else scalar code in a wider type, the same
 *  results. For F16 and BF16 a context builds up to 12 tables, one per
 *  constants, for the forward where the vector kernels do not compute it
 *  (no vector kernels; input_scale outside [2^-60, 2^126] for F16,
 *  [2^-125, 2^126] for BF16; |scale * alpha| > 2^15 for BF16), at a call
 *  of 2048 elements or more; with 12 built, a call of 8192 elements or
 *  more with other constants builds one for itself.
 *  The backward: within 1 ulp of the exact formula (F32, F64), correctly
 *  rounded (F16, BF16).
 *  GPU: the forward equals the CPU's bit for bit (NaN payloads apart),
 *  generic kernels too: F32 for input_scale > 0, F64 where |scale * alpha|
 *  and input_scale lie in [2^-500, 2^500], F16 and BF16 for any. Other
 *  F32 and F64 constants get PyTorch's arithmetic on the GPU, bit for bit
 *  (about 2 ulp), and the formula in a wider type on the CPU. The backward is
 *  PyTorch's elu_backward, bit for bit.
 *  @return ELU_OK (n == 0: no-op); ELU_ERR_INVALID_ARG (NULL ctx, p, x or y;
 *          an unknown dtype; invalid constants; partial overlap; misaligned;
 *          a buffer past the address space or over 2^60 bytes; x and y in
 *          different memory, or on another device); ELU_ERR_UNSUPPORTED (no
 *          NVRTC); ELU_ERR_COMPILE; ELU_ERR_CUDA; ELU_ERR_OUT_OF_MEMORY. */
ELU_API elu_status elu_run(elu_ctx *ctx, const elu_params *p, const void *x,
                           void *y, size_t n, elu_stream stream);

/** The gradient, as PyTorch's elu_backward; s the saved x, or y if
 *  saved_is_output (then alpha must be >= 0):
 *
 *      grad_x = s <= 0 ? from the input:  grad_y * input_scale * scale * alpha
 *                                           * exp(input_scale * x)
 *                        from the output: grad_y * input_scale * (y + scale * alpha)
 *                      : grad_y * scale          (also when s is NaN)
 *
 *  grad_x may be grad_y or saved, no other overlap with grad_x; the inputs
 *  may overlap. Otherwise as elu_run(). */
ELU_API elu_status elu_run_backward(elu_ctx *ctx, const elu_params *p,
                                    const void *grad_y, const void *saved,
                                    bool saved_is_output, void *grad_x,
                                    size_t n, elu_stream stream);

/** Compiles (waiting) or loads p's specialized kernels, both directions, so
 *  that the next elu_run() neither compiles nor loads, and runs them, not
 *  the generic ones (beyond max_specializations: loads the generic ones).
 *  No-op in a CPU context.
 *  @return as elu_run(), without the buffer errors. */
ELU_API elu_status elu_prepare(elu_ctx *ctx, const elu_params *p);

/** Compiles p's specialization for compute capability `sm` (90: sm_90) into
 *  the disk cache with NVRTC alone: no GPU, any context. A cubin where NVRTC
 *  targets sm, else PTX for its newest arch below; a valid entry is a hit.
 *  For f16 and bf16, also the forward table their kernels read: an entry
 *  of its own, for any sm.
 *  @return ELU_OK; ELU_ERR_INVALID_ARG (bad p, sm not in 10..9999);
 *          ELU_ERR_UNSUPPORTED (no NVRTC, or sm older than all it targets);
 *          ELU_ERR_COMPILE; ELU_ERR_IO (no disk cache, the message saying
 *          why, or the entry not written). */
ELU_API elu_status elu_precompile(elu_ctx *ctx, const elu_params *p, int sm);

/* ---- DLPack: declared after <dlpack/dlpack.h>, always in the library ---- */

#ifdef DLPACK_VERSION
/** elu_run() on tensors, borrowed (never freed) until return, and on the
 *  GPU until the work on `stream` completes; p->dtype is ignored.
 *  - dtype: float 32, 64 or 16, or bfloat 16, one lane; x's and y's alike.
 *  - shape: x's and y's the same, any rank, no negative size; no elements
 *    is a no-op (data may be NULL).
 *  - layout: compact (strides NULL or row-major) is fastest; any strides
 *    (views, 0 in an input) up to rank 8, each tensor spanning at most 2^60
 *    bytes. y's elements share no memory with each other, nor with x's but
 *    as the same view (in place), decided element by element, so views
 *    that interleave without sharing a byte are fine.
 *  - device: kDLCPU and kDLCUDAHost run on the CPU, kDLCUDA on the context's
 *    device, kDLCUDAManaged where the context runs.
 *  @return as elu_run(); ELU_ERR_INVALID_ARG for shapes, dtypes or devices
 *          that differ, a negative size, NULL data with elements, an
 *          unaddressable layout, shared memory, a CUDA tensor in a CPU
 *          context; ELU_ERR_UNSUPPORTED for another dtype or device type,
 *          strided rank > 8, or sharing too costly to decide. */
ELU_API elu_status elu_run_dlpack(elu_ctx *ctx, const elu_params *p,
                                  const DLTensor *x, DLTensor *y,
                                  elu_stream stream);

/** elu_run_backward() on tensors, as elu_run_dlpack(); grad_y, saved and
 *  grad_x alike in dtype and shape. */
ELU_API elu_status elu_run_backward_dlpack(elu_ctx *ctx, const elu_params *p,
                                           const DLTensor *grad_y,
                                           const DLTensor *saved,
                                           bool saved_is_output,
                                           DLTensor *grad_x, elu_stream stream);
#endif

/* ---- Introspection ------------------------------------------------------ */

typedef struct elu_ctx_info {
    elu_backend backend;    /**< ELU_BACKEND_CPU or ELU_BACKEND_CUDA */
    int device;             /**< device ordinal (CUDA) or -1 */
    int sm;                 /**< compute capability as 10*major+minor, or 0 */
    int multiprocessors;    /**< SM count, or 0 */
    int driver_version;     /**< cuDriverGetVersion(), e.g. 13000, or 0 */
    int nvrtc_version;      /**< 1000*major + 10*minor; 0 if NVRTC cannot load */
    int cpu_threads;        /**< threads the CPU path uses */
    bool disk_cache;        /**< whether the disk cache is in use */
    char device_name[256];  /**< "" without CUDA */
    char cache_dir[4096];   /**< "" when the disk cache is off */
    /** The process's CPU kernels: "avx512", "avx2" (with FMA and F16C) or
     *  "baseline" (scalar). */
    char cpu_isa[16];
    uint64_t reserved[16];  /**< zero; room for new fields */
} elu_ctx_info;

/** Fills *info. @return ELU_OK, or ELU_ERR_INVALID_ARG for NULL arguments. */
ELU_API elu_status elu_ctx_get_info(const elu_ctx *ctx, elu_ctx_info *info);

/** Counters since the context's creation; they only grow. */
typedef struct elu_ctx_stats {
    uint64_t compiles;         /**< NVRTC compilations */
    uint64_t disk_hits;        /**< binaries loaded from the disk cache */
    uint64_t disk_writes;      /**< entries written to the disk cache */
    uint64_t disk_rejects;     /**< entries that failed verification */
    uint64_t disk_errors;      /**< cache I/O failures (compiled in memory) */
    uint64_t disk_evictions;   /**< entries removed to keep under the size cap */
    uint64_t memory_hits;      /**< launches that found their kernel loaded */
    uint64_t gpu_launches;     /**< kernels launched */
    uint64_t generic_launches; /**< launches of the generic kernels */
    uint64_t cpu_runs;         /**< calls served by the CPU path */
    uint64_t autotunes;        /**< launch shapes measured (ELU_AUTOTUNE) */
    /** Modules built (compiled or found in the disk cache) in the
     *  background: the dtypes' whole generic modules, and the specialized
     *  ones of constants in steady use, while the generic kernels served. */
    uint64_t background_builds;
    /** Kernels built into libelu as PTX and compiled by the driver: a
     *  dtype's first forward calls, where the disk cache has no generic
     *  module, without NVRTC. */
    uint64_t builtin_ptx_loads;
    uint64_t reserved[4];      /**< zero; room for new counters */
} elu_ctx_stats;

/** Fills *stats. @return ELU_OK, or ELU_ERR_INVALID_ARG for NULL arguments. */
ELU_API elu_status elu_ctx_get_stats(const elu_ctx *ctx, elu_ctx_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* ELU_H */
