/*
 * tests/unit/test_unify_contract.c: the unify contract
 * (policy/aagw_unify_contract.h) through a test double and the decider.
 *
 * The double ("mem") implements struct aagw_unify_state_ops in memory, as
 * plainly as the contract's words allow: lists searched from end to
 * start, entries tagged with the epoch that wrote them, no RocksDB.  It
 * does two jobs:
 *
 *  - It shows that the contract is all the stage needs.  One driver (the
 *    calls replicator/unify.c makes: per batch decide(), an acked() per
 *    delivery, settle(); at start the scan of the output with fold(); a
 *    drop() after an aborted transaction) runs against the double and
 *    against the decider on a RocksDB store in a temp dir, with checks
 *    written against the contract only: which records are accepted or
 *    dropped (dedup) and which versions win (lww), the epochs committed,
 *    the positions stored.
 *  - It is the model the decider is checked against: the same batches,
 *    acknowledgements, crashes and drops go to both, in lockstep, and
 *    after every call their answers must agree (outcomes, the derived id
 *    of rejected records, settle()'s answer and commit count, positions),
 *    and at the end so must the audit logs.  The unified topics the driver
 *    builds then hold each id once (dedup) and each entity's versions in
 *    increasing order, ending with its newest (lww).
 *
 * The stage's own code is not driven here: its batch is a librdkafka
 * consumer's messages (their headers are read with
 * rd_kafka_message_headers(), which needs librdkafka's own message type)
 * and its acknowledgements are a producer's delivery reports, so it needs
 * a cluster; tests/unify/ run it on the embedded mock.  The driver below
 * makes the stage's calls in the stage's order instead (unify_process(),
 * seal_epoch(), commit_ready(), unify_recover_output(), unify_scale_commit()).
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "aagw_dedup.h"
#include "harness.h"

static char *tmpdir; /* the stores' (group_setup()) */

#define NOW_MS INT64_C(1700000000000)
#define SITE "east"

static int64_t fixed_clock(void *opaque) {
        (void)opaque;
        return NOW_MS;
}

/* ============================== THE DOUBLE ============================== */

#define MEM_EPOCHS 8  /* as the decider: the driver's lockstep needs it */
#define MEM_CAP 16384 /* entries of each list */
#define MEM_OUTS 4
#define MEM_PARTS 8
#define MEM_ID 64

/* Entries are tagged with the epoch (its seq) that wrote them: STORED once
 * that epoch committed, FOLDED while a fold or restore waits for
 * fold_commit(). */
#define STORED 0
#define FOLDED UINT64_MAX

struct mem_seen {
        uint8_t  key[16];
        uint64_t tag;
};

struct mem_win {
        uint8_t  key[16];
        uint64_t hlc;
        char     origin[AAGW_ALIAS_MAX + 1];
        char     id[MEM_ID];
        size_t   id_len;
        bool     tombstone;
        uint64_t tag;
};

struct mem_audit {
        char     id[MEM_ID];
        size_t   id_len;
        int      verdict;
        uint64_t tag;
};

struct mem_pos {
        bool     output;
        char     topic[AAGW_TOPIC_MAX + 1];
        int32_t  part;
        int64_t  next;
        uint64_t tag;
};

struct mem_coords {
        char    topic[AAGW_TOPIC_MAX + 1];
        int32_t part;
        int64_t off;
};

struct mem_epoch {
        uint64_t seq; /* 0: slot free */
        bool     sealed, touched;
        int64_t  outstanding;
        int64_t  outmax[MEM_OUTS][MEM_PARTS]; /* -1: nothing acked */
};

struct mem {
        bool audit_accepted;
        /* Committed entries (tag STORED) outlive mem_restart(): they are
         * the double's store. */
        struct mem_seen  seen[MEM_CAP];
        size_t           nseen;
        struct mem_win   win[MEM_CAP];
        size_t           nwin;
        struct mem_audit audit[MEM_CAP];
        size_t           naudit;
        struct mem_pos   pos[MEM_CAP];
        size_t           npos;
        /* What a process keeps in memory only. */
        struct mem_coords replay[MEM_CAP];
        size_t            nreplay;
        struct mem_epoch  ep[MEM_EPOCHS];
        unsigned          open, oldest;
        bool              sealed; /* the open slot is sealed: open next */
        uint64_t          next_seq;
        char              out[MEM_OUTS][AAGW_TOPIC_MAX + 1];
        int32_t           out_parts[MEM_OUTS];
        int               nout;
};

static void copy(char *dst, size_t size, const void *src, size_t len) {
        assert_true(len < size);
        memcpy(dst, src, len);
        dst[len] = '\0';
}

static void mem_audit_add(struct mem *m, const struct aagw_prov *p, int verdict,
                          uint64_t tag) {
        assert_true(m->naudit < MEM_CAP);
        struct mem_audit *a = &m->audit[m->naudit++];
        copy(a->id, sizeof(a->id), p->id, p->id_len);
        a->id_len  = p->id_len;
        a->verdict = verdict;
        a->tag     = tag;
}

static void mem_pos_add(struct mem *m, bool output, const char *topic,
                        int32_t part, int64_t next, uint64_t tag) {
        assert_true(m->npos < MEM_CAP);
        struct mem_pos *ps = &m->pos[m->npos++];
        ps->output         = output;
        copy(ps->topic, sizeof(ps->topic), topic, strlen(topic));
        ps->part = part;
        ps->next = next;
        ps->tag  = tag;
}

/* Decided or stored: the ids a fold or a restore found count from their
 * fold_commit() on, as the decider keeps them in the fold's batch. */
static bool mem_seen_any(const struct mem *m, const uint8_t *key) {
        for (size_t i = m->nseen; i-- > 0;)
                if (m->seen[i].tag != FOLDED &&
                    !memcmp(m->seen[i].key, key, 16))
                        return true;
        return false;
}

/* The winner of 'key' that decisions compare with: the newest one not
 * stored yet (an open or waiting epoch's, or the fold's), else the last
 * one stored. */
static const struct mem_win *mem_win_of(const struct mem *m,
                                        const uint8_t    *key) {
        const struct mem_win *stored = NULL;
        for (size_t i = m->nwin; i-- > 0;) {
                if (memcmp(m->win[i].key, key, 16))
                        continue;
                if (m->win[i].tag != STORED)
                        return &m->win[i];
                if (!stored)
                        stored = &m->win[i];
        }
        return stored;
}

static void version_of(const struct mem_win *w, struct aagw_version *v) {
        memset(v, 0, sizeof(*v));
        v->hlc = w->hlc;
        snprintf(v->origin, sizeof(v->origin), "%s", w->origin);
        memcpy(v->id, w->id, w->id_len);
        v->id_len = w->id_len;
}

/* The version 'r' stands for, as an entry tagged 'tag'. */
static void win_of(const struct aagw_unify_rec *r, uint64_t tag,
                   struct mem_win *w) {
        memset(w, 0, sizeof(*w));
        memcpy(w->key, r->key, 16);
        w->hlc = r->prov->hlc;
        snprintf(w->origin, sizeof(w->origin), "%s", r->prov->origin);
        copy(w->id, sizeof(w->id), r->prov->id, r->prov->id_len);
        w->id_len    = r->prov->id_len;
        w->tombstone = r->tombstone;
        w->tag       = tag;
}

/* <0, 0, >0: 'w' against the current winner of its key (none: newer). */
static int mem_win_cmp(const struct mem *m, const struct mem_win *w) {
        const struct mem_win *cur = mem_win_of(m, w->key);
        struct aagw_version   a, b;
        if (!cur)
                return 1;
        version_of(w, &a);
        version_of(cur, &b);
        return aagw_version_cmp(&a, &b);
}

static void mem_win_add(struct mem *m, const struct mem_win *w) {
        assert_true(m->nwin < MEM_CAP);
        m->win[m->nwin++] = *w;
}

static int mem_decide(aagw_unify_state_t *st, struct aagw_unify_rec *recs,
                      size_t n, int64_t now_ms, unsigned *epoch, char *errstr,
                      size_t errstr_size) {
        struct mem       *m  = (struct mem *)st;
        struct mem_epoch *ep = &m->ep[m->open];
        (void)now_ms;
        (void)errstr;
        (void)errstr_size;

        *epoch = m->open;
        for (size_t i = 0; i < n; i++) {
                struct aagw_unify_rec *r      = &recs[i];
                struct aagw_prov      *p      = r->prov;
                bool                   replay = false;
                for (size_t k = 0; k < m->nreplay && !replay; k++) {
                        struct mem_coords *c = &m->replay[k];
                        if (!strcmp(c->topic, r->topic) &&
                            c->part == r->partition && c->off == r->offset) {
                                *c     = m->replay[--m->nreplay];
                                replay = true;
                        }
                }
                if (replay) {
                        r->outcome = AAGW_UNIFY_REPLAYED;
                        continue;
                }
                ep->touched = true;
                if (r->diverged)
                        mem_audit_add(m, p, AAGW_AUDIT_DIVERGED, ep->seq);
                if (r->rejected) {
                        /* The contract: a rejected record's provenance is
                         * rewritten to its derived id. */
                        p->path_len = 0;
                        p->id_len =
                            aagw_id_derive(SITE, r->topic, r->partition,
                                           r->offset, p->id, sizeof(p->id));
                        p->hlc     = 0;
                        r->outcome = AAGW_UNIFY_REJECTED;
                        mem_audit_add(m, p, AAGW_AUDIT_REJECTED, ep->seq);
                        continue;
                }
                if (r->mode == AAGW_UNIFY_DEDUP) {
                        if (mem_seen_any(m, r->key)) {
                                r->outcome = AAGW_UNIFY_DROPPED;
                                mem_audit_add(m, p, AAGW_AUDIT_DROPPED,
                                              ep->seq);
                                continue;
                        }
                        assert_true(m->nseen < MEM_CAP);
                        memcpy(m->seen[m->nseen].key, r->key, 16);
                        m->seen[m->nseen++].tag = ep->seq;
                        if (m->audit_accepted)
                                mem_audit_add(m, p, AAGW_AUDIT_ACCEPTED,
                                              ep->seq);
                } else {
                        struct mem_win w;
                        win_of(r, ep->seq, &w);
                        int c = mem_win_cmp(m, &w);
                        if (c <= 0) {
                                r->outcome = c < 0 ? AAGW_UNIFY_SUPERSEDED
                                                   : AAGW_UNIFY_IDENTICAL;
                                mem_audit_add(m, p,
                                              c < 0 ? AAGW_AUDIT_SUPERSEDED
                                                    : AAGW_AUDIT_IDENTICAL,
                                              ep->seq);
                                continue;
                        }
                        mem_win_add(m, &w);
                        mem_audit_add(m, p, AAGW_AUDIT_ACCEPTED, ep->seq);
                }
                r->outcome = AAGW_UNIFY_ACCEPTED;
                ep->outstanding++;
        }
        return 0;
}

static void mem_acked(aagw_unify_state_t *st, unsigned e, int out, int32_t part,
                      int64_t off) {
        struct mem_epoch *ep = &((struct mem *)st)->ep[e];
        ep->outstanding--;
        if (off > ep->outmax[out][part])
                ep->outmax[out][part] = off;
}

static void mem_lost(aagw_unify_state_t *st, unsigned e) {
        ((struct mem *)st)->ep[e].outstanding = INT64_MAX / 2;
}

static void mem_slot_reset(struct mem *m, unsigned s) {
        struct mem_epoch *ep = &m->ep[s];
        ep->seq              = 0;
        ep->sealed = ep->touched = false;
        ep->outstanding          = 0;
        for (int o = 0; o < MEM_OUTS; o++)
                for (int p = 0; p < MEM_PARTS; p++)
                        ep->outmax[o][p] = -1;
}

/* Retag every entry tagged 'from' (STORED: drop it when 'drop'). */
static void mem_retag(struct mem *m, uint64_t from, uint64_t to, bool drop) {
#define RETAG(arr, n)                                                          \
        do {                                                                   \
                size_t k = 0;                                                  \
                for (size_t i = 0; i < (n); i++) {                             \
                        if ((arr)[i].tag == from) {                            \
                                if (drop)                                      \
                                        continue;                              \
                                (arr)[i].tag = to;                             \
                        }                                                      \
                        (arr)[k++] = (arr)[i];                                 \
                }                                                              \
                (n) = k;                                                       \
        } while (0)
        RETAG(m->seen, m->nseen);
        RETAG(m->win, m->nwin);
        RETAG(m->audit, m->naudit);
        RETAG(m->pos, m->npos);
#undef RETAG
}

static int mem_commit(struct mem *m) {
        int n = 0;
        for (;;) {
                struct mem_epoch *ep = &m->ep[m->oldest];
                if (!ep->seq || !ep->sealed || ep->outstanding > 0)
                        return n;
                for (int o = 0; o < m->nout; o++)
                        for (int32_t p = 0; p < m->out_parts[o]; p++)
                                if (ep->outmax[o][p] >= 0)
                                        mem_pos_add(m, true, m->out[o], p,
                                                    ep->outmax[o][p] + 1,
                                                    ep->seq);
                mem_retag(m, ep->seq, STORED, false);
                mem_slot_reset(m, m->oldest);
                m->oldest = (m->oldest + 1) % MEM_EPOCHS;
                n++;
        }
}

static int mem_settle(aagw_unify_state_t          *st,
                      const struct aagw_unify_pos *reached, size_t n, bool seal,
                      unsigned *committed, char *errstr, size_t errstr_size) {
        struct mem       *m  = (struct mem *)st;
        struct mem_epoch *ep = &m->ep[m->open];
        (void)errstr;
        (void)errstr_size;

        for (size_t i = 0; i < n; i++) {
                mem_pos_add(m, false, reached[i].topic, reached[i].partition,
                            reached[i].next, ep->seq);
                ep->touched = true;
        }
        if (seal && (ep->touched || ep->outstanding))
                ep->sealed = m->sealed = true;
        *committed = (unsigned)mem_commit(m);
        if (!m->sealed)
                return 1;
        unsigned nxt = (m->open + 1) % MEM_EPOCHS;
        if (m->ep[nxt].seq)
                return 0;
        m->open        = nxt;
        m->ep[nxt].seq = ++m->next_seq;
        m->sealed      = false;
        return 1;
}

static int mem_output(aagw_unify_state_t *st, const char *topic,
                      int32_t nparts) {
        struct mem *m = (struct mem *)st;
        assert_true(m->nout < MEM_OUTS && nparts <= MEM_PARTS);
        copy(m->out[m->nout], sizeof(m->out[0]), topic, strlen(topic));
        m->out_parts[m->nout] = nparts;
        return m->nout++;
}

static int mem_pos(aagw_unify_state_t *st, bool output, const char *topic,
                   int32_t part, int64_t *next, char *errstr,
                   size_t errstr_size) {
        struct mem *m = (struct mem *)st;
        (void)errstr;
        (void)errstr_size;
        for (size_t i = m->npos; i-- > 0;) {
                struct mem_pos *ps = &m->pos[i];
                if (ps->tag == STORED && ps->output == output &&
                    ps->part == part && !strcmp(ps->topic, topic)) {
                        *next = ps->next;
                        return 0;
                }
        }
        return 1;
}

/* A winner found by the fold or restored: kept only if newer. */
static void mem_fold_win(struct mem *m, const struct aagw_unify_rec *r) {
        struct mem_win w;
        win_of(r, FOLDED, &w);
        if (mem_win_cmp(m, &w) > 0)
                mem_win_add(m, &w);
}

static int mem_fold(aagw_unify_state_t *st, struct aagw_unify_rec *r,
                    int64_t now_ms, char *errstr, size_t errstr_size) {
        struct mem *m = (struct mem *)st;
        (void)now_ms;
        (void)errstr;
        (void)errstr_size;

        aagw_unify_key(SITE, r);
        if (r->mode == AAGW_UNIFY_DEDUP) {
                assert_true(m->nseen < MEM_CAP);
                memcpy(m->seen[m->nseen].key, r->key, 16);
                m->seen[m->nseen++].tag = FOLDED;
        } else {
                mem_fold_win(m, r);
        }
        if (r->mode == AAGW_UNIFY_LWW || m->audit_accepted)
                mem_audit_add(m, r->prov, AAGW_AUDIT_ACCEPTED, FOLDED);
        assert_true(m->nreplay < MEM_CAP);
        struct mem_coords *c = &m->replay[m->nreplay++];
        copy(c->topic, sizeof(c->topic), r->topic, strlen(r->topic));
        c->part    = r->partition;
        c->off     = r->offset;
        r->outcome = AAGW_UNIFY_ACCEPTED;
        return 0;
}

static void mem_fold_out(aagw_unify_state_t *st, const char *topic,
                         int32_t part, int64_t next) {
        mem_pos_add((struct mem *)st, true, topic, part, next, FOLDED);
}

static int mem_fold_commit(aagw_unify_state_t *st, bool end, char *errstr,
                           size_t errstr_size) {
        (void)errstr;
        (void)errstr_size;
        if (end)
                mem_retag((struct mem *)st, FOLDED, STORED, false);
        return 0;
}

static int mem_restore(aagw_unify_state_t *st, const struct aagw_unify_rec *r,
                       int64_t time_ms, char *errstr, size_t errstr_size) {
        struct mem *m = (struct mem *)st;
        (void)time_ms;
        (void)errstr;
        (void)errstr_size;
        if (r->mode == AAGW_UNIFY_DEDUP) {
                assert_true(m->nseen < MEM_CAP);
                memcpy(m->seen[m->nseen].key, r->key, 16);
                m->seen[m->nseen++].tag = FOLDED;
        } else {
                mem_fold_win(m, r);
        }
        return 0;
}

static int mem_drop(aagw_unify_state_t *st) {
        struct mem *m = (struct mem *)st;
        for (unsigned s = 0; s < MEM_EPOCHS; s++) {
                if (m->ep[s].seq)
                        mem_retag(m, m->ep[s].seq, 0, true);
                mem_slot_reset(m, s);
        }
        m->open = m->oldest = 0;
        m->sealed           = false;
        m->ep[0].seq        = ++m->next_seq;
        return 0;
}

static const struct aagw_unify_state_ops mem_ops = {
    .decide      = mem_decide,
    .acked       = mem_acked,
    .lost        = mem_lost,
    .settle      = mem_settle,
    .output      = mem_output,
    .pos         = mem_pos,
    .fold        = mem_fold,
    .fold_out    = mem_fold_out,
    .fold_commit = mem_fold_commit,
    .restore     = mem_restore,
    .drop        = mem_drop,
};

/* A new process on the same store: everything not stored is gone. */
static void mem_restart(struct mem *m) {
        for (unsigned s = 0; s < MEM_EPOCHS; s++)
                if (m->ep[s].seq)
                        mem_retag(m, m->ep[s].seq, 0, true);
        mem_retag(m, FOLDED, 0, true);
        m->nreplay = 0;
        m->nout    = 0;
        for (unsigned s = 0; s < MEM_EPOCHS; s++)
                mem_slot_reset(m, s);
        m->open = m->oldest = 0;
        m->sealed           = false;
        m->ep[0].seq        = ++m->next_seq;
}

/* ========================== THE TWO, SIDE BY SIDE ======================== */

enum { MEM, DECIDER, NIMPL };
static const char *const impl_name[NIMPL] = {"double", "decider"};

struct impl {
        int                                kind;
        const struct aagw_unify_state_ops *ops;
        aagw_unify_state_t                *st;
        struct mem                        *mem;
        aagw_statedir_t                   *sd;
        aagw_store_t                      *store;
        bool                               audit_accepted;
        char                               err[512];
};

static void impl_new_state(struct impl *im) {
        if (im->kind == MEM) {
                im->ops = &mem_ops;
                im->st  = (aagw_unify_state_t *)im->mem;
                return;
        }
        struct aagw_decider_conf c = {.store          = im->store,
                                      .site           = SITE,
                                      .audit_accepted = im->audit_accepted};
        aagw_decider_t *d = aagw_decider_new(&c, im->err, sizeof(im->err));
        if (!d)
                fail_msg("decider: %s", im->err);
        im->ops = &aagw_decider_ops;
        im->st  = d;
}

static void impl_open(struct impl *im, int kind, const char *sub,
                      bool audit_accepted) {
        memset(im, 0, sizeof(*im));
        im->kind           = kind;
        im->audit_accepted = audit_accepted;
        if (kind == MEM) {
                im->mem = calloc(1, sizeof(*im->mem));
                assert_non_null(im->mem);
                im->mem->audit_accepted = audit_accepted;
                mem_restart(im->mem);
        } else {
                char                   dir[512];
                struct aagw_store_opts o = {.clock = fixed_clock};
                snprintf(dir, sizeof(dir), "%s/%s", tmpdir, sub);
                if (!(im->sd =
                          aagw_statedir_open(dir, im->err, sizeof(im->err))))
                        fail_msg("statedir: %s", im->err);
                if (!(im->store = aagw_store_open(im->sd, &o, im->err,
                                                  sizeof(im->err))))
                        fail_msg("store: %s", im->err);
        }
        impl_new_state(im);
}

/* kill -9 and start again: the state in memory is gone, the store not. */
static void impl_restart(struct impl *im) {
        if (im->kind == MEM)
                mem_restart(im->mem);
        else
                aagw_decider_destroy(im->st);
        impl_new_state(im);
}

static void impl_close(struct impl *im) {
        if (im->kind == MEM) {
                free(im->mem);
                return;
        }
        aagw_decider_destroy(im->st);
        aagw_store_close(im->store);
        aagw_statedir_close(im->sd);
}

/* ------------------------------- the driver ------------------------------ */

/* Inputs: two logical topics, each read at the site as itself and as the
 * copy from west, two partitions each. */
#define NIT 4
#define NP 2
#define PER 120
#define NOUT 2
#define OUTP 3
#define BATCH 12
#define LOG 4096
#define IDS 200 /* dedup ids drawn from */
#define KEYS 24 /* lww entity keys drawn from */

static const char *const in_topic[NIT]   = {"clicks", "west.clicks", "profiles",
                                            "west.profiles"};
static const int         in_out[NIT]     = {0, 0, 1, 1};
static const char *const out_topic[NOUT] = {"clicks.unified",
                                            "profiles.unified"};

/* One input record as written (the generator's truth). */
struct irec {
        char     id[24];
        char     origin[8];
        uint64_t hlc;
        char     ekey[8];
        bool     has_ekey, tombstone, bad, diverged;
};

/* One record of a unified topic: where it was read. */
struct orec {
        int      ti;
        int32_t  p;
        int64_t  off;
        unsigned ep; /* the epoch decide() put it in */
};

/* One output partition as the cluster holds it; [acked, len) is in
 * flight. */
struct olog {
        struct orec e[LOG];
        size_t      len, acked;
};

struct drv {
        struct impl           im;
        int                   out_id[NOUT];
        int64_t               next[NIT][NP];
        bool                  dirty[NIT][NP];
        struct olog           log[NOUT][OUTP];
        struct aagw_prov      prov[BATCH];
        struct aagw_unify_rec recs[BATCH];
        size_t                nrec;
        /* Contract calls on the batch path and outcomes, for the TAP
         * comment. */
        uint64_t batches, calls_decide, calls_acked, calls_settle;
        uint64_t outcomes[AAGW_UNIFY_REPLAYED + 1];
};

static struct irec inputs[NIT][NP][PER];

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        return (uint32_t)(rng_state % n);
}

static void gen_inputs(uint64_t seed) {
        rng_state = seed;
        for (int ti = 0; ti < NIT; ti++)
                for (int p = 0; p < NP; p++)
                        for (int o = 0; o < PER; o++) {
                                struct irec *r = &inputs[ti][p][o];
                                memset(r, 0, sizeof(*r));
                                bool west = ti == 1 || ti == 3;
                                if (in_out[ti] == 0) {
                                        snprintf(r->id, sizeof(r->id), "c%u",
                                                 rnd(IDS));
                                        snprintf(r->origin, sizeof(r->origin),
                                                 "%s", west ? "west" : "east");
                                        r->hlc = 1 + rnd(1000);
                                } else {
                                        r->hlc = 1 + rnd(60);
                                        snprintf(r->origin, sizeof(r->origin),
                                                 "%s",
                                                 rnd(2) ? "west" : "east");
                                        snprintf(r->id, sizeof(r->id), "v%u",
                                                 (unsigned)r->hlc);
                                        r->has_ekey = rnd(30) != 0;
                                        snprintf(r->ekey, sizeof(r->ekey),
                                                 "u%u", rnd(KEYS));
                                        r->tombstone = rnd(8) == 0;
                                }
                                r->bad      = rnd(30) == 0;
                                r->diverged = rnd(20) == 0;
                        }
}

/* The contract's record for input record 'ti' ['p'] 'off', as the stage's
 * pass 1 builds it (keys for records that are not rejected only). */
static void to_rec(int ti, int32_t p, int64_t off, struct aagw_prov *pv,
                   struct aagw_unify_rec *r) {
        static char        scope[NOUT][AAGW_ALIAS_MAX + AAGW_TOPIC_MAX + 2];
        const struct irec *in = &inputs[ti][p][off];

        aagw_unify_lww_scope(SITE, "clicks", scope[0], sizeof(scope[0]));
        aagw_unify_lww_scope(SITE, "profiles", scope[1], sizeof(scope[1]));
        memset(pv, 0, sizeof(*pv));
        snprintf(pv->origin, sizeof(pv->origin), "%s", in->origin);
        snprintf(pv->path[0], sizeof(pv->path[0]), "%s", in->origin);
        pv->path_len = 1;
        pv->id_len   = strlen(in->id);
        memcpy(pv->id, in->id, pv->id_len);
        pv->hlc = in->hlc;
        memset(r, 0, sizeof(*r));
        r->mode      = in_out[ti] ? AAGW_UNIFY_LWW : AAGW_UNIFY_DEDUP;
        r->prov      = pv;
        r->scope     = scope[in_out[ti]];
        r->topic     = in_topic[ti];
        r->partition = p;
        r->offset    = off;
        r->tombstone = in->tombstone;
        r->diverged  = in->diverged;
        if (r->mode == AAGW_UNIFY_LWW && in->has_ekey) {
                r->ekey     = in->ekey;
                r->ekey_len = strlen(in->ekey);
        }
        r->rejected = in->bad || (r->mode == AAGW_UNIFY_LWW && !r->ekey);
        if (!r->rejected)
                aagw_unify_key(SITE, r);
}

/* unify_out_part(). */
static int32_t out_part(const struct aagw_unify_rec *r) {
        uint64_t hk;
        memcpy(&hk, r->key, 8);
        return (int32_t)(hk % OUTP);
}

static void drv_open(struct drv *d, int kind, const char *sub,
                     bool audit_accepted) {
        memset(d, 0, sizeof(*d));
        impl_open(&d->im, kind, sub, audit_accepted);
        for (int o = 0; o < NOUT; o++) {
                d->out_id[o] = d->im.ops->output(d->im.st, out_topic[o], OUTP);
                assert_true(d->out_id[o] >= 0);
        }
}

/* The stage's pass 1 for the inputs picked: 'picks' pairs of (topic,
 * partition), each taking the partition's next record. */
static void drv_take(struct drv *d, const int (*picks)[2], size_t npick) {
        d->nrec = 0;
        for (size_t k = 0; k < npick; k++) {
                int     ti = picks[k][0];
                int32_t p  = picks[k][1];
                if (d->next[ti][p] >= PER)
                        continue;
                int64_t off     = d->next[ti][p]++;
                d->dirty[ti][p] = true;
                to_rec(ti, p, off, &d->prov[d->nrec], &d->recs[d->nrec]);
                d->nrec++;
        }
}

/* Pass 2 and the sends of pass 3: decide(), then each accepted record to
 * its output partition. */
static void drv_decide(struct drv *d) {
        unsigned ep;
        if (!d->nrec)
                return;
        d->batches++;
        d->calls_decide++;
        if (d->im.ops->decide(d->im.st, d->recs, d->nrec, NOW_MS, &ep,
                              d->im.err, sizeof(d->im.err)))
                fail_msg("%s: decide: %s", impl_name[d->im.kind], d->im.err);
        for (size_t i = 0; i < d->nrec; i++) {
                struct aagw_unify_rec *r = &d->recs[i];
                d->outcomes[r->outcome]++;
                if (r->outcome != AAGW_UNIFY_ACCEPTED)
                        continue;
                int          o  = r->mode == AAGW_UNIFY_LWW;
                struct olog *lg = &d->log[o][out_part(r)];
                assert_true(lg->len < LOG);
                int ti = 0;
                while (strcmp(in_topic[ti], r->topic))
                        ti++;
                lg->e[lg->len++] =
                    (struct orec){ti, r->partition, r->offset, ep};
        }
}

/* Delivery reports: the first 'k' in flight of output 'o' ['p']. */
static void drv_ack(struct drv *d, int o, int32_t p, size_t k) {
        struct olog *lg = &d->log[o][p];
        for (; k && lg->acked < lg->len; k--, lg->acked++) {
                d->calls_acked++;
                d->im.ops->acked(d->im.st, lg->e[lg->acked].ep, d->out_id[o], p,
                                 (int64_t)lg->acked);
        }
}

static size_t drv_inflight(const struct drv *d) {
        size_t n = 0;
        for (int o = 0; o < NOUT; o++)
                for (int p = 0; p < OUTP; p++)
                        n += d->log[o][p].len - d->log[o][p].acked;
        return n;
}

/* settle(): with the batch's input positions and a seal (seal_epoch()),
 * or neither (commit_ready()). */
static int drv_settle(struct drv *d, bool seal, unsigned *committed) {
        struct aagw_unify_pos reached[NIT * NP];
        size_t                n = 0;
        for (int ti = 0; seal && ti < NIT; ti++)
                for (int p = 0; p < NP; p++)
                        if (d->dirty[ti][p]) {
                                reached[n++] = (struct aagw_unify_pos){
                                    in_topic[ti], p, d->next[ti][p]};
                                d->dirty[ti][p] = false;
                        }
        d->calls_settle++;
        int rc = d->im.ops->settle(d->im.st, reached, n, seal, committed,
                                   d->im.err, sizeof(d->im.err));
        if (rc < 0)
                fail_msg("%s: settle: %s", impl_name[d->im.kind], d->im.err);
        return rc;
}

/* ------------------------------ lockstep ------------------------------- */

/* Both implementations, the same calls. */
struct pair {
        struct drv d[NIMPL];
};

static void same_outcomes(struct pair *pr) {
        struct drv *a = &pr->d[MEM], *b = &pr->d[DECIDER];
        assert_int_equal(a->nrec, b->nrec);
        for (size_t i = 0; i < a->nrec; i++) {
                if (a->recs[i].outcome != b->recs[i].outcome)
                        fail_msg("%s [%d] %" PRId64 ": double %d, decider %d",
                                 a->recs[i].topic, (int)a->recs[i].partition,
                                 a->recs[i].offset, (int)a->recs[i].outcome,
                                 (int)b->recs[i].outcome);
                assert_int_equal(a->prov[i].id_len, b->prov[i].id_len);
                assert_memory_equal(a->prov[i].id, b->prov[i].id,
                                    a->prov[i].id_len);
        }
}

static int pair_settle(struct pair *pr, bool seal) {
        unsigned c[NIMPL];
        int      rc[NIMPL];
        for (int i = 0; i < NIMPL; i++)
                rc[i] = drv_settle(&pr->d[i], seal, &c[i]);
        assert_int_equal(rc[MEM], rc[DECIDER]);
        assert_int_equal(c[MEM], c[DECIDER]);
        return rc[MEM];
}

static void pair_ack(struct pair *pr, int o, int32_t p, size_t k) {
        for (int i = 0; i < NIMPL; i++)
                drv_ack(&pr->d[i], o, p, k);
}

static void pair_ack_all(struct pair *pr) {
        for (int o = 0; o < NOUT; o++)
                for (int p = 0; p < OUTP; p++)
                        pair_ack(pr, o, p, LOG);
}

/* The stage's seal_epoch(): seal, and while the next slot is taken poll
 * for delivery reports (here: every record in flight is acknowledged) and
 * settle again.  Returns false when nothing is in flight that could free
 * a slot (a lost record holds them all: the stage would be failing). */
static bool pair_seal(struct pair *pr) {
        int rc = pair_settle(pr, true);
        while (!rc) {
                if (!drv_inflight(&pr->d[MEM]))
                        return false;
                pair_ack_all(pr);
                rc = pair_settle(pr, false);
        }
        return true;
}

static void pair_pos(struct pair *pr, bool output, const char *topic, int32_t p,
                     int64_t *next) {
        int64_t v[NIMPL] = {-1, -1};
        int     rc[NIMPL];
        for (int i = 0; i < NIMPL; i++) {
                struct impl *im = &pr->d[i].im;
                rc[i] = im->ops->pos(im->st, output, topic, p, &v[i], im->err,
                                     sizeof(im->err));
                assert_true(rc[i] >= 0);
        }
        assert_int_equal(rc[MEM], rc[DECIDER]);
        assert_int_equal(v[MEM], v[DECIDER]);
        *next = rc[MEM] ? -1 : v[MEM];
}

/* The output record at 'o' ['p'] 'off' as unify_decode_output() gives it
 * to fold(): provenance, input coordinates, entity key. */
static void from_output(const struct orec *e, struct aagw_prov *pv,
                        struct aagw_unify_rec *r) {
        to_rec(e->ti, e->p, e->off, pv, r);
        r->rejected = false;
        r->diverged = false;
        memset(r->key, 0, sizeof(r->key)); /* fold() sets it */
}

/* A crash (kill -9) and the restart's start-up scan, as
 * unify_recover_output() makes it: of the records in flight, each output
 * partition kept a prefix (the idempotent producer's guarantee); every
 * record from the stored output position to the end is folded in; inputs
 * resume at the stored positions. */
static void pair_crash(struct pair *pr) {
        for (int o = 0; o < NOUT; o++)
                for (int p = 0; p < OUTP; p++) {
                        size_t keep =
                            rnd((uint32_t)(pr->d[MEM].log[o][p].len -
                                           pr->d[MEM].log[o][p].acked + 1));
                        for (int i = 0; i < NIMPL; i++) {
                                struct olog *lg = &pr->d[i].log[o][p];
                                lg->len         = lg->acked + keep;
                                lg->acked       = lg->len;
                        }
                }
        for (int i = 0; i < NIMPL; i++) {
                struct drv *d = &pr->d[i];
                impl_restart(&d->im);
                for (int o = 0; o < NOUT; o++)
                        d->out_id[o] =
                            d->im.ops->output(d->im.st, out_topic[o], OUTP);
        }
        for (int o = 0; o < NOUT; o++) {
                for (int32_t p = 0; p < OUTP; p++) {
                        int64_t from;
                        pair_pos(pr, true, out_topic[o], p, &from);
                        for (int i = 0; i < NIMPL; i++) {
                                struct drv      *d  = &pr->d[i];
                                struct olog     *lg = &d->log[o][p];
                                struct aagw_prov pv;
                                for (size_t k = from < 0 ? 0 : (size_t)from;
                                     k < lg->len; k++) {
                                        struct aagw_unify_rec r;
                                        from_output(&lg->e[k], &pv, &r);
                                        if (d->im.ops->fold(
                                                d->im.st, &r, NOW_MS, d->im.err,
                                                sizeof(d->im.err)) ||
                                            d->im.ops->fold_commit(
                                                d->im.st, false, d->im.err,
                                                sizeof(d->im.err)))
                                                fail_msg("fold: %s", d->im.err);
                                        assert_int_equal(r.outcome,
                                                         AAGW_UNIFY_ACCEPTED);
                                        assert_int_equal(out_part(&r), p);
                                }
                                d->im.ops->fold_out(d->im.st, out_topic[o], p,
                                                    (int64_t)lg->len);
                        }
                }
                for (int i = 0; i < NIMPL; i++) {
                        struct impl *im = &pr->d[i].im;
                        assert_int_equal(im->ops->fold_commit(im->st, true,
                                                              im->err,
                                                              sizeof(im->err)),
                                         0);
                }
        }
        for (int ti = 0; ti < NIT; ti++)
                for (int32_t p = 0; p < NP; p++) {
                        int64_t next;
                        pair_pos(pr, false, in_topic[ti], p, &next);
                        for (int i = 0; i < NIMPL; i++) {
                                pr->d[i].next[ti][p]  = next < 0 ? 0 : next;
                                pr->d[i].dirty[ti][p] = false;
                        }
                }
}

/* ------------------------------ the checks ----------------------------- */

struct audit_row {
        char id[MEM_ID];
        int  verdict;
};

static int row_cmp(const void *a, const void *b) {
        const struct audit_row *x = a, *y = b;
        int                     c = strcmp(x->id, y->id);
        return c ? c : x->verdict - y->verdict;
}

struct rows {
        struct audit_row r[MEM_CAP];
        size_t           n;
};

static int collect_row(const struct aagw_audit *a, void *opaque) {
        struct rows *g = opaque;
        assert_true(g->n < MEM_CAP);
        copy(g->r[g->n].id, sizeof(g->r[0].id), a->id, a->id_len);
        g->r[g->n++].verdict = (int)a->verdict;
        return 0;
}

/* The decider's audit log is the double's: the same entries (id and
 * verdict), order aside. */
static void same_audit(struct pair *pr) {
        struct rows *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
        struct mem  *m = pr->d[MEM].im.mem;
        assert_true(a && b);
        for (size_t i = 0; i < m->naudit; i++)
                if (m->audit[i].tag == STORED) {
                        copy(a->r[a->n].id, sizeof(a->r[0].id), m->audit[i].id,
                             m->audit[i].id_len);
                        a->r[a->n++].verdict = m->audit[i].verdict;
                }
        struct impl *im = &pr->d[DECIDER].im;
        assert_int_equal(aagw_store_audit_since(im->store, 0, -1, collect_row,
                                                b, im->err, sizeof(im->err)),
                         AAGW_OK);
        qsort(a->r, a->n, sizeof(a->r[0]), row_cmp);
        qsort(b->r, b->n, sizeof(b->r[0]), row_cmp);
        assert_int_equal(a->n, b->n);
        for (size_t i = 0; i < a->n; i++) {
                assert_string_equal(a->r[i].id, b->r[i].id);
                assert_int_equal(a->r[i].verdict, b->r[i].verdict);
        }
        free(a);
        free(b);
}

/* What the unified topics must hold whatever happened: every id once
 * (dedup); per entity, versions in increasing order ending with the
 * newest of its inputs (lww).  Records that were rejected never appear. */
static void check_outputs(const struct drv *d) {
        /* dedup: ids of the inputs not rejected, each exactly once */
        int want[IDS] = {0}, have[IDS] = {0};
        for (int ti = 0; ti < 2; ti++)
                for (int p = 0; p < NP; p++)
                        for (int o = 0; o < PER; o++)
                                if (!inputs[ti][p][o].bad)
                                        want[atoi(inputs[ti][p][o].id + 1)] = 1;
        for (int p = 0; p < OUTP; p++)
                for (size_t k = 0; k < d->log[0][p].len; k++) {
                        const struct orec *e = &d->log[0][p].e[k];
                        assert_false(inputs[e->ti][e->p][e->off].bad);
                        have[atoi(inputs[e->ti][e->p][e->off].id + 1)]++;
                }
        for (int i = 0; i < IDS; i++)
                assert_int_equal(have[i], want[i]);

        /* lww: per entity key, strictly increasing, ending at the max */
        for (int u = 0; u < KEYS; u++) {
                char                ek[8];
                struct aagw_version best, last, v;
                bool                any = false, seen = false;
                snprintf(ek, sizeof(ek), "u%d", u);
                for (int ti = 2; ti < NIT; ti++)
                        for (int p = 0; p < NP; p++)
                                for (int o = 0; o < PER; o++) {
                                        const struct irec *in =
                                            &inputs[ti][p][o];
                                        if (in->bad || !in->has_ekey ||
                                            strcmp(in->ekey, ek))
                                                continue;
                                        memset(&v, 0, sizeof(v));
                                        v.hlc = in->hlc;
                                        snprintf(v.origin, sizeof(v.origin),
                                                 "%s", in->origin);
                                        v.id_len = strlen(in->id);
                                        memcpy(v.id, in->id, v.id_len);
                                        if (!any ||
                                            aagw_version_cmp(&v, &best) > 0)
                                                best = v;
                                        any = true;
                                }
                for (int p = 0; p < OUTP; p++)
                        for (size_t k = 0; k < d->log[1][p].len; k++) {
                                const struct orec *e = &d->log[1][p].e[k];
                                const struct irec *in =
                                    &inputs[e->ti][e->p][e->off];
                                if (strcmp(in->ekey, ek))
                                        continue;
                                assert_false(in->bad);
                                assert_true(in->has_ekey);
                                memset(&v, 0, sizeof(v));
                                v.hlc = in->hlc;
                                snprintf(v.origin, sizeof(v.origin), "%s",
                                         in->origin);
                                v.id_len = strlen(in->id);
                                memcpy(v.id, in->id, v.id_len);
                                if (seen)
                                        assert_true(
                                            aagw_version_cmp(&v, &last) > 0);
                                last = v;
                                seen = true;
                        }
                assert_int_equal(seen, any);
                if (any)
                        assert_int_equal(aagw_version_cmp(&last, &best), 0);
        }
}

/* ============================== THE TESTS ================================ */

static int group_setup(void **state) {
        (void)state;
        return (tmpdir = harness_tmpdir_new("contract")) ? 0 : -1;
}

static int group_teardown(void **state) {
        int rc = harness_rmtree(tmpdir);

        (void)state;
        free(tmpdir);
        tmpdir = NULL;
        return rc ? -1 : 0;
}

/* Input record 'ti' ['p'] 'off' is 'id' from 'origin'. */
static struct irec *set_in(int ti, int32_t p, int64_t off, const char *id,
                           const char *origin) {
        struct irec *in = &inputs[ti][p][off];
        memset(in, 0, sizeof(*in));
        snprintf(in->id, sizeof(in->id), "%s", id);
        snprintf(in->origin, sizeof(in->origin), "%s", origin);
        return in;
}

/* A batch of one record: input 'ti' ['p'] 'off'. */
static void one(struct drv *d, int ti, int32_t p, int64_t off) {
        int pick[1][2] = {{ti, p}};
        d->next[ti][p] = off;
        drv_take(d, (const int(*)[2])pick, 1);
}

/* Hand-written expectations, the same for the double and the decider:
 * dedup verdicts, lww verdicts, what an acknowledgement lets commit and
 * the positions it stores. */
static void test_outcomes(void **state) {
        (void)state;
        for (int kind = 0; kind < NIMPL; kind++) {
                struct drv *d = calloc(1, sizeof(*d));
                unsigned    c;
                int64_t     next;
                char        sub[32];
                assert_non_null(d);
                snprintf(sub, sizeof(sub), "outcomes-%d", kind);
                drv_open(d, kind, sub, false);
                const struct aagw_unify_state_ops *ops = d->im.ops;

                /* dedup: a, b, then a again from west: the copy drops */
                set_in(0, 0, 0, "a", "east");
                set_in(0, 0, 1, "b", "east");
                set_in(1, 0, 0, "a", "west");
                int picks[3][2] = {{0, 0}, {0, 0}, {1, 0}};
                drv_take(d, (const int(*)[2])picks, 3);
                drv_decide(d);
                assert_int_equal(d->recs[0].outcome, AAGW_UNIFY_ACCEPTED);
                assert_int_equal(d->recs[1].outcome, AAGW_UNIFY_ACCEPTED);
                assert_int_equal(d->recs[2].outcome, AAGW_UNIFY_DROPPED);
                /* sealed, not acknowledged: nothing stored */
                assert_int_equal(drv_settle(d, true, &c), 1);
                assert_int_equal(c, 0);
                assert_int_equal(ops->pos(d->im.st, false, "clicks", 0, &next,
                                          d->im.err, sizeof(d->im.err)),
                                 1);
                int32_t pa = out_part(&d->recs[0]), pb = out_part(&d->recs[1]);
                drv_ack(d, 0, pa, LOG);
                drv_ack(d, 0, pb, LOG);
                assert_int_equal(drv_settle(d, false, &c), 1);
                assert_int_equal(c, 1);
                assert_int_equal(ops->pos(d->im.st, false, "clicks", 0, &next,
                                          d->im.err, sizeof(d->im.err)),
                                 0);
                assert_int_equal(next, 2);
                assert_int_equal(ops->pos(d->im.st, false, "west.clicks", 0,
                                          &next, d->im.err, sizeof(d->im.err)),
                                 0);
                assert_int_equal(next, 1);
                assert_int_equal(ops->pos(d->im.st, true, "clicks.unified", pa,
                                          &next, d->im.err, sizeof(d->im.err)),
                                 0);
                assert_int_equal(next, (int64_t)d->log[0][pa].len);

                /* lww on one entity: v10 wins, v5 is older, v10 again
                 * (the copy) is identical, v20 (a tombstone) wins */
                static const struct {
                        unsigned hlc;
                        bool     tomb;
                        int      want;
                } lw[] = {{10, false, AAGW_UNIFY_ACCEPTED},
                          {5, false, AAGW_UNIFY_SUPERSEDED},
                          {10, false, AAGW_UNIFY_IDENTICAL},
                          {20, true, AAGW_UNIFY_ACCEPTED}};
                int lpicks[4][2];
                for (int i = 0; i < 4; i++) {
                        char id[16];
                        snprintf(id, sizeof(id), "v%u", lw[i].hlc);
                        struct irec *in = set_in(2, 1, i, id, "east");
                        strcpy(in->ekey, "u1");
                        in->has_ekey  = true;
                        in->hlc       = lw[i].hlc;
                        in->tombstone = lw[i].tomb;
                        lpicks[i][0]  = 2;
                        lpicks[i][1]  = 1;
                }
                drv_take(d, (const int(*)[2])lpicks, 4);
                drv_decide(d);
                for (int i = 0; i < 4; i++)
                        assert_int_equal(d->recs[i].outcome, lw[i].want);
                /* one entity, one output partition, two records */
                int32_t pu = out_part(&d->recs[0]);
                assert_int_equal(d->log[1][pu].len, 2);
                assert_int_equal(drv_settle(d, true, &c), 1);
                drv_ack(d, 1, pu, 1);
                assert_int_equal(drv_settle(d, false, &c), 1);
                assert_int_equal(c, 0); /* one of two acknowledged */
                drv_ack(d, 1, pu, 1);
                assert_int_equal(drv_settle(d, false, &c), 1);
                assert_int_equal(c, 1);
                assert_int_equal(ops->pos(d->im.st, true, "profiles.unified",
                                          pu, &next, d->im.err,
                                          sizeof(d->im.err)),
                                 0);
                assert_int_equal(next, 2);

                /* Epochs commit in order: the later one acknowledged first
                 * waits for the earlier. */
                set_in(0, 1, 0, "e1", "east");
                set_in(0, 1, 1, "e2", "east");
                one(d, 0, 1, 0);
                drv_decide(d);
                int32_t p1 = out_part(&d->recs[0]);
                assert_int_equal(drv_settle(d, true, &c), 1);
                one(d, 0, 1, 1);
                drv_decide(d);
                int32_t p2 = out_part(&d->recs[0]);
                assert_int_equal(drv_settle(d, true, &c), 1);
                if (p1 != p2) {
                        drv_ack(d, 0, p2, LOG);
                        assert_int_equal(drv_settle(d, false, &c), 1);
                        assert_int_equal(c, 0);
                        assert_int_equal(ops->pos(d->im.st, false, "clicks", 1,
                                                  &next, d->im.err,
                                                  sizeof(d->im.err)),
                                         1);
                }
                drv_ack(d, 0, p1, LOG);
                drv_ack(d, 0, p2, LOG);
                assert_int_equal(drv_settle(d, false, &c), 1);
                assert_int_equal(c, 2);
                assert_int_equal(ops->pos(d->im.st, false, "clicks", 1, &next,
                                          d->im.err, sizeof(d->im.err)),
                                 0);
                assert_int_equal(next, 2);

                /* A lost record: its epoch and every later one stay. */
                set_in(0, 1, 2, "l1", "east");
                set_in(0, 1, 3, "l2", "east");
                one(d, 0, 1, 2);
                drv_decide(d);
                struct olog *ll = &d->log[0][out_part(&d->recs[0])];
                ops->lost(d->im.st, ll->e[ll->len - 1].ep);
                ll->len--; /* never written */
                assert_int_equal(drv_settle(d, true, &c), 1);
                one(d, 0, 1, 3);
                drv_decide(d);
                assert_int_equal(drv_settle(d, true, &c), 1);
                drv_ack(d, 0, out_part(&d->recs[0]), LOG);
                assert_int_equal(drv_settle(d, false, &c), 1);
                assert_int_equal(c, 0);
                assert_int_equal(ops->pos(d->im.st, false, "clicks", 1, &next,
                                          d->im.err, sizeof(d->im.err)),
                                 0);
                assert_int_equal(next, 2);
                impl_close(&d->im);
                free(d);
        }
}

/* Scale-out's calls: drop() forgets what an aborted transaction decided
 * (the same records are new again), restore() takes decisions from a
 * changelog (an id seen, a winner only if newer). */
static void test_drop_and_restore(void **state) {
        (void)state;
        for (int kind = 0; kind < NIMPL; kind++) {
                struct drv *d = calloc(1, sizeof(*d));
                unsigned    c;
                char        sub[32];
                assert_non_null(d);
                snprintf(sub, sizeof(sub), "drop-%d", kind);
                drv_open(d, kind, sub, false);
                const struct aagw_unify_state_ops *ops = d->im.ops;
                set_in(0, 0, 0, "d1", "east");
                one(d, 0, 0, 0);
                drv_decide(d);
                assert_int_equal(d->recs[0].outcome, AAGW_UNIFY_ACCEPTED);
                assert_int_equal(ops->drop(d->im.st), 0);
                one(d, 0, 0, 0);
                drv_decide(d);
                assert_int_equal(d->recs[0].outcome, AAGW_UNIFY_ACCEPTED);

                /* restored: id r1 seen, winner v10 of u2 (not v9 after) */
                struct aagw_prov      pv;
                struct aagw_unify_rec r;
                set_in(1, 0, 0, "r1", "west");
                to_rec(1, 0, 0, &pv, &r);
                assert_int_equal(ops->restore(d->im.st, &r, NOW_MS, d->im.err,
                                              sizeof(d->im.err)),
                                 0);
                struct irec *w = set_in(3, 0, 0, "v10", "west");
                strcpy(w->ekey, "u2");
                w->has_ekey = true;
                for (unsigned hlc = 10; hlc >= 9; hlc--) {
                        w->hlc = hlc;
                        snprintf(w->id, sizeof(w->id), "v%u", hlc);
                        to_rec(3, 0, 0, &pv, &r);
                        assert_int_equal(ops->restore(d->im.st, &r, NOW_MS,
                                                      d->im.err,
                                                      sizeof(d->im.err)),
                                         0);
                }
                assert_int_equal(ops->fold_commit(d->im.st, true, d->im.err,
                                                  sizeof(d->im.err)),
                                 0);
                one(d, 1, 0, 0);
                drv_decide(d);
                assert_int_equal(d->recs[0].outcome, AAGW_UNIFY_DROPPED);
                w->hlc = 9;
                strcpy(w->id, "v9");
                one(d, 3, 0, 0);
                drv_decide(d);
                assert_int_equal(d->recs[0].outcome, AAGW_UNIFY_SUPERSEDED);
                w->hlc = 10;
                strcpy(w->id, "v10");
                one(d, 3, 0, 0);
                drv_decide(d);
                assert_int_equal(d->recs[0].outcome, AAGW_UNIFY_IDENTICAL);
                assert_int_equal(drv_settle(d, true, &c), 1);
                impl_close(&d->im);
                free(d);
        }
}

/* The model check: random batches, acknowledgements in any order across
 * partitions, crashes with part of what was in flight in the output, lost
 * records, aborted transactions; the double and the decider in lockstep. */
struct counts {
        int crashes, losts, drops;
};

static void run_model(uint64_t seed, bool audit_accepted, struct counts *c) {
        struct pair *pr = calloc(1, sizeof(*pr));
        char         sub[64];
        assert_non_null(pr);
        gen_inputs(seed);
        for (int i = 0; i < NIMPL; i++) {
                snprintf(sub, sizeof(sub), "model-%llu-%d-%d",
                         (unsigned long long)seed, audit_accepted, i);
                drv_open(&pr->d[i], i, sub, audit_accepted);
        }
        rng_state = seed * 7919 + 1;
        for (int step = 0; step < 2000; step++) {
                struct drv *m    = &pr->d[MEM];
                bool        done = true;
                for (int ti = 0; ti < NIT; ti++)
                        for (int p = 0; p < NP; p++)
                                done &= m->next[ti][p] >= PER;
                if (done)
                        break;
                int    picks[BATCH][2];
                size_t npick = 1 + rnd(BATCH);
                for (size_t k = 0; k < npick; k++) {
                        picks[k][0] = (int)rnd(NIT);
                        picks[k][1] = (int)rnd(NP);
                }
                uint32_t what = rnd(40);
                if (what == 0) {
                        /* A transaction aborted: everything before it is
                         * stored, this batch is dropped and read again. */
                        pair_ack_all(pr);
                        assert_true(pair_seal(pr));
                        pair_settle(pr, false);
                        int64_t saved[NIT][NP];
                        size_t  len[NOUT][OUTP];
                        memcpy(saved, m->next, sizeof(saved));
                        for (int o = 0; o < NOUT; o++)
                                for (int p = 0; p < OUTP; p++)
                                        len[o][p] = m->log[o][p].len;
                        for (int i = 0; i < NIMPL; i++) {
                                struct drv *d = &pr->d[i];
                                drv_take(d, (const int(*)[2])picks, npick);
                                drv_decide(d);
                                assert_int_equal(d->im.ops->drop(d->im.st), 0);
                                memcpy(d->next, saved, sizeof(saved));
                                memset(d->dirty, 0, sizeof(d->dirty));
                                for (int o = 0; o < NOUT; o++)
                                        for (int p = 0; p < OUTP; p++)
                                                d->log[o][p].len =
                                                    d->log[o][p].acked =
                                                        len[o][p];
                        }
                        same_outcomes(pr);
                        c->drops++;
                        continue;
                }
                for (int i = 0; i < NIMPL; i++) {
                        drv_take(&pr->d[i], (const int(*)[2])picks, npick);
                        drv_decide(&pr->d[i]);
                }
                same_outcomes(pr);
                /* Delivery reports, in order per partition, any number. */
                for (int o = 0; o < NOUT; o++)
                        for (int p = 0; p < OUTP; p++)
                                pair_ack(
                                    pr, o, p,
                                    rnd((uint32_t)(m->log[o][p].len -
                                                   m->log[o][p].acked + 1)));
                bool crash = what == 1;
                if (what == 2 && drv_inflight(m)) {
                        /* The last record in flight fails for good: its
                         * epoch never commits, and the stage fails (a
                         * restart). */
                        int o = 0, p = 0;
                        while (m->log[o][p].acked == m->log[o][p].len)
                                if (++p == OUTP)
                                        p = 0, o++;
                        for (int i = 0; i < NIMPL; i++) {
                                struct drv  *d  = &pr->d[i];
                                struct olog *lg = &d->log[o][p];
                                d->im.ops->lost(d->im.st,
                                                lg->e[lg->len - 1].ep);
                                lg->len--; /* never written */
                        }
                        c->losts++;
                        crash = true;
                }
                if (!pair_seal(pr))
                        crash = true;
                pair_settle(pr, false);
                if (crash) {
                        pair_crash(pr);
                        c->crashes++;
                }
        }
        /* The end: everything acknowledged and stored. */
        pair_ack_all(pr);
        assert_true(pair_seal(pr));
        pair_settle(pr, false);
        for (int ti = 0; ti < NIT; ti++)
                for (int32_t p = 0; p < NP; p++) {
                        int64_t next;
                        pair_pos(pr, false, in_topic[ti], p, &next);
                        assert_int_equal(next, PER);
                }
        for (int o = 0; o < NOUT; o++)
                for (int32_t p = 0; p < OUTP; p++) {
                        int64_t next;
                        pair_pos(pr, true, out_topic[o], p, &next);
                        assert_int_equal(next < 0 ? 0 : next,
                                         (int64_t)pr->d[MEM].log[o][p].len);
                        assert_int_equal(pr->d[MEM].log[o][p].len,
                                         pr->d[DECIDER].log[o][p].len);
                }
        same_audit(pr);
        for (int i = 0; i < NIMPL; i++)
                check_outputs(&pr->d[i]);
        struct drv *m = &pr->d[MEM];
        print_message("# seed %llu: %llu batches, %d crashes, %d lost, %d "
                      "dropped so far; outcomes accepted %llu dropped %llu "
                      "superseded %llu identical %llu rejected %llu "
                      "replayed %llu; contract calls per batch: decide "
                      "%.2f, acked %.2f, settle %.2f\n",
                      (unsigned long long)seed, (unsigned long long)m->batches,
                      c->crashes, c->losts, c->drops,
                      (unsigned long long)m->outcomes[AAGW_UNIFY_ACCEPTED],
                      (unsigned long long)m->outcomes[AAGW_UNIFY_DROPPED],
                      (unsigned long long)m->outcomes[AAGW_UNIFY_SUPERSEDED],
                      (unsigned long long)m->outcomes[AAGW_UNIFY_IDENTICAL],
                      (unsigned long long)m->outcomes[AAGW_UNIFY_REJECTED],
                      (unsigned long long)m->outcomes[AAGW_UNIFY_REPLAYED],
                      (double)m->calls_decide / (double)m->batches,
                      (double)m->calls_acked / (double)m->batches,
                      (double)m->calls_settle / (double)m->batches);
        for (int i = 0; i < NIMPL; i++)
                impl_close(&pr->d[i].im);
        free(pr);
}

static void test_model(void **state) {
        struct counts c = {0};
        (void)state;
        for (uint64_t seed = 1; seed <= 6; seed++)
                run_model(seed, seed % 2 == 0, &c);
        /* every kind of event happened */
        assert_true(c.crashes > 0 && c.losts > 0 && c.drops > 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_outcomes),
            cmocka_unit_test(test_drop_and_restore),
            cmocka_unit_test(test_model),
        };
        return cmocka_run_group_tests_name("unify_contract", tests, group_setup,
                                           group_teardown);
}
