/*
 * tests/unit/test_decider.c: the unify stage's decider (dedup/decider.c)
 * on a real RocksDB store in a temp dir, without Kafka: every dedup and
 * last-write-wins verdict, rejected records, the epoch ledger (nothing is
 * stored before its records are acknowledged, epochs commit in order, a
 * lost epoch never commits), positions, the fold of what a previous run
 * left in the output and the replay set, the window, and the scale-out
 * ops (drop of an aborted transaction's decisions, restore from a
 * changelog).  Each "restart" is a new decider on the same store, as a
 * new process would have.  tests/unit/test_unify_contract.c drives it
 * through the contract beside an in-memory double.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "aagw_dedup.h"

static char tmpl[] = "/tmp/aagw-decider-XXXXXX";

static int group_setup(void **state) {
        (void)state;
        return mkdtemp(tmpl) ? 0 : -1;
}

static int group_teardown(void **state) {
        char cmd[256];
        (void)state;
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpl);
        return system(cmd) == 0 ? 0 : -1;
}

/* --------------------------------------------------------------- helpers */

static _Atomic int64_t fake_now = 1700000000000;
static int64_t         fake_clock(void *opaque) {
                (void)opaque;
                return atomic_load(&fake_now);
}

struct h {
        aagw_statedir_t *sd;
        aagw_store_t    *st;
        aagw_decider_t  *d;
        bool             audit_accepted;
        unsigned         ep; /* the epoch the last batch went into */
        char             err[512];
};

static void h_open(struct h *h, const char *sub, int64_t window_ms,
                   bool audit_accepted) {
        char                   dir[512];
        struct aagw_store_opts o = {.window_ms = window_ms,
                                    .clock     = fake_clock};
        snprintf(dir, sizeof(dir), "%s/%s", tmpl, sub);
        h->sd = aagw_statedir_open(dir, h->err, sizeof(h->err));
        if (!h->sd)
                fail_msg("statedir: %s", h->err);
        h->st = aagw_store_open(h->sd, &o, h->err, sizeof(h->err));
        if (!h->st)
                fail_msg("store: %s", h->err);
        h->audit_accepted          = audit_accepted;
        struct aagw_decider_conf c = {.store          = h->st,
                                      .site           = "east",
                                      .audit_accepted = audit_accepted};
        h->d = aagw_decider_new(&c, h->err, sizeof(h->err));
        assert_non_null(h->d);
}

/* A new decider on the same store: what a restart after a crash has. */
static void h_restart(struct h *h) {
        aagw_decider_destroy(h->d);
        struct aagw_decider_conf c = {.store          = h->st,
                                      .site           = "east",
                                      .audit_accepted = h->audit_accepted};
        h->d = aagw_decider_new(&c, h->err, sizeof(h->err));
        assert_non_null(h->d);
}

static void h_close(struct h *h) {
        aagw_decider_destroy(h->d);
        aagw_store_close(h->st);
        aagw_statedir_close(h->sd);
}

/* One record and the provenance it points to. */
struct r {
        struct aagw_prov      prov;
        struct aagw_unify_rec rec;
};

static void mk(struct r *r, aagw_unify_mode_t mode, const char *id,
               const char *origin, uint64_t hlc, const char *topic,
               int64_t off, const char *ekey) {
        memset(r, 0, sizeof(*r));
        snprintf(r->prov.origin, sizeof(r->prov.origin), "%s", origin);
        snprintf(r->prov.path[0], sizeof(r->prov.path[0]), "%s", origin);
        r->prov.path_len = 1;
        r->prov.id_len   = strlen(id);
        memcpy(r->prov.id, id, r->prov.id_len);
        r->prov.hlc    = hlc;
        r->rec.mode    = mode;
        r->rec.prov    = &r->prov;
        r->rec.scope   = "east/profiles";
        r->rec.topic   = topic;
        r->rec.offset  = off;
        r->rec.ekey    = ekey;
        r->rec.ekey_len = ekey ? strlen(ekey) : 0;
        aagw_unify_key("east", &r->rec);
}

/* Decide 'n' records (one batch) and return the outcome of each. */
static void decide(struct h *h, struct r *rs, size_t n) {
        struct aagw_unify_rec recs[16];
        assert_true(n <= 16);
        for (size_t i = 0; i < n; i++)
                recs[i] = rs[i].rec;
        if (aagw_decider_decide(h->d, recs, n, atomic_load(&fake_now), &h->ep,
                                h->err, sizeof(h->err)))
                fail_msg("decide: %s", h->err);
        for (size_t i = 0; i < n; i++)
                rs[i].rec = recs[i];
}

static aagw_unify_outcome_t decide1(struct h *h, struct r *r) {
        decide(h, r, 1);
        return r->rec.outcome;
}

/* Settle: the input positions 'pos' (n of them), a seal if 'seal';
 * returns settle()'s answer, the epochs committed in '*committed'. */
static int settle(struct h *h, const struct aagw_unify_pos *pos, size_t n,
                  bool seal, unsigned *committed) {
        int rc = aagw_decider_settle(h->d, pos, n, seal, committed, h->err,
                                     sizeof(h->err));
        if (rc < 0)
                fail_msg("settle: %s", h->err);
        return rc;
}

/* Ack 'accepted' records of the last batch's epoch at output 'out' from
 * offset 'off' on, seal it and open the next; returns the epochs
 * committed. */
static unsigned deliver(struct h *h, int out, int64_t off, size_t accepted) {
        unsigned n;
        for (size_t i = 0; i < accepted; i++)
                aagw_decider_acked(h->d, h->ep, out, 0, off + (int64_t)i);
        assert_int_equal(settle(h, NULL, 0, true, &n), 1);
        return n;
}

/* Whether deciding 'r' asked the store (false: a pending epoch knew it). */
static bool decide_asks_store(struct h *h, struct r *r,
                              aagw_unify_outcome_t *outcome) {
        uint64_t before = aagw_decider_lookups(h->d);
        *outcome        = decide1(h, r);
        return aagw_decider_lookups(h->d) > before;
}

static bool stored_seen(struct h *h, const char *id) {
        uint8_t k[16];
        bool    found = false;
        aagw_scoped_key("east", id, strlen(id), k);
        assert_int_equal(aagw_store_seen_lookup(h->st,
                                                (const uint8_t(*)[16])k, 1,
                                                &found, NULL, h->err,
                                                sizeof(h->err)),
                         AAGW_OK);
        return found;
}

static bool stored_winner(struct h *h, const char *ekey,
                          struct aagw_lww *out) {
        uint8_t k[16];
        bool    found = false;
        aagw_scoped_key("east/profiles", ekey, strlen(ekey), k);
        assert_int_equal(aagw_store_lww_lookup(h->st,
                                               (const uint8_t(*)[16])k, 1,
                                               &found, out, h->err,
                                               sizeof(h->err)),
                         AAGW_OK);
        return found;
}

struct audits {
        size_t n;
        int    verdict[8];
        char   id[8][64];
};

static int collect(const struct aagw_audit *a, void *opaque) {
        struct audits *g = opaque;
        if (g->n < 8) {
                g->verdict[g->n] = a->verdict;
                snprintf(g->id[g->n], sizeof(g->id[0]), "%.*s",
                         (int)a->id_len, (const char *)a->id);
        }
        g->n++;
        return 0;
}

static struct audits audit_of(struct h *h, const char *id) {
        struct audits g;
        memset(&g, 0, sizeof(g));
        assert_int_equal(aagw_store_audit_by_id(h->st, id, strlen(id),
                                                collect, &g, h->err,
                                                sizeof(h->err)),
                         AAGW_OK);
        return g;
}

/* ----------------------------------------------------------------- dedup */

/* The first occurrence is accepted; the same id later in the batch, in a
 * later batch while the first is pending, and after it is stored (also
 * by a restarted decider) is dropped, with a "dropped" audit entry. */
static void test_dedup_first_then_dropped(void **state) {
        struct h h;
        struct r rs[3];
        (void)state;
        h_open(&h, "dedup", 0, false);
        int out = aagw_decider_output(h.d, "clicks.unified", 1);
        assert_int_equal(out, 0);

        mk(&rs[0], AAGW_UNIFY_DEDUP, "a", "east", 1, "clicks", 0, NULL);
        mk(&rs[1], AAGW_UNIFY_DEDUP, "b", "east", 2, "clicks", 1, NULL);
        mk(&rs[2], AAGW_UNIFY_DEDUP, "a", "west", 3, "west.clicks", 0, NULL);
        decide(&h, rs, 3);
        assert_int_equal(rs[0].rec.outcome, AAGW_UNIFY_ACCEPTED);
        assert_int_equal(rs[1].rec.outcome, AAGW_UNIFY_ACCEPTED);
        assert_int_equal(rs[2].rec.outcome, AAGW_UNIFY_DROPPED);
        /* Both hashes are the same scoped id: the same output partition. */
        assert_memory_equal(rs[0].rec.key, rs[2].rec.key, 16);

        /* In flight, not acknowledged: nothing stored yet. */
        unsigned ep = h.ep, n;
        assert_int_equal(settle(&h, NULL, 0, true, &n), 1);
        assert_int_equal(n, 0);
        assert_false(stored_seen(&h, "a"));

        /* Pending in epoch 1: a later batch drops it from memory. */
        struct r             again;
        aagw_unify_outcome_t o;
        mk(&again, AAGW_UNIFY_DEDUP, "a", "west", 3, "west.clicks", 1, NULL);
        assert_false(decide_asks_store(&h, &again, &o));
        assert_int_equal(o, AAGW_UNIFY_DROPPED);

        aagw_decider_acked(h.d, ep, out, 0, 0);
        aagw_decider_acked(h.d, ep, out, 0, 1);
        assert_int_equal(deliver(&h, out, 2, 0), 2);
        assert_true(stored_seen(&h, "a"));
        assert_true(stored_seen(&h, "b"));
        struct audits g = audit_of(&h, "a");
        assert_int_equal(g.n, 2); /* the two drops; no accepted entries */
        assert_int_equal(g.verdict[0], AAGW_AUDIT_DROPPED);
        assert_int_equal(g.verdict[1], AAGW_AUDIT_DROPPED);

        /* Stored: a restarted decider asks the store. */
        h_restart(&h);
        mk(&again, AAGW_UNIFY_DEDUP, "a", "west", 3, "west.clicks", 2, NULL);
        assert_true(decide_asks_store(&h, &again, &o));
        assert_int_equal(o, AAGW_UNIFY_DROPPED);
        mk(&again, AAGW_UNIFY_DEDUP, "c", "west", 4, "west.clicks", 3, NULL);
        assert_int_equal(decide1(&h, &again), AAGW_UNIFY_ACCEPTED);
        h_close(&h);
}

/* unify.audit_accepted: deliveries are audited too. */
static void test_dedup_audit_accepted(void **state) {
        struct h h;
        struct r r;
        (void)state;
        h_open(&h, "auditacc", 0, true);
        int out = aagw_decider_output(h.d, "clicks.unified", 1);
        mk(&r, AAGW_UNIFY_DEDUP, "z", "east", 1, "clicks", 7, NULL);
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_ACCEPTED);
        assert_int_equal(deliver(&h, out, 0, 1), 1);
        struct audits g = audit_of(&h, "z");
        assert_int_equal(g.n, 1);
        assert_int_equal(g.verdict[0], AAGW_AUDIT_ACCEPTED);
        h_close(&h);
}

/* A crash before the acknowledgement (the decider is gone, the store
 * never got the epoch): a restart decides the id afresh. */
static void test_dedup_uncommitted_lost_at_crash(void **state) {
        struct h h;
        struct r r;
        (void)state;
        h_open(&h, "crash", 0, false);
        mk(&r, AAGW_UNIFY_DEDUP, "a", "east", 1, "clicks", 0, NULL);
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_ACCEPTED);
        unsigned n;
        assert_int_equal(settle(&h, NULL, 0, true, &n), 1);
        assert_int_equal(n, 0);
        assert_int_equal(aagw_decider_uncommitted(h.d), 1);
        h_restart(&h);
        mk(&r, AAGW_UNIFY_DEDUP, "a", "east", 1, "clicks", 0, NULL);
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_ACCEPTED);
        h_close(&h);
}

/* ----------------------------------------------------------------- epochs */

/* A later epoch acknowledged before an earlier one does not commit
 * first; once the earlier one is acknowledged both commit, in order. */
static void test_epoch_commit_order(void **state) {
        struct h h;
        struct r r;
        int64_t  next;
        (void)state;
        h_open(&h, "order", 0, false);
        int out = aagw_decider_output(h.d, "clicks.unified", 2);

        unsigned n;
        mk(&r, AAGW_UNIFY_DEDUP, "e1", "east", 1, "clicks", 0, NULL);
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_ACCEPTED);
        unsigned              ep1  = h.ep;
        struct aagw_unify_pos pos1 = {"clicks", 0, 1};
        assert_int_equal(settle(&h, &pos1, 1, true, &n), 1);

        mk(&r, AAGW_UNIFY_DEDUP, "e2", "east", 2, "clicks", 1, NULL);
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_ACCEPTED);
        unsigned              ep2  = h.ep;
        struct aagw_unify_pos pos2 = {"clicks", 0, 2};
        assert_int_equal(settle(&h, &pos2, 1, true, &n), 1);
        assert_int_not_equal(ep1, ep2);

        aagw_decider_acked(h.d, ep2, out, 1, 10);
        assert_int_equal(settle(&h, NULL, 0, false, &n), 1);
        assert_int_equal(n, 0);
        assert_false(stored_seen(&h, "e2"));
        assert_int_equal(aagw_decider_pos(h.d, false, "clicks", 0, &next,
                                          h.err, sizeof(h.err)),
                         1);
        assert_int_equal(aagw_decider_uncommitted(h.d), 2);

        aagw_decider_acked(h.d, ep1, out, 0, 4);
        assert_int_equal(settle(&h, NULL, 0, false, &n), 1);
        assert_int_equal(n, 2);
        assert_true(stored_seen(&h, "e1"));
        assert_true(stored_seen(&h, "e2"));
        assert_int_equal(aagw_decider_uncommitted(h.d), 0);
        /* The input position of the later epoch, and each output
         * partition after its highest acknowledged offset. */
        assert_int_equal(aagw_decider_pos(h.d, false, "clicks", 0, &next,
                                          h.err, sizeof(h.err)),
                         0);
        assert_int_equal(next, 2);
        assert_int_equal(aagw_decider_pos(h.d, true, "clicks.unified", 0,
                                          &next, h.err, sizeof(h.err)),
                         0);
        assert_int_equal(next, 5);
        assert_int_equal(aagw_decider_pos(h.d, true, "clicks.unified", 1,
                                          &next, h.err, sizeof(h.err)),
                         0);
        assert_int_equal(next, 11);
        h_close(&h);
}

/* A record that will never be acknowledged (a failed delivery, or decided
 * and not sent at a stop) keeps its epoch, and every later one, from
 * committing. */
static void test_epoch_lost_never_commits(void **state) {
        struct h h;
        struct r r;
        (void)state;
        h_open(&h, "lost", 0, false);
        int out = aagw_decider_output(h.d, "clicks.unified", 1);
        unsigned n;
        mk(&r, AAGW_UNIFY_DEDUP, "l1", "east", 1, "clicks", 0, NULL);
        decide1(&h, &r);
        aagw_decider_lost(h.d, h.ep);
        assert_int_equal(settle(&h, NULL, 0, true, &n), 1);
        mk(&r, AAGW_UNIFY_DEDUP, "l2", "east", 2, "clicks", 1, NULL);
        decide1(&h, &r);
        assert_int_equal(deliver(&h, out, 0, 1), 0);
        assert_false(stored_seen(&h, "l1"));
        assert_false(stored_seen(&h, "l2"));
        h_close(&h);
}

/* One accepted, unacknowledged record in each epoch slot: the next
 * epoch cannot open. */
static void fill_slots(struct h *h, unsigned eps[AAGW_DECIDER_EPOCHS]) {
        struct r r;
        char     id[16];
        unsigned n;
        for (int i = 0; i < AAGW_DECIDER_EPOCHS; i++) {
                snprintf(id, sizeof(id), "s%d", i);
                mk(&r, AAGW_UNIFY_DEDUP, id, "east", 1, "clicks", i, NULL);
                assert_int_equal(decide1(h, &r), AAGW_UNIFY_ACCEPTED);
                eps[i] = h->ep;
                assert_int_equal(settle(h, NULL, 0, true, &n),
                                 i < AAGW_DECIDER_EPOCHS - 1);
                assert_int_equal(aagw_decider_uncommitted(h->d), (size_t)i + 1);
        }
        assert_int_equal(settle(h, NULL, 0, false, &n), 0);
}

/* An epoch where nothing happened stays open; with every slot taken by
 * an unacknowledged epoch the next cannot open until one commits. */
static void test_epoch_slots(void **state) {
        struct h h;
        unsigned eps[AAGW_DECIDER_EPOCHS];
        (void)state;
        unsigned n;
        h_open(&h, "slots", 0, false);
        int out = aagw_decider_output(h.d, "clicks.unified", 1);
        assert_int_equal(settle(&h, NULL, 0, true, &n), 1);
        assert_int_equal(aagw_decider_uncommitted(h.d), 0); /* not sealed */
        fill_slots(&h, eps);
        aagw_decider_acked(h.d, eps[0], out, 0, 0);
        assert_int_equal(settle(&h, NULL, 0, false, &n), 1);
        assert_int_equal(n, 1);
        h_close(&h);
}

/* Waiting for a free slot can commit every epoch, the sealed one that
 * waits too: a new epoch still opens, and its decisions are pending (the
 * same id again is dropped before anything is committed).  Decisions
 * made in the freed slot instead went into an epoch numbered 0, which
 * the pending map takes for an empty entry: the bench_unify run with
 * 1,000,000 ids delivered 133 of them twice. */
static void test_epoch_all_committed_while_waiting(void **state) {
        struct h h;
        struct r r;
        unsigned eps[AAGW_DECIDER_EPOCHS];
        (void)state;
        h_open(&h, "allcommitted", 0, false);
        int out = aagw_decider_output(h.d, "clicks.unified", 1);
        unsigned             n;
        aagw_unify_outcome_t o;
        fill_slots(&h, eps);
        for (int i = 0; i < AAGW_DECIDER_EPOCHS; i++)
                aagw_decider_acked(h.d, eps[i], out, 0, i);
        assert_int_equal(settle(&h, NULL, 0, false, &n), 1);
        assert_int_equal(n, AAGW_DECIDER_EPOCHS);
        mk(&r, AAGW_UNIFY_DEDUP, "after", "east", 2, "clicks", 100, NULL);
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_ACCEPTED);
        assert_int_equal(settle(&h, NULL, 0, true, &n), 1);
        mk(&r, AAGW_UNIFY_DEDUP, "after", "west", 2, "west.clicks", 100,
           NULL);
        /* answered by the pending map */
        assert_false(decide_asks_store(&h, &r, &o));
        assert_int_equal(o, AAGW_UNIFY_DROPPED);
        h_close(&h);
}

/* ------------------------------------------------------------------- lww */

/* Newer wins, older is superseded, the winner's own version is identical,
 * a tombstone is a version like any other, and a restarted decider
 * compares against the stored winner. */
static void test_lww_verdicts(void **state) {
        struct h        h;
        struct r        rs[4];
        struct aagw_lww w;
        (void)state;
        h_open(&h, "lww", 0, false);
        int out = aagw_decider_output(h.d, "profiles.unified", 1);

        mk(&rs[0], AAGW_UNIFY_LWW, "v10", "east", 10, "profiles", 0, "u1");
        mk(&rs[1], AAGW_UNIFY_LWW, "v5", "west", 5, "west.profiles", 0, "u1");
        mk(&rs[2], AAGW_UNIFY_LWW, "v10", "east", 10, "west.profiles", 1,
           "u1");
        mk(&rs[3], AAGW_UNIFY_LWW, "v20", "west", 20, "west.profiles", 2,
           "u1");
        rs[3].rec.tombstone = true;
        decide(&h, rs, 4);
        assert_int_equal(rs[0].rec.outcome, AAGW_UNIFY_ACCEPTED);
        assert_int_equal(rs[1].rec.outcome, AAGW_UNIFY_SUPERSEDED);
        assert_int_equal(rs[2].rec.outcome, AAGW_UNIFY_IDENTICAL);
        assert_int_equal(rs[3].rec.outcome, AAGW_UNIFY_ACCEPTED);
        assert_int_equal(deliver(&h, out, 0, 2), 1);
        assert_true(stored_winner(&h, "u1", &w));
        assert_int_equal(w.v.hlc, 20);
        assert_string_equal(w.v.origin, "west");
        assert_true(w.tombstone);

        /* Same hlc: the origin decides (bytewise), the same at every
         * site. */
        h_restart(&h);
        out = aagw_decider_output(h.d, "profiles.unified", 1);
        mk(&rs[0], AAGW_UNIFY_LWW, "v15", "east", 15, "profiles", 3, "u1");
        mk(&rs[1], AAGW_UNIFY_LWW, "v20", "east", 20, "profiles", 4, "u1");
        mk(&rs[2], AAGW_UNIFY_LWW, "v20", "west", 20, "profiles", 5, "u1");
        uint64_t lookups = aagw_decider_lookups(h.d);
        decide(&h, rs, 3);
        assert_int_equal(rs[0].rec.outcome, AAGW_UNIFY_SUPERSEDED);
        assert_int_equal(rs[1].rec.outcome, AAGW_UNIFY_SUPERSEDED);
        assert_int_equal(rs[2].rec.outcome, AAGW_UNIFY_IDENTICAL);
        assert_true(aagw_decider_lookups(h.d) > lookups); /* stored */
        assert_int_equal(deliver(&h, out, 2, 0), 1);

        /* Every verdict is in the audit log, by entity key. */
        struct audits g = audit_of(&h, "v20");
        assert_int_equal(g.n, 3);
        assert_int_equal(g.verdict[0], AAGW_AUDIT_ACCEPTED);
        assert_int_equal(g.verdict[1], AAGW_AUDIT_SUPERSEDED);
        assert_int_equal(g.verdict[2], AAGW_AUDIT_IDENTICAL);
        h_close(&h);
}

/* --------------------------------------------------------------- rejected */

/* A rejected record is audited under its derived id and stores no seen
 * id. */
static void test_rejected(void **state) {
        struct h h;
        struct r r;
        (void)state;
        h_open(&h, "rejected", 0, false);
        int out = aagw_decider_output(h.d, "clicks.unified", 1);
        mk(&r, AAGW_UNIFY_DEDUP, "forged", "west", 9, "west.clicks", 42,
           NULL);
        r.rec.partition = 3;
        r.rec.rejected  = true;
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_REJECTED);
        assert_string_equal(r.prov.id, "east:west.clicks:3:42");
        assert_int_equal(r.prov.path_len, 0);
        assert_int_equal(r.prov.hlc, 0);
        assert_int_equal(deliver(&h, out, 0, 0), 1);
        assert_false(stored_seen(&h, "forged"));
        assert_false(stored_seen(&h, "east:west.clicks:3:42"));
        struct audits g = audit_of(&h, "east:west.clicks:3:42");
        assert_int_equal(g.n, 1);
        assert_int_equal(g.verdict[0], AAGW_AUDIT_REJECTED);
        h_close(&h);
}

/* --------------------------------------------------------------- audit_out */

/* What audit_out() hands over: each entry decoded, with the offset of the
 * record it was handed with. */
struct tap {
        size_t  n;
        int     refuse_at; /* refuse the entry with this number (0: none) */
        int     verdict[8];
        char    id[8][64], topic[8][32];
        int64_t offset[8], rec_offset[8];
};

static int tap_fn(void *opaque, const struct aagw_unify_rec *r,
                  const void *entry, size_t len) {
        struct tap               *t = opaque;
        struct aagw_audit_decoded a;
        char                      err[256];

        if (t->refuse_at && (int)t->n + 1 == t->refuse_at)
                return -1;
        assert_int_equal(aagw_audit_decode(entry, len, &a, err, sizeof(err)),
                         AAGW_OK);
        assert_true(t->n < 8);
        t->verdict[t->n]    = a.a.verdict;
        t->offset[t->n]     = a.a.offset;
        t->rec_offset[t->n] = r->offset;
        snprintf(t->id[t->n], sizeof(t->id[0]), "%.*s", (int)a.a.id_len,
                 (const char *)a.a.id);
        snprintf(t->topic[t->n], sizeof(t->topic[0]), "%s", a.a.topic);
        t->n++;
        return 0;
}

/* Every audit entry decide() makes is handed over too, encoded as
 * aagw_audit_decode() reads it, with the record it is about; an entry
 * refused there fails the batch, saying so. */
static void test_audit_out(void **state) {
        struct h   h;
        struct r   rs[4];
        struct tap t;
        (void)state;
        memset(&t, 0, sizeof(t));
        h_open(&h, "audit-out", 0, false);
        int out = aagw_decider_output(h.d, "clicks.unified", 1);
        aagw_decider_ops.audit_out(h.d, tap_fn, &t);

        mk(&rs[0], AAGW_UNIFY_DEDUP, "a", "east", 1, "clicks", 10, NULL);
        mk(&rs[1], AAGW_UNIFY_DEDUP, "a", "west", 1, "west.clicks", 11, NULL);
        mk(&rs[2], AAGW_UNIFY_DEDUP, "x", "west", 9, "west.clicks", 12, NULL);
        rs[2].rec.rejected = true;
        mk(&rs[3], AAGW_UNIFY_LWW, "v1", "east", 5, "profiles", 13, "user-1");
        decide(&h, rs, 4);
        /* The delivery of "a" has no entry (unify.audit_accepted off);
         * its duplicate, the rejected record and the lww version do. */
        assert_int_equal(t.n, 3);
        assert_int_equal(t.verdict[0], AAGW_AUDIT_DROPPED);
        assert_string_equal(t.id[0], "a");
        assert_string_equal(t.topic[0], "west.clicks");
        assert_int_equal(t.offset[0], 11);
        assert_int_equal(t.verdict[1], AAGW_AUDIT_REJECTED);
        assert_string_equal(t.topic[1], "west.clicks");
        assert_int_equal(t.verdict[2], AAGW_AUDIT_ACCEPTED);
        assert_string_equal(t.id[2], "v1");
        for (size_t i = 0; i < t.n; i++)
                assert_int_equal(t.offset[i], t.rec_offset[i]);
        /* The same entries the store keeps. */
        aagw_decider_acked(h.d, h.ep, out, 0, 0);
        aagw_decider_acked(h.d, h.ep, out, 0, 1);
        assert_int_equal(deliver(&h, out, 2, 0), 1);
        struct audits g = audit_of(&h, "a");
        assert_int_equal(g.n, 1);
        assert_int_equal(g.verdict[0], AAGW_AUDIT_DROPPED);

        /* Refused: the batch fails and its epoch never commits. */
        t.refuse_at = (int)t.n + 1;
        struct r dup;
        mk(&dup, AAGW_UNIFY_DEDUP, "a", "west", 1, "west.clicks", 14, NULL);
        struct aagw_unify_rec rec = dup.rec;
        unsigned              ep;
        assert_int_equal(aagw_decider_decide(h.d, &rec, 1,
                                             atomic_load(&fake_now), &ep, h.err,
                                             sizeof(h.err)),
                         -1);
        assert_non_null(strstr(h.err, "audit entry was refused"));

        /* Off again: nothing handed over. */
        size_t n = t.n;
        aagw_decider_ops.audit_out(h.d, NULL, NULL);
        h_restart(&h);
        mk(&dup, AAGW_UNIFY_DEDUP, "a", "west", 1, "west.clicks", 15, NULL);
        assert_int_equal(decide1(&h, &dup), AAGW_UNIFY_DROPPED);
        assert_int_equal(t.n, n);
        h_close(&h);
}

/* --------------------------------------------------------------- recovery */

/* After a crash the output holds records whose epoch never committed:
 * folding them stores their ids and the output position; re-reading
 * their inputs is a replay (once), while the same id from another input
 * is a duplicate. */
static void test_fold_dedup_and_replay(void **state) {
        struct h h;
        struct r r;
        int64_t  next;
        (void)state;
        h_open(&h, "fold", 0, true);
        /* The crashed run: decided, delivered, never committed. */
        mk(&r, AAGW_UNIFY_DEDUP, "f1", "west", 1, "west.clicks", 5, NULL);
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_ACCEPTED);
        h_restart(&h);

        mk(&r, AAGW_UNIFY_DEDUP, "f1", "west", 1, "west.clicks", 5, NULL);
        assert_int_equal(aagw_decider_fold(h.d, &r.rec, fake_now, h.err,
                                           sizeof(h.err)),
                         0);
        aagw_decider_fold_out(h.d, "clicks.unified", 0, 1);
        assert_int_equal(aagw_decider_fold_commit(h.d, true, h.err,
                                                  sizeof(h.err)),
                         0);
        assert_true(stored_seen(&h, "f1"));
        assert_int_equal(aagw_decider_pos(h.d, true, "clicks.unified", 0,
                                          &next, h.err, sizeof(h.err)),
                         0);
        assert_int_equal(next, 1);
        struct audits g = audit_of(&h, "f1");
        assert_int_equal(g.n, 1);
        assert_int_equal(g.verdict[0], AAGW_AUDIT_ACCEPTED);

        /* Re-read, the folded record is a replay, once; its neighbour
         * is not.  A replay gets no verdict, rejected or not. */
        mk(&r, AAGW_UNIFY_DEDUP, "f0", "west", 1, "west.clicks", 4, NULL);
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_ACCEPTED);
        mk(&r, AAGW_UNIFY_DEDUP, "f1", "west", 1, "west.clicks", 5, NULL);
        r.rec.rejected = true;
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_REPLAYED);
        assert_string_equal(r.prov.id, "f1"); /* not rewritten */
        mk(&r, AAGW_UNIFY_DEDUP, "f1", "west", 1, "west.clicks", 5, NULL);
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_DROPPED);
        mk(&r, AAGW_UNIFY_DEDUP, "f1", "east", 1, "clicks", 9, NULL);
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_DROPPED);
        int out = aagw_decider_output(h.d, "clicks.unified", 1);
        assert_int_equal(deliver(&h, out, 1, 1), 1); /* f0 */
        g = audit_of(&h, "f1");
        assert_int_equal(g.n, 3); /* the fold's, then two drops */
        h_close(&h);
}

/* Two versions of one key found in the output in one scan: the newer
 * stays the winner whatever the order, and a version between them
 * decided afterwards is superseded. */
static void test_fold_lww(void **state) {
        struct h        h;
        struct r        r;
        struct aagw_lww w;
        (void)state;
        h_open(&h, "foldlww", 0, false);
        mk(&r, AAGW_UNIFY_LWW, "v10", "east", 10, "profiles", 0, "k");
        assert_int_equal(aagw_decider_fold(h.d, &r.rec, fake_now, h.err,
                                           sizeof(h.err)),
                         0);
        mk(&r, AAGW_UNIFY_LWW, "v8", "west", 8, "west.profiles", 0, "k");
        assert_int_equal(aagw_decider_fold(h.d, &r.rec, fake_now, h.err,
                                           sizeof(h.err)),
                         0);
        assert_int_equal(aagw_decider_fold_commit(h.d, true, h.err,
                                                  sizeof(h.err)),
                         0);
        assert_true(stored_winner(&h, "k", &w));
        assert_int_equal(w.v.hlc, 10);
        mk(&r, AAGW_UNIFY_LWW, "v9", "west", 9, "west.profiles", 1, "k");
        aagw_unify_outcome_t o;
        /* the fold left nothing pending */
        assert_true(decide_asks_store(&h, &r, &o));
        assert_int_equal(o, AAGW_UNIFY_SUPERSEDED);
        h_close(&h);
}

/* ------------------------------------------------------ scale-out ops */

/* drop: the open epoch's decisions (a transaction aborted) are
 * forgotten, not stored, and the same ids and versions are new again;
 * the decider goes on with a fresh epoch that commits as usual. */
static void test_drop(void **state) {
        struct h        h;
        struct r        r;
        struct aagw_lww w;
        (void)state;
        h_open(&h, "drop", 0, false);
        int out = aagw_decider_output(h.d, "clicks.unified", 1);
        mk(&r, AAGW_UNIFY_DEDUP, "d1", "east", 1, "clicks", 0, NULL);
        /* in flight when the transaction died */
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_ACCEPTED);
        mk(&r, AAGW_UNIFY_LWW, "v5", "east", 5, "profiles", 0, "k");
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_ACCEPTED);
        assert_int_equal(aagw_decider_drop(h.d), 0);
        assert_int_equal(aagw_decider_uncommitted(h.d), 0);
        assert_false(stored_seen(&h, "d1"));
        assert_false(stored_winner(&h, "k", &w));
        /* Redone: accepted again, and this time committed. */
        mk(&r, AAGW_UNIFY_DEDUP, "d1", "east", 1, "clicks", 0, NULL);
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_ACCEPTED);
        mk(&r, AAGW_UNIFY_LWW, "v4", "east", 4, "profiles", 1, "k");
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_ACCEPTED);
        assert_int_equal(deliver(&h, out, 0, 2), 1);
        assert_true(stored_seen(&h, "d1"));
        assert_true(stored_winner(&h, "k", &w));
        assert_int_equal(w.v.hlc, 4);
        h_close(&h);
}

/* restore: ids and winners from a changelog (keys as decided) go into
 * the store at the fold commit; additive: a restored winner older than
 * the stored one does not replace it, and an id stays seen. */
static void test_restore(void **state) {
        struct h        h;
        struct r        r;
        struct aagw_lww w;
        (void)state;
        h_open(&h, "restore", 0, false);
        mk(&r, AAGW_UNIFY_DEDUP, "r1", "west", 3, "west.clicks", 7, NULL);
        assert_int_equal(aagw_decider_restore(h.d, &r.rec, fake_now, h.err,
                                              sizeof(h.err)),
                         0);
        mk(&r, AAGW_UNIFY_LWW, "v10", "west", 10, "west.profiles", 0, "k");
        assert_int_equal(aagw_decider_restore(h.d, &r.rec, fake_now, h.err,
                                              sizeof(h.err)),
                         0);
        mk(&r, AAGW_UNIFY_LWW, "v9", "west", 9, "west.profiles", 0, "k");
        assert_int_equal(aagw_decider_restore(h.d, &r.rec, fake_now, h.err,
                                              sizeof(h.err)),
                         0);
        assert_int_equal(aagw_decider_fold_commit(h.d, true, h.err,
                                                  sizeof(h.err)),
                         0);
        assert_true(stored_seen(&h, "r1"));
        assert_true(stored_winner(&h, "k", &w));
        assert_int_equal(w.v.hlc, 10);
        assert_string_equal(w.v.id, "v10");
        /* No audit entry (the previous owner wrote it), no replay set. */
        assert_int_equal(audit_of(&h, "r1").n, 0);
        mk(&r, AAGW_UNIFY_DEDUP, "r1", "west", 3, "west.clicks", 7, NULL);
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_DROPPED); /* no replay */
        mk(&r, AAGW_UNIFY_DEDUP, "r1", "east", 1, "clicks", 2, NULL);
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_DROPPED);
        mk(&r, AAGW_UNIFY_LWW, "v9", "west", 9, "west.profiles", 1, "k");
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_SUPERSEDED);
        h_close(&h);
}

/* ----------------------------------------------------------------- window */

/* A seen id is a duplicate inside the window and new again after it;
 * last-write-wins winners never expire. */
static void test_window(void **state) {
        struct h        h;
        struct r        r;
        struct aagw_lww w;
        (void)state;
        h_open(&h, "window", 60000, false);
        int out = aagw_decider_output(h.d, "clicks.unified", 1);
        mk(&r, AAGW_UNIFY_DEDUP, "w1", "east", 1, "clicks", 0, NULL);
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_ACCEPTED);
        mk(&r, AAGW_UNIFY_LWW, "v50", "east", 50, "profiles", 0, "wk");
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_ACCEPTED);
        assert_int_equal(deliver(&h, out, 0, 2), 1);

        atomic_fetch_add(&fake_now, 59000);
        mk(&r, AAGW_UNIFY_DEDUP, "w1", "west", 1, "west.clicks", 0, NULL);
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_DROPPED);
        atomic_fetch_add(&fake_now, 2000);
        mk(&r, AAGW_UNIFY_DEDUP, "w1", "west", 1, "west.clicks", 1, NULL);
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_ACCEPTED);
        mk(&r, AAGW_UNIFY_LWW, "v40", "west", 40, "west.profiles", 0, "wk");
        assert_int_equal(decide1(&h, &r), AAGW_UNIFY_SUPERSEDED);
        assert_true(stored_winner(&h, "wk", &w));
        h_close(&h);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_dedup_first_then_dropped),
            cmocka_unit_test(test_dedup_audit_accepted),
            cmocka_unit_test(test_dedup_uncommitted_lost_at_crash),
            cmocka_unit_test(test_epoch_commit_order),
            cmocka_unit_test(test_epoch_lost_never_commits),
            cmocka_unit_test(test_epoch_slots),
            cmocka_unit_test(test_epoch_all_committed_while_waiting),
            cmocka_unit_test(test_lww_verdicts),
            cmocka_unit_test(test_rejected),
            cmocka_unit_test(test_audit_out),
            cmocka_unit_test(test_fold_dedup_and_replay),
            cmocka_unit_test(test_fold_lww),
            cmocka_unit_test(test_window),
            cmocka_unit_test(test_drop),
            cmocka_unit_test(test_restore),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
