/*
 * dedup/decider.c: the unify stage's decisions and the state behind them
 * (the contract is policy/aagw_unify_contract.h; this implementation's
 * side of it is in aagw_dedup.h, "THE DECIDER").
 *
 * Exactly once into the unified topic, without broker transactions
 * (docs/architecture.md, "Exactly once into the unified topic"):
 *
 *  - Records are decided in epochs (one consumed batch each).  The
 *    decisions of an epoch (seen ids, new winners, audit entries), the
 *    input positions reached and the output offsets acknowledged go to the
 *    store in ONE WriteBatch, once every record of the epoch and of every
 *    earlier epoch is acknowledged by the output.  Until then the epoch's
 *    ids and winners live in an in-memory pending map that later records
 *    are checked against first.
 *  - On start, the Kafka side reads each output partition from the stored
 *    output position to its end.  What it finds there was delivered by a
 *    previous run whose epoch never committed: its id (or version) is
 *    folded into the store, with its audit entry, and its input
 *    coordinates are remembered so that re-reading that input record is
 *    recognised as a replay rather than a duplicate.
 *
 * No Kafka here: the Kafka side is replicator/unify.c.
 */
#include "aagw_dedup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EPOCHS     AAGW_DECIDER_EPOCHS
#define REPLAY_MAX (1 << 20) /* input coordinates found at start */
#define FOLD_BATCH 65536     /* entries folded before a commit */

/* ------------------------------------------------------------ KEY MAP --- */

/* Open addressing over 16-byte hashes (already uniform: XXH3-128), linear
 * probing, backward-shift deletion.  Value: the epoch that set it and an
 * optional owned pointer (an lww winner). */
struct kent {
        uint8_t  key[16];
        uint64_t epoch; /* 0: empty slot */
        void    *val;
};

struct kmap {
        struct kent *e;
        size_t       cap, cnt; /* cap: power of two */
};

static size_t kmap_home(const struct kmap *m, const uint8_t *k) {
        uint64_t h;
        memcpy(&h, k, 8);
        return (size_t)h & (m->cap - 1);
}

static struct kent *kmap_find(struct kmap *m, const uint8_t *k) {
        if (!m->cnt)
                return NULL;
        for (size_t i = kmap_home(m, k);; i = (i + 1) & (m->cap - 1)) {
                if (!m->e[i].epoch)
                        return NULL;
                if (!memcmp(m->e[i].key, k, 16))
                        return &m->e[i];
        }
}

/* Bring the home slot of 'k' towards the cache: a map of pending keys
 * is larger than L2 and every key lands somewhere random in it, so each
 * probe would otherwise wait for memory.  Issued a while before the
 * probe (see aagw_decider_decide() and commit()). */
static void kmap_prefetch(const struct kmap *m, const uint8_t *k) {
        if (m->cap)
                __builtin_prefetch(&m->e[kmap_home(m, k)]);
}

static int kmap_grow(struct kmap *m) {
        size_t       ncap = m->cap ? m->cap * 2 : 4096;
        struct kent *ne   = calloc(ncap, sizeof(*ne));
        if (!ne)
                return -1;
        struct kmap nm = {ne, ncap, 0};
        for (size_t i = 0; i < m->cap; i++) {
                if (!m->e[i].epoch)
                        continue;
                size_t j = kmap_home(&nm, m->e[i].key);
                while (ne[j].epoch)
                        j = (j + 1) & (ncap - 1);
                ne[j] = m->e[i];
                nm.cnt++;
        }
        free(m->e);
        *m = nm;
        return 0;
}

/* Insert or find: returns the entry for 'k' (epoch 0 if new). */
static struct kent *kmap_put(struct kmap *m, const uint8_t *k) {
        if ((m->cnt + 1) * 2 > m->cap && kmap_grow(m))
                return NULL;
        size_t i = kmap_home(m, k);
        for (; m->e[i].epoch; i = (i + 1) & (m->cap - 1))
                if (!memcmp(m->e[i].key, k, 16))
                        return &m->e[i];
        memcpy(m->e[i].key, k, 16);
        m->e[i].val = NULL;
        m->cnt++;
        return &m->e[i];
}

static void kmap_del(struct kmap *m, struct kent *ent) {
        size_t i = (size_t)(ent - m->e);
        free(m->e[i].val);
        m->e[i].epoch = 0;
        m->e[i].val   = NULL;
        m->cnt--;
        /* Backward shift: pull later members of the probe run into the
         * hole when their home is not between the hole and them. */
        for (size_t j = (i + 1) & (m->cap - 1); m->e[j].epoch;
             j = (j + 1) & (m->cap - 1)) {
                size_t h = kmap_home(m, m->e[j].key);
                bool   move = i <= j ? (h <= i || h > j) : (h <= i && h > j);
                if (move) {
                        m->e[i]       = m->e[j];
                        m->e[j].epoch = 0;
                        m->e[j].val   = NULL;
                        i             = j;
                }
        }
}

static void kmap_free(struct kmap *m) {
        for (size_t i = 0; i < m->cap; i++)
                free(m->e[i].val);
        free(m->e);
        memset(m, 0, sizeof(*m));
}

/* -------------------------------------------------------------- TYPES --- */

struct epoch {
        uint64_t            seq; /* 0: slot free */
        bool                sealed;
        int64_t             outstanding;
        aagw_store_batch_t *b;
        uint8_t            (*keys)[16]; /* pending map keys it set */
        size_t              nkeys, kcap;
        uint8_t            *kmode; /* per key: AAGW_UNIFY_DEDUP / _LWW */
};

/* One output topic: the highest offset acknowledged per epoch slot and
 * partition, -1: none. */
struct dout {
        char     topic[AAGW_TOPIC_MAX + 1];
        int32_t  nparts;
        int64_t *max[EPOCHS];
};

struct aagw_unify_state {
        aagw_store_t *store;
        char          site[AAGW_ALIAS_MAX + 1];
        char          scope_in[AAGW_ALIAS_MAX + 16];
        char          scope_out[AAGW_ALIAS_MAX + 16];
        bool          audit_accepted;

        struct epoch epochs[EPOCHS];
        uint64_t     next_seq;  /* seq of the open epoch */
        unsigned     open_slot; /* its slot */
        unsigned     oldest;    /* slot of the oldest uncommitted epoch */
        bool         sealed;    /* the open slot is sealed: open the next */

        struct kmap pend_ids; /* dedup: ids decided, not committed */
        struct kmap pend_lww; /* lww: winners decided, not committed */
        struct kmap replay;   /* input coordinates found in the output */

        struct dout **outs;
        size_t        nouts;

        aagw_store_batch_t *fold_b; /* what the start-up scan folds */

        /* Batch scratch, grown to the largest batch and kept: nothing is
         * allocated per batch.  li[i] is where record i of the batch
         * being decided gets its answer (see LI_*), the lk_ and found_
         * arrays are the store lookups.  Kept here, not in the records:
         * the records are the contract's, shared with the Kafka side. */
        size_t           cap;
        size_t          *li;
        uint8_t        (*lk_ids)[16];
        uint8_t        (*lk_lww)[16];
        bool            *found_ids, *found_lww;
        struct aagw_lww *lww_out;
        uint64_t         lookups; /* keys asked of the store */

        /* audit_out(): where audit entries go besides the store, and
         * the scratch they are encoded in. */
        aagw_unify_audit_fn *audit_fn;
        void                *audit_opaque;
        uint8_t             *audit_buf;
        size_t               audit_cap;
        bool                 audit_refused; /* by audit_fn, this batch */
};

/* li[i] of a record answered from memory (a pending epoch has its key, or
 * it is rejected) and of a replay (no verdict at all); any other value is
 * the record's row in the lookup arrays. */
#define LI_MEMORY SIZE_MAX
#define LI_REPLAY (SIZE_MAX - 1)

/* Copy the string 'src' into 'dst' (size bytes), truncating: snprintf
 * without the format parsing, on the per-record path. */
static void copy_str(char *dst, size_t size, const char *src) {
        size_t n = strnlen(src, size - 1);
        memcpy(dst, src, n);
        dst[n] = '\0';
}

static struct kmap *pending(aagw_decider_t *d, int mode) {
        return mode == AAGW_UNIFY_LWW ? &d->pend_lww : &d->pend_ids;
}

/* ---------------------------------------------------------- LIFECYCLE --- */

aagw_decider_t *aagw_decider_new(const struct aagw_decider_conf *c,
                                 char *errstr, size_t errstr_size) {
        aagw_decider_t *d = calloc(1, sizeof(*d));

        if (!d) {
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        d->store          = c->store;
        d->audit_accepted = c->audit_accepted;
        copy_str(d->site, sizeof(d->site), c->site);
        aagw_unify_pos_scope(c->site, false, d->scope_in, sizeof(d->scope_in));
        aagw_unify_pos_scope(c->site, true, d->scope_out,
                             sizeof(d->scope_out));
        for (int s = 0; s < EPOCHS; s++)
                if (!(d->epochs[s].b = aagw_store_batch_new(c->store)))
                        goto oom;
        if (!(d->fold_b = aagw_store_batch_new(c->store)))
                goto oom;
        d->epochs[d->open_slot].seq = ++d->next_seq;
        return d;
oom:
        snprintf(errstr, errstr_size, "out of memory");
        aagw_decider_destroy(d);
        return NULL;
}

void aagw_decider_destroy(aagw_decider_t *d) {
        if (!d)
                return;
        for (int s = 0; s < EPOCHS; s++) {
                aagw_store_batch_destroy(d->epochs[s].b);
                free(d->epochs[s].keys);
                free(d->epochs[s].kmode);
        }
        for (size_t i = 0; i < d->nouts; i++) {
                for (int s = 0; s < EPOCHS; s++)
                        free(d->outs[i]->max[s]);
                free(d->outs[i]);
        }
        free(d->outs);
        aagw_store_batch_destroy(d->fold_b);
        kmap_free(&d->pend_ids);
        kmap_free(&d->pend_lww);
        kmap_free(&d->replay);
        free(d->audit_buf);
        free(d->li);
        free(d->lk_ids);
        free(d->lk_lww);
        free(d->found_ids);
        free(d->found_lww);
        free(d->lww_out);
        free(d);
}

/* ------------------------------------------------------------- EPOCHS --- */

static int epoch_key(struct epoch *ep, const uint8_t *k, uint8_t mode) {
        if (ep->nkeys == ep->kcap) {
                size_t   nc = ep->kcap ? ep->kcap * 2 : 1024;
                uint8_t(*nk)[16] = realloc(ep->keys, nc * sizeof(*nk));
                uint8_t *nm      = nk ? realloc(ep->kmode, nc) : NULL;
                if (!nk || !nm) {
                        if (nk)
                                ep->keys = nk;
                        return -1;
                }
                ep->keys  = nk;
                ep->kmode = nm;
                ep->kcap  = nc;
        }
        memcpy(ep->keys[ep->nkeys], k, 16);
        ep->kmode[ep->nkeys++] = mode;
        return 0;
}

int aagw_decider_output(aagw_decider_t *d, const char *topic,
                        int32_t nparts) {
        struct dout *o = calloc(1, sizeof(*o));
        struct dout **no = realloc(d->outs, (d->nouts + 1) * sizeof(*no));

        if (!o || !no) {
                free(o);
                return -1;
        }
        d->outs = no;
        copy_str(o->topic, sizeof(o->topic), topic);
        o->nparts = nparts;
        for (int s = 0; s < EPOCHS; s++) {
                if (!(o->max[s] = malloc((size_t)nparts * sizeof(int64_t)))) {
                        for (int t = 0; t < s; t++)
                                free(o->max[t]);
                        free(o);
                        return -1;
                }
                for (int32_t p = 0; p < nparts; p++)
                        o->max[s][p] = -1;
        }
        d->outs[d->nouts] = o;
        return (int)d->nouts++;
}

void aagw_decider_acked(aagw_decider_t *d, unsigned ep, int out, int32_t part,
                        int64_t off) {
        d->epochs[ep].outstanding--;
        int64_t *mx = &d->outs[out]->max[ep][part];
        if (off > *mx)
                *mx = off;
}

void aagw_decider_lost(aagw_decider_t *d, unsigned ep) {
        d->epochs[ep].outstanding = INT64_MAX / 2; /* never commits */
}

/* The open epoch consumed input 'topic' ['part'] up to 'next'. */
static void reached(aagw_decider_t *d, const char *topic, int32_t part,
                    int64_t next) {
        struct aagw_pos pos = {next, -1};
        aagw_store_batch_pos(d->epochs[d->open_slot].b, d->scope_in, topic,
                             part, &pos);
}

/* Close the open epoch, unless nothing happened in it (it stays open). */
static void seal(aagw_decider_t *d) {
        struct epoch *ep = &d->epochs[d->open_slot];

        if (!aagw_store_batch_size(ep->b) && !ep->outstanding && !ep->nkeys)
                return;
        ep->sealed = true;
        d->sealed  = true;
}

/* Open the next epoch after a seal.  Returns false while its slot is still
 * taken (commit, or wait for acknowledgements, and try again). */
static bool open_next(aagw_decider_t *d) {
        unsigned nxt = (d->open_slot + 1) % EPOCHS;

        /* (Not the slot's own flag: waiting for the next slot may have
         * committed the sealed one and freed its slot.) */
        if (!d->sealed)
                return true; /* still open */
        if (d->epochs[nxt].seq)
                return false;
        d->open_slot               = nxt;
        d->epochs[nxt].seq         = ++d->next_seq;
        d->epochs[nxt].sealed      = false;
        d->epochs[nxt].outstanding = 0;
        d->sealed                  = false;
        return true;
}

/* Store the oldest sealed epochs whose records are all acknowledged, in
 * epoch order.  Returns how many, or -1 with 'errstr'. */
static int commit(aagw_decider_t *d, char *errstr, size_t errstr_size) {
        char err[512];
        int  n = 0;

        for (;;) {
                struct epoch *ep = &d->epochs[d->oldest];
                if (!ep->seq || !ep->sealed || ep->outstanding > 0)
                        return n;
                for (size_t t = 0; t < d->nouts; t++) {
                        struct dout *o  = d->outs[t];
                        int64_t     *mx = o->max[d->oldest];
                        for (int32_t p = 0; p < o->nparts; p++) {
                                if (mx[p] < 0)
                                        continue;
                                struct aagw_pos pos = {mx[p] + 1, -1};
                                aagw_store_batch_pos(ep->b, d->scope_out,
                                                     o->topic, p, &pos);
                                mx[p] = -1;
                        }
                }
                if (aagw_store_batch_size(ep->b) &&
                    aagw_store_batch_commit(ep->b, err, sizeof(err))) {
                        snprintf(errstr, errstr_size,
                                 "storing the unify state: %s", err);
                        return -1;
                }
                n++;
                for (size_t i = 0; i < ep->nkeys; i++) {
                        struct kmap *km = pending(d, ep->kmode[i]);
                        if (i + 8 < ep->nkeys)
                                kmap_prefetch(pending(d, ep->kmode[i + 8]),
                                              ep->keys[i + 8]);
                        struct kent *e = kmap_find(km, ep->keys[i]);
                        if (e && e->epoch == ep->seq)
                                kmap_del(km, e);
                }
                ep->nkeys       = 0;
                ep->seq         = 0;
                ep->sealed      = false;
                ep->outstanding = 0;
                d->oldest       = (d->oldest + 1) % EPOCHS;
        }
}

/* Commit before opening: when every slot is taken, the commit may free
 * the one the next epoch needs, and it opens without a wait. */
int aagw_decider_settle(aagw_decider_t *d, const struct aagw_unify_pos *rch,
                        size_t n, bool sealing, unsigned *committed,
                        char *errstr, size_t errstr_size) {
        int c;

        for (size_t i = 0; i < n; i++)
                reached(d, rch[i].topic, rch[i].partition, rch[i].next);
        if (sealing)
                seal(d);
        *committed = 0;
        if ((c = commit(d, errstr, errstr_size)) < 0)
                return -1;
        *committed = (unsigned)c;
        return open_next(d) ? 1 : 0;
}

uint64_t aagw_decider_lookups(const aagw_decider_t *d) {
        return d->lookups;
}

size_t aagw_decider_uncommitted(const aagw_decider_t *d) {
        size_t n = 0;
        for (int s = 0; s < EPOCHS; s++)
                n += d->epochs[s].seq && d->epochs[s].sealed;
        return n;
}

/* ---------------------------------------------------------- POSITIONS --- */

int aagw_decider_pos(aagw_decider_t *d, bool output, const char *topic,
                     int32_t part, int64_t *next, char *errstr,
                     size_t errstr_size) {
        struct aagw_pos pos;
        aagw_err_t      e = aagw_store_pos_get(
            d->store, output ? d->scope_out : d->scope_in, topic, part, &pos,
            errstr, errstr_size);
        if (e == AAGW_ERR_NOENT)
                return 1;
        if (e)
                return -1;
        *next = pos.next;
        return 0;
}

/* ---------------------------------------------------------- DECISIONS --- */

static void replay_key(const char *topic, int32_t part, int64_t off,
                       uint8_t key[16]) {
        char   buf[AAGW_COORDS_MAX];
        size_t n = aagw_coords_format(buf, topic, part, off);
        aagw_id_key(buf, n, key);
}

/* True (once) if input 'topic' ['part'] 'off' was found in the output at
 * start: a replay of a folded record. */
static bool replayed(aagw_decider_t *d, const char *topic, int32_t part,
                     int64_t off) {
        uint8_t      rk[16];
        struct kent *re;

        if (!d->replay.cnt)
                return false;
        replay_key(topic, part, off, rk);
        if (!(re = kmap_find(&d->replay, rk)))
                return false;
        kmap_del(&d->replay, re);
        return true;
}

static int scratch(aagw_decider_t *d, size_t n) {
        if (n <= d->cap)
                return 0;
        void *l = realloc(d->li, n * sizeof(*d->li));
        if (l)
                d->li = l;
        void *a = realloc(d->lk_ids, n * sizeof(*d->lk_ids));
        if (a)
                d->lk_ids = a;
        void *b = realloc(d->lk_lww, n * sizeof(*d->lk_lww));
        if (b)
                d->lk_lww = b;
        void *c = realloc(d->found_ids, n * sizeof(*d->found_ids));
        if (c)
                d->found_ids = c;
        void *e = realloc(d->found_lww, n * sizeof(*d->found_lww));
        if (e)
                d->found_lww = e;
        void *f = realloc(d->lww_out, n * sizeof(*d->lww_out));
        if (f)
                d->lww_out = f;
        if (!l || !a || !b || !c || !e || !f)
                return -1;
        d->cap = n;
        return 0;
}

static int audit_add(aagw_decider_t *d, aagw_store_batch_t *b,
                     const struct aagw_unify_rec *r, int64_t now,
                     aagw_audit_verdict_t verdict) {
        const struct aagw_prov *p = r->prov;
        struct aagw_audit       a = {
            .time_ms   = now,
            .verdict   = verdict,
            .site      = d->site,
            .origin    = p->path_len ? p->origin : d->site,
            .topic     = r->topic,
            .partition = r->partition,
            .offset    = r->offset,
            .hlc       = p->hlc,
            .id        = p->id,
            .id_len    = p->id_len,
            .ekey      = r->ekey,
            .ekey_len  = r->ekey_len > AAGW_AUDIT_EKEY_MAX ? AAGW_AUDIT_EKEY_MAX
                                                           : r->ekey_len};
        if (aagw_store_batch_audit(b, &a))
                return -1;
        if (!d->audit_fn)
                return 0;
        const char *why;
        /* (What the batch took encodes: its checks are the same.) */
        ssize_t len = aagw_audit_encode(&a, &d->audit_buf, &d->audit_cap, &why);
        if (len < 0)
                return -1;
        if (d->audit_fn(d->audit_opaque, r, d->audit_buf, (size_t)len)) {
                d->audit_refused = true;
                return -1;
        }
        return 0;
}

void aagw_decider_audit_out(aagw_decider_t *d, aagw_unify_audit_fn *fn,
                            void *opaque) {
        d->audit_fn     = fn;
        d->audit_opaque = opaque;
}

/* A rejected record keeps the derived id for the audit log; the
 * replicator dead-letters it. */
static int reject(aagw_decider_t *d, struct epoch *ep,
                  struct aagw_unify_rec *r, int64_t now) {
        struct aagw_prov *p = r->prov;
        p->path_len = 0;
        p->id_len   = aagw_id_derive(d->site, r->topic, r->partition,
                                     r->offset, p->id, sizeof(p->id));
        if (p->id_len >= sizeof(p->id))
                p->id_len = sizeof(p->id) - 1;
        p->hlc     = 0;
        r->outcome = AAGW_UNIFY_REJECTED;
        return audit_add(d, ep->b, r, now, AAGW_AUDIT_REJECTED);
}

static int decide_dedup(aagw_decider_t *d, struct epoch *ep,
                        struct aagw_unify_rec *r, size_t li, int64_t now) {
        /* Not looked up: a pending epoch delivered it. */
        bool dup = li != LI_MEMORY ? d->found_ids[li] : true;
        if (!dup && kmap_find(&d->pend_ids, r->key))
                dup = true; /* earlier in this batch */
        if (dup) {
                r->outcome = AAGW_UNIFY_DROPPED;
                return audit_add(d, ep->b, r, now, AAGW_AUDIT_DROPPED);
        }
        const struct aagw_prov *p = r->prov;
        struct aagw_seen        s = {.time_ms   = now,
                                     .hlc       = p->hlc,
                                     .partition = r->partition,
                                     .offset    = r->offset};
        copy_str(s.site, sizeof(s.site), d->site);
        copy_str(s.origin, sizeof(s.origin), p->origin);
        copy_str(s.topic, sizeof(s.topic), r->topic);
        struct kent *pe = kmap_put(&d->pend_ids, r->key);
        /* The seen entry records the delivery (where, when, from which
         * input): an audit entry too only if asked for
         * (unify.audit_accepted). */
        if (!pe || epoch_key(ep, r->key, AAGW_UNIFY_DEDUP) ||
            aagw_store_batch_seen(ep->b, r->key, &s) ||
            (d->audit_accepted &&
             audit_add(d, ep->b, r, now, AAGW_AUDIT_ACCEPTED)))
                return -1;
        pe->epoch  = ep->seq;
        r->outcome = AAGW_UNIFY_ACCEPTED;
        return 0;
}

static int decide_lww(aagw_decider_t *d, struct epoch *ep,
                      struct aagw_unify_rec *r, size_t li, int64_t now) {
        const struct aagw_prov *p   = r->prov;
        struct aagw_lww        *cur = NULL, nw;
        struct kent            *pe  = kmap_find(&d->pend_lww, r->key);

        if (pe)
                cur = pe->val;
        else if (li != LI_MEMORY && d->found_lww[li])
                cur = &d->lww_out[li];
        memset(&nw.v, 0, offsetof(struct aagw_version, id));
        nw.time_ms   = now;
        nw.tombstone = r->tombstone;
        nw.v.hlc     = p->hlc;
        copy_str(nw.v.origin, sizeof(nw.v.origin), p->origin);
        nw.v.id_len = p->id_len;
        memcpy(nw.v.id, p->id, p->id_len);
        nw.v.id[p->id_len] = '\0';
        int c = cur ? aagw_version_cmp(&nw.v, &cur->v) : 1;
        if (c <= 0) {
                r->outcome = c < 0 ? AAGW_UNIFY_SUPERSEDED
                                   : AAGW_UNIFY_IDENTICAL;
                return audit_add(d, ep->b, r, now,
                                 c < 0 ? AAGW_AUDIT_SUPERSEDED
                                       : AAGW_AUDIT_IDENTICAL);
        }
        if (!pe && !(pe = kmap_put(&d->pend_lww, r->key)))
                return -1;
        if (!pe->val && !(pe->val = malloc(sizeof(nw))))
                return -1;
        memcpy(pe->val, &nw, sizeof(nw));
        pe->epoch = ep->seq;
        if (epoch_key(ep, r->key, AAGW_UNIFY_LWW) ||
            aagw_store_batch_lww(ep->b, r->key, &nw) ||
            audit_add(d, ep->b, r, now, AAGW_AUDIT_ACCEPTED))
                return -1;
        r->outcome = AAGW_UNIFY_ACCEPTED;
        return 0;
}

int aagw_decider_decide(aagw_decider_t *d, struct aagw_unify_rec *recs,
                        size_t n, int64_t now_ms, unsigned *epoch, char *errstr,
                        size_t errstr_size) {
        struct epoch *ep   = &d->epochs[d->open_slot];
        size_t        nids = 0, nlww = 0;
        int64_t       accepted = 0;
        char          err[512];

        *epoch           = d->open_slot;
        d->audit_refused = false;
        if (scratch(d, n))
                goto oom;
        /* Every key's pending-map slot towards the cache a whole pass
         * before its probe: the map is larger than L2 and each key lands
         * somewhere random in it. */
        for (size_t i = 0; i < n; i++)
                if (!recs[i].rejected)
                        kmap_prefetch(pending(d, recs[i].mode), recs[i].key);
        /* Replays get no verdict, rejected or not.  Keys decided in a
         * pending epoch need no lookup. */
        for (size_t i = 0; i < n; i++) {
                struct aagw_unify_rec *r = &recs[i];
                d->li[i]                 = LI_MEMORY;
                if (d->replay.cnt &&
                    replayed(d, r->topic, r->partition, r->offset)) {
                        d->li[i]   = LI_REPLAY;
                        r->outcome = AAGW_UNIFY_REPLAYED;
                        continue;
                }
                if (r->rejected || kmap_find(pending(d, r->mode), r->key))
                        continue;
                if (r->mode == AAGW_UNIFY_DEDUP) {
                        d->li[i] = nids;
                        memcpy(d->lk_ids[nids++], r->key, 16);
                } else {
                        d->li[i] = nlww;
                        memcpy(d->lk_lww[nlww++], r->key, 16);
                }
        }
        d->lookups += nids + nlww;
        if (nids && aagw_store_seen_lookup(d->store,
                                           (const uint8_t(*)[16])d->lk_ids,
                                           nids, d->found_ids, NULL, err,
                                           sizeof(err))) {
                snprintf(errstr, errstr_size, "looking up ids: %s", err);
                goto fail;
        }
        if (nlww && aagw_store_lww_lookup(d->store,
                                          (const uint8_t(*)[16])d->lk_lww,
                                          nlww, d->found_lww, d->lww_out, err,
                                          sizeof(err))) {
                snprintf(errstr, errstr_size, "looking up winners: %s", err);
                goto fail;
        }

        /* In order: the decisions. */
        for (size_t i = 0; i < n; i++) {
                struct aagw_unify_rec *r  = &recs[i];
                size_t                 li = d->li[i];
                int                    rc;
                if (i + 8 < n && !r[8].rejected)
                        kmap_prefetch(pending(d, r[8].mode), r[8].key);
                if (li == LI_REPLAY)
                        continue;
                /* Decided as usual, but the other sites on its path will
                 * not see it: audited apart. */
                if (r->diverged &&
                    audit_add(d, ep->b, r, now_ms, AAGW_AUDIT_DIVERGED))
                        goto oom;
                if (r->rejected)
                        rc = reject(d, ep, r, now_ms);
                else if (r->mode == AAGW_UNIFY_DEDUP)
                        rc = decide_dedup(d, ep, r, li, now_ms);
                else
                        rc = decide_lww(d, ep, r, li, now_ms);
                if (rc)
                        goto oom;
                accepted += r->outcome == AAGW_UNIFY_ACCEPTED;
        }
        /* In flight until acked() or lost(): an accepted record the stage
         * never sends keeps the epoch from committing. */
        ep->outstanding += accepted;
        return 0;
oom:
        snprintf(errstr, errstr_size, "%s",
                 d->audit_refused
                     ? "an audit entry was refused where it was handed over"
                     : "out of memory (or a value the store refuses)");
fail:
        /* Part of the batch decided, its records not sent: never stored. */
        ep->outstanding = INT64_MAX / 2;
        return -1;
}

/* ----------------------------------------------------------- RECOVERY --- */

/* Fold winner 'nw' of entity 'key' into the fold batch if it is newer
 * than the one known (the fold's pending map, then the store).  Output
 * records of one key are in order in one partition (a changelog's too),
 * and the batch may already hold an earlier one: the pending map is the
 * latest word until fold_commit(). */
static int fold_winner(aagw_decider_t *d, const uint8_t key[16],
                       const struct aagw_lww *nw, char *errstr,
                       size_t errstr_size) {
        struct aagw_lww cur;
        bool            found;
        char            err[256];
        struct kent    *pe = kmap_find(&d->pend_lww, key);

        if (pe && pe->val)
                cur = *(struct aagw_lww *)pe->val, found = true;
        else if (aagw_store_lww_lookup(d->store, (const uint8_t(*)[16])key,
                                       1, &found, &cur, err, sizeof(err))) {
                snprintf(errstr, errstr_size, "%s", err);
                return -1;
        }
        if (found && aagw_version_cmp(&nw->v, &cur.v) <= 0)
                return 0;
        if (aagw_store_batch_lww(d->fold_b, key, nw) ||
            (!pe && !(pe = kmap_put(&d->pend_lww, key))) ||
            (!pe->val && !(pe->val = malloc(sizeof(*nw))))) {
                snprintf(errstr, errstr_size, "out of memory or bad value");
                return -1;
        }
        memcpy(pe->val, nw, sizeof(*nw));
        pe->epoch = UINT64_MAX; /* dropped at the end */
        return 0;
}

/* The seen entry of a delivery of 'r' (its input coordinates and
 * provenance) at 'time_ms'. */
static void seen_of(const aagw_decider_t *d, const struct aagw_unify_rec *r,
                    int64_t time_ms, struct aagw_seen *s) {
        memset(s, 0, sizeof(*s));
        s->time_ms   = time_ms;
        s->hlc       = r->prov->hlc;
        s->partition = r->partition;
        s->offset    = r->offset;
        copy_str(s->site, sizeof(s->site), d->site);
        copy_str(s->origin, sizeof(s->origin), r->prov->origin);
        copy_str(s->topic, sizeof(s->topic), r->topic);
}

/* The version 'r' wins with, decided at 'time_ms'. */
static void winner_of(const struct aagw_unify_rec *r, int64_t time_ms,
                      struct aagw_lww *nw) {
        const struct aagw_prov *p = r->prov;

        memset(nw, 0, sizeof(*nw));
        nw->time_ms   = time_ms;
        nw->tombstone = r->tombstone;
        nw->v.hlc     = p->hlc;
        copy_str(nw->v.origin, sizeof(nw->v.origin), p->origin);
        nw->v.id_len = p->id_len < AAGW_ID_MAX ? p->id_len : AAGW_ID_MAX;
        memcpy(nw->v.id, p->id, nw->v.id_len);
}

int aagw_decider_fold(aagw_decider_t *d, struct aagw_unify_rec *r,
                      int64_t now_ms, char *errstr, size_t errstr_size) {
        const struct aagw_prov *p = r->prov;
        aagw_store_batch_t     *b = d->fold_b;
        uint8_t                 rk[16];
        struct aagw_audit       a = {
            .time_ms = now_ms, .verdict = AAGW_AUDIT_ACCEPTED,
            .site = d->site, .origin = p->origin, .topic = r->topic,
            .partition = r->partition, .offset = r->offset, .hlc = p->hlc,
            .id = p->id, .id_len = p->id_len};

        aagw_unify_key(d->site, r);
        if (r->mode == AAGW_UNIFY_DEDUP) {
                struct aagw_seen s;
                seen_of(d, r, now_ms, &s);
                if (aagw_store_batch_seen(b, r->key, &s))
                        goto bad;
        } else {
                struct aagw_lww nw;
                winner_of(r, now_ms, &nw);
                if (fold_winner(d, r->key, &nw, errstr, errstr_size))
                        return -1;
                a.ekey     = r->ekey;
                a.ekey_len = r->ekey_len > AAGW_AUDIT_EKEY_MAX
                                 ? AAGW_AUDIT_EKEY_MAX
                                 : r->ekey_len;
        }
        if ((r->mode == AAGW_UNIFY_LWW || d->audit_accepted) &&
            aagw_store_batch_audit(b, &a))
                goto bad;
        /* The replay set tells a re-read of a folded record from a true
         * duplicate (only the audit log differs: "dropped" instead of no
         * entry); past its bound the rest are treated as duplicates. */
        if (d->replay.cnt < REPLAY_MAX) {
                replay_key(r->topic, r->partition, r->offset, rk);
                struct kent *re = kmap_put(&d->replay, rk);
                if (!re)
                        goto bad;
                re->epoch = 1;
        }
        r->outcome = AAGW_UNIFY_ACCEPTED;
        return 0;
bad:
        snprintf(errstr, errstr_size, "out of memory or bad value");
        return -1;
}

int aagw_decider_restore(aagw_decider_t *d, const struct aagw_unify_rec *r,
                         int64_t time_ms, char *errstr, size_t errstr_size) {
        if (r->mode == AAGW_UNIFY_DEDUP) {
                struct aagw_seen s;
                seen_of(d, r, time_ms, &s);
                if (aagw_store_batch_seen(d->fold_b, r->key, &s)) {
                        snprintf(errstr, errstr_size,
                                 "out of memory or bad value");
                        return -1;
                }
                return 0;
        }
        struct aagw_lww nw;
        winner_of(r, time_ms, &nw);
        return fold_winner(d, r->key, &nw, errstr, errstr_size);
}

int aagw_decider_drop(aagw_decider_t *d) {
        for (unsigned s = 0; s < EPOCHS; s++) {
                struct epoch *ep = &d->epochs[s];
                for (size_t i = 0; ep->seq && i < ep->nkeys; i++) {
                        struct kmap *km = pending(d, ep->kmode[i]);
                        struct kent *e  = kmap_find(km, ep->keys[i]);
                        if (e && e->epoch == ep->seq)
                                kmap_del(km, e);
                }
                /* A batch cannot be emptied: a new one. */
                if (ep->seq && aagw_store_batch_size(ep->b)) {
                        aagw_store_batch_destroy(ep->b);
                        if (!(ep->b = aagw_store_batch_new(d->store)))
                                return -1;
                }
                ep->nkeys       = 0;
                ep->seq         = 0;
                ep->sealed      = false;
                ep->outstanding = 0;
                for (size_t t = 0; t < d->nouts; t++)
                        for (int32_t p = 0; p < d->outs[t]->nparts; p++)
                                d->outs[t]->max[s][p] = -1;
        }
        d->open_slot = d->oldest = 0;
        d->sealed    = false;
        d->epochs[0].seq = ++d->next_seq;
        return 0;
}

void aagw_decider_fold_out(aagw_decider_t *d, const char *topic, int32_t part,
                           int64_t next) {
        struct aagw_pos np = {next, -1};
        aagw_store_batch_pos(d->fold_b, d->scope_out, topic, part, &np);
}

int aagw_decider_fold_commit(aagw_decider_t *d, bool end, char *errstr,
                             size_t errstr_size) {
        size_t sz = aagw_store_batch_size(d->fold_b);

        /* Bounded memory on a long scan: what is folded so far can be
         * stored (folding is idempotent; the output position moves only
         * at the end of the partition). */
        if ((end || sz >= FOLD_BATCH) && sz &&
            aagw_store_batch_commit(d->fold_b, errstr, errstr_size))
                return -1;
        if (!end)
                return 0;
        /* Folded winners are in the store now. */
        for (size_t i = 0; i < d->pend_lww.cap; i++)
                if (d->pend_lww.e && d->pend_lww.e[i].epoch == UINT64_MAX) {
                        kmap_del(&d->pend_lww, &d->pend_lww.e[i]);
                        i = (size_t)-1; /* deletion shifts: rescan */
                }
        return 0;
}

const struct aagw_unify_state_ops aagw_decider_ops = {
    .decide      = aagw_decider_decide,
    .acked       = aagw_decider_acked,
    .lost        = aagw_decider_lost,
    .settle      = aagw_decider_settle,
    .output      = aagw_decider_output,
    .pos         = aagw_decider_pos,
    .fold        = aagw_decider_fold,
    .fold_out    = aagw_decider_fold_out,
    .fold_commit = aagw_decider_fold_commit,
    .restore     = aagw_decider_restore,
    .drop        = aagw_decider_drop,
    .audit_out   = aagw_decider_audit_out,
};
