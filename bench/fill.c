/* The benchmarks' data. */
#include "fill.h"

#include <stdlib.h>

/* Real data, not zeros: values of both signs in [-32, 32), through both
 * branches. Half types are built from their bits: sign, an exponent from
 * 2^-5 to 2^4, a random mantissa. */
void bench_fill(elu_dtype t, void *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const unsigned r = (unsigned)rand();
        const double v = ((double)(r % 64000) - 32000) / 1000.0;
        switch (t) {
        case ELU_F32: ((float *)buf)[i] = (float)v; break;
        case ELU_F64: ((double *)buf)[i] = v; break;
        case ELU_F16:
            ((unsigned short *)buf)[i] =
                (unsigned short)((r & 0x8000) | (10 + r % 10) << 10 | (r >> 8 & 0x3ff));
            break;
        case ELU_BF16:
            ((unsigned short *)buf)[i] =
                (unsigned short)((r & 0x8000) | (122 + r % 10) << 7 | (r >> 8 & 0x7f));
            break;
        }
    }
}
