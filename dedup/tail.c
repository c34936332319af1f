/*
 * dedup/tail.c: a run of the in-memory tail (design in dedup_int.h).
 *
 * The run keeps the journal records of its commits back to back, exactly
 * as they are in the journal, and an open-addressing hash index (linear
 * probing, load <= 1/2) from (kind, 16-byte key) to the newest entry, for
 * the seen and lww lookups.  Audit index entries are only carried along
 * for the indexer.  Memory is reserved before the commit's RocksDB write,
 * so appending after a successful write cannot fail.
 */
#include "dedup_int.h"

#include <stdlib.h>
#include <string.h>

static uint64_t key_hash(int kind, const uint8_t key[16]) {
        uint64_t u;
        memcpy(&u, key, 8);
        return u ^ ((uint64_t)kind * UINT64_C(0x9E3779B97F4A7C15));
}

int dedup_run_init(struct dedup_run *r, size_t cap) {
        memset(r, 0, sizeof(*r));
        r->cap    = cap ? cap : 4096;
        r->nslots = 1024;
        r->buf    = malloc(r->cap);
        r->slots  = calloc(r->nslots, sizeof(*r->slots));
        if (!r->buf || !r->slots) {
                dedup_run_free(r);
                return -1;
        }
        return 0;
}

void dedup_run_free(struct dedup_run *r) {
        if (!r)
                return;
        free(r->buf);
        free(r->slots);
        memset(r, 0, sizeof(*r));
}

void dedup_run_reset(struct dedup_run *r) {
        memset(r->slots, 0, r->nslots * sizeof(*r->slots));
        r->len = r->nidx = 0;
        r->seq_lo = r->seq_hi = 0;
}

static void index_put(uint32_t *slots, size_t nslots, const uint8_t *buf,
                      uint32_t off1) {
        const uint8_t *e    = buf + off1 - 1;
        int            kind = e[0];
        const uint8_t *key  = e + DEDUP_ENTRY_HDR;
        size_t         mask = nslots - 1;

        for (size_t i = key_hash(kind, key) & mask;; i = (i + 1) & mask) {
                if (!slots[i]) {
                        slots[i] = off1;
                        return;
                }
                const uint8_t *o = buf + slots[i] - 1;
                if (o[0] == kind && !memcmp(o + DEDUP_ENTRY_HDR, key, 16)) {
                        slots[i] = off1; /* newer entry of the same key */
                        return;
                }
        }
}

int dedup_run_reserve(struct dedup_run *r, size_t len, size_t nkeys) {
        if (r->cap - r->len < len) {
                size_t cap = r->cap;
                while (cap - r->len < len)
                        cap *= 2;
                if (cap > UINT32_MAX - 1)
                        return -1; /* offsets are 32-bit */
                uint8_t *p = realloc(r->buf, cap);
                if (!p)
                        return -1;
                r->buf = p;
                r->cap = cap;
        }
        if ((r->nidx + nkeys) * 2 > r->nslots) {
                size_t n = r->nslots;
                while ((r->nidx + nkeys) * 2 > n)
                        n *= 2;
                uint32_t *s = calloc(n, sizeof(*s));
                if (!s)
                        return -1;
                for (size_t i = 0; i < r->nslots; i++)
                        if (r->slots[i])
                                index_put(s, n, r->buf, r->slots[i]);
                free(r->slots);
                r->slots  = s;
                r->nslots = n;
        }
        return 0;
}

int dedup_run_append(struct dedup_run *r, const uint8_t *p, size_t len,
                     uint64_t seq) {
        const uint8_t     *q = p, *end = p + len;
        struct dedup_entry e;
        size_t             nkeys = 0;

        /* Validate the whole record first: all or nothing. */
        while (q < end) {
                if (!(q = dedup_entry_next(q, end, &e)))
                        return -1;
                if (e.kind == DK_SEEN || e.kind == DK_LWW)
                        nkeys++;
        }
        if (dedup_run_reserve(r, len, nkeys))
                return -1;
        memcpy(r->buf + r->len, p, len);
        for (q = r->buf + r->len, end = q + len; q < end;) {
                const uint8_t *next = dedup_entry_next(q, end, &e);
                if (e.kind == DK_SEEN || e.kind == DK_LWW) {
                        index_put(r->slots, r->nslots, r->buf,
                                  (uint32_t)(q - r->buf) + 1);
                        r->nidx++; /* an upper bound: keys may repeat */
                }
                q = next;
        }
        r->len += len;
        if (seq) {
                if (!r->seq_lo)
                        r->seq_lo = seq;
                r->seq_hi = seq;
        }
        return 0;
}

const uint8_t *dedup_run_get(const struct dedup_run *r, int kind,
                             const uint8_t key[16], size_t *vlen) {
        size_t mask = r->nslots - 1;

        for (size_t i = key_hash(kind, key) & mask;; i = (i + 1) & mask) {
                if (!r->slots[i])
                        return NULL;
                const uint8_t *o = r->buf + r->slots[i] - 1;
                if (o[0] == kind && !memcmp(o + DEDUP_ENTRY_HDR, key, 16)) {
                        *vlen = dedup_get_be16(o + 2);
                        return o + DEDUP_ENTRY_HDR + 16;
                }
        }
}
