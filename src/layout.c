/* Strided layouts: spans with overflow checks, and overlap decided element
 * by element rather than by bounding boxes, so that interleaved views (a
 * column of a matrix written from the next column) are accepted and views
 * whose elements alias each other are refused.
 *
 * Both overlap questions are one bounded linear Diophantine problem: can
 * sum(a_t * v_t), with integer v_t in [lo_t, hi_t] and a_t > 0, fall in
 * [target_lo, target_hi]? A depth-first search over the terms, largest
 * coefficient first, prunes with the reachable range of the terms left
 * and with their gcd. For the layouts views are made of (each stride
 * larger than the span of the smaller ones, in one view or both) it
 * settles each term after at most two tries; a work limit bounds the rest
 * (numpy's mem_overlap.c solves the same problem the same way). */
#include "layout.h"

#include <stdlib.h>

#define TERMS_MAX (2 * ELU_MAX_RANK)
#define WORK_MAX 50000 /* search nodes a question may take: a call asks up to 3 */

bool elu_layout_span(const struct elu_layout *l, int k, size_t size, int64_t *lo,
                     int64_t *hi)
{
    int64_t low = 0, high = 0; /* in bytes, relative to the base */
    for (int d = 0; d < l->ndim; d++) {
        if (l->shape[d] == 1)
            continue; /* never stepped along: its stride may be anything */
        int64_t step, reach;
        if (__builtin_mul_overflow(l->stride[k][d], (int64_t)size, &step) ||
            __builtin_mul_overflow(step, l->shape[d] - 1, &reach) ||
            reach < -ELU_LAYOUT_MAX_SPAN || reach > ELU_LAYOUT_MAX_SPAN)
            return false;
        *(reach < 0 ? &low : &high) += reach;
        if (high - low > ELU_LAYOUT_MAX_SPAN - (int64_t)size)
            return false;
    }
    *lo = low;
    *hi = high + (int64_t)size;
    return true;
}

bool elu_layout_fits(const void *base, int64_t lo, int64_t hi)
{
    const uintptr_t b = (uintptr_t)base;
    return (uintptr_t)-lo <= b && (uintptr_t)hi <= UINTPTR_MAX - b;
}

struct term {
    int64_t a, lo, hi; /* a * v with v in [lo, hi], a > 0 */
};

struct problem {
    struct term t[TERMS_MAX];
    int count;
    int64_t rest_min[TERMS_MAX + 1], rest_max[TERMS_MAX + 1]; /* of terms t.. */
    int64_t rest_gcd[TERMS_MAX + 1];
    long work;
};

static int64_t gcd(int64_t x, int64_t y)
{
    while (y) {
        const int64_t r = x % y;
        x = y;
        y = r;
    }
    return x;
}

/* Floor and ceiling of x / y for y > 0. */
static int64_t floor_div(int64_t x, int64_t y) { return x / y - (x % y < 0); }
static int64_t ceil_div(int64_t x, int64_t y) { return x / y + (x % y > 0); }

/* Adds a * v with v in [0, count - 1] (a of either sign, count > 1); terms
 * with the same coefficient merge, as their sum takes every value between. */
static void add_term(struct problem *p, int64_t a, int64_t count)
{
    const int64_t lo = a < 0 ? 1 - count : 0, hi = a < 0 ? 0 : count - 1;
    a = a < 0 ? -a : a;
    if (a == 0)
        return;
    for (int i = 0; i < p->count; i++)
        if (p->t[i].a == a) {
            p->t[i].lo += lo;
            p->t[i].hi += hi;
            return;
        }
    p->t[p->count++] = (struct term){a, lo, hi};
}

static int by_coefficient_down(const void *x, const void *y)
{
    const int64_t a = ((const struct term *)x)->a, b = ((const struct term *)y)->a;
    return (a < b) - (a > b);
}

/* Sorts the terms and tabulates what the terms from each one on can reach. */
static void prepare(struct problem *p)
{
    qsort(p->t, (size_t)p->count, sizeof *p->t, by_coefficient_down);
    p->rest_min[p->count] = p->rest_max[p->count] = p->rest_gcd[p->count] = 0;
    for (int i = p->count - 1; i >= 0; i--) {
        p->rest_min[i] = p->rest_min[i + 1] + p->t[i].a * p->t[i].lo;
        p->rest_max[i] = p->rest_max[i + 1] + p->t[i].a * p->t[i].hi;
        p->rest_gcd[i] = gcd(p->t[i].a, p->rest_gcd[i + 1]);
    }
}

/* Whether each coefficient exceeds what all smaller terms can reach: then
 * a sum is zero only with every v_t zero. Views of one array are nested. */
static bool nested(const struct problem *p)
{
    for (int i = 0; i < p->count; i++)
        if (p->t[i].a <= p->rest_max[i + 1] - p->rest_min[i + 1])
            return false;
    return true;
}

/* Whether the terms from i on can sum to a value in [lo, hi]. */
static enum elu_overlap reach(struct problem *p, int i, int64_t lo, int64_t hi)
{
    if (hi < p->rest_min[i] || lo > p->rest_max[i])
        return ELU_OVERLAP_NONE;
    if (i == p->count)
        return ELU_OVERLAP_SOME; /* 0 is in [lo, hi] */
    const int64_t g = p->rest_gcd[i];
    if (floor_div(hi, g) < ceil_div(lo, g))
        return ELU_OVERLAP_NONE; /* no multiple of the gcd in range */
    const struct term *t = &p->t[i];
    int64_t first = ceil_div(lo - p->rest_max[i + 1], t->a);
    int64_t last = floor_div(hi - p->rest_min[i + 1], t->a);
    first = first > t->lo ? first : t->lo;
    last = last < t->hi ? last : t->hi;
    enum elu_overlap found = ELU_OVERLAP_NONE;
    for (int64_t v = first; v <= last && found != ELU_OVERLAP_SOME; v++) {
        if (++p->work > WORK_MAX)
            return ELU_OVERLAP_UNKNOWN;
        const enum elu_overlap r = reach(p, i + 1, lo - t->a * v, hi - t->a * v);
        found = r == ELU_OVERLAP_NONE ? found : r;
    }
    return found;
}

/* Two different index vectors i != j give the same element exactly when
 * sum((i_d - j_d) * stride_d) == 0. By symmetry the first nonzero
 * difference, in the terms' order, may be taken positive: one search per
 * choice of that first term. */
enum elu_overlap elu_layout_self_overlap(const struct elu_layout *l, int k)
{
    struct problem p = {.count = 0};
    for (int d = 0; d < l->ndim; d++) {
        if (l->shape[d] == 1)
            continue;
        const int64_t a = l->stride[k][d] < 0 ? -l->stride[k][d] : l->stride[k][d];
        for (int i = 0; i < p.count; i++)
            if (p.t[i].a == a)
                return ELU_OVERLAP_SOME; /* one step along each cancels */
        if (a == 0)
            return ELU_OVERLAP_SOME; /* a broadcast */
        p.t[p.count++] = (struct term){a, 1 - l->shape[d], l->shape[d] - 1};
    }
    prepare(&p);
    if (nested(&p))
        return ELU_OVERLAP_NONE;
    enum elu_overlap found = ELU_OVERLAP_NONE;
    for (int first = 0; first < p.count && found != ELU_OVERLAP_SOME; first++) {
        struct problem q = p; /* the work done so far too: one budget a call */
        q.t[first].lo = 1;
        for (int i = 0; i < first; i++)
            q.t[i].lo = q.t[i].hi = 0;
        prepare(&q);
        const enum elu_overlap r = reach(&q, 0, 0, 0);
        found = r == ELU_OVERLAP_NONE ? found : r;
        p.work = q.work;
    }
    return found;
}

static bool same_view(const struct elu_layout *l, int k, const void *p, int j,
                      const void *q)
{
    bool same = p == q;
    for (int d = 0; d < l->ndim; d++)
        same = same && (l->shape[d] == 1 || l->stride[k][d] == l->stride[j][d]);
    return same;
}

/* An element of k at p + s * sum(i_d * sk_d) and one of j at
 * q + s * sum(j_d * sj_d) share a byte when their addresses differ by less
 * than s. */
enum elu_overlap elu_layout_overlap(const struct elu_layout *l, int k, const void *p,
                                    int j, const void *q, size_t size)
{
    int64_t k_lo, k_hi, j_lo, j_hi;
    elu_layout_span(l, k, size, &k_lo, &k_hi);
    elu_layout_span(l, j, size, &j_lo, &j_hi);
    const uintptr_t x = (uintptr_t)p, y = (uintptr_t)q;
    if (x + (uintptr_t)k_hi <= y + (uintptr_t)j_lo || y + (uintptr_t)j_hi <= x + (uintptr_t)k_lo)
        return ELU_OVERLAP_NONE; /* apart as wholes */
    if (same_view(l, k, p, j, q))
        return ELU_OVERLAP_NONE;
    /* Both bounding boxes overlap, so the bases are within 2 spans. */
    const int64_t distance = (int64_t)(y - x), s = (int64_t)size;
    struct problem prob = {.count = 0};
    for (int d = 0; d < l->ndim; d++) {
        if (l->shape[d] == 1)
            continue; /* a stride elu_layout_span() did not bound */
        add_term(&prob, l->stride[k][d] * s, l->shape[d]);
        add_term(&prob, -l->stride[j][d] * s, l->shape[d]);
    }
    prepare(&prob);
    return reach(&prob, 0, distance - s + 1, distance + s - 1);
}
