/* What a call's DLPack tensors describe, once checked: the buffers, the
 * element count and, for views, the layout. The DLPack entry points run
 * it; the layout fuzzer (tests/fuzz) checks it. */
#ifndef ELU_DLPACK_VIEW_H
#define ELU_DLPACK_VIEW_H

#include <dlpack/dlpack.h>

#include "internal.h"

struct elu_dlpack_view {
    elu_params params; /* the caller's constants with the tensors' dtype */
    const void *a, *b; /* b is NULL for the forward */
    void *out;
    size_t n;
    bool strided;             /* whether `layout` is needed */
    struct elu_layout layout; /* valid when strided */
};

/* t holds (a, [b,] out), count 2 or 3: each checked on its own and against
 * the others. Not checked here: the constants, the buffers' addresses and
 * overlaps (elu_check_buffers). */
elu_status elu_dlpack_view(elu_ctx *ctx, const elu_params *p, const DLTensor *const *t,
                           int count, struct elu_dlpack_view *v);

#endif
