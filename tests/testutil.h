/* Shared by the test programs: fresh random inputs with special values, a
 * long double reference of PyTorch's formula, ulp distances, temp dirs,
 * contexts (testctx.h), and device memory through libelu's own driver
 * loader. */
#ifndef ELU_TESTUTIL_H
#define ELU_TESTUTIL_H

#include "elu.h"
#include "testctx.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Seeded from the clock unless ELU_TEST_SEED is set; printed once so a
 * failure can be replayed. Call first, before any thread starts. */
void tu_seed(void);
uint64_t tu_rand(void);
/* Whether ELU_TEST_VALGRIND is set: tests shrink their largest inputs. */
bool tu_under_valgrind(void);
double tu_uniform(double lo, double hi);

/* n values of dtype: special values first (NaN, +-inf, +-0, denormals,
 * extremes), then random ones of every magnitude and both signs. */
void tu_fill_inputs(elu_dtype t, void *buf, size_t n);
/* n values uniform in [lo, hi] */
void tu_fill_uniform(elu_dtype t, void *buf, size_t n, double lo, double hi);

/* `bytes` of malloc'd memory, every byte 0xA5 (a finite value in every
 * dtype): an element left unwritten shows. */
void *tu_poisoned(size_t bytes);

long double tu_get(elu_dtype t, const void *buf, size_t i);
void tu_set(elu_dtype t, void *buf, size_t i, long double v);

/* The reference in long double, with the constants rounded as PyTorch does.
 * With `like_pytorch`, the argument of expm1/exp is first rounded to the
 * arithmetic type, as PyTorch's (and libelu's GPU) kernels do: that rounding
 * is amplified by |argument|, so a reference without it would demand more
 * than the formula can give. */
long double tu_ref_forward(const elu_params *p, long double x, bool like_pytorch);
long double tu_ref_backward(const elu_params *p, long double g, long double s,
                            bool from_output, bool like_pytorch);

/* Whether libelu's forward promises correct rounding for p: F32 with
 * input_scale > 0, F64 with constants numerics.c's
 * elu_exact_forward_takes accepts. */
bool tu_forward_correctly_rounded(const elu_params *p);
/* The F32 forward's correctly rounded result for x (the float nearest the
 * exact value, ties to even; NaN for NaN), for input_scale > 0: from
 * glibc's expm1 where that settles it, else from MPFR. */
float tu_cr_forward_f32(const elu_params *p, float x);

/* Up to cap inputs x < 0 whose F32 forward the fast evaluation leaves in
 * doubt (kernels_src/elu_forward_f32.h), the CPU's or (gpu) the GPU's,
 * into x: those the slow path settles, about one in 2^15 (CPU) or 2^18
 * (GPU), found in runs of 2^20 inputs from random points; how many. */
size_t tu_f32_doubtful_inputs(const elu_params *p, bool gpu, float *x, size_t cap);

/* Whether the GPU's fast evaluation leaves neg * expm1(t) in doubt
 * (tests/gpu_doubt.c). */
bool tu_f32_gpu_doubtful(double t, double neg);

/* The same for F64 (kernels_src/elu_forward_f64.h): inputs that fail the
 * fast path's rounding test, about one in 2^15, from random points of
 * [-2^6, -2^-60] / input_scale. */
size_t tu_f64_doubtful_inputs(const elu_params *p, double *x, size_t cap);

/* The F64 forward's correctly rounded result for x, for constants the
 * exact forward takes: from glibc's expm1l where that settles it, else
 * from MPFR. */
double tu_cr_forward_f64(const elu_params *p, double x);
/* What tu_cr_forward_f64 has done since the last take: how many results
 * MPFR settled, and how near a midpoint the nearest of them lay (in ulps
 * at the result; 0.5 before any), leaving out |x * input_scale| < 2^-100;
 * then counting starts over. */
struct tu_cr_f64_stats {
    uint64_t by_mpfr;
    double nearest;
};
void tu_cr_f64_stats_take(struct tu_cr_f64_stats *out);

/* Up to cap inputs of a half type (p->dtype) whose forward the GPU's
 * computed forward may leave in doubt (kernels_src/elu.cu's
 * rounds_surely), into x, in increasing order of bits: those whose exact
 * result, rounded to float, lies within 16 float ulps of a midpoint of the
 * type, or below f16's least normal (bf16: 2^-100); how many. */
size_t tu_half_doubtful_inputs(const elu_params *p, uint16_t *x, size_t cap);

/* Distance of `got` from the exact `ref` in units in the last place of
 * dtype at ref; 0 for matching NaN/inf; INFINITY for a class mismatch. */
double tu_ulp_error(elu_dtype t, long double got, long double ref);

/* Largest ulp error of y[] (dx[]) against the forward (backward) reference;
 * *where gets the worst index. Where the forward is correctly rounded
 * (tu_forward_correctly_rounded, and not like_pytorch), any other result
 * counts 1 more than its distance: a bound of 1 then demands that one. With like_pytorch, the backward also accepts
 * an error below 4 smallest subnormals of the arithmetic type times
 * |g * scale * alpha * input_scale|: exp() underflowed there, in PyTorch's
 * order of operations too. */
double tu_check_forward(const elu_params *p, const void *x, const void *y,
                        size_t n, bool like_pytorch, size_t *where);
double tu_check_backward(const elu_params *p, const void *g, const void *s,
                         bool from_output, const void *dx, size_t n,
                         bool like_pytorch, size_t *where);

/* A fresh empty directory under $TMPDIR (or /tmp); tu_rmdir removes it and
 * everything in it. */
void tu_tempdir(char *path, size_t size);
void tu_rmdir(const char *path);
/* How many *.bin entries dir holds other than the half types' forward
 * tables (a table entry accompanies each f16 and bf16 binary), the path of
 * one of them in path; and the single one, false if there is not exactly
 * one. */
int tu_entries(const char *dir, char *path, size_t size);
bool tu_only_entry(const char *dir, char *path, size_t size);

/* A cmocka fixture: a fresh temp directory in tu_dir for each test. */
extern char tu_dir[512];
int tu_dir_setup(void **state);
int tu_dir_teardown(void **state);

/* ctx's counters (zero for a NULL ctx). */
elu_ctx_stats tu_stats(const elu_ctx *ctx);

/* Wait, up to a minute, until ctx's background thread has built `count`
 * specialized modules in all (elu_ctx_stats.background_builds); returns
 * the count reached. */
uint64_t tu_wait_builds(const elu_ctx *ctx, uint64_t count);

/* Device memory, through libelu's own driver loader (as an application
 * would manage it through cudart), in a device's primary context (the one
 * libelu uses). For tests that made a CUDA context: a failure of the driver ends
 * the process (91), as tu_ctx's failures do, so that these serve worker
 * threads and forked children too. Device pointers are void *, as elu_run
 * takes them. */
struct elu_cuda_api;
/* The driver, for what the tu_dev_ functions leave out: streams, graphs,
 * managed memory. */
const struct elu_cuda_api *tu_cu(void);
/* Make device's primary context current on this thread; tu_dev_end(device)
 * pops and releases it. */
void tu_dev_begin(int device);
void tu_dev_end(int device);
void *tu_dev_alloc(size_t bytes);
/* A new device copy of `bytes` of host memory. */
void *tu_dev_copy_of(const void *host, size_t bytes);
void tu_dev_upload(void *dev, const void *host, size_t bytes);
void tu_dev_download(void *host, const void *dev, size_t bytes);
void tu_dev_fill(void *dev, unsigned char byte, size_t bytes);
void tu_dev_free(void *dev);
/* Wait for all the current context's work, in every stream. */
void tu_dev_sync(void);

extern const elu_dtype tu_dtypes[4];
extern const char *const tu_dtype_names[4];

#endif
