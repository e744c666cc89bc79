/* The on-disk cache of compiled kernels: one file per key, named by the key's
 * hex digits, holding a header that echoes the key and checks the contents.
 *
 * Entry layout (native byte order; the cache belongs to one machine):
 *   magic "ELUCACHE" | u32 format | u32 kind | u8 key[16] | u64 size |
 *   u64 XXH3-64 of description and payload | u32 description length |
 *   u32 zero | description (text, for people) | payload
 * Anything that does not verify is a miss: it is removed and rebuilt.
 * Entries are not synced to disk (see elu_cache_put in cache.c): an entry
 * that a crash left empty or partly written fails verification like any
 * other.
 *
 * A cubin is code we run, so the cache trusts only what the user owns: a
 * directory of theirs that others cannot write (or, with ELU_CACHE_SHARED=1,
 * a setgid group directory), and entry files that are regular, unlinked
 * elsewhere, theirs (or their group's) and not writable by others. */
#ifndef ELU_CACHE_H
#define ELU_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define ELU_CACHE_FORMAT 4 /* 4: the half types' forward tables are entries of their own */
#define ELU_CACHE_HEADER_SIZE 56
#define ELU_CACHE_MAX_PAYLOAD (64u << 20)
#define ELU_CACHE_MAX_DESCRIPTION 1024
/* A temp file this old is a killed writer's (a write takes milliseconds). */
#define ELU_CACHE_STALE_TEMP_SECONDS 600

/* What an entry holds: code, or ELU_AUTOTUNE's launch shapes (tune.c). */
enum elu_binary_kind {
    ELU_BINARY_CUBIN = 1,
    ELU_BINARY_PTX = 2,
    ELU_BINARY_TUNING = 3, /* tune.c */
    ELU_BINARY_TABLE = 4,  /* half_table.c */
};

struct elu_cache_key {
    uint8_t bytes[16];
};

/* An opened cache directory and its policy. */
struct elu_cache {
    char dir[4096];
    bool shared;        /* ELU_CACHE_SHARED: a group's setgid directory */
    uint64_t max_bytes; /* ELU_CACHE_MAX_BYTES, else the default */
    /* ELU_CACHE_LOCK_TIMEOUT_MS, else the default; at most the maximum */
    uint64_t lock_timeout_ms;
};

/* The XXH3-128 of everything that changes the binary, given as one text. */
struct elu_cache_key elu_cache_key_of(const char *text, size_t len);

/* Read the cache's variables (env.h; invalid values leave the defaults)
 * and resolve the directory: `requested` if not NULL, else $ELU_CACHE_DIR,
 * else $XDG_CACHE_HOME/elu, else $HOME/.cache/elu (the last two only when
 * absolute); create it (0700, or 02770 when shared) with any missing
 * parents, and check that it can be trusted. Returns false with *why set
 * when there is no usable directory. */
bool elu_cache_open(struct elu_cache *c, const char *requested, char *why,
                    size_t why_size);

/* As elu_cache_open, but for a directory that must exist already: nothing
 * is created, and *missing says whether that is why it failed. */
bool elu_cache_open_existing(struct elu_cache *c, const char *requested, bool *missing,
                             char *why, size_t why_size);

/* DIR/<32 hex digits><suffix>, e.g. ".bin" for the entry, ".lock". */
void elu_cache_path(const struct elu_cache *c, const struct elu_cache_key *key,
                    const char *suffix, char *path, size_t size);

/* A parsed entry, pointing into the bytes it was parsed from. */
struct elu_cache_entry {
    enum elu_binary_kind kind;
    struct elu_cache_key key;
    const char *description; /* not NUL-terminated */
    size_t description_len;
    const void *payload;
    size_t size;
};

/* Parse and verify an entry's bytes (for `key`, unless NULL). Returns NULL
 * on success, else what is wrong. Pure: touches nothing but its arguments. */
const char *elu_cache_parse(const void *data, size_t len,
                            const struct elu_cache_key *key,
                            struct elu_cache_entry *out);

enum elu_cache_result {
    ELU_CACHE_HIT,
    ELU_CACHE_MISS,       /* no entry */
    ELU_CACHE_REJECTED,   /* an entry that fails the trust checks or verification */
    ELU_CACHE_UNREADABLE  /* a failure that says nothing of the entry */
};

/* An entry file as read: its bytes (malloc'd, or NULL), and what it was
 * found as (zero if unknown), so that a file found bad is removed only
 * while it is still the one at its path. */
struct elu_cache_file {
    char *data;
    size_t len;
    struct stat st;
};

/* Read the entry file at path, after checking that it may be trusted, and
 * verify it (for `key`, unless NULL): HIT with *e pointing into f->data,
 * else the result as for elu_cache_get, *why saying why. Changes nothing
 * on disk; f->data is to be freed either way. */
enum elu_cache_result elu_cache_load(const struct elu_cache *c, const char *path,
                                     const struct elu_cache_key *key,
                                     struct elu_cache_file *f, struct elu_cache_entry *e,
                                     char *why, size_t why_size);

/* Remove what was found at path as *found (lstat or fstat): a file, a
 * symbolic link (never what it points to) or an empty directory, unless
 * another has replaced it since (a writer renames a good entry over a bad
 * one). True once it is no longer at path; else false with *why set. */
bool elu_cache_remove(const char *path, const struct stat *found, char *why,
                      size_t why_size);

/* Read and verify the entry for key. On a hit, *payload (malloc'd, NUL
 * appended so PTX is a C string), *size and *kind are set, and the entry's
 * last-use stamp (its mtime) is renewed. An entry that fails the trust
 * checks, or whose bytes were read and fail verification, is removed
 * (elu_cache_remove) and reported as REJECTED; one that could not be read
 * (no descriptor or memory left, no permission, an I/O error) stays,
 * reported as UNREADABLE. *why says which and why. */
enum elu_cache_result elu_cache_get(const struct elu_cache *c,
                                    const struct elu_cache_key *key,
                                    enum elu_binary_kind *kind, void **payload,
                                    size_t *size, char *why, size_t why_size);

/* Store atomically: a private temp file in the directory, renamed over the
 * entry (not synced to disk: see cache.c); then elu_cache_evict (never
 * this entry, never a temp file being written). Returns false with *why
 * set on any failure; nothing partial is left behind. *evicted gets how
 * many entries were removed. */
bool elu_cache_put(const struct elu_cache *c, const struct elu_cache_key *key,
                   enum elu_binary_kind kind, const char *description,
                   const void *payload, size_t size, unsigned *evicted,
                   char *why, size_t why_size);

/* Remove the temp files of writers killed before their rename (older than
 * ELU_CACHE_STALE_TEMP_SECONDS), then evict least recently used entries
 * until the entries total at most max_bytes, sparing `keep` (may be NULL).
 * Returns how many entries were removed. */
unsigned elu_cache_evict(const struct elu_cache *c, uint64_t max_bytes,
                         const struct elu_cache_key *keep);
/* As elu_cache_evict, but for the temp files (elu-cache's trim sweeps
 * those itself, counting them), *evicted getting the count, and saying
 * what it could not do: false, with *why set, when the directory cannot be
 * read or an entry cannot be removed (the others are still tried). */
bool elu_cache_evict_checked(const struct elu_cache *c, uint64_t max_bytes,
                             const struct elu_cache_key *keep, unsigned *evicted,
                             char *why, size_t why_size);

/* Take the key's advisory lock (flock on DIR/<hex>.lock), waiting up to
 * c->lock_timeout_ms (0: not at all), so that processes starting together
 * compile a kernel once. Returns the lock's fd, or -1 with *why set where
 * locking is impossible or timed out (callers then go on without it). */
int elu_cache_lock(const struct elu_cache *c, const struct elu_cache_key *key,
                   char *why, size_t why_size);
void elu_cache_unlock(int fd);

#endif
