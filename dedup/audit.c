/*
 * dedup/audit.c: audit log queries.
 *
 * The audit log is keyed by akey = (time, commit seq, index), so a time
 * range is one ordered scan.  By id, by entity key and by verdict go
 * through an index family whose keys end with the akey, then fetch the
 * entries with MultiGet, a chunk at a time (memory stays bounded).  The
 * id and key indexes are deferred (dedup_int.h): their newest entries may
 * still be in the journal only, so those queries merge the journal's
 * matches with the index scan.  On a primary every query reads one
 * snapshot; a secondary's view only moves in aagw_store_catch_up().
 * Entries are checked against the query's bytes (the index holds hashes)
 * and against the window.
 */
#include "dedup_int.h"

#include <stdlib.h>
#include <string.h>

#define QCHUNK 128

struct query {
        aagw_store_t             *st;
        rocksdb_readoptions_t    *ro;
        const rocksdb_snapshot_t *snap;
        int64_t                   cutoff;
        aagw_audit_cb_t          *cb;
        void                     *opaque;
        bool                      stop;
        int                       match; /* 0: none, DK_AUDIT_ID / _KEY */
        const uint8_t            *mbytes;
        size_t                    mlen;
        uint8_t                   akeys[QCHUNK][DEDUP_AKEY_LEN];
        size_t                    n;
        char                     *errstr;
        size_t                    errstr_size;
};

static void query_init(struct query *q, aagw_store_t *st, aagw_audit_cb_t *cb,
                       void *opaque, char *errstr, size_t errstr_size) {
        memset(q, 0, sizeof(*q));
        q->st          = st;
        q->cb          = cb;
        q->opaque      = opaque;
        q->errstr      = errstr;
        q->errstr_size = errstr_size;
        q->cutoff      = dedup_now(st) - st->window_ms;
        q->ro          = rocksdb_readoptions_create();
        if (!st->secondary) {
                q->snap = rocksdb_create_snapshot(st->db);
                rocksdb_readoptions_set_snapshot(q->ro, q->snap);
        }
}

static void query_deinit(struct query *q) {
        if (q->snap)
                rocksdb_release_snapshot(q->st->db, q->snap);
        rocksdb_readoptions_destroy(q->ro);
}

/* Does the decoded entry belong to the query (not a hash collision)? */
static bool matches(const struct query *q, const struct aagw_audit *a) {
        if (q->match == DK_AUDIT_ID)
                return a->id_len == q->mlen &&
                       !memcmp(a->id, q->mbytes, q->mlen);
        if (q->match == DK_AUDIT_KEY) {
                if (!a->ekey)
                        return false;
                if (a->ekey_truncated)
                        return q->mlen > AAGW_AUDIT_EKEY_MAX &&
                               a->ekey_len == AAGW_AUDIT_EKEY_MAX &&
                               !memcmp(a->ekey, q->mbytes, a->ekey_len);
                return a->ekey_len == q->mlen &&
                       !memcmp(a->ekey, q->mbytes, q->mlen);
        }
        return true;
}

/* Decode one audit value and hand it to the callback.  -1 on a decode
 * error (errstr set). */
static int emit(struct query *q, const uint8_t *akey, const char *v,
                size_t vl) {
        struct aagw_audit_decoded d;
        char                   why[256], hex[2 * DEDUP_AKEY_LEN + 1];

        if (dedup_audit_decode((const uint8_t *)v, vl, &d, why, sizeof(why))) {
                dedup_hex(akey, DEDUP_AKEY_LEN, hex);
                snprintf(q->errstr, q->errstr_size, "audit entry %s: %s", hex,
                         why);
                return -1;
        }
        if (d.a.time_ms < q->cutoff || !matches(q, &d.a))
                return 0;
        if (q->cb(&d.a, q->opaque))
                q->stop = true;
        return 0;
}

/* Fetch the chunk of akeys collected so far (ascending) and emit them. */
static int flush_chunk(struct query *q) {
        const char              *kl[QCHUNK];
        size_t                   ks[QCHUNK];
        rocksdb_pinnableslice_t *vals[QCHUNK];
        char                    *errs[QCHUNK];
        int                      rc = 0;

        if (!q->n || q->stop)
                return 0;
        if (!q->st->cf[CF_AUDIT]) {
                q->n = 0;
                return 0;
        }
        for (size_t i = 0; i < q->n; i++) {
                kl[i] = (const char *)q->akeys[i];
                ks[i] = DEDUP_AKEY_LEN;
        }
        rocksdb_batched_multi_get_cf(q->st->db, q->ro, q->st->cf[CF_AUDIT],
                                     q->n, kl, ks, vals, errs, true);
        for (size_t i = 0; i < q->n; i++) {
                if (errs[i]) {
                        if (!rc)
                                snprintf(q->errstr, q->errstr_size,
                                         "MultiGet(audit): %s", errs[i]);
                        rc = -1;
                        rocksdb_free(errs[i]);
                }
                if (!vals[i])
                        continue;
                if (!rc && !q->stop) {
                        size_t      vl;
                        const char *v =
                            rocksdb_pinnableslice_value(vals[i], &vl);
                        rc = emit(q, q->akeys[i], v, vl);
                }
                rocksdb_pinnableslice_destroy(vals[i]);
        }
        q->n = 0;
        return rc;
}

static int add_akey(struct query *q, const uint8_t *akey) {
        if ((int64_t)dedup_get_be64(akey) < q->cutoff)
                return 0;
        memcpy(q->akeys[q->n++], akey, DEDUP_AKEY_LEN);
        return q->n == QCHUNK ? flush_chunk(q) : 0;
}

static int iter_err(rocksdb_iterator_t *it, const char *what, char *errstr,
                    size_t errstr_size) {
        char *err = NULL;
        rocksdb_iter_get_error(it, &err);
        return dedup_take_err(err, what, errstr, errstr_size);
}

static int akey_cmp(const void *a, const void *b) {
        return memcmp(a, b, DEDUP_AKEY_LEN);
}

/* The akeys of index entries of 'kind' with hash 'h' still in the
 * journal, sorted and unique.  Returns the count, or -1 (errstr set). */
static ssize_t journal_matches(struct query *q, int kind, const uint8_t h[16],
                               uint8_t (**out)[DEDUP_AKEY_LEN]) {
        uint8_t(*v)[DEDUP_AKEY_LEN] = NULL;
        size_t              n = 0, cap = 0;
        rocksdb_iterator_t *it;

        *out = NULL;
        if (!q->st->cf[CF_JOURNAL])
                return 0;
        it =
            rocksdb_create_iterator_cf(q->st->db, q->ro, q->st->cf[CF_JOURNAL]);
        for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it);
             rocksdb_iter_next(it)) {
                size_t         vl;
                const uint8_t *p = (const uint8_t *)rocksdb_iter_value(it, &vl);
                const uint8_t *end = p + vl;
                struct dedup_entry e;
                while (p < end && (p = dedup_entry_next(p, end, &e))) {
                        if (e.kind != kind || memcmp(e.key, h, 16))
                                continue;
                        if (n == cap) {
                                size_t nc = cap ? cap * 2 : 64;
                                void  *nv = realloc(v, nc * sizeof(*v));
                                if (!nv) {
                                        free(v);
                                        rocksdb_iter_destroy(it);
                                        snprintf(q->errstr, q->errstr_size,
                                                 "out of memory");
                                        return -1;
                                }
                                v   = nv;
                                cap = nc;
                        }
                        memcpy(v[n++], e.key + 16, DEDUP_AKEY_LEN);
                }
        }
        if (iter_err(it, "journal scan", q->errstr, q->errstr_size)) {
                free(v);
                rocksdb_iter_destroy(it);
                return -1;
        }
        rocksdb_iter_destroy(it);
        if (n) {
                qsort(v, n, sizeof(*v), akey_cmp);
                size_t u = 1;
                for (size_t i = 1; i < n; i++)
                        if (memcmp(v[i], v[u - 1], DEDUP_AKEY_LEN))
                                memcpy(v[u++], v[i], DEDUP_AKEY_LEN);
                n = u;
        }
        *out = v;
        return (ssize_t)n;
}

/* By id or by entity key: merge the index family's entries for hash 'h'
 * (from the window's start) with the journal's, oldest first. */
static aagw_err_t by_hash(aagw_store_t *st, int kind, const void *bytes,
                          size_t len, aagw_audit_cb_t *cb, void *opaque,
                          char *errstr, size_t errstr_size) {
        struct query q;
        uint8_t      h[16], lo[24], hi[16];
        uint8_t(*jm)[DEDUP_AKEY_LEN] = NULL;
        ssize_t                         nj;
        size_t                          ji     = 0;
        int                             rc     = 0;
        rocksdb_column_family_handle_t *cf     = st->cf[dedup_kind_cf(kind)];
        rocksdb_iterator_t             *it     = NULL;
        bool                            has_hi = false;

        aagw_id_key(bytes ? bytes : "", len, h);
        query_init(&q, st, cb, opaque, errstr, errstr_size);
        q.match  = kind;
        q.mbytes = bytes;
        q.mlen   = len;
        if ((nj = journal_matches(&q, kind, h, &jm)) < 0) {
                query_deinit(&q);
                return AAGW_ERR_STORE;
        }
        memcpy(lo, h, 16);
        dedup_put_be64(lo + 16, (uint64_t)(q.cutoff > 0 ? q.cutoff : 0));
        memcpy(hi, h, 16);
        for (int i = 15; i >= 0; i--)
                if (++hi[i]) {
                        has_hi = true;
                        break;
                }
        rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
        if (q.snap)
                rocksdb_readoptions_set_snapshot(ro, q.snap);
        if (has_hi)
                rocksdb_readoptions_set_iterate_upper_bound(
                    ro, (const char *)hi, sizeof(hi));
        if (cf) {
                it = rocksdb_create_iterator_cf(st->db, ro, cf);
                rocksdb_iter_seek(it, (const char *)lo, sizeof(lo));
        }
        while (!rc && !q.stop) {
                const uint8_t *ik = NULL;
                size_t         kl = 0;
                if (it && rocksdb_iter_valid(it)) {
                        ik = (const uint8_t *)rocksdb_iter_key(it, &kl);
                        if (kl != DEDUP_IDXKEY_LEN || memcmp(ik, h, 16))
                                ik = NULL;
                }
                const uint8_t *jk = ji < (size_t)nj ? jm[ji] : NULL;
                if (!ik && !jk)
                        break;
                int c = !ik   ? 1
                        : !jk ? -1
                              : memcmp(ik + 16, jk, DEDUP_AKEY_LEN);
                rc    = add_akey(&q, c <= 0 ? ik + 16 : jk);
                if (c <= 0)
                        rocksdb_iter_next(it);
                if (c >= 0)
                        ji++;
        }
        if (!rc)
                rc = flush_chunk(&q);
        if (it) {
                if (!rc &&
                    iter_err(it, "audit index scan", errstr, errstr_size))
                        rc = -1;
                rocksdb_iter_destroy(it);
        }
        rocksdb_readoptions_destroy(ro);
        free(jm);
        query_deinit(&q);
        return rc ? AAGW_ERR_STORE : AAGW_OK;
}

aagw_err_t aagw_store_audit_by_id(aagw_store_t *st, const void *id, size_t len,
                                  aagw_audit_cb_t *cb, void *opaque,
                                  char *errstr, size_t errstr_size) {
        return by_hash(st, DK_AUDIT_ID, id, len, cb, opaque, errstr,
                       errstr_size);
}

aagw_err_t aagw_store_audit_by_key(aagw_store_t *st, const void *key,
                                   size_t len, aagw_audit_cb_t *cb,
                                   void *opaque, char *errstr,
                                   size_t errstr_size) {
        return by_hash(st, DK_AUDIT_KEY, key, len, cb, opaque, errstr,
                       errstr_size);
}

aagw_err_t aagw_store_audit_range(aagw_store_t *st, int64_t from_ms,
                                  int64_t to_ms, int verdict,
                                  aagw_audit_cb_t *cb, void *opaque,
                                  char *errstr, size_t errstr_size) {
        struct query                    q;
        uint8_t                         lo[9], hi[9];
        size_t                          pre = verdict < 0 ? 0 : 1;
        int                             rc  = 0;
        rocksdb_iterator_t             *it;
        rocksdb_column_family_handle_t *cf;

        if (verdict >= AAGW_AUDIT__CNT) {
                snprintf(errstr, errstr_size, "unknown verdict %d", verdict);
                return AAGW_ERR_INVAL;
        }
        query_init(&q, st, cb, opaque, errstr, errstr_size);
        if (from_ms < q.cutoff)
                from_ms = q.cutoff;
        if (from_ms < 0)
                from_ms = 0;
        cf = st->cf[verdict < 0 ? CF_AUDIT : CF_AUDIT_VERDICT];
        if (to_ms <= from_ms || !cf) {
                query_deinit(&q);
                return AAGW_OK;
        }
        lo[0] = hi[0] = (uint8_t)(verdict < 0 ? 0 : verdict);
        dedup_put_be64(lo + pre, (uint64_t)from_ms);
        dedup_put_be64(hi + pre, (uint64_t)to_ms);
        rocksdb_readoptions_set_iterate_upper_bound(q.ro, (const char *)hi,
                                                    pre + 8);
        it = rocksdb_create_iterator_cf(st->db, q.ro, cf);
        for (rocksdb_iter_seek(it, (const char *)lo, pre + 8);
             !rc && !q.stop && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
                size_t         kl, vl;
                const uint8_t *k = (const uint8_t *)rocksdb_iter_key(it, &kl);
                if (kl != pre + DEDUP_AKEY_LEN)
                        continue; /* not ours: skip, do not guess */
                if (verdict < 0) {
                        const char *v = rocksdb_iter_value(it, &vl);
                        rc            = emit(&q, k, v, vl);
                } else {
                        rc = add_akey(&q, k + 1);
                }
        }
        if (!rc)
                rc = flush_chunk(&q);
        if (!rc && iter_err(it, "audit scan", errstr, errstr_size))
                rc = -1;
        rocksdb_iter_destroy(it);
        query_deinit(&q);
        return rc ? AAGW_ERR_STORE : AAGW_OK;
}

aagw_err_t aagw_store_audit_since(aagw_store_t *st, int64_t since_ms,
                                  int verdict, aagw_audit_cb_t *cb,
                                  void *opaque, char *errstr,
                                  size_t errstr_size) {
        return aagw_store_audit_range(st, since_ms, INT64_MAX, verdict, cb,
                                      opaque, errstr, errstr_size);
}
