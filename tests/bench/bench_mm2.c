/*
 * tests/bench/bench_mm2.c: aagw against MirrorMaker 2 on real Kafka.
 *
 * Two real single-node clusters (scripts/kafka-clusters east west --
 * bench_mm2 ...), one direction, N records (default 1,000,000) of
 * 200-byte values with keys on a 16-partition topic, preloaded at east.
 * In the same run it measures
 *
 *   a  aagw            `aagw run`, active-passive east -> west
 *   m  MM2, 1 task     MirrorMaker 2 dedicated mode, tasks.max 1
 *   n  MM2, N tasks    the same, tasks.max N (--mm2-tasks, default 2)
 *   b  bare loop       this program's --bare consume -> produce loop
 *                      (bench_util.c; aagw's producer settings)
 *   p  ProducerPerf    Kafka's ProducerPerformance writing N records of
 *                      the same size to west: the ceiling
 *
 * with the same producer guarantees (idempotent, acks=all).  For each:
 * steady records/s (from the first poll that sees records at the target
 * to the one that sees all N), CPU seconds per million records of the
 * process over that stretch (from /proc; "total" adds start-up), and its
 * peak RSS (VmHWM) at the end.  A copy counts only if every target
 * partition holds what its source partition holds.  Ratios come from the
 * same run; the summary prints medians.  docs/benchmarks.md has the
 * settings and the results.
 *
 * With --wan every replicator (aagw, MM2, the bare loop) reaches east
 * over the WAN listener of scripts/kafka-clusters --wan-delay MS, behind
 * its delay proxy, and west directly: replicators at the target site, as
 * MM2's documentation advises.  This program's own clients (the preload,
 * the watermark polls) stay local.
 *
 * Exit status: 0 every measurement valid, 1 one was not, 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "bench_util.h"
#include "harness.h"

#ifndef BENCH_AAGW_BIN
#define BENCH_AAGW_BIN "aagw"
#endif

#define PROG "bench_mm2"
#define POLL_MS 100
#define START_TIMEOUT_S 240.0 /* spawn -> first record at the target */
#define STALL_TIMEOUT_S 60.0  /* no progress at the target */

enum meas { M_AAGW, M_MM2_1, M_MM2_2, M_BARE, M_PERF, M_AAGW_1, M_CNT };
static const char letters[M_CNT + 1] = "amnbpo";
/* names[M_MM2_2] says its tasks.max (--mm2-tasks). */
static char        mm2_n_name[32] = "mm2_2tasks";
static const char *names[M_CNT]   = {"aagw", "mm2_1task",     mm2_n_name,
                                     "bare", "producer_perf", "aagw_1conn"};

struct opts {
        size_t      records, value_size;
        int         runs, partitions;
        int         mm2_tasks; /* tasks.max of measurement n */
        unsigned    only;
        bool        keep, wan;
        const char *aagw_args[BENCH_LIST_MAX];
        int         aagw_argc;
};

struct res {
        bool   valid;
        double steady_rps, wall_rps, startup_s;
        double cpu_per_m;       /* steady stretch */
        double cpu_total_per_m; /* spawn to exit */
        double hwm_mib;
};

struct env {
        const struct opts *o;
        const char        *east, *west, *self, *dir;
        const char        *src;    /* east as the replicators reach it */
        const char        *wan_ms; /* the WAN's round trip, or NULL */
        rd_kafka_t        *east_rk, *west_rk;
        char               log4j[PATH_MAX];
        int64_t           *expect, *scratch; /* per source partition */
};

/* Preload N keyed records into 'topic' at east and note what each
 * partition got.  @returns 0, or -1 (reason printed). */
static int preload(struct env *e, const char *topic) {
        const struct opts   *o = e->o;
        struct bench_preload pl = {0};
        char                 errstr[512], key[32];
        char                *val = malloc(o->value_size + 1);
        rd_kafka_t          *rk;
        rd_kafka_topic_t    *rkt;
        int64_t              sum = 0;
        int                  rc  = -1;

        rk = bench_preload_producer(e->east, &pl, errstr, sizeof(errstr));
        if (!rk || !val) {
                bench_errorf("preload: %s", rk ? "out of memory" : errstr);
                free(val);
                if (rk)
                        rd_kafka_destroy(rk);
                return -1;
        }
        rkt = rd_kafka_topic_new(rk, topic, NULL);
        for (size_t i = 0; i < o->records; i++) {
                size_t        kl = bench_rec_key(i, key, sizeof(key));
                rd_kafka_vu_t vu[5];
                size_t        n;

                bench_rec_value(i, val, o->value_size, false);
                n = bench_rec_vu(vu, rkt, RD_KAFKA_PARTITION_UA, key, kl, val,
                                 o->value_size);
                if (bench_produce(rk, vu, n, topic, errstr, sizeof(errstr))) {
                        bench_errorf("%s", errstr);
                        goto out;
                }
        }
        rd_kafka_flush(rk, 300000);
        if (pl.failed || pl.delivered != (int64_t)o->records) {
                bench_errorf("preload %s: %" PRId64 " of %zu delivered (%s)",
                             topic, pl.delivered, o->records,
                             pl.first_err[0] ? pl.first_err : "timeout");
                goto out;
        }
        if (bench_watermarks(e->east_rk, topic, o->partitions, false,
                             e->expect, &sum, errstr, sizeof(errstr)) ||
            sum != (int64_t)o->records) {
                bench_errorf("preload %s: %s", topic,
                             sum != (int64_t)o->records ? "count" : errstr);
                goto out;
        }
        rc = 0;
out:
        rd_kafka_topic_destroy(rkt);
        rd_kafka_destroy(rk);
        free(val);
        return rc;
}

static void target_name(int run, enum meas m, const char *src, char *dst,
                        size_t size) {
        switch (m) {
        case M_AAGW:
                snprintf(dst, size, "east.%s", src);
                break;
        case M_AAGW_1:
                /* Its own name for east: its own copy of the topic. */
                snprintf(dst, size, "east1.%s", src);
                break;
        case M_MM2_1:
        case M_MM2_2:
                /* A fresh MM2 alias per measurement: fresh MM2 state. */
                snprintf(dst, size, "mm%dr%d.%s", m == M_MM2_1 ? 1 : 2,
                         run + 1, src);
                break;
        case M_BARE:
                snprintf(dst, size, "%s.copy", src);
                break;
        default:
                snprintf(dst, size, "perf-r%d", run + 1);
                break;
        }
}

static int measure(struct env *e, int run, enum meas m, const char *src,
                   struct res *res) {
        const struct opts *o = e->o;
        const int64_t      n = (int64_t)o->records;
        char               dst[128], tag[32], errstr[512], buf[8192];
        char              *out = NULL, *err = NULL, *state = NULL, *conf = NULL;
        const char        *argv[BENCH_ARGV_MAX];
        size_t             a = 0, off = 0;
        harness_proc_t    *proc = NULL;
        double             t0, t_first = 0, t_done = 0, t_last_move;
        double             cpu_first = NAN, cpu_done = NAN, cpu_end = NAN;
        int64_t            first_cnt = 0, last = -1, sum = 0;
        long               hwm = -1;
        int                rc = -1;

        memset(res, 0, sizeof(*res));
        target_name(run, m, src, dst, sizeof(dst));
        snprintf(tag, sizeof(tag), "run%d-%c", run + 1, letters[m]);
        out = harness_path_join(e->dir, tag);
        snprintf(buf, sizeof(buf), "%s.err", tag);
        err = harness_path_join(e->dir, buf);
        snprintf(buf, sizeof(buf), "%s.state", tag);
        state = harness_path_join(e->dir, buf);
        snprintf(buf, sizeof(buf), "%s.properties", tag);
        conf = harness_path_join(e->dir, buf);
        if (bench_topic_create(e->west_rk, dst, o->partitions, errstr,
                               sizeof(errstr))) {
                bench_errorf("%s: %s", tag, errstr);
                goto out;
        }

        switch (m) {
        case M_AAGW:
        case M_AAGW_1:
                argv[a++] = harness_aagw_bin();
                argv[a++] = "--cluster";
                argv[a++] =
                    bench_buf_printf(buf, sizeof(buf), &off, "%s=%s",
                                     m == M_AAGW ? "east" : "east1", e->src);
                argv[a++] = "--cluster";
                argv[a++] = bench_buf_printf(buf, sizeof(buf), &off,
                                             "west=%s", e->west);
                argv[a++] = "--mode";
                argv[a++] = "active-passive";
                argv[a++] = "--primary";
                argv[a++] = m == M_AAGW ? "east" : "east1";
                argv[a++] = "--topic";
                argv[a++] =
                    bench_buf_printf(buf, sizeof(buf), &off, "^%s$", src);
                argv[a++] = "--gateway-id";
                argv[a++] =
                    bench_buf_printf(buf, sizeof(buf), &off, "mm2bench%s-r%d",
                                     m == M_AAGW ? "" : "1", run + 1);
                argv[a++] = "--state-dir";
                argv[a++] = state;
                argv[a++] = "--log-level";
                argv[a++] = "warn";
                argv[a++] = "--unify";
                argv[a++] = "off";
                argv[a++] = "--set";
                argv[a++] = "replication.refresh_topics_interval=1s";
                if (m == M_AAGW_1) {
                        argv[a++] = "--set";
                        argv[a++] = "replication.fetch_connections=1";
                }
                for (int k = 0; k < o->aagw_argc; k++)
                        argv[a++] = o->aagw_args[k];
                break;
        case M_MM2_1:
        case M_MM2_2: {
                char alias[32];
                snprintf(alias, sizeof(alias), "mm%dr%d",
                         m == M_MM2_1 ? 1 : 2, run + 1);
                if (bench_mm2_config_write(conf, alias, e->src, e->west, src,
                                           m == M_MM2_1 ? 1 : o->mm2_tasks) ||
                    !bench_java_argv(argv, &a, bench_mm2_jvm,
                                     "org.apache.kafka.connect.mirror."
                                     "MirrorMaker",
                                     e->log4j, buf, sizeof(buf), &off))
                        goto out;
                argv[a++] = conf;
                break;
        }
        case M_BARE:
                argv[a++] = e->self;
                argv[a++] = "--bare";
                argv[a++] = e->src;
                argv[a++] = src;
                argv[a++] = e->west;
                argv[a++] = dst;
                break;
        case M_PERF:
                if (!bench_java_argv(argv, &a, bench_perf_jvm,
                                     "org.apache.kafka.tools."
                                     "ProducerPerformance",
                                     e->log4j, buf, sizeof(buf), &off))
                        goto out;
                argv[a++] = "--topic";
                argv[a++] = dst;
                argv[a++] = "--num-records";
                argv[a++] = bench_buf_printf(buf, sizeof(buf), &off, "%zu",
                                             o->records);
                argv[a++] = "--record-size";
                argv[a++] = bench_buf_printf(buf, sizeof(buf), &off, "%zu",
                                             o->value_size);
                argv[a++] = "--throughput";
                argv[a++] = "-1";
                argv[a++] = "--producer-props";
                argv[a++] = bench_buf_printf(buf, sizeof(buf), &off,
                                             "bootstrap.servers=%s", e->west);
                argv[a++] = "acks=all";
                argv[a++] = "enable.idempotence=true";
                break;
        default:
                break;
        }
        argv[a] = NULL;

        t0   = bench_now_s();
        proc = harness_proc_spawn(argv, out, err, errstr, sizeof(errstr));
        if (!proc) {
                bench_errorf("%s: %s", tag, errstr);
                goto out;
        }
        t_last_move = t0;
        for (;;) {
                bool exited = harness_proc_wait(proc, 0, NULL) == AAGW_OK;
                double now, cpu;
                long   kib;

                /* The last figures of a process that may end by itself
                 * (ProducerPerformance). */
                if (!exited) {
                        kib = bench_proc_hwm_kib(harness_proc_pid(proc));
                        hwm = kib > hwm ? kib : hwm;
                        cpu = bench_tree_cpu_s(harness_proc_pid(proc));
                        if (!isnan(cpu))
                                cpu_end = cpu;
                }

                /* A new topic's leaders take a moment to be known:
                 * errors count as no progress (the timeouts below). */
                if (bench_watermarks(e->west_rk, dst, o->partitions, false,
                                     NULL, &sum, errstr, sizeof(errstr)))
                        sum = last < 0 ? 0 : last;
                now = bench_now_s();
                if (sum != last) {
                        last        = sum;
                        t_last_move = now;
                }
                if (sum > 0 && !t_first) {
                        t_first   = now;
                        first_cnt = sum;
                        cpu_first = cpu_end;
                }
                if (sum >= n) {
                        t_done   = now;
                        cpu_done = cpu_end;
                        break;
                }
                if (exited) {
                        bench_errorf("%s: exited with %" PRId64 " of %" PRId64
                                     " records at the target (see %s)",
                                     tag, sum, n, err);
                        goto out;
                }
                if (!t_first && now - t0 > START_TIMEOUT_S) {
                        bench_errorf("%s: no record at the target after "
                                     "%.0f s (see %s)",
                                     tag, START_TIMEOUT_S, err);
                        goto out;
                }
                if (t_first && now - t_last_move > STALL_TIMEOUT_S) {
                        bench_errorf("%s: stalled at %" PRId64 " of %" PRId64
                                     " (see %s)",
                                     tag, sum, n, err);
                        goto out;
                }
                bench_nap_ms(POLL_MS);
        }
        /* Settled: a late duplicate would show now. */
        bench_nap_ms(1000);
        {
                long   kib = bench_proc_hwm_kib(harness_proc_pid(proc));
                double cpu = bench_tree_cpu_s(harness_proc_pid(proc));
                hwm        = kib > hwm ? kib : hwm;
                if (!isnan(cpu))
                        cpu_end = cpu;
        }
        if (m == M_PERF) {
                if (bench_watermarks(e->west_rk, dst, o->partitions, false,
                                     NULL, &sum, errstr, sizeof(errstr)) ||
                    sum != n) {
                        bench_errorf("%s: %" PRId64 " records, want %" PRId64,
                                     tag, sum, n);
                        goto out;
                }
        } else if (bench_counts_check(e->west_rk, dst, o->partitions,
                                      e->expect, NULL, e->scratch, "target",
                                      errstr, sizeof(errstr))) {
                bench_errorf("%s: %s", tag, errstr);
                goto out;
        }
        res->steady_rps =
            t_done > t_first && first_cnt < n
                ? (double)(n - first_cnt) / (t_done - t_first)
                : (double)n / (t_done - t0);
        res->wall_rps  = (double)n / (t_done - t0);
        res->startup_s = t_first - t0;
        res->cpu_per_m = first_cnt < n ? (cpu_done - cpu_first) * 1e6 /
                                             (double)(n - first_cnt)
                                       : NAN;
        res->cpu_total_per_m = cpu_end * 1e6 / (double)n;
        res->hwm_mib         = hwm > 0 ? (double)hwm / 1024 : NAN;
        res->valid           = true;
        printf("BENCH_MM2 run=%d m=%c name=%s records=%" PRId64
               " steady_rps=%.0f wall_rps=%.0f startup_s=%.2f "
               "cpu_s_per_1m=%.3f cpu_total_s_per_1m=%.3f hwm_mib=%.1f%s%s\n",
               run + 1, letters[m], names[m], n, res->steady_rps,
               res->wall_rps, res->startup_s, res->cpu_per_m,
               res->cpu_total_per_m, res->hwm_mib,
               e->wan_ms ? " wan_rtt_ms=" : "", e->wan_ms ? e->wan_ms : "");
        fflush(stdout);
        rc = 0;
out:
        if (proc) {
                harness_proc_signal(proc, SIGTERM);
                if (harness_proc_wait(proc, BENCH_STOP_TIMEOUT_MS, NULL) !=
                    AAGW_OK) {
                        bench_errorf("%s: no exit on SIGTERM; killing", tag);
                        harness_proc_signal(proc, SIGKILL);
                        harness_proc_wait(proc, 10000, NULL);
                }
                harness_proc_destroy(proc);
        }
        if (!o->keep) {
                const char *t[1] = {dst};
                bench_topics_delete(e->west_rk, t, 1);
                harness_rmtree(state);
        }
        free(out);
        free(err);
        free(state);
        free(conf);
        return rc;
}

/* ---------------------------------------------------------------- MAIN -- */

static void usage(FILE *f) {
        fprintf(f,
                "Usage: scripts/kafka-clusters east west -- bench_mm2 "
                "[OPTIONS]\n"
                "aagw against MirrorMaker 2 on two real clusters "
                "(docs/benchmarks.md):\n"
                "  a aagw, m MM2 tasks.max 1, n MM2 tasks.max N, b bare "
                "librdkafka loop,\n"
                "  p ProducerPerformance (the ceiling), o aagw with one "
                "source connection\n"
                "  (replication.fetch_connections=1)\n"
                "\n"
                "  -n, --records N       (default 1000000)\n"
                "  -r, --runs K          (default 1)\n"
                "  -m, --only LETTERS    of amnbpo (default amnbp)\n"
                "  -p, --partitions P    (default 16)\n"
                "  -s, --value-size S    (default 200)\n"
                "  -t, --mm2-tasks N     tasks.max of n (default 2)\n"
                "      --aagw-arg ARG    append ARG to aagw's command line\n"
                "      --wan             the replicators reach east over "
                "the WAN listener\n"
                "                        (scripts/kafka-clusters --wan-delay "
                "MS: MS of round trip)\n"
                "  -k, --keep            keep logs and topics\n"
                "Needs AAGW_TEST_BOOTSTRAPS_EAST, _WEST and AAGW_KAFKA_LIB "
                "(scripts/kafka-clusters);\n"
                "--wan AAGW_TEST_WAN_BOOTSTRAPS_EAST too.\n");
}

static int parse(int argc, char **argv, struct opts *o) {
        static const struct option lo[] = {
            {"records", required_argument, NULL, 'n'},
            {"runs", required_argument, NULL, 'r'},
            {"only", required_argument, NULL, 'm'},
            {"partitions", required_argument, NULL, 'p'},
            {"value-size", required_argument, NULL, 's'},
            {"mm2-tasks", required_argument, NULL, 't'},
            {"aagw-arg", required_argument, NULL, 'A'},
            {"wan", no_argument, NULL, 'W'},
            {"keep", no_argument, NULL, 'k'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0}};
        const char *only = "amnbp";
        size_t      v;
        int         opt;

        memset(o, 0, sizeof(*o));
        o->records    = 1000000;
        o->value_size = 200;
        o->runs       = 1;
        o->partitions = 16;
        o->mm2_tasks  = 2;
        while ((opt = getopt_long(argc, argv, "n:r:m:p:s:t:kh", lo, NULL)) !=
               -1) {
                switch (opt) {
                case 'n':
                        if (!bench_parse_size(optarg, 100, 1000000000,
                                              &o->records))
                                goto bad;
                        break;
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
                case 's':
                        if (!bench_parse_size(optarg, 16, 1000000,
                                              &o->value_size))
                                goto bad;
                        break;
                case 't':
                        if (!bench_parse_size(optarg, 1, 64, &v))
                                goto bad;
                        o->mm2_tasks = (int)v;
                        snprintf(mm2_n_name, sizeof(mm2_n_name), "mm2_%dtask%s",
                                 o->mm2_tasks, o->mm2_tasks == 1 ? "" : "s");
                        break;
                case 'A':
                        if (o->aagw_argc == BENCH_LIST_MAX)
                                goto bad;
                        o->aagw_args[o->aagw_argc++] = optarg;
                        break;
                case 'W':
                        o->wan = true;
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
        double v[128];
        int    k = 0;
        for (int i = 0; i < n && k < 128; i++)
                if (!isnan(in[i]))
                        v[k++] = in[i];
        if (!k)
                return NAN;
        qsort(v, (size_t)k, sizeof(*v), cmp_double);
        return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

static double ratio(const struct res *r, enum meas x, enum meas y,
                    size_t off) {
        if (!r[x].valid || !r[y].valid)
                return NAN;
        return *(const double *)((const char *)&r[x] + off) /
               *(const double *)((const char *)&r[y] + off);
}

int main(int argc, char **argv) {
        struct opts  o;
        struct env   e;
        struct res  *all;
        char         self[PATH_MAX], errstr[512], *dir;
        int          failed = 0;

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
        if (!e.east || !e.west || !getenv("AAGW_KAFKA_LIB")) {
                usage(stderr);
                return BENCH_EXIT_USAGE;
        }
        e.src = e.east;
        if (o.wan && bench_wan_source(&e.src, &e.wan_ms))
                return BENCH_EXIT_USAGE;
        dir = bench_setup(BENCH_AAGW_BIN, "mm2", self, sizeof(self));
        if (!dir)
                return BENCH_EXIT_RUNTIME;
        e.self = self;
        e.dir  = dir;
        {
                char *l = harness_path_join(dir, "log4j2.properties");
                snprintf(e.log4j, sizeof(e.log4j), "%s", l);
                free(l);
        }
        all       = calloc((size_t)(o.runs * M_CNT), sizeof(*all));
        e.expect  = calloc((size_t)o.partitions, sizeof(*e.expect));
        e.scratch = calloc((size_t)o.partitions, sizeof(*e.scratch));
        e.east_rk = bench_client_new(RD_KAFKA_PRODUCER, e.east, NULL, errstr,
                                     sizeof(errstr));
        e.west_rk = bench_client_new(RD_KAFKA_PRODUCER, e.west, NULL, errstr,
                                     sizeof(errstr));
        if (!all || !e.expect || !e.scratch || !e.east_rk || !e.west_rk ||
            bench_log4j_write(e.log4j)) {
                bench_errorf("setup: %s", errstr);
                return BENCH_EXIT_RUNTIME;
        }
        bench_print_host("");
        printf("real Kafka east=%s west=%s; %zu records x %zu B (keyed), %d "
               "partitions, %d run%s; aagw %s; logs in %s\n",
               e.east, e.west, o.records, o.value_size, o.partitions, o.runs,
               o.runs == 1 ? "" : "s", harness_aagw_bin(), dir);
        if (e.wan_ms)
                printf("WAN: the replicators reach east at %s, %s ms of "
                       "round trip\n",
                       e.src, e.wan_ms);
        fflush(stdout);

        for (int run = 0; run < o.runs; run++) {
                struct res *r = &all[run * M_CNT];
                char        src[64];

                snprintf(src, sizeof(src), "mm2b-r%d", run + 1);
                printf("\nrun %d: order", run + 1);
                for (int i = 0; i < M_CNT; i++)
                        if (o.only & (1u << ((i + run) % M_CNT)))
                                printf(" %c", letters[(i + run) % M_CNT]);
                printf("\n");
                fflush(stdout);
                if (bench_topic_create(e.east_rk, src, o.partitions, errstr,
                                       sizeof(errstr)) ||
                    preload(&e, src)) {
                        bench_errorf("run %d: %s", run + 1, errstr);
                        failed++;
                        continue;
                }
                for (int i = 0; i < M_CNT; i++) {
                        int m = (i + run) % M_CNT;
                        if ((o.only & (1u << m)) &&
                            measure(&e, run, (enum meas)m, src, &r[m]))
                                failed++;
                }
                if (!o.keep) {
                        const char *t[1] = {src};
                        bench_topics_delete(e.east_rk, t, 1);
                }
                printf("run %d: %-14s %10s %10s %8s %9s %9s %8s\n", run + 1,
                       "", "steady r/s", "wall r/s", "start s", "CPU s/1M",
                       "total/1M", "HWM MiB");
                for (int m = 0; m < M_CNT; m++)
                        if ((o.only & (1u << m)) && r[m].valid)
                                printf("  %c %-14s %10.0f %10.0f %8.1f %9.2f "
                                       "%9.2f %8.0f\n",
                                       letters[m], names[m], r[m].steady_rps,
                                       r[m].wall_rps, r[m].startup_s,
                                       r[m].cpu_per_m, r[m].cpu_total_per_m,
                                       r[m].hwm_mib);
                const size_t rps = offsetof(struct res, steady_rps);
                const size_t cpu = offsetof(struct res, cpu_per_m);
                const size_t hwm = offsetof(struct res, hwm_mib);
                printf("BENCH_MM2_RATIOS run=%d a_m=%.3f a_n=%.3f a_b=%.3f "
                       "a_p=%.3f cpu_m_a=%.3f cpu_n_a=%.3f cpu_a_b=%.3f "
                       "hwm_a_m=%.3f hwm_a_n=%.3f\n",
                       run + 1, ratio(r, M_AAGW, M_MM2_1, rps),
                       ratio(r, M_AAGW, M_MM2_2, rps),
                       ratio(r, M_AAGW, M_BARE, rps),
                       ratio(r, M_AAGW, M_PERF, rps),
                       ratio(r, M_MM2_1, M_AAGW, cpu),
                       ratio(r, M_MM2_2, M_AAGW, cpu),
                       ratio(r, M_AAGW, M_BARE, cpu),
                       ratio(r, M_AAGW, M_MM2_1, hwm),
                       ratio(r, M_AAGW, M_MM2_2, hwm));
                fflush(stdout);
        }

        printf("\nsummary: medians over %d run%s\n", o.runs,
               o.runs == 1 ? "" : "s");
        for (int m = 0; m < M_CNT; m++) {
                double v[5][100];
                if (!(o.only & (1u << m)))
                        continue;
                for (int run = 0; run < o.runs && run < 100; run++) {
                        const struct res *r = &all[run * M_CNT + m];
                        v[0][run] = r->valid ? r->steady_rps : NAN;
                        v[1][run] = r->valid ? r->cpu_per_m : NAN;
                        v[2][run] = r->valid ? r->cpu_total_per_m : NAN;
                        v[3][run] = r->valid ? r->hwm_mib : NAN;
                        v[4][run] = r->valid ? r->startup_s : NAN;
                }
                printf("  %c %-14s steady %8.0f rec/s  CPU %6.2f s/1M (total "
                       "%6.2f)  HWM %6.0f MiB  start %5.1f s\n",
                       letters[m], names[m], median(v[0], o.runs),
                       median(v[1], o.runs), median(v[2], o.runs),
                       median(v[3], o.runs), median(v[4], o.runs));
        }
        {
                static const struct {
                        const char *what;
                        enum meas   x, y;
                        size_t      off;
                } q[] = {
                    {"records/s a/m (MM2 1 task)", M_AAGW, M_MM2_1,
                     offsetof(struct res, steady_rps)},
                    {"records/s a/n (MM2 n tasks)", M_AAGW, M_MM2_2,
                     offsetof(struct res, steady_rps)},
                    {"records/s a/b", M_AAGW, M_BARE,
                     offsetof(struct res, steady_rps)},
                    {"records/s a/p", M_AAGW, M_PERF,
                     offsetof(struct res, steady_rps)},
                    {"records/s a/o (one connection)", M_AAGW, M_AAGW_1,
                     offsetof(struct res, steady_rps)},
                    {"records per CPU s a/m (target >= 3)", M_MM2_1, M_AAGW,
                     offsetof(struct res, cpu_per_m)},
                    {"records per CPU s a/n (target >= 3)", M_MM2_2, M_AAGW,
                     offsetof(struct res, cpu_per_m)},
                    {"CPU per record a/b", M_AAGW, M_BARE,
                     offsetof(struct res, cpu_per_m)},
                    {"peak RSS a/m (target <= 0.25)", M_AAGW, M_MM2_1,
                     offsetof(struct res, hwm_mib)},
                    {"peak RSS a/n (target <= 0.25)", M_AAGW, M_MM2_2,
                     offsetof(struct res, hwm_mib)},
                };
                for (size_t k = 0; k < sizeof(q) / sizeof(q[0]); k++) {
                        double v[100];
                        if (!(o.only & (1u << q[k].x)) ||
                            !(o.only & (1u << q[k].y)))
                                continue;
                        printf("  %-38s", q[k].what);
                        for (int run = 0; run < o.runs && run < 100; run++) {
                                v[run] = ratio(&all[run * M_CNT], q[k].x,
                                               q[k].y, q[k].off);
                                printf(" %.2f", v[run]);
                        }
                        printf("  median %.2f\n", median(v, o.runs));
                }
        }
        rd_kafka_destroy(e.east_rk);
        rd_kafka_destroy(e.west_rk);
        free(all);
        free(e.expect);
        free(e.scratch);
        if (!failed && !o.keep)
                harness_rmtree(dir);
        else
                printf("logs kept in %s\n", dir);
        free(dir);
        return failed ? BENCH_EXIT_RUNTIME : BENCH_EXIT_OK;
}
