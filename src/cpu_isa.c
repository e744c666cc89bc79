/* The CPU's vector kernels: the instruction set, chosen once per process
 * (the best the processor has, no better than ELU_CPU_ISA names), and
 * which constants its kernels take. */
#include "cpu_isa.h"

#include "cpu_fast.h"
#include "env.h"
#include "numerics.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const struct elu_cpu_isa *isa; /* NULL: the scalar kernels only */
static bool f64_vector;                /* isa's f64 kernels may serve */
static char isa_fallback[128];         /* why isa is not the one asked for */
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__)
const struct elu_cpu_isa *const elu_cpu_isas[2] = {&elu_cpu_isa_avx512, &elu_cpu_isa_avx2};

void elu_cpu_isas_present(bool has[2])
{
    unsigned eax, ebx, ecx = 0, edx;
    __get_cpuid(1, &eax, &ebx, &ecx, &edx); /* clang's builtin knows no "f16c" */
    has[0] = __builtin_cpu_supports("avx512f");
    has[1] = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && (ecx & bit_F16C);
}

const struct elu_cpu_isa *elu_cpu_choose_isa(const char *want, const bool has[2])
{
    bool allowed = !want;
    for (size_t i = 0; i < 2; i++) {
        allowed = allowed || strcmp(want, elu_cpu_isas[i]->name) == 0;
        if (allowed && has[i])
            return elu_cpu_isas[i];
    }
    return NULL;
}
#endif

static const char *name_of(const struct elu_cpu_isa *set) { return set ? set->name : "baseline"; }

/* ELU_CPU_ISA's choice, or the best the processor has (an invalid value is
 * reported at each context's creation, by env.c). */
static void pick_isa(void)
{
    const char *want = elu_env_choice("ELU_CPU_ISA");
#if defined(__x86_64__)
    bool has[2];
    elu_cpu_isas_present(has);
    isa = elu_cpu_choose_isa(want, has);
    f64_vector = isa && isa->exact_fma64();
#endif
    if (want && strcmp(want, name_of(isa)) != 0)
        snprintf(isa_fallback, sizeof isa_fallback,
                 "ELU_CPU_ISA=%s: the processor lacks it (using %s)", want, name_of(isa));
}

const struct elu_cpu_isa *elu_cpu_isa(void)
{
    pthread_once(&isa_once, pick_isa);
    return isa;
}

const char *elu_cpu_isa_name(void)
{
    pthread_once(&isa_once, pick_isa);
    return name_of(isa);
}

const char *elu_cpu_isa_fallback(void)
{
    pthread_once(&isa_once, pick_isa);
    return isa_fallback;
}

bool elu_cpu_fast_forward_ok(const struct elu_coef *c)
{
    pthread_once(&isa_once, pick_isa);
    return elu_exact_forward_takes(c) && (c->dtype == ELU_F32 || f64_vector);
}

static bool within(double v, double e) { return fabs(v) >= 1 / e && fabs(v) <= e; }

bool elu_cpu_fast_half_forward_ok(const struct elu_coef *c)
{
    pthread_once(&isa_once, pick_isa);
    if (!f64_vector) /* its doubtful lanes' double-double needs an exact FMA */
        return false;
    const double nip = c->input_scale;
    const bool floats = (float)c->scale_alpha == c->scale_alpha && (float)c->scale == c->scale &&
                        (float)nip == nip;
    if (c->dtype == ELU_F16)
        return floats && isfinite(c->scale) && isfinite(c->scale_alpha) && nip >= 0x1p-60 &&
               nip <= 0x1p126;
    return c->dtype == ELU_BF16 && floats && isfinite(c->scale) && nip >= 0x1p-125 &&
           nip <= 0x1p126 && fabs(c->scale_alpha) <= 0x1p15;
}

bool elu_cpu_fast_backward_ok(const struct elu_coef *c)
{
    pthread_once(&isa_once, pick_isa);
    const bool finite = isfinite(c->scale) && isfinite(c->scale_alpha) && c->input_scale >= 0 && isfinite(c->input_scale);
    if (c->dtype == ELU_F64)
        return finite && f64_vector && within(c->input_scale, 0x1p300) &&
               within(c->input_scale * c->scale_alpha, 0x1p300);
    if (c->dtype == ELU_F16 || c->dtype == ELU_BF16)
        return finite && (float)c->scale_alpha == c->scale_alpha && (float)c->input_scale == c->input_scale &&
               (float)c->scale == c->scale && fabs(c->input_scale * c->scale_alpha) >= 0x1p-70 &&
               fabs(c->input_scale * c->scale_alpha) <= 0x1p126;
    return finite;
}
