/*
 * tests/unit/test_dedup.c: the unify state store (seen ids, last-write-wins
 * winners, audit log) on a real RocksDB in a temp dir.  No mocks.
 *
 * Where a test needs to look under the store (what compaction removed, a
 * value corrupted on disk) it opens the database with the plain RocksDB C
 * API after closing the store.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <rocksdb/c.h>

#include "aagw_dedup.h"

static char tmpl[] = "/tmp/aagw-dedup-XXXXXX";

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

static int64_t wall_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A clock the test moves by hand. */
static _Atomic int64_t fake_now;
static int64_t         fake_clock(void *opaque) {
                (void)opaque;
                return atomic_load(&fake_now);
}

struct h {
        aagw_statedir_t *sd;
        aagw_store_t    *st;
        char             dir[512];
        char             err[512];
};

static void h_open(struct h *h, const char *sub,
                   const struct aagw_store_opts *o) {
        snprintf(h->dir, sizeof(h->dir), "%s/%s", tmpl, sub);
        h->err[0] = '\0';
        h->sd     = aagw_statedir_open(h->dir, h->err, sizeof(h->err));
        if (!h->sd)
                fail_msg("statedir: %s", h->err);
        h->st = aagw_store_open(h->sd, o, h->err, sizeof(h->err));
        if (!h->st)
                fail_msg("store open: %s", h->err);
}

static void h_close(struct h *h) {
        aagw_store_close(h->st);
        aagw_statedir_close(h->sd);
        h->st = NULL;
        h->sd = NULL;
}

static void h_reopen(struct h *h, const struct aagw_store_opts *o) {
        aagw_store_close(h->st);
        h->st = aagw_store_open(h->sd, o, h->err, sizeof(h->err));
        if (!h->st)
                fail_msg("store reopen: %s", h->err);
}

/* Wait (10 s at most) until the filter has been rebuilt. */
static void wait_filter(aagw_store_t *st) {
        struct aagw_store_stats s;
        for (int i = 0; i < 1000; i++) {
                aagw_store_stats_get(st, &s);
                if (s.filter_ready)
                        return;
                usleep(10000);
        }
        fail_msg("filter not rebuilt after 10 s");
}

static void key_of(const char *id, uint8_t key[16]) {
        aagw_id_key(id, strlen(id), key);
}

static void idkey(uint64_t i, uint8_t key[16]) {
        char id[32];
        int  n = snprintf(id, sizeof(id), "id-%llu", (unsigned long long)i);
        aagw_id_key(id, (size_t)n, key);
}

static struct aagw_seen mk_seen(int64_t t, const char *origin,
                                const char *topic, int32_t p, int64_t off) {
        struct aagw_seen s;
        memset(&s, 0, sizeof(s));
        s.time_ms = t;
        s.hlc     = (uint64_t)t << 16;
        snprintf(s.site, sizeof(s.site), "east");
        snprintf(s.origin, sizeof(s.origin), "%s", origin);
        snprintf(s.topic, sizeof(s.topic), "%s", topic);
        s.partition = p;
        s.offset    = off;
        return s;
}

static struct aagw_lww mk_lww(int64_t t, uint64_t hlc, const char *origin,
                              const char *id, bool tomb) {
        struct aagw_lww l;
        memset(&l, 0, sizeof(l));
        l.time_ms = t;
        l.v.hlc   = hlc;
        snprintf(l.v.origin, sizeof(l.v.origin), "%s", origin);
        l.v.id_len = strlen(id);
        memcpy(l.v.id, id, l.v.id_len);
        l.tombstone = tomb;
        return l;
}

/* Commit the seen ids lo..hi-1 (time t) in batches of 'per'. */
static void commit_ids(aagw_store_t *st, uint64_t lo, uint64_t hi, int64_t t,
                       size_t per) {
        aagw_store_batch_t *b = aagw_store_batch_new(st);
        char                err[512];
        assert_non_null(b);
        for (uint64_t i = lo; i < hi; i++) {
                uint8_t          k[16];
                struct aagw_seen s =
                    mk_seen(t, "west", "clicks", (int32_t)(i % 7), (int64_t)i);
                idkey(i, k);
                assert_int_equal(aagw_store_batch_seen(b, k, &s), AAGW_OK);
                if ((i - lo + 1) % per == 0 || i + 1 == hi)
                        if (aagw_store_batch_commit(b, err, sizeof(err)))
                                fail_msg("commit: %s", err);
        }
        aagw_store_batch_destroy(b);
}

/* Assert that ids lo..hi-1 are all found (want) or all absent (!want). */
static void check_ids(aagw_store_t *st, uint64_t lo, uint64_t hi, bool want) {
        size_t n        = (size_t)(hi - lo);
        uint8_t(*k)[16] = malloc(n * 16);
        bool *f         = malloc(n);
        char  err[512];
        for (size_t i = 0; i < n; i++)
                idkey(lo + i, k[i]);
        if (aagw_store_seen_lookup(st, (const uint8_t(*)[16])k, n, f, NULL, err,
                                   sizeof(err)))
                fail_msg("lookup: %s", err);
        for (size_t i = 0; i < n; i++)
                if (f[i] != want)
                        fail_msg("id-%llu: found=%d, want %d",
                                 (unsigned long long)(lo + i), f[i], want);
        free(k);
        free(f);
}

/* The raw database under a (closed) store. */
struct raw {
        rocksdb_t                       *db;
        rocksdb_options_t               *o;
        char                           **names;
        size_t                           n;
        rocksdb_column_family_handle_t **cf;
};

static void raw_open(struct raw *r, const char *dir) {
        char path[600], *err = NULL;
        snprintf(path, sizeof(path), "%s/db", dir);
        r->o     = rocksdb_options_create();
        r->names = rocksdb_list_column_families(r->o, path, &r->n, &err);
        if (err)
                fail_msg("list cf: %s", err);
        const rocksdb_options_t **co = calloc(r->n, sizeof(*co));
        r->cf                        = calloc(r->n, sizeof(*r->cf));
        for (size_t i = 0; i < r->n; i++)
                co[i] = r->o;
        r->db = rocksdb_open_column_families(r->o, path, (int)r->n,
                                             (const char *const *)r->names, co,
                                             r->cf, &err);
        free(co);
        if (err)
                fail_msg("raw open: %s", err);
}

static rocksdb_column_family_handle_t *raw_cf(struct raw *r, const char *nm) {
        for (size_t i = 0; i < r->n; i++)
                if (!strcmp(r->names[i], nm))
                        return r->cf[i];
        fail_msg("no column family %s", nm);
        return NULL;
}

static size_t raw_count(struct raw *r, const char *nm) {
        rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
        rocksdb_iterator_t    *it =
            rocksdb_create_iterator_cf(r->db, ro, raw_cf(r, nm));
        size_t n = 0;
        for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it);
             rocksdb_iter_next(it))
                n++;
        rocksdb_iter_destroy(it);
        rocksdb_readoptions_destroy(ro);
        return n;
}

static void raw_put(struct raw *r, const char *nm, const void *k, size_t kl,
                    const void *v, size_t vl) {
        rocksdb_writeoptions_t *wo  = rocksdb_writeoptions_create();
        char                   *err = NULL;
        rocksdb_put_cf(r->db, wo, raw_cf(r, nm), k, kl, v, vl, &err);
        rocksdb_writeoptions_destroy(wo);
        if (err)
                fail_msg("raw put: %s", err);
}

static void raw_close(struct raw *r) {
        for (size_t i = 0; i < r->n; i++)
                rocksdb_column_family_handle_destroy(r->cf[i]);
        rocksdb_close(r->db);
        rocksdb_list_column_families_destroy(r->names, r->n);
        free(r->cf);
        rocksdb_options_destroy(r->o);
}

/* Audit results collected by a query. */
struct got {
        size_t  n;
        int64_t time[64];
        int     verdict[64];
        char    id[64][32];
        char    ekey[64][32];
        bool    has_ekey[64];
        int64_t offset[64];
        size_t  ekey_len[64];
        bool    trunc[64];
        size_t  stop_after; /* 0: never */
};

static int collect(const struct aagw_audit *a, void *opaque) {
        struct got *g = opaque;
        if (g->n < 64) {
                size_t il        = a->id_len < 31 ? a->id_len : 31;
                g->time[g->n]    = a->time_ms;
                g->verdict[g->n] = (int)a->verdict;
                memcpy(g->id[g->n], a->id, il);
                g->id[g->n][il]   = '\0';
                g->has_ekey[g->n] = a->ekey != NULL;
                g->ekey_len[g->n] = a->ekey_len;
                g->trunc[g->n]    = a->ekey_truncated;
                g->offset[g->n]   = a->offset;
                size_t el         = a->ekey_len < 31 ? a->ekey_len : 31;
                if (a->ekey)
                        memcpy(g->ekey[g->n], a->ekey, el);
                g->ekey[g->n][a->ekey ? el : 0] = '\0';
        }
        g->n++;
        return g->stop_after && g->n >= g->stop_after;
}

static struct aagw_audit mk_audit(int64_t t, aagw_audit_verdict_t v,
                                  const char *id, const char *ekey,
                                  int64_t off) {
        struct aagw_audit a;
        memset(&a, 0, sizeof(a));
        a.time_ms   = t;
        a.verdict   = v;
        a.site      = "east";
        a.origin    = "west";
        a.topic     = "clicks";
        a.partition = 3;
        a.offset    = off;
        a.hlc       = 42;
        a.id        = id;
        a.id_len    = strlen(id);
        a.ekey      = ekey;
        a.ekey_len  = ekey ? strlen(ekey) : 0;
        return a;
}

/* ----------------------------------------------------------------- tests */

/* Ids committed are found with their first-seen record; others are not. */
static void test_seen_round_trip(void **state) {
        struct h            h;
        uint8_t             k[3][16];
        bool                f[3];
        struct aagw_seen    out[3], s;
        aagw_store_batch_t *b;
        (void)state;

        h_open(&h, "seen", NULL);
        wait_filter(h.st);
        key_of("a", k[0]);
        key_of("b", k[1]);
        key_of("c", k[2]);
        assert_int_equal(aagw_store_seen_lookup(h.st, (const uint8_t(*)[16])k,
                                                3, f, out, h.err,
                                                sizeof(h.err)),
                         AAGW_OK);
        assert_false(f[0] || f[1] || f[2]);

        int64_t now = wall_ms();
        b           = aagw_store_batch_new(h.st);
        s           = mk_seen(now, "west", "clicks", 5, 1234);
        assert_int_equal(aagw_store_batch_seen(b, k[0], &s), AAGW_OK);
        s = mk_seen(now, "east", "clicks.eu", 0, 7);
        assert_int_equal(aagw_store_batch_seen(b, k[2], &s), AAGW_OK);
        assert_int_equal(aagw_store_batch_size(b), 2);
        assert_int_equal(aagw_store_batch_commit(b, h.err, sizeof(h.err)),
                         AAGW_OK);
        assert_int_equal(aagw_store_batch_size(b), 0);

        memset(out, 0, sizeof(out));
        assert_int_equal(aagw_store_seen_lookup(h.st, (const uint8_t(*)[16])k,
                                                3, f, out, h.err,
                                                sizeof(h.err)),
                         AAGW_OK);
        assert_true(f[0]);
        assert_false(f[1]);
        assert_true(f[2]);
        assert_int_equal(out[0].time_ms, now);
        assert_int_equal(out[0].hlc, (uint64_t)now << 16);
        assert_string_equal(out[0].site, "east");
        assert_string_equal(out[0].origin, "west");
        assert_string_equal(out[0].topic, "clicks");
        assert_int_equal(out[0].partition, 5);
        assert_int_equal(out[0].offset, 1234);
        assert_string_equal(out[2].origin, "east");
        assert_string_equal(out[2].topic, "clicks.eu");
        assert_int_equal(out[2].offset, 7);
        /* Without an output array too. */
        assert_int_equal(aagw_store_seen_lookup(h.st, (const uint8_t(*)[16])k,
                                                3, f, NULL, h.err,
                                                sizeof(h.err)),
                         AAGW_OK);
        assert_true(f[0] && !f[1] && f[2]);
        aagw_store_batch_destroy(b);
        h_close(&h);
}

/* Duplicates inside one batch are the caller's business, but once a batch
 * is committed every lookup sees it: right away (tail), after the tail was
 * indexed (SST files), and in batches of any size. */
static void test_dups_across_batches(void **state) {
        struct h                h;
        struct aagw_store_opts  o = {.cache_mb = 8}; /* 1 MiB tail runs */
        struct aagw_store_stats s;
        (void)state;

        h_open(&h, "dups", &o);
        wait_filter(h.st);
        int64_t now = wall_ms();
        commit_ids(h.st, 0, 1000, now, 1000);
        check_ids(h.st, 0, 1000, true);
        check_ids(h.st, 1000, 2000, false);
        /* The same id twice in a batch: stored once, the later record. */
        aagw_store_batch_t *b = aagw_store_batch_new(h.st);
        uint8_t             k[16];
        struct aagw_seen    a = mk_seen(now, "west", "t", 1, 10), out;
        struct aagw_seen    c = mk_seen(now, "west", "t", 1, 11);
        bool                f;
        key_of("twice", k);
        assert_int_equal(aagw_store_batch_seen(b, k, &a), AAGW_OK);
        assert_int_equal(aagw_store_batch_seen(b, k, &c), AAGW_OK);
        assert_int_equal(aagw_store_batch_commit(b, h.err, sizeof(h.err)),
                         AAGW_OK);
        aagw_store_batch_destroy(b);
        assert_int_equal(aagw_store_seen_lookup(h.st,
                                                (const uint8_t(*)[16]) & k, 1,
                                                &f, &out, h.err, sizeof(h.err)),
                         AAGW_OK);
        assert_true(f);
        assert_int_equal(out.offset, 11);
        /* Enough ids to seal and index several 1 MiB runs. */
        commit_ids(h.st, 1000, 60000, now, 500);
        aagw_store_stats_get(h.st, &s);
        assert_true(s.runs_indexed >= 2);
        check_ids(h.st, 0, 60000, true);
        check_ids(h.st, 60000, 70000, false);
        assert_int_equal(aagw_store_flush(h.st, h.err, sizeof(h.err)), AAGW_OK);
        check_ids(h.st, 0, 60000, true);
        assert_int_equal(aagw_store_seen_lookup(h.st,
                                                (const uint8_t(*)[16]) & k, 1,
                                                &f, &out, h.err, sizeof(h.err)),
                         AAGW_OK);
        assert_true(f);
        assert_int_equal(out.offset, 11);
        aagw_store_stats_get(h.st, &s);
        assert_true(s.seen_filtered > 0); /* the filter answered misses */
        h_close(&h);
}

/* Winners: the newest write of a key is what lookups return, tombstones
 * included, from the tail and after indexing. */
static void test_lww_round_trip(void **state) {
        struct h            h;
        uint8_t             k[2][16];
        bool                f[2];
        struct aagw_lww     out[2], l;
        aagw_store_batch_t *b;
        int64_t             now = wall_ms();
        (void)state;

        h_open(&h, "lww", NULL);
        key_of("user:1", k[0]);
        key_of("user:2", k[1]);
        b = aagw_store_batch_new(h.st);
        l = mk_lww(now, 100, "west", "ev-1", false);
        assert_int_equal(aagw_store_batch_lww(b, k[0], &l), AAGW_OK);
        assert_int_equal(aagw_store_batch_commit(b, h.err, sizeof(h.err)),
                         AAGW_OK);
        for (int round = 0; round < 2; round++) {
                assert_int_equal(
                    aagw_store_lww_lookup(h.st, (const uint8_t(*)[16])k, 2, f,
                                          out, h.err, sizeof(h.err)),
                    AAGW_OK);
                assert_true(f[0]);
                assert_false(f[1]);
                assert_int_equal(out[0].v.hlc, 100);
                assert_string_equal(out[0].v.origin, "west");
                assert_int_equal(out[0].v.id_len, 4);
                assert_memory_equal(out[0].v.id, "ev-1", 4);
                assert_false(out[0].tombstone);
                assert_int_equal(aagw_store_flush(h.st, h.err, sizeof(h.err)),
                                 AAGW_OK);
        }
        /* A newer version (a tombstone) replaces it; the indexed old one
         * must not shadow the new one in the tail. */
        l = mk_lww(now, 200, "east", "ev-2", true);
        assert_int_equal(aagw_store_batch_lww(b, k[0], &l), AAGW_OK);
        l = mk_lww(now, 150, "east", "ev-3", false);
        assert_int_equal(aagw_store_batch_lww(b, k[1], &l), AAGW_OK);
        assert_int_equal(aagw_store_batch_commit(b, h.err, sizeof(h.err)),
                         AAGW_OK);
        for (int round = 0; round < 3; round++) {
                memset(out, 0, sizeof(out));
                assert_int_equal(
                    aagw_store_lww_lookup(h.st, (const uint8_t(*)[16])k, 2, f,
                                          out, h.err, sizeof(h.err)),
                    AAGW_OK);
                assert_true(f[0] && f[1]);
                assert_int_equal(out[0].v.hlc, 200);
                assert_true(out[0].tombstone);
                assert_memory_equal(out[0].v.id, "ev-2", 4);
                assert_int_equal(out[1].v.hlc, 150);
                if (round == 0)
                        assert_int_equal(
                            aagw_store_flush(h.st, h.err, sizeof(h.err)),
                            AAGW_OK);
                else
                        h_reopen(&h, NULL);
        }
        aagw_store_batch_destroy(b);
        h_close(&h);
}

/* A close and an open lose nothing: neither what was indexed nor the
 * journal's tail; lookups right after the open (filter not rebuilt: reads)
 * and after the rebuild agree. */
static void test_reopen_keeps_everything(void **state) {
        struct h                h;
        struct aagw_store_opts  o = {.cache_mb = 8, .filter_mb = 1};
        struct aagw_store_stats s;
        struct aagw_pos         pos;
        struct got              g = {0};
        (void)state;

        h_open(&h, "reopen", &o);
        int64_t now = wall_ms();
        commit_ids(h.st, 0, 30000, now, 1000);
        assert_int_equal(aagw_store_flush(h.st, h.err, sizeof(h.err)), AAGW_OK);
        commit_ids(h.st, 30000, 31000, now, 100); /* journal only */
        aagw_store_batch_t *b = aagw_store_batch_new(h.st);
        struct aagw_audit   a =
            mk_audit(now, AAGW_AUDIT_DROPPED, "id-5", NULL, 77);
        struct aagw_pos p = {500, 900};
        assert_int_equal(aagw_store_batch_audit(b, &a), AAGW_OK);
        assert_int_equal(aagw_store_batch_pos(b, "unify:east", "clicks", 2, &p),
                         AAGW_OK);
        assert_int_equal(aagw_store_batch_commit(b, h.err, sizeof(h.err)),
                         AAGW_OK);
        aagw_store_batch_destroy(b);

        h_reopen(&h, &o);
        check_ids(h.st, 0, 31000, true); /* maybe before the rebuild */
        check_ids(h.st, 31000, 32000, false);
        wait_filter(h.st);
        aagw_store_stats_get(h.st, &s);
        assert_true(s.filter_ready);
        assert_true(s.filter_ids >= 31000);
        check_ids(h.st, 0, 31000, true);
        check_ids(h.st, 31000, 40000, false);
        assert_int_equal(aagw_store_pos_get(h.st, "unify:east", "clicks", 2,
                                            &pos, h.err, sizeof(h.err)),
                         AAGW_OK);
        assert_int_equal(pos.next, 500);
        assert_int_equal(pos.out_next, 900);
        assert_int_equal(aagw_store_audit_by_id(h.st, "id-5", 4, collect, &g,
                                                h.err, sizeof(h.err)),
                         AAGW_OK);
        assert_int_equal(g.n, 1);
        assert_int_equal(g.offset[0], 77);
        /* Commits after the reopen continue the journal. */
        commit_ids(h.st, 40000, 41000, now, 1000);
        h_reopen(&h, &o);
        check_ids(h.st, 0, 31000, true);
        check_ids(h.st, 40000, 41000, true);
        h_close(&h);
}

/* The writer of test_sigkill_after_commit(), run as a fresh process (a
 * forked copy of this one would inherit RocksDB's global thread pool
 * without its threads, and stall on its first flush): commit 50,000 ids
 * in batches of 500 with a position, report on 'fd', wait to be killed. */
static int writer_main(const char *dir, int fd) {
        char                   err[256];
        struct aagw_store_opts o  = {.cache_mb = 8};
        aagw_statedir_t       *sd = aagw_statedir_open(dir, err, sizeof(err));
        aagw_store_t          *st =
            sd ? aagw_store_open(sd, &o, err, sizeof(err)) : NULL;
        char ok = 'n';
        if (st) {
                aagw_store_batch_t *b   = aagw_store_batch_new(st);
                int64_t             now = wall_ms();
                ok                      = 'y';
                for (uint64_t i = 0; i < 50000 && ok == 'y'; i++) {
                        uint8_t          k[16];
                        struct aagw_seen s =
                            mk_seen(now, "west", "t", 0, (int64_t)i);
                        idkey(i, k);
                        aagw_store_batch_seen(b, k, &s);
                        if (i % 500 == 499) {
                                struct aagw_pos p = {(int64_t)i + 1,
                                                     (int64_t)i};
                                aagw_store_batch_pos(b, "u", "t", 0, &p);
                                if (aagw_store_batch_commit(b, err,
                                                            sizeof(err)))
                                        ok = 'n';
                        }
                }
        }
        if (write(fd, &ok, 1) != 1)
                return 3;
        for (;;)
                pause();
}

static const char *self_exe;

/* A writer killed with SIGKILL right after its commits returned loses none
 * of them, whether they were still in the journal or already indexed. */
static void test_sigkill_after_commit(void **state) {
        char  dir[512], fdarg[16];
        int   pfd[2];
        pid_t child;
        (void)state;

        snprintf(dir, sizeof(dir), "%s/killed", tmpl);
        assert_int_equal(pipe(pfd), 0);
        snprintf(fdarg, sizeof(fdarg), "%d", pfd[1]);
        child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                close(pfd[0]);
                execl(self_exe, self_exe, "--writer", dir, fdarg, (char *)NULL);
                _exit(127);
        }
        close(pfd[1]);
        char ok = 0;
        assert_int_equal(read(pfd[0], &ok, 1), 1);
        close(pfd[0]);
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        assert_int_equal(ok, 'y');

        struct h               h;
        struct aagw_store_opts o = {.cache_mb = 8};
        struct aagw_pos        pos;
        h_open(&h, "killed", &o);
        check_ids(h.st, 0, 50000, true);
        check_ids(h.st, 50000, 51000, false);
        assert_int_equal(
            aagw_store_pos_get(h.st, "u", "t", 0, &pos, h.err, sizeof(h.err)),
            AAGW_OK);
        assert_int_equal(pos.next, 50000);
        wait_filter(h.st);
        check_ids(h.st, 0, 50000, true);
        h_close(&h);
}

/* Entries older than the window are invisible at once (whatever stage they
 * are in) and gone from disk after a manual compaction; last-write-wins
 * winners stay, visible and on disk. */
static void test_window_expiry(void **state) {
        struct h               h;
        struct aagw_store_opts o = {
            .window_ms = 60000, .clock = fake_clock, .clock_opaque = NULL};
        struct got      g = {0};
        struct raw      r;
        int64_t         t0 = INT64_C(1700000000000);
        uint8_t         k[16];
        bool            f;
        struct aagw_lww lw;
        (void)state;

        atomic_store(&fake_now, t0);
        h_open(&h, "expiry", &o);
        assert_int_equal(aagw_store_window_ms(h.st), 60000);
        wait_filter(h.st);
        /* Written already expired: never visible. */
        commit_ids(h.st, 0, 100, t0 - 61000, 100);
        check_ids(h.st, 0, 100, false);
        /* Live ones, with lww winners and audit entries. */
        commit_ids(h.st, 100, 200, t0 - 1000, 100);
        aagw_store_batch_t *b = aagw_store_batch_new(h.st);
        lw                    = mk_lww(t0 - 1000, 1, "west", "x", false);
        key_of("ent", k);
        assert_int_equal(aagw_store_batch_lww(b, k, &lw), AAGW_OK);
        struct aagw_audit a =
            mk_audit(t0 - 1000, AAGW_AUDIT_ACCEPTED, "x", "ent", 1);
        assert_int_equal(aagw_store_batch_audit(b, &a), AAGW_OK);
        a = mk_audit(t0 - 70000, AAGW_AUDIT_DROPPED, "x", "ent", 2);
        assert_int_equal(aagw_store_batch_audit(b, &a), AAGW_OK);
        assert_int_equal(aagw_store_batch_commit(b, h.err, sizeof(h.err)),
                         AAGW_OK);
        aagw_store_batch_destroy(b);
        check_ids(h.st, 100, 200, true);
        assert_int_equal(aagw_store_audit_by_id(h.st, "x", 1, collect, &g,
                                                h.err, sizeof(h.err)),
                         AAGW_OK);
        assert_int_equal(g.n, 1);
        assert_int_equal(g.offset[0], 1);
        assert_int_equal(aagw_store_flush(h.st, h.err, sizeof(h.err)), AAGW_OK);
        check_ids(h.st, 100, 200, true);

        /* Time passes: 100..199 expire (59 s after they were written they
         * are still there, 61 s after they are gone). */
        atomic_store(&fake_now, t0 + 58000);
        check_ids(h.st, 100, 200, true);
        commit_ids(h.st, 200, 300, t0 + 58000, 100);
        atomic_store(&fake_now, t0 + 60000);
        check_ids(h.st, 100, 200, false);
        check_ids(h.st, 200, 300, true);
        /* A last-write-wins winner outlives the window: forgetting it
         * would let an older version win again. */
        assert_int_equal(aagw_store_lww_lookup(h.st, (const uint8_t(*)[16]) & k,
                                               1, &f, NULL, h.err,
                                               sizeof(h.err)),
                         AAGW_OK);
        assert_true(f);
        g.n = 0;
        assert_int_equal(aagw_store_audit_by_key(h.st, "ent", 3, collect, &g,
                                                 h.err, sizeof(h.err)),
                         AAGW_OK);
        assert_int_equal(g.n, 0);
        assert_int_equal(aagw_store_audit_since(h.st, 0, -1, collect, &g, h.err,
                                                sizeof(h.err)),
                         AAGW_OK);
        assert_int_equal(g.n, 0);

        /* A manual compaction removes them from disk. */
        assert_int_equal(aagw_store_compact(h.st, h.err, sizeof(h.err)),
                         AAGW_OK);
        h_close(&h);
        raw_open(&r, h.dir);
        assert_int_equal(raw_count(&r, "seen"), 100); /* 200..299 */
        assert_int_equal(raw_count(&r, "lww"), 1);
        assert_int_equal(raw_count(&r, "audit"), 0);
        assert_int_equal(raw_count(&r, "audit_id"), 0);
        assert_int_equal(raw_count(&r, "audit_key"), 0);
        assert_int_equal(raw_count(&r, "audit_verdict"), 0);
        raw_close(&r);
}

/* The last-write-wins order: hlc, then origin, then id, bytewise with a
 * prefix first; a tombstone is a version like any other. */
static void test_version_cmp(void **state) {
        static const struct {
                uint64_t    ah;
                const char *ao, *ai;
                uint64_t    bh;
                const char *bo, *bi;
                int         want;
        } t[] = {
            {1, "east", "a", 2, "east", "a", -1}, /* hlc first */
            {2, "west", "a", 1, "east", "z", 1},  /* ... whatever follows */
            {5, "east", "z", 5, "west", "a", -1}, /* origin second */
            {5, "west", "a", 5, "east", "z", 1},
            {5, "east", "a", 5, "eastx", "a", -1}, /* a prefix first */
            {5, "east", "a", 5, "east", "b", -1},  /* id last */
            {5, "east", "ab", 5, "east", "a", 1},
            {5, "east", "a", 5, "east", "a", 0}, /* tie: identical */
            {0, "", "", 0, "", "", 0},
            {UINT64_MAX, "a", "", UINT64_MAX - 1, "z", "z", 1},
            {5, "east", "\x80", 5, "east", "\x7f", 1}, /* bytes unsigned */
        };
        (void)state;
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                struct aagw_lww a = mk_lww(0, t[i].ah, t[i].ao, t[i].ai, false);
                struct aagw_lww b = mk_lww(0, t[i].bh, t[i].bo, t[i].bi, true);
                int             c = aagw_version_cmp(&a.v, &b.v);
                int             d = aagw_version_cmp(&b.v, &a.v);
                if ((c > 0) - (c < 0) != t[i].want ||
                    (d > 0) - (d < 0) != -t[i].want)
                        fail_msg("row %zu: cmp %d / %d, want %d", i, c, d,
                                 t[i].want);
        }
        /* Ids with NUL bytes compare by length, not as C strings. */
        struct aagw_lww a = mk_lww(0, 1, "e", "", false);
        struct aagw_lww b = a;
        a.v.id_len        = 2;
        memcpy(a.v.id, "x\0", 2);
        b.v.id_len = 1;
        memcpy(b.v.id, "x", 1);
        assert_true(aagw_version_cmp(&a.v, &b.v) > 0);
        /* A tombstone wins over an older write and loses to a newer one. */
        struct aagw_lww live = mk_lww(0, 10, "east", "e1", false);
        struct aagw_lww tomb = mk_lww(0, 11, "west", "e2", true);
        assert_true(aagw_version_cmp(&tomb.v, &live.v) > 0);
        live.v.hlc = 12;
        assert_true(aagw_version_cmp(&tomb.v, &live.v) < 0);
        assert_string_equal(aagw_audit_verdict_name(AAGW_AUDIT_SUPERSEDED),
                            "superseded");
        assert_string_equal(aagw_audit_verdict_name(AAGW_AUDIT__CNT),
                            "unknown");
}

/* Audit queries return exactly the matching entries in the window, oldest
 * first, whether they are indexed or still in the journal. */
static void test_audit_queries(void **state) {
        struct h               h;
        struct aagw_store_opts o  = {.window_ms = 3600000, .clock = fake_clock};
        int64_t                t0 = INT64_C(1700000000000);
        struct got             g;
        aagw_store_batch_t    *b;
        char                   longkey[1500];
        (void)state;

        atomic_store(&fake_now, t0);
        h_open(&h, "audit", &o);
        b = aagw_store_batch_new(h.st);
        /* Indexed part: t0-3000 .. t0-2000. */
        struct aagw_audit a[] = {
            mk_audit(t0 - 3000, AAGW_AUDIT_ACCEPTED, "e1", "k1", 1),
            mk_audit(t0 - 2500, AAGW_AUDIT_DROPPED, "e1", NULL, 2),
            mk_audit(t0 - 2500, AAGW_AUDIT_ACCEPTED, "e2", "k1", 3),
            mk_audit(t0 - 2000, AAGW_AUDIT_SUPERSEDED, "e3", "k1", 4),
            mk_audit(t0 - 4000000, AAGW_AUDIT_DROPPED, "e1", "k1", 5), /* old */
        };
        for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++)
                assert_int_equal(aagw_store_batch_audit(b, &a[i]), AAGW_OK);
        assert_int_equal(aagw_store_batch_commit(b, h.err, sizeof(h.err)),
                         AAGW_OK);
        assert_int_equal(aagw_store_flush(h.st, h.err, sizeof(h.err)), AAGW_OK);
        /* Journal part: t0-1000 .. t0 (+1 s in the future: stored as now). */
        memset(longkey, 'K', sizeof(longkey) - 1);
        longkey[sizeof(longkey) - 1] = '\0';
        struct aagw_audit c[]        = {
                   mk_audit(t0 - 1000, AAGW_AUDIT_DROPPED, "e1", NULL, 6),
                   mk_audit(t0 - 500, AAGW_AUDIT_IDENTICAL, "e2", "k2", 7),
                   mk_audit(t0 + 1000, AAGW_AUDIT_REJECTED, "e4", longkey, 8),
        };
        for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
                assert_int_equal(aagw_store_batch_audit(b, &c[i]), AAGW_OK);
        assert_int_equal(aagw_store_batch_commit(b, h.err, sizeof(h.err)),
                         AAGW_OK);
        aagw_store_batch_destroy(b);

        for (int round = 0; round < 3; round++) {
                /* By id: e1 has 1, 2, 6 (5 is out of the window). */
                memset(&g, 0, sizeof(g));
                assert_int_equal(aagw_store_audit_by_id(h.st, "e1", 2, collect,
                                                        &g, h.err,
                                                        sizeof(h.err)),
                                 AAGW_OK);
                assert_int_equal(g.n, 3);
                assert_int_equal(g.offset[0], 1);
                assert_int_equal(g.offset[1], 2);
                assert_int_equal(g.offset[2], 6);
                assert_int_equal(g.time[0], t0 - 3000);
                assert_int_equal(g.verdict[1], AAGW_AUDIT_DROPPED);
                assert_string_equal(g.id[2], "e1");
                assert_false(g.has_ekey[1]);
                /* An id that only shares a prefix finds nothing. */
                memset(&g, 0, sizeof(g));
                assert_int_equal(aagw_store_audit_by_id(h.st, "e", 1, collect,
                                                        &g, h.err,
                                                        sizeof(h.err)),
                                 AAGW_OK);
                assert_int_equal(g.n, 0);
                /* By key: k1 has 1, 3, 4. */
                memset(&g, 0, sizeof(g));
                assert_int_equal(aagw_store_audit_by_key(h.st, "k1", 2, collect,
                                                         &g, h.err,
                                                         sizeof(h.err)),
                                 AAGW_OK);
                assert_int_equal(g.n, 3);
                assert_int_equal(g.offset[0], 1);
                assert_int_equal(g.offset[1], 3);
                assert_int_equal(g.offset[2], 4);
                assert_string_equal(g.ekey[2], "k1");
                /* A long key: stored truncated, found by its full bytes. */
                memset(&g, 0, sizeof(g));
                assert_int_equal(
                    aagw_store_audit_by_key(h.st, longkey, strlen(longkey),
                                            collect, &g, h.err, sizeof(h.err)),
                    AAGW_OK);
                assert_int_equal(g.n, 1);
                assert_int_equal(g.offset[0], 8);
                assert_true(g.trunc[0]);
                assert_int_equal(g.ekey_len[0], AAGW_AUDIT_EKEY_MAX);
                assert_int_equal(g.time[0], t0); /* clamped to now */
                /* Since, all verdicts, then one verdict. */
                memset(&g, 0, sizeof(g));
                assert_int_equal(aagw_store_audit_since(h.st, t0 - 2500, -1,
                                                        collect, &g, h.err,
                                                        sizeof(h.err)),
                                 AAGW_OK);
                assert_int_equal(g.n, 6);
                int64_t want_off[] = {2, 3, 4, 6, 7, 8};
                for (size_t i = 0; i < 6; i++)
                        assert_int_equal(g.offset[i], want_off[i]);
                memset(&g, 0, sizeof(g));
                assert_int_equal(
                    aagw_store_audit_since(h.st, 0, AAGW_AUDIT_DROPPED, collect,
                                           &g, h.err, sizeof(h.err)),
                    AAGW_OK);
                assert_int_equal(g.n, 2);
                assert_int_equal(g.offset[0], 2);
                assert_int_equal(g.offset[1], 6);
                /* A range [from, to), and a callback that stops early. */
                memset(&g, 0, sizeof(g));
                assert_int_equal(
                    aagw_store_audit_range(h.st, t0 - 3000, t0 - 2000, -1,
                                           collect, &g, h.err, sizeof(h.err)),
                    AAGW_OK);
                assert_int_equal(g.n, 3);
                memset(&g, 0, sizeof(g));
                g.stop_after = 2;
                assert_int_equal(aagw_store_audit_by_key(h.st, "k1", 2, collect,
                                                         &g, h.err,
                                                         sizeof(h.err)),
                                 AAGW_OK);
                assert_int_equal(g.n, 2);
                assert_int_equal(aagw_store_audit_since(h.st, 0, 9, collect, &g,
                                                        h.err, sizeof(h.err)),
                                 AAGW_ERR_INVAL);
                if (round == 0)
                        assert_int_equal(
                            aagw_store_flush(h.st, h.err, sizeof(h.err)),
                            AAGW_OK);
                else
                        h_reopen(&h, &o);
        }
        h_close(&h);
}

/* A secondary instance sees what a live primary committed once it caught
 * up, through indexing and journal deletion, and after the primary
 * stopped; it writes nothing. */
static void test_secondary(void **state) {
        struct h               h;
        struct aagw_store_opts o = {.cache_mb = 8};
        struct got             g = {0};
        struct aagw_pos        pos;
        char                   err[512];
        aagw_store_t          *sec;
        (void)state;

        h_open(&h, "secondary", &o);
        int64_t now = wall_ms();
        commit_ids(h.st, 0, 1000, now, 100);
        sec = aagw_store_open_secondary(h.dir, &o, err, sizeof(err));
        if (!sec)
                fail_msg("secondary: %s", err);
        assert_null(aagw_store_batch_new(sec));
        struct aagw_pos_entry pe = {"s", "t", 0, {1, 2}};
        assert_int_equal(aagw_store_pos_put(sec, &pe, 1, err, sizeof(err)),
                         AAGW_ERR_INVAL);
        check_ids(sec, 0, 1000, true);

        /* New commits: invisible until the catch-up. */
        commit_ids(h.st, 1000, 2000, now, 100);
        aagw_store_batch_t *b = aagw_store_batch_new(h.st);
        struct aagw_audit   a =
            mk_audit(now, AAGW_AUDIT_DROPPED, "id-1500", NULL, 1500);
        struct aagw_pos p = {2000, 1999};
        assert_int_equal(aagw_store_batch_audit(b, &a), AAGW_OK);
        assert_int_equal(aagw_store_batch_pos(b, "u", "t", 1, &p), AAGW_OK);
        assert_int_equal(aagw_store_batch_commit(b, h.err, sizeof(h.err)),
                         AAGW_OK);
        aagw_store_batch_destroy(b);
        check_ids(sec, 1000, 2000, false);
        assert_int_equal(aagw_store_catch_up(sec, err, sizeof(err)), AAGW_OK);
        check_ids(sec, 0, 2000, true);
        assert_int_equal(aagw_store_audit_by_id(sec, "id-1500", 7, collect, &g,
                                                err, sizeof(err)),
                         AAGW_OK);
        assert_int_equal(g.n, 1);
        assert_int_equal(
            aagw_store_pos_get(sec, "u", "t", 1, &pos, err, sizeof(err)),
            AAGW_OK);
        assert_int_equal(pos.next, 2000);

        /* The primary indexes its tail (several runs) and, after the grace,
         * deletes the journal ranges: still all visible. */
        commit_ids(h.st, 2000, 40000, now, 1000);
        assert_int_equal(aagw_store_flush(h.st, h.err, sizeof(h.err)), AAGW_OK);
        assert_int_equal(aagw_store_catch_up(sec, err, sizeof(err)), AAGW_OK);
        check_ids(sec, 0, 40000, true);
        sleep(3);
        assert_int_equal(aagw_store_catch_up(sec, err, sizeof(err)), AAGW_OK);
        check_ids(sec, 0, 40000, true);
        g.n = 0;
        assert_int_equal(aagw_store_audit_by_id(sec, "id-1500", 7, collect, &g,
                                                err, sizeof(err)),
                         AAGW_OK);
        assert_int_equal(g.n, 1);
        aagw_store_close(sec);

        /* After the gateway stopped. */
        commit_ids(h.st, 40000, 41000, now, 100);
        h_close(&h);
        sec = aagw_store_open_secondary(h.dir, &o, err, sizeof(err));
        if (!sec)
                fail_msg("secondary after stop: %s", err);
        check_ids(sec, 0, 41000, true);
        check_ids(sec, 41000, 42000, false);
        aagw_store_close(sec);

        /* No state dir: a readable error. */
        snprintf(h.dir, sizeof(h.dir), "%s/nothing-here", tmpl);
        assert_null(aagw_store_open_secondary(h.dir, NULL, err, sizeof(err)));
        assert_non_null(strstr(err, "no aagw state in"));
}

/* A filter far too small for its ids stays correct, only slower: 400,000
 * ids in 1 MiB, all in one slot of 128 KiB (2.6 bits per id). */
static void test_bounded_filter(void **state) {
        struct h                h;
        struct aagw_store_opts  o = {.cache_mb = 8, .filter_mb = 1};
        struct aagw_store_stats s, s0;
        (void)state;

        h_open(&h, "bounded", &o);
        wait_filter(h.st);
        commit_ids(h.st, 0, 400000, wall_ms(), 1000);
        check_ids(h.st, 0, 400000, true);
        aagw_store_stats_get(h.st, &s0);
        check_ids(h.st, 400000, 420000, false);
        aagw_store_stats_get(h.st, &s);
        assert_true(s.filter_bytes <= (size_t)1 << 20);
        assert_true(s.filter_ready);
        /* Some of the 20,000 misses were still answered by the filter, many
         * went to RocksDB as false positives (and were not found there). */
        assert_true(s.seen_filtered > s0.seen_filtered);
        assert_true(s.seen_reads - s0.seen_reads > 1000);
        assert_int_equal(s.seen_read_hits, s0.seen_read_hits);
        h_close(&h);
}

/* unify.filter: exact.  Stored ids are known without a RocksDB read, new
 * ones are answered "absent" by the filter; a caller that wants the
 * first-seen record still gets it (a read); after a reopen the rebuilt
 * filter answers again. */
static void test_exact_filter(void **state) {
        struct h                h;
        struct aagw_store_opts  o = {.cache_mb = 8, .filter_exact = true};
        struct aagw_store_stats s0, s1;
        struct aagw_seen        out;
        uint8_t                 k[16];
        bool                    f;
        (void)state;

        h_open(&h, "exact", &o);
        wait_filter(h.st);
        int64_t now = wall_ms();
        commit_ids(h.st, 0, 60000, now, 500); /* several runs indexed */
        aagw_store_stats_get(h.st, &s0);
        assert_true(s0.runs_indexed >= 2);
        check_ids(h.st, 0, 60000, true);
        aagw_store_stats_get(h.st, &s1);
        assert_int_equal(s1.seen_exact_hits - s0.seen_exact_hits, 60000);
        assert_int_equal(s1.seen_reads, s0.seen_reads);
        assert_int_equal(s1.seen_tail_hits, s0.seen_tail_hits);
        check_ids(h.st, 60000, 70000, false);
        aagw_store_stats_get(h.st, &s0);
        assert_int_equal(s0.seen_filtered - s1.seen_filtered, 10000);
        assert_int_equal(s0.seen_reads, s1.seen_reads);

        /* With the first-seen record asked for: read, and right. */
        idkey(12345, k);
        assert_int_equal(aagw_store_seen_lookup(h.st,
                                                (const uint8_t(*)[16]) & k, 1,
                                                &f, &out, h.err, sizeof(h.err)),
                         AAGW_OK);
        assert_true(f);
        assert_int_equal(out.offset, 12345);
        aagw_store_stats_get(h.st, &s1);
        assert_int_equal(s1.seen_exact_hits, s0.seen_exact_hits);
        assert_int_equal(s1.seen_tail_hits + s1.seen_read_hits -
                             s0.seen_tail_hits - s0.seen_read_hits,
                         1);

        /* Reopened: the rebuilt filter knows them all again. */
        h_reopen(&h, &o);
        wait_filter(h.st);
        aagw_store_stats_get(h.st, &s0);
        check_ids(h.st, 0, 60000, true);
        check_ids(h.st, 60000, 61000, false);
        aagw_store_stats_get(h.st, &s1);
        assert_int_equal(s1.seen_exact_hits - s0.seen_exact_hits, 60000);
        assert_int_equal(s1.seen_reads, s0.seen_reads);
        h_close(&h);
}

/* Lines logged at warn or above, for tests that expect one. */
static _Atomic int warn_full;

static void warn_sink(aagw_log_level_t level, const char *line, void *opaque) {
        (void)opaque;
        if (level >= AAGW_LOG_WARN && strstr(line, "exact filter") &&
            strstr(line, "is full"))
                atomic_fetch_add(&warn_full, 1);
}

/* An exact filter too small for the window: the slot stops taking ids at
 * 70% (with a warning) and answers "maybe" for the rest, so every answer
 * stays right and the ids it could not take cost a read. */
static void test_exact_filter_full(void **state) {
        struct h                h;
        struct aagw_store_opts  o = {.cache_mb = 8, .filter_mb = 1,
                                     .filter_exact = true};
        struct aagw_store_stats s0, s1;
        (void)state;

        aagw_log_set_sink(warn_sink, NULL);
        h_open(&h, "exact-full", &o);
        wait_filter(h.st);
        /* 9/10 of 1 MiB over 8 slots: 7,372 entries each, full at
         * 5,160. */
        commit_ids(h.st, 0, 20000, wall_ms(), 1000);
        aagw_store_stats_get(h.st, &s0);
        check_ids(h.st, 0, 20000, true);
        aagw_store_stats_get(h.st, &s1);
        assert_int_equal(s1.seen_exact_hits - s0.seen_exact_hits, 5160);
        assert_int_equal(atomic_load(&warn_full), 1);
        assert_int_equal(s1.seen_exact_hits - s0.seen_exact_hits +
                             s1.seen_tail_hits - s0.seen_tail_hits +
                             s1.seen_read_hits - s0.seen_read_hits,
                         20000);
        /* New ids: the Bloom part answers most, the full slot's "maybe"
         * the rest, with a read that finds nothing. */
        check_ids(h.st, 20000, 25000, false);
        aagw_store_stats_get(h.st, &s0);
        assert_int_equal(s0.seen_filtered - s1.seen_filtered +
                             s0.seen_reads - s1.seen_reads,
                         5000);
        assert_true(s0.seen_reads > s1.seen_reads);
        assert_int_equal(s0.seen_read_hits, s1.seen_read_hits);
        h_close(&h);
        aagw_log_set_sink(NULL, NULL);
}

/* Exact filter and the window: an id whose epoch the cutoff cuts is
 * decided by its stored time, so it expires to the millisecond, as with
 * the Bloom filter. */
static void test_exact_filter_window(void **state) {
        struct h                h;
        struct aagw_store_opts  o = {.window_ms = 60000, .clock = fake_clock,
                                     .filter_exact = true};
        struct aagw_store_stats s;
        int64_t                 t0 = INT64_C(1700000000000);
        (void)state;

        atomic_store(&fake_now, t0);
        h_open(&h, "exact-window", &o);
        wait_filter(h.st);
        commit_ids(h.st, 0, 100, t0 - 61000, 100); /* expired already */
        commit_ids(h.st, 100, 200, t0 - 1000, 100);
        check_ids(h.st, 0, 100, false);
        check_ids(h.st, 100, 200, true);
        /* Live while time >= now - window. */
        atomic_store(&fake_now, t0 + 59000);
        check_ids(h.st, 100, 200, true);
        commit_ids(h.st, 200, 300, t0 + 59000, 100);
        atomic_store(&fake_now, t0 + 59001);
        check_ids(h.st, 100, 200, false);
        check_ids(h.st, 200, 300, true);
        aagw_store_stats_get(h.st, &s);
        assert_true(s.seen_exact_hits >= 100); /* 200..299, newest epoch */
        h_close(&h);
}

/* Bad input to a batch fails the add and its commit (nothing written). */
static void test_batch_bad_input(void **state) {
        struct h          h;
        uint8_t           k[16];
        bool              f;
        struct aagw_seen  s = mk_seen(wall_ms(), "west", "t", 0, 1);
        struct aagw_lww   l = mk_lww(wall_ms(), 1, "west", "x", false);
        struct aagw_audit a =
            mk_audit(wall_ms(), AAGW_AUDIT_ACCEPTED, "x", NULL, 1);
        char                big[300];
        aagw_store_batch_t *b;
        (void)state;

        h_open(&h, "badinput", NULL);
        b = aagw_store_batch_new(h.st);
        key_of("good", k);
        assert_int_equal(aagw_store_batch_seen(b, k, &s), AAGW_OK);
        memset(s.topic, 'x', sizeof(s.topic)); /* not NUL-terminated */
        assert_int_equal(aagw_store_batch_seen(b, k, &s), AAGW_ERR_INVAL);
        assert_int_equal(aagw_store_batch_lww(b, k, &l), AAGW_ERR_INVAL);
        assert_int_equal(aagw_store_batch_commit(b, h.err, sizeof(h.err)),
                         AAGW_ERR_INVAL);
        assert_non_null(strstr(h.err, "not NUL-terminated"));
        assert_int_equal(aagw_store_seen_lookup(h.st,
                                                (const uint8_t(*)[16]) & k, 1,
                                                &f, NULL, h.err, sizeof(h.err)),
                         AAGW_OK);
        assert_false(f); /* the good one was not written either */

        /* The batch is usable again. */
        l.v.id_len = AAGW_ID_MAX + 1;
        assert_int_equal(aagw_store_batch_lww(b, k, &l), AAGW_ERR_INVAL);
        assert_int_equal(aagw_store_batch_commit(b, h.err, sizeof(h.err)),
                         AAGW_ERR_INVAL);
        a.verdict = AAGW_AUDIT__CNT;
        assert_int_equal(aagw_store_batch_audit(b, &a), AAGW_ERR_INVAL);
        assert_int_equal(aagw_store_batch_commit(b, h.err, sizeof(h.err)),
                         AAGW_ERR_INVAL);
        memset(big, 'o', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        a        = mk_audit(wall_ms(), AAGW_AUDIT_ACCEPTED, "x", NULL, 1);
        a.origin = big;
        assert_int_equal(aagw_store_batch_audit(b, &a), AAGW_ERR_INVAL);
        assert_int_equal(aagw_store_batch_commit(b, h.err, sizeof(h.err)),
                         AAGW_ERR_INVAL);
        assert_int_equal(aagw_store_batch_commit(b, h.err, sizeof(h.err)),
                         AAGW_OK); /* empty */
        s = mk_seen(wall_ms(), "west", "t", 0, 1);
        assert_int_equal(aagw_store_batch_seen(b, k, &s), AAGW_OK);
        assert_int_equal(aagw_store_batch_commit(b, h.err, sizeof(h.err)),
                         AAGW_OK);
        assert_int_equal(aagw_store_seen_lookup(h.st,
                                                (const uint8_t(*)[16]) & k, 1,
                                                &f, NULL, h.err, sizeof(h.err)),
                         AAGW_OK);
        assert_true(f);
        aagw_store_batch_destroy(b);
        aagw_store_batch_destroy(NULL);
        h_close(&h);

        /* Bad options. */
        struct aagw_store_opts o = {.cache_mb = 4};
        h_open(&h, "badinput2", NULL);
        aagw_store_close(h.st);
        h.st = aagw_store_open(h.sd, &o, h.err, sizeof(h.err));
        assert_null(h.st);
        assert_non_null(strstr(h.err, "cache_mb"));
        aagw_statedir_close(h.sd);

        /* The seen ids' epochs are fixed when the state dir is created
         * (window / 7): a window up to 63 epochs long reopens, a longer one
         * is refused with the reason. */
        o = (struct aagw_store_opts){.window_ms = 7000};
        h_open(&h, "window-change", &o);
        commit_ids(h.st, 0, 10, wall_ms(), 10);
        o.window_ms = 63000;
        h_reopen(&h, &o);
        check_ids(h.st, 0, 10, true);
        aagw_store_close(h.st);
        o.window_ms = 64000;
        h.st        = aagw_store_open(h.sd, &o, h.err, sizeof(h.err));
        assert_null(h.st);
        assert_non_null(strstr(h.err, "1000 ms epochs"));
        aagw_statedir_close(h.sd);
}

/* Values that are short, corrupt or from a future format are reported with
 * the key that holds them, never read past or crashed on. */
static void test_corrupt_values(void **state) {
        struct h        h;
        struct raw      r;
        uint8_t         k[3][16];
        bool            f[3];
        struct got      g = {0};
        struct aagw_lww lw;
        (void)state;

        h_open(&h, "corrupt", NULL);
        commit_ids(h.st, 0, 10, wall_ms(), 10);
        h_close(&h);

        raw_open(&r, h.dir);
        key_of("short", k[0]);
        key_of("future", k[1]);
        key_of("long", k[2]);
        /* Seen keys are (epoch, id hash); epochs are window / 7 long (the
         * layout in dedup/dedup_int.h), the default window 24 h. */
        uint8_t sk[3][24];
        int64_t ep = wall_ms() / ((86400000 + 6) / 7);
        for (int j = 0; j < 3; j++) {
                for (int i = 0; i < 8; i++)
                        sk[j][i] = (uint8_t)((uint64_t)ep >> (56 - 8 * i));
                memcpy(sk[j] + 8, k[j], 16);
        }
        raw_put(&r, "seen", sk[0], 24, "\x01\x00", 2);
        raw_put(&r, "seen", sk[1], 24, "\x09xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                36);
        /* A seen value whose string length points past its end. */
        uint8_t v[40] = {1};
        int64_t vt    = wall_ms();
        for (int i = 0; i < 8; i++)
                v[1 + i] = (uint8_t)((uint64_t)vt >> (56 - 8 * i));
        v[29] = 200;
        raw_put(&r, "seen", sk[2], 24, v, 30);
        raw_put(&r, "lww", k[0], 16, "\x01", 1);
        /* An audit entry with a broken value, found through its index. */
        uint8_t akey[20] = {0}, ikey[36];
        int64_t now      = wall_ms();
        for (int i = 0; i < 8; i++)
                akey[i] = (uint8_t)((uint64_t)now >> (56 - 8 * i));
        aagw_id_key("bad-audit", 9, ikey);
        memcpy(ikey + 16, akey, 20);
        raw_put(&r, "audit", akey, 20, "\x01garbage", 8);
        raw_put(&r, "audit_id", ikey, 36, "", 0);
        raw_close(&r);

        h_open(&h, "corrupt", NULL);
        wait_filter(h.st); /* the rebuild survives them too */
        check_ids(h.st, 0, 10, true);
        for (int i = 0; i < 3; i++) {
                h.err[0] = '\0';
                assert_int_equal(
                    aagw_store_seen_lookup(h.st, (const uint8_t(*)[16]) & k[i],
                                           1, f, NULL, h.err, sizeof(h.err)),
                    AAGW_ERR_STORE);
                assert_non_null(strstr(h.err, "seen id "));
        }
        assert_non_null(strstr(h.err, "corrupt or short"));
        assert_int_equal(
            aagw_store_seen_lookup(h.st, (const uint8_t(*)[16]) & k[1], 1, f,
                                   NULL, h.err, sizeof(h.err)),
            AAGW_ERR_STORE);
        assert_non_null(strstr(h.err, "newer aagw"));
        assert_int_equal(aagw_store_lww_lookup(h.st,
                                               (const uint8_t(*)[16]) & k[0], 1,
                                               f, &lw, h.err, sizeof(h.err)),
                         AAGW_ERR_STORE);
        assert_non_null(strstr(h.err, "lww key "));
        assert_int_equal(aagw_store_audit_by_id(h.st, "bad-audit", 9, collect,
                                                &g, h.err, sizeof(h.err)),
                         AAGW_ERR_STORE);
        assert_non_null(strstr(h.err, "audit entry"));
        assert_int_equal(aagw_store_audit_since(h.st, 0, -1, collect, &g, h.err,
                                                sizeof(h.err)),
                         AAGW_ERR_STORE);
        /* A compaction keeps what it cannot read (and does not crash). */
        assert_int_equal(aagw_store_compact(h.st, h.err, sizeof(h.err)),
                         AAGW_OK);
        h_close(&h);

        /* A corrupt journal record: the open refuses, saying which. */
        raw_open(&r, h.dir);
        uint8_t seq[8] = {0, 0, 0, 0, 0, 0, 0x10, 0};
        raw_put(&r, "journal", seq, 8, "\x01\x10\x00", 3);
        raw_close(&r);
        h.sd = aagw_statedir_open(h.dir, h.err, sizeof(h.err));
        assert_non_null(h.sd);
        h.st = aagw_store_open(h.sd, NULL, h.err, sizeof(h.err));
        assert_null(h.st);
        assert_non_null(strstr(h.err, "journal record 4096 is corrupt"));
        aagw_statedir_close(h.sd);
}

/* The seen ids' index and filter blocks are held by RocksDB's table
 * readers, outside the block cache: the store reports their size (taken
 * off the block cache's capacity) and lookups stay exact. */
static void test_readers_accounted(void **state) {
        struct h                h;
        struct aagw_store_opts  o = {.cache_mb = 8, .filter_mb = 1};
        struct aagw_store_stats s;
        (void)state;

        h_open(&h, "readers", &o);
        wait_filter(h.st);
        commit_ids(h.st, 0, 30000, wall_ms(), 1000);
        assert_int_equal(aagw_store_flush(h.st, h.err, sizeof(h.err)), AAGW_OK);
        for (int i = 0; i < 500; i++) {
                aagw_store_stats_get(h.st, &s);
                if (s.readers_bytes)
                        break;
                usleep(10000);
        }
        assert_true(s.runs_indexed > 0);
        assert_true(s.readers_bytes > 0);
        /* The cache gives up what the readers hold: 8 MiB * 3/8. */
        assert_true(s.cache_usage <= (size_t)3 << 20);
        check_ids(h.st, 0, 30000, true);
        check_ids(h.st, 30000, 40000, false);
        h_close(&h);
}

/* Seen files written with another table layout (a state dir from an
 * older aagw: compressed blocks, other index and filter settings, seven
 * levels; the raw open records RocksDB's default of 7 in the OPTIONS
 * file, which the store then keeps) are read as they are: ids stored
 * there are found, before and after the filter rebuild. */
static void test_old_layout_files(void **state) {
        struct h                h;
        struct raw              r;
        struct aagw_store_opts  o = {.cache_mb = 8, .filter_mb = 1};
        rocksdb_readoptions_t  *ro;
        rocksdb_iterator_t     *it;
        rocksdb_flushoptions_t *fo;
        size_t                  n = 0;
        char                   *err = NULL;
        (void)state;

        h_open(&h, "oldlayout", &o);
        commit_ids(h.st, 0, 10, wall_ms(), 10);
        assert_int_equal(aagw_store_flush(h.st, h.err, sizeof(h.err)), AAGW_OK);
        h_close(&h);

        /* Copy one stored value under 5,000 other ids, with RocksDB's
         * default options (Snappy or LZ4 blocks, no Bloom filter). */
        raw_open(&r, h.dir);
        ro = rocksdb_readoptions_create();
        it = rocksdb_create_iterator_cf(r.db, ro, raw_cf(&r, "seen"));
        rocksdb_iter_seek_to_first(it);
        assert_true(rocksdb_iter_valid(it));
        size_t         kl, vl;
        const char    *k0 = rocksdb_iter_key(it, &kl);
        const char    *v0 = rocksdb_iter_value(it, &vl);
        uint8_t        sk[24], val[256];
        assert_int_equal(kl, 24);
        assert_true(vl <= sizeof(val));
        memcpy(sk, k0, 8); /* the epoch */
        memcpy(val, v0, vl);
        rocksdb_iter_destroy(it);
        rocksdb_readoptions_destroy(ro);
        for (uint64_t i = 1000; i < 6000; i++, n++) {
                idkey(i, sk + 8);
                raw_put(&r, "seen", sk, 24, val, vl);
        }
        fo = rocksdb_flushoptions_create();
        rocksdb_flushoptions_set_wait(fo, 1);
        rocksdb_flush_cf(r.db, fo, raw_cf(&r, "seen"), &err);
        rocksdb_flushoptions_destroy(fo);
        if (err)
                fail_msg("raw flush: %s", err);
        raw_close(&r);
        assert_int_equal(n, 5000);

        h.sd = aagw_statedir_open(h.dir, h.err, sizeof(h.err));
        assert_non_null(h.sd);
        h.st = aagw_store_open(h.sd, &o, h.err, sizeof(h.err));
        if (!h.st)
                fail_msg("store open: %s", h.err);
        check_ids(h.st, 1000, 6000, true); /* maybe before the rebuild */
        check_ids(h.st, 0, 10, true);
        wait_filter(h.st);
        check_ids(h.st, 1000, 6000, true);
        check_ids(h.st, 6000, 10000, false);
        h_close(&h);
}

int main(int argc, char **argv) {
        if (argc == 4 && !strcmp(argv[1], "--writer"))
                return writer_main(argv[2], atoi(argv[3]));
        self_exe                        = argv[0];
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_seen_round_trip),
            cmocka_unit_test(test_dups_across_batches),
            cmocka_unit_test(test_lww_round_trip),
            cmocka_unit_test(test_reopen_keeps_everything),
            cmocka_unit_test(test_sigkill_after_commit),
            cmocka_unit_test(test_window_expiry),
            cmocka_unit_test(test_version_cmp),
            cmocka_unit_test(test_audit_queries),
            cmocka_unit_test(test_secondary),
            cmocka_unit_test(test_bounded_filter),
            cmocka_unit_test(test_exact_filter),
            cmocka_unit_test(test_exact_filter_full),
            cmocka_unit_test(test_exact_filter_window),
            cmocka_unit_test(test_batch_bad_input),
            cmocka_unit_test(test_corrupt_values),
            cmocka_unit_test(test_readers_accounted),
            cmocka_unit_test(test_old_layout_files),
        };
        return cmocka_run_group_tests_name("dedup", tests, group_setup,
                                           group_teardown);
}
