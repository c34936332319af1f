/*
 * tests/bench/bench_unify.c: the unify stage benchmark.
 *
 * One site's unify stage alone, on the embedded clusters of `aagw sandbox`
 * (a separate process).  At site east the benchmark preloads
 *
 *   T       N records (default 1,000,000), ids 0..N-1, keyed, 200-byte
 *           values, written at east: no provenance headers;
 *   west.T  the records of D% of those ids again (default 10%), as the
 *           west -> east replicator would have copied them: same key,
 *           value, timestamp and partition, plus the provenance header
 *           that replicator gives them (origin west).  These are the
 *           cross-site duplicates: the same event written at both sites,
 *           e.g. by a client that retried at the other site;
 *
 * the global id being the record key (--id key, the default) or a JSON
 * field of the value (--id json).  In the same run it then measures
 *
 *   a  unify      `aagw --site east`: the unify stage of east reads T and
 *                 west.T and writes the N first occurrences to T.unified.
 *                 aagw has no switch that runs unify alone, so the same
 *                 process runs the west -> east flow, as in production;
 *                 west's T holds the duplicated ids at the offsets that
 *                 west.T's provenance names, so the flow finds itself
 *                 caught up (one scan of west.T's tail at its start) and
 *                 copies nothing.
 *   b  bare pipe  the replicator benchmark's bare librdkafka loop
 *                 (bench_util.c), reading T and west.T and writing every
 *                 record to T.copy on east: the baseline of the issue.
 *   c  bare pipe, b with the consumer queue of the unify stage
 *      unify's    (queued.min.messages=1000000,
 *      queue      queued.max.messages.kbytes=16384): the same client
 *                 settings as a, so no fetch stall (docs/benchmarks.md,
 *                 "Why the consumers stall") in the baseline either.
 *   d  bare pipe  b adding to every copy the provenance header that a
 *      + header   writes on a record of T (aagw.prov, a fixed value of
 *                 the same length): what that header costs librdkafka
 *                 alone (informational).
 *
 * Both a and the bare pipes read the same N + D input records, so rates
 * are input records per second, and CPU is seconds per million input
 * records.  a writes N records, b, c and d write N + D.
 *
 * Method, per measurement:
 *  - its own topics in the one sandbox of the round, all with the same
 *    partition count (the mock's Admin API cannot create topics, so
 *    T.unified exists up front, as in a deployment that pre-creates it);
 *  - steady rate: from the first poll that sees records at the target to
 *    the poll that sees all of them; input records in that window are the
 *    total minus what the first sighting stands for (for a, first output
 *    count x (N + D) / N);
 *  - CPU: the child's process tree (user + sys, /proc/PID/stat) read at
 *    the first sighting and at completion: "steady" is the difference per
 *    million input records of that window, "life" everything from spawn
 *    to completion per million input records;
 *  - validation.  a: aagw's own counters (the STATS log line) must say
 *    in N + D, accepted N, dropped D and nothing else; T.unified must hold
 *    exactly N records, read back here: every id 0..N-1 exactly once, each
 *    with its value byte for byte.  b, c: every target partition holds
 *    exactly what its two source partitions got.  Checked again after the
 *    program exited.  A wrong output is FAILED and exit status 1, never a
 *    figure.
 *
 * Diagnostics, in the log directory (kept with --keep or after a failure):
 * per measurement the child's stdout/stderr (aagw logs at info: its STATS
 * lines), a ".trace" of the target count at every poll, a ".threads" file
 * with the CPU seconds of each thread just before the SIGTERM and, with
 * --keep, aagw's state dir.
 *
 * Exit status: 0 every measurement was valid, 1 one was not (or a child
 * failed), 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "aagw_policy.h"
#include "bench_util.h"
#include "harness.h"

#ifndef BENCH_AAGW_BIN
#define BENCH_AAGW_BIN "aagw"
#endif

#define PROG "bench_unify"

#define STATS_TIMEOUT_MS 25000     /* done -> aagw logged every input */
#define READBACK_TIMEOUT_MS 180000 /* reading T.unified back */

/* The target from the issue: unify at >= 0.8x the bare pipe's rate. */
#define TARGET_A_B 0.80

/* ------------------------------------------------------------- TYPES --- */

enum meas { M_UNIFY, M_BARE, M_BARE_Q, M_BARE_HDR, M_CNT };

static const struct bench_meas_info meas_info[M_CNT] = {
    {'a', "unify", "aagw unify stage"},
    {'b', "bare", "bare pipe"},
    {'c', "bare_unifyq", "bare pipe, unify's queue"},
    {'d', "bare_header", "bare pipe + provenance hdr"},
};

/* The consumer queue of the unify stage (replicator/unify.c,
 * consumer_extra), for measurement c. */
static const char *const unify_queue_props[] = {
    "consumer.queued.min.messages=1000000",
    "consumer.queued.max.messages.kbytes=16384",
};

enum id_mode { ID_KEY, ID_JSON };

/* The options of this program alone; the rest are struct bench_opts. */
struct unify_opts {
        unsigned     dup_pct; /* of the ids, again in west.T */
        enum id_mode id;
};

/* aagw's unify counters, from its STATS log line. */
struct ustats {
        bool     seen;
        uint64_t in, accepted, dropped, superseded, identical, rejected, out,
            recovered;
        int64_t inflight;
};

/* What reading T.unified back found. */
struct readback {
        int64_t records, distinct, bad_key, bad_value, repeated, from_remote;
};

struct result {
        bool    valid;
        double  steady_in_rps, steady_out_rps, wall_in_rps;
        double  startup_s, wall_s, steady_s;
        double  cpu_steady_per_m, cpu_life_per_m;
        double  mock_cpu_per_m;
        double  others_cores; /* CPU used by everything else, in cores */
        int64_t first_cnt;    /* records at the target at the first sighting */
        struct ustats   us;   /* a only */
        struct readback rb;   /* a only */
};

struct round {
        struct bench_round       b; /* first: the bench_prog callbacks cast */
        const struct unify_opts *u;
        aagw_repl_policy_t      *pol;
        aagw_id_rule_t          *id_rule;
        int64_t *exp_src, *exp_rem; /* records per partition of T, west.T */
        int64_t *scratch;
        int64_t  n_src, n_rem;
        struct result res[M_CNT];
        struct result (*all)[M_CNT]; /* every run's res (b.all) */
};

/* ----------------------------------------------------------- RECORDS --- */

/* Record 'i' (its global id is i): key "k<10 digits>" (bench_rec_key)
 * and a value of exactly value_size printable bytes, with --id json a
 * JSON object whose "id" field is the key ('val' holds value_size + 1). */
static void rec_value(const struct round *r, size_t i, char *val) {
        bench_rec_value(i, val, r->b.o->value_size, r->u->id == ID_JSON);
}

/* Whether id 'i' is written at west too (and so is in west.T): the first
 * dup_pct of every hundred ids, which the key hash spreads over all
 * partitions. */
static bool rec_dup(const struct unify_opts *u, size_t i) {
        return i % 100 < u->dup_pct;
}

/* ------------------------------------------------------------ TOPICS --- */

struct names {
        char src[64];    /* T */
        char remote[80]; /* west.T */
        char dst[80];    /* T.unified, T.copy */
};

static void topic_names(int run, enum meas m, struct names *t) {
        snprintf(t->src, sizeof(t->src), "bench-r%d-%c", run + 1,
                 meas_info[m].letter);
        snprintf(t->remote, sizeof(t->remote), "west.%.40s", t->src);
        snprintf(t->dst, sizeof(t->dst), "%.40s%s", t->src,
                 m == M_UNIFY ? ".unified" : ".copy");
}

/* Check that every partition of 'topic' holds what 'expect' (plus
 * 'expect2', if not NULL) says. */
static int counts_check(struct round *r, const char *topic,
                        const int64_t *expect, const int64_t *expect2,
                        const char *what, char *errstr, size_t errstr_size) {
        return bench_counts_check(r->b.east_rk, topic, r->b.o->partitions,
                                  expect, expect2, r->scratch, what, errstr,
                                  errstr_size);
}

/* The log of every partition of 'topic' still starts at offset 0. */
static int retention_check(struct round *r, const char *topic, char *errstr,
                           size_t errstr_size) {
        int64_t sum;

        if (bench_watermarks(r->b.east_rk, topic, r->b.o->partitions, true,
                             NULL, &sum, errstr, errstr_size))
                return -1;
        if (sum) {
                snprintf(errstr, errstr_size,
                         "%s: the mock's retention (about 5 MiB per "
                         "partition) dropped %" PRId64
                         " records; use more --partitions or fewer "
                         "--records",
                         topic, sum);
                return -1;
        }
        return 0;
}

/* ----------------------------------------------------------- PRELOAD --- */

/* The provenance header the west -> east replicator gives record 'i' when
 * it copies it from west's T (partition 'part', offset 'off', timestamp
 * 'ts') into west.T at east: aagw's own verdict, so the wire format is
 * whatever aagw writes. */
static int west_provenance(struct round *r, const char *src, int32_t part,
                           int64_t off, int64_t ts, const char *key,
                           size_t klen, const char *val, struct aagw_verdict *v,
                           char *errstr, size_t errstr_size) {
        struct aagw_rec rec = {.topic        = src,
                               .partition    = part,
                               .offset       = off,
                               .timestamp_ms = ts,
                               .key          = key,
                               .key_len      = klen,
                               .value        = val,
                               .value_len    = r->b.o->value_size};

        if (aagw_repl_verdict(r->pol, "west", "east", &rec, r->id_rule, 0, v) !=
                AAGW_OK ||
            v->kind != AAGW_VERDICT_REPLICATE || v->hdrs.cnt < 1 ||
            v->id_reason != AAGW_REASON_OK) {
                snprintf(
                    errstr, errstr_size,
                    "no provenance for %s [%d] offset %" PRId64
                    " (verdict %d, reason %s)",
                    src, (int)part, off, (int)v->kind,
                    aagw_reason_name(v->reason ? v->reason : v->id_reason));
                return -1;
        }
        return 0;
}

/* Produce T (all N ids) and west.T (the duplicated ids, with west's
 * provenance) on east, each record to the partition of its key, and wait
 * until all are acknowledged.  West's T gets the duplicated ids too, at
 * the offsets west.T's provenance names: the west -> east flow of the
 * measured aagw then finds itself caught up and copies nothing, as in a
 * deployment where replication is current. */
static int preload(struct round *r, const struct names *t, char *errstr,
                   size_t errstr_size) {
        const struct bench_opts *o  = r->b.o;
        struct bench_preload     pl = {0}, wpl = {0};
        rd_kafka_t              *rk = NULL, *wrk = NULL;
        rd_kafka_topic_t        *src = NULL, *rem = NULL, *wsrc = NULL;
        char                    *val = malloc(o->value_size + 1);
        int64_t *woff           = calloc((size_t)o->partitions, sizeof(*woff));
        struct aagw_verdict *v  = malloc(sizeof(*v));
        int64_t              ts = (int64_t)time(NULL) * 1000;
        int                  rc = -1;
        char                 key[32];

        if (!val || !woff || !v) {
                snprintf(errstr, errstr_size, "out of memory");
                goto out;
        }
        if (!(rk = bench_preload_producer(r->b.east, &pl, errstr,
                                          errstr_size)) ||
            !(wrk =
                  bench_preload_producer(r->b.west, &wpl, errstr, errstr_size)))
                goto out;
        src  = rd_kafka_topic_new(rk, t->src, NULL);
        rem  = rd_kafka_topic_new(rk, t->remote, NULL);
        wsrc = rd_kafka_topic_new(wrk, t->src, NULL);
        for (size_t i = 0; i < o->records; i++) {
                size_t  kl = bench_rec_key(i, key, sizeof(key));
                int32_t p  = bench_rec_partition(src, key, kl, o->partitions);
                rd_kafka_vu_t vu[8];
                size_t        n;

                rec_value(r, i, val);
                n = bench_rec_vu(vu, src, p, key, kl, val, o->value_size);
                vu[n].vtype   = RD_KAFKA_VTYPE_TIMESTAMP;
                vu[n++].u.i64 = ts;
                if (bench_produce(rk, vu, n, t->src, errstr, errstr_size))
                        goto out;
                if (!rec_dup(r->u, i))
                        continue;
                /* West wrote the same record to its T (same partitioner,
                 * same partition) ... */
                vu[0].u.rkt = wsrc;
                if (bench_produce(wrk, vu, n, t->src, errstr, errstr_size))
                        goto out;
                /* ... and the replicator copied it to west.T at east,
                 * with its provenance. */
                if (west_provenance(r, t->src, p, woff[p]++, ts, key, kl, val,
                                    v, errstr, errstr_size))
                        goto out;
                vu[0].u.rkt           = rem;
                vu[n].vtype           = RD_KAFKA_VTYPE_HEADER;
                vu[n].u.header.name   = v->hdrs.hdrs[0].name;
                vu[n].u.header.val    = v->hdrs.hdrs[0].value;
                vu[n++].u.header.size = (ssize_t)v->hdrs.hdrs[0].size;
                if (bench_produce(rk, vu, n, t->remote, errstr, errstr_size))
                        goto out;
        }
        rd_kafka_flush(rk, 120000);
        rd_kafka_flush(wrk, 120000);
        if (pl.failed || pl.delivered != r->n_src + r->n_rem || wpl.failed ||
            wpl.delivered != r->n_rem) {
                snprintf(errstr, errstr_size,
                         "preload %s: %" PRId64 " of %" PRId64
                         " delivered at east, %" PRId64 " of %" PRId64
                         " at west, %" PRId64 " failed (%s)",
                         t->src, pl.delivered, r->n_src + r->n_rem,
                         wpl.delivered, r->n_rem, pl.failed + wpl.failed,
                         pl.first_err[0]    ? pl.first_err
                         : wpl.first_err[0] ? wpl.first_err
                                            : "timeout");
                goto out;
        }
        if (counts_check(r, t->src, r->exp_src, NULL, "source", errstr,
                         errstr_size) ||
            counts_check(r, t->remote, r->exp_rem, NULL, "source", errstr,
                         errstr_size) ||
            retention_check(r, t->src, errstr, errstr_size) ||
            retention_check(r, t->remote, errstr, errstr_size))
                goto out;
        rc = 0;
out:
        if (src)
                rd_kafka_topic_destroy(src);
        if (rem)
                rd_kafka_topic_destroy(rem);
        if (wsrc)
                rd_kafka_topic_destroy(wsrc);
        if (rk)
                rd_kafka_destroy(rk);
        if (wrk)
                rd_kafka_destroy(wrk);
        free(val);
        free(woff);
        free(v);
        return rc;
}

/* ---------------------------------------------------------- READBACK --- */

/* Read T.unified from the beginning to its end and check it: every id
 * 0..N-1 exactly once, with its value byte for byte.  Counts the winners
 * that came from west.T (their aagw.in header names it). */
static int readback(struct round *r, const struct names *t, struct readback *rb,
                    char *errstr, size_t errstr_size) {
        /* clang-format off */
        const char *const props[] = {"group.id", "bench-unify-readback",
                                     "enable.auto.commit", "false",
                                     "enable.partition.eof", "false",
                                     "queued.min.messages", "1000000",
                                     NULL};
        /* clang-format on */
        const struct bench_opts         *o    = r->b.o;
        const int                        np   = o->partitions;
        const size_t                     n    = o->records;
        uint8_t                         *seen = calloc((n + 7) / 8, 1);
        int64_t                         *hwm = calloc((size_t)np, sizeof(*hwm));
        int64_t                         *at  = calloc((size_t)np, sizeof(*at));
        char                            *want = malloc(o->value_size + 1);
        rd_kafka_message_t             **msgs = calloc(4096, sizeof(*msgs));
        rd_kafka_topic_partition_list_t *l    = NULL;
        rd_kafka_queue_t                *q    = NULL;
        rd_kafka_t                      *rk   = NULL;
        int64_t                          total, left, deadline;
        size_t                           rlen = strlen(t->remote);
        int                              rc   = -1;

        memset(rb, 0, sizeof(*rb));
        if (!seen || !hwm || !at || !want || !msgs) {
                snprintf(errstr, errstr_size, "out of memory");
                goto out;
        }
        if (bench_watermarks(r->b.east_rk, t->dst, np, false, hwm, &total,
                             errstr, errstr_size))
                goto out;
        rk = bench_client_new(RD_KAFKA_CONSUMER, r->b.east, props, errstr,
                              errstr_size);
        if (!rk)
                goto out;
        l = rd_kafka_topic_partition_list_new(np);
        for (int p = 0; p < np; p++)
                if (hwm[p] > 0)
                        rd_kafka_topic_partition_list_add(l, t->dst, p)
                            ->offset = RD_KAFKA_OFFSET_BEGINNING;
        if (rd_kafka_assign(rk, l)) {
                snprintf(errstr, errstr_size, "readback: assign failed");
                goto out;
        }
        q        = rd_kafka_queue_get_consumer(rk);
        left     = total;
        deadline = harness_now_ms() + READBACK_TIMEOUT_MS;
        while (left > 0) {
                ssize_t got;

                if (harness_now_ms() > deadline) {
                        snprintf(errstr, errstr_size,
                                 "readback of %s: %" PRId64 " of %" PRId64
                                 " records after %d s",
                                 t->dst, total - left, total,
                                 READBACK_TIMEOUT_MS / 1000);
                        goto out;
                }
                got = rd_kafka_consume_batch_queue(q, 200, msgs, 4096);
                for (ssize_t k = 0; k < got; k++) {
                        rd_kafka_message_t *m = msgs[k];
                        rd_kafka_headers_t *h = NULL;
                        const void         *hv;
                        size_t              hs;
                        char                kbuf[32];
                        char               *end;
                        unsigned long long  id;

                        if (m->err || m->partition < 0 || m->partition >= np ||
                            m->offset < at[m->partition] ||
                            m->offset >= hwm[m->partition]) {
                                rd_kafka_message_destroy(m);
                                continue;
                        }
                        at[m->partition] = m->offset + 1;
                        left--;
                        rb->records++;
                        snprintf(kbuf, sizeof(kbuf), "%.*s",
                                 (int)(m->key_len < 31 ? m->key_len : 31),
                                 m->key ? (const char *)m->key : "");
                        errno = 0;
                        end   = kbuf;
                        id    = 0;
                        if (kbuf[0] == 'k')
                                id = strtoull(kbuf + 1, &end, 10);
                        if (kbuf[0] != 'k' || errno || *end ||
                            m->key_len != 11 || id >= n) {
                                rb->bad_key++;
                                rd_kafka_message_destroy(m);
                                continue;
                        }
                        if (seen[id / 8] & (1u << (id % 8)))
                                rb->repeated++;
                        else
                                rb->distinct++;
                        seen[id / 8] |= (uint8_t)(1u << (id % 8));
                        rec_value(r, (size_t)id, want);
                        if (m->len != o->value_size ||
                            memcmp(m->payload, want, o->value_size))
                                rb->bad_value++;
                        if (!rd_kafka_message_headers(m, &h) &&
                            !rd_kafka_header_get_last(h, "aagw.in", &hv, &hs) &&
                            hs > rlen && !memcmp(hv, t->remote, rlen) &&
                            ((const char *)hv)[rlen] == ':')
                                rb->from_remote++;
                        rd_kafka_message_destroy(m);
                }
        }
        rc = 0;
out:
        if (q)
                rd_kafka_queue_destroy(q);
        if (l)
                rd_kafka_topic_partition_list_destroy(l);
        if (rk) {
                rd_kafka_consumer_close(rk);
                rd_kafka_destroy(rk);
        }
        free(seen);
        free(hwm);
        free(at);
        free(want);
        free(msgs);
        return rc;
}

/* ------------------------------------------------------------- STATS --- */

/* The last "[STATS] unify@east ..." line in aagw's log 'path', into 'us'
 * (us->seen false if there is none yet).  The line is
 * "... unify@east running: topics 1 inputs 2 in N accepted N dropped N
 * superseded N identical N rejected N out N recovered N inflight N". */
static void ustats_read(const char *path, struct ustats *us) {
        char         *text = harness_read_file(path, NULL);
        char         *line, *save = NULL;
        struct ustats last = {0};

        if (text) {
                for (line = strtok_r(text, "\n", &save); line;
                     line = strtok_r(NULL, "\n", &save)) {
                        const char *s = strstr(line, "[STATS] unify@east ");
                        unsigned long long v[8];
                        long long          inflight;

                        if (!s || !(s = strstr(s, " in ")))
                                continue;
                        if (sscanf(s,
                                   " in %llu accepted %llu dropped %llu "
                                   "superseded %llu identical %llu rejected "
                                   "%llu out %llu recovered %llu inflight "
                                   "%lld",
                                   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                                   &v[6], &v[7], &inflight) != 9)
                                continue;
                        last =
                            (struct ustats){true, v[0], v[1], v[2], v[3],
                                            v[4], v[5], v[6], v[7], inflight};
                }
        }
        free(text);
        *us = last;
}

/* Whether aagw's counters say what a correct unify stage must. */
static bool ustats_ok(const struct round *r, const struct ustats *us) {
        return us->seen && us->in == (uint64_t)(r->n_src + r->n_rem) &&
               us->accepted == (uint64_t)r->n_src &&
               us->dropped == (uint64_t)r->n_rem && !us->superseded &&
               !us->identical && !us->rejected &&
               us->out == (uint64_t)r->n_src && !us->recovered && !us->inflight;
}

/* ------------------------------------------------------------- ROUND --- */

/* The command line of measurement 'm', into 'argv' (BENCH_ARGV_MAX
 * entries). */
static void build_argv(struct round *r, enum meas m, const struct names *t,
                       const char *statedir, const char **argv, char *buf,
                       size_t bufsize) {
        /* clang-format off */
        static const char *const mode[] = {"--mode", "active-active",
                                           "--site", "east", NULL};
        const char *const tail[] = {
            "--unify", "dedup",
            "--id", r->u->id == ID_JSON ? "json:id" : "key",
            /* info: the STATS lines carry the unify counters. */
            "--log-level", "info",
            NULL};
        /* clang-format on */
        size_t      off = 0;
        const char *srcs;

        if (m == M_UNIFY) {
                bench_aagw_argv(&r->b, argv, t->src, statedir, mode, tail, buf,
                                bufsize);
                return;
        }
        /* b, c: T and west.T; the unify stage writes at its site. */
        srcs = bench_buf_printf(buf, bufsize, &off, "%s,%s", t->src, t->remote);
        if (m == M_BARE_Q) {
                bench_bare_argv(
                    &r->b, argv, srcs, r->b.east, t->dst, unify_queue_props,
                    sizeof(unify_queue_props) / sizeof(unify_queue_props[0]));
        } else if (m == M_BARE_HDR) {
                /* d: b adding the header the unify stage writes on a
                 * local record of T (origin and path east, the record's
                 * coordinates, HLC), for a record in the middle of
                 * partition 63. */
                const char *hdr[1];
                hdr[0] = bench_buf_printf(
                    buf, bufsize, &off,
                    "bench.header=aagw.prov=1;east;%s:63:%zu;"
                    "1764480000123:0;",
                    t->src,
                    r->b.o->records / 2 / (size_t)r->b.o->partitions);
                bench_bare_argv(&r->b, argv, srcs, r->b.east, t->dst, hdr, 1);
        } else
                bench_bare_argv(&r->b, argv, srcs, r->b.east, t->dst, NULL, 0);
}

/* Run measurement 'm' of the round: preload, start, watch the target,
 * stop, verify.  Fills r->res[m]; @returns 0, or -1 (reason printed). */
static int measure(struct bench_round *b, int mi) {
        struct round            *r    = (struct round *)b;
        const enum meas          m    = (enum meas)mi;
        const struct bench_opts *o    = b->o;
        struct result           *res  = &r->res[m];
        const int64_t            in   = r->n_src + r->n_rem;
        const int64_t            want = m == M_UNIFY ? r->n_src : in;
        struct names             t;
        char                     errstr[1024], buf[4096];
        const char              *argv[BENCH_ARGV_MAX];
        struct bench_meas        mm;
        struct bench_sample      s0, s1, s2;
        int64_t                  sum = 0;
        int                      rc  = -1;

        memset(res, 0, sizeof(*res));
        memset(&s1, 0, sizeof(s1));
        s2 = s1;
        topic_names(b->run, m, &t);
        if (bench_meas_init(&mm, b, meas_info[m].letter, meas_info[m].label))
                goto out;
        if (preload(r, &t, errstr, sizeof(errstr))) {
                bench_errorf("%s: %s", mm.tag, errstr);
                goto out;
        }
        if (bench_meas_target_empty(&mm, b->east_rk, t.dst, o->partitions))
                goto out;
        build_argv(r, m, &t, mm.statedir, argv, buf, sizeof(buf));

        bench_sample_take(&s0, NULL, b->sandbox);
        if (bench_meas_run(&mm, b, argv, s0.t, b->east_rk, t.dst, want, &s1,
                           &s2))
                goto out;
        /* a: the output is complete once N records are there, but the
         * duplicates read last produce nothing.  Wait until aagw counted
         * every input (its STATS line, every 10 s) before stopping it, so
         * that its final counters are the whole story. */
        if (m == M_UNIFY && !mm.exited) {
                int64_t deadline = harness_now_ms() + STATS_TIMEOUT_MS;

                do {
                        ustats_read(mm.err, &res->us);
                        if (res->us.seen &&
                            res->us.in >= (uint64_t)(r->n_src + r->n_rem))
                                break;
                        bench_nap_ms(200);
                } while (harness_now_ms() < deadline);
        }
        /* A wrapper (perf record) passes SIGTERM on and reports the
         * signal; the checks below still decide. */
        if (bench_meas_stop(&mm, true) ||
            bench_meas_exit_ok(
                &mm, m == M_UNIFY && o->aagw_prefix ? o->aagw_prefix[0] : NULL))
                goto out;

        /* After the exit: nothing lost, nothing written twice. */
        if (m == M_UNIFY) {
                ustats_read(mm.err, &res->us);
                if (!ustats_ok(r, &res->us)) {
                        bench_errorf(
                            "%s: aagw's unify counters are wrong: in %" PRIu64
                            " accepted %" PRIu64 " dropped %" PRIu64
                            " superseded %" PRIu64 " identical %" PRIu64
                            " rejected %" PRIu64 " out %" PRIu64
                            " recovered %" PRIu64 " inflight %" PRId64
                            "%s; expected in %" PRId64 " accepted %" PRId64
                            " dropped %" PRId64 " out %" PRId64
                            ", the rest 0 (see %s)",
                            mm.tag, res->us.in, res->us.accepted,
                            res->us.dropped, res->us.superseded,
                            res->us.identical, res->us.rejected, res->us.out,
                            res->us.recovered, res->us.inflight,
                            res->us.seen ? "" : " (no STATS line)", in,
                            r->n_src, r->n_rem, r->n_src, mm.err);
                        goto out;
                }
                if (bench_watermarks(b->east_rk, t.dst, o->partitions, false,
                                     NULL, &sum, errstr, sizeof(errstr))) {
                        bench_errorf("%s: %s", mm.tag, errstr);
                        goto out;
                }
                if (sum != want) {
                        bench_errorf("%s: after the stop %s holds %" PRId64
                                     " records, expected %" PRId64,
                                     mm.tag, t.dst, sum, want);
                        goto out;
                }
                if (retention_check(r, t.dst, errstr, sizeof(errstr)) ||
                    readback(r, &t, &res->rb, errstr, sizeof(errstr))) {
                        bench_errorf("%s: %s", mm.tag, errstr);
                        goto out;
                }
                if (res->rb.records != want || res->rb.distinct != want ||
                    res->rb.bad_key || res->rb.bad_value || res->rb.repeated) {
                        bench_errorf("%s: %s is wrong: %" PRId64
                                     " records, %" PRId64
                                     " distinct ids of %" PRId64 ", %" PRId64
                                     " ids seen more than once, %" PRId64
                                     " bad keys, %" PRId64 " bad values",
                                     mm.tag, t.dst, res->rb.records,
                                     res->rb.distinct, want, res->rb.repeated,
                                     res->rb.bad_key, res->rb.bad_value);
                        goto out;
                }
        } else if (counts_check(r, t.dst, r->exp_src, r->exp_rem, "target",
                                errstr, sizeof(errstr)) ||
                   retention_check(r, t.dst, errstr, sizeof(errstr))) {
                bench_errorf("%s: %s", mm.tag, errstr);
                goto out;
        }

        res->first_cnt = mm.first_cnt;
        {
                double window = s2.t - s1.t;
                /* Input records the window stands for: the first sighting
                 * of 'first_cnt' outputs stands for first_cnt * in / want
                 * inputs (exact for the bare pipes, in proportion for a). */
                double in_win =
                    (double)in * (1.0 - (double)res->first_cnt / (double)want);

                res->startup_s   = s1.t - mm.t0;
                res->wall_s      = s2.t - mm.t0;
                res->steady_s    = window;
                res->wall_in_rps = (double)in / res->wall_s;
                if (window > 0 && res->first_cnt < want) {
                        res->steady_in_rps = in_win / window;
                        res->steady_out_rps =
                            (double)(want - res->first_cnt) / window;
                        res->cpu_steady_per_m =
                            (s2.child - s1.child) * 1e6 / in_win;
                        res->mock_cpu_per_m =
                            (s2.mock - s1.mock) * 1e6 / in_win;
                        res->others_cores =
                            bench_others_cores(&s1, &s2, s2.child - s1.child);
                } else { /* too short for two polls: whole life */
                        res->steady_in_rps    = res->wall_in_rps;
                        res->steady_out_rps   = (double)want / res->wall_s;
                        res->cpu_steady_per_m = s2.child * 1e6 / (double)in;
                        res->mock_cpu_per_m =
                            (s2.mock - s0.mock) * 1e6 / (double)in;
                        res->others_cores =
                            bench_others_cores(&s0, &s2, s2.child);
                }
                res->cpu_life_per_m = s2.child * 1e6 / (double)in;
        }
        res->valid = true;
        printf("BENCH run=%d m=%c name=%s records=%zu dup_records=%" PRId64
               " inputs=%" PRId64 " outputs=%" PRId64
               " value_bytes=%zu partitions=%d steady_in_rps=%.0f "
               "steady_out_rps=%.0f wall_in_rps=%.0f wall_s=%.3f "
               "startup_s=%.3f steady_s=%.3f cpu_steady_s_per_1m=%.3f "
               "cpu_life_s_per_1m=%.3f mock_cpu_s_per_1m=%.3f "
               "others_cores=%.2f\n",
               b->run + 1, meas_info[m].letter, meas_info[m].name, o->records,
               r->n_rem, in, want, o->value_size, o->partitions,
               res->steady_in_rps, res->steady_out_rps, res->wall_in_rps,
               res->wall_s, res->startup_s, res->steady_s,
               res->cpu_steady_per_m, res->cpu_life_per_m, res->mock_cpu_per_m,
               res->others_cores);
        if (m == M_UNIFY)
                printf("UNIFY_OUTCOME run=%d in=%" PRIu64 " accepted=%" PRIu64
                       " dropped=%" PRIu64 " superseded=%" PRIu64
                       " identical=%" PRIu64 " rejected=%" PRIu64
                       " out=%" PRIu64 " recovered=%" PRIu64
                       " readback_records=%" PRId64
                       " readback_distinct_ids=%" PRId64
                       " winners_from_remote=%" PRId64 "\n",
                       b->run + 1, res->us.in, res->us.accepted,
                       res->us.dropped, res->us.superseded, res->us.identical,
                       res->us.rejected, res->us.out, res->us.recovered,
                       res->rb.records, res->rb.distinct, res->rb.from_remote);
        fflush(stdout);
        rc = 0;
out:
        bench_meas_deinit(&mm, o->keep); /* --keep: its RocksDB LOG */
        return rc;
}

/* ------------------------------------------------------------ REPORT --- */

static double ratio(const struct result *res, enum meas x, enum meas y) {
        return bench_ratio(res, sizeof(*res),
                           offsetof(struct result, steady_in_rps), x, y);
}

static double cpu_ratio(const struct result *res, enum meas x, enum meas y) {
        return bench_ratio(res, sizeof(*res),
                           offsetof(struct result, cpu_steady_per_m), x, y);
}

static void print_round(const struct round *r) {
        const struct result *res = r->res;

        printf("\nrun %d of %d: %zu ids in T + %" PRId64
               " duplicates in west.T = %" PRId64 " inputs x %zu B, %d "
               "partitions\n",
               r->b.run + 1, r->b.o->runs, r->b.o->records, r->n_rem,
               r->n_src + r->n_rem, r->b.o->value_size, r->b.o->partitions);
        printf("  %-28s %11s %11s %10s %7s %7s %8s %8s %8s %6s\n",
               "measurement", "in rec/s", "out rec/s", "wall in/s", "start s",
               "steady s", "CPU/1M", "life/1M", "mock/1M", "others");
        for (int m = 0; m < M_CNT; m++) {
                if (!(r->b.o->only & (1u << m)) ||
                    !bench_print_row(&meas_info[m], res[m].valid, 28, 11))
                        continue;
                printf(" %11.0f %11.0f %10.0f %7.2f %7.2f %8.2f %8.2f "
                       "%8.2f %6.2f\n",
                       res[m].steady_in_rps, res[m].steady_out_rps,
                       res[m].wall_in_rps, res[m].startup_s, res[m].steady_s,
                       res[m].cpu_steady_per_m, res[m].cpu_life_per_m,
                       res[m].mock_cpu_per_m, res[m].others_cores);
        }
        if (res[M_UNIFY].valid)
                printf("  a outcome: in %" PRIu64 " accepted %" PRIu64
                       " dropped %" PRIu64 " (superseded %" PRIu64
                       " identical %" PRIu64 " rejected %" PRIu64
                       "); read back %" PRId64 " records, %" PRId64
                       " distinct ids, %" PRId64 " first seen in west.T\n",
                       res[M_UNIFY].us.in, res[M_UNIFY].us.accepted,
                       res[M_UNIFY].us.dropped, res[M_UNIFY].us.superseded,
                       res[M_UNIFY].us.identical, res[M_UNIFY].us.rejected,
                       res[M_UNIFY].rb.records, res[M_UNIFY].rb.distinct,
                       res[M_UNIFY].rb.from_remote);
        printf("  ratios (steady input rate): a/b %.2f  a/c %.2f  a/d %.2f"
               "   CPU a/b %.2f  CPU a/c %.2f  CPU a/d %.2f\n",
               ratio(res, M_UNIFY, M_BARE), ratio(res, M_UNIFY, M_BARE_Q),
               ratio(res, M_UNIFY, M_BARE_HDR),
               cpu_ratio(res, M_UNIFY, M_BARE),
               cpu_ratio(res, M_UNIFY, M_BARE_Q),
               cpu_ratio(res, M_UNIFY, M_BARE_HDR));
        printf("BENCH_RATIOS run=%d a_b=%.3f a_c=%.3f cpu_a_b=%.3f "
               "cpu_a_c=%.3f a_d=%.3f cpu_a_d=%.3f\n",
               r->b.run + 1, ratio(res, M_UNIFY, M_BARE),
               ratio(res, M_UNIFY, M_BARE_Q), cpu_ratio(res, M_UNIFY, M_BARE),
               cpu_ratio(res, M_UNIFY, M_BARE_Q),
               ratio(res, M_UNIFY, M_BARE_HDR),
               cpu_ratio(res, M_UNIFY, M_BARE_HDR));
        fflush(stdout);
}

static void print_summary(const struct bench_opts *o, const void *all) {
        static const struct bench_field fields[] = {
            {"steady in rec/s", offsetof(struct result, steady_in_rps), 0},
            {"CPU s/1M (steady)", offsetof(struct result, cpu_steady_per_m), 2},
            {"others (cores)", offsetof(struct result, others_cores), 2},
            {NULL, 0, 0},
        };
        const size_t rps = offsetof(struct result, steady_in_rps);
        const size_t cpu = offsetof(struct result, cpu_steady_per_m);
        const struct bench_ratio ratios[] = {
            {"a/b", rps, M_UNIFY, M_BARE, TARGET_A_B, true},
            {"(a/c)", rps, M_UNIFY, M_BARE_Q, TARGET_A_B, true},
            {"(CPU a/b, no target)", cpu, M_UNIFY, M_BARE, NAN, false},
            {"(CPU a/c, no target)", cpu, M_UNIFY, M_BARE_Q, NAN, false},
            {"(a/d, no target)", rps, M_UNIFY, M_BARE_HDR, NAN, false},
            {"(d/b, no target)", rps, M_BARE_HDR, M_BARE, NAN, false},
            {NULL, 0, 0, 0, 0, false},
        };

        bench_print_summary(o, M_CNT, all, sizeof(struct result), fields,
                            ratios);
}

/* -------------------------------------------------------------- MAIN --- */

static void usage(FILE *out) {
        fprintf(
            out,
            "Usage: bench_unify [OPTIONS]\n"
            "\n"
            "Unify stage benchmark at one site (east) of two `aagw sandbox` "
            "clusters.\n"
            "Inputs: T with N ids, west.T with D%% of them again (with "
            "west's provenance).\n"
            "  a  aagw --site east: the unify stage, T + west.T -> "
            "T.unified\n"
            "  b  the replicator benchmark's bare librdkafka loop, T + "
            "west.T -> T.copy\n"
            "  c  b with the unify stage's consumer queue settings\n"
            "See docs/benchmarks.md.\n"
            "\n"
            "Options:\n"
            "  -n, --records N       ids (records in T; default 1000000)\n"
            "  -d, --dup-percent D   ids written again in west.T, 0..100 "
            "(default 10)\n"
            "  -i, --id key|json     the global id: the record key, or the "
            "JSON field\n"
            "                        \"id\" of the value (default key)\n"
            "  -r, --runs K          rounds, each with a fresh sandbox "
            "(default 1)\n"
            "  -m, --only LETTERS    measure only these of abcd (default "
            "abcd)\n");
        bench_usage_common(out);
        fprintf(out,
                "                        a librdkafka property for b and c "
                "(repeat)\n"
                "  -k, --keep            keep the log directory\n"
                "  -h, --help            this text\n"
                "\n"
                "Environment: AAGW_BIN (default: the aagw of this build), "
                "TMPDIR.\n"
                "Exit status: 0 all measurements valid, 1 a measurement "
                "failed, 2 usage.\n");
}

/* This program's own options (bench_cli.own_opt). */
static const struct option unify_longopts[] = {
    {"dup-percent", required_argument, NULL, 'd'},
    {"id", required_argument, NULL, 'i'},
    {NULL, 0, NULL, 0},
};

static bool unify_opt(int opt, const char *arg, void *ctx) {
        struct unify_opts *u = ctx;
        size_t             v;

        switch (opt) {
        case 'd':
                if (!bench_parse_size(arg, 0, 100, &v))
                        return false;
                u->dup_pct = (unsigned)v;
                return true;
        case 'i':
                if (!strcmp(arg, "key"))
                        u->id = ID_KEY;
                else if (!strcmp(arg, "json"))
                        u->id = ID_JSON;
                else
                        return false;
                return true;
        default:
                return false;
        }
}

/* The policy and id rule aagw uses for this deployment (sites east and
 * west, prefix naming, default header prefix), to stamp west.T's
 * provenance exactly as the replicator would. */
static int policy_init(struct round *r) {
        static const char *const sites[] = {"east", "west"};
        struct aagw_repl_conf    rc;
        char                     errstr[512];

        aagw_repl_conf_init(&rc);
        rc.sites    = sites;
        rc.site_cnt = 2;
        rc.naming   = AAGW_NAMING_PREFIX;
        r->pol      = aagw_repl_policy_new(&rc, errstr, sizeof(errstr));
        if (!r->pol) {
                bench_errorf("policy: %s", errstr);
                return -1;
        }
        r->id_rule = aagw_id_rule_new(r->u->id == ID_JSON ? "json:id" : "key",
                                      errstr, sizeof(errstr));
        if (!r->id_rule) {
                bench_errorf("id rule: %s", errstr);
                return -1;
        }
        return 0;
}

static int round_start(struct bench_round *b) {
        struct round            *r = (struct round *)b;
        const struct bench_opts *o = b->o;
        struct names             names[M_CNT];
        const char              *topics[3 * M_CNT + 1];
        size_t                   cnt = 0;
        char                     key[32];
        rd_kafka_topic_t        *rkt;

        /* Every topic on both clusters (the sandbox cannot do otherwise);
         * at west they stay empty. */
        for (int m = 0; m < M_CNT; m++) {
                topic_names(b->run, (enum meas)m, &names[m]);
                topics[cnt++] = names[m].src;
                topics[cnt++] = names[m].remote;
                topics[cnt++] = names[m].dst;
        }
        topics[cnt] = NULL;
        if (bench_sandbox_start(b, topics, false))
                return -1;
        /* Expected records per partition of T and west.T: what the
         * partitioner gives each key, the same in every measurement.
         * (The partitioner wants a topic handle; an existing topic keeps
         * the mock from auto-creating one.) */
        rkt = rd_kafka_topic_new(b->east_rk, names[M_UNIFY].src, NULL);
        memset(r->exp_src, 0, sizeof(*r->exp_src) * (size_t)o->partitions);
        memset(r->exp_rem, 0, sizeof(*r->exp_rem) * (size_t)o->partitions);
        r->n_src = r->n_rem = 0;
        for (size_t i = 0; i < o->records; i++) {
                size_t  kl = bench_rec_key(i, key, sizeof(key));
                int32_t p  = bench_rec_partition(rkt, key, kl, o->partitions);

                r->exp_src[p]++;
                r->n_src++;
                if (rec_dup(r->u, i)) {
                        r->exp_rem[p]++;
                        r->n_rem++;
                }
        }
        rd_kafka_topic_destroy(rkt);
        return 0;
}

static void round_end(struct bench_round *b) {
        print_round((const struct round *)b);
}

int main(int argc, char **argv) {
        static struct unify_opts       u    = {.dup_pct = 10, .id = ID_KEY};
        static const struct bench_prog prog = {
            .name           = PROG,
            .meas_cnt       = M_CNT,
            .res_size       = sizeof(struct result) * M_CNT,
            .min_value_size = 48,
            .shortopts      = "d:i:",
            .longopts       = unify_longopts,
            .own_opt        = unify_opt,
            .ctx            = &u,
            .usage          = usage,
            .round_start    = round_start,
            .measure        = measure,
            .round_end      = round_end,
            .summary        = print_summary,
        };
        struct bench_opts o;
        struct round      r;
        char             *dir = NULL;
        char              self[PATH_MAX];
        int               rc;

        rc = bench_main_start(&prog, argc, argv, &o);
        if (rc >= 0)
                return rc;
        rc = BENCH_EXIT_OK;
        memset(&r, 0, sizeof(r));
        r.b.o = &o;
        r.u   = &u;
        if (policy_init(&r)) {
                rc = BENCH_EXIT_RUNTIME;
                goto out;
        }
        dir = bench_setup(BENCH_AAGW_BIN, "bench-unify", self, sizeof(self));
        if (!dir) {
                rc = BENCH_EXIT_RUNTIME;
                goto out;
        }
        r.b.self  = self;
        r.all     = calloc((size_t)o.runs, sizeof(*r.all));
        r.b.res   = r.res;
        r.b.all   = r.all;
        r.exp_src = calloc((size_t)o.partitions, sizeof(*r.exp_src));
        r.exp_rem = calloc((size_t)o.partitions, sizeof(*r.exp_rem));
        r.scratch = calloc((size_t)o.partitions, sizeof(*r.scratch));
        if (!r.all || !r.exp_src || !r.exp_rem || !r.scratch) {
                bench_errorf("out of memory");
                rc = BENCH_EXIT_RUNTIME;
                goto out;
        }
        bench_print_host("");
        printf("%zu ids x %zu B values, id from the %s, %u%% again in "
               "west.T; %d partitions, %d brokers per cluster, %d run%s; "
               "aagw %s; logs in %s\n",
               o.records, o.value_size,
               u.id == ID_JSON ? "JSON field \"id\"" : "key", u.dup_pct,
               o.partitions, o.brokers, o.runs, o.runs == 1 ? "" : "s",
               harness_aagw_bin(), dir);
        fflush(stdout);

        rc = bench_run(&prog, &r.b, dir);
out:
        aagw_repl_policy_destroy(r.pol);
        aagw_id_rule_destroy(r.id_rule);
        free(r.exp_src);
        free(r.exp_rem);
        free(r.scratch);
        free(r.all);
        free(dir);
        return rc;
}
