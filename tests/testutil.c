#include "testutil.h"
#include "cache.h"
#include "cuda_loader.h"
#include "scalar.h"
#include "elu_forward_f32.h"
#include "elu_forward_f64.h"
#include "numerics.h"

#include <dirent.h>
#include <mpfr.h>
#include <pthread.h>
#include <stdatomic.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const elu_dtype tu_dtypes[4] = {ELU_F32, ELU_F64, ELU_F16, ELU_BF16};
const char *const tu_dtype_names[4] = {"f32", "f64", "f16", "bf16"};

static uint64_t rng_state;
static bool under_valgrind; /* set once by tu_seed(), before any thread */

void tu_seed(void)
{
    under_valgrind = getenv("ELU_TEST_VALGRIND") != NULL;
    const char *env = getenv("ELU_TEST_SEED");
    rng_state = env ? strtoull(env, NULL, 0)
                : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    fprintf(stderr, "ELU_TEST_SEED=%llu\n", (unsigned long long)rng_state);
}

bool tu_under_valgrind(void)
{
    return under_valgrind;
}

uint64_t tu_rand(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double tu_uniform(double lo, double hi)
{
    return lo + (hi - lo) * (double)(tu_rand() >> 11) * 0x1p-53;
}

long double tu_get(elu_dtype t, const void *buf, size_t i)
{
    switch (t) {
    case ELU_F32: return ((const float *)buf)[i];
    case ELU_F64: return ((const double *)buf)[i];
    case ELU_F16: return elu_f16_to_double(((const uint16_t *)buf)[i]);
    case ELU_BF16: return elu_bf16_to_double(((const uint16_t *)buf)[i]);
    }
    return NAN;
}

void tu_set(elu_dtype t, void *buf, size_t i, long double v)
{
    switch (t) {
    case ELU_F32: ((float *)buf)[i] = (float)v; break;
    case ELU_F64: ((double *)buf)[i] = (double)v; break;
    case ELU_F16: ((uint16_t *)buf)[i] = elu_f16_from(v); break;
    case ELU_BF16: ((uint16_t *)buf)[i] = elu_bf16_from(v); break;
    }
}

/* Smallest subnormal and largest finite value of each dtype. */
static double tiny(elu_dtype t)
{
    static const double v[] = {0x1p-149, 0x1p-1074, 0x1p-24, 0x1p-133};
    return v[t];
}
static double huge(elu_dtype t)
{
    static const double v[] = {FLT_MAX, DBL_MAX, 65504.0, 0x1.fep127};
    return v[t];
}

void tu_fill_inputs(elu_dtype t, void *buf, size_t n)
{
    const double specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0,
                               tiny(t), -tiny(t), 3 * tiny(t), -5 * tiny(t),
                               huge(t), -huge(t), 1.0, -1.0, -1e-8, 1e-8,
                               -0x1p-25, -20.0, -100.0, -1000.0};
    const size_t ns = sizeof specials / sizeof *specials;
    for (size_t i = 0; i < n; i++) {
        double v;
        if (i < ns)
            v = specials[i];
        else if (i % 3 == 0)
            v = tu_uniform(-20, 20);
        else /* log-uniform magnitude, random sign */
            v = (tu_rand() & 1 ? -1 : 1) * exp2(tu_uniform(-40, 12));
        tu_set(t, buf, i, v);
    }
}

void tu_fill_uniform(elu_dtype t, void *buf, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        tu_set(t, buf, i, tu_uniform(lo, hi));
}

void *tu_poisoned(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p)
        abort();
    memset(p, 0xA5, bytes);
    return p;
}

struct coef {
    long double neg, pos, nip;
};

static struct coef coef_of(const elu_params *p)
{
    if (p->dtype == ELU_F64)
        return (struct coef){p->alpha * p->scale, p->scale, p->input_scale};
    const float a = (float)p->alpha, s = (float)p->scale;
    const float neg = a * s;
    return (struct coef){neg, s, (float)p->input_scale};
}

/* x * nip, rounded to the arithmetic type when like_pytorch. */
static long double argument(const elu_params *p, long double x, long double nip,
                            bool like_pytorch)
{
    if (!like_pytorch)
        return x * nip;
    /* Multiply in the arithmetic type itself: rounding a long double
     * product again would round twice. */
    if (p->dtype == ELU_F64)
        return (double)x * (double)nip;
    return (float)x * (float)nip;
}

bool tu_forward_correctly_rounded(const elu_params *p)
{
    const struct elu_coef c = {p->dtype, p->scale * p->alpha, p->scale, p->input_scale};
    if (p->dtype == ELU_F32)
        return (float)p->input_scale > 0;
    return p->dtype == ELU_F64 && elu_exact_forward_takes(&c);
}

long double tu_ref_forward(const elu_params *p, long double x, bool like_pytorch)
{
    const struct coef c = coef_of(p);
    return x > 0 ? x * c.pos : c.neg * expm1l(argument(p, x, c.nip, like_pytorch));
}

/* MPFR keeps caches per thread, which a thread's exit would leak: each
 * thread that used it frees them as it exits. */
static pthread_key_t mpfr_user;
static pthread_once_t mpfr_user_once = PTHREAD_ONCE_INIT;
static void free_mpfr_caches(void *unused)
{
    (void)unused;
    mpfr_free_cache();
}
static void make_mpfr_user_key(void) { pthread_key_create(&mpfr_user, free_mpfr_caches); }
static void note_mpfr_user(void)
{
    pthread_once(&mpfr_user_once, make_mpfr_user_key);
    pthread_setspecific(mpfr_user, &mpfr_user);
}

/* Whether y, within 2^-50 of an exact value relatively, might lie on the
 * other side of a float midpoint than it: its bits below the float's last
 * within 2^8 double ulps of a midpoint's (1 then 28 zeros); below the
 * normal floats, those of |y| + 2^-126, whose quantum is theirs. */
static bool near_float_midpoint(double y)
{
    const double z = fabs(y) < 0x1p-126 ? fabs(y) + 0x1p-126 : fabs(y);
    uint64_t bits;
    memcpy(&bits, &z, sizeof bits);
    const uint64_t low = bits & ((1u << 29) - 1);
    return low + 256 >= (1u << 28) && low <= (1u << 28) + 256;
}

float tu_cr_forward_f32(const elu_params *p, float x)
{
    const struct coef c = coef_of(p);
    const double neg = (double)c.neg, nip = (double)c.nip;
    if (!(x <= 0))
        return x > 0 ? (float)((double)x * (double)c.pos) : x; /* the product is exact */
    const double t = (double)x * nip; /* exact */
    if (x == 0 || t < -20) /* below -20, -neg * (1 - e^t) rounds to -neg */
        return (float)(x == 0 ? (double)x * neg : -neg);
    const double y = neg * expm1(t); /* within 2^-51 */
    if (!near_float_midpoint(y))
        return (float)y;
    note_mpfr_user();
    mpfr_t m;
    mpfr_init2(m, 256);
    mpfr_set_d(m, t, MPFR_RNDN); /* exact */
    mpfr_expm1(m, m, MPFR_RNDN);
    mpfr_mul_d(m, m, neg, MPFR_RNDN); /* within 2^-250 */
    const float r = mpfr_get_flt(m, MPFR_RNDN);
    mpfr_clear(m);
    return r;
}

/* Whether every value within 2^-60 of y relatively rounds to the same
 * double as y. */
static bool rounds_alike(long double y)
{
    const double d = (double)y;
    return (double)(y * (1 - 0x1p-60L)) == d && (double)(y * (1 + 0x1p-60L)) == d;
}

static atomic_uint_fast64_t cr_f64_by_mpfr;
static pthread_mutex_t cr_f64_lock = PTHREAD_MUTEX_INITIALIZER;
static double cr_f64_nearest = 0.5;

void tu_cr_f64_stats_take(struct tu_cr_f64_stats *out)
{
    out->by_mpfr = atomic_exchange(&cr_f64_by_mpfr, 0);
    pthread_mutex_lock(&cr_f64_lock);
    out->nearest = cr_f64_nearest;
    cr_f64_nearest = 0.5;
    pthread_mutex_unlock(&cr_f64_lock);
}

/* Notes how near a midpoint m lies, rounded to out, in ulps at out. */
static void note_nearest(mpfr_t m, double out)
{
    mpfr_t d;
    mpfr_init2(d, 64);
    mpfr_sub_d(d, m, out, MPFR_RNDN);
    const int e = out == 0 ? -1074 : ilogb(out) - 52 < -1074 ? -1074 : ilogb(out) - 52;
    const double near = fabs(0.5 - fabs(ldexp(mpfr_get_d(d, MPFR_RNDN), -e)));
    mpfr_clear(d);
    pthread_mutex_lock(&cr_f64_lock);
    cr_f64_nearest = near < cr_f64_nearest ? near : cr_f64_nearest;
    pthread_mutex_unlock(&cr_f64_lock);
}

double tu_cr_forward_f64(const elu_params *p, double x)
{
    const struct coef c = coef_of(p);
    const double neg = (double)c.neg, nip = (double)c.nip;
    if (!(x < 0))
        return x > 0 ? x * (double)c.pos : x * neg; /* NaN stays NaN */
    const double th = x * nip, tl = fma(x, nip, -th);
    if (th < -40) /* -neg * (1 - e^t) rounds to -neg */
        return -neg;
    /* expm1(th + tl) = E + (1 + E) tl, E = expm1(th): within 2^-61 or so */
    const long double e = expm1l(th), y = neg * (e + (1 + e) * tl);
    if (fabs(th) >= 0x1p-960 && rounds_alike(y)) /* else tl might be inexact */
        return (double)y;
    atomic_fetch_add(&cr_f64_by_mpfr, 1);
    note_mpfr_user();
    mpfr_t t, m;
    mpfr_init2(t, 2200);
    mpfr_init2(m, 160);
    mpfr_set_d(t, x, MPFR_RNDN);
    mpfr_mul_d(t, t, nip, MPFR_RNDN); /* exact at 2200 bits */
    if (fabs(th) < 0x1p-100) {
        /* t + t^2/2 + t^3/6 in full: what little e^t - 1 - t adds decides
         * a product neg*t that is a midpoint */
        mpfr_set_prec(m, 2200);
        mpfr_t u;
        mpfr_init2(u, 2200);
        mpfr_div_ui(u, t, 3, MPFR_RNDN);
        mpfr_add_ui(u, u, 1, MPFR_RNDN);
        mpfr_mul(u, u, t, MPFR_RNDN);
        mpfr_div_2ui(u, u, 1, MPFR_RNDN);
        mpfr_add_ui(u, u, 1, MPFR_RNDN);
        mpfr_mul(m, u, t, MPFR_RNDN);
        mpfr_clear(u);
    } else
        mpfr_expm1(m, t, MPFR_RNDN);
    mpfr_mul_d(m, m, neg, MPFR_RNDN); /* within 2^-158 */
    if (mpfr_regular_p(m) && mpfr_get_exp(m) <= -1022) { /* below 2^-1022: to the grid of 2^-1074 */
        mpfr_mul_2si(m, m, 1074, MPFR_RNDN);
        mpfr_rint(m, m, MPFR_RNDN); /* ties to even, as the grid's */
        mpfr_mul_2si(m, m, -1074, MPFR_RNDN);
    }
    const double out = mpfr_get_d(m, MPFR_RNDN);
    if (fabs(th) >= 0x1p-100) /* tinier products may be midpoints, exactly */
        note_nearest(m, out);
    mpfr_clear(t);
    mpfr_clear(m);
    return out;
}

size_t tu_f32_doubtful_inputs(const elu_params *p, bool gpu, float *x, size_t cap)
{
    const struct coef c = coef_of(p);
    const uint32_t lo = 0xBA800000u, hi = 0xC1900000u; /* -2^-10 and -18 */
    size_t n = 0;
    for (int run = 0; run < 64 && n < cap; run++) {
        const uint32_t start = lo + (uint32_t)(tu_rand() % (hi - lo - (1u << 20)));
        for (uint32_t b = start; b < start + (1u << 20) && n < cap; b++) {
            float v;
            memcpy(&v, &b, sizeof v);
            double t = (double)v * (double)c.nip;
            t = t < ELU_F32_T_MIN ? ELU_F32_T_MIN : t;
            if (gpu ? tu_f32_gpu_doubtful(t, (double)c.neg)
                    : elu_f32_doubtful(elu_f32_fast(t, (double)c.neg)))
                x[n++] = v;
        }
    }
    return n;
}

size_t tu_f64_doubtful_inputs(const elu_params *p, double *x, size_t cap)
{
    const struct coef c = coef_of(p);
    const double neg = (double)c.neg, nip = (double)c.nip;
    size_t n = 0;
    for (long tries = 0; tries < (1l << 26) && n < cap; tries++) {
        const double v = -ldexp(1 + (double)(tu_rand() >> 12) * 0x1p-52, (int)(tu_rand() % 66) - 60);
        const struct elu_dd t = elu_two_prod(v, nip);
        double y;
        if (t.hi >= ELU_F64_T_MIN && t.hi <= -ELU_F64_TINY &&
            !elu_f64_rounds(elu_f64_fast(t, neg, false), ELU_F64_FAST_ERR, &y))
            x[n++] = v;
    }
    return n;
}

size_t tu_half_doubtful_inputs(const elu_params *p, uint16_t *x, size_t cap)
{
    const bool f16 = p->dtype == ELU_F16;
    const uint32_t least = f16 ? 0x38800000u : 0x0d800000u, dropped = f16 ? 0x1fffu : 0xffffu;
    size_t n = 0;
    for (uint32_t bits = 0; bits < 65536 && n < cap; bits++) {
        const long double v = tu_get(p->dtype, &(uint16_t){(uint16_t)bits}, 0);
        const float y = (float)tu_ref_forward(p, v, false);
        uint32_t u;
        memcpy(&u, &y, sizeof u);
        u &= 0x7fffffffu;
        const bool near_midpoint = (u & dropped) - (dropped / 2 + 1 - 16) <= 32u;
        if (isfinite(y) && y != 0 && (u < least || near_midpoint))
            x[n++] = (uint16_t)bits;
    }
    return n;
}

long double tu_ref_backward(const elu_params *p, long double g, long double s,
                            bool from_output, bool like_pytorch)
{
    const struct coef c = coef_of(p);
    if (!(s <= 0))
        return g * c.pos;
    if (!from_output)
        return g * c.nip * c.neg * expl(argument(p, s, c.nip, like_pytorch));
    /* s + neg may lose neg entirely (a huge bf16 s): keep the side it was
     * on, one long double ulp away, so that rounding the reference to the
     * dtype cannot take a lost term's tie the wrong way. */
    const long double sum = s + c.neg, b = sum - s, err = (s - (sum - b)) + (c.neg - b);
    const long double r = g * c.nip * sum;
    return err == 0 || !isfinite(r) ? r : nextafterl(r, g * c.nip * err > 0 ? INFINITY : -INFINITY);
}

double tu_ulp_error(elu_dtype t, long double got, long double ref)
{
    static const int mant[] = {23, 52, 10, 7}, emin[] = {-126, -1022, -14, -126};
    /* The reference rounded to dtype decides overflow and NaN. */
    unsigned char tmp[8];
    tu_set(t, tmp, 0, ref);
    /* Classes are compared in double: valgrind's x87 emulation loads a float
     * infinity into long double as the largest finite value. */
    const double rounded = (double)tu_get(t, tmp, 0), g = (double)got;
    if (isnan(rounded) || isnan(g))
        return isnan(rounded) && isnan(g) ? 0 : INFINITY;
    if (isinf(rounded) || isinf(g))
        return rounded == g ? 0 : INFINITY;
    /* valgrind's long double (double, there) loses a product near the
     * subnormals' end to 0 that the f64 forward keeps exactly */
    if (ref == 0 && under_valgrind && t == ELU_F64 && fabsl(got) < 0x1p-1060L)
        return 0;
    if (ref == 0)
        return got == 0 && signbit(got) == signbit(ref) ? 0 : INFINITY;
    int e = ilogbl(ref);
    if (e < emin[t])
        e = emin[t];
    /* Under valgrind (CI sets ELU_TEST_VALGRIND=1), whose x87 emulation
     * keeps only double precision, long double (the references, the F64
     * CPU path) loses 11 bits: judge 64 times more leniently there. That
     * run is for memory errors; the numbers are checked natively. */
    return (double)(fabsl(got - ref) / ldexpl(1, e - mant[t])) / (under_valgrind ? 64 : 1);
}

double tu_check_forward(const elu_params *p, const void *x, const void *y,
                        size_t n, bool like_pytorch, size_t *where)
{
    const bool rounded = tu_forward_correctly_rounded(p) && !like_pytorch && !under_valgrind;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        const long double xi = tu_get(p->dtype, x, i), yi = tu_get(p->dtype, y, i);
        const long double ref = tu_ref_forward(p, xi, like_pytorch);
        double e = tu_ulp_error(p->dtype, yi, ref);
        if (rounded && p->dtype == ELU_F32) {
            const float want = tu_cr_forward_f32(p, (float)xi), got = (float)yi;
            if (memcmp(&want, &got, sizeof got) && !(isnan(want) && isnan(got)))
                e += 1;
        }
        if (rounded && p->dtype == ELU_F64) {
            const double want = tu_cr_forward_f64(p, (double)xi), got = (double)yi;
            if (memcmp(&want, &got, sizeof got) && !(isnan(want) && isnan(got)))
                e += 1;
        }
        if (!(e <= worst)) {
            worst = e;
            *where = i;
        }
    }
    return worst;
}

double tu_check_backward(const elu_params *p, const void *g, const void *s,
                         bool from_output, const void *dx, size_t n,
                         bool like_pytorch, size_t *where)
{
    const struct coef c = coef_of(p);
    const long double underflow = like_pytorch && !from_output
        ? 4 * fabsl(c.neg * c.nip) * (p->dtype == ELU_F64 ? 0x1p-1074 : 0x1p-149)
        : 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        const long double gi = tu_get(p->dtype, g, i), got = tu_get(p->dtype, dx, i);
        const long double ref = tu_ref_backward(p, gi, tu_get(p->dtype, s, i),
                                                from_output, like_pytorch);
        double e = tu_ulp_error(p->dtype, got, ref);
        if (fabsl(got - ref) <= underflow * fabsl(gi))
            e = 0;
        if (!(e <= worst)) {
            worst = e;
            *where = i;
        }
    }
    return worst;
}

char tu_dir[512];

int tu_dir_setup(void **state)
{
    (void)state;
    tu_tempdir(tu_dir, sizeof tu_dir);
    return 0;
}

int tu_dir_teardown(void **state)
{
    (void)state;
    tu_rmdir(tu_dir);
    return 0;
}

elu_ctx_stats tu_stats(const elu_ctx *ctx)
{
    elu_ctx_stats s = {0};
    elu_ctx_get_stats(ctx, &s);
    return s;
}

uint64_t tu_wait_builds(const elu_ctx *ctx, uint64_t count)
{
    elu_ctx_stats s = {0};
    for (int i = 0; i < 6000; i++) {
        elu_ctx_get_stats(ctx, &s);
        if (s.background_builds >= count)
            break;
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    return s.background_builds;
}

void tu_tempdir(char *path, size_t size)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, size, "%s/elu-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(path))
        abort();
}

void tu_rmdir(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        for (struct dirent *e; (e = readdir(d));) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char child[4200];
            snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            struct stat st;
            if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode))
                tu_rmdir(child);
            else
                unlink(child);
        }
        closedir(d);
    }
    rmdir(path);
}

/* Whether the entry at path is a forward table (one that does not parse
 * is not). */
static bool is_table(const char *path)
{
    struct stat st;
    FILE *f = stat(path, &st) == 0 ? fopen(path, "rb") : NULL;
    char *data = f ? malloc((size_t)st.st_size + 1) : NULL;
    const size_t len = data ? fread(data, 1, (size_t)st.st_size, f) : 0;
    struct elu_cache_entry e;
    const bool table = len && !elu_cache_parse(data, len, NULL, &e) && e.kind == ELU_BINARY_TABLE;
    free(data);
    if (f)
        fclose(f);
    return table;
}

int tu_entries(const char *dir, char *path, size_t size)
{
    DIR *d = opendir(dir);
    int found = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));) {
        const size_t len = strlen(e->d_name);
        char entry[1024];
        snprintf(entry, sizeof entry, "%s/%s", dir, e->d_name);
        if (len > 4 && !strcmp(e->d_name + len - 4, ".bin") && !is_table(entry)) {
            snprintf(path, size, "%s", entry);
            found++;
        }
    }
    closedir(d);
    return found;
}

bool tu_only_entry(const char *dir, char *path, size_t size)
{
    return tu_entries(dir, path, size) == 1;
}

/* -------- device memory -------- */

const struct elu_cuda_api *tu_cu(void)
{
    const char *why;
    const struct elu_cuda_api *cu = elu_cuda_load(&why);
    if (!cu) {
        fprintf(stderr, "no CUDA driver: %s\n", why);
        _exit(91);
    }
    return cu;
}

/* A failed driver call ends the process: see testutil.h. */
static void cu_check(elu_cu_result r, const char *call)
{
    if (r != 0) {
        fprintf(stderr, "%s: %s\n", call, elu_cu_result_text(tu_cu(), r).text);
        _exit(91);
    }
}

static elu_cu_device device_of(int ordinal)
{
    const struct elu_cuda_api *cu = tu_cu();
    elu_cu_device dev = 0;
    cu_check(elu_cuda_init(), "cuInit");
    cu_check(cu->DeviceGet(&dev, ordinal), "cuDeviceGet");
    return dev;
}

void tu_dev_begin(int device)
{
    elu_cu_context primary;
    cu_check(tu_cu()->DevicePrimaryCtxRetain(&primary, device_of(device)),
             "cuDevicePrimaryCtxRetain");
    cu_check(tu_cu()->CtxPushCurrent(primary), "cuCtxPushCurrent");
}

void tu_dev_end(int device)
{
    elu_cu_context popped;
    cu_check(tu_cu()->CtxPopCurrent(&popped), "cuCtxPopCurrent");
    cu_check(tu_cu()->DevicePrimaryCtxRelease(device_of(device)), "cuDevicePrimaryCtxRelease");
}

static elu_cu_deviceptr dev_ptr(const void *dev)
{
    return (elu_cu_deviceptr)(uintptr_t)dev;
}

void *tu_dev_alloc(size_t bytes)
{
    elu_cu_deviceptr p = 0;
    cu_check(tu_cu()->MemAlloc(&p, bytes), "cuMemAlloc");
    return (void *)(uintptr_t)p;
}

void *tu_dev_copy_of(const void *host, size_t bytes)
{
    void *dev = tu_dev_alloc(bytes);
    tu_dev_upload(dev, host, bytes);
    return dev;
}

void tu_dev_upload(void *dev, const void *host, size_t bytes)
{
    cu_check(tu_cu()->MemcpyHtoD(dev_ptr(dev), host, bytes), "cuMemcpyHtoD");
}

void tu_dev_download(void *host, const void *dev, size_t bytes)
{
    cu_check(tu_cu()->MemcpyDtoH(host, dev_ptr(dev), bytes), "cuMemcpyDtoH");
}

void tu_dev_fill(void *dev, unsigned char byte, size_t bytes)
{
    cu_check(tu_cu()->MemsetD8(dev_ptr(dev), byte, bytes), "cuMemsetD8");
}

void tu_dev_free(void *dev)
{
    cu_check(tu_cu()->MemFree(dev_ptr(dev)), "cuMemFree");
}

void tu_dev_sync(void)
{
    cu_check(tu_cu()->CtxSynchronize(), "cuCtxSynchronize");
}
