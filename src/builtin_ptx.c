#include "builtin_ptx.h"

#include <stdio.h>
#include <string.h>

/* Written by elu-ptx-gen at build, embedded by src/embed.py: empty when
 * the build had no NVRTC. Per dtype, in elu_dtype's order. */
extern const char elu_src_quick_f32_forward[], elu_src_quick_f64_forward[],
    elu_src_quick_f16_forward[], elu_src_quick_bf16_forward[],
    elu_src_quick_f32_forward_unit[], elu_src_quick_f64_forward_unit[];
static const char *const QUICK[] = {elu_src_quick_f32_forward, elu_src_quick_f64_forward,
                                    elu_src_quick_f16_forward, elu_src_quick_bf16_forward};
static const char *const QUICK_UNIT[] = {elu_src_quick_f32_forward_unit,
                                         elu_src_quick_f64_forward_unit, NULL, NULL};

const char *elu_builtin_ptx(const struct elu_spec *spec, int *arch)
{
    if (!spec->generic)
        return NULL;
    const elu_dtype t = spec->coef.dtype;
    const char *ptx = spec->part == ELU_PART_FORWARD           ? QUICK[t]
                      : spec->part == ELU_PART_FORWARD_UNIT_NIP ? QUICK_UNIT[t]
                                                                : NULL;
    /* NVRTC writes the target as a line of its own: ".target sm_75". */
    const char *target = ptx ? strstr(ptx, "\n.target sm_") : NULL;
    return target && sscanf(target, "\n.target sm_%d", arch) == 1 ? ptx : NULL;
}
