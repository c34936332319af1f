/*
 * tests/bench/bench_latency.c: replication latency at a steady rate.
 *
 * A producer writes R records/s (default 1,000 and 10,000) of 200-byte
 * values to a 16-partition topic at east, each value starting with its
 * send time (monotonic ns) and its index; a reader at the target records
 * when each arrives.  For each path it reports p50 / p99 / max of
 * send -> read, and the latency a replicator adds: its percentile minus
 * the floor's from the same run.
 *
 *   f  floor         the reader at east reads the source topic: the same
 *                    produce -> consume with no replicator
 *   a  aagw          `aagw run`, active-passive east -> west (prefix copy)
 *   b  bare pipe     this program's --bare loop (bench_util.c) with fetch
 *                    wait 5 ms and linger 0: the least a pipe must wait
 *   m  MirrorMaker 2 dedicated mode, east -> west (real Kafka only)
 *
 * Backends: two real clusters when AAGW_TEST_BOOTSTRAPS_EAST and _WEST
 * are set (scripts/kafka-clusters east west -- ...), else an `aagw
 * sandbox` (librdkafka's mock cluster) started by this program.
 *
 * Method: the replicator starts first; the producer starts at once, at
 * 100 records/s until the reader saw the first record (so that a slow
 * start, such as a group join, leaves no backlog), then at the rate; the
 * measured window opens --warmup seconds later and lasts --seconds.  Only
 * records sent in the window count; every one of them must arrive (else the
 * measurement is FAILED).  The replicator's CPU (/proc) is taken over the
 * window, its peak RSS (VmHWM) at the end.  docs/benchmarks.md has the results.
 *
 * With --wan (real Kafka under scripts/kafka-clusters --wan-delay MS)
 * every replicator reaches east over its WAN listener, behind the delay
 * proxy, and west directly: replicators at the target site, as MM2's
 * documentation advises.  The producer stays at east and the reader at
 * west (the floor reads east locally), so the latency a replicator adds
 * includes the WAN's share: at least half the round trip, the way from
 * east's broker to the replicator.
 *
 * With --new-topics N (f and a only) N new topics of 4 partitions appear
 * at east halfway through the window, one record each (created through
 * the Admin API on real Kafka, by that record's produce on the mock,
 * which makes 4 partitions), while the rate goes
 * on: aagw's topic filter takes them, so its flow discovers them, has
 * their copies made and starts copying them.  The window's records are
 * then split at the moment the topics were created: "steady" before it,
 * "during" from it until the record of every new topic could be read at
 * the target (for the floor: at east), and each stretch gets its own
 * p99; the ratio during/steady says what picking up new topics costs
 * the topic already copied.  The window goes on (up to 60 s more) until
 * every new topic was picked up.  The load average is printed with each
 * measurement: a stretch's p99 on a shared machine moves with it.
 *
 * Exit status: 0 every measurement valid, 1 one was not, 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "bench_util.h"
#include "harness.h"

#ifndef BENCH_AAGW_BIN
#define BENCH_AAGW_BIN "aagw"
#endif

#define PROG "bench_latency"
#define MAX_RATES 8
#define START_TIMEOUT_S 120.0 /* replicator up, first record read */
#define DRAIN_TIMEOUT_S 30.0  /* after the last send: all read */
#define WARMUP_RATE 100.0     /* records/s until the first is read */
#define NEW_TOPICS_MAX 100
#define PICKUP_MAX_S 60.0 /* --new-topics: the window's extension, at most */
/* --new-topics: the partitions of each (the mock's auto-creation makes
 * as many) */
#define NEW_TOPIC_PARTITIONS 4

enum meas { M_FLOOR, M_AAGW, M_BARE, M_MM2, M_CNT };
static const char letters[M_CNT + 1] = "fabm";
static const char *const names[M_CNT] = {"floor", "aagw", "bare_pipe",
                                         "mm2"};

struct opts {
        int         rates[MAX_RATES];
        int         nrates;
        double      seconds, warmup;
        int         runs, partitions, brokers, mm2_tasks;
        int         new_topics; /* --new-topics: created halfway */
        size_t      value_size;
        unsigned    only;
        bool        keep, real, wan;
        const char *aagw_args[BENCH_LIST_MAX];
        int         aagw_argc;
        const char *bare_props[BENCH_LIST_MAX];
        int         bare_propc;
};

struct lat_res {
        bool   valid;
        double p50, p99, max, mean; /* ms */
        long   n;
        double cpu_per_s; /* replicator CPU s per wall s in the window */
        double hwm_mib;
        /* --new-topics: p99 before the topics were created and while
         * they were picked up, how long that took, the load average */
        double p99_steady, p99_during, pickup_s, load1;
        long   n_steady, n_during;
};

/* One measurement in progress: shared by the producer, the reader and
 * main. */
struct meas_ctx {
        const struct opts *o;
        int                rate;
        const char        *src_bs, *src_topic, *dst_bs, *dst_topic;
        size_t             cap;     /* records the arrays hold */
        double            *lat_ms;  /* per index: NAN until read */
        double            *sent_s;  /* per index: when it was sent */
        _Atomic long       dups, bad;
        _Atomic double     t_first; /* reader's first record, 0 before */
        _Atomic long       i_lo, i_hi; /* measured window, -1 unknown */
        _Atomic long       sent;
        _Atomic bool       stop_prod, stop_read, prod_done;
        char               err[512];
        /* --new-topics: where to create them and where to look for
         * their records (the target's copies; east for the floor) */
        const char *check_bs;
        char (*new_src)[64], (*new_dst)[64];
        _Atomic double t_open;      /* the window's start, 0 before */
        _Atomic double t_create;    /* creation began, 0 before */
        _Atomic double t_picked;    /* the last one was read, 0 before */
        rd_kafka_t    *admin;       /* real Kafka: creates them */
        _Atomic bool   nt_done;     /* the creator ended */
        char           nt_err[512]; /* why it failed, read once done */
};

static double now_s(void) { return bench_now_s(); }

static int64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ------------------------------------------------------------ PRODUCER -- */

static void *producer_main(void *arg) {
        struct meas_ctx  *c = arg;
        const char *const props[] = {"enable.idempotence", "true",
                                     "acks", "all",
                                     "linger.ms", "0",
                                     NULL};
        char              errstr[512], key[32];
        char             *val = malloc(c->o->value_size + 1);
        rd_kafka_t       *rk;
        double            t0, t_open = 0, t_end = 0;
        long              i;

        rk = bench_client_new(RD_KAFKA_PRODUCER, c->src_bs, props, errstr,
                              sizeof(errstr));
        if (!rk || !val) {
                snprintf(c->err, sizeof(c->err), "producer: %.400s",
                         rk ? "out of memory" : errstr);
                free(val);
                atomic_store(&c->prod_done, true);
                return NULL;
        }
        memset(val, 'x', c->o->value_size);
        val[c->o->value_size] = '\0';
        /* Until the first record arrives, WARMUP_RATE records/s: a
         * replicator that starts slowly (a group join) must not begin
         * the measurement with a backlog.  Then the rate. */
        t0 = now_s();
        double t_rate = 0; /* when the rate began */
        long   i_rate = 0;
        for (i = 0; (size_t)i < c->cap && !atomic_load(&c->stop_prod); i++) {
                double          due;
                struct timespec ts;
                double          tf = atomic_load(&c->t_first);

                if (!t_open && tf > 0) {
                        t_rate = now_s();
                        i_rate = i;
                        t_open = t_rate + c->o->warmup;
                        t_end  = t_open + c->o->seconds;
                        atomic_store(&c->t_open, t_open);
                }
                due = t_open ? t_rate + (double)(i - i_rate) / c->rate
                             : t0 + (double)i / WARMUP_RATE;
                /* With new topics, on until every one was picked up (or
                 * the creator gave up): the stretch "during" must end
                 * inside the window. */
                if (t_open && due >= t_end &&
                    (!c->new_src || atomic_load(&c->nt_done) ||
                     due >= t_end + PICKUP_MAX_S))
                        break;
                if (!t_open && due - t0 > START_TIMEOUT_S) {
                        snprintf(c->err, sizeof(c->err),
                                 "no record at the target after %.0f s",
                                 START_TIMEOUT_S);
                        break;
                }
                if (t_open && due >= t_open && atomic_load(&c->i_lo) < 0)
                        atomic_store(&c->i_lo, i);
                ts.tv_sec  = (time_t)due;
                ts.tv_nsec = (long)((due - (double)ts.tv_sec) * 1e9);
                while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts,
                                       NULL) == EINTR)
                        ;
                /* The send time, the index, then padding. */
                c->sent_s[i] = now_s();
                int hl = snprintf(val, c->o->value_size + 1,
                                  "%020" PRId64 " %010ld ", now_ns(), i);
                if ((size_t)hl < c->o->value_size)
                        val[hl] = 'x';
                size_t kl = bench_rec_key((size_t)i, key, sizeof(key));
                for (;;) {
                        rd_kafka_resp_err_t e = rd_kafka_producev(
                            rk, RD_KAFKA_V_TOPIC(c->src_topic),
                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                            RD_KAFKA_V_KEY(key, kl),
                            RD_KAFKA_V_VALUE(val, c->o->value_size),
                            RD_KAFKA_V_END);
                        if (!e)
                                break;
                        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                                snprintf(c->err, sizeof(c->err),
                                         "produce: %s", rd_kafka_err2str(e));
                                goto out;
                        }
                        rd_kafka_poll(rk, 1);
                }
                rd_kafka_poll(rk, 0);
                atomic_store(&c->sent, i + 1);
        }
out:
        atomic_store(&c->i_hi, i);
        rd_kafka_flush(rk, 30000);
        rd_kafka_destroy(rk);
        free(val);
        atomic_store(&c->prod_done, true);
        return NULL;
}

/* -------------------------------------------------------------- READER -- */

static void *reader_main(void *arg) {
        struct meas_ctx  *c = arg;
        const char *const props[] = {"group.id", "bench-latency",
                                     "enable.auto.commit", "false",
                                     "enable.partition.eof", "false",
                                     "auto.offset.reset", "earliest",
                                     "fetch.wait.max.ms", "5",
                                     NULL};
        char              errstr[512];
        rd_kafka_t       *rk = bench_client_new(RD_KAFKA_CONSUMER, c->dst_bs,
                                                props, errstr, sizeof(errstr));
        rd_kafka_topic_partition_list_t *asg;

        if (!rk) {
                snprintf(c->err, sizeof(c->err), "reader: %.400s", errstr);
                return NULL;
        }
        rd_kafka_poll_set_consumer(rk);
        asg = rd_kafka_topic_partition_list_new(c->o->partitions);
        for (int p = 0; p < c->o->partitions; p++)
                rd_kafka_topic_partition_list_add(asg, c->dst_topic, p)
                    ->offset = RD_KAFKA_OFFSET_BEGINNING;
        rd_kafka_assign(rk, asg);
        rd_kafka_topic_partition_list_destroy(asg);
        while (!atomic_load(&c->stop_read)) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 50);
                int64_t             t = now_ns(), sent;
                long                idx;

                if (!m)
                        continue;
                if (!m->err && m->len >= 32 &&
                    sscanf((const char *)m->payload, "%" SCNd64 " %ld", &sent,
                           &idx) == 2 &&
                    idx >= 0 && (size_t)idx < c->cap) {
                        if (atomic_load(&c->t_first) == 0)
                                atomic_store(&c->t_first, now_s());
                        if (!isnan(c->lat_ms[idx]))
                                atomic_fetch_add(&c->dups, 1);
                        else
                                c->lat_ms[idx] = (double)(t - sent) / 1e6;
                } else if (!m->err) {
                        atomic_fetch_add(&c->bad, 1);
                }
                rd_kafka_message_destroy(m);
        }
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
        return NULL;
}

/* ---------------------------------------------------------- NEW TOPICS -- */

/* --new-topics: halfway through the window, create the new topics at
 * east with one record each, then watch for each record at the target
 * (a consumer's watermark query: it never auto-creates what it asks
 * about) and note when the last one came. */
static void *creator_main(void *arg) {
        struct meas_ctx  *c        = arg;
        const char *const pprops[] = {"linger.ms", "0", NULL};
        const char *const cprops[] = {"group.id", "bench-latency-check", NULL};
        char              errstr[512];
        rd_kafka_t       *prod = NULL, *chk = NULL;
        bool              seen[NEW_TOPICS_MAX] = {false};
        int               left                 = c->o->new_topics;
        double            t_due;

        while (!atomic_load(&c->stop_prod) &&
               (atomic_load(&c->t_open) == 0 ||
                now_s() < atomic_load(&c->t_open) + c->o->seconds / 2))
                bench_nap_ms(10);
        if (atomic_load(&c->stop_prod))
                goto out;
        prod = bench_client_new(RD_KAFKA_PRODUCER, c->src_bs, pprops, errstr,
                                sizeof(errstr));
        chk  = prod ? bench_client_new(RD_KAFKA_CONSUMER, c->check_bs, cprops,
                                       errstr, sizeof(errstr))
                    : NULL;
        if (!chk) {
                snprintf(c->nt_err, sizeof(c->nt_err), "new topics: %.400s",
                         errstr);
                goto out;
        }
        atomic_store(&c->t_create, now_s());
        for (int k = 0; k < c->o->new_topics; k++) {
                static const char v[] = "new topic";
                if (c->admin && bench_topic_create(c->admin, c->new_src[k],
                                                   NEW_TOPIC_PARTITIONS, errstr,
                                                   sizeof(errstr))) {
                        snprintf(c->nt_err, sizeof(c->nt_err),
                                 "new topics: %.400s", errstr);
                        goto out;
                }
                rd_kafka_resp_err_t e = rd_kafka_producev(
                    prod, RD_KAFKA_V_TOPIC(c->new_src[k]),
                    RD_KAFKA_V_PARTITION(0),
                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                    RD_KAFKA_V_VALUE((void *)v, sizeof(v) - 1), RD_KAFKA_V_END);
                if (e) {
                        snprintf(c->nt_err, sizeof(c->nt_err),
                                 "new topics: produce to %s: %s", c->new_src[k],
                                 rd_kafka_err2str(e));
                        goto out;
                }
        }
        if (rd_kafka_flush(prod, 30000)) {
                snprintf(c->nt_err, sizeof(c->nt_err),
                         "new topics: records not acknowledged in 30 s");
                goto out;
        }
        t_due = now_s() + c->o->seconds + PICKUP_MAX_S;
        while (left > 0 && !atomic_load(&c->stop_prod) && now_s() < t_due) {
                /* Only topics the cluster lists are asked for their
                 * watermarks: librdkafka remembers a topic it was told
                 * is unknown, and a query of it kept failing after the
                 * topic had been created. */
                const struct rd_kafka_metadata *md = NULL;
                if (rd_kafka_metadata(chk, 1, NULL, &md, 2000))
                        md = NULL;
                for (int k = 0; md && k < c->o->new_topics; k++) {
                        int64_t lo, hi;
                        bool    listed = false;
                        for (int i = 0; i < md->topic_cnt && !listed; i++)
                                listed =
                                    !md->topics[i].err &&
                                    !strcmp(md->topics[i].topic, c->new_dst[k]);
                        if (seen[k] || !listed ||
                            rd_kafka_query_watermark_offsets(
                                chk, c->new_dst[k], 0, &lo, &hi, 1000) ||
                            hi < 1)
                                continue;
                        seen[k] = true;
                        left--;
                }
                if (md)
                        rd_kafka_metadata_destroy(md);
                if (left > 0)
                        bench_nap_ms(50);
        }
        if (left > 0)
                snprintf(c->nt_err, sizeof(c->nt_err),
                         "new topics: %d of %d not at the target after "
                         "%.0f s",
                         left, c->o->new_topics,
                         now_s() - atomic_load(&c->t_create));
        else
                atomic_store(&c->t_picked, now_s());
out:
        if (chk) {
                rd_kafka_consumer_close(chk);
                rd_kafka_destroy(chk);
        }
        if (prod)
                rd_kafka_destroy(prod);
        atomic_store(&c->nt_done, true);
        return NULL;
}

/* ------------------------------------------------------------- MEASURE -- */

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static double pct(const double *v, long n, double q) {
        long k = (long)ceil(q * (double)n) - 1;
        return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* The p99 of the records of [lo, hi) sent in [from, to); NAN if none. */
static double p99_sent(const struct meas_ctx *c, long lo, long hi, double from,
                       double to, long *n) {
        double *v = malloc((size_t)(hi - lo) * sizeof(*v)), r = NAN;
        long    k = 0;

        for (long i = lo; v && i < hi; i++)
                if (c->sent_s[i] >= from && c->sent_s[i] < to)
                        v[k++] = c->lat_ms[i];
        if (k) {
                qsort(v, (size_t)k, sizeof(*v), cmp_double);
                r = pct(v, k, 0.99);
        }
        *n = k;
        free(v);
        return r;
}

struct env {
        const struct opts *o;
        const char        *east, *west;
        const char        *src;    /* east as the replicators reach it */
        const char        *wan_ms; /* the WAN's round trip, or NULL */
        rd_kafka_t        *east_rk, *west_rk;
        const char        *self, *dir;
        char               log4j[PATH_MAX];
};

static void topic_names(int run, int rate, enum meas m, char *src, char *dst,
                        size_t size) {
        snprintf(src, size, "lat-r%d-%d-%c", run + 1, rate, letters[m]);
        switch (m) {
        case M_FLOOR:
                snprintf(dst, size, "%s", src);
                break;
        case M_BARE:
                snprintf(dst, size, "%.40s.copy", src);
                break;
        case M_MM2:
                /* A fresh MM2 alias per measurement: fresh MM2 state. */
                snprintf(dst, size, "mm%dx%d.%.40s", run + 1, rate, src);
                break;
        default:
                snprintf(dst, size, "east.%.40s", src);
                break;
        }
}

/* Measurement 'm' at 'rate': @returns 0, or -1 (reason printed). */
static int measure(const struct env *e, int run, int rate, enum meas m,
                   struct lat_res *res) {
        const struct opts *o = e->o;
        char               src[64], dst[64], errstr[512], buf[8192];
        char               tag[64], *out = NULL, *err = NULL, *statedir = NULL;
        char              *mm2conf = NULL;
        const char        *argv[BENCH_ARGV_MAX];
        size_t             a = 0, off = 0;
        harness_proc_t    *proc = NULL;
        struct meas_ctx    c;
        pthread_t          pt, rt, ct;
        bool               prod_started = false, read_started = false;
        bool               creat_started = false;
        bool with_new      = o->new_topics && (m == M_FLOOR || m == M_AAGW);
        char(*new_src)[64] = NULL, (*new_dst)[64] = NULL;
        double             cpu0 = NAN, cpu1 = NAN, tw0 = 0, tw1 = 0;
        int                rc = -1;

        memset(res, 0, sizeof(*res));
        memset(&c, 0, sizeof(c));
        topic_names(run, rate, m, src, dst, sizeof(src));
        snprintf(tag, sizeof(tag), "run%d-%d-%c", run + 1, rate, letters[m]);
        out      = harness_path_join(e->dir, tag);
        snprintf(buf, sizeof(buf), "%s.err", tag);
        err      = harness_path_join(e->dir, buf);
        snprintf(buf, sizeof(buf), "%s.state", tag);
        statedir = harness_path_join(e->dir, buf);
        snprintf(buf, sizeof(buf), "%s.mm2.properties", tag);
        mm2conf  = harness_path_join(e->dir, buf);
        if (o->real &&
            (bench_topic_create(e->east_rk, src, o->partitions, errstr,
                                sizeof(errstr)) ||
             (m != M_FLOOR && bench_topic_create(e->west_rk, dst,
                                                 o->partitions, errstr,
                                                 sizeof(errstr))))) {
                bench_errorf("%s: %s", tag, errstr);
                goto out;
        }

        switch (m) {
        case M_AAGW:
                for (size_t i = 0; i < 1; i++) {
                        argv[a++] = harness_aagw_bin();
                        argv[a++] = "--cluster";
                        argv[a++] = bench_buf_printf(buf, sizeof(buf), &off,
                                                     "east=%s", e->src);
                        argv[a++] = "--cluster";
                        argv[a++] = bench_buf_printf(buf, sizeof(buf), &off,
                                                     "west=%s", e->west);
                        argv[a++] = "--mode";
                        argv[a++] = "active-passive";
                        argv[a++] = "--primary";
                        argv[a++] = "east";
                        argv[a++] = "--topic";
                        argv[a++] = bench_buf_printf(
                            buf, sizeof(buf), &off,
                            o->new_topics ? "^%s(-n[0-9]+)?$" : "^%s$", src);
                        argv[a++] = "--gateway-id";
                        argv[a++] = bench_buf_printf(buf, sizeof(buf), &off,
                                                     "lat-r%d-%d", run + 1,
                                                     rate);
                        argv[a++] = "--state-dir";
                        argv[a++] = statedir;
                        argv[a++] = "--log-level";
                        argv[a++] = "warn";
                        argv[a++] = "--unify";
                        argv[a++] = "off";
                        argv[a++] = "--set";
                        argv[a++] = "replication.refresh_topics_interval=1s";
                        for (int k = 0; k < o->aagw_argc; k++)
                                argv[a++] = o->aagw_args[k];
                }
                break;
        case M_BARE:
                argv[a++] = e->self;
                argv[a++] = "--bare";
                argv[a++] = e->src;
                argv[a++] = src;
                argv[a++] = e->west;
                argv[a++] = dst;
                argv[a++] = "consumer.fetch.wait.max.ms=5";
                argv[a++] = "producer.linger.ms=0";
                for (int k = 0; k < o->bare_propc; k++)
                        argv[a++] = o->bare_props[k];
                break;
        case M_MM2:
                snprintf(errstr, sizeof(errstr), "mm%dx%d", run + 1, rate);
                if (bench_mm2_config_write(mm2conf, errstr, e->src, e->west,
                                           src, o->mm2_tasks) ||
                    !bench_java_argv(argv, &a, bench_mm2_jvm,
                                     "org.apache.kafka.connect.mirror."
                                     "MirrorMaker",
                                     e->log4j, buf, sizeof(buf), &off)) {
                        bench_errorf("%s: MM2 needs AAGW_KAFKA_LIB (run "
                                     "under scripts/kafka-clusters)",
                                     tag);
                        goto out;
                }
                argv[a++] = mm2conf;
                break;
        default:
                break;
        }
        argv[a] = NULL;
        if (a) {
                proc = harness_proc_spawn(argv, out, err, errstr,
                                          sizeof(errstr));
                if (!proc) {
                        bench_errorf("%s: %s", tag, errstr);
                        goto out;
                }
        }

        c.o         = o;
        c.rate      = rate;
        c.src_bs    = e->east;
        c.src_topic = src;
        c.dst_bs    = m == M_FLOOR ? e->east : e->west;
        c.dst_topic = dst;
        c.cap       = (size_t)(WARMUP_RATE * START_TIMEOUT_S +
                         (double)rate * (o->warmup + o->seconds + 5 +
                                         (with_new ? PICKUP_MAX_S : 0)));
        c.lat_ms = malloc(c.cap * sizeof(*c.lat_ms));
        c.sent_s    = malloc(c.cap * sizeof(*c.sent_s));
        if (with_new) {
                new_src = calloc((size_t)o->new_topics, sizeof(*new_src));
                new_dst = calloc((size_t)o->new_topics, sizeof(*new_dst));
                for (int k = 0; new_src && new_dst && k < o->new_topics; k++) {
                        snprintf(new_src[k], sizeof(new_src[k]), "%.50s-n%d",
                                 src, k + 1);
                        if (m == M_FLOOR)
                                memcpy(new_dst[k], new_src[k],
                                       sizeof(new_dst[k]));
                        else
                                snprintf(new_dst[k], sizeof(new_dst[k]),
                                         "east.%.50s", new_src[k]);
                }
                c.new_src  = new_src;
                c.new_dst  = new_dst;
                c.check_bs = m == M_FLOOR ? e->east : e->west;
                c.admin    = o->real ? e->east_rk : NULL;
        }
        if (!c.lat_ms || !c.sent_s || (with_new && (!new_src || !new_dst))) {
                bench_errorf("%s: out of memory", tag);
                goto out;
        }
        for (size_t i = 0; i < c.cap; i++)
                c.lat_ms[i] = NAN;
        atomic_store(&c.i_lo, -1);
        atomic_store(&c.i_hi, -1);
        read_started = !pthread_create(&rt, NULL, reader_main, &c);
        prod_started =
            read_started && !pthread_create(&pt, NULL, producer_main, &c);
        creat_started = prod_started && with_new &&
                        !pthread_create(&ct, NULL, creator_main, &c);
        if (!prod_started || (with_new && !creat_started)) {
                bench_errorf("%s: cannot start a thread", tag);
                goto out;
        }
        /* The replicator's CPU over the window. */
        while (!atomic_load(&c.prod_done)) {
                if (isnan(cpu0) && atomic_load(&c.i_lo) >= 0) {
                        tw0  = now_s();
                        cpu0 = proc ? bench_tree_cpu_s(harness_proc_pid(proc))
                                    : 0;
                }
                if (proc && harness_proc_wait(proc, 0, NULL) == AAGW_OK) {
                        bench_errorf("%s: the replicator exited (see %s)", tag,
                                     err);
                        atomic_store(&c.stop_prod, true);
                        break;
                }
                bench_nap_ms(10);
        }
        tw1  = now_s();
        cpu1 = proc ? bench_tree_cpu_s(harness_proc_pid(proc)) : 0;
        pthread_join(pt, NULL);
        prod_started = false;
        if (creat_started) {
                pthread_join(ct, NULL);
                creat_started = false;
                if (c.nt_err[0]) {
                        bench_errorf("%s: %s", tag, c.nt_err);
                        goto out;
                }
        }
        long lo = atomic_load(&c.i_lo), hi = atomic_load(&c.i_hi);
        if (c.err[0] || lo < 0 || hi <= lo) {
                bench_errorf("%s: %s", tag,
                             c.err[0] ? c.err : "no measured window");
                goto out;
        }
        /* Wait until every record of the window was read. */
        double deadline = now_s() + DRAIN_TIMEOUT_S;
        long   missing  = 0;
        for (;;) {
                missing = 0;
                for (long i = lo; i < hi; i++)
                        missing += isnan(c.lat_ms[i]);
                if (!missing || now_s() > deadline)
                        break;
                bench_nap_ms(100);
        }
        if (proc) {
                long kib     = bench_proc_hwm_kib(harness_proc_pid(proc));
                res->hwm_mib = kib > 0 ? (double)kib / 1024 : NAN;
        }
        atomic_store(&c.stop_read, true);
        pthread_join(rt, NULL);
        read_started = false;
        if (missing) {
                bench_errorf("%s: FAILED: %ld of %ld records sent in the "
                             "window never arrived",
                             tag, missing, hi - lo);
                goto out;
        }
        if (o->keep) {
                /* Per record: index, latency (ms) and when it was sent
                 * (wall clock, ms: the replicator's log lines have it),
                 * for a look at stalls. */
                struct timespec wall;
                clock_gettime(CLOCK_REALTIME, &wall);
                double to_wall =
                    (double)wall.tv_sec + (double)wall.tv_nsec / 1e9 - now_s();
                snprintf(buf, sizeof(buf), "%s.lat", out);
                FILE *lf = fopen(buf, "w");
                for (long i = lo; lf && i < hi; i++)
                        fprintf(lf, "%ld %.3f %.3f\n", i, c.lat_ms[i],
                                (c.sent_s[i] + to_wall) * 1000);
                if (lf)
                        fclose(lf);
        }
        {
                long    n = hi - lo;
                double *v = malloc((size_t)n * sizeof(*v)), sum = 0;
                if (!v)
                        goto out;
                memcpy(v, c.lat_ms + lo, (size_t)n * sizeof(*v));
                qsort(v, (size_t)n, sizeof(*v), cmp_double);
                for (long i = 0; i < n; i++)
                        sum += v[i];
                res->n         = n;
                res->p50       = pct(v, n, 0.50);
                res->p99       = pct(v, n, 0.99);
                res->max       = v[n - 1];
                res->mean      = sum / (double)n;
                res->cpu_per_s = (cpu1 - cpu0) / (tw1 - tw0);
                res->valid     = true;
                free(v);
        }
        if (with_new) {
                double tc       = atomic_load(&c.t_create),
                       tp       = atomic_load(&c.t_picked), la[1];
                res->p99_steady = p99_sent(&c, lo, hi, 0, tc, &res->n_steady);
                res->p99_during = p99_sent(&c, lo, hi, tc, tp, &res->n_during);
                res->pickup_s   = tp - tc;
                res->load1      = getloadavg(la, 1) == 1 ? la[0] : NAN;
                printf("BENCH_NEWTOPICS run=%d rate=%d m=%c name=%s "
                       "new_topics=%d pickup_s=%.2f steady_records=%ld "
                       "steady_p99_ms=%.2f during_records=%ld "
                       "during_p99_ms=%.2f ratio=%.2f load1=%.2f\n",
                       run + 1, rate, letters[m], names[m], o->new_topics,
                       res->pickup_s, res->n_steady, res->p99_steady,
                       res->n_during, res->p99_during,
                       res->p99_during / res->p99_steady, res->load1);
        }
        printf("BENCH_LAT run=%d rate=%d m=%c name=%s records=%ld "
               "p50_ms=%.2f p99_ms=%.2f max_ms=%.2f mean_ms=%.2f "
               "dups=%ld cpu_cores=%.3f hwm_mib=%.1f%s%s\n",
               run + 1, rate, letters[m], names[m], res->n, res->p50,
               res->p99, res->max, res->mean, atomic_load(&c.dups),
               res->cpu_per_s, res->hwm_mib,
               e->wan_ms && m != M_FLOOR ? " wan_rtt_ms=" : "",
               e->wan_ms && m != M_FLOOR ? e->wan_ms : "");
        fflush(stdout);
        rc = 0;
out:
        atomic_store(&c.stop_prod, true);
        if (prod_started)
                pthread_join(pt, NULL);
        if (creat_started)
                pthread_join(ct, NULL);
        atomic_store(&c.stop_read, true);
        if (read_started)
                pthread_join(rt, NULL);
        if (proc) {
                harness_proc_signal(proc, SIGTERM);
                if (harness_proc_wait(proc, BENCH_STOP_TIMEOUT_MS, NULL) !=
                    AAGW_OK)
                        bench_errorf("%s: no exit on SIGTERM; killed", tag);
                harness_proc_destroy(proc);
        }
        if (o->real && !o->keep) {
                const char *t[2] = {dst, src};
                if (m != M_FLOOR)
                        bench_topics_delete(e->west_rk, t, 1);
                bench_topics_delete(e->east_rk, t + 1, 1);
                for (int k = 0; new_src && new_dst && k < o->new_topics; k++) {
                        const char *n[2] = {new_dst[k], new_src[k]};
                        if (m != M_FLOOR)
                                bench_topics_delete(e->west_rk, n, 1);
                        bench_topics_delete(e->east_rk, n + 1, 1);
                }
        }
        free(new_src);
        free(new_dst);
        free(c.sent_s);
        if (statedir)
                harness_rmtree(statedir);
        free(c.lat_ms);
        free(out);
        free(err);
        free(statedir);
        free(mm2conf);
        return rc;
}

/* ---------------------------------------------------------------- MAIN -- */

static void usage(FILE *f) {
        fprintf(f,
                "Usage: bench_latency [OPTIONS]\n"
                "Replication latency at a steady rate (docs/benchmarks.md):\n"
                "  f floor (no replicator), a aagw, b bare pipe (fetch wait "
                "5 ms, linger 0),\n"
                "  m MirrorMaker 2 (real Kafka only)\n"
                "Real Kafka when AAGW_TEST_BOOTSTRAPS_EAST and _WEST are set "
                "(scripts/kafka-clusters\n"
                "east west -- ...), else an `aagw sandbox` (mock clusters).\n"
                "\n"
                "  -R, --rate R          records/s (repeat; default 1000 and "
                "10000)\n"
                "  -d, --seconds S       measured window (default 20)\n"
                "  -w, --warmup S        after the first record read "
                "(default 3)\n"
                "  -r, --runs K          runs (default 1)\n"
                "  -m, --only LETTERS    of fabm (default fab, fabm on real "
                "Kafka)\n"
                "  -p, --partitions P    (default 16)\n"
                "  -b, --brokers B       mock brokers per cluster (default "
                "1)\n"
                "  -s, --value-size S    (default 200)\n"
                "      --mm2-tasks N     MM2 tasks.max (default 1)\n"
                "      --new-topics N    N new topics appear at east "
                "halfway through the\n"
                "                        window (f and a): p99 before and "
                "while they are\n"
                "                        picked up\n"
                "      --aagw-arg ARG    append ARG to aagw's command line\n"
                "      --bare-prop consumer.K=V|producer.K=V\n"
                "      --wan             the replicators reach east over "
                "the WAN listener\n"
                "                        (real Kafka under "
                "scripts/kafka-clusters --wan-delay MS)\n"
                "  -k, --keep            keep logs (and, on real Kafka, "
                "topics)\n");
}

static int parse(int argc, char **argv, struct opts *o) {
        static const struct option lo[] = {
            {"rate", required_argument, NULL, 'R'},
            {"seconds", required_argument, NULL, 'd'},
            {"warmup", required_argument, NULL, 'w'},
            {"runs", required_argument, NULL, 'r'},
            {"only", required_argument, NULL, 'm'},
            {"partitions", required_argument, NULL, 'p'},
            {"brokers", required_argument, NULL, 'b'},
            {"value-size", required_argument, NULL, 's'},
            {"mm2-tasks", required_argument, NULL, 'T'},
            {"aagw-arg", required_argument, NULL, 'A'},
            {"bare-prop", required_argument, NULL, 'B'},
            {"wan", no_argument, NULL, 'W'},
            {"new-topics", required_argument, NULL, 'N'},
            {"keep", no_argument, NULL, 'k'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0}};
        const char *only = NULL;
        size_t      v;
        int         opt;

        memset(o, 0, sizeof(*o));
        o->seconds    = 20;
        o->warmup     = 3;
        o->runs       = 1;
        o->partitions = 16;
        o->brokers    = 1;
        o->mm2_tasks  = 1;
        o->value_size = 200;
        while ((opt = getopt_long(argc, argv, "R:d:w:r:m:p:b:s:kh", lo,
                                  NULL)) != -1) {
                switch (opt) {
                case 'R':
                        if (o->nrates == MAX_RATES ||
                            !bench_parse_size(optarg, 1, 1000000, &v))
                                goto bad;
                        o->rates[o->nrates++] = (int)v;
                        break;
                case 'd':
                case 'w': {
                        char  *end;
                        double d = strtod(optarg, &end);
                        if (*end || !(d > 0) || d > 3600)
                                goto bad;
                        *(opt == 'd' ? &o->seconds : &o->warmup) = d;
                        break;
                }
                case 'r':
                        if (!bench_parse_size(optarg, 1, 100, &v))
                                goto bad;
                        o->runs = (int)v;
                        break;
                case 'm':
                        only = optarg;
                        break;
                case 'p':
                        if (!bench_parse_size(optarg, 1, 1024, &v))
                                goto bad;
                        o->partitions = (int)v;
                        break;
                case 'b':
                        if (!bench_parse_size(optarg, 1, 9, &v))
                                goto bad;
                        o->brokers = (int)v;
                        break;
                case 's':
                        if (!bench_parse_size(optarg, 40, 1000000, &v))
                                goto bad;
                        o->value_size = v;
                        break;
                case 'T':
                        if (!bench_parse_size(optarg, 1, 64, &v))
                                goto bad;
                        o->mm2_tasks = (int)v;
                        break;
                case 'A':
                        if (o->aagw_argc == BENCH_LIST_MAX)
                                goto bad;
                        o->aagw_args[o->aagw_argc++] = optarg;
                        break;
                case 'B':
                        if (o->bare_propc == BENCH_LIST_MAX)
                                goto bad;
                        o->bare_props[o->bare_propc++] = optarg;
                        break;
                case 'W':
                        o->wan = true;
                        break;
                case 'N':
                        if (!bench_parse_size(optarg, 1, NEW_TOPICS_MAX, &v))
                                goto bad;
                        o->new_topics = (int)v;
                        break;
                case 'k':
                        o->keep = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 1;
                default:
                        goto bad;
                }
        }
        if (optind != argc)
                goto bad;
        if (!o->nrates) {
                o->rates[o->nrates++] = 1000;
                o->rates[o->nrates++] = 10000;
        }
        o->real = getenv("AAGW_TEST_BOOTSTRAPS_EAST") &&
                  getenv("AAGW_TEST_BOOTSTRAPS_WEST");
        if (!only)
                only = o->real ? "fabm" : "fab";
        for (const char *p = only; *p; p++) {
                const char *l = strchr(letters, *p);
                if (!l)
                        goto bad;
                o->only |= 1u << (l - letters);
        }
        if (!o->real && (o->only & (1u << M_MM2))) {
                bench_errorf("m (MirrorMaker 2) needs real Kafka");
                return -1;
        }
        /* The mock's brokers advertise their own ports: no client of
         * theirs stays behind a proxy. */
        if (!o->real && o->wan) {
                bench_errorf("--wan needs real Kafka (scripts/kafka-clusters "
                             "--wan-delay MS east west -- ...)");
                return -1;
        }
        return 0;
bad:
        usage(stderr);
        return -1;
}

static int median_cmp(const void *a, const void *b) {
        return cmp_double(a, b);
}

static double median(double *v, int n) {
        int k = 0;
        for (int i = 0; i < n; i++)
                if (!isnan(v[i]))
                        v[k++] = v[i];
        if (!k)
                return NAN;
        qsort(v, (size_t)k, sizeof(*v), median_cmp);
        return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

int main(int argc, char **argv) {
        struct opts          o;
        struct env           e;
        struct bench_opts    bo;
        struct bench_round   br;
        struct lat_res      *all;
        char                 self[PATH_MAX], errstr[512], *dir;
        const char          *wan_src = NULL, *wan_ms = NULL;
        int                  failed = 0;

        bench_set_prog(PROG);
        if (argc > 1 && !strcmp(argv[1], "--bare"))
                return bench_bare_main(PROG, argc - 1, argv + 1);
        switch (parse(argc, argv, &o)) {
        case 0:
                break;
        case 1:
                return BENCH_EXIT_OK;
        default:
                return BENCH_EXIT_USAGE;
        }
        if (o.wan && bench_wan_source(&wan_src, &wan_ms))
                return BENCH_EXIT_USAGE;
        dir = bench_setup(BENCH_AAGW_BIN, "lat", self, sizeof(self));
        if (!dir)
                return BENCH_EXIT_RUNTIME;
        all = calloc((size_t)(o.runs * o.nrates * M_CNT), sizeof(*all));
        memset(&e, 0, sizeof(e));
        e.o    = &o;
        e.self = self;
        e.dir  = dir;
        {
                char *l = harness_path_join(dir, "log4j2.properties");
                snprintf(e.log4j, sizeof(e.log4j), "%s", l);
                free(l);
                if (bench_log4j_write(e.log4j))
                        return BENCH_EXIT_RUNTIME;
        }
        bench_print_host("");
        printf("%s, %d partitions, %zu B values, %.0f s window after %.0f s "
               "warm-up, %d run%s; aagw %s; logs in %s\n",
               o.real ? "real Kafka" : "mock (aagw sandbox)", o.partitions,
               o.value_size, o.seconds, o.warmup, o.runs,
               o.runs == 1 ? "" : "s", harness_aagw_bin(), dir);
        if (o.wan)
                printf("WAN: the replicators reach east at %s, %s ms of "
                       "round trip; the floor reads east locally\n",
                       wan_src, wan_ms);
        fflush(stdout);

        for (int run = 0; run < o.runs; run++) {
                char         run_dir[32];
                const char **topics = NULL;

                memset(&br, 0, sizeof(br));
                memset(&bo, 0, sizeof(bo));
                bo.partitions = o.partitions;
                bo.brokers    = o.brokers;
                br.o          = &bo;
                br.run        = run;
                snprintf(run_dir, sizeof(run_dir), "run%d", run + 1);
                br.dir = harness_path_join(dir, run_dir);
                mkdir(br.dir, 0700);
                if (o.real) {
                        e.east    = getenv("AAGW_TEST_BOOTSTRAPS_EAST");
                        e.west    = getenv("AAGW_TEST_BOOTSTRAPS_WEST");
                        e.east_rk = bench_client_new(RD_KAFKA_PRODUCER, e.east,
                                                     NULL, errstr,
                                                     sizeof(errstr));
                        e.west_rk = bench_client_new(RD_KAFKA_PRODUCER, e.west,
                                                     NULL, errstr,
                                                     sizeof(errstr));
                        if (!e.east_rk || !e.west_rk) {
                                bench_errorf("client: %s", errstr);
                                return BENCH_EXIT_RUNTIME;
                        }
                } else {
                        /* Every topic of the run, with P partitions (the
                         * mock would auto-create them with 4). */
                        size_t cnt = 0;
                        static char tn[MAX_RATES * M_CNT * 2][64];
                        topics = calloc(MAX_RATES * M_CNT * 2 + 1,
                                        sizeof(*topics));
                        for (int k = 0; k < o.nrates; k++)
                                for (int m = 0; m < M_CNT; m++) {
                                        if (!(o.only & (1u << m)))
                                                continue;
                                        char s[64], d[64];
                                        topic_names(run, o.rates[k],
                                                    (enum meas)m, s, d,
                                                    sizeof(s));
                                        memcpy(tn[cnt], s, sizeof(s));
                                        topics[cnt] = tn[cnt];
                                        cnt++;
                                        if (m == M_FLOOR)
                                                continue;
                                        memcpy(tn[cnt], d, sizeof(d));
                                        topics[cnt] = tn[cnt];
                                        cnt++;
                                }
                        topics[cnt] = NULL;
                        if (bench_sandbox_start(&br, topics, true)) {
                                bench_sandbox_stop(&br);
                                return BENCH_EXIT_RUNTIME;
                        }
                        e.east    = br.east;
                        e.west    = br.west;
                        e.east_rk = br.east_rk;
                        e.west_rk = br.west_rk;
                }
                e.dir    = br.dir;
                e.src    = o.wan ? wan_src : e.east;
                e.wan_ms = wan_ms;
                printf("\nrun %d: east=%s west=%s\n", run + 1, e.east, e.west);
                for (int k = 0; k < o.nrates; k++) {
                        for (int i = 0; i < M_CNT; i++) {
                                /* Rotate the order from run to run. */
                                int m = (i + run) % M_CNT;
                                struct lat_res *r =
                                    &all[(run * o.nrates + k) * M_CNT + m];
                                if (!(o.only & (1u << m)))
                                        continue;
                                if (measure(&e, run, o.rates[k], (enum meas)m,
                                            r))
                                        failed++;
                        }
                        const struct lat_res *r =
                            &all[(run * o.nrates + k) * M_CNT];
                        printf("run %d, %d rec/s: added to the floor "
                               "(p50/p99/max ms):",
                               run + 1, o.rates[k]);
                        for (int m = 1; m < M_CNT; m++)
                                if (r[m].valid && r[0].valid)
                                        printf("  %s %.1f/%.1f/%.1f",
                                               names[m], r[m].p50 - r[0].p50,
                                               r[m].p99 - r[0].p99,
                                               r[m].max - r[0].max);
                        if (r[M_AAGW].valid && r[M_BARE].valid)
                                printf("  p99 aagw/bare %.2f",
                                       r[M_AAGW].p99 / r[M_BARE].p99);
                        if (r[M_AAGW].valid && r[M_MM2].valid)
                                printf("  p99 aagw/mm2 %.2f",
                                       r[M_AAGW].p99 / r[M_MM2].p99);
                        printf("\n");
                        fflush(stdout);
                }
                if (o.real) {
                        rd_kafka_destroy(e.east_rk);
                        rd_kafka_destroy(e.west_rk);
                } else {
                        bench_sandbox_stop(&br);
                }
                free(topics);
                free(br.dir);
        }

        printf("\nsummary: medians over %d run%s (ms; added = minus the "
               "floor of the same run)\n",
               o.runs, o.runs == 1 ? "" : "s");
        for (int k = 0; k < o.nrates; k++) {
                for (int m = 0; m < M_CNT; m++) {
                        double p50[100], p99[100], mx[100], a50[100],
                            a99[100], amx[100], cpu[100], hwm[100];
                        if (!(o.only & (1u << m)))
                                continue;
                        for (int run = 0; run < o.runs; run++) {
                                const struct lat_res *r =
                                    &all[(run * o.nrates + k) * M_CNT];
                                bool ok = r[m].valid, fok = r[0].valid;
                                p50[run] = ok ? r[m].p50 : NAN;
                                p99[run] = ok ? r[m].p99 : NAN;
                                mx[run]  = ok ? r[m].max : NAN;
                                a50[run] = ok && fok ? r[m].p50 - r[0].p50
                                                     : NAN;
                                a99[run] = ok && fok ? r[m].p99 - r[0].p99
                                                     : NAN;
                                amx[run] = ok && fok ? r[m].max - r[0].max
                                                     : NAN;
                                cpu[run] = ok ? r[m].cpu_per_s : NAN;
                                hwm[run] = ok ? r[m].hwm_mib : NAN;
                        }
                        printf("  %6d rec/s %-10s e2e p50 %7.2f p99 %7.2f "
                               "max %8.2f | added p50 %7.2f p99 %7.2f max "
                               "%8.2f | CPU %.3f cores, HWM %.0f MiB\n",
                               o.rates[k], names[m], median(p50, o.runs),
                               median(p99, o.runs), median(mx, o.runs),
                               median(a50, o.runs), median(a99, o.runs),
                               median(amx, o.runs), median(cpu, o.runs),
                               median(hwm, o.runs));
                }
        }
        for (int k = 0; o.new_topics && k < o.nrates; k++) {
                for (int m = 0; m < M_CNT; m++) {
                        double st[100], du[100], ra[100], pu[100], la[100];
                        if (!(o.only & (1u << m)) ||
                            (m != M_FLOOR && m != M_AAGW))
                                continue;
                        for (int run = 0; run < o.runs; run++) {
                                const struct lat_res *r =
                                    &all[(run * o.nrates + k) * M_CNT + m];
                                st[run] = r->valid ? r->p99_steady : NAN;
                                du[run] = r->valid ? r->p99_during : NAN;
                                ra[run] = r->valid
                                              ? r->p99_during / r->p99_steady
                                              : NAN;
                                pu[run] = r->valid ? r->pickup_s : NAN;
                                la[run] = r->valid ? r->load1 : NAN;
                        }
                        printf("  %6d rec/s %-10s %d new topics: p99 steady "
                               "%7.2f during %7.2f ratio %.2f | picked up "
                               "in %.2f s | load %.2f\n",
                               o.rates[k], names[m], o.new_topics,
                               median(st, o.runs), median(du, o.runs),
                               median(ra, o.runs), median(pu, o.runs),
                               median(la, o.runs));
                }
        }
        free(all);
        if (!failed && !o.keep)
                harness_rmtree(dir);
        else
                printf("logs kept in %s\n", dir);
        free(dir);
        return failed ? BENCH_EXIT_RUNTIME : BENCH_EXIT_OK;
}
