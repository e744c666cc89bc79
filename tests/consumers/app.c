/* A program outside libelu's tree, as a user would write it: elu.h and the
 * installed library only. ELU on a few values on the CPU, checked against
 * expm1; prints the version of the library it runs with. */
#include <elu.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#define N 8

int main(void)
{
    const float x[N] = {-4.0f, -1.0f, -0.5f, -0.0f, 0.0f, 0.25f, 1.0f, 3.0f};
    float y[N];
    elu_options options;
    elu_options_default(&options);
    options.backend = ELU_BACKEND_CPU;
    elu_ctx *ctx;
    if (elu_ctx_create(&ctx, &options) != ELU_OK) {
        fprintf(stderr, "elu_ctx_create failed\n");
        return 1;
    }
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    const elu_status status = elu_run(ctx, &p, x, y, N, NULL);
    if (status != ELU_OK) {
        fprintf(stderr, "elu_run: %s: %s\n", elu_status_str(status), elu_ctx_last_error(ctx));
        elu_ctx_destroy(ctx);
        return 1;
    }
    elu_ctx_destroy(ctx);
    for (int i = 0; i < N; i++) {
        const double want = x[i] > 0 ? x[i] : expm1((double)x[i]);
        if (fabs(y[i] - want) > 1e-7 * fabs(want)) {
            fprintf(stderr, "elu(%g) = %.9g, want %.9g\n", x[i], y[i], want);
            return 1;
        }
    }
    /* The header built against and the library loaded: one version. */
    if (strcmp(elu_version_string(), ELU_VERSION_STRING) != 0 ||
        elu_version_number() != ELU_VERSION_NUMBER) {
        fprintf(stderr, "library %s, header %s\n", elu_version_string(), ELU_VERSION_STRING);
        return 1;
    }
    printf("%s\n", elu_version_string());
    return 0;
}
