/*
 * libelu: the ELU activation family (ELU, SELU, CELU) on NVIDIA GPUs and CPUs.
 *
 * The CUDA kernels ship as source inside the library and are compiled at run
 * time with NVRTC for the GPU present, specialized on the data type and the
 * ELU constants, and kept in an on-disk cache. libcuda and libnvrtc are loaded
 * at run time, so the library builds and its CPU path runs without CUDA.
 * While a specialization compiles, a generic kernel of its dtype (the
 * constants as arguments, the same results) serves it: see elu_run().
 *
 * This header is the whole API and its contract: a function not declared here
 * is not part of libelu.
 *
 * Conventions:
 *   - Every function that can fail returns an elu_status: ELU_OK (0) or a
 *     negative code. elu_status_str() names a code; elu_ctx_last_error()
 *     gives the detail of the last failure on a context.
 *   - Pointers to input structs are const and read only during the call.
 *   - Nothing is allocated for the caller except the context itself.
 *
 * Threads: every function may be called from any thread, and one context
 * may be used from many threads at once; only elu_ctx_destroy() needs every
 * other call on that context to have returned. Launching a kernel that is
 * already loaded takes no lock. elu_ctx_last_error() is kept per thread.
 *
 * Several GPUs: a CUDA context serves one device (elu_options.device).
 * Create one per device; they are independent and may run concurrently,
 * each compiling for its own device's architecture. A buffer that lives on
 * another device than the context's is an invalid argument.
 *
 * Environment variables (the README lists them): a flag is on for 1, true,
 * yes or on and off for 0, false, no or off, in any case; a number is
 * decimal digits only, within its range; empty is unset. An invalid value
 * is ignored (the default holds) and reported by every context created
 * while it is set (elu_ctx_last_error(), and stderr under ELU_DEBUG).
 *
 * fork(): CUDA does not survive fork. In a process forked after libelu
 * initialized CUDA (in it or an ancestor), CUDA contexts inherited from the
 * parent return ELU_ERR_CUDA from every call that would reach the driver
 * (and make no driver call, so nothing hangs; destroying them is safe),
 * creating a CUDA context fails with ELU_ERR_NO_DEVICE, and ELU_BACKEND_AUTO
 * falls back to the CPU, saying why. CPU contexts work as usual, whatever
 * other threads of the parent were doing; one created before the fork
 * computes on the calling thread alone (its workers stay in the parent). A
 * child of a process that never initialized CUDA through libelu may use
 * the GPU.
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

/* ---------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------- */

/* ELU_VERSION_MAJOR, _MINOR, _PATCH, _NUMBER (MAJOR * 10000 + MINOR * 100 +
 * PATCH, e.g. 200 for 0.2.0) and _STRING ("0.2.0"): the version of this
 * header. */
#include "elu_version.h"

/** @return ELU_VERSION_NUMBER of the library actually loaded at run time. */
ELU_API unsigned elu_version_number(void);

/** @return ELU_VERSION_STRING of the library actually loaded at run time. */
ELU_API const char *elu_version_string(void);

/* ---------------------------------------------------------------------------
 * Status codes
 * ------------------------------------------------------------------------- */

/* One list makes both the enum and elu_status_str(); values are pinned and
 * never reused. X(name, value, description) */
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

/** @return a static, human-readable name for a status code; "unknown status"
 *  for a value that is not an elu_status. Never NULL, thread-safe. */
ELU_API const char *elu_status_str(elu_status status);

/* ---------------------------------------------------------------------------
 * Data types and ELU parameters
 * ------------------------------------------------------------------------- */

/** Element types. F16 and BF16 are raw IEEE binary16 / bfloat16 bit patterns
 *  stored in uint16_t; their arithmetic is done in float, as in PyTorch. */
typedef enum elu_dtype {
    ELU_F32 = 0,
    ELU_F64 = 1,
    ELU_F16 = 2,
    ELU_BF16 = 3
} elu_dtype;

/** @return the size in bytes of one element of dtype, or 0 if dtype is not
 *  an elu_dtype. */
ELU_API size_t elu_dtype_size(elu_dtype dtype);

/** The ELU family, with PyTorch's formula and rounding:
 *
 *      y = x > 0 ? scale * x : scale * alpha * expm1(input_scale * x)
 *
 *  The constants are rounded to the arithmetic type first (float for F32,
 *  F16 and BF16; double for F64) and scale * alpha is formed in that type,
 *  exactly as torch.nn.functional.elu does. NaN stays NaN, -inf gives
 *  -scale * alpha, -0.0 stays -0.0. All three constants must be finite. */
typedef struct elu_params {
    elu_dtype dtype;
    double alpha;
    double scale;
    double input_scale;
} elu_params;

/** @return parameters for ELU: scale = input_scale = 1. */
ELU_API elu_params elu_params_elu(elu_dtype dtype, double alpha);

/** @return parameters for SELU, with PyTorch's alpha and scale constants. */
ELU_API elu_params elu_params_selu(elu_dtype dtype);

/** @return parameters for CELU: scale = 1, input_scale = 1 / alpha. alpha must
 *  not be 0 (elu_run then reports ELU_ERR_INVALID_ARG). */
ELU_API elu_params elu_params_celu(elu_dtype dtype, double alpha);

/* ---------------------------------------------------------------------------
 * Context
 * ------------------------------------------------------------------------- */

/** Opaque context: one backend, one device, its compiled kernels and cache. */
typedef struct elu_ctx elu_ctx;

/** A CUDA stream. The very type behind CUstream and cudaStream_t, so either
 *  converts without a cast. NULL is the legacy default stream. */
typedef struct CUstream_st *elu_stream;

typedef enum elu_backend {
    /** CUDA when libcuda loads, cuInit succeeds and the device exists; the
     *  CPU otherwise (elu_ctx_last_error() then says why). */
    ELU_BACKEND_AUTO = 0,
    /** The CPU only; never touches CUDA. */
    ELU_BACKEND_CPU = 1,
    /** CUDA, or elu_ctx_create() fails: never a silent fallback. */
    ELU_BACKEND_CUDA = 2
} elu_backend;

/** Flags for elu_options.flags. */
enum {
    /** Neither read nor write the disk cache; compile in memory, in every
     *  process. (NVRTC's own program cache, CUDA 12.9 and later, is never
     *  used: the disk cache takes its place.) */
    ELU_NO_DISK_CACHE = 1u << 0,
    /** Hide the compiler's start-up: a CUDA context starts a background
     *  thread at creation that sets up each specialization in
     *  elu_options.prewarm as its first elu_run() would (its kernels from
     *  the disk cache; else the dtype's generic kernels, forward and
     *  backward, compiled or loaded, to serve it while the context's other
     *  thread compiles its specialized kernels), then loads NVRTC and pays
     *  its first-compile start-up if nothing did yet, so that an
     *  application creating its context at start-up finds its first
     *  elu_run ready. The environment variable ELU_PREWARM=1 sets this flag
     *  too. A call that needs what the thread is loading waits for it;
     *  elu_ctx_destroy() waits for the thread (at most the compile under
     *  way). The thread's failures are not reported: the call that needs
     *  the specialization tries again and reports. No effect in a CPU
     *  context. */
    ELU_PREWARM = 1u << 1,
    /** Tune the launch shape (threads per block, elements per thread) of
     *  each kernel to the GPU present for inputs up to 32 MiB, by measuring
     *  rather than by the default rule from the device's attributes (larger
     *  inputs keep the rule's; the generic kernels keep it too). The first
     *  time a CUDA context loads a dtype's specialized kernels
     *  (elu_prepare(), a first elu_run() that finds them in the disk cache,
     *  or the background thread that compiles them after a first elu_run()
     *  the generic kernels served), it reads the shapes for this GPU model,
     *  dtype and libelu from the disk cache, or else times a few candidates
     *  against the default's (about 0.1 s on an H200; 48 MiB of device
     *  memory, freed after; a private stream) and stores the winners there
     *  (counted in elu_ctx_stats.autotunes). A failure to measure keeps the
     *  default, noted in elu_ctx_last_error(). Measure while the GPU is
     *  otherwise idle, and never under stream capture. On the H200 the
     *  measured shapes did no better than the rule's. The environment
     *  variable ELU_AUTOTUNE=1 sets this flag too. No effect in a CPU
     *  context. */
    ELU_AUTOTUNE = 1u << 2,
    /** Launch without programmatic dependent launch (PDL). By default, on
     *  GPUs of compute capability 9.0 and later with a CUDA 12.3 or newer
     *  driver, libelu's kernels are launched so that each may start while
     *  the kernel before it in the stream finishes: its blocks wait for that
     *  kernel to complete, and for its writes to be visible, before they
     *  touch memory, so the results and the stream's order are the same;
     *  what overlaps is the launch and the blocks' start-up. Each kernel
     *  then lets the next kernel start early in the same way, where that
     *  kernel is launched with PDL too (it must wait before it reads, as
     *  CUDA requires of such kernels). On the H200, in CUDA graphs of 20
     *  calls, this ran ELUs of 2^10 to 2^18 elements 1.16-1.41 times
     *  faster (docs/PERFORMANCE-history.md, session 22).
     *  The environment variable ELU_NO_PDL=1 sets this flag too. No effect
     *  in a CPU context. */
    ELU_NO_PDL = 1u << 3
};

/** Context options. Always fill with elu_options_default() first, then set
 *  fields: new fields are added at the end (taken from `reserved`) with
 *  defaults that keep today's behaviour. */
typedef struct elu_options {
    elu_backend backend; /**< default ELU_BACKEND_AUTO */
    int device;          /**< CUDA device ordinal; default 0 */
    /** Disk cache directory; default NULL: $ELU_CACHE_DIR, else
     *  $XDG_CACHE_HOME/elu, else $HOME/.cache/elu. The string is copied. */
    const char *cache_dir;
    uint32_t flags;  /**< ELU_NO_DISK_CACHE...; default 0; other bits are invalid */
    /** Threads for the CPU path, at most 1024; default 0: all online CPUs
     *  (at most 1024). The context
     *  starts cpu_threads - 1 workers once, at creation; a call uses them
     *  when its input is large (131072 elements a thread or more), or
     *  computes alone while another call has them. */
    int cpu_threads;
    /** Most specializations (sets of dtype and constants) per context;
     *  default 0 = 64. Beyond it, the generic kernels of each dtype, which
     *  take the constants as arguments, serve the others (counted in
     *  elu_ctx_stats.generic_launches; see elu_run() for their results). */
    int max_specializations;
    /** With ELU_PREWARM: the specializations to prepare in the background,
     *  prewarm_count (at most 4096) of them (copied at creation; NULL when
     *  the count is 0). Each must be valid as elu_prepare() takes it,
     *  whether or not ELU_PREWARM is set. Default none. */
    const elu_params *prewarm;
    size_t prewarm_count;
    uint64_t reserved[6]; /**< must stay zero */
} elu_options;

/** Fills *opts with the defaults documented on each field. NULL is ignored. */
ELU_API void elu_options_default(elu_options *opts);

/** Creates a context.
 *  @param out   receives the context; set to NULL on failure. Must not be NULL.
 *  @param opts  options, or NULL for elu_options_default().
 *  @return ELU_OK; ELU_ERR_INVALID_ARG (NULL out, unknown backend or flags,
 *          negative device, cpu_threads, max_specializations or
 *          prewarm_count out of range, non-zero reserved fields, a prewarm
 *          list that is NULL with a count or holds invalid parameters);
 *          ELU_ERR_NO_DEVICE (ELU_BACKEND_CUDA without a usable driver or
 *          device); ELU_ERR_CUDA (the device's primary context could not be
 *          retained); ELU_ERR_OUT_OF_MEMORY.
 *  On failure no context exists, so the detail goes to stderr only when
 *  ELU_DEBUG=1 is set; create with ELU_BACKEND_AUTO and read
 *  elu_ctx_last_error() to learn why CUDA was not picked. A new context's
 *  elu_ctx_last_error() gives every fallback it took, "; "-separated: the
 *  CPU instead of CUDA, no disk cache where its directory was unusable,
 *  CPU kernels other than ELU_CPU_ISA's, invalid environment variables
 *  ignored; "" if none. Under ELU_DEBUG=1 each new context also prints its
 *  backend, CPU kernels and disk cache to stderr.
 *  A CUDA context uses the device's primary context (the one the CUDA
 *  runtime and PyTorch use), so cudaMalloc pointers work. */
ELU_API elu_status elu_ctx_create(elu_ctx **out, const elu_options *opts);

/** Destroys a context and unloads its kernels. NULL is a no-op. The caller
 *  must ensure no call on ctx is in flight, and that GPU work it queued has
 *  finished if the kernels' modules are to be unloaded safely. It waits for
 *  the context's background threads: at most the compile under way
 *  (ELU_PREWARM's, or one of a specialization the generic kernels serve,
 *  see elu_run()); the compiles still queued are dropped. A process that
 *  ends (exit(), or a return from main) with contexts not destroyed waits
 *  the same way at exit, for the compiles under way in any of them, and
 *  starts no other: NVRTC and the driver are never torn down under a
 *  background thread. */
ELU_API void elu_ctx_destroy(elu_ctx *ctx);

/** @return the detail of the calling thread's most recent failure or
 *  fallback on ctx (the NVRTC log, the CUresult name, the dlerror() text, a
 *  path and errno), or "" if there was none. Other threads' calls do not
 *  change it. Each thread keeps the messages of the 8 contexts it most
 *  recently had one for. For NULL ctx: a static message. The string stays
 *  valid until this thread's next call on ctx. */
ELU_API const char *elu_ctx_last_error(const elu_ctx *ctx);

/* ---------------------------------------------------------------------------
 * Running
 * ------------------------------------------------------------------------- */

/** y[i] = ELU(x[i]) for i < n, with p's dtype and constants.
 *
 *  Where the data lives decides where it runs: in a CUDA context, device and
 *  managed pointers run on the GPU, asynchronously on `stream` (NULL: the
 *  legacy default stream), without allocating or synchronizing, so the call
 *  may be captured into a CUDA graph once the specialization is prepared
 *  (elu_prepare(): a capture before then would keep the generic kernels).
 *  Host pointers run on the CPU before the call returns (the stream is then
 *  ignored). A CPU context takes host pointers only.
 *
 *  The first call for a new specialization (dtype and constants) on the GPU
 *  loads its kernels from the disk cache, or else does not wait for NVRTC
 *  (hundreds of milliseconds): the dtype's generic kernels, which take the
 *  constants as arguments, serve it at once, and a thread of the context
 *  compiles the specialized kernels, which serve the calls after it is done
 *  (counted in elu_ctx_stats.background_builds) and go to the disk cache.
 *  The results are the same either way. The generic kernels themselves are
 *  compiled once per dtype and process (a few tens of milliseconds; none
 *  when in the disk cache), the forward's at the first forward and the
 *  backward's at the first backward. elu_prepare() compiles or loads the
 *  specialized kernels ahead of time instead.
 *
 *  @param x, y  n elements each, aligned to the element size; x == y (in
 *               place) is allowed, any other overlap is not. Either may be
 *               NULL only when n == 0.
 *  @return ELU_OK (n == 0 is a no-op); ELU_ERR_INVALID_ARG (NULL ctx, p, x or
 *          y; unknown dtype; a constant that is not finite in the dtype's
 *          arithmetic; partial overlap; a misaligned buffer; a buffer of n
 *          elements that would reach past the end of the address space or
 *          exceed 2^60 bytes;
 *          x and y in different memory spaces, or on another device);
 *          ELU_ERR_UNSUPPORTED (NVRTC missing); ELU_ERR_COMPILE;
 *          ELU_ERR_CUDA; ELU_ERR_OUT_OF_MEMORY.
 *  A CPU context never calls into CUDA, so it cannot tell device memory
 *  from host memory: pass it host memory only.
 *
 *  On the CPU, results are within 1 ulp of the exact value of the formula
 *  (the product x * input_scale taken exactly): f32 and f64 through vector
 *  kernels for AVX-512 or AVX2+FMA, chosen at run time (the best the
 *  processor has, no better than the environment variable
 *  ELU_CPU_ISA=avx512|avx2|baseline; see elu_ctx_info.cpu_isa); f16 and bf16
 *  correctly rounded, the forward through a 65536-entry table of results
 *  and the backward from the input through a table of each saved value's
 *  factor, which the context builds per set of constants on the first call
 *  of 2048 elements or more (at most 12 tables in all), the backward from
 *  the output computing that factor; the rest through scalar code in a
 *  wider type.
 *  On the GPU, the forward gives the CPU path's results bit for bit (NaN
 *  payloads apart), in the specialized and the generic kernels alike: f32
 *  and f64 by the same method (for constants the vector kernels take:
 *  |scale * alpha| and input_scale not extreme, see src/cpu_fast.h), f16
 *  and bf16 through a table per specialization. For extreme constants, and
 *  for f16 and bf16 beyond max_specializations (no table), the forward does
 *  PyTorch's arithmetic (bit-identical to torch.nn.functional.elu; within
 *  about 2 ulp for f32 and f64, half an ulp more for the half types). The
 *  backward always does PyTorch's arithmetic, bit-identical to
 *  elu_backward.
 *  Thread-safe: one context may be used from several threads at once. */
ELU_API elu_status elu_run(elu_ctx *ctx, const elu_params *p, const void *x,
                           void *y, size_t n, elu_stream stream);

/** The gradient of elu_run, with PyTorch's elu_backward semantics. With
 *  s the saved value (x, or y when saved_is_output):
 *
 *      grad_x = s <= 0 ? from the input:  grad_y * input_scale * scale * alpha
 *                                           * exp(input_scale * x)
 *                        from the output: grad_y * input_scale * (y + scale * alpha)
 *                      : grad_y * scale          (also when s is NaN)
 *
 *  The output form requires alpha >= 0 (else ELU_ERR_INVALID_ARG), as in
 *  PyTorch. grad_x may equal grad_y or saved exactly; any other overlap
 *  with grad_x is invalid (the inputs may overlap each other). Placement,
 *  streams, errors and thread safety as for elu_run(). */
ELU_API elu_status elu_run_backward(elu_ctx *ctx, const elu_params *p,
                                    const void *grad_y, const void *saved,
                                    bool saved_is_output, void *grad_x,
                                    size_t n, elu_stream stream);

/** Compiles or loads p's specialized kernels (forward and backward) now,
 *  waiting for the compile, so that the next elu_run() neither compiles nor
 *  loads and runs them rather than the generic ones (beyond
 *  max_specializations: loads the dtype's generic kernels). No-op in a CPU
 *  context.
 *  @return as elu_run(), without the pointer errors. */
ELU_API elu_status elu_prepare(elu_ctx *ctx, const elu_params *p);

/** Compiles p's specialization for compute capability `sm` (e.g. 90 for
 *  sm_90) into the disk cache, without needing that GPU or any GPU: only
 *  NVRTC. Works from a CPU context. The entry is a cubin when NVRTC can
 *  target sm, else PTX for the highest arch NVRTC supports below it. An
 *  entry already present and valid is a disk hit, not recompiled.
 *  @return ELU_OK; ELU_ERR_INVALID_ARG (bad p, sm < 10); ELU_ERR_UNSUPPORTED
 *          (NVRTC missing, or sm older than every arch NVRTC supports);
 *          ELU_ERR_COMPILE; ELU_ERR_IO (the cache is off, the message saying
 *          why, or the entry could not be written). */
ELU_API elu_status elu_precompile(elu_ctx *ctx, const elu_params *p, int sm);

/* ---------------------------------------------------------------------------
 * DLPack tensors (declared when <dlpack/dlpack.h> is included before this
 * header; the library always provides them)
 * ------------------------------------------------------------------------- */

#ifdef DLPACK_VERSION
/** elu_run() over DLPack tensors, which say the dtype, the device and the
 *  layout: p->dtype is ignored.
 *
 *  - dtype: float 32, 64 or 16, or bfloat 16, one lane; x and y alike.
 *  - shape: x and y the same, any rank, no negative size; 0 elements is a
 *    no-op (data may then be NULL).
 *  - layout: compact (row-major, or strides NULL) tensors take the fast
 *    path; any other strides (slices, transposes, a stride of 0 in an
 *    input) take a strided path, for rank <= 8. Every element's address
 *    must be computable without overflow (each tensor spanning at most
 *    2^60 bytes). No two elements of y may share memory, and y may share
 *    memory with x only as the very same view (in place); views that
 *    interleave without sharing a byte (a column written from the next
 *    one) are fine. Sharing is decided element by element; a layout too
 *    irregular to decide in about a millisecond is refused
 *    (ELU_ERR_UNSUPPORTED).
 *  - device: kDLCPU and kDLCUDAHost run on the CPU; kDLCUDA runs on the
 *    GPU and must be this context's device; kDLCUDAManaged runs where the
 *    context does. A CUDA tensor given to a CPU context is an error.
 *  The tensors are borrowed for the call (and, on the GPU, until the work
 *  queued on `stream` completes), never freed.
 *  @return as elu_run(), and ELU_ERR_INVALID_ARG for mismatched shapes,
 *          dtypes or devices, a negative size, NULL data with elements,
 *          an unaddressable layout or memory shared as above;
 *          ELU_ERR_UNSUPPORTED for another dtype or device type, a strided
 *          view of rank > 8, or sharing that cannot be decided. */
ELU_API elu_status elu_run_dlpack(elu_ctx *ctx, const elu_params *p,
                                  const DLTensor *x, DLTensor *y,
                                  elu_stream stream);

/** elu_run_backward() over DLPack tensors, with the rules of
 *  elu_run_dlpack(): grad_y, saved and grad_x alike in dtype and shape. */
ELU_API elu_status elu_run_backward_dlpack(elu_ctx *ctx, const elu_params *p,
                                           const DLTensor *grad_y,
                                           const DLTensor *saved,
                                           bool saved_is_output,
                                           DLTensor *grad_x, elu_stream stream);
#endif

/* ---------------------------------------------------------------------------
 * Introspection
 * ------------------------------------------------------------------------- */

typedef struct elu_ctx_info {
    elu_backend backend;    /**< ELU_BACKEND_CPU or ELU_BACKEND_CUDA */
    int device;             /**< device ordinal (CUDA) or -1 */
    int sm;                 /**< compute capability as 10*major+minor, or 0 */
    int multiprocessors;    /**< SM count, or 0 */
    int driver_version;     /**< cuDriverGetVersion(), e.g. 13000, or 0 */
    int nvrtc_version;      /**< 1000*major + 10*minor; 0 if NVRTC cannot load */
    int cpu_threads;        /**< worker threads the CPU path uses */
    bool disk_cache;        /**< whether the disk cache is in use */
    char device_name[256];  /**< "" without CUDA */
    char cache_dir[4096];   /**< "" when the disk cache is off */
    /** The CPU path's kernels, the same for every context of the process:
     *  "avx512", "avx2" (with FMA and F16C) or "baseline" (scalar). */
    char cpu_isa[16];
    uint64_t reserved[16];  /**< zero; room for new fields */
} elu_ctx_info;

/** Copies ctx's description into *info.
 *  @return ELU_OK, or ELU_ERR_INVALID_ARG for NULL arguments. */
ELU_API elu_status elu_ctx_get_info(const elu_ctx *ctx, elu_ctx_info *info);

/** Counters since the context was created; they only grow. */
typedef struct elu_ctx_stats {
    uint64_t compiles;         /**< NVRTC compilations */
    uint64_t disk_hits;        /**< binaries loaded from the disk cache */
    uint64_t disk_writes;      /**< entries written to the disk cache */
    uint64_t disk_rejects;     /**< entries that failed verification */
    uint64_t disk_errors;      /**< cache I/O failures (compiled in memory) */
    uint64_t disk_evictions;   /**< entries removed to keep under the size cap */
    uint64_t memory_hits;      /**< launches that found their kernel loaded */
    uint64_t gpu_launches;     /**< kernels launched */
    uint64_t generic_launches; /**< launches of the generic (constants-as-arguments) kernels */
    uint64_t cpu_runs;         /**< calls served by the CPU path */
    uint64_t autotunes;        /**< launch shapes measured (ELU_AUTOTUNE) */
    /** Specialized modules the context's background thread built (compiled
     *  or found in the disk cache) for specializations that the generic
     *  kernels served meanwhile; see elu_run(). */
    uint64_t background_builds;
    uint64_t reserved[5];      /**< zero; room for new counters */
} elu_ctx_stats;

/** Copies ctx's counters into *stats.
 *  @return ELU_OK, or ELU_ERR_INVALID_ARG for NULL arguments. */
ELU_API elu_status elu_ctx_get_stats(const elu_ctx *ctx, elu_ctx_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* ELU_H */
