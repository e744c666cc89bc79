/* elu-ptx-gen, run at build time: the PTX of the generic module's quick
 * forward parts, which serve a dtype's first calls, for src/builtin_ptx.c
 * to build into libelu. With it, a cold first call waits for the driver
 * to compile that PTX for its GPU, and NVRTC is not loaded for it
 * (docs/DESIGN.md, Compiling).
 *
 * usage: elu-ptx-gen [--required] OUTDIR
 * writes OUTDIR/quick_<dtype>_forward[_unit].ptx, one per quick forward
 * part, compiled by the NVRTC that libelu itself would load
 * (ELU_NVRTC_LIBRARY, else its usual names) for the oldest arch that
 * NVRTC takes among 75, 80, 90. Where NVRTC is missing, the files are
 * empty and libelu compiles those parts at run time as it does any other
 * module; --required makes that an error instead, as a failing compile
 * always is. */
#include "jit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name; /* builtin_ptx.c's names for them */
    elu_dtype dtype;
    enum elu_part part;
} PARTS[] = {
    {"quick_f32_forward", ELU_F32, ELU_PART_FORWARD},
    {"quick_f32_forward_unit", ELU_F32, ELU_PART_FORWARD_UNIT_NIP},
    {"quick_f64_forward", ELU_F64, ELU_PART_FORWARD},
    {"quick_f64_forward_unit", ELU_F64, ELU_PART_FORWARD_UNIT_NIP},
    {"quick_f16_forward", ELU_F16, ELU_PART_FORWARD},
    {"quick_bf16_forward", ELU_BF16, ELU_PART_FORWARD},
};
enum { PART_COUNT = sizeof PARTS / sizeof *PARTS };

static bool write_file(const char *dir, const char *name, const void *data, size_t size)
{
    char path[ELU_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.ptx", dir, name);
    FILE *f = fopen(path, "wb");
    const bool ok = f && fwrite(data, 1, size, f) == size;
    if (f && fclose(f) != 0)
        return false;
    if (!ok)
        fprintf(stderr, "elu-ptx-gen: cannot write %s\n", path);
    return ok;
}

/* The oldest arch among those libelu's kernels tell apart that this NVRTC
 * makes PTX for: the PTX then serves every GPU from it on. */
static bool oldest_target(elu_ctx *ctx, struct elu_target *t)
{
    static const int archs[] = {75, 80, 90};
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        if (elu_jit_target(ctx, archs[i], ELU_BINARY_PTX, t) == ELU_OK)
            return true;
    return false;
}

/* Every part's file empty: libelu then compiles those parts at run time. */
static int write_none(const char *dir)
{
    bool ok = true;
    for (int i = 0; i < PART_COUNT; i++)
        ok = write_file(dir, PARTS[i].name, "", 0) && ok;
    return ok ? 0 : 1;
}

/* Each part's PTX into dir: false where NVRTC cannot make one (the
 * failure noted in ctx) or a file cannot be written. */
static bool write_parts(elu_ctx *ctx, const struct elu_target *t, const char *dir)
{
    bool ok = true;
    for (int i = 0; i < PART_COUNT && ok; i++) {
        const struct elu_spec spec = {{PARTS[i].dtype, 0, 0, 0}, true, PARTS[i].part};
        struct elu_binary bin;
        if (elu_jit_obtain(ctx, &spec, t, &bin) != ELU_OK)
            return false;
        ok = write_file(dir, PARTS[i].name, bin.data, strlen(bin.data)); /* PTX is text */
        free(bin.data);
    }
    return ok;
}

int main(int argc, char **argv)
{
    const bool required = argc == 3 && strcmp(argv[1], "--required") == 0;
    if (argc != 2 && !required) {
        fprintf(stderr, "usage: elu-ptx-gen [--required] OUTDIR\n");
        return 2;
    }
    const char *dir = argv[argc - 1];
    /* A bare context: no disk cache, no device; jit.c needs its error slot. */
    elu_ctx ctx = {.id = elu_new_ctx_id(), .backend = ELU_BACKEND_CPU, .device = -1};
    struct elu_target t;
    if (!oldest_target(&ctx, &t)) {
        fprintf(stderr, "elu-ptx-gen: no PTX built in: %s\n", elu_ctx_last_error(&ctx));
        return required ? 1 : write_none(dir);
    }
    /* NVRTC at hand that fails to compile the kernels: a fault of theirs,
     * which a build must not hide. */
    if (!write_parts(&ctx, &t, dir)) {
        fprintf(stderr, "elu-ptx-gen: %s\n", elu_ctx_last_error(&ctx));
        return 1;
    }
    return 0;
}
