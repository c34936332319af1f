/*
 * dedup/bloom.c: the time-sliced blocked Bloom filter in front of the
 * seen ids (design in dedup_int.h).
 *
 * Each slot is an array of 64-byte blocks; an id picks one block index
 * from the first 32 bits of its key (the key is already an XXH3 hash) and
 * sets one bit in each of the block's eight 64-bit words from bits of the
 * second half.  At 16 bits per id the false positive rate of one slot is
 * about 0.2%.
 *
 * The slots are interleaved: block b of slot s is line b * nslots + s, so
 * a probe of all the live slots reads adjacent cache lines (one page)
 * instead of random ones; a batch probe prefetches a few keys ahead so
 * that the misses overlap.  Emptying a slot clears every nslots-th line
 * (rare: once per slice).
 *
 * A probe answers which slots may hold the key: a slot is an epoch of the
 * seen column family's keys (dedup_int.h), so a lookup reads one key.
 *
 * Memory is one anonymous mapping of the configured size, transparent huge
 * pages requested (fewer TLB misses on random probes).
 *
 * Exact mode (unify.filter: exact) trades memory for reads.  Behind the
 * Bloom filter (a tenth of the memory), each slot also has an
 * open-addressing table of the 16-byte keys themselves (linear probing,
 * filled to at most 70%: with 8 slots for 7 epochs, ~26 bytes per id in
 * the window, ~29 with the Bloom part).  A slot the Bloom filter says
 * "maybe" for is then looked up in its table, so a probe knows which slot
 * holds a key, not just which may, at one table lookup per duplicate.  A
 * key is as exact as the seen family's own (the same XXH3-128 hash).  A
 * slot whose table is full stops taking keys and answers "maybe" for
 * every key it does not hold, as the Bloom filter alone would; the
 * all-zero key (the empty entry) is a flag of its own.
 */
#include "dedup_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define BLOCK_BYTES 64
#define PREFETCH 6

#define EXACT_ENTRY 16
#define EXACT_FILL_PCT 70

struct dedup_filter {
        uint8_t *mem;  /* the Bloom slots, then the exact tables */
        uint8_t *xmem; /* the exact tables (exact mode), else NULL */
        size_t   mem_bytes;
        uint32_t nblocks; /* per slot (Bloom) */
        int      nslots;
        bool     exact;
        uint64_t cap; /* entries per slot (exact) */
        int64_t  window_ms, slice_ms;
        int64_t  tag[FILTER_SLOTS_MAX]; /* epoch held, -1: empty */
        uint64_t count[FILTER_SLOTS_MAX]; /* ids added */
        uint64_t used[FILTER_SLOTS_MAX];  /* entries taken (exact) */
        bool     full[FILTER_SLOTS_MAX];  /* stopped taking keys (exact) */
        bool     zero[FILTER_SLOTS_MAX];  /* holds the all-zero key */
};

int dedup_filter_slots(int64_t window_ms, int64_t slice_ms) {
        int64_t n = (window_ms + slice_ms - 1) / slice_ms + 1;
        return n > FILTER_SLOTS_MAX ? -1 : (int)n;
}

struct dedup_filter *dedup_filter_new(size_t bytes, int64_t window_ms,
                                      int64_t slice_ms, bool exact) {
        struct dedup_filter *f  = calloc(1, sizeof(*f));
        int                  ns = dedup_filter_slots(window_ms, slice_ms);
        size_t               nb;

        if (!f || ns < 0) {
                free(f);
                return NULL;
        }
        f->nslots = ns;
        f->exact  = exact;
        if (exact) {
                size_t xbytes = bytes - bytes / 10;
                f->cap        = xbytes / (size_t)ns / EXACT_ENTRY;
                if (f->cap < 4)
                        f->cap = 4;
                if (f->cap > UINT32_MAX)
                        f->cap = UINT32_MAX;
                bytes /= 10;
        }
        nb = bytes / (size_t)ns / BLOCK_BYTES;
        if (nb < 1)
                nb = 1;
        if (nb > UINT32_MAX)
                nb = UINT32_MAX;
        f->nblocks   = (uint32_t)nb;
        f->mem_bytes = nb * BLOCK_BYTES * (size_t)ns +
                       f->cap * EXACT_ENTRY * (size_t)ns;
        /* Populated now: its pages are part of the configured memory
         * anyway, and faulting them in (zeroing) on first touch cost the
         * unify thread about 5% of its time during the first window. */
        f->mem       = mmap(NULL, f->mem_bytes, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (f->mem == MAP_FAILED) {
                free(f);
                return NULL;
        }
#ifdef MADV_HUGEPAGE
        (void)madvise(f->mem, f->mem_bytes, MADV_HUGEPAGE);
#endif
        if (exact)
                f->xmem = f->mem + nb * BLOCK_BYTES * (size_t)ns;
        f->window_ms = window_ms;
        f->slice_ms  = slice_ms;
        for (int s = 0; s < FILTER_SLOTS_MAX; s++)
                f->tag[s] = -1;
        return f;
}

void dedup_filter_destroy(struct dedup_filter *f) {
        if (!f)
                return;
        munmap(f->mem, f->mem_bytes);
        free(f);
}

size_t dedup_filter_bytes(const struct dedup_filter *f) {
        return f->mem_bytes;
}

bool dedup_filter_is_exact(const struct dedup_filter *f) {
        return f->exact;
}

int64_t dedup_filter_slot_epoch(const struct dedup_filter *f, int slot) {
        return f->tag[slot];
}

static uint64_t load64(const uint8_t *p) {
        uint64_t u;
        memcpy(&u, p, 8);
        return u;
}

/* The line of 'key' in slot 0; slot s is 's' lines further. */
static uint64_t *group_of(const struct dedup_filter *f, const uint8_t key[16]) {
        uint32_t h  = (uint32_t)load64(key);
        uint64_t bi = ((uint64_t)h * f->nblocks) >> 32;
        return (uint64_t *)(void *)(f->mem + (size_t)bi * BLOCK_BYTES *
                                                 (size_t)f->nslots);
}

static uint64_t *block_of(const struct dedup_filter *f, int slot,
                          const uint8_t key[16]) {
        return group_of(f, key) + (size_t)slot * (BLOCK_BYTES / 8);
}

static void block_set(uint64_t *blk, const uint8_t key[16]) {
        uint64_t h = load64(key + 8);
        for (int w = 0; w < 8; w++, h >>= 6)
                blk[w] |= UINT64_C(1) << (h & 63);
}

static bool block_test(const uint64_t *blk, const uint8_t key[16]) {
        uint64_t h    = load64(key + 8);
        uint64_t miss = 0;
        for (int w = 0; w < 8; w++, h >>= 6)
                miss |= ~blk[w] & (UINT64_C(1) << (h & 63));
        return miss == 0;
}

/* ------------------------------ EXACT ------------------------------ */

static const uint8_t zero_key[16];

/* The first entry of 'key' in slot 's'. */
static uint8_t *exact_home(const struct dedup_filter *f, int s,
                           const uint8_t key[16]) {
        uint64_t i = ((uint64_t)(uint32_t)load64(key) * f->cap) >> 32;
        return f->xmem + ((size_t)s * f->cap + i) * EXACT_ENTRY;
}

/* The entry of 'key' in slot 's' if it holds it, else the empty entry
 * that ends its probe: the table is never full (EXACT_FILL_PCT).  Not for
 * the all-zero key (the empty entry itself). */
static uint8_t *exact_find(const struct dedup_filter *f, int s,
                           const uint8_t key[16]) {
        uint8_t *first = f->xmem + (size_t)s * f->cap * EXACT_ENTRY;
        uint8_t *end   = first + f->cap * EXACT_ENTRY;
        uint8_t *e     = exact_home(f, s, key);

        while (memcmp(e, key, 16) && memcmp(e, zero_key, 16))
                if ((e += EXACT_ENTRY) == end)
                        e = first;
        return e;
}

/* Whether slot 's' holds 'key'. */
static bool exact_has(const struct dedup_filter *f, int s,
                      const uint8_t key[16]) {
        if (!memcmp(key, zero_key, 16))
                return f->zero[s];
        return !memcmp(exact_find(f, s, key), key, 16);
}

static void exact_add(struct dedup_filter *f, int s, const uint8_t key[16]) {
        uint8_t *e;

        if (!memcmp(key, zero_key, 16)) {
                f->zero[s] = true;
                return;
        }
        if (f->full[s])
                return;
        e = exact_find(f, s, key);
        if (!memcmp(e, key, 16))
                return; /* again (a replayed journal record) */
        if ((f->used[s] + 1) * 100 > f->cap * EXACT_FILL_PCT) {
                f->full[s] = true; /* from now on: "maybe" for misses */
                aagw_log(AAGW_LOG_WARN, "DEDUP",
                         "exact filter: the slot of epoch %" PRId64
                         " is full at %" PRIu64
                         " ids; later ids of that epoch cost a RocksDB read "
                         "when looked up (unify.filter_mb is %zu MiB; size "
                         "it at ~29 bytes per id in the window)",
                         f->tag[s], f->used[s], f->mem_bytes >> 20);
                return;
        }
        memcpy(e, key, 16);
        f->used[s]++;
}

/* The slot that may take an id of time 't' at 'now', emptying a slot whose
 * ids have all expired; -1 if the id itself has expired.
 *
 * Why reuse is safe: slot s holds epoch e' = e - k * nslots; with t <= now
 * the epochs overlapping [now - window, now] are at most nslots
 * (nslots = ceil(window / slice) + 1), so e' is older than all of them.
 * 't' is never later than 'now' (the store clamps it), but a later one is
 * filed under 'now' to keep that proof true. */
static int slot_for(struct dedup_filter *f, int64_t t, int64_t now) {
        if (t > now)
                t = now;
        if (t < now - f->window_ms)
                return -1;
        int64_t e = dedup_epoch(t, f->slice_ms);
        int     s = (int)(e % f->nslots);
        if (f->tag[s] == e)
                return s;
        if (f->tag[s] > e)
                return -1; /* unreachable for a live t, see above */
        if (f->count[s] && f->exact)
                memset(f->xmem + (size_t)s * f->cap * EXACT_ENTRY, 0,
                       f->cap * EXACT_ENTRY);
        if (f->count[s])
                for (size_t b = 0; b < f->nblocks; b++)
                        memset(f->mem + (b * (size_t)f->nslots + (size_t)s) *
                                            BLOCK_BYTES,
                               0, BLOCK_BYTES);
        f->tag[s]   = e;
        f->count[s] = 0;
        f->used[s]  = 0;
        f->full[s]  = false;
        f->zero[s]  = false;
        return s;
}

void dedup_filter_add(struct dedup_filter *f, const uint8_t (*keys)[16],
                      const int64_t *times, size_t n, int64_t now) {
        for (size_t i = 0; i < n; i++) {
                if (i + PREFETCH < n) {
                        int ps = (int)(dedup_epoch(times[i + PREFETCH],
                                                   f->slice_ms) %
                                       f->nslots);
                        __builtin_prefetch(block_of(f, ps, keys[i + PREFETCH]),
                                           1);
                        if (f->exact)
                                __builtin_prefetch(
                                    exact_home(f, ps, keys[i + PREFETCH]), 1);
                }
                int s = slot_for(f, times[i], now);
                if (s < 0)
                        continue;
                block_set(block_of(f, s, keys[i]), keys[i]);
                if (f->exact)
                        exact_add(f, s, keys[i]);
                f->count[s]++;
        }
}

void dedup_filter_probe(const struct dedup_filter *f, const uint8_t (*keys)[16],
                        size_t n, int64_t now, uint64_t *slots,
                        uint64_t *sure) {
        int     live[FILTER_SLOTS_MAX], nlive = 0, lo_s = f->nslots, hi_s = 0;
        int64_t lo = dedup_epoch(now - f->window_ms, f->slice_ms);

        /* Newest slot first: a recent duplicate is found after one probe. */
        for (int64_t e = dedup_epoch(now, f->slice_ms);
             e >= lo && nlive < f->nslots; e--) {
                int s = (int)(e % f->nslots);
                if (f->tag[s] == e && f->count[s]) {
                        live[nlive++] = s;
                        lo_s          = s < lo_s ? s : lo_s;
                        hi_s          = s > hi_s ? s : hi_s;
                }
        }
        for (size_t i = 0; i < n; i++) {
                if (sure)
                        sure[i] = 0;
                if (i + PREFETCH < n && nlive) {
                        /* The live slots' lines are adjacent. */
                        const uint8_t *g =
                            (const uint8_t *)group_of(f, keys[i + PREFETCH]);
                        for (int j = lo_s; j <= hi_s; j++)
                                __builtin_prefetch(g + j * BLOCK_BYTES, 0);
                }
                const uint64_t *g = group_of(f, keys[i]);
                slots[i]          = 0;
                for (int j = 0; j < nlive; j++)
                        if (block_test(g + live[j] * (BLOCK_BYTES / 8),
                                       keys[i]))
                                slots[i] |= UINT64_C(1) << live[j];
        }
        if (!f->exact)
                return;
        /* The slots the Bloom filter said "maybe" for (a duplicate, or a
         * rare false positive): their tables know. */
        for (size_t i = 0; i < n; i++) {
                for (uint64_t b = slots[i]; b; b &= b - 1) {
                        int      s   = __builtin_ctzll(b);
                        uint64_t bit = UINT64_C(1) << s;
                        if (exact_has(f, s, keys[i]))
                                sure[i] |= bit;
                        else if (!f->full[s])
                                slots[i] &= ~bit;
                }
        }
}

uint64_t dedup_filter_ids(const struct dedup_filter *f, int64_t now) {
        uint64_t n  = 0;
        int64_t  lo = dedup_epoch(now - f->window_ms, f->slice_ms);
        for (int s = 0; s < f->nslots; s++)
                if (f->tag[s] >= lo)
                        n += f->count[s];
        return n;
}
