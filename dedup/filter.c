/*
 * dedup/filter.c: the time-sliced blocked Bloom filter in front of the
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
 */
#include "dedup_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define BLOCK_BYTES 64
#define PREFETCH 6

struct dedup_filter {
        uint8_t *mem;
        size_t   mem_bytes;
        uint32_t nblocks; /* per slot */
        int      nslots;
        int64_t  window_ms, slice_ms;
        int64_t  tag[FILTER_SLOTS_MAX]; /* epoch held, -1: empty */
        uint64_t count[FILTER_SLOTS_MAX];
};

int dedup_filter_slots(int64_t window_ms, int64_t slice_ms) {
        int64_t n = (window_ms + slice_ms - 1) / slice_ms + 1;
        return n > FILTER_SLOTS_MAX ? -1 : (int)n;
}

struct dedup_filter *dedup_filter_new(size_t bytes, int64_t window_ms,
                                      int64_t slice_ms) {
        struct dedup_filter *f  = calloc(1, sizeof(*f));
        int                  ns = dedup_filter_slots(window_ms, slice_ms);
        size_t               nb;

        if (!f || ns < 0) {
                free(f);
                return NULL;
        }
        nb = bytes / (size_t)ns / BLOCK_BYTES;
        if (nb < 1)
                nb = 1;
        if (nb > UINT32_MAX)
                nb = UINT32_MAX;
        f->nslots    = ns;
        f->nblocks   = (uint32_t)nb;
        f->mem_bytes = nb * BLOCK_BYTES * (size_t)ns;
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
        if (f->count[s])
                for (size_t b = 0; b < f->nblocks; b++)
                        memset(f->mem + (b * (size_t)f->nslots + (size_t)s) *
                                            BLOCK_BYTES,
                               0, BLOCK_BYTES);
        f->tag[s]   = e;
        f->count[s] = 0;
        return s;
}

void dedup_filter_add(struct dedup_filter *f, const uint8_t (*keys)[16],
                      const int64_t *times, size_t n, int64_t now) {
        for (size_t i = 0; i < n; i++) {
                if (i + PREFETCH < n)
                        __builtin_prefetch(
                            block_of(f,
                                     (int)(dedup_epoch(times[i + PREFETCH],
                                                       f->slice_ms) %
                                           f->nslots),
                                     keys[i + PREFETCH]),
                            1);
                int s = slot_for(f, times[i], now);
                if (s < 0)
                        continue;
                block_set(block_of(f, s, keys[i]), keys[i]);
                f->count[s]++;
        }
}

void dedup_filter_probe(const struct dedup_filter *f, const uint8_t (*keys)[16],
                        size_t n, int64_t now, uint64_t *slots) {
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
}

uint64_t dedup_filter_ids(const struct dedup_filter *f, int64_t now) {
        uint64_t n  = 0;
        int64_t  lo = dedup_epoch(now - f->window_ms, f->slice_ms);
        for (int s = 0; s < f->nslots; s++)
                if (f->tag[s] >= lo)
                        n += f->count[s];
        return n;
}
