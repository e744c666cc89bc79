/* libFuzzer over what the disk cache reads from files anyone might have
 * touched: the entry parser, with and without an expected key, and the key
 * and path code. Built with -Dfuzz=true by clang (see .ci/run). */
#include "cache.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct elu_cache_entry e;
    struct elu_cache_key key = elu_cache_key_of((const char *)data, size);
    /* The key an entry claims, when the data is long enough to claim one. */
    if (size >= 32)
        memcpy(key.bytes, data + 16, sizeof key.bytes);
    const char *bad[2] = {elu_cache_parse(data, size, NULL, &e),
                          elu_cache_parse(data, size, &key, &e)};
    volatile uint8_t sink = 0;
    if (!bad[0]) { /* everything it points at must be inside the data */
        for (size_t i = 0; i < e.description_len; i++)
            sink ^= (uint8_t)e.description[i];
        for (size_t i = 0; i < e.size; i++)
            sink ^= ((const uint8_t *)e.payload)[i];
    }
    struct elu_cache c = {0};
    memcpy(c.dir, data, size < sizeof c.dir - 1 ? size : sizeof c.dir - 1);
    char path[4200];
    elu_cache_path(&c, &key, ".bin", path, sizeof path);
    (void)sink;
    return 0;
}
