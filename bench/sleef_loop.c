/* The ELU loop PyTorch's CPU kernel amounts to, over SLEEF's 1-ulp AVX-512
 * expm1f: elu-cpu-bench's yardstick. Compiled with -mavx512f; called only
 * on a processor that has it. */
#include <immintrin.h>
#include <sleef.h>
#include <stddef.h>

void sleef_elu_f32(const float *x, float *y, size_t n);

void sleef_elu_f32(const float *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        const __mmask16 pos = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ);
        _mm512_storeu_ps(y + i, _mm512_mask_blend_ps(pos, Sleef_expm1f16_u10avx512f(v), v));
    }
    for (; i < n; i++)
        y[i] = x[i] > 0 ? x[i] : Sleef_expm1f1_u10purec(x[i]);
}
