/* The CPU path: the vector kernels of the instruction set in use
 * (cpu_fast.c, chosen by cpu_isa.c) where they take the constants, the
 * scalar kernels (scalar.c) elsewhere; a context's tables for the half
 * types; the split over threads; strided views. */
#include "cpu.h"

#include "cpu_fast.h"
#include "cpu_isa.h"
#include "half_table.h"
#include "scalar.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

/* -------- subnormals as IEEE 754 has them -------- */

/* Flush-to-zero and denormals-are-zero (MXCSR's bits 15 and 6), which a
 * caller may have set (torch.set_flush_denormal, code built with
 * -ffast-math), would change the results of subnormal inputs and outputs:
 * the thread that computes clears them for the call, and sets them back
 * after. Returns the state to give restore_subnormals. */
#define FLUSHES 0x8040u
static unsigned ieee_subnormals(void)
{
#if defined(__x86_64__)
    const unsigned csr = _mm_getcsr();
    if (csr & FLUSHES)
        _mm_setcsr(csr & ~FLUSHES);
    return csr;
#else
    return 0;
#endif
}

static void restore_subnormals(unsigned csr)
{
#if defined(__x86_64__)
    if (csr & FLUSHES)
        _mm_setcsr(csr);
#else
    (void)csr;
#endif
}

/* -------- lookup tables for the half types -------- */

/* The vector kernels compute a half type's forward where the constants
 * allow (elu_cpu_fast_half_forward_ok), and its backward; elsewhere, a
 * half type having 65536 values, the forward is a table of correctly
 * rounded results, a load per element: the f32 vector kernel's results
 * rounded to the type where that is surely right (elu_half_forward_table,
 * half_table.c), the scalar kernel's elsewhere. A context keeps one for
 * each set of constants, made on the first call large enough to pay for
 * it: a build costs what the scalar kernel takes for TABLE_MIN_N elements
 * (docs/DESIGN.md, "The half types"). */
#define MAX_TABLES 12
#define TABLE_MIN_N 2048
/* Once every slot holds other constants' tables, a call of this many
 * elements or more builds one for itself, freed after it, rather than run
 * the scalar kernel: four times what pays for a table kept. */
#define TEMPORARY_MIN_N 8192

/* A table is built with no lock held and then published into the first
 * free slot: a lock held across a build would be inherited, held for
 * ever, by a fork child, which does not have the building thread. Threads
 * that meet the same new constants at once each build the table, and all
 * but the first to publish it discard theirs. */
struct half_table {
    struct elu_coef coef;
    uint16_t *data;
};

struct elu_cpu_tables {
    _Atomic(struct half_table *) t[MAX_TABLES]; /* filled in order, complete */
};

struct elu_cpu_tables *elu_cpu_tables_create(void)
{
    struct elu_cpu_tables *ts = malloc(sizeof *ts);
    for (int i = 0; ts && i < MAX_TABLES; i++)
        atomic_init(&ts->t[i], NULL);
    return ts;
}

static void free_table(struct half_table *t)
{
    if (t)
        free(t->data);
    free(t);
}

void elu_cpu_tables_destroy(struct elu_cpu_tables *ts)
{
    for (int i = 0; ts && i < MAX_TABLES; i++)
        free_table(atomic_load_explicit(&ts->t[i], memory_order_relaxed));
    free(ts);
}

static bool same_table(const struct half_table *t, const struct elu_coef *c)
{
    return t->coef.dtype == c->dtype &&
           memcmp(&t->coef.scale_alpha, &c->scale_alpha, sizeof c->scale_alpha) == 0 &&
           memcmp(&t->coef.scale, &c->scale, sizeof c->scale) == 0 &&
           memcmp(&t->coef.input_scale, &c->input_scale, sizeof c->input_scale) == 0;
}

static struct half_table *new_table(const struct elu_coef *c)
{
    uint16_t *data = elu_half_forward_table(c);
    struct half_table *t = data ? malloc(sizeof *t) : NULL;
    if (t)
        *t = (struct half_table){*c, data};
    else
        free(data);
    return t;
}

/* The table for c, made if there is room; else, for a call of
 * TEMPORARY_MIN_N elements or more, made for that call alone into
 * *temporary, which the caller frees (so too one made here for a slot that
 * other threads' tables took first); NULL otherwise. Takes no lock: a
 * table is complete before the slot that shows it. */
static const uint16_t *table_for(struct elu_cpu_tables *ts, const struct elu_coef *c, size_t n,
                                 struct half_table **temporary)
{
    struct half_table *made = NULL;
    for (int i = 0; i < MAX_TABLES; i++) {
        struct half_table *seen = atomic_load_explicit(&ts->t[i], memory_order_acquire);
        if (!seen) {
            if (!made && !(made = new_table(c)))
                return NULL;
            if (atomic_compare_exchange_strong_explicit(
                    &ts->t[i], &seen, made, memory_order_release, memory_order_acquire))
                return made->data;
        }
        if (same_table(seen, c)) { /* another thread's, published first */
            free_table(made);
            return seen->data;
        }
    }
    if (!made && n >= TEMPORARY_MIN_N)
        made = new_table(c);
    *temporary = made; /* NULL, or one built and left out by other threads' */
    return made ? made->data : NULL;
}

/* The forward table a call takes, or NULL: a half type's where the vector
 * kernels do not compute it; *temporary as table_for leaves it. */
static const uint16_t *table_of_call(struct elu_cpu_tables *ts, const struct elu_coef *c,
                                     enum elu_kernel kernel, size_t n,
                                     struct half_table **temporary)
{
    if (!ts || (c->dtype != ELU_F16 && c->dtype != ELU_BF16) || n < TABLE_MIN_N ||
        kernel != ELU_KERNEL_FORWARD || (elu_cpu_isa() && elu_cpu_fast_half_forward_ok(c)))
        return NULL;
    return table_for(ts, c, n, temporary);
}
/* -------- splitting over threads -------- */

struct job {
    const struct elu_coef *c;
    enum elu_kernel kernel;
    const void *a, *b;
    void *out;
    size_t n, chunk;
    const uint16_t *table; /* a half type's forward, or NULL */
};

/* out = kernel(a, b) over n contiguous elements, by the vector kernels
 * where they apply. table: a half type's forward, or NULL. */
static void run_contiguous(const struct elu_coef *c, enum elu_kernel kernel, const void *a,
                           const void *b, void *out, size_t n, const uint16_t *table)
{
    const struct elu_cpu_isa *isa = elu_cpu_isa();
    const bool from_output = kernel == ELU_KERNEL_BACKWARD_OUTPUT;
    if (isa && kernel == ELU_KERNEL_FORWARD && elu_cpu_fast_half_forward_ok(c)) {
        isa->forward_half(c, a, out, n);
        return;
    }
    if (table) {
        const uint16_t *x = a;
        uint16_t *y = out;
        if (isa) {
            isa->lookup16(table, x, y, n);
            return;
        }
        for (size_t i = 0; i < n; i++)
            y[i] = table[x[i]];
        return;
    }
    if (isa && kernel == ELU_KERNEL_FORWARD && elu_cpu_fast_forward_ok(c)) {
        if (c->dtype == ELU_F32)
            isa->forward_f32(c, a, out, n);
        else
            isa->forward_f64(c, a, out, n);
        return;
    }
    if (isa && kernel != ELU_KERNEL_FORWARD && elu_cpu_fast_backward_ok(c)) {
        if (c->dtype == ELU_F32)
            isa->backward_f32(c, a, b, from_output, out, n);
        else if (c->dtype == ELU_F64)
            isa->backward_f64(c, a, b, from_output, out, n);
        else
            isa->backward_half(c, a, b, from_output, out, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        elu_cpu_element(c, kernel, a, (ptrdiff_t)i, b, (ptrdiff_t)i, out, (ptrdiff_t)i);
}

static void run_part(void *arg, int part)
{
    const struct job *j = arg;
    const size_t begin = (size_t)part * j->chunk;
    const size_t end = begin + j->chunk < j->n ? begin + j->chunk : j->n;
    const size_t size = elu_dtype_size(j->c->dtype);
    const unsigned csr = ieee_subnormals(); /* a worker's, or the application's thread */
    run_contiguous(j->c, j->kernel, (const char *)j->a + begin * size,
                   j->b ? (const char *)j->b + begin * size : NULL,
                   (char *)j->out + begin * size, end - begin, j->table);
    restore_subnormals(csr);
}

/* Below this many elements per thread, another thread costs more than it
 * saves (docs/DESIGN.md, "The CPU path"). */
#define ELU_CPU_MIN_PER_THREAD 32768

void elu_cpu_run(const struct elu_coef *c, enum elu_kernel kernel,
                 const void *a, const void *b, void *out, size_t n,
                 struct elu_pool *pool, struct elu_cpu_tables *tables)
{
    size_t parts = n / ELU_CPU_MIN_PER_THREAD;
    if (parts > (size_t)elu_pool_threads(pool))
        parts = (size_t)elu_pool_threads(pool);
    if (parts < 1)
        parts = 1;
    const unsigned csr = ieee_subnormals(); /* for the tables' builds too */
    struct half_table *temporary = NULL;
    const struct job j = {c, kernel, a, b, out, n, (n + parts - 1) / parts,
                          table_of_call(tables, c, kernel, n, &temporary)};
    elu_pool_run(pool, run_part, (void *)&j, (int)parts);
    free_table(temporary);
    restore_subnormals(csr);
}

/* Views go through the same kernels as contiguous arrays, a block at a
 * time through buffers, so that a result does not depend on the layout. */
void elu_cpu_run_strided(const struct elu_coef *c, enum elu_kernel kernel,
                         const void *a, const void *b, void *out, size_t n,
                         const struct elu_layout *l)
{
    enum { BLOCK = 512 };
    const size_t size = elu_dtype_size(c->dtype);
    int64_t index[ELU_MAX_RANK] = {0};
    ptrdiff_t offset[3] = {0, 0, 0}; /* of a, b, out, in elements */
    ptrdiff_t out_at[BLOCK];
    double buf[3][BLOCK]; /* a, b, out; of any dtype */
    const unsigned csr = ieee_subnormals();
    for (size_t done = 0; done < n;) {
        const size_t m = n - done < BLOCK ? n - done : BLOCK;
        for (size_t i = 0; i < m; i++) {
            out_at[i] = offset[2];
            memcpy((char *)buf[0] + i * size, (const char *)a + offset[0] * (ptrdiff_t)size, size);
            if (b)
                memcpy((char *)buf[1] + i * size, (const char *)b + offset[1] * (ptrdiff_t)size,
                       size);
            /* Step the multi-index like an odometer, last dimension fastest. */
            for (int d = (int)l->ndim - 1; d >= 0; d--) {
                const bool wraps = ++index[d] == l->shape[d];
                for (int k = 0; k < 3; k++)
                    offset[k] += (ptrdiff_t)(l->stride[k][d] * (wraps ? 1 - l->shape[d] : 1));
                if (!wraps)
                    break;
                index[d] = 0;
            }
        }
        run_contiguous(c, kernel, buf[0], b ? buf[1] : NULL, buf[2], m, NULL);
        for (size_t i = 0; i < m; i++)
            memcpy((char *)out + out_at[i] * (ptrdiff_t)size, (const char *)buf[2] + i * size,
                   size);
        done += m;
    }
    restore_subnormals(csr);
}
