/* libelu's environment variables, read by one parser (src/env.c): the
 * spellings each kind accepts, the values it refuses and reports, and the
 * choice of CPU kernels; and the driver's and NVRTC's result codes as
 * messages print them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cpu_fast.h"
#include "cpu_isa.h"
#include "cuda_loader.h"
#include "env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const FLAGS[] = {"ELU_CACHE_DISABLE", "ELU_CACHE_SHARED", "ELU_DEBUG",
                                    "ELU_PREWARM", "ELU_AUTOTUNE", "ELU_NO_PDL"};
#define FLAG_COUNT (sizeof FLAGS / sizeof *FLAGS)

/* Whether elu_env_check reports `name`, and nothing else. */
static bool reported_alone(const char *name)
{
    char report[1024] = "";
    const bool any = elu_env_check(report, sizeof report);
    const char *hit = strstr(report, name);
    return any && hit == report && !strstr(report, "; ");
}

static bool nothing_reported(void)
{
    char report[1024] = "";
    return !elu_env_check(report, sizeof report) && report[0] == '\0';
}

static void test_flags_share_one_spelling(void **state)
{
    (void)state;
    static const char *const on[] = {"1", "true", "TRUE", "Yes", "on", "ON"};
    static const char *const off[] = {"0", "false", "False", "no", "NO", "off", ""};
    static const char *const invalid[] = {"2", "maybe", " 1", "1 ", "y", "enable", "-1"};
    for (size_t f = 0; f < FLAG_COUNT; f++) {
        const char *name = FLAGS[f];
        assert_false(elu_env_flag(name)); /* unset */
        for (size_t i = 0; i < sizeof on / sizeof *on; i++) {
            setenv(name, on[i], 1);
            assert_true(elu_env_flag(name));
            assert_true(nothing_reported());
        }
        for (size_t i = 0; i < sizeof off / sizeof *off; i++) {
            setenv(name, off[i], 1);
            assert_false(elu_env_flag(name));
            assert_true(nothing_reported());
        }
        for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) {
            setenv(name, invalid[i], 1);
            assert_false(elu_env_flag(name)); /* the default: off */
            if (!reported_alone(name))
                fail_msg("%s=\"%s\" not reported", name, invalid[i]);
        }
        unsetenv(name);
    }
}

struct number_case {
    const char *value;
    uint64_t expected;
    bool valid;
};

static void check_numbers(const char *name, const struct number_case *cases, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        setenv(name, cases[i].value, 1);
        if (elu_env_number(name) != cases[i].expected)
            fail_msg("%s=\"%s\" gave %llu", name, cases[i].value,
                     (unsigned long long)elu_env_number(name));
        if (cases[i].valid ? !nothing_reported() : !reported_alone(name))
            fail_msg("%s=\"%s\": wrong report", name, cases[i].value);
    }
    unsetenv(name);
}

static void test_numbers_whole_and_in_range(void **state)
{
    (void)state;
    const uint64_t cap = ELU_CACHE_DEFAULT_MAX_BYTES;
    const struct number_case max_bytes[] = {
        {"-1", cap, false},  {"99999999999999999999", cap, false},
        {"18446744073709551616", cap, false}, {"0", cap, false},
        {"abc", cap, false}, {"1e99", cap, false}, {" 5", cap, false},
        {"5 ", cap, false},  {"+5", cap, false}, {"0x10", cap, false},
        {"12MB", cap, false}, {"", cap, true}, {"1", 1, true}, {"000123", 123, true},
        {"18446744073709551615", UINT64_MAX, true},
    };
    check_numbers("ELU_CACHE_MAX_BYTES", max_bytes, sizeof max_bytes / sizeof *max_bytes);
    const uint64_t wait = ELU_CACHE_LOCK_TIMEOUT_MS;
    const struct number_case timeout[] = {
        {"-5", wait, false}, {"abc", wait, false}, {"1e99", wait, false},
        {"3600001", wait, false}, {"18446744073709551611", wait, false},
        {"0", 0, true}, {"250", 250, true}, {"3600000", 3600000, true},
    };
    check_numbers("ELU_CACHE_LOCK_TIMEOUT_MS", timeout, sizeof timeout / sizeof *timeout);
}

static void test_cpu_isa_words(void **state)
{
    (void)state;
    assert_null(elu_env_choice("ELU_CPU_ISA"));
    const char *const valid[][2] = {{"avx512", "avx512"}, {"AVX512", "avx512"},
                                    {"Avx2", "avx2"}, {"BASELINE", "baseline"}};
    for (size_t i = 0; i < sizeof valid / sizeof *valid; i++) {
        setenv("ELU_CPU_ISA", valid[i][0], 1);
        assert_string_equal(elu_env_choice("ELU_CPU_ISA"), valid[i][1]);
        assert_true(nothing_reported());
    }
    const char *const invalid[] = {"foo", " avx2", "avx2 ", "avx", "sse4", "scalar"};
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) {
        setenv("ELU_CPU_ISA", invalid[i], 1);
        assert_null(elu_env_choice("ELU_CPU_ISA"));
        assert_true(reported_alone("ELU_CPU_ISA"));
    }
    unsetenv("ELU_CPU_ISA");
}

/* Every invalid variable is reported, each once, with what holds instead. */
static void test_check_reports_each(void **state)
{
    (void)state;
    setenv("ELU_CACHE_MAX_BYTES", "-1", 1);
    setenv("ELU_CACHE_LOCK_TIMEOUT_MS", "1e99", 1);
    setenv("ELU_NO_PDL", "maybe", 1);
    setenv("ELU_CACHE_DIR", "any text at all", 1); /* paths are never invalid */
    char report[1024] = "earlier";
    assert_true(elu_env_check(report, sizeof report));
    assert_non_null(strstr(report, "earlier; ELU_CACHE_MAX_BYTES=\"-1\""));
    assert_non_null(strstr(report, "268435456 holds"));
    assert_non_null(strstr(report, "; ELU_CACHE_LOCK_TIMEOUT_MS=\"1e99\""));
    assert_non_null(strstr(report, "60000 holds"));
    assert_non_null(strstr(report, "; ELU_NO_PDL=\"maybe\""));
    assert_null(strstr(report, "ELU_CACHE_DIR"));
    char tiny[24] = "";
    assert_true(elu_env_check(tiny, sizeof tiny)); /* truncated, terminated */
    assert_int_equal(strlen(tiny), sizeof tiny - 1);
    unsetenv("ELU_CACHE_MAX_BYTES");
    unsetenv("ELU_CACHE_LOCK_TIMEOUT_MS");
    unsetenv("ELU_NO_PDL");
    unsetenv("ELU_CACHE_DIR");
    assert_true(nothing_reported());
}

static void test_text_empty_is_unset(void **state)
{
    (void)state;
    setenv("ELU_NVRTC_LIBRARY", "", 1);
    assert_null(elu_env_text("ELU_NVRTC_LIBRARY"));
    setenv("ELU_NVRTC_LIBRARY", "/opt/libnvrtc.so", 1);
    assert_string_equal(elu_env_text("ELU_NVRTC_LIBRARY"), "/opt/libnvrtc.so");
    unsetenv("ELU_NVRTC_LIBRARY");
    assert_null(elu_env_text("ELU_NVRTC_LIBRARY"));
}

/* The kernels chosen: the best the processor has, no better than asked. */
static void test_cpu_isa_choice(void **state)
{
    (void)state;
#if defined(__x86_64__)
    const struct elu_cpu_isa *avx512 = &elu_cpu_isa_avx512, *avx2 = &elu_cpu_isa_avx2;
    const bool both[] = {true, true}, avx2_only[] = {false, true}, none[] = {false, false};
    assert_ptr_equal(elu_cpu_choose_isa(NULL, both), avx512);
    assert_ptr_equal(elu_cpu_choose_isa(NULL, avx2_only), avx2);
    assert_null(elu_cpu_choose_isa(NULL, none));
    assert_ptr_equal(elu_cpu_choose_isa("avx512", avx2_only), avx2); /* lacked: the best */
    assert_null(elu_cpu_choose_isa("avx2", none));
    assert_ptr_equal(elu_cpu_choose_isa("avx2", both), avx2);
    assert_null(elu_cpu_choose_isa("baseline", both));
#else
    skip();
#endif
}

static elu_cu_result name_unknown(elu_cu_result r, const char **name)
{
    (void)r;
    *name = NULL;
    return ELU_CU_ERROR_INVALID_VALUE; /* as a driver does for a code it lacks */
}

static elu_cu_result name_known(elu_cu_result r, const char **name)
{
    *name = r == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_UNKNOWN";
    return 0;
}

static const char *nvrtc_null(int r)
{
    (void)r;
    return NULL;
}

static const char *nvrtc_named(int r) { return r == 6 ? "NVRTC_ERROR_COMPILATION" : "?"; }

/* Every code is printed with its number, named or not. */
static void test_result_texts_carry_the_number(void **state)
{
    (void)state;
    struct elu_cuda_api cu = {0};
    cu.GetErrorName = name_unknown;
    assert_non_null(strstr(elu_cu_result_text(&cu, 999).text, "999"));
    cu.GetErrorName = name_known;
    assert_string_equal(elu_cu_result_text(&cu, 2).text, "CUDA_ERROR_OUT_OF_MEMORY (2)");
    struct elu_nvrtc_api nv = {0};
    nv.GetErrorString = nvrtc_null;
    assert_string_equal(elu_nvrtc_result_text(&nv, 7).text, "nvrtcResult (7)");
    nv.GetErrorString = nvrtc_named;
    assert_string_equal(elu_nvrtc_result_text(&nv, 6).text, "NVRTC_ERROR_COMPILATION (6)");
}

int main(void)
{
    static const char *const all[] = {"ELU_CACHE_DIR", "ELU_CACHE_DISABLE", "ELU_CACHE_SHARED",
                                      "ELU_CACHE_MAX_BYTES", "ELU_CACHE_LOCK_TIMEOUT_MS",
                                      "ELU_DEBUG", "ELU_CPU_ISA", "ELU_PREWARM", "ELU_AUTOTUNE",
                                      "ELU_NO_PDL", "ELU_NVRTC_LIBRARY", "ELU_CUDA_LIBRARY"};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        unsetenv(all[i]); /* the tests set their own */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flags_share_one_spelling),
        cmocka_unit_test(test_numbers_whole_and_in_range),
        cmocka_unit_test(test_cpu_isa_words),
        cmocka_unit_test(test_check_reports_each),
        cmocka_unit_test(test_text_empty_is_unset),
        cmocka_unit_test(test_cpu_isa_choice),
        cmocka_unit_test(test_result_texts_carry_the_number),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
