/* The seed tutorial's test.py, in C: ELU on 10 normal random values, on the
 * CPU and (when there is one) the GPU, against a double reference with
 * torch.allclose's tolerances. */
#include "devmem.h"
#include <elu.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 10

static float randn(void) /* Box-Muller */
{
    const double u = (rand() + 1.0) / (RAND_MAX + 2.0), v = rand() / (RAND_MAX + 1.0);
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

static int allclose(const float *x, const float *y)
{
    for (int i = 0; i < N; i++) {
        const double ref = x[i] > 0 ? x[i] : expm1((double)x[i]);
        if (!(fabs(y[i] - ref) <= 1e-8 + 1e-5 * fabs(ref)))
            return 0;
    }
    return 1;
}

int main(void)
{
    srand((unsigned)time(NULL));
    float x[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = randn();
    const elu_params p = elu_params_elu(ELU_F32, 1.0);

    elu_ctx *ctx;
    if (elu_ctx_create(&ctx, NULL) != ELU_OK)
        return 1;
    if (elu_run(ctx, &p, x, y, N, NULL) != ELU_OK || !allclose(x, y)) {
        fprintf(stderr, "CPU test failed: %s\n", elu_ctx_last_error(ctx));
        return 1;
    }
    elu_ctx_info info;
    elu_ctx_get_info(ctx, &info);
    if (info.backend == ELU_BACKEND_CUDA) {
        void *dx = dev_init(0) ? dev_upload(x, sizeof x) : NULL;
        void *dy = dx ? dev_upload(y, sizeof y) : NULL;
        if (!dy || elu_run(ctx, &p, dx, dy, N, NULL) != ELU_OK ||
            !dev_download(y, dy, sizeof y) || !allclose(x, y)) {
            fprintf(stderr, "CUDA test failed: %s\n", elu_ctx_last_error(ctx));
            return 1;
        }
        dev_free(dx);
        dev_free(dy);
    } else {
        printf("no GPU (%s): CUDA test skipped\n", elu_ctx_last_error(ctx));
    }
    elu_ctx_destroy(ctx);
    printf("All tests passed!\n");
    return 0;
}
