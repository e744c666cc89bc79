/* What each kernel takes: the one contract between the host (src/launch.c)
 * and the kernels (kernels_src/elu.cu). Compiled as C by the library and as
 * CUDA C++ by NVRTC (src/jit.c puts it before elu.cu). Every kernel takes
 * one of the argument structs below by value, so the host cannot pass a
 * wrong list; both sides assert the same sizes and offsets, so a change on
 * one side alone fails to build or to compile. NVRTC sees this text as it
 * is: no #include on its side. */
#ifndef ELU_KERNEL_ARGS_H
#define ELU_KERNEL_ARGS_H

#ifdef __CUDACC__
typedef long long elu_arg_i64;
typedef unsigned long long elu_arg_u64;
#define ELU_ARGS_ASSERT(what, why) static_assert(what, why)
#else
#include <stddef.h>
#include <stdint.h>
typedef int64_t elu_arg_i64;
typedef uint64_t elu_arg_u64;
#define ELU_ARGS_ASSERT(what, why) _Static_assert(what, why)
#endif

/* The kernels of a module, by index; the host looks them up by name. A
 * module of all the kernels holds those its dtype has; a quick part of the
 * generic module, one or three (the parts below). */
enum elu_kernel_index {
    ELU_FN_FORWARD,           /* "elu_forward" */
    ELU_FN_BACKWARD_INPUT,    /* "elu_backward_input" */
    ELU_FN_BACKWARD_OUTPUT,   /* "elu_backward_output" */
    ELU_FN_STRIDED,           /* "elu_strided": any layout, any kind */
    ELU_FN_FORWARD_COMPUTED,  /* "elu_forward_computed": half types, all kernels */
    ELU_FN_FORWARD_CONTIGUOUS,/* "elu_forward_contiguous": f32, f64, all kernels */
    ELU_FN_COUNT
};

/* What elu_strided computes, element by element: the three kernels of
 * enum elu_kernel (src/internal.h) in its order, then the forward by
 * PyTorch's arithmetic, for constants the exact forward does not take. */
enum elu_strided_kind {
    ELU_KIND_FORWARD,
    ELU_KIND_BACKWARD_INPUT,
    ELU_KIND_BACKWARD_OUTPUT,
    ELU_KIND_FORWARD_PYTORCH
};

/* Which kernels a module holds (elu.cu's ELU_PART, which src/jit.c
 * defines for the generic module): all of them (a specialized module, or
 * a dtype's whole generic module), or one of the generic module's quick
 * parts, which serve its first calls: the forward's kernel, one element
 * per thread (f32 and f64: compiled for input_scale 1 or for any), or all
 * the others. Macros: elu.cu chooses with #if. */
#define ELU_PART_ALL_KERNELS 0
#define ELU_PART_FORWARD_KERNEL 1
#define ELU_PART_OTHER_KERNELS 2

/* The bytes of the one pack each thread of the quick forward takes, for
 * elements of `size` bytes: a few elements, so that enough bytes are in
 * flight to keep the memory busy while each element is computed. */
#define ELU_QUICK_PACK_BYTES(size) ((size) == 2 ? 8 : 16)

/* The constants, in the dtype's arithmetic (float for f32, f16 and bf16):
 * scale * alpha, scale and input_scale as PyTorch rounds them, and flags:
 * whether the exact forward takes them (src/numerics.c), and whether
 * input_scale is 1. A specialized module has them compiled in and reads
 * none. */
enum { ELU_COEF_EXACT = 1, ELU_COEF_UNIT_INPUT_SCALE = 2 };
#define ELU_COEF_FIELDS(type)             \
    type scale_alpha, scale, input_scale; \
    int flags
struct elu_coef_f32 {
    ELU_COEF_FIELDS(float);
};
struct elu_coef_f64 {
    ELU_COEF_FIELDS(double);
};
union elu_coef_arg {
    struct elu_coef_f32 f; /* f32, f16, bf16 */
    struct elu_coef_f64 d; /* f64 */
};

/* Any strides, in elements (negative and zero too), of a, b and out. */
#define ELU_MAX_RANK 8
struct elu_layout {
    elu_arg_i64 ndim;
    elu_arg_i64 shape[ELU_MAX_RANK];
    elu_arg_i64 stride[3][ELU_MAX_RANK];
};

/* The contiguous kernels (forward: a = x, b unused; backward: a = grad_y,
 * b = the saved x or y): n elements from element 0, those before `head`
 * one by one (the pointers' common misalignment, see src/launch.c), the
 * rest in packs. `table`: a half type's correctly rounded forward of each
 * of the 65536 inputs (the forward kernels of the half types read it). */
struct elu_contiguous_args {
    const void *a, *b;
    void *out;
    elu_arg_u64 n, head;
    const void *table;
    union elu_coef_arg coef;
};

/* elu_strided: n elements of any layout, one per thread. */
struct elu_strided_args {
    const void *a, *b;
    void *out;
    elu_arg_u64 n;
    const void *table;
    union elu_coef_arg coef;
    struct elu_layout layout;
    int kind; /* enum elu_strided_kind */
};

/* The layout both sides build against: 64-bit pointers, these sizes; the
 * host checks the offsets too (NVRTC has no offsetof). */
ELU_ARGS_ASSERT(sizeof(void *) == 8, "64-bit device pointers");
ELU_ARGS_ASSERT(sizeof(struct elu_coef_f32) == 16 && sizeof(struct elu_coef_f64) == 32 &&
                    sizeof(union elu_coef_arg) == 32,
                "the constants' layout");
ELU_ARGS_ASSERT(sizeof(struct elu_layout) == 8 * (1 + 4 * ELU_MAX_RANK), "the layout's");
ELU_ARGS_ASSERT(sizeof(struct elu_contiguous_args) == 48 + 32,
                "the contiguous kernels' arguments");
ELU_ARGS_ASSERT(sizeof(struct elu_strided_args) == 40 + 32 + 264 + 8,
                "the strided kernel's arguments");
#ifndef __CUDACC__
ELU_ARGS_ASSERT(offsetof(struct elu_contiguous_args, coef) == 48 &&
                    offsetof(struct elu_strided_args, layout) == 72 &&
                    offsetof(struct elu_strided_args, kind) == 336,
                "the arguments' offsets");
#endif

#endif
