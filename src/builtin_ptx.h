/* The PTX built into libelu (src/ptx_gen.c): the generic module's quick
 * forward parts, which the driver compiles for the GPU without NVRTC. */
#ifndef ELU_BUILTIN_PTX_H
#define ELU_BUILTIN_PTX_H
#include "internal.h"

/* spec's PTX, NUL-terminated, and in *arch the oldest GPU arch it serves
 * (its .target); NULL when libelu was built without it. */
const char *elu_builtin_ptx(const struct elu_spec *spec, int *arch);
#endif
