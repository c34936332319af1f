/*
 * tests/bench/bench_scale.c: a site served by 1, 2 and 3 aagw processes
 * (scale-out) on real Kafka, against one process without scale-out,
 * MirrorMaker 2 and the bare loop; and how long a killed process's work
 * takes to move.
 *
 * Two real single-node clusters (scripts/kafka-clusters east west --
 * bench_scale ...).  Throughput: N records of 200-byte values with keys
 * on a P-partition topic, preloaded; each measurement copies them
 * (--stage flow: east -> west, the copy east.T) or unifies them
 * (--stage unify: T preloaded at west, unified into T.unified) with
 *
 *   a  aagw, one process, no scale-out (the single-process mode)
 *   1  aagw --scale-out true, 1 process (transactions, no sharing)
 *   2  aagw --scale-out true, 2 processes
 *   3  aagw --scale-out true, 3 processes
 *   u  as 1 with --set scale_out.route=false (--stage unify only)
 *   v  as 3 with --set scale_out.route=false (--stage unify only)
 *   m  MirrorMaker 2, one process, tasks.max 3 (--stage flow only)
 *   b  the bare consume -> produce loop (--stage flow only)
 *
 * Letters 1-3 run aagw's default, scale_out.route true: the unify
 * stage's input partitions are divided among the processes, and each
 * record read goes once through the site's route topic
 * (aagw.<gateway id>.west.route.<unified topic>) to the process that
 * decides its unified partition.  u and v run the mode without the
 * route, where every process reads every input and keeps the records of
 * its own partitions.  They are letters of the same rounds, so that the
 * two modes are measured alternately, under the same load of the machine
 * and the brokers, and their CPU per million records compares.
 *
 * Served bytes (--stage unify, west started with kafka-clusters --jmx or
 * AAGW_KAFKA_JMX=1, which exports AAGW_TEST_JMX_WEST): the route trades
 * the reads of every input by every process for one read of the input
 * and one of the route topic, which is what the brokers' network sends.
 * Before the processes start and once all N records arrived, the program
 * reads west's BytesOutPerSec meter (the record bytes of its fetch
 * responses, a count since the broker started) through Kafka's JmxTool
 * for the input topic, the route topic and all topics, and prints the
 * differences per input record.  With the route the input topic's figure
 * is the same for 1, 2 and 3 processes (each partition read once) and
 * the route topic's about as much again; without it k processes read
 * the input k times and the route topic is not used (0).  All topics
 * also counts the changelogs and this program's own counter, which reads
 * the unified topic, so about one unified record per input record of it
 * is the bench's, not aagw's.
 *
 * Every measurement gets its own gateway id and topic names, so no state
 * carries over.  Progress is counted by this program's own read_committed
 * consumer of the target (a transaction's markers take offsets, so
 * watermarks would over-count); steady records/s is what arrived after
 * the first poll that saw records, over the time until the poll that saw
 * all N, CPU is the measured
 * processes' user + sys over that stretch.  Each target must end with
 * exactly N records, each source partition's keys in its partition.
 *
 * Takeover (letter t): 3 scale-out processes copy and unify a steady
 * stream (--rate records/s at east); once every partition moves, one
 * process is killed with SIGKILL (then, in a second round, one is stopped
 * with SIGTERM) and the program measures the time until the copy holds,
 * in every partition, what the source held at the kill, and until the
 * unified topic holds every record produced before the kill.
 *
 * Join and leave (letter j): 2 scale-out processes on the same steady
 * stream; after 10 s of it a third joins, 30 s later it leaves
 * (SIGTERM).  The copy's and the unified topic's arrivals are counted a
 * second at a time: for each event, the seconds (of the 30 after it)
 * that got less than half the offered rate, the lowest second, and the
 * largest lag (records produced and not yet there, in seconds of
 * traffic) against the largest of the 10 s before the join.  With the
 * eager rebalance (aagw's default) every member stops for each event;
 * --rebalance cooperative moves only the partitions that change owner.  On 2
 * cores three processes share the same CPUs: the figures show the overhead of
 * sharing, not a speed-up (docs/benchmarks.md).
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
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "bench_util.h"
#include "harness.h"

#ifndef BENCH_AAGW_BIN
#define BENCH_AAGW_BIN "aagw"
#endif

#define PROG            "bench_scale"
#define MAX_PROCS       3
#define MAX_PARTS       256
#define POLL_MS         100
#define START_TIMEOUT_S 180.0 /* spawn -> first record at the target */
#define STALL_TIMEOUT_S 90.0  /* no progress at the target */
#define TAKEOVER_MAX_S  180.0

enum meas {
        M_A,
        M_S1,
        M_S2,
        M_S3,
        M_N1,
        M_N3,
        M_MM2,
        M_BARE,
        M_TAKE,
        M_JOIN,
        M_CNT
};
static const char letters[M_CNT + 1] = "a123uvmbtj";

static const char *const names[M_CNT] = {
    "aagw_single", "scale_out_1", "scale_out_2", "scale_out_3", "no_route_1",
    "no_route_3",  "mm2_3tasks",  "bare",        "takeover",    "join_leave"};

/* BytesOutPerSec's Count at west, summed over its brokers: [B_IN] the
 * input topic, [B_ROUTE] the route topic, [B_ALL] every topic. */
enum { B_IN, B_ROUTE, B_ALL, B_CNT };

struct opts {
        size_t   records, value_size;
        int      runs, partitions, rate, session_s;
        unsigned only;
        bool     unify; /* --stage unify */
        bool     keep;
        bool     cooperative; /* --rebalance cooperative */
};

struct res {
        bool   valid;
        double steady_rps, cpu_per_m, startup_s;
        /* bytes west's brokers served per input record (enum above);
         * NAN when not measured */
        double bytes_per_rec[B_CNT];
        /* takeover */
        double kill_copy_s, kill_unified_s, stop_copy_s, stop_unified_s;
        /* join and leave: [0] join, [1] leave; [.][0] copy, [.][1]
         * unified */
        double slow_s[2][2], low_rps[2][2], lag_s[2][2], base_lag_s[2];
};

struct env {
        const struct opts *o;
        const char        *east, *west, *self, *dir;
        /* west's brokers' JMX agents (AAGW_TEST_JMX_WEST, "host:port,...")
         * when the unify stage's served bytes are measured, else NULL */
        const char        *jmx;
        rd_kafka_t        *east_rk, *west_rk;
        char               log4j[PATH_MAX];
};

/* ------------------------------------------------------------- COUNTER -- */

/* A read_committed consumer of every partition of one topic: records per
 * partition so far. */
struct counter {
        rd_kafka_t *rk;
        int         parts;
        int64_t     per[MAX_PARTS];
        int64_t     total;
};

static int counter_open(struct counter *c, const char *bs, const char *topic,
                        int parts, char *errstr, size_t errstr_size) {
        static const char *const props[] = {
            "group.id",          "bench-scale-counter",
            "enable.auto.commit", "false",
            "isolation.level",   "read_committed",
            "fetch.wait.max.ms", "50",
            NULL};
        rd_kafka_topic_partition_list_t *a;

        memset(c, 0, sizeof(*c));
        c->parts = parts;
        if (!(c->rk = bench_client_new(RD_KAFKA_CONSUMER, bs, props, errstr,
                                       errstr_size)))
                return -1;
        a = rd_kafka_topic_partition_list_new(parts);
        for (int p = 0; p < parts; p++)
                rd_kafka_topic_partition_list_add(a, topic, p)->offset =
                    RD_KAFKA_OFFSET_BEGINNING;
        rd_kafka_assign(c->rk, a);
        rd_kafka_topic_partition_list_destroy(a);
        return 0;
}

/* Take what arrived within about 'ms'. */
static void counter_poll(struct counter *c, int ms) {
        double until = bench_now_s() + ms / 1000.0;

        do {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, 20);
                if (!m)
                        continue;
                if (!m->err && m->partition >= 0 && m->partition < c->parts) {
                        c->per[m->partition]++;
                        c->total++;
                }
                rd_kafka_message_destroy(m);
        } while (bench_now_s() < until);
}

static void counter_close(struct counter *c) {
        if (c->rk) {
                rd_kafka_consumer_close(c->rk);
                rd_kafka_destroy(c->rk);
        }
        c->rk = NULL;
}

/* ------------------------------------------------------------ PRODUCER -- */

static int preload(struct env *e, const char *bs, const char *topic,
                   size_t n, size_t base) {
        const struct opts   *o = e->o;
        struct bench_preload pl = {0};
        char                 errstr[512], key[32];
        char                *val = malloc(o->value_size + 1);
        rd_kafka_t          *rk = bench_preload_producer(bs, &pl, errstr,
                                                         sizeof(errstr));
        rd_kafka_topic_t    *rkt;
        int                  rc = -1;

        if (!rk || !val) {
                bench_errorf("preload: %s", rk ? "out of memory" : errstr);
                free(val);
                if (rk)
                        rd_kafka_destroy(rk);
                return -1;
        }
        rkt = rd_kafka_topic_new(rk, topic, NULL);
        for (size_t i = base; i < base + n; i++) {
                size_t        kl = bench_rec_key(i, key, sizeof(key));
                rd_kafka_vu_t vu[5];
                size_t        cnt;

                bench_rec_value(i, val, o->value_size, false);
                cnt = bench_rec_vu(vu, rkt, RD_KAFKA_PARTITION_UA, key, kl,
                                   val, o->value_size);
                if (bench_produce(rk, vu, cnt, topic, errstr,
                                  sizeof(errstr))) {
                        bench_errorf("%s", errstr);
                        goto out;
                }
        }
        rd_kafka_flush(rk, 300000);
        if (pl.failed || pl.delivered != (int64_t)n) {
                bench_errorf("preload %s: %" PRId64 " of %zu delivered (%s)",
                             topic, pl.delivered, n,
                             pl.first_err[0] ? pl.first_err : "timeout");
                goto out;
        }
        rc = 0;
out:
        rd_kafka_topic_destroy(rkt);
        rd_kafka_destroy(rk);
        free(val);
        return rc;
}

/* The steady producer of the takeover round: 'rate' records/s to east
 * until told to stop; 'sent' counts acknowledged records. */
struct steady {
        struct env      *e;
        const char      *topic;
        pthread_t        thread;
        atomic_bool      stop;
        struct bench_preload pl;
        _Atomic int64_t  produced;
        char             err[600];
};

static void *steady_main(void *arg) {
        struct steady       *s = arg;
        const struct opts   *o = s->e->o;
        char                 key[32], errstr[512];
        char                *val = malloc(o->value_size + 1);
        rd_kafka_t          *rk  = bench_preload_producer(
            s->e->east, &s->pl, errstr, sizeof(errstr));
        rd_kafka_topic_t    *rkt;
        double               t0 = bench_now_s();
        size_t               i  = 0;

        if (!rk || !val) {
                snprintf(s->err, sizeof(s->err), "%s",
                         rk ? "out of memory" : errstr);
                free(val);
                return NULL;
        }
        rkt = rd_kafka_topic_new(rk, s->topic, NULL);
        while (!atomic_load(&s->stop)) {
                /* Keep to the rate: as many as the elapsed time allows. */
                size_t due = (size_t)((bench_now_s() - t0) * o->rate);
                for (; i < due && !atomic_load(&s->stop); i++) {
                        size_t        kl = bench_rec_key(i, key, sizeof(key));
                        rd_kafka_vu_t vu[5];
                        size_t        cnt;

                        bench_rec_value(i, val, o->value_size, false);
                        cnt = bench_rec_vu(vu, rkt, RD_KAFKA_PARTITION_UA, key,
                                           kl, val, o->value_size);
                        if (bench_produce(rk, vu, cnt, s->topic, errstr,
                                          sizeof(errstr))) {
                                snprintf(s->err, sizeof(s->err), "%s", errstr);
                                atomic_store(&s->stop, true);
                        }
                        atomic_store(&s->produced, (int64_t)i + 1);
                }
                rd_kafka_poll(rk, 5);
        }
        rd_kafka_flush(rk, 60000);
        rd_kafka_topic_destroy(rkt);
        rd_kafka_destroy(rk);
        free(val);
        return NULL;
}

/* ------------------------------------------------------------ PROCESSES -- */

struct procs {
        harness_proc_t *p[MAX_PROCS + 1];
        int             n;
};

/* Start aagw number 'k' of a measurement: site west, flows from east,
 * the measurement's own gateway id; scale-out when 'scale', with the
 * unify stage's route (scale_out.route, aagw's default) when 'route'. */
static harness_proc_t *aagw_spawn(struct env *e, const char *gw,
                                  const char *tag, int k, bool scale,
                                  bool route, bool unify,
                                  const char *topic_re) {
        const char     *argv[64];
        size_t          a = 0, off = 0;
        char            buf[4096], errstr[512], name[64];
        char           *out, *err, *state;
        harness_proc_t *p;

        snprintf(name, sizeof(name), "%s-p%d.log", tag, k);
        err = harness_path_join(e->dir, name);
        snprintf(name, sizeof(name), "%s-p%d.out", tag, k);
        out = harness_path_join(e->dir, name);
        snprintf(name, sizeof(name), "%s-p%d.state", tag, k);
        state = harness_path_join(e->dir, name);
        argv[a++] = harness_aagw_bin();
        argv[a++] = "--cluster";
        argv[a++] = bench_buf_printf(buf, sizeof(buf), &off, "east=%s",
                                     e->east);
        argv[a++] = "--cluster";
        argv[a++] = bench_buf_printf(buf, sizeof(buf), &off, "west=%s",
                                     e->west);
        argv[a++] = "--site";
        argv[a++] = "west";
        argv[a++] = "--topic";
        argv[a++] = topic_re;
        argv[a++] = "--gateway-id";
        argv[a++] = gw;
        argv[a++] = "--state-dir";
        argv[a++] = state;
        argv[a++] = "--log-level";
        argv[a++] = "info";
        argv[a++] = "--unify";
        argv[a++] = unify ? "dedup" : "off";
        argv[a++] = "--set";
        argv[a++] = "replication.refresh_topics_interval=1s";
        if (scale) {
                argv[a++] = "--scale-out";
                argv[a++] = "true";
                argv[a++] = "--member";
                argv[a++] = bench_buf_printf(buf, sizeof(buf), &off, "p%d", k);
                argv[a++] = "--set";
                argv[a++] = bench_buf_printf(buf, sizeof(buf), &off,
                                             "scale_out.session_timeout=%ds",
                                             e->o->session_s);
                /* The broker's group.min.session.timeout.ms is 6 s. */
                argv[a++] = "--set";
                argv[a++] = "clusters.west.properties.consumer."
                            "heartbeat.interval.ms=1000";
                if (!route) {
                        argv[a++] = "--set";
                        argv[a++] = "scale_out.route=false";
                }
                if (e->o->cooperative) {
                        argv[a++] = "--set";
                        argv[a++] = "scale_out.rebalance=cooperative";
                }
        }
        argv[a] = NULL;
        p = harness_proc_spawn(argv, out, err, errstr, sizeof(errstr));
        if (!p)
                bench_errorf("%s: aagw %d: %s", tag, k, errstr);
        free(out);
        free(err);
        free(state);
        return p;
}

static double procs_cpu(const struct procs *ps) {
        double sum = 0;

        for (int i = 0; i < ps->n; i++) {
                double c = ps->p[i] ? bench_tree_cpu_s(
                                          harness_proc_pid(ps->p[i]))
                                    : NAN;
                if (!isnan(c))
                        sum += c;
        }
        return sum;
}

static bool procs_alive(const struct procs *ps, int *dead) {
        for (int i = 0; i < ps->n; i++)
                if (ps->p[i] && harness_proc_wait(ps->p[i], 0, NULL) == AAGW_OK) {
                        *dead = i;
                        return false;
                }
        return true;
}

static void procs_stop(struct procs *ps) {
        for (int i = 0; i < ps->n; i++)
                if (ps->p[i])
                        harness_proc_signal(ps->p[i], SIGTERM);
        for (int i = 0; i < ps->n; i++) {
                if (!ps->p[i])
                        continue;
                if (harness_proc_wait(ps->p[i], BENCH_STOP_TIMEOUT_MS, NULL) !=
                    AAGW_OK)
                        bench_errorf("aagw %d did not stop within %d ms", i,
                                     BENCH_STOP_TIMEOUT_MS);
                harness_proc_destroy(ps->p[i]);
                ps->p[i] = NULL;
        }
}

/* ---------------------------------------------------------- BYTES OUT -- */

#define JMX_TIMEOUT_MS 60000
#define BYTES_OUT "kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec"

/* One line of JmxTool's "properties" report, "OBJECT:Count=N": N into
 * 'v' [B_IN] if OBJECT is the BytesOutPerSec of topic 'in', [B_ROUTE] of
 * 'route', [B_ALL] of every topic (no topic key). */
static void served_line(const char *line, const char *in, const char *route,
                        int64_t v[B_CNT]) {
        const char *cnt = strstr(line, ":Count="), *topic;
        size_t      bl  = strlen(BYTES_OUT);
        char       *end;
        long long   n;

        if (!cnt || strncmp(line, BYTES_OUT, bl))
                return;
        n = strtoll(cnt + 7, &end, 10);
        if (end == cnt + 7 || *end)
                return;
        if (line + bl == cnt) {
                v[B_ALL] += n;
                return;
        }
        if (strncmp(line + bl, ",topic=", 7))
                return;
        topic = line + bl + 7;
        if ((size_t)(cnt - topic) == strlen(in) &&
            !strncmp(topic, in, strlen(in)))
                v[B_IN] += n;
        else if (route && (size_t)(cnt - topic) == strlen(route) &&
                 !strncmp(topic, route, strlen(route)))
                v[B_ROUTE] += n;
}

/* The bytes west's brokers have served (fetch responses' records; the
 * meters' Count: since the broker started) from topic 'in', from
 * 'route' (NULL: none) and from all topics, through Kafka's JmxTool, one
 * run per broker.  A meter not there yet (no fetch of the topic so far)
 * counts as 0.  Returns 0, or -1 (reported). */
static int served_read(const struct env *e, const char *in, const char *route,
                       int64_t v[B_CNT]) {
        static const char *const jvm[] = {"-Xmx128m",
                                          "-XX:+UseSerialGC",
                                          "-XX:TieredStopAtLevel=1",
                                          "-XX:-UsePerfData",
                                          "-Djava.awt.headless=true",
                                          NULL};
        const char              *p     = e->jmx;

        memset(v, 0, sizeof(*v) * B_CNT);
        while (*p) {
                const char      *argv[BENCH_ARGV_MAX];
                char             buf[4096], errstr[512];
                size_t           a = 0, off = 0, hl = strcspn(p, ",");
                harness_output_t out   = {0};
                harness_lines_t  lines = {0};
                aagw_err_t       err;
                bool             ok;

                if (!bench_java_argv(argv, &a, jvm,
                                     "org.apache.kafka.tools.JmxTool", NULL,
                                     buf, sizeof(buf), &off)) {
                        bench_errorf("served bytes: AAGW_KAFKA_LIB is not "
                                     "set");
                        return -1;
                }
                argv[a++] = "--jmx-url";
                argv[a++] = bench_buf_printf(buf, sizeof(buf), &off,
                                             "service:jmx:rmi:///jndi/rmi://"
                                             "%.*s/jmxrmi",
                                             (int)hl, p);
                argv[a++] = "--object-name";
                argv[a++] = BYTES_OUT;
                argv[a++] = "--object-name";
                argv[a++] = bench_buf_printf(buf, sizeof(buf), &off,
                                             "%s,topic=%s", BYTES_OUT, in);
                if (route) {
                        argv[a++] = "--object-name";
                        argv[a++] =
                            bench_buf_printf(buf, sizeof(buf), &off,
                                             "%s,topic=%s", BYTES_OUT, route);
                }
                argv[a++] = "--attributes";
                argv[a++] = "Count";
                argv[a++] = "--one-time";
                argv[a++] = "true";
                argv[a++] = "--report-format";
                argv[a++] = "properties";
                argv[a]   = NULL;
                err = harness_run(argv, NULL, 0, JMX_TIMEOUT_MS, &out, errstr,
                                  sizeof(errstr));
                /* Every topic's meter is there from the broker's start:
                 * a report without it is not what was asked for. */
                ok = err == AAGW_OK && harness_exit_code(out.status) == 0 &&
                     strstr(out.out, BYTES_OUT ":Count=") &&
                     !harness_lines_split(out.out, &lines);
                for (size_t i = 0; ok && i < lines.cnt; i++)
                        served_line(lines.v[i], in, route, v);
                if (!ok)
                        bench_errorf("served bytes: JmxTool at %.*s: %s",
                                     (int)hl, p,
                                     err != AAGW_OK ? errstr
                                     : out.err      ? out.err
                                                    : "");
                harness_lines_deinit(&lines);
                harness_output_deinit(&out);
                if (!ok)
                        return -1;
                p += hl;
                if (*p == ',')
                        p++;
        }
        return 0;
}

/* ----------------------------------------------------------- THROUGHPUT -- */

static int measure(struct env *e, int run, enum meas m, struct res *res) {
        const struct opts *o = e->o;
        const int64_t      n = (int64_t)o->records;
        char               src[96], dst[128], tag[32], gw[128], re[128];
        char               errstr[512], buf[4096], route[320] = "";
        const char        *argv[BENCH_ARGV_MAX];
        size_t             a = 0, off = 0;
        struct procs       ps = {0};
        struct counter     c  = {0};
        double             t0, t_first = 0, t_last_move, cpu_first = NAN;
        int64_t            n_first = 0; /* at the target at t_first */
        int64_t            last = -1;
        int64_t            served0[B_CNT], served1[B_CNT];
        bool               served = e->jmx != NULL;
        int                rc = -1, dead;

        memset(res, 0, sizeof(*res));
        for (int b = 0; b < B_CNT; b++)
                res->bytes_per_rec[b] = NAN;
        snprintf(tag, sizeof(tag), "run%d-%c", run + 1, letters[m]);
        snprintf(src, sizeof(src), "sc%dr%d%c", o->unify ? 2 : 1, run + 1,
                 letters[m]);
        snprintf(gw, sizeof(gw), "bench-%s", src);
        snprintf(re, sizeof(re), "^%s$", src);
        if (o->unify) {
                snprintf(dst, sizeof(dst), "%s.unified", src);
                /* aagw's name for it (scale_out.route): none of the
                 * letters without the route makes it; its bytes are 0. */
                snprintf(route, sizeof(route), "aagw.%s.west.route.%s", gw,
                         dst);
                if (bench_topic_create(e->west_rk, src, o->partitions, errstr,
                                       sizeof(errstr)) ||
                    bench_topic_create(e->west_rk, dst, o->partitions, errstr,
                                       sizeof(errstr)) ||
                    bench_topic_create(e->east_rk, src, o->partitions, errstr,
                                       sizeof(errstr)) ||
                    bench_topic_create(e->west_rk,
                                       bench_buf_printf(buf, sizeof(buf), &off,
                                                        "east.%s", src),
                                       o->partitions, errstr,
                                       sizeof(errstr)) ||
                    preload(e, e->west, src, o->records, 0))
                        goto fail_setup;
        } else {
                if (m == M_MM2)
                        snprintf(dst, sizeof(dst), "mm3r%d.%s", run + 1, src);
                else if (m == M_BARE)
                        snprintf(dst, sizeof(dst), "%s.copy", src);
                else
                        snprintf(dst, sizeof(dst), "east.%s", src);
                if (bench_topic_create(e->east_rk, src, o->partitions, errstr,
                                       sizeof(errstr)) ||
                    bench_topic_create(e->west_rk, dst, o->partitions, errstr,
                                       sizeof(errstr)) ||
                    preload(e, e->east, src, o->records, 0))
                        goto fail_setup;
        }
        if (counter_open(&c, e->west, dst, o->partitions, errstr,
                         sizeof(errstr)))
                goto fail_setup;
        /* The counter connected and fetching before anything is copied:
         * its own start must not eat into the measured stretch. */
        counter_poll(&c, 2000);
        /* What west served so far: the meters count since its start. */
        if (served && served_read(e, src, route, served0))
                served = false;

        t0 = bench_now_s();
        switch (m) {
        case M_A:
        case M_S1:
        case M_S2:
        case M_S3:
        case M_N1:
        case M_N3:
                ps.n = m == M_A || m == M_N1 ? 1 : m == M_N3 ? 3 : m - M_S1 + 1;
                for (int k = 0; k < ps.n; k++)
                        if (!(ps.p[k] = aagw_spawn(e, gw, tag, k, m != M_A,
                                                   m != M_N1 && m != M_N3,
                                                   o->unify, re)))
                                goto out;
                break;
        case M_MM2: {
                char *conf;
                snprintf(buf, sizeof(buf), "%s.properties", tag);
                conf = harness_path_join(e->dir, buf);
                off  = 0;
                if (bench_mm2_config_write(
                        conf,
                        bench_buf_printf(buf, sizeof(buf), &off, "mm3r%d",
                                         run + 1),
                        e->east, e->west, src, 3) ||
                    !bench_java_argv(argv, &a, bench_mm2_jvm,
                                     "org.apache.kafka.connect.mirror."
                                     "MirrorMaker",
                                     e->log4j, buf + off, sizeof(buf) - off,
                                     &off)) {
                        free(conf);
                        goto out;
                }
                argv[a++] = conf;
                argv[a]   = NULL;
                ps.n      = 1;
                {
                        char *lo = harness_path_join(e->dir, tag);
                        ps.p[0]  = harness_proc_spawn(argv, lo, lo, errstr,
                                                      sizeof(errstr));
                        free(lo);
                }
                free(conf);
                if (!ps.p[0]) {
                        bench_errorf("%s: %s", tag, errstr);
                        goto out;
                }
                break;
        }
        case M_BARE:
                argv[a++] = e->self;
                argv[a++] = "--bare";
                argv[a++] = e->east;
                argv[a++] = src;
                argv[a++] = e->west;
                argv[a++] = dst;
                argv[a]   = NULL;
                ps.n      = 1;
                {
                        char *lo = harness_path_join(e->dir, tag);
                        ps.p[0]  = harness_proc_spawn(argv, lo, lo, errstr,
                                                      sizeof(errstr));
                        free(lo);
                }
                if (!ps.p[0]) {
                        bench_errorf("%s: %s", tag, errstr);
                        goto out;
                }
                break;
        default:
                goto out;
        }

        t_last_move = t0;
        for (;;) {
                double now, cpu;

                counter_poll(&c, POLL_MS);
                now = bench_now_s();
                cpu = procs_cpu(&ps);
                if (c.total != last) {
                        last        = c.total;
                        t_last_move = now;
                }
                if (c.total > 0 && !t_first) {
                        t_first   = now;
                        n_first   = c.total;
                        cpu_first = cpu;
                        res->startup_s = now - t0;
                }
                if (c.total >= n) {
                        /* Anything more would be a duplicate: look a
                         * moment longer. */
                        double done = now, cpu_done = cpu;
                        counter_poll(&c, 2000);
                        if (c.total != n) {
                                bench_errorf("%s: %s holds %" PRId64
                                             " records, want %" PRId64,
                                             tag, dst, c.total, n);
                                goto out;
                        }
                        /* What arrived after the first poll that saw
                         * records, over the time it took: a transaction
                         * makes its records visible at once, so the
                         * first poll may already see a whole commit's
                         * worth, produced before the stretch began. */
                        res->steady_rps =
                            done > t_first && n > n_first
                                ? (double)(n - n_first) / (done - t_first)
                                : NAN;
                        res->cpu_per_m =
                            n > n_first ? (cpu_done - cpu_first) /
                                              ((double)(n - n_first) / 1e6)
                                        : NAN;
                        res->valid = true;
                        if (served && !served_read(e, src, route, served1))
                                for (int b = 0; b < B_CNT; b++)
                                        res->bytes_per_rec[b] =
                                            (double)(served1[b] - served0[b]) /
                                            (double)n;
                        break;
                }
                if (!procs_alive(&ps, &dead)) {
                        bench_errorf("%s: process %d exited with %" PRId64
                                     " of %" PRId64 " at the target (logs "
                                     "in %s)",
                                     tag, dead, c.total, n, e->dir);
                        goto out;
                }
                if (!t_first && now - t0 > START_TIMEOUT_S) {
                        bench_errorf("%s: nothing at %s after %.0f s", tag,
                                     dst, START_TIMEOUT_S);
                        goto out;
                }
                if (t_first && now - t_last_move > STALL_TIMEOUT_S) {
                        bench_errorf("%s: stalled at %" PRId64 " of %" PRId64,
                                     tag, c.total, n);
                        goto out;
                }
        }
        printf("%s %-12s %10.0f records/s  %6.2f CPU s/1M  start %.1f s", tag,
               names[m], res->steady_rps, res->cpu_per_m, res->startup_s);
        if (!isnan(res->bytes_per_rec[B_ALL]))
                printf("  served B/rec: input %.1f route %.1f all %.1f",
                       res->bytes_per_rec[B_IN], res->bytes_per_rec[B_ROUTE],
                       res->bytes_per_rec[B_ALL]);
        putchar('\n');
        fflush(stdout);
        rc = 0;
out:
        procs_stop(&ps);
        counter_close(&c);
        return rc;
fail_setup:
        bench_errorf("%s: %s", tag, errstr);
        counter_close(&c);
        return -1;
}

/* ------------------------------------------------------------- TAKEOVER -- */

/* Wait until the copy holds, per partition, at least 'want' and the
 * unified topic 'uwant' records; the seconds each took from 't0' (NAN:
 * not within TAKEOVER_MAX_S). */
static void wait_caught_up(struct counter *copy, struct counter *uni,
                           const int64_t *want, int64_t uwant, double t0,
                           double *copy_s, double *uni_s) {
        *copy_s = *uni_s = NAN;
        while (bench_now_s() - t0 < TAKEOVER_MAX_S &&
               (isnan(*copy_s) || isnan(*uni_s))) {
                bool all = true;

                counter_poll(copy, 50);
                counter_poll(uni, 50);
                for (int p = 0; p < copy->parts; p++)
                        all &= copy->per[p] >= want[p];
                if (all && isnan(*copy_s))
                        *copy_s = bench_now_s() - t0;
                if (uni->total >= uwant && isnan(*uni_s))
                        *uni_s = bench_now_s() - t0;
        }
}

/* A steady stream through 'nprocs' scale-out processes (of a round
 * of letter 'letter'), copied and unified, every partition moving. */
struct round {
        char           src[96], copy_t[128], uni_t[128], tag[32], gw[128];
        char           re[128];
        struct procs   ps;
        struct counter copy, uni;
        struct steady  st;
        bool           producing;
};

/* Topics, counters, 'nprocs' processes and the producer, then the warm
 * up.  Returns 0, or -1 (reported; round_end() still runs). */
static int round_start(struct env *e, int run, char letter, int nprocs,
                       struct round *rd) {
        const struct opts *o = e->o;
        char               errstr[512];
        double             t;

        memset(rd, 0, sizeof(*rd));
        snprintf(rd->tag, sizeof(rd->tag), "run%d-%c", run + 1, letter);
        snprintf(rd->src, sizeof(rd->src), "sc%c%d", letter, run + 1);
        snprintf(rd->gw, sizeof(rd->gw), "bench-%s", rd->src);
        snprintf(rd->re, sizeof(rd->re), "^%s$", rd->src);
        snprintf(rd->copy_t, sizeof(rd->copy_t), "east.%s", rd->src);
        snprintf(rd->uni_t, sizeof(rd->uni_t), "%s.unified", rd->src);
        if (bench_topic_create(e->east_rk, rd->src, o->partitions, errstr,
                               sizeof(errstr)) ||
            bench_topic_create(e->west_rk, rd->src, o->partitions, errstr,
                               sizeof(errstr)) ||
            bench_topic_create(e->west_rk, rd->copy_t, o->partitions, errstr,
                               sizeof(errstr)) ||
            bench_topic_create(e->west_rk, rd->uni_t, o->partitions, errstr,
                               sizeof(errstr)) ||
            counter_open(&rd->copy, e->west, rd->copy_t, o->partitions,
                         errstr, sizeof(errstr)) ||
            counter_open(&rd->uni, e->west, rd->uni_t, o->partitions, errstr,
                         sizeof(errstr))) {
                bench_errorf("%s: %s", rd->tag, errstr);
                return -1;
        }
        rd->ps.n = nprocs;
        for (int k = 0; k < nprocs; k++)
                if (!(rd->ps.p[k] = aagw_spawn(e, rd->gw, rd->tag, k, true,
                                               true, true, rd->re)))
                        return -1;
        rd->st.e     = e;
        rd->st.topic = rd->src;
        if (pthread_create(&rd->st.thread, NULL, steady_main, &rd->st)) {
                bench_errorf("%s: cannot start the producer", rd->tag);
                return -1;
        }
        rd->producing = true;
        /* Warm: every partition of the copy and the unified topic moved,
         * and the copy is within a second's worth of the source. */
        t = bench_now_s();
        for (;;) {
                bool all = true;
                counter_poll(&rd->copy, 100);
                counter_poll(&rd->uni, 100);
                for (int p = 0; p < o->partitions; p++)
                        all &= rd->copy.per[p] > 0 && rd->uni.per[p] > 0;
                if (all &&
                    atomic_load(&rd->st.produced) - rd->copy.total < o->rate)
                        return 0;
                if (bench_now_s() - t > START_TIMEOUT_S) {
                        bench_errorf("%s: not every partition copied and "
                                     "unified after %.0f s (copy %" PRId64
                                     ", unified %" PRId64 ")",
                                     rd->tag, START_TIMEOUT_S, rd->copy.total,
                                     rd->uni.total);
                        return -1;
                }
        }
}

static void round_end(struct round *rd) {
        if (rd->producing) {
                atomic_store(&rd->st.stop, true);
                pthread_join(rd->st.thread, NULL);
                if (rd->st.err[0])
                        bench_errorf("%s: producer: %s", rd->tag, rd->st.err);
        }
        rd->ps.n = MAX_PROCS;
        procs_stop(&rd->ps);
        counter_close(&rd->copy);
        counter_close(&rd->uni);
}

static int takeover(struct env *e, int run, struct res *res) {
        const struct opts *o = e->o;
        struct round       rd;
        char               errstr[512];
        int64_t            want[MAX_PARTS], sum;
        double             t;
        int                rc = -1;

        memset(res, 0, sizeof(*res));
        if (round_start(e, run, 't', MAX_PROCS, &rd))
                goto stop;
        /* Kill one; what the source holds now must reach the copy and
         * the unified topic. */
        for (int round = 0; round < 2; round++) {
                int victim = round == 0 ? 1 : 2;
                double copy_s, uni_s;

                /* A second of traffic after the warm-up or the last
                 * round. */
                counter_poll(&rd.copy, 1000);
                counter_poll(&rd.uni, 0);
                if (bench_watermarks(e->east_rk, rd.src, o->partitions, false,
                                     want, &sum, errstr, sizeof(errstr))) {
                        bench_errorf("%s: %s", rd.tag, errstr);
                        goto stop;
                }
                t = bench_now_s();
                if (round == 0) {
                        harness_proc_signal(rd.ps.p[victim], SIGKILL);
                } else {
                        harness_proc_signal(rd.ps.p[victim], SIGTERM);
                }
                /* Records produced up to the signal: the source's ends
                 * were read just before it. */
                wait_caught_up(&rd.copy, &rd.uni, want, sum, t, &copy_s,
                               &uni_s);
                printf("%s %s: copy caught up in %.1f s, unified in %.1f s "
                       "(%" PRId64 " records at the source)\n",
                       rd.tag, round == 0 ? "kill -9" : "SIGTERM", copy_s,
                       uni_s, sum);
                fflush(stdout);
                if (round == 0) {
                        res->kill_copy_s    = copy_s;
                        res->kill_unified_s = uni_s;
                } else {
                        res->stop_copy_s    = copy_s;
                        res->stop_unified_s = uni_s;
                }
                harness_proc_wait(rd.ps.p[victim], BENCH_STOP_TIMEOUT_MS,
                                  NULL);
                harness_proc_destroy(rd.ps.p[victim]);
                rd.ps.p[victim] = NULL;
        }
        res->valid = !isnan(res->kill_copy_s) && !isnan(res->kill_unified_s) &&
                     !isnan(res->stop_copy_s) && !isnan(res->stop_unified_s);
        rc = res->valid ? 0 : -1;
stop:
        round_end(&rd);
        return rc;
}

#define JOIN_BASE_S  10
#define JOIN_AFTER_S 30

/* One second of arrivals at the copy and the unified topic into 'got'
 * ([0] copy, [1] unified). */
static void second_of(struct round *rd, int64_t got[2]) {
        int64_t c = rd->copy.total, u = rd->uni.total;
        counter_poll(&rd->copy, 500);
        counter_poll(&rd->uni, 500);
        got[0] = rd->copy.total - c;
        got[1] = rd->uni.total - u;
}

/* Records produced and not yet at the copy ([0]) or the unified topic
 * ([1]), in seconds of traffic at 'rate'. */
static double lag_of(struct round *rd, int w, int rate) {
        int64_t at = w ? rd->uni.total : rd->copy.total;
        return (double)(atomic_load(&rd->st.produced) - at) / rate;
}

/* The JOIN_AFTER_S seconds after event 'ev' (0 join, 1 leave). */
static void after_event(struct round *rd, struct res *res, int ev,
                        int rate) {
        for (int w = 0; w < 2; w++) {
                res->slow_s[ev][w]  = 0;
                res->low_rps[ev][w] = INFINITY;
                res->lag_s[ev][w]   = 0;
        }
        for (int s = 0; s < JOIN_AFTER_S; s++) {
                int64_t got[2];
                second_of(rd, got);
                for (int w = 0; w < 2; w++) {
                        double lag = lag_of(rd, w, rate);
                        if (got[w] < rate / 2)
                                res->slow_s[ev][w]++;
                        if (got[w] < res->low_rps[ev][w])
                                res->low_rps[ev][w] = (double)got[w];
                        if (lag > res->lag_s[ev][w])
                                res->lag_s[ev][w] = lag;
                }
        }
}

static int join_leave(struct env *e, int run, struct res *res) {
        const struct opts *o = e->o;
        struct round       rd;
        int64_t            got[2], base = 0;
        int                rc = -1;

        memset(res, 0, sizeof(*res));
        if (round_start(e, run, 'j', 2, &rd))
                goto stop;
        for (int s = 0; s < JOIN_BASE_S; s++) {
                second_of(&rd, got);
                base += got[1];
                for (int w = 0; w < 2; w++)
                        if (lag_of(&rd, w, o->rate) > res->base_lag_s[w])
                                res->base_lag_s[w] = lag_of(&rd, w, o->rate);
        }
        for (int ev = 0; ev < 2; ev++) {
                if (ev == 0) {
                        rd.ps.n = 3;
                        if (!(rd.ps.p[2] = aagw_spawn(e, rd.gw, rd.tag, 2, true,
                                                      true, true, rd.re)))
                                goto stop;
                } else {
                        harness_proc_signal(rd.ps.p[2], SIGTERM);
                }
                after_event(&rd, res, ev, o->rate);
                printf("%s %s: unified %.0f s below half the rate (lowest "
                       "%.0f records/s), lag up to %.1f s; copy %.0f s "
                       "below (lowest %.0f), lag up to %.1f s\n",
                       rd.tag, ev ? "leave" : "join", res->slow_s[ev][1],
                       res->low_rps[ev][1], res->lag_s[ev][1],
                       res->slow_s[ev][0], res->low_rps[ev][0],
                       res->lag_s[ev][0]);
                fflush(stdout);
        }
        printf("%s: %.0f records/s unified before the join (offered %d), "
               "lag up to %.1f s (copy %.1f s)\n",
               rd.tag, (double)base / JOIN_BASE_S, o->rate,
               res->base_lag_s[1], res->base_lag_s[0]);
        /* Everything produced arrived (the lag is back to its size
         * before the join) by the end of the leave's 30 s. */
        res->valid = lag_of(&rd, 0, o->rate) <= res->base_lag_s[0] + 1 &&
                     lag_of(&rd, 1, o->rate) <= res->base_lag_s[1] + 1;
        if (!res->valid)
                bench_errorf("%s: the lag did not come back: copy %.1f s, "
                             "unified %.1f s",
                             rd.tag, lag_of(&rd, 0, o->rate),
                             lag_of(&rd, 1, o->rate));
        rc = res->valid ? 0 : -1;
stop:
        round_end(&rd);
        return rc;
}

/* ----------------------------------------------------------------- MAIN -- */

static void usage(FILE *out) {
        fprintf(out,
                "Usage: scripts/kafka-clusters east west -- " PROG
                " [OPTIONS]\n\n"
                "One site served by 1, 2 and 3 aagw processes (scale-out) "
                "against one\nprocess without it, MirrorMaker 2 and the "
                "bare loop; takeover times.\n\n"
                "  -n, --records N      records per throughput "
                "measurement (default 300000)\n"
                "  -r, --runs N         rounds (default 3)\n"
                "  -p, --partitions N   partitions (default 12)\n"
                "  -s, --value-size N   value bytes (default 200)\n"
                "  -m, --only LETTERS   measurements among %s "
                "(default all)\n"
                "      --stage flow|unify  what the throughput rounds "
                "measure (default flow;\n"
                "                       u, v: unify only; m, b: flow "
                "only)\n"
                "      --rate N         takeover, join/leave: records/s "
                "produced (default 2000)\n"
                "      --session S      takeover, join/leave: scale_out."
                "session_timeout in s (default 6)\n"
                "      --rebalance eager|cooperative  scale_out.rebalance "
                "of every scale-out\n"
                "                       process (default eager, aagw's)\n"
                "  -k, --keep           keep the logs\n\n"
                "With --stage unify and AAGW_TEST_JMX_WEST (kafka-clusters "
                "--jmx, or\nAAGW_KAFKA_JMX=1) and AAGW_KAFKA_LIB set, also "
                "the bytes west's brokers\nserve per input record "
                "(BytesOutPerSec through Kafka's JmxTool).\n",
                letters);
}

static int parse(int argc, char **argv, struct opts *o) {
        static const struct option lo[] = {
            {"records", required_argument, NULL, 'n'},
            {"runs", required_argument, NULL, 'r'},
            {"partitions", required_argument, NULL, 'p'},
            {"value-size", required_argument, NULL, 's'},
            {"only", required_argument, NULL, 'm'},
            {"stage", required_argument, NULL, 'S'},
            {"rate", required_argument, NULL, 'R'},
            {"session", required_argument, NULL, 'T'},
            {"rebalance", required_argument, NULL, 'B'},
            {"keep", no_argument, NULL, 'k'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0}};
        const char *only = letters;
        size_t      v;
        int         opt;

        memset(o, 0, sizeof(*o));
        o->records    = 300000;
        o->value_size = 200;
        o->runs       = 3;
        o->partitions = 12;
        o->rate       = 2000;
        o->session_s  = 6;
        while ((opt = getopt_long(argc, argv, "n:r:p:s:m:kh", lo, NULL)) != -1) {
                switch (opt) {
                case 'n':
                        if (!bench_parse_size(optarg, 100, 100000000,
                                              &o->records))
                                goto bad;
                        break;
                case 'r':
                        if (!bench_parse_size(optarg, 1, 50, &v))
                                goto bad;
                        o->runs = (int)v;
                        break;
                case 'p':
                        if (!bench_parse_size(optarg, 1, MAX_PARTS, &v))
                                goto bad;
                        o->partitions = (int)v;
                        break;
                case 's':
                        if (!bench_parse_size(optarg, 16, 1000000,
                                              &o->value_size))
                                goto bad;
                        break;
                case 'm':
                        only = optarg;
                        break;
                case 'S':
                        if (!strcmp(optarg, "unify"))
                                o->unify = true;
                        else if (strcmp(optarg, "flow"))
                                goto bad;
                        break;
                case 'R':
                        if (!bench_parse_size(optarg, 10, 1000000, &v))
                                goto bad;
                        o->rate = (int)v;
                        break;
                case 'B':
                        if (!strcmp(optarg, "cooperative"))
                                o->cooperative = true;
                        else if (strcmp(optarg, "eager"))
                                goto bad;
                        break;
                case 'T':
                        if (!bench_parse_size(optarg, 6, 300, &v))
                                goto bad;
                        o->session_s = (int)v;
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
        for (const char *p = only; *p; p++) {
                const char *l = strchr(letters, *p);
                if (!l)
                        goto bad;
                o->only |= 1u << (l - letters);
        }
        if (o->unify)
                o->only &= ~((1u << M_MM2) | (1u << M_BARE));
        else /* the route is the unify stage's; a flow has none */
                o->only &= ~((1u << M_N1) | (1u << M_N3));
        return 0;
bad:
        usage(stderr);
        return -1;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static double median(const double *in, int n) {
        double v[64];
        int    k = 0;

        for (int i = 0; i < n && k < 64; i++)
                if (!isnan(in[i]))
                        v[k++] = in[i];
        if (!k)
                return NAN;
        qsort(v, (size_t)k, sizeof(*v), cmp_double);
        return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

int main(int argc, char **argv) {
        struct opts o;
        struct env  e;
        struct res *all;
        char        self[PATH_MAX], errstr[512], *dir;
        int         failed = 0;

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
        memset(&e, 0, sizeof(e));
        e.o    = &o;
        e.east = getenv("AAGW_TEST_BOOTSTRAPS_EAST");
        e.west = getenv("AAGW_TEST_BOOTSTRAPS_WEST");
        e.jmx  = getenv("AAGW_TEST_JMX_WEST");
        if (!o.unify || (e.jmx && !*e.jmx))
                e.jmx = NULL;
        if (e.jmx &&
            (!getenv("AAGW_KAFKA_LIB") || !*getenv("AAGW_KAFKA_LIB"))) {
                bench_errorf("AAGW_TEST_JMX_WEST without AAGW_KAFKA_LIB "
                             "(Kafka's jars, for JmxTool): no served bytes");
                e.jmx = NULL;
        }
        if (!e.east || !e.west) {
                usage(stderr);
                return BENCH_EXIT_USAGE;
        }
        if (!(dir = bench_setup(BENCH_AAGW_BIN, "scale", self, sizeof(self))))
                return BENCH_EXIT_RUNTIME;
        e.self = self;
        e.dir  = dir;
        {
                char *l = harness_path_join(dir, "log4j2.properties");
                snprintf(e.log4j, sizeof(e.log4j), "%s", l);
                free(l);
                if ((o.only & (1u << M_MM2)) &&
                    (!getenv("AAGW_KAFKA_LIB") || bench_log4j_write(e.log4j)))
                        o.only &= ~(1u << M_MM2);
        }
        if (!(e.east_rk = bench_client_new(RD_KAFKA_PRODUCER, e.east, NULL,
                                           errstr, sizeof(errstr))) ||
            !(e.west_rk = bench_client_new(RD_KAFKA_PRODUCER, e.west, NULL,
                                           errstr, sizeof(errstr)))) {
                bench_errorf("%s", errstr);
                return BENCH_EXIT_RUNTIME;
        }
        bench_print_host(NULL);
        printf("# %zu records of %zu bytes, %d partitions, stage %s, %d "
               "runs; logs in %s\n",
               o.records, o.value_size, o.partitions,
               o.unify ? "unify" : "flow", o.runs, dir);
        if (e.jmx)
                printf("# served B/rec: bytes west's brokers served "
                       "(BytesOutPerSec, JMX at %s) per input\n"
                       "# record, from aagw's start to the last record's "
                       "arrival: input = the input\n"
                       "# topic, route = the route topic, all = every "
                       "topic, which includes this\n"
                       "# program's own read_committed reads of the "
                       "unified topic (about one\n"
                       "# unified record per input record)\n",
                       e.jmx);
        all = calloc((size_t)(o.runs * M_CNT), sizeof(*all));
        for (int run = 0; run < o.runs; run++)
                for (int m = 0; m < M_CNT; m++) {
                        struct res *r = &all[run * M_CNT + m];
                        if (!(o.only & (1u << m)))
                                continue;
                        if ((m == M_TAKE   ? takeover(&e, run, r)
                             : m == M_JOIN ? join_leave(&e, run, r)
                                           : measure(&e, run, (enum meas)m, r)))
                                failed++;
                }

        /* Medians, and ratios per run against the single process. */
        printf("\n# medians over %d runs\n", o.runs);
        for (int m = 0; m < M_CNT; m++) {
                double v[64], c[64], ra[64], by[B_CNT][64];
                if (!(o.only & (1u << m)) || m == M_TAKE || m == M_JOIN)
                        continue;
                for (int run = 0; run < o.runs; run++) {
                        const struct res *r = &all[run * M_CNT + m];
                        const struct res *b = &all[run * M_CNT + M_A];
                        v[run]  = r->valid ? r->steady_rps : NAN;
                        c[run]  = r->valid ? r->cpu_per_m : NAN;
                        ra[run] = r->valid && b->valid
                                      ? r->steady_rps / b->steady_rps
                                      : NAN;
                        for (int k = 0; k < B_CNT; k++)
                                by[k][run] =
                                    r->valid ? r->bytes_per_rec[k] : NAN;
                }
                printf("%c %-12s %10.0f records/s  %6.2f CPU s/1M  "
                       "x%.2f of a",
                       letters[m], names[m], median(v, o.runs),
                       median(c, o.runs), median(ra, o.runs));
                if (e.jmx)
                        printf("  served B/rec: input %.1f route %.1f "
                               "all %.1f",
                               median(by[B_IN], o.runs),
                               median(by[B_ROUTE], o.runs),
                               median(by[B_ALL], o.runs));
                putchar('\n');
        }
        if (o.only & (1u << M_TAKE)) {
                double k1[64], k2[64], s1[64], s2[64];
                for (int run = 0; run < o.runs; run++) {
                        const struct res *r = &all[run * M_CNT + M_TAKE];
                        k1[run] = r->valid ? r->kill_copy_s : NAN;
                        k2[run] = r->valid ? r->kill_unified_s : NAN;
                        s1[run] = r->valid ? r->stop_copy_s : NAN;
                        s2[run] = r->valid ? r->stop_unified_s : NAN;
                }
                printf("t takeover    kill -9: copy %.1f s, unified %.1f s; "
                       "SIGTERM: copy %.1f s, unified %.1f s\n",
                       median(k1, o.runs), median(k2, o.runs),
                       median(s1, o.runs), median(s2, o.runs));
        }
        if (o.only & (1u << M_JOIN)) {
                static const char *const ev[] = {"join", "leave"};
                for (int v = 0; v < 2; v++) {
                        double s[2][64], c[2][64];
                        for (int run = 0; run < o.runs; run++) {
                                const struct res *r =
                                    &all[run * M_CNT + M_JOIN];
                                for (int w = 0; w < 2; w++) {
                                        s[w][run] =
                                            r->valid ? r->slow_s[v][w] : NAN;
                                        c[w][run] =
                                            r->valid ? r->lag_s[v][w] : NAN;
                                }
                        }
                        printf("j %-5s       unified %.0f s below half the "
                               "rate, lag up to %.1f s; copy %.0f s, lag "
                               "%.1f s\n",
                               ev[v], median(s[1], o.runs),
                               median(c[1], o.runs), median(s[0], o.runs),
                               median(c[0], o.runs));
                }
        }
        if (!o.keep && !failed)
                harness_rmtree(dir);
        free(dir);
        free(all);
        rd_kafka_destroy(e.east_rk);
        rd_kafka_destroy(e.west_rk);
        return failed ? BENCH_EXIT_RUNTIME : BENCH_EXIT_OK;
}
