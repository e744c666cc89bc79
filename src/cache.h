/* The on-disk cache of compiled kernels: one file per key, named by the key's
 * hex digits, holding a header that echoes the key and checks the payload.
 *
 * Entry layout (native byte order; the cache belongs to one machine):
 *   magic "ELUCACHE" | u32 format | u32 kind | u8 key[16] | u64 size |
 *   u64 XXH3-64 of payload | payload
 * Anything that does not verify is a miss: it is removed and rebuilt. */
#ifndef ELU_CACHE_H
#define ELU_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ELU_CACHE_FORMAT 1
#define ELU_CACHE_HEADER_SIZE 48
#define ELU_CACHE_MAX_PAYLOAD (64u << 20)

enum elu_binary_kind { ELU_BINARY_CUBIN = 1, ELU_BINARY_PTX = 2 };

struct elu_cache_key {
    uint8_t bytes[16];
};

/* The XXH3-128 of everything that changes the binary, given as one text. */
struct elu_cache_key elu_cache_key_of(const char *text, size_t len);

/* Resolve the cache directory: `requested` if not NULL, else $ELU_CACHE_DIR,
 * else $XDG_CACHE_HOME/elu, else $HOME/.cache/elu; and create it (mode 0700)
 * with any missing parents. Returns false with *why set when there is no
 * usable directory. */
bool elu_cache_open_dir(const char *requested, char *dir, size_t dir_size,
                        char *why, size_t why_size);

/* The entry's path: DIR/<32 hex digits>.bin */
void elu_cache_entry_path(const char *dir, const struct elu_cache_key *key,
                          char *path, size_t size);

enum elu_cache_result { ELU_CACHE_HIT, ELU_CACHE_MISS, ELU_CACHE_REJECTED };

/* Read and verify the entry for key. On a hit, *payload (malloc'd, NUL
 * appended so PTX is a C string) and *size and *kind are set. An entry that
 * fails verification is deleted and reported as REJECTED, *why saying why. */
enum elu_cache_result elu_cache_get(const char *dir,
                                    const struct elu_cache_key *key,
                                    enum elu_binary_kind *kind, void **payload,
                                    size_t *size, char *why, size_t why_size);

/* Store atomically: a private temp file in dir, fsync, rename over the
 * entry. Returns false with *why set on any failure; nothing partial is
 * left behind. */
bool elu_cache_put(const char *dir, const struct elu_cache_key *key,
                   enum elu_binary_kind kind, const void *payload, size_t size,
                   char *why, size_t why_size);

#endif
