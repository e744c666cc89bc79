/* The GPU's f32 fast evaluation in C: kernels_src/elu_forward_f32.h with
 * Taylor's polynomial, as CUDA compiles it, for tu_f32_doubtful_inputs. */
#define ELU_F32_TAYLOR 1
#include "elu_forward_f32.h"
#include "testutil.h"

bool tu_f32_gpu_doubtful(double t, double neg)
{
    return elu_f32_doubtful(elu_f32_fast(t, neg));
}
