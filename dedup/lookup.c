/*
 * dedup/lookup.c: the unify state's lookups and batches (design at the top
 * of dedup_int.h).
 *
 * A lookup goes, per chunk of keys: filter (seen only, once rebuilt) ->
 * tail (active run, then the run being indexed: newest first) -> one
 * MultiGet for the keys still open.  RocksDB holds only what is older than
 * the tail, so the first place that knows a key is right.
 *
 * A commit: one WriteBatch with the audit entries, their verdict index,
 * the positions, the meta seq and one journal record with the deferred
 * entries (seen, lww, audit by id / by key).  The filter learns the ids
 * before the write (a failed write leaves a harmless false positive); the
 * tail after it, from memory reserved before it, so a successful write is
 * always visible to lookups.
 */
#include "dedup_int.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK 256

/* ------------------------------- BATCHES ------------------------------- */

struct aagw_store_batch {
        aagw_store_t         *st;
        rocksdb_writebatch_t *wb;   /* positions, then everything at commit */
        struct dedup_buf      jour; /* deferred seen / lww entries */
        struct dedup_buf      aud;  /* audit records, see batch_audit() */
        struct dedup_buf      fkeys, ftimes; /* seen ids for the filter */
        size_t                nops, nkeys, naudit;
        aagw_err_t            err;
        char                  errmsg[256];
};

/* Audit record in b->aud: fixed header, then the encoded value. */
#define AREC_HDR (8 + 1 + 16 + 1 + 16 + 4)

aagw_store_batch_t *aagw_store_batch_new(aagw_store_t *st) {
        aagw_store_batch_t *b;

        if (st->secondary || !(b = calloc(1, sizeof(*b))))
                return NULL;
        b->st = st;
        b->wb = rocksdb_writebatch_create();
        return b;
}

static void batch_reset(aagw_store_batch_t *b) {
        rocksdb_writebatch_clear(b->wb);
        b->jour.len = b->aud.len = b->fkeys.len = b->ftimes.len = 0;
        b->nops = b->nkeys = b->naudit = 0;
        b->err                         = AAGW_OK;
        b->errmsg[0]                   = '\0';
}

void aagw_store_batch_destroy(aagw_store_batch_t *b) {
        if (!b)
                return;
        rocksdb_writebatch_destroy(b->wb);
        dedup_buf_free(&b->jour);
        dedup_buf_free(&b->aud);
        dedup_buf_free(&b->fkeys);
        dedup_buf_free(&b->ftimes);
        free(b);
}

size_t aagw_store_batch_size(const aagw_store_batch_t *b) {
        return b->nops;
}

/* Record the first failure of an add; the commit reports it. */
static aagw_err_t batch_fail(aagw_store_batch_t *b, aagw_err_t err,
                             const char *why) {
        if (!b->err) {
                b->err = err;
                snprintf(b->errmsg, sizeof(b->errmsg), "%s", why);
        }
        return err;
}

static aagw_err_t enc_fail(aagw_store_batch_t *b, int rc, const char *why) {
        return rc == -1 ? batch_fail(b, AAGW_ERR_NOMEM, "out of memory")
                        : batch_fail(b, AAGW_ERR_INVAL, why);
}

/* A window starts no later than now and no earlier than the epoch. */
static int64_t clamp_time(aagw_store_t *st, int64_t t) {
        int64_t now = dedup_now(st);
        return t < 0 ? 0 : t > now ? now : t;
}

/* Start a deferred entry in b->jour: returns its offset; the caller
 * encodes the value after it and calls entry_end(). */
static int entry_begin(struct dedup_buf *j, int kind, const uint8_t key[16],
                       size_t *off) {
        if (dedup_buf_reserve(j, DEDUP_ENTRY_HDR + 16))
                return -1;
        *off             = j->len;
        j->p[j->len]     = (uint8_t)kind;
        j->p[j->len + 1] = 16;
        memcpy(j->p + j->len + DEDUP_ENTRY_HDR, key, 16);
        j->len += DEDUP_ENTRY_HDR + 16;
        return 0;
}

static void entry_end(struct dedup_buf *j, size_t off) {
        dedup_put_be16(j->p + off + 2,
                       (uint16_t)(j->len - off - DEDUP_ENTRY_HDR - 16));
}

aagw_err_t aagw_store_batch_seen(aagw_store_batch_t *b, const uint8_t key[16],
                                 const struct aagw_seen *seen) {
        const char *why = NULL;
        size_t      off;
        int64_t     t;
        int         rc;

        if (b->err)
                return b->err;
        t = clamp_time(b->st, seen->time_ms);
        if (entry_begin(&b->jour, DK_SEEN, key, &off) ||
            dedup_buf_reserve(&b->fkeys, 16) ||
            dedup_buf_reserve(&b->ftimes, sizeof(int64_t)))
                return enc_fail(b, -1, NULL);
        if ((rc = dedup_seen_encode(&b->jour, seen, t, &why))) {
                b->jour.len = off;
                return enc_fail(b, rc, why);
        }
        entry_end(&b->jour, off);
        memcpy(b->fkeys.p + b->fkeys.len, key, 16);
        b->fkeys.len += 16;
        memcpy(b->ftimes.p + b->ftimes.len, &t, sizeof(t));
        b->ftimes.len += sizeof(t);
        b->nops++;
        b->nkeys++;
        return AAGW_OK;
}

aagw_err_t aagw_store_batch_lww(aagw_store_batch_t *b, const uint8_t key[16],
                                const struct aagw_lww *lww) {
        const char *why = NULL;
        size_t      off;
        int         rc;

        if (b->err)
                return b->err;
        if (entry_begin(&b->jour, DK_LWW, key, &off))
                return enc_fail(b, -1, NULL);
        if ((rc = dedup_lww_encode(&b->jour, lww,
                                   clamp_time(b->st, lww->time_ms), &why))) {
                b->jour.len = off;
                return enc_fail(b, rc, why);
        }
        entry_end(&b->jour, off);
        b->nops++;
        b->nkeys++;
        return AAGW_OK;
}

aagw_err_t aagw_store_batch_audit(aagw_store_batch_t      *b,
                                  const struct aagw_audit *a) {
        const char *why = NULL;
        int64_t     t;
        size_t      off;
        uint8_t    *h;
        int         rc;

        if (b->err)
                return b->err;
        if (a->id_len > AAGW_ID_MAX || (a->id_len && !a->id))
                return batch_fail(b, AAGW_ERR_INVAL,
                                  "audit: id longer than AAGW_ID_MAX (or "
                                  "NULL)");
        if (b->naudit >= UINT32_MAX)
                return batch_fail(b, AAGW_ERR_INVAL, "audit: batch too large");
        t = clamp_time(b->st, a->time_ms);
        if (dedup_buf_reserve(&b->aud, AREC_HDR))
                return enc_fail(b, -1, NULL);
        off = b->aud.len;
        b->aud.len += AREC_HDR;
        if ((rc = dedup_audit_encode(&b->aud, a, t, &why))) {
                b->aud.len = off;
                return enc_fail(b, rc, why);
        }
        h = b->aud.p + off;
        dedup_put_be64(h, (uint64_t)t);
        h[8] = (uint8_t)a->verdict;
        aagw_id_key(a->id ? a->id : "", a->id_len, h + 9);
        h[25] = a->ekey ? 1 : 0;
        if (a->ekey)
                aagw_id_key(a->ekey, a->ekey_len, h + 26);
        else
                memset(h + 26, 0, 16);
        dedup_put_be32(h + 42, (uint32_t)(b->aud.len - off - AREC_HDR));
        b->nops++;
        b->naudit++;
        return AAGW_OK;
}

aagw_err_t aagw_store_batch_pos(aagw_store_batch_t *b, const char *scope,
                                const char *topic, int32_t partition,
                                const struct aagw_pos *pos) {
        char    key[1024];
        uint8_t val[16];
        size_t  klen;

        if (b->err)
                return b->err;
        klen = dedup_pos_encode(key, sizeof(key), scope, topic, partition, pos,
                                val);
        if (!klen)
                return batch_fail(b, AAGW_ERR_INVAL, "position key too long");
        rocksdb_writebatch_put_cf(b->wb, b->st->cf[CF_POSITIONS], key, klen,
                                  (const char *)val, sizeof(val));
        b->nops++;
        return AAGW_OK;
}

/* Turn the audit records into WriteBatch puts (akey = time, seq, index)
 * and their deferred index entries (appended to 'j').  0 or -1 (memory). */
static int put_audits(aagw_store_batch_t *b, uint64_t seq,
                      struct dedup_buf *j) {
        aagw_store_t  *st = b->st;
        const uint8_t *p = b->aud.p, *end = b->aud.p + b->aud.len;

        for (uint32_t i = 0; p < end; i++) {
                uint8_t  ik[DEDUP_IDXKEY_LEN], vk[1 + DEDUP_AKEY_LEN];
                uint8_t *akey = ik + 16;
                uint32_t vlen = dedup_get_be32(p + 42);

                memcpy(akey, p, 8); /* time */
                dedup_put_be64(akey + 8, seq);
                dedup_put_be32(akey + 16, i);
                rocksdb_writebatch_put_cf(b->wb, st->cf[CF_AUDIT],
                                          (const char *)akey, DEDUP_AKEY_LEN,
                                          (const char *)p + AREC_HDR, vlen);
                vk[0] = p[8];
                memcpy(vk + 1, akey, DEDUP_AKEY_LEN);
                rocksdb_writebatch_put_cf(b->wb, st->cf[CF_AUDIT_VERDICT],
                                          (const char *)vk, sizeof(vk), "", 0);
                memcpy(ik, p + 9, 16);
                if (dedup_entry_put(j, DK_AUDIT_ID, ik, sizeof(ik), NULL, 0))
                        return -1;
                if (p[25]) {
                        memcpy(ik, p + 26, 16);
                        if (dedup_entry_put(j, DK_AUDIT_KEY, ik, sizeof(ik),
                                            NULL, 0))
                                return -1;
                }
                p += AREC_HDR + vlen;
        }
        return 0;
}

aagw_err_t aagw_store_batch_commit(aagw_store_batch_t *b, char *errstr,
                                   size_t errstr_size) {
        aagw_store_t     *st = b->st;
        struct dedup_buf *j  = &st->jbuf;
        uint8_t           seqb[8];
        uint64_t          seq;
        char             *err = NULL;
        aagw_err_t        rc  = AAGW_OK;

        if (b->err) {
                snprintf(errstr, errstr_size, "%s", b->errmsg);
                rc = b->err;
                batch_reset(b);
                return rc;
        }
        if (!b->nops)
                return AAGW_OK;
        pthread_mutex_lock(&st->commit_mu);
        seq    = st->seq + 1;
        j->len = 0;
        if (dedup_buf_reserve(j, b->jour.len + 1)) {
                snprintf(errstr, errstr_size, "out of memory");
                rc = AAGW_ERR_NOMEM;
                goto out;
        }
        if (b->jour.len)
                memcpy(j->p, b->jour.p, b->jour.len);
        j->len = b->jour.len;
        if (put_audits(b, seq, j)) {
                snprintf(errstr, errstr_size, "out of memory");
                rc = AAGW_ERR_NOMEM;
                goto out;
        }
        dedup_put_be64(seqb, seq);
        if (j->len)
                rocksdb_writebatch_put_cf(b->wb, st->cf[CF_JOURNAL],
                                          (const char *)seqb, 8,
                                          (const char *)j->p, j->len);
        rocksdb_writebatch_put_cf(b->wb, st->cf[CF_DEFAULT], "seq", 3,
                                  (const char *)seqb, 8);

        pthread_mutex_lock(&st->mu);
        if (st->active->len && st->active->len + j->len > st->run_cap &&
            dedup_seal_locked(st, errstr, errstr_size)) {
                pthread_mutex_unlock(&st->mu);
                rc = AAGW_ERR_STORE;
                goto out;
        }
        if (dedup_run_reserve(st->active, j->len, b->nkeys)) {
                pthread_mutex_unlock(&st->mu);
                snprintf(errstr, errstr_size, "out of memory (tail)");
                rc = AAGW_ERR_NOMEM;
                goto out;
        }
        if (b->fkeys.len)
                dedup_filter_add(st->filter, (const uint8_t(*)[16])b->fkeys.p,
                                 (const int64_t *)(void *)b->ftimes.p,
                                 b->fkeys.len / 16, dedup_now(st));
        pthread_mutex_unlock(&st->mu);

        rocksdb_write(st->db, st->wopts, b->wb, &err);
        if (dedup_take_err(err, "rocksdb_write(unify)", errstr, errstr_size)) {
                rc = AAGW_ERR_STORE;
                goto out;
        }
        st->seq = seq;
        pthread_mutex_lock(&st->mu);
        /* Cannot fail: our own encoding, memory reserved above. */
        (void)dedup_run_append(st->active, j->p, j->len, j->len ? seq : 0);
        pthread_mutex_unlock(&st->mu);
        atomic_fetch_add(&st->n_commits, 1);
out:
        pthread_mutex_unlock(&st->commit_mu);
        batch_reset(b);
        return rc;
}

/* ------------------------------- LOOKUPS ------------------------------- */

/* Decode value 'v' of a key into out[i] (if 'out'); *live tells whether
 * it is inside the window.  0, or -1 with errstr. */
typedef int(decode_fn)(const uint8_t *v, size_t len, int64_t cutoff, void *out,
                       size_t i, bool *live, char *errstr, size_t errstr_size);

static int decode_seen(const uint8_t *v, size_t len, int64_t cutoff, void *out,
                       size_t i, bool *live, char *errstr, size_t errstr_size) {
        struct aagw_seen s, *o = out;
        if (dedup_seen_decode(v, len, &s, errstr, errstr_size))
                return -1;
        *live = s.time_ms >= cutoff;
        if (*live && o)
                o[i] = s;
        return 0;
}

/* A winner is live whatever its age: winners do not expire (store.c,
 * cf_windowed()), so an old version can always be judged against the
 * newest one. */
static int decode_lww(const uint8_t *v, size_t len, int64_t cutoff, void *out,
                      size_t i, bool *live, char *errstr, size_t errstr_size) {
        struct aagw_lww *o = out;
        struct aagw_lww  l;
        (void)cutoff;
        if (dedup_lww_decode(v, len, &l, errstr, errstr_size))
                return -1;
        *live = true;
        if (*live && o)
                o[i] = l;
        return 0;
}

/* Name the key in a decode error: "seen id 00ff..: <reason>". */
static void key_err(const char *what, const uint8_t key[16], char *errstr,
                    size_t errstr_size) {
        char hex[33], why[256];
        dedup_hex(key, 16, hex);
        snprintf(why, sizeof(why), "%s", errstr);
        snprintf(errstr, errstr_size, "%s %s: %s", what, hex, why);
}

/* Keys waiting for one MultiGet: a seen key is (epoch, id hash), an lww
 * key the hash; 'idx' maps each back to the caller's key. */
struct mget {
        uint8_t  k[CHUNK][DEDUP_SEENKEY_LEN];
        size_t   klen;
        uint32_t idx[CHUNK];
        size_t   n;
};

/* Read the pending keys and decode what is there into found[] / out. */
static int mget_flush(aagw_store_t *st, int kind, struct mget *m,
                      const uint8_t (*keys)[16], bool *found, void *out,
                      decode_fn *dec, int64_t cutoff, char *errstr,
                      size_t errstr_size) {
        const char *what = kind == DK_SEEN ? "seen id" : "lww key";
        int         cfi  = dedup_kind_cf(kind);
        rocksdb_column_family_handle_t *cf = st->cf[cfi];
        const char                     *kl[CHUNK];
        size_t                          ks[CHUNK];
        rocksdb_pinnableslice_t        *vals[CHUNK];
        char                           *errs[CHUNK];
        uint64_t                        hits = 0;
        int                             bad  = 0;

        if (!m->n || !cf) {
                m->n = 0;
                return 0;
        }
        for (size_t j = 0; j < m->n; j++) {
                kl[j] = (const char *)m->k[j];
                ks[j] = m->klen;
        }
        rocksdb_batched_multi_get_cf(st->db,
                                     kind == DK_SEEN ? st->sropts : st->ropts,
                                     cf, m->n, kl, ks, vals,
                                     errs, false);
        for (size_t j = 0; j < m->n; j++) {
                size_t      i = m->idx[j];
                const char *v;
                size_t      vl;
                bool        live;

                if (errs[j]) {
                        if (!bad)
                                snprintf(errstr, errstr_size,
                                         "MultiGet(%s): %s",
                                         dedup_cf_names[cfi], errs[j]);
                        bad = 1;
                        rocksdb_free(errs[j]);
                }
                if (!vals[j])
                        continue;
                v = rocksdb_pinnableslice_value(vals[j], &vl);
                /* An id stored in two epochs (stored twice by the caller):
                 * the first live one found wins. */
                if (!bad && !found[i]) {
                        if (dec((const uint8_t *)v, vl, cutoff, out, i, &live,
                                errstr, errstr_size)) {
                                key_err(what, keys[i], errstr, errstr_size);
                                bad = 1;
                        } else {
                                found[i] = live;
                                hits += live;
                        }
                }
                rocksdb_pinnableslice_destroy(vals[j]);
        }
        if (kind == DK_SEEN)
                atomic_fetch_add(&st->n_read_hits, hits);
        m->n = 0;
        return bad ? -1 : 0;
}

static aagw_err_t lookup(aagw_store_t *st, int kind, const uint8_t (*keys)[16],
                         size_t n, bool *found, void *out, decode_fn *dec,
                         char *errstr, size_t errstr_size) {
        const char  *what = kind == DK_SEEN ? "seen id" : "lww key";
        struct mget *m    = malloc(sizeof(*m));

        if (!m) {
                snprintf(errstr, errstr_size, "out of memory");
                return AAGW_ERR_NOMEM;
        }
        m->n    = 0;
        m->klen = kind == DK_SEEN ? DEDUP_SEENKEY_LEN : 16;
        for (size_t base = 0; base < n; base += CHUNK) {
                size_t   cnt = n - base < CHUNK ? n - base : CHUNK;
                uint64_t slots[CHUNK], sure[CHUNK], sure_ok = 0;
                int64_t  slot_epoch[FILTER_SLOTS_MAX];
                uint16_t open[CHUNK];
                size_t   nopen = 0;
                int64_t  now = dedup_now(st), cutoff = now - st->window_ms;
                int64_t  e_lo     = dedup_epoch(cutoff, st->slice_ms);
                int64_t  e_hi     = dedup_epoch(now, st->slice_ms);
                uint64_t filtered = 0, tail = 0, reads = 0, exact = 0;
                bool     use_filter;
                int      bad = 0;

                pthread_mutex_lock(&st->mu);
                use_filter = kind == DK_SEEN && st->filter && st->filter_ready;
                if (use_filter) {
                        /* An exact hit answers only when the caller wants
                         * no first-seen record, and only in an epoch
                         * wholly inside the window: in the one the cutoff
                         * cuts, the stored time decides (a read). */
                        bool exact_answers =
                            !out && dedup_filter_is_exact(st->filter);
                        dedup_filter_probe(st->filter, keys + base, cnt, now,
                                           slots, sure);
                        for (int s = 0; s < FILTER_SLOTS_MAX; s++) {
                                slot_epoch[s] =
                                    dedup_filter_slot_epoch(st->filter, s);
                                if (exact_answers && slot_epoch[s] >= 0 &&
                                    slot_epoch[s] * st->slice_ms >= cutoff)
                                        sure_ok |= UINT64_C(1) << s;
                        }
                }
                for (size_t i = 0; i < cnt && !bad; i++) {
                        const uint8_t *v;
                        size_t         vl;
                        bool           live;

                        found[base + i] = false;
                        if (use_filter && !slots[i]) {
                                filtered++;
                                continue;
                        }
                        if (use_filter && (sure[i] & sure_ok)) {
                                found[base + i] = true;
                                exact++;
                                continue;
                        }
                        v = dedup_run_get(st->active, kind, keys[base + i],
                                          &vl);
                        if (!v && st->sealed)
                                v = dedup_run_get(st->sealed, kind,
                                                  keys[base + i], &vl);
                        if (!v) {
                                open[nopen++] = (uint16_t)i;
                                continue;
                        }
                        tail++;
                        if (dec(v, vl, cutoff, out, base + i, &live, errstr,
                                errstr_size)) {
                                key_err(what, keys[base + i], errstr,
                                        errstr_size);
                                bad = 1;
                                break;
                        }
                        found[base + i] = live;
                }
                pthread_mutex_unlock(&st->mu);

                /* RocksDB for the keys still open: a seen id in the epochs
                 * whose filter slot said "maybe" (every live epoch without
                 * the filter), an lww key as it is. */
                for (size_t o = 0; o < nopen && !bad; o++) {
                        size_t i = base + open[o];
                        if (kind != DK_SEEN) {
                                memcpy(m->k[m->n], keys[i], 16);
                                m->idx[m->n++] = (uint32_t)i;
                                reads++;
                        } else {
                                int64_t ep[FILTER_SLOTS_MAX];
                                int     ne = 0;
                                if (use_filter) {
                                        for (uint64_t b = slots[open[o]]; b;
                                             b &= b - 1)
                                                ep[ne++] =
                                                    slot_epoch[__builtin_ctzll(
                                                        b)];
                                } else {
                                        for (int64_t e = e_hi;
                                             e >= e_lo && ne < FILTER_SLOTS_MAX;
                                             e--)
                                                ep[ne++] = e;
                                }
                                for (int x = 0; x < ne && !bad; x++) {
                                        if (m->n == CHUNK &&
                                            mget_flush(st, kind, m, keys, found,
                                                       out, dec, cutoff, errstr,
                                                       errstr_size)) {
                                                bad = 1;
                                                break;
                                        }
                                        dedup_put_be64(m->k[m->n],
                                                       (uint64_t)ep[x]);
                                        memcpy(m->k[m->n] + 8, keys[i], 16);
                                        m->idx[m->n++] = (uint32_t)i;
                                        reads++;
                                }
                        }
                        if (!bad && m->n == CHUNK &&
                            mget_flush(st, kind, m, keys, found, out, dec,
                                       cutoff, errstr, errstr_size))
                                bad = 1;
                }
                if (!bad && mget_flush(st, kind, m, keys, found, out, dec,
                                       cutoff, errstr, errstr_size))
                        bad = 1;
                if (kind == DK_SEEN) {
                        atomic_fetch_add(&st->n_lookups, cnt);
                        atomic_fetch_add(&st->n_filtered, filtered);
                        atomic_fetch_add(&st->n_exact_hits, exact);
                        atomic_fetch_add(&st->n_tail_hits, tail);
                        atomic_fetch_add(&st->n_reads, reads);
                }
                if (bad) {
                        free(m);
                        return AAGW_ERR_STORE;
                }
        }
        free(m);
        return AAGW_OK;
}

aagw_err_t aagw_store_seen_lookup(aagw_store_t *st, const uint8_t (*keys)[16],
                                  size_t n, bool *found, struct aagw_seen *seen,
                                  char *errstr, size_t errstr_size) {
        return lookup(st, DK_SEEN, keys, n, found, seen, decode_seen, errstr,
                      errstr_size);
}

aagw_err_t aagw_store_lww_lookup(aagw_store_t *st, const uint8_t (*keys)[16],
                                 size_t n, bool *found, struct aagw_lww *out,
                                 char *errstr, size_t errstr_size) {
        return lookup(st, DK_LWW, keys, n, found, out, decode_lww, errstr,
                      errstr_size);
}
