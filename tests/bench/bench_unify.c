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
 *      queue      queued.max.messages.kbytes=65536): the same client
 *                 settings as a, so no fetch stall (docs/benchmarks.md,
 *                 "Why the consumers stall") in the baseline either.
 *
 * Both a and the bare pipes read the same N + D input records, so rates
 * are input records per second, and CPU is seconds per million input
 * records.  a writes N records, b and c write N + D.
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
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "aagw_policy.h"
#include "bench_util.h"
#include "harness.h"

#ifndef BENCH_AAGW_BIN
#define BENCH_AAGW_BIN "aagw"
#endif

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };
#define OPTS_HELP (-1) /* parse_opts(): help printed, exit 0 */

#define SANDBOX_TIMEOUT_MS 60000   /* sandbox up, topics created */
#define START_TIMEOUT_MS 90000     /* spawn -> first record at the target */
#define STALL_TIMEOUT_MS 30000     /* no progress at the target */
#define EXIT_GRACE_MS 10000        /* child exited -> last record visible */
#define STATS_TIMEOUT_MS 25000     /* done -> aagw logged every input */
#define STOP_TIMEOUT_MS 60000      /* SIGTERM -> exit */
#define READBACK_TIMEOUT_MS 180000 /* reading T.unified back */

/* The target from the issue: unify at >= 0.8x the bare pipe's rate. */
#define TARGET_A_B 0.80

/* ------------------------------------------------------------- TYPES --- */

enum meas { M_UNIFY, M_BARE, M_BARE_Q, M_CNT };

static const struct {
        char        letter;
        const char *name; /* machine-readable */
        const char *label;
} meas_info[M_CNT] = {
    {'a', "unify", "aagw unify stage"},
    {'b', "bare", "bare pipe"},
    {'c', "bare_unifyq", "bare pipe, unify's queue"},
};

/* The consumer queue of the unify stage (gateway/unifier.c,
 * consumer_extra), for measurement c. */
static const char *const unify_queue_props[] = {
    "consumer.queued.min.messages=1000000",
    "consumer.queued.max.messages.kbytes=65536",
};

enum id_mode { ID_KEY, ID_JSON };

struct opts {
        size_t       records;
        unsigned     dup_pct; /* of the ids, again in west.T */
        enum id_mode id;
        int          runs;
        int          partitions;
        int          brokers;
        size_t       value_size;
        int          poll_ms;
        unsigned     only; /* bit per enum meas */
        bool         keep;
        char       **aagw_prefix;   /* NULL-terminated, or NULL */
        const char  *aagw_args[32]; /* appended to aagw's command line */
        int          aagw_argc;
        const char  *bare_props[32]; /* consumer.K=V / producer.K=V */
        int          bare_propc;
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
        const struct opts    *o;
        int                   run;
        char                 *dir;  /* logs of this round */
        char                 *self; /* this program, for --bare */
        harness_proc_t       *sandbox;
        harness_bootstraps_t *bs;
        const char           *east, *west;
        rd_kafka_t           *east_rk;
        aagw_repl_policy_t   *pol;
        aagw_id_rule_t       *id_rule;
        int64_t *exp_src, *exp_rem; /* records per partition of T, west.T */
        int64_t *scratch;
        int64_t  n_src, n_rem;
        struct result res[M_CNT];
};

static void errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void errorf(const char *fmt, ...) {
        va_list ap;

        fputs("bench_unify: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

/* ----------------------------------------------------------- RECORDS --- */

/* Record 'i' (its global id is i): key "k<10 digits>". */
static size_t rec_key(size_t i, char *key, size_t size) {
        return (size_t)snprintf(key, size, "k%010zu", i);
}

/* Its value, exactly 'vsize' printable bytes ('val' holds vsize + 1).
 * With --id json a JSON object whose "id" field is the key. */
static void rec_value(const struct opts *o, size_t i, char *val) {
        size_t vsize = o->value_size, j;
        int    n;

        if (o->id == ID_JSON)
                n = snprintf(val, vsize + 1, "{\"id\":\"k%010zu\",\"pad\":\"",
                             i);
        else
                n = snprintf(val, vsize + 1, "v%010zu|", i);
        for (j = n > 0 ? (size_t)n : 0; j < vsize; j++)
                val[j] = (char)('a' + (i * 7 + j) % 26);
        if (o->id == ID_JSON) {
                val[vsize - 2] = '"';
                val[vsize - 1] = '}';
        }
        val[vsize] = '\0';
}

/* Whether id 'i' is written at west too (and so is in west.T): the first
 * dup_pct of every hundred ids, which the key hash spreads over all
 * partitions. */
static bool rec_dup(const struct opts *o, size_t i) {
        return i % 100 < o->dup_pct;
}

static int32_t rec_partition(rd_kafka_topic_t *rkt, const char *key,
                             size_t keylen, int partitions) {
        return rd_kafka_msg_partitioner_consistent(rkt, key, keylen, partitions,
                                                   NULL, NULL);
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

/* Check that every partition of 'topic' holds what 'expect' says, and
 * that the log still starts at 0 (the mock's retention dropped nothing). */
static int counts_check(struct round *r, const char *topic,
                        const int64_t *expect, const int64_t *expect2,
                        const char *what, char *errstr, size_t errstr_size) {
        const int p = r->o->partitions;
        int64_t   sum;

        if (bench_watermarks(r->east_rk, topic, p, false, r->scratch, &sum,
                             errstr, errstr_size))
                return -1;
        for (int i = 0; i < p; i++) {
                int64_t want = expect[i] + (expect2 ? expect2[i] : 0);
                if (r->scratch[i] != want) {
                        snprintf(errstr, errstr_size,
                                 "%s %s [%d] holds %" PRId64
                                 " records, expected %" PRId64
                                 " (total %" PRId64 ")",
                                 what, topic, i, r->scratch[i], want, sum);
                        return -1;
                }
        }
        return 0;
}

/* The log of every partition of 'topic' still starts at offset 0. */
static int retention_check(struct round *r, const char *topic, char *errstr,
                           size_t errstr_size) {
        int64_t sum;

        if (bench_watermarks(r->east_rk, topic, r->o->partitions, true, NULL,
                             &sum, errstr, errstr_size))
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

struct preload {
        int64_t delivered, failed;
        char    first_err[256];
};

static void preload_dr(rd_kafka_t *rk, const rd_kafka_message_t *m,
                       void *opaque) {
        struct preload *pl = opaque;

        (void)rk;
        if (!m->err) {
                pl->delivered++;
        } else if (pl->failed++ == 0) {
                snprintf(pl->first_err, sizeof(pl->first_err), "%s",
                         rd_kafka_err2str(m->err));
        }
}

static int produce_one(rd_kafka_t *rk, rd_kafka_vu_t *vu, size_t cnt,
                       const char *topic, char *errstr, size_t errstr_size) {
        for (;;) {
                rd_kafka_error_t   *error = rd_kafka_produceva(rk, vu, cnt);
                rd_kafka_resp_err_t err   = error ? rd_kafka_error_code(error)
                                                  : RD_KAFKA_RESP_ERR_NO_ERROR;

                if (error)
                        rd_kafka_error_destroy(error);
                if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                        rd_kafka_poll(rk, 10);
                        continue;
                }
                if (err) {
                        snprintf(errstr, errstr_size, "preload %s: %s", topic,
                                 rd_kafka_err2str(err));
                        return -1;
                }
                rd_kafka_poll(rk, 0);
                return 0;
        }
}

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
                               .value_len    = r->o->value_size};

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

/* An idempotent acks=all producer to 'bootstraps' whose delivery reports
 * count into 'pl'. */
static rd_kafka_t *preload_producer(const char *bootstraps, struct preload *pl,
                                    char *errstr, size_t errstr_size) {
        /* clang-format off */
        const char *const props[] = {"acks", "all",
                                     "linger.ms", "5",
                                     "batch.num.messages", "10000",
                                     "queue.buffering.max.messages", "500000",
                                     "enable.idempotence", "true",
                                     NULL};
        /* clang-format on */
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        rd_kafka_t      *rk;

        if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps, errstr,
                              errstr_size))
                goto fail;
        for (size_t i = 0; props[i]; i += 2)
                if (rd_kafka_conf_set(conf, props[i], props[i + 1], errstr,
                                      errstr_size))
                        goto fail;
        rd_kafka_conf_set_dr_msg_cb(conf, preload_dr);
        rd_kafka_conf_set_opaque(conf, pl);
        rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, errstr_size);
        if (rk)
                return rk;
fail:
        rd_kafka_conf_destroy(conf);
        return NULL;
}

/* Produce T (all N ids) and west.T (the duplicated ids, with west's
 * provenance) on east, each record to the partition of its key, and wait
 * until all are acknowledged.  West's T gets the duplicated ids too, at
 * the offsets west.T's provenance names: the west -> east flow of the
 * measured aagw then finds itself caught up and copies nothing, as in a
 * deployment where replication is current. */
static int preload(struct round *r, const struct names *t, char *errstr,
                   size_t errstr_size) {
        const struct opts *o  = r->o;
        struct preload     pl = {0}, wpl = {0};
        rd_kafka_t        *rk = NULL, *wrk = NULL;
        rd_kafka_topic_t  *src = NULL, *rem = NULL, *wsrc = NULL;
        char              *val  = malloc(o->value_size + 1);
        int64_t           *woff = calloc((size_t)o->partitions, sizeof(*woff));
        struct aagw_verdict *v  = malloc(sizeof(*v));
        int64_t              ts = (int64_t)time(NULL) * 1000;
        int                  rc = -1;
        char                 key[32];

        if (!val || !woff || !v) {
                snprintf(errstr, errstr_size, "out of memory");
                goto out;
        }
        if (!(rk = preload_producer(r->east, &pl, errstr, errstr_size)) ||
            !(wrk = preload_producer(r->west, &wpl, errstr, errstr_size)))
                goto out;
        src  = rd_kafka_topic_new(rk, t->src, NULL);
        rem  = rd_kafka_topic_new(rk, t->remote, NULL);
        wsrc = rd_kafka_topic_new(wrk, t->src, NULL);
        for (size_t i = 0; i < o->records; i++) {
                size_t        kl = rec_key(i, key, sizeof(key));
                int32_t       p  = rec_partition(src, key, kl, o->partitions);
                rd_kafka_vu_t vu[8];
                size_t        n = 0;

                rec_value(o, i, val);
                vu[n].vtype        = RD_KAFKA_VTYPE_RKT;
                vu[n++].u.rkt      = src;
                vu[n].vtype        = RD_KAFKA_VTYPE_PARTITION;
                vu[n++].u.i32      = p;
                vu[n].vtype        = RD_KAFKA_VTYPE_MSGFLAGS;
                vu[n++].u.i        = RD_KAFKA_MSG_F_COPY;
                vu[n].vtype        = RD_KAFKA_VTYPE_KEY;
                vu[n].u.mem.ptr    = key;
                vu[n++].u.mem.size = kl;
                vu[n].vtype        = RD_KAFKA_VTYPE_VALUE;
                vu[n].u.mem.ptr    = val;
                vu[n++].u.mem.size = o->value_size;
                vu[n].vtype        = RD_KAFKA_VTYPE_TIMESTAMP;
                vu[n++].u.i64      = ts;
                if (produce_one(rk, vu, n, t->src, errstr, errstr_size))
                        goto out;
                if (!rec_dup(o, i))
                        continue;
                /* West wrote the same record to its T (same partitioner,
                 * same partition) ... */
                vu[0].u.rkt = wsrc;
                if (produce_one(wrk, vu, n, t->src, errstr, errstr_size))
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
                if (produce_one(rk, vu, n, t->remote, errstr, errstr_size))
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
        const struct opts               *o    = r->o;
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
        if (bench_watermarks(r->east_rk, t->dst, np, false, hwm, &total, errstr,
                             errstr_size))
                goto out;
        rk = bench_client_new(RD_KAFKA_CONSUMER, r->east, props, errstr,
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
                        rec_value(o, (size_t)id, want);
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

static int sandbox_start(struct round *r) {
        const char **argv;
        char        *bsfile = harness_path_join(r->dir, "bootstraps");
        char        *out    = harness_path_join(r->dir, "sandbox.out");
        char        *err    = harness_path_join(r->dir, "sandbox.err");
        char         parts[16], brokers[16], errstr[512];
        struct names names[M_CNT];
        size_t       a  = 0;
        int          rc = -1;

        argv = calloc(16 + 6 * M_CNT, sizeof(*argv));
        if (!argv || !bsfile || !out || !err) {
                errorf("out of memory");
                goto out;
        }
        snprintf(parts, sizeof(parts), "%d", r->o->partitions);
        snprintf(brokers, sizeof(brokers), "%d", r->o->brokers);
        argv[a++] = harness_aagw_bin();
        argv[a++] = "sandbox";
        argv[a++] = "--clusters";
        argv[a++] = "east,west";
        argv[a++] = "--brokers";
        argv[a++] = brokers;
        argv[a++] = "--partitions";
        argv[a++] = parts;
        argv[a++] = "--log-level";
        argv[a++] = "warn";
        argv[a++] = "--bootstraps-file";
        argv[a++] = bsfile;
        /* Every topic on both clusters (the sandbox cannot do otherwise);
         * at west they stay empty. */
        for (int m = 0; m < M_CNT; m++) {
                topic_names(r->run, (enum meas)m, &names[m]);
                argv[a++] = "--topic";
                argv[a++] = names[m].src;
                argv[a++] = "--topic";
                argv[a++] = names[m].remote;
                argv[a++] = "--topic";
                argv[a++] = names[m].dst;
        }
        argv[a] = NULL;

        r->sandbox = harness_proc_spawn(argv, out, err, errstr, sizeof(errstr));
        if (!r->sandbox) {
                errorf("sandbox: %s", errstr);
                goto out;
        }
        if (!harness_wait_file(bsfile, SANDBOX_TIMEOUT_MS)) {
                errorf("sandbox: no bootstraps after %d ms (see %s)",
                       SANDBOX_TIMEOUT_MS, err);
                goto out;
        }
        r->bs = harness_bootstraps_load(bsfile, errstr, sizeof(errstr));
        if (!r->bs) {
                errorf("sandbox: %s", errstr);
                goto out;
        }
        r->east = harness_bootstraps_get(r->bs, "east");
        r->west = harness_bootstraps_get(r->bs, "west");
        if (!r->east || !r->west) {
                errorf("sandbox: %s lacks east or west", bsfile);
                goto out;
        }
        r->east_rk = bench_client_new(RD_KAFKA_PRODUCER, r->east, NULL, errstr,
                                      sizeof(errstr));
        if (!r->east_rk) {
                errorf("client: %s", errstr);
                goto out;
        }
        rc = 0;
out:
        free(argv);
        free(bsfile);
        free(out);
        free(err);
        return rc;
}

static void sandbox_stop(struct round *r) {
        int status;

        if (r->east_rk)
                rd_kafka_destroy(r->east_rk);
        r->east_rk = NULL;
        if (r->sandbox) {
                if (harness_proc_wait(r->sandbox, 0, &status) == AAGW_OK)
                        errorf("sandbox: had exited (status %d) before the "
                               "end of the round",
                               harness_exit_code(status));
                harness_proc_signal(r->sandbox, SIGTERM);
                if (harness_proc_wait(r->sandbox, STOP_TIMEOUT_MS, &status) !=
                    AAGW_OK)
                        errorf("sandbox: did not stop on SIGTERM; killed");
                harness_proc_destroy(r->sandbox);
                r->sandbox = NULL;
        }
        harness_bootstraps_destroy(r->bs);
        r->bs = NULL;
}

#define ARGV_MAX 128

/* The command line of measurement 'm', into 'argv' (ARGV_MAX entries). */
static void build_argv(struct round *r, enum meas m, const struct names *t,
                       const char *statedir, const char **argv, char *buf,
                       size_t bufsize) {
        size_t a = 0, off = 0;

        switch (m) {
        case M_UNIFY: {
                const char *east_arg, *west_arg, *regex, *gwid;

                east_arg =
                    bench_buf_printf(buf, bufsize, &off, "east=%s", r->east);
                west_arg =
                    bench_buf_printf(buf, bufsize, &off, "west=%s", r->west);
                regex = bench_buf_printf(buf, bufsize, &off, "^%s$", t->src);
                gwid  = bench_buf_printf(buf, bufsize, &off, "bench-r%d",
                                         r->run + 1);
                for (size_t i = 0; r->o->aagw_prefix && r->o->aagw_prefix[i];
                     i++)
                        argv[a++] = r->o->aagw_prefix[i];
                argv[a++] = harness_aagw_bin();
                argv[a++] = "--cluster";
                argv[a++] = east_arg;
                argv[a++] = "--cluster";
                argv[a++] = west_arg;
                argv[a++] = "--mode";
                argv[a++] = "active-active";
                argv[a++] = "--site";
                argv[a++] = "east";
                argv[a++] = "--topic";
                argv[a++] = regex;
                argv[a++] = "--unify";
                argv[a++] = "dedup";
                argv[a++] = "--id";
                argv[a++] = r->o->id == ID_JSON ? "json:id" : "key";
                argv[a++] = "--gateway-id";
                argv[a++] = gwid;
                argv[a++] = "--state-dir";
                argv[a++] = statedir;
                /* info: the STATS lines carry the unify counters. */
                argv[a++] = "--log-level";
                argv[a++] = "info";
                for (int i = 0; i < r->o->aagw_argc; i++)
                        argv[a++] = r->o->aagw_args[i];
                break;
        }
        case M_BARE:
        case M_BARE_Q: {
                const char *srcs = bench_buf_printf(buf, bufsize, &off, "%s,%s",
                                                    t->src, t->remote);

                argv[a++] = r->self;
                argv[a++] = "--bare";
                argv[a++] = r->east;
                argv[a++] = srcs;
                argv[a++] = r->east; /* the unify stage writes at its site */
                argv[a++] = t->dst;
                if (m == M_BARE_Q)
                        for (size_t i = 0; i < sizeof(unify_queue_props) /
                                                   sizeof(unify_queue_props[0]);
                             i++)
                                argv[a++] = unify_queue_props[i];
                for (int i = 0; i < r->o->bare_propc; i++)
                        argv[a++] = r->o->bare_props[i];
                break;
        }
        default:
                break;
        }
        argv[a] = NULL;
}

/* CPU figures at one moment of a measurement ('p' NULL: before the
 * measured program started). */
struct sample {
        double t, child, mock, busy, self;
};

static void sample_take(struct round *r, harness_proc_t *p, struct sample *s) {
        struct rusage ru;

        getrusage(RUSAGE_SELF, &ru);
        s->t     = bench_now_s();
        s->child = p ? bench_tree_cpu_s(harness_proc_pid(p)) : 0;
        s->mock  = bench_proc_cpu_s(harness_proc_pid(r->sandbox));
        s->busy  = bench_machine_busy_s();
        s->self  = bench_tv_s(ru.ru_utime) + bench_tv_s(ru.ru_stime);
}

/* Run measurement 'm' of the round: preload, start, watch the target,
 * stop, verify.  Fills r->res[m]; @returns 0, or -1 (reason printed). */
static int measure(struct round *r, enum meas m) {
        const struct opts *o    = r->o;
        struct result     *res  = &r->res[m];
        const int64_t      in   = r->n_src + r->n_rem;
        const int64_t      want = m == M_UNIFY ? r->n_src : in;
        struct names       t;
        char               errstr[1024], buf[4096], tag[32];
        const char        *argv[ARGV_MAX];
        char              *out = NULL, *err = NULL, *statedir = NULL;
        char              *trace_path = NULL, *threads_path = NULL;
        FILE              *trace = NULL;
        harness_proc_t    *p     = NULL;
        struct sample      s0, s1, s2;
        double             t0, t_last_progress, t_exit = 0;
        int64_t            sum = 0, last_sum = -1;
        bool               exited = false, first = false;
        int                status = 0, sb_status = 0, rc = -1;

        memset(res, 0, sizeof(*res));
        memset(&s1, 0, sizeof(s1));
        s2 = s1;
        topic_names(r->run, m, &t);
        snprintf(tag, sizeof(tag), "run%d-%c", r->run + 1, meas_info[m].letter);
        snprintf(buf, sizeof(buf), "%s.out", tag);
        out = harness_path_join(r->dir, buf);
        snprintf(buf, sizeof(buf), "%s.err", tag);
        err = harness_path_join(r->dir, buf);
        snprintf(buf, sizeof(buf), "%s.state", tag);
        statedir = harness_path_join(r->dir, buf);
        snprintf(buf, sizeof(buf), "%s.trace", tag);
        trace_path = harness_path_join(r->dir, buf);
        snprintf(buf, sizeof(buf), "%s.threads", tag);
        threads_path = harness_path_join(r->dir, buf);
        if (!out || !err || !statedir || !trace_path || !threads_path) {
                errorf("out of memory");
                goto out;
        }

        if (preload(r, &t, errstr, sizeof(errstr))) {
                errorf("%s: %s", tag, errstr);
                goto out;
        }
        if (bench_watermarks(r->east_rk, t.dst, o->partitions, false, NULL,
                             &sum, errstr, sizeof(errstr))) {
                errorf("%s: %s", tag, errstr);
                goto out;
        }
        if (sum) {
                errorf("%s: target %s is not empty (%" PRId64 " records)", tag,
                       t.dst, sum);
                goto out;
        }
        build_argv(r, m, &t, statedir, argv, buf, sizeof(buf));

        sample_take(r, NULL, &s0);
        t0 = s0.t;
        p  = harness_proc_spawn(argv, out, err, errstr, sizeof(errstr));
        if (!p) {
                errorf("%s: %s", tag, errstr);
                goto out;
        }
        t_last_progress = t0;
        /* seconds since the start, records at the target: one line per
         * poll, for a look at stalls and ramps. */
        trace = fopen(trace_path, "w");

        /* Watch the target until it holds all 'want' records. */
        for (double next = t0;;) {
                double now;

                next += o->poll_ms / 1000.0;
                now = bench_now_s();
                if (next > now)
                        bench_nap_ms((int)((next - now) * 1000.0 + 0.5));
                else
                        next = now;
                if (bench_watermarks(r->east_rk, t.dst, o->partitions, false,
                                     NULL, &sum, errstr, sizeof(errstr))) {
                        errorf("%s: %s", tag, errstr);
                        goto out;
                }
                now = bench_now_s();
                if (trace)
                        fprintf(trace, "%.3f %" PRId64 "\n", now - t0, sum);
                if (sum > 0 && !first) {
                        sample_take(r, p, &s1);
                        first          = true;
                        res->first_cnt = sum;
                }
                if (sum != last_sum) {
                        last_sum        = sum;
                        t_last_progress = now;
                }
                if (sum > want) {
                        errorf("%s: target %s holds %" PRId64
                               " records, more than the %" PRId64
                               " expected: duplicates",
                               tag, t.dst, sum, want);
                        goto out;
                }
                if (sum == want) {
                        sample_take(r, p, &s2);
                        break;
                }
                if (harness_proc_wait(r->sandbox, 0, &sb_status) == AAGW_OK) {
                        errorf("%s: the sandbox exited (status %d) at %" PRId64
                               " of %" PRId64 " records",
                               tag, harness_exit_code(sb_status), sum, want);
                        goto out;
                }
                if (!exited && harness_proc_wait(p, 0, &status) == AAGW_OK) {
                        exited = true;
                        t_exit = now;
                }
                if (exited && now - t_exit > EXIT_GRACE_MS / 1000.0) {
                        errorf("%s: %s exited (status %d) with %" PRId64
                               " of %" PRId64 " records at the target (see "
                               "%s)",
                               tag, meas_info[m].label,
                               harness_exit_code(status), sum, want, err);
                        goto out;
                }
                if (!first && now - t0 > START_TIMEOUT_MS / 1000.0) {
                        errorf("%s: no record at the target after %d s (see "
                               "%s)",
                               tag, START_TIMEOUT_MS / 1000, err);
                        goto out;
                }
                if (first &&
                    now - t_last_progress > STALL_TIMEOUT_MS / 1000.0) {
                        errorf("%s: stalled at %" PRId64 " of %" PRId64
                               " records for %d s (see %s)",
                               tag, sum, want, STALL_TIMEOUT_MS / 1000, err);
                        goto out;
                }
        }
        /* a: the output is complete once N records are there, but the
         * duplicates read last produce nothing.  Wait until aagw counted
         * every input (its STATS line, every 10 s) before stopping it, so
         * that its final counters are the whole story. */
        if (m == M_UNIFY && !exited) {
                int64_t deadline = harness_now_ms() + STATS_TIMEOUT_MS;

                do {
                        ustats_read(err, &res->us);
                        if (res->us.seen &&
                            res->us.in >= (uint64_t)(r->n_src + r->n_rem))
                                break;
                        bench_nap_ms(200);
                } while (harness_now_ms() < deadline);
        }
        if (!exited) {
                bench_threads_dump(harness_proc_pid(p), threads_path);
                harness_proc_signal(p, SIGTERM);
                if (harness_proc_wait(p, STOP_TIMEOUT_MS, &status) != AAGW_OK) {
                        errorf("%s: %s did not exit within %d s of SIGTERM",
                               tag, meas_info[m].label, STOP_TIMEOUT_MS / 1000);
                        goto out;
                }
        }
        if (harness_exit_code(status) != 0) {
                /* A wrapper (perf record) passes SIGTERM on and reports
                 * the signal; the checks below still decide. */
                if (m == M_UNIFY && o->aagw_prefix) {
                        printf("%s: exit status %d of '%s' ignored\n", tag,
                               harness_exit_code(status), o->aagw_prefix[0]);
                } else {
                        errorf("%s: %s exited with status %d (see %s)", tag,
                               meas_info[m].label, harness_exit_code(status),
                               err);
                        goto out;
                }
        }

        /* After the exit: nothing lost, nothing written twice. */
        if (m == M_UNIFY) {
                ustats_read(err, &res->us);
                if (!ustats_ok(r, &res->us)) {
                        errorf(
                            "%s: aagw's unify counters are wrong: in %" PRIu64
                            " accepted %" PRIu64 " dropped %" PRIu64
                            " superseded %" PRIu64 " identical %" PRIu64
                            " rejected %" PRIu64 " out %" PRIu64
                            " recovered %" PRIu64 " inflight %" PRId64
                            "%s; expected in %" PRId64 " accepted %" PRId64
                            " dropped %" PRId64 " out %" PRId64
                            ", the rest 0 (see %s)",
                            tag, res->us.in, res->us.accepted, res->us.dropped,
                            res->us.superseded, res->us.identical,
                            res->us.rejected, res->us.out, res->us.recovered,
                            res->us.inflight,
                            res->us.seen ? "" : " (no STATS line)", in,
                            r->n_src, r->n_rem, r->n_src, err);
                        goto out;
                }
                if (bench_watermarks(r->east_rk, t.dst, o->partitions, false,
                                     NULL, &sum, errstr, sizeof(errstr))) {
                        errorf("%s: %s", tag, errstr);
                        goto out;
                }
                if (sum != want) {
                        errorf("%s: after the stop %s holds %" PRId64
                               " records, expected %" PRId64,
                               tag, t.dst, sum, want);
                        goto out;
                }
                if (retention_check(r, t.dst, errstr, sizeof(errstr)) ||
                    readback(r, &t, &res->rb, errstr, sizeof(errstr))) {
                        errorf("%s: %s", tag, errstr);
                        goto out;
                }
                if (res->rb.records != want || res->rb.distinct != want ||
                    res->rb.bad_key || res->rb.bad_value || res->rb.repeated) {
                        errorf("%s: %s is wrong: %" PRId64 " records, %" PRId64
                               " distinct ids of %" PRId64 ", %" PRId64
                               " ids seen more than once, %" PRId64
                               " bad keys, %" PRId64 " bad values",
                               tag, t.dst, res->rb.records, res->rb.distinct,
                               want, res->rb.repeated, res->rb.bad_key,
                               res->rb.bad_value);
                        goto out;
                }
        } else if (counts_check(r, t.dst, r->exp_src, r->exp_rem, "target",
                                errstr, sizeof(errstr)) ||
                   retention_check(r, t.dst, errstr, sizeof(errstr))) {
                errorf("%s: %s", tag, errstr);
                goto out;
        }

        {
                double window = s2.t - s1.t;
                /* Input records the window stands for: the first sighting
                 * of 'first_cnt' outputs stands for first_cnt * in / want
                 * inputs (exact for the bare pipes, in proportion for a). */
                double in_win =
                    (double)in * (1.0 - (double)res->first_cnt / (double)want);

                res->startup_s   = s1.t - t0;
                res->wall_s      = s2.t - t0;
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
                        /* The noise gauge: machine CPU in the window that
                         * neither the measured program, the sandbox nor
                         * this program used, in cores. */
                        res->others_cores =
                            ((s2.busy - s1.busy) - (s2.child - s1.child) -
                             (s2.mock - s1.mock) - (s2.self - s1.self)) /
                            window;
                } else { /* too short for two polls: whole life */
                        res->steady_in_rps    = res->wall_in_rps;
                        res->steady_out_rps   = (double)want / res->wall_s;
                        res->cpu_steady_per_m = s2.child * 1e6 / (double)in;
                        res->mock_cpu_per_m =
                            (s2.mock - s0.mock) * 1e6 / (double)in;
                        res->others_cores =
                            ((s2.busy - s0.busy) - s2.child -
                             (s2.mock - s0.mock) - (s2.self - s0.self)) /
                            res->wall_s;
                }
                if (res->others_cores < 0)
                        res->others_cores = 0; /* tick rounding */
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
               r->run + 1, meas_info[m].letter, meas_info[m].name, o->records,
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
                       r->run + 1, res->us.in, res->us.accepted,
                       res->us.dropped, res->us.superseded, res->us.identical,
                       res->us.rejected, res->us.out, res->us.recovered,
                       res->rb.records, res->rb.distinct, res->rb.from_remote);
        fflush(stdout);
        rc = 0;
out:
        harness_proc_destroy(p);
        if (trace)
                fclose(trace);
        if (statedir && !o->keep)
                harness_rmtree(statedir); /* --keep: its RocksDB LOG */
        free(out);
        free(err);
        free(statedir);
        free(trace_path);
        free(threads_path);
        return rc;
}

/* ------------------------------------------------------------ REPORT --- */

static double ratio(const struct result *res, enum meas x, enum meas y) {
        if (!res[x].valid || !res[y].valid)
                return NAN;
        return res[x].steady_in_rps / res[y].steady_in_rps;
}

static double cpu_ratio(const struct result *res, enum meas x, enum meas y) {
        if (!res[x].valid || !res[y].valid)
                return NAN;
        return res[x].cpu_steady_per_m / res[y].cpu_steady_per_m;
}

static void print_round(const struct round *r) {
        const struct result *res = r->res;

        printf("\nrun %d of %d: %zu ids in T + %" PRId64
               " duplicates in west.T = %" PRId64 " inputs x %zu B, %d "
               "partitions\n",
               r->run + 1, r->o->runs, r->o->records, r->n_rem,
               r->n_src + r->n_rem, r->o->value_size, r->o->partitions);
        printf("  %-28s %11s %11s %10s %7s %7s %8s %8s %8s %6s\n",
               "measurement", "in rec/s", "out rec/s", "wall in/s", "start s",
               "steady s", "CPU/1M", "life/1M", "mock/1M", "others");
        for (int m = 0; m < M_CNT; m++) {
                char label[48];

                if (!(r->o->only & (1u << m)))
                        continue;
                snprintf(label, sizeof(label), "%c %s", meas_info[m].letter,
                         meas_info[m].label);
                if (!res[m].valid) {
                        printf("  %-28s %11s\n", label, "FAILED");
                        continue;
                }
                printf("  %-28s %11.0f %11.0f %10.0f %7.2f %7.2f %8.2f %8.2f "
                       "%8.2f %6.2f\n",
                       label, res[m].steady_in_rps, res[m].steady_out_rps,
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
        printf("  ratios (steady input rate): a/b %.2f  a/c %.2f   CPU a/b "
               "%.2f  CPU a/c %.2f\n",
               ratio(res, M_UNIFY, M_BARE), ratio(res, M_UNIFY, M_BARE_Q),
               cpu_ratio(res, M_UNIFY, M_BARE),
               cpu_ratio(res, M_UNIFY, M_BARE_Q));
        printf("BENCH_RATIOS run=%d a_b=%.3f a_c=%.3f cpu_a_b=%.3f "
               "cpu_a_c=%.3f\n",
               r->run + 1, ratio(res, M_UNIFY, M_BARE),
               ratio(res, M_UNIFY, M_BARE_Q), cpu_ratio(res, M_UNIFY, M_BARE),
               cpu_ratio(res, M_UNIFY, M_BARE_Q));
        fflush(stdout);
}

static void print_summary(const struct opts *o, struct result (*res)[M_CNT]) {
        double *v = calloc((unsigned)o->runs, sizeof(*v));

        if (!v)
                return;
        printf("\nsummary over %d run%s (min .. max; ratios are per run, "
               "against baselines of the same run)\n",
               o->runs, o->runs == 1 ? "" : "s");
        for (int m = 0; m < M_CNT; m++) {
                char label[64];

                if (!(o->only & (1u << m)))
                        continue;
                for (int k = 0; k < o->runs; k++)
                        v[k] = res[k][m].valid ? res[k][m].steady_in_rps : NAN;
                snprintf(label, sizeof(label), "%c steady in rec/s",
                         meas_info[m].letter);
                bench_print_range(label, v, o->runs, 0);
                for (int k = 0; k < o->runs; k++)
                        v[k] =
                            res[k][m].valid ? res[k][m].cpu_steady_per_m : NAN;
                snprintf(label, sizeof(label), "%c CPU s/1M (steady)",
                         meas_info[m].letter);
                bench_print_range(label, v, o->runs, 2);
                for (int k = 0; k < o->runs; k++)
                        v[k] = res[k][m].valid ? res[k][m].others_cores : NAN;
                snprintf(label, sizeof(label), "%c others (cores)",
                         meas_info[m].letter);
                bench_print_range(label, v, o->runs, 2);
        }
        printf("targets:\n");
        for (int k = 0; k < o->runs; k++)
                v[k] = ratio(res[k], M_UNIFY, M_BARE);
        bench_print_target("a/b", v, o->runs, TARGET_A_B, true);
        for (int k = 0; k < o->runs; k++)
                v[k] = ratio(res[k], M_UNIFY, M_BARE_Q);
        bench_print_target("(a/c)", v, o->runs, TARGET_A_B, true);
        for (int k = 0; k < o->runs; k++)
                v[k] = cpu_ratio(res[k], M_UNIFY, M_BARE);
        bench_print_range("(CPU a/b, no target)", v, o->runs, 2);
        for (int k = 0; k < o->runs; k++)
                v[k] = cpu_ratio(res[k], M_UNIFY, M_BARE_Q);
        bench_print_range("(CPU a/c, no target)", v, o->runs, 2);
        free(v);
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
            "  -m, --only LETTERS    measure only these of abc (default "
            "abc)\n"
            "  -p, --partitions P    partitions per topic (default 64)\n"
            "  -b, --brokers B       brokers per cluster (default 3)\n"
            "  -s, --value-size S    value bytes (default 200)\n"
            "      --poll-ms MS      target polling interval (default "
            "20)\n"
            "      --aagw-prefix CMD run aagw under CMD (words split on "
            "spaces), e.g.\n"
            "                        'perf record -g -o /tmp/aagw.data "
            "--'; its CPU\n"
            "                        figures then include CMD's\n"
            "      --aagw-arg ARG    append ARG to aagw's command line "
            "(repeat), e.g.\n"
            "                        --aagw-arg=--set --aagw-arg=KEY=VALUE\n"
            "      --bare-prop consumer.K=V|producer.K=V\n"
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

static int parse_opts(int argc, char **argv, struct opts *o) {
        static const struct option longopts[] = {
            {"records", required_argument, NULL, 'n'},
            {"dup-percent", required_argument, NULL, 'd'},
            {"id", required_argument, NULL, 'i'},
            {"runs", required_argument, NULL, 'r'},
            {"only", required_argument, NULL, 'm'},
            {"partitions", required_argument, NULL, 'p'},
            {"brokers", required_argument, NULL, 'b'},
            {"value-size", required_argument, NULL, 's'},
            {"poll-ms", required_argument, NULL, 'P'},
            {"aagw-prefix", required_argument, NULL, 'A'},
            {"aagw-arg", required_argument, NULL, 'X'},
            {"bare-prop", required_argument, NULL, 'Y'},
            {"keep", no_argument, NULL, 'k'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
        };
        size_t v;
        int    opt;

        *o     = (struct opts){.records    = 1000000,
                               .dup_pct    = 10,
                               .id         = ID_KEY,
                               .runs       = 1,
                               .partitions = 64,
                               .brokers    = 3,
                               .value_size = 200,
                               .poll_ms    = 20,
                               .only       = (1u << M_CNT) - 1};
        opterr = 0;
        while ((opt = getopt_long(argc, argv, ":n:d:i:r:m:p:b:s:kh", longopts,
                                  NULL)) != -1) {
                switch (opt) {
                case 'n':
                        if (!bench_parse_size(optarg, 1, 100000000,
                                              &o->records))
                                goto bad;
                        break;
                case 'd':
                        if (!bench_parse_size(optarg, 0, 100, &v))
                                goto bad;
                        o->dup_pct = (unsigned)v;
                        break;
                case 'i':
                        if (!strcmp(optarg, "key"))
                                o->id = ID_KEY;
                        else if (!strcmp(optarg, "json"))
                                o->id = ID_JSON;
                        else
                                goto bad;
                        break;
                case 'r':
                        if (!bench_parse_size(optarg, 1, 100, &v))
                                goto bad;
                        o->runs = (int)v;
                        break;
                case 'p':
                        if (!bench_parse_size(optarg, 1, 10000, &v))
                                goto bad;
                        o->partitions = (int)v;
                        break;
                case 'b':
                        if (!bench_parse_size(optarg, 1, 16, &v))
                                goto bad;
                        o->brokers = (int)v;
                        break;
                case 's':
                        if (!bench_parse_size(optarg, 48, 100000,
                                              &o->value_size))
                                goto bad;
                        break;
                case 'P':
                        if (!bench_parse_size(optarg, 1, 1000, &v))
                                goto bad;
                        o->poll_ms = (int)v;
                        break;
                case 'm':
                        o->only = 0;
                        for (const char *c = optarg; *c; c++) {
                                if (*c < 'a' || *c >= 'a' + M_CNT)
                                        goto bad;
                                o->only |= 1u << (*c - 'a');
                        }
                        if (!o->only)
                                goto bad;
                        break;
                case 'A':
                        o->aagw_prefix = bench_split_words(optarg);
                        if (!o->aagw_prefix)
                                goto bad;
                        break;
                case 'X':
                        if (o->aagw_argc == 32)
                                goto bad;
                        o->aagw_args[o->aagw_argc++] = optarg;
                        break;
                case 'Y':
                        if (o->bare_propc == 32 || !strchr(optarg, '=') ||
                            (strncmp(optarg, "consumer.", 9) &&
                             strncmp(optarg, "producer.", 9)))
                                goto bad;
                        o->bare_props[o->bare_propc++] = optarg;
                        break;
                case 'k':
                        o->keep = true;
                        break;
                case 'h':
                        usage(stdout);
                        return OPTS_HELP;
                case ':':
                        fprintf(stderr,
                                "bench_unify: option '%s' requires an "
                                "argument\n",
                                argv[optind - 1]);
                        usage(stderr);
                        return EXIT_USAGE;
                default:
                        fprintf(stderr, "bench_unify: unknown option '%s'\n",
                                argv[optind - 1]);
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "bench_unify: unexpected argument '%s'\n",
                        argv[optind]);
                usage(stderr);
                return EXIT_USAGE;
        }
        return EXIT_OK;
bad:
        fprintf(stderr, "bench_unify: invalid value '%s' for '%s'\n", optarg,
                argv[optind - 1]);
        usage(stderr);
        return EXIT_USAGE;
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
                errorf("policy: %s", errstr);
                return -1;
        }
        r->id_rule = aagw_id_rule_new(r->o->id == ID_JSON ? "json:id" : "key",
                                      errstr, sizeof(errstr));
        if (!r->id_rule) {
                errorf("id rule: %s", errstr);
                return -1;
        }
        return 0;
}

static int run_round(struct round *r, const struct opts *o) {
        int failed = 0;

        memset(r->res, 0, sizeof(r->res)); /* nothing valid yet */
        if (sandbox_start(r)) {
                sandbox_stop(r);
                return -1;
        }
        /* Expected records per partition of T and west.T: what the
         * partitioner gives each key, the same in every measurement.
         * (The partitioner wants a topic handle; an existing topic keeps
         * the mock from auto-creating one.) */
        {
                char              key[32];
                struct names      t;
                rd_kafka_topic_t *rkt;

                topic_names(r->run, M_UNIFY, &t);
                rkt = rd_kafka_topic_new(r->east_rk, t.src, NULL);
                memset(r->exp_src, 0,
                       sizeof(*r->exp_src) * (size_t)o->partitions);
                memset(r->exp_rem, 0,
                       sizeof(*r->exp_rem) * (size_t)o->partitions);
                r->n_src = r->n_rem = 0;
                for (size_t i = 0; i < o->records; i++) {
                        size_t  kl = rec_key(i, key, sizeof(key));
                        int32_t p  = rec_partition(rkt, key, kl, o->partitions);

                        r->exp_src[p]++;
                        r->n_src++;
                        if (rec_dup(o, i)) {
                                r->exp_rem[p]++;
                                r->n_rem++;
                        }
                }
                rd_kafka_topic_destroy(rkt);
        }
        /* Rotate the order from round to round so that no measurement
         * always runs first (cold) or last (after the most load). */
        printf("\nrun %d: order", r->run + 1);
        for (int i = 0; i < M_CNT; i++) {
                enum meas m = (enum meas)((i + r->run) % M_CNT);
                if (o->only & (1u << m))
                        printf(" %c", meas_info[m].letter);
        }
        printf("; sandbox east=%s west=%s\n", r->east, r->west);
        fflush(stdout);
        for (int i = 0; i < M_CNT; i++) {
                enum meas m = (enum meas)((i + r->run) % M_CNT);
                if ((o->only & (1u << m)) && measure(r, m))
                        failed++;
        }
        sandbox_stop(r);
        print_round(r);
        return failed ? -1 : 0;
}

int main(int argc, char **argv) {
        struct opts  o;
        struct round r;
        struct result(*all)[M_CNT] = NULL;
        char          *dir         = NULL;
        char           self[PATH_MAX];
        ssize_t        sl;
        struct utsname un;
        time_t         now = time(NULL);
        char           date[64];
        int            rc, failed = 0;

        if (argc > 1 && !strcmp(argv[1], "--bare"))
                return bench_bare_main("bench_unify", argc - 1, argv + 1);

        rc = parse_opts(argc, argv, &o);
        if (rc == OPTS_HELP)
                return EXIT_OK;
        if (rc != EXIT_OK)
                return rc;
        if (!getenv("AAGW_BIN") || !*getenv("AAGW_BIN"))
                setenv("AAGW_BIN", BENCH_AAGW_BIN, 1);
        sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (sl <= 0) {
                errorf("/proc/self/exe: %s", strerror(errno));
                return EXIT_RUNTIME;
        }
        self[sl] = '\0';
        signal(SIGPIPE, SIG_IGN);

        memset(&r, 0, sizeof(r));
        r.o = &o;
        if (policy_init(&r)) {
                rc = EXIT_RUNTIME;
                goto out;
        }
        dir       = harness_tmpdir_new("bench-unify");
        all       = calloc((size_t)o.runs, sizeof(*all));
        r.exp_src = calloc((size_t)o.partitions, sizeof(*r.exp_src));
        r.exp_rem = calloc((size_t)o.partitions, sizeof(*r.exp_rem));
        r.scratch = calloc((size_t)o.partitions, sizeof(*r.scratch));
        if (!dir || !all || !r.exp_src || !r.exp_rem || !r.scratch) {
                errorf("cannot create a temporary directory: %s",
                       strerror(errno));
                rc = EXIT_RUNTIME;
                goto out;
        }
        uname(&un);
        strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %Z", localtime(&now));
        printf("bench_unify: %s, %s %s, %ld CPUs online, librdkafka %s\n", date,
               un.sysname, un.release, sysconf(_SC_NPROCESSORS_ONLN),
               rd_kafka_version_str());
        printf("%zu ids x %zu B values, id from the %s, %u%% again in "
               "west.T; %d partitions, %d brokers per cluster, %d run%s; "
               "aagw %s; logs in %s\n",
               o.records, o.value_size,
               o.id == ID_JSON ? "JSON field \"id\"" : "key", o.dup_pct,
               o.partitions, o.brokers, o.runs, o.runs == 1 ? "" : "s",
               harness_aagw_bin(), dir);
        fflush(stdout);

        r.self = self;
        for (int k = 0; k < o.runs; k++) {
                char name[32];

                r.run = k;
                snprintf(name, sizeof(name), "run%d", k + 1);
                free(r.dir);
                r.dir = harness_path_join(dir, name);
                if (!r.dir || mkdir(r.dir, 0755) == -1) {
                        errorf("%s: %s", r.dir ? r.dir : name, strerror(errno));
                        rc = EXIT_RUNTIME;
                        goto out;
                }
                if (run_round(&r, &o))
                        failed++;
                memcpy(all[k], r.res, sizeof(r.res));
        }
        print_summary(&o, all);
        rc = failed ? EXIT_RUNTIME : EXIT_OK;
        if (failed)
                printf("\n%d run%s had invalid measurements; logs kept in "
                       "%s\n",
                       failed, failed == 1 ? "" : "s", dir);
out:
        if (dir && rc == EXIT_OK && !o.keep)
                harness_rmtree(dir);
        else if (dir && rc == EXIT_OK)
                printf("logs kept in %s\n", dir);
        aagw_repl_policy_destroy(r.pol);
        aagw_id_rule_destroy(r.id_rule);
        free(r.dir);
        free(r.exp_src);
        free(r.exp_rem);
        free(r.scratch);
        free(all);
        free(dir);
        return rc;
}
