/* Run-time compilation: the kernel source specialized for one elu_spec,
 * compiled by NVRTC for one target, through the disk cache. */
#ifndef ELU_JIT_H
#define ELU_JIT_H

#include "cache.h"
#include "cuda_loader.h"
#include "internal.h"

/* Which arch a binary is for, and in which form. */
struct elu_target {
    int arch; /* e.g. 90 */
    enum elu_binary_kind kind;
};

/* Whether a quick forward part compiled to this form takes one pack per
 * thread (kernels_src/elu.cu's ELU_QUICK_PACKS), else one element: as
 * PTX, which the driver compiles at full optimization, one pack (the PTX
 * built into libelu, whose NVRTC share is paid at build time; NVRTC's PTX
 * for a GPU newer than it takes 12-15 ms longer at a first call than one
 * element would); a cubin, which a cold first call waits for NVRTC to
 * compile, one element, which compiles 30 ms sooner. */
static inline bool elu_quick_packs(enum elu_part part, enum elu_binary_kind kind)
{
    return (part == ELU_PART_FORWARD || part == ELU_PART_FORWARD_UNIT_NIP) &&
           kind == ELU_BINARY_PTX;
}

struct elu_binary {
    void *data; /* malloc'd, NUL-terminated (PTX is text) */
    size_t size;
    enum elu_binary_kind kind;
    int arch;     /* the arch it is for: a PTX's serves newer GPUs too */
    bool on_disk; /* found in, or written to, the disk cache */
};

/* The target for a device of compute capability sm: a cubin for sm_XY when
 * `kind` is CUBIN and NVRTC supports sm, else PTX for the highest arch NVRTC
 * supports that is not newer than sm. */
elu_status elu_jit_target(elu_ctx *ctx, int sm, enum elu_binary_kind kind,
                          struct elu_target *out);

/* The binary for spec on target from the disk cache, without NVRTC: false
 * when the context has no cache or the entry is missing or does not
 * verify. The warm path: a new process loads its kernels without loading
 * NVRTC at all. */
bool elu_jit_cached(elu_ctx *ctx, const struct elu_spec *spec, const struct elu_target *target,
                    struct elu_binary *out);

/* The binary for spec on target: from the disk cache when the context has
 * one and the entry verifies, else compiled (and then stored). */
elu_status elu_jit_obtain(elu_ctx *ctx, const struct elu_spec *spec,
                          const struct elu_target *target,
                          struct elu_binary *out);

/* The context's disk cache, its counters kept (disk_hits, disk_rejects,
 * disk_writes, disk_errors, disk_evictions) and its failures noted as the
 * last error, never fatal. Get: true on a verified hit of that kind, with
 * *data malloc'd. A lookup may get twice, before taking the key's lock and
 * under it: *seen carries what the get before found (ELU_CACHE_MISS before
 * the first), so that a failure met again is counted once. Put: true when
 * stored; else `otherwise` says, in the note, what the caller does
 * instead. */
bool elu_jit_cache_get(elu_ctx *ctx, const struct elu_cache_key *key,
                       enum elu_binary_kind kind, void **data, size_t *size,
                       enum elu_cache_result *seen);
bool elu_jit_cache_put(elu_ctx *ctx, const struct elu_cache_key *key,
                       enum elu_binary_kind kind, const char *description, const void *data,
                       size_t size, const char *otherwise);

/* The disk cache's key for ELU_AUTOTUNE's launch shapes (tune.c) of dtype
 * on a device named `device` of compute capability sm, with this kernel
 * source: a new libelu or kernel measures again. */
struct elu_cache_key elu_jit_tuning_key(const char *device, int sm, elu_dtype dtype);

/* Load NVRTC and compile a trivial kernel for sm, unless NVRTC has
 * compiled in this process already: so that the process's first real
 * compile does not pay NVRTC's start-up (ELU_PREWARM), and NVRTC has
 * registered the exit handlers of its first compile (builder.c). Not
 * counted in the context's compiles; failures are ignored. */
void elu_jit_warm_up(elu_ctx *ctx, int sm);

/* 1000 * major + 10 * minor of the NVRTC in use, or 0 when absent. */
int elu_jit_nvrtc_version(void);

#endif
