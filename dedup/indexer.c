/*
 * dedup/indexer.c: the journal (replay at open), the tail indexer thread
 * (sealed run -> sorted SST files -> ingestion), housekeeping (journal
 * ranges, expiry of the time-ordered families) and the filter rebuild
 * thread.  The design is at the top of dedup_int.h.
 */
#include "dedup_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A sealed run's journal range is deleted this long after its ingestion,
 * so that a secondary that read the MANIFEST just before the ingestion and
 * the WAL just after still finds the entries (in the journal). */
#define JOURNAL_GRACE_MS 2000

static int64_t mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait on st->cond for at most 'ms' (st->cond uses CLOCK_MONOTONIC). */
static void timed_wait(aagw_store_t *st, int64_t ms) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (time_t)(ms / 1000);
        ts.tv_nsec += (long)(ms % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&st->cond, &st->mu, &ts);
}

/* Add the seen ids of journal record 'p' to the filter (caller holds 'mu'
 * or runs before the threads start).  A time that cannot be read counts
 * as "now": kept longest, which is the safe side. */
static void filter_add_record(aagw_store_t *st, const uint8_t *p, size_t len) {
        uint8_t            keys[256][16];
        int64_t            times[256];
        size_t             n   = 0;
        const uint8_t     *end = p + len;
        struct dedup_entry e;
        int64_t            now = dedup_now(st);

        while (p < end && (p = dedup_entry_next(p, end, &e))) {
                if (e.kind != DK_SEEN)
                        continue;
                memcpy(keys[n], e.key, 16);
                if (dedup_value_time(e.val, e.vlen, &times[n]))
                        times[n] = now;
                if (++n == 256) {
                        dedup_filter_add(st->filter, (const uint8_t(*)[16])keys,
                                         times, n, now);
                        n = 0;
                }
        }
        if (n)
                dedup_filter_add(st->filter, (const uint8_t(*)[16])keys, times,
                                 n, now);
}

/* ------------------------------- SORTING ------------------------------- */

/* Sort groups: the seen ids of each epoch (0 .. FILTER_SLOTS_MAX - 1,
 * relative to the run's oldest live epoch), then lww, audit by id, audit
 * by key. */
#define G_SEEN_MAX FILTER_SLOTS_MAX
#define G_LWW (G_SEEN_MAX + 1)
#define G_AUDIT_ID (G_SEEN_MAX + 2)
#define G_AUDIT_KEY (G_SEEN_MAX + 3)
#define G_CNT (G_SEEN_MAX + 4)

struct sortent {
        uint64_t k0;    /* first 8 key bytes, big-endian: numeric = bytewise */
        uint32_t off;   /* entry offset in the run */
        uint16_t group; /* see above */
};

struct sorted {
        struct sortent *e;
        size_t          n;
        int64_t         epoch0; /* epoch of group 0 */
};

static int sortent_cmp(const void *pa, const void *pb, void *arg) {
        const struct sortent *a = pa, *b = pb;
        const uint8_t        *buf = arg;

        if (a->group != b->group)
                return a->group < b->group ? -1 : 1;
        if (a->k0 != b->k0)
                return a->k0 < b->k0 ? -1 : 1;
        const uint8_t *ea = buf + a->off, *eb = buf + b->off;
        int c = memcmp(ea + DEDUP_ENTRY_HDR + 8, eb + DEDUP_ENTRY_HDR + 8,
                       (size_t)ea[1] - 8);
        if (c)
                return c;
        return a->off < b->off ? -1 : a->off > b->off; /* older first */
}

static int kind_group(int kind) {
        return kind == DK_LWW        ? G_LWW
               : kind == DK_AUDIT_ID ? G_AUDIT_ID
                                     : G_AUDIT_KEY;
}

/* The live entries of run 'r' sorted by (group, key, age): a counting pass
 * on the group and the top bits of the key (uniform: hashes), then each
 * small bucket on its own.  Expired entries are left out.  0, or -1
 * (memory). */
static int sort_run(aagw_store_t *st, const struct dedup_run *r, int64_t cutoff,
                    struct sorted *out) {
        const uint8_t     *p, *end = r->buf + r->len;
        struct dedup_entry e;
        size_t             n = 0, nb, bits = 0, cap = 0;
        struct sortent    *in, *o;
        size_t            *cnt;
        int64_t            emin = INT64_MAX, t;

        memset(out, 0, sizeof(*out));
        for (p = r->buf; p < end && (p = dedup_entry_next(p, end, &e));) {
                cap++;
                if (e.kind == DK_SEEN && !dedup_value_time(e.val, e.vlen, &t) &&
                    t >= cutoff) {
                        int64_t ep = dedup_epoch(t, st->slice_ms);
                        emin       = ep < emin ? ep : emin;
                }
        }
        out->epoch0 = emin == INT64_MAX ? 0 : emin;
        while (bits < 16 && ((size_t)G_CNT << (bits + 1)) < cap / 2)
                bits++;
        nb  = (size_t)G_CNT << bits;
        in  = malloc((cap ? cap : 1) * sizeof(*in));
        o   = malloc((cap ? cap : 1) * sizeof(*o));
        cnt = calloc(nb + 1, sizeof(*cnt));
        if (!in || !o || !cnt) {
                free(in);
                free(o);
                free(cnt);
                return -1;
        }
        for (p = r->buf; p < end;) {
                const uint8_t *q = dedup_entry_next(p, end, &e);
                int            g;
                if (dedup_entry_time(dedup_kind_cf(e.kind), e.key, e.klen,
                                     e.val, e.vlen, &t))
                        t = cutoff; /* unreadable: keep it */
                /* lww winners never expire (store.c, cf_windowed()). */
                if (t < cutoff && e.kind != DK_LWW) {
                        p = q;
                        continue;
                }
                if (e.kind == DK_SEEN) {
                        int64_t ep = dedup_epoch(t, st->slice_ms) - out->epoch0;
                        g          = ep < G_SEEN_MAX ? (int)ep : G_SEEN_MAX - 1;
                } else {
                        g = kind_group(e.kind);
                }
                in[n].k0    = dedup_get_be64(e.key);
                in[n].off   = (uint32_t)(p - r->buf);
                in[n].group = (uint16_t)g;
                cnt[((size_t)g << bits | (bits ? in[n].k0 >> (64 - bits) : 0)) +
                    1]++;
                n++;
                p = q;
        }
        for (size_t b = 1; b <= nb; b++)
                cnt[b] += cnt[b - 1];
        for (size_t i = 0; i < n; i++) {
                size_t b = (size_t)in[i].group << bits |
                           (bits ? in[i].k0 >> (64 - bits) : 0);
                o[cnt[b]++] = in[i];
        }
        /* cnt[b] is now the end of bucket b. */
        for (size_t b = 0, lo = 0; b < nb; lo = cnt[b++]) {
                size_t hi = cnt[b];
                if (hi - lo > 16) {
                        qsort_r(o + lo, hi - lo, sizeof(*o), sortent_cmp,
                                r->buf);
                        continue;
                }
                for (size_t i = lo + 1; i < hi; i++) {
                        struct sortent x = o[i];
                        size_t         j = i;
                        while (j > lo &&
                               sortent_cmp(&o[j - 1], &x, r->buf) > 0) {
                                o[j] = o[j - 1];
                                j--;
                        }
                        o[j] = x;
                }
        }
        free(in);
        free(cnt);
        out->e = o;
        out->n = n;
        return 0;
}

/* ------------------------------- INDEXING ------------------------------ */

/* SstFileWriter drops the file it writes from the page cache as it goes
 * (invalidate_page_cache, not settable through the C API), so the first
 * lookups into a freshly ingested run would each wait for the disk (a
 * duplicate of a recent id is the common case).  Read it back now, on the
 * indexer thread, sequentially: the pages land in the page cache, which
 * is the kernel's to reclaim, not our memory. */
static void warm_page_cache(const char *path) {
        size_t bufsz = (size_t)1 << 16;
        char  *buf   = malloc(bufsz);
        int    fd    = buf ? open(path, O_RDONLY | O_CLOEXEC) : -1;
        if (fd != -1) {
                (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
                while (read(fd, buf, bufsz) > 0)
                        ;
                close(fd);
        }
        free(buf);
}

/* The column family an SST of sort group 'g' goes to. */
static int group_cf(int g) {
        return g < G_SEEN_MAX    ? CF_SEEN
               : g == G_LWW      ? CF_LWW
               : g == G_AUDIT_ID ? CF_AUDIT_ID
                                 : CF_AUDIT_KEY;
}

/* Write the sealed run 'r' into the deferred families: one sorted SST per
 * family (the newest entry of a key only, expired entries left out; seen
 * ids under their epoch), ingested.  Entries stay in the journal until
 * dedup_delete_journal(). */
int dedup_index_run(aagw_store_t *st, struct dedup_run *r, char *errstr,
                    size_t errstr_size) {
        char          path[CF_COUNT][4200];
        bool          made[CF_COUNT] = {false};
        size_t        i              = 0;
        int           rc             = -1;
        struct sorted so;

        if (!r->len)
                return 0;
        if (sort_run(st, r, dedup_now(st) - st->window_ms, &so)) {
                snprintf(errstr, errstr_size, "out of memory sorting the tail");
                return -1;
        }
        while (i < so.n) {
                int    cf = group_cf(so.e[i].group);
                size_t j = i, puts = 0;
                char  *err = NULL;

                while (j < so.n && group_cf(so.e[j].group) == cf)
                        j++;
                snprintf(path[cf], sizeof(path[cf]),
                         "%s/ingest/%" PRIu64 "-%s.sst", st->dir, r->seq_hi,
                         dedup_cf_names[cf]);
                rocksdb_sstfilewriter_t *w =
                    rocksdb_sstfilewriter_create(st->envopts, st->cfopts[cf]);
                rocksdb_sstfilewriter_open(w, path[cf], &err);
                for (; !err && i < j; i++) {
                        const struct sortent *x = &so.e[i];
                        struct dedup_entry    e;
                        uint8_t               sk[DEDUP_SEENKEY_LEN];
                        const uint8_t        *key;
                        size_t                klen;
                        /* Sorted order is random order in the run: fetch
                         * a few entries ahead. */
                        if (i + 8 < j) {
                                __builtin_prefetch(r->buf + so.e[i + 8].off);
                                __builtin_prefetch(r->buf + so.e[i + 8].off +
                                                   64);
                        }
                        dedup_entry_next(r->buf + x->off, r->buf + r->len, &e);
                        /* A newer entry of the same key follows: skip. */
                        if (i + 1 < j && so.e[i + 1].group == x->group &&
                            so.e[i + 1].k0 == x->k0 &&
                            !memcmp(e.key,
                                    r->buf + so.e[i + 1].off + DEDUP_ENTRY_HDR,
                                    e.klen))
                                continue;
                        key  = e.key;
                        klen = e.klen;
                        if (cf == CF_SEEN) {
                                dedup_put_be64(
                                    sk, (uint64_t)(so.epoch0 + x->group));
                                memcpy(sk + 8, e.key, 16);
                                key  = sk;
                                klen = sizeof(sk);
                        }
                        rocksdb_sstfilewriter_put(w, (const char *)key, klen,
                                                  (const char *)e.val, e.vlen,
                                                  &err);
                        puts++;
                }
                if (!err && puts)
                        rocksdb_sstfilewriter_finish(w, &err);
                rocksdb_sstfilewriter_destroy(w);
                if (dedup_take_err(err, "SstFileWriter", errstr, errstr_size)) {
                        unlink(path[cf]);
                        goto out;
                }
                if (puts) {
                        made[cf] = true;
                        /* Lookups read seen and lww; the audit indexes
                         * only serve queries. */
                        if (cf == CF_SEEN || cf == CF_LWW)
                                warm_page_cache(path[cf]);
                } else {
                        unlink(path[cf]);
                }
                i = j;
        }
        for (int cf = 0; cf < CF_COUNT; cf++) {
                char       *err = NULL;
                const char *f   = path[cf];
                if (!made[cf])
                        continue;
                rocksdb_ingest_external_file_cf(st->db, st->cf[cf], &f, 1,
                                                st->ingopts, &err);
                if (dedup_take_err(err, "IngestExternalFile", errstr,
                                   errstr_size))
                        goto out;
        }
        rc = 0;
out:
        for (int cf = 0; cf < CF_COUNT; cf++)
                if (made[cf])
                        (void)unlink(path[cf]); /* moved: ENOENT is fine */
        free(so.e);
        return rc;
}

int dedup_delete_journal(aagw_store_t *st, uint64_t lo, uint64_t hi,
                         char *errstr, size_t errstr_size) {
        uint8_t a[8], b[8];
        char   *err = NULL;

        dedup_put_be64(a, lo);
        dedup_put_be64(b, hi + 1);
        rocksdb_delete_range_cf(st->db, st->wopts, st->cf[CF_JOURNAL],
                                (const char *)a, 8, (const char *)b, 8, &err);
        if (dedup_take_err(err, "DeleteRange(journal)", errstr, errstr_size))
                return -1;
        /* Everything up to 'hi' is deleted (runs go in order): files that
         * hold nothing else can go now, without waiting for a compaction. */
        dedup_put_be64(b, hi);
        rocksdb_delete_file_in_range_cf(st->db, st->cf[CF_JOURNAL], NULL, 0,
                                        (const char *)b, 8, &err);
        if (err) {
                aagw_log(AAGW_LOG_DEBUG, "DEDUP", "journal files: %s", err);
                rocksdb_free(err);
        }
        return 0;
}

/* --------------------------------- REPLAY ------------------------------ */

/* Read the journal into the tail.  On a primary (at open, before the
 * threads start) runs that fill up are indexed on the spot and the seen
 * ids go to the filter; on a secondary the whole journal becomes the one
 * run lookups consult, replacing the previous one. */
int dedup_replay_journal(aagw_store_t *st, char *errstr, size_t errstr_size) {
        struct dedup_run      *run = st->active;
        rocksdb_readoptions_t *ro;
        rocksdb_iterator_t    *it;
        char                  *err = NULL;
        int                    rc  = -1;

        if (st->secondary) {
                if (!(run = calloc(1, sizeof(*run))) ||
                    dedup_run_init(run, 0)) {
                        free(run);
                        snprintf(errstr, errstr_size, "out of memory");
                        return -1;
                }
                if (!st->cf[CF_JOURNAL]) {
                        rc = 0;
                        goto swap;
                }
        }
        ro = rocksdb_readoptions_create();
        rocksdb_readoptions_set_fill_cache(ro, 0);
        it = rocksdb_create_iterator_cf(st->db, ro, st->cf[CF_JOURNAL]);
        for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it);
             rocksdb_iter_next(it)) {
                size_t         kl, vl;
                const uint8_t *k = (const uint8_t *)rocksdb_iter_key(it, &kl);
                const uint8_t *v = (const uint8_t *)rocksdb_iter_value(it, &vl);
                uint64_t       seq;

                if (kl != 8) {
                        snprintf(errstr, errstr_size,
                                 "journal: corrupt key (%zu bytes)", kl);
                        goto done;
                }
                seq = dedup_get_be64(k);
                if (!st->secondary && run->len && run->len + vl > st->run_cap) {
                        if (dedup_index_run(st, run, errstr, errstr_size) ||
                            dedup_delete_journal(st, run->seq_lo, run->seq_hi,
                                                 errstr, errstr_size))
                                goto done;
                        dedup_run_free(run);
                        if (dedup_run_init(run, st->run_cap)) {
                                snprintf(errstr, errstr_size, "out of memory");
                                goto done;
                        }
                }
                if (dedup_run_append(run, v, vl, seq)) {
                        snprintf(errstr, errstr_size,
                                 "journal record %" PRIu64 " is corrupt (%zu "
                                 "bytes) or out of memory",
                                 seq, vl);
                        goto done;
                }
                if (st->filter)
                        filter_add_record(st, v, vl);
                if (seq > st->seq)
                        st->seq = seq;
        }
        rocksdb_iter_get_error(it, &err);
        if (!dedup_take_err(err, "journal scan", errstr, errstr_size))
                rc = 0;
done:
        rocksdb_iter_destroy(it);
        rocksdb_readoptions_destroy(ro);
swap:
        if (st->secondary) {
                if (rc) {
                        dedup_run_free(run);
                        free(run);
                        return rc;
                }
                pthread_mutex_lock(&st->mu);
                struct dedup_run *old = st->active;
                st->active            = run;
                pthread_mutex_unlock(&st->mu);
                dedup_run_free(old);
                free(old);
        }
        return rc;
}

/* ----------------------------- THE THREADS ----------------------------- */

int dedup_seal_locked(aagw_store_t *st, char *errstr, size_t errstr_size) {
        struct dedup_run *nr;

        int64_t t0 = st->sealed ? dedup_mono_us() : 0;

        while (st->sealed) {
                if (st->ix_failed || st->stopping) {
                        snprintf(errstr, errstr_size,
                                 "the tail is full and the indexer %s%s",
                                 st->ix_failed ? "fails: " : "is stopping",
                                 st->ix_failed ? st->ix_err : "");
                        return -1;
                }
                pthread_cond_wait(&st->cond, &st->mu);
        }
        if (t0)
                atomic_fetch_add(&st->us_tail_wait,
                                 (uint64_t)(dedup_mono_us() - t0));
        if ((nr = st->spare)) {
                st->spare = NULL;
        } else if (!(nr = calloc(1, sizeof(*nr))) ||
                   dedup_run_init(nr, st->run_cap)) {
                free(nr);
                snprintf(errstr, errstr_size, "out of memory (tail run)");
                return -1;
        }
        st->sealed = st->active;
        st->active = nr;
        pthread_cond_broadcast(&st->cond);
        return 0;
}

/* Drop the files of column family 'cf' whose keys all sort before the
 * 'len' bytes of 'lim'. */
static void drop_files(aagw_store_t *st, int cf, const uint8_t *lim,
                       size_t len) {
        char *err = NULL;
        rocksdb_delete_file_in_range_cf(st->db, st->cf[cf], NULL, 0,
                                        (const char *)lim, len, &err);
        if (err) {
                aagw_log(AAGW_LOG_WARN, "DEDUP", "expiry (%s files): %s",
                         dedup_cf_names[cf], err);
                rocksdb_free(err);
        }
}

/* Range-delete what has expired from the families whose keys start with
 * the time or the epoch (the audit log, its verdict index, the seen ids);
 * whole files first: nothing is rewritten to expire. */
static void expire_ordered(aagw_store_t *st, int64_t cutoff) {
        uint8_t               lim[1 + 8], start[1], ep[8];
        char                 *err = NULL;
        rocksdb_writebatch_t *wb  = rocksdb_writebatch_create();

        /* Epochs before the cutoff's ended before it; once per epoch. */
        int64_t e = dedup_epoch(cutoff, st->slice_ms);
        if (e > st->expired_epoch) {
                dedup_put_be64(ep, (uint64_t)e);
                drop_files(st, CF_SEEN, ep, 8);
                rocksdb_writebatch_delete_range_cf(wb, st->cf[CF_SEEN], "", 0,
                                                   (const char *)ep, 8);
        }
        dedup_put_be64(lim, (uint64_t)cutoff);
        drop_files(st, CF_AUDIT, lim, 8);
        rocksdb_writebatch_delete_range_cf(wb, st->cf[CF_AUDIT], "", 0,
                                           (const char *)lim, 8);
        for (int v = 0; v < AAGW_AUDIT__CNT; v++) {
                start[0] = (uint8_t)v;
                lim[0]   = (uint8_t)v;
                dedup_put_be64(lim + 1, (uint64_t)cutoff);
                rocksdb_writebatch_delete_range_cf(wb, st->cf[CF_AUDIT_VERDICT],
                                                   (const char *)start, 1,
                                                   (const char *)lim, 9);
        }
        rocksdb_write(st->db, st->wopts, wb, &err);
        rocksdb_writebatch_destroy(wb);
        if (err) {
                aagw_log(AAGW_LOG_WARN, "DEDUP", "expiry (audit): %s", err);
                rocksdb_free(err);
                return;
        }
        st->expired_upto  = cutoff;
        st->expired_epoch = e;
}

/* Journal ranges whose grace has passed (all of them if 'all'), then
 * expiry.  Runs on the indexer thread without 'mu' held. */
static void housekeeping(aagw_store_t *st, bool all) {
        uint64_t lo = UINT64_MAX, hi = 0;
        int64_t  now = mono_ms();
        char     err[512];

        pthread_mutex_lock(&st->mu);
        size_t keep = 0;
        for (size_t i = 0; i < st->npending; i++) {
                struct dedup_pending *p = &st->pending[i];
                if (all || p->due_mono_ms <= now ||
                    st->npending == DEDUP_PENDING_MAX) {
                        lo = p->seq_lo < lo ? p->seq_lo : lo;
                        hi = p->seq_hi > hi ? p->seq_hi : hi;
                } else {
                        st->pending[keep++] = *p;
                }
        }
        st->npending = keep;
        pthread_mutex_unlock(&st->mu);
        /* Runs are sealed in seq order, so [lo, hi] holds no entry of a
         * run that is still pending or in the tail. */
        if (hi && dedup_delete_journal(st, lo, hi, err, sizeof(err)))
                aagw_log(AAGW_LOG_WARN, "DEDUP", "%s (replayed next open)",
                         err);

        if (!all)
                dedup_cache_account(st);

        int64_t cutoff = dedup_now(st) - st->window_ms;
        int64_t step   = st->window_ms / 64 > 1000 ? st->window_ms / 64 : 1000;
        if (!all && cutoff > 0 && cutoff - st->expired_upto >= step)
                expire_ordered(st, cutoff);
}

static void *ix_main(void *arg) {
        aagw_store_t *st = arg;
        char          err[512];
        int64_t       retry_at = 0;

        pthread_mutex_lock(&st->mu);
        while (!st->stopping) {
                struct dedup_run *r = st->sealed;
                if (r && (!st->ix_failed || mono_ms() >= retry_at)) {
                        pthread_mutex_unlock(&st->mu);
                        int64_t t0 = dedup_mono_us();
                        int     rc = dedup_index_run(st, r, err, sizeof(err));
                        atomic_fetch_add(&st->us_index,
                                         (uint64_t)(dedup_mono_us() - t0));
                        pthread_mutex_lock(&st->mu);
                        if (!rc) {
                                if (r->seq_hi) {
                                        struct dedup_pending *p =
                                            &st->pending[st->npending];
                                        p->seq_lo = r->seq_lo;
                                        p->seq_hi = r->seq_hi;
                                        p->due_mono_ms =
                                            mono_ms() + JOURNAL_GRACE_MS;
                                        st->npending++;
                                }
                                st->sealed    = NULL;
                                st->ix_failed = false;
                                atomic_fetch_add(&st->n_runs, 1);
                                pthread_cond_broadcast(&st->cond);
                                pthread_mutex_unlock(&st->mu);
                                /* Keep its memory for the next seal: no
                                 * page faults on the commit path. */
                                dedup_run_reset(r);
                                pthread_mutex_lock(&st->mu);
                                if (!st->spare) {
                                        st->spare = r;
                                        r         = NULL;
                                }
                                pthread_mutex_unlock(&st->mu);
                                dedup_run_free(r);
                                free(r);
#ifdef __GLIBC__
                                /* Give back what the sort arrays and
                                 * RocksDB's freed blocks left in malloc's
                                 * arenas: RSS stays within cache_mb. */
                                (void)malloc_trim(0);
#endif
                                /* Never let the pending list fill up. */
                                housekeeping(st, false);
                                pthread_mutex_lock(&st->mu);
                                continue;
                        }
                        if (!st->ix_failed)
                                aagw_log(AAGW_LOG_ERROR, "DEDUP",
                                         "tail indexer: %s (retrying)", err);
                        st->ix_failed = true;
                        snprintf(st->ix_err, sizeof(st->ix_err), "%s", err);
                        atomic_fetch_add(&st->n_ix_errors, 1);
                        retry_at = mono_ms() + 1000;
                        pthread_cond_broadcast(&st->cond);
                }
                pthread_mutex_unlock(&st->mu);
                housekeeping(st, false);
                pthread_mutex_lock(&st->mu);
                if (!st->stopping && (!st->sealed || st->ix_failed))
                        timed_wait(st, 1000);
        }
        pthread_mutex_unlock(&st->mu);
        return NULL;
}

/* Rebuild the filter from the seen ids stored in RocksDB (the tail was
 * added by the replay).  Lookups read RocksDB for every key until this
 * finishes; if the scan fails they keep doing so. */
static void *rb_main(void *arg) {
        aagw_store_t          *st = arg;
        uint8_t                keys[512][16];
        int64_t                times[512];
        size_t                 n   = 0;
        bool                   ok  = true;
        char                  *err = NULL;
        rocksdb_readoptions_t *ro  = rocksdb_readoptions_create();
        rocksdb_iterator_t    *it;

        rocksdb_readoptions_set_fill_cache(ro, 0);
        rocksdb_readoptions_set_readahead_size(ro, (size_t)4 << 20);
        it = rocksdb_create_iterator_cf(st->db, ro, st->cf[CF_SEEN]);
        for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it);
             rocksdb_iter_next(it)) {
                size_t         kl, vl;
                const uint8_t *k = (const uint8_t *)rocksdb_iter_key(it, &kl);
                const uint8_t *v = (const uint8_t *)rocksdb_iter_value(it, &vl);
                if (kl != DEDUP_SEENKEY_LEN)
                        continue;
                memcpy(keys[n], k + 8, 16);
                /* A value we cannot read: the start of its key's epoch. */
                if (dedup_value_time(v, vl, &times[n]))
                        times[n] = (int64_t)dedup_get_be64(k) * st->slice_ms;
                if (++n < 512)
                        continue;
                pthread_mutex_lock(&st->mu);
                if (st->stopping) {
                        pthread_mutex_unlock(&st->mu);
                        ok = false;
                        break;
                }
                dedup_filter_add(st->filter, (const uint8_t(*)[16])keys, times,
                                 n, dedup_now(st));
                pthread_mutex_unlock(&st->mu);
                n = 0;
        }
        rocksdb_iter_get_error(it, &err);
        if (err) {
                aagw_log(AAGW_LOG_WARN, "DEDUP",
                         "filter rebuild: %s; lookups keep reading RocksDB",
                         err);
                rocksdb_free(err);
                ok = false;
        }
        rocksdb_iter_destroy(it);
        rocksdb_readoptions_destroy(ro);
        pthread_mutex_lock(&st->mu);
        if (ok && n)
                dedup_filter_add(st->filter, (const uint8_t(*)[16])keys, times,
                                 n, dedup_now(st));
        if (ok && !st->stopping)
                st->filter_ready = true;
        pthread_mutex_unlock(&st->mu);
        return NULL;
}

int dedup_threads_start(aagw_store_t *st, char *errstr, size_t errstr_size) {
        int e = pthread_create(&st->ix_thread, NULL, ix_main, st);
        if (e) {
                snprintf(errstr, errstr_size, "cannot start a thread: %s",
                         strerror(e));
                return -1;
        }
        st->ix_started = true;
        (void)pthread_setname_np(st->ix_thread, "aagw:dedup-ix");
        e = pthread_create(&st->rb_thread, NULL, rb_main, st);
        if (e) {
                snprintf(errstr, errstr_size, "cannot start a thread: %s",
                         strerror(e));
                return -1;
        }
        st->rb_started = true;
        (void)pthread_setname_np(st->rb_thread, "aagw:dedup-rb");
        return 0;
}

void dedup_threads_stop(aagw_store_t *st) {
        pthread_mutex_lock(&st->mu);
        st->stopping = true;
        pthread_cond_broadcast(&st->cond);
        pthread_mutex_unlock(&st->mu);
        if (st->rb_started)
                pthread_join(st->rb_thread, NULL);
        if (st->ix_started) {
                pthread_join(st->ix_thread, NULL);
                housekeeping(st, true); /* no reader left to protect */
        }
        st->rb_started = st->ix_started = false;
}
