/*
 * tests/bench/bench_replicate.c: the replication benchmark.
 *
 * One direction, N records (default 1,000,000) of 200-byte values with
 * keys, on a 64-partition topic, between two embedded clusters that
 * `aagw sandbox` runs in a separate process.  In the same run it measures
 *
 *   a  aagw           the gateway, active-passive east -> west
 *   b  bare loop      a plain librdkafka consume -> produce loop (this
 *                     program in --bare mode): the fair baseline for a
 *                     replicator (idempotent acks=all producer, same
 *                     partition, key/value/headers/timestamp copied)
 *   c  kcat | kcat    `kcat -C ... | kcat -P ...`, the shell-script copy
 *   d  kcat -P        kcat producing the same records from a file: the
 *                     practical ceiling, since a replicator cannot write
 *                     faster than a plain producer
 *   e  bare, big      b with a consumer queue that holds more than a
 *      prefetch       second of data, which avoids a fetch stall of
 *                     librdkafka < 2.2 (see bare_big_props): what a
 *                     replicator can reach here (informational)
 *   f  bare + header  b adding one header per copy, named and sized as
 *                     aagw's provenance header (aagw.prov, a fixed value
 *                     of the length aagw writes here): what carrying
 *                     provenance costs librdkafka alone (informational)
 *
 * and reports records/s, CPU seconds per million records and the ratios
 * a/b, a/c, a/d and CPU a/b (and, without targets, a/e, a/f, CPU a/f).  docs/benchmarks.md explains the method and
 * holds the results.
 *
 * Method, per measurement:
 *  - every measurement has its own source and target topics in the one
 *    sandbox of the round, so no measurement sees another's records;
 *  - the source topic is preloaded with all N records (explicit partitions
 *    from librdkafka's consistent partitioner, which kcat uses too) before
 *    the measured program starts;
 *  - the sum of the target's high watermarks is polled every 20 ms:
 *    "steady" records/s is measured from the first poll that sees records
 *    at the target to the poll that sees all N, so group joins and other
 *    start-up costs do not dominate; "wall" records/s includes start-up;
 *  - CPU is the measured child's rusage (user + sys, including the
 *    processes it waited for, so both kcats of a pipe), taken as the
 *    RUSAGE_CHILDREN delta across its reaping: nothing else is reaped
 *    meanwhile;
 *  - a measurement counts only if every target partition ends up holding
 *    exactly the records its source partition got (checked again after the
 *    program exited, so late duplicates are caught): a run that lost or
 *    duplicated records is an error, not a figure.
 *
 * Diagnostics, in the log directory (kept with --keep or after a failure):
 * per measurement the child's stdout/stderr, a ".trace" of the target count
 * at every poll (stalls show as flat stretches) and, for the replicators,
 * a ".threads" file with the CPU seconds of each thread just before the
 * SIGTERM.  The "others" column is the machine's CPU, in cores, that
 * neither the measured program, the sandbox nor this program used during
 * the measurement: other jobs on a shared machine, i.e. the noise.
 *
 * Exit status: 0 every measurement was valid, 1 one was not (or a child
 * failed), 2 usage, 77 kcat is missing (meson reports SKIP).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <librdkafka/rdkafka.h>

#include "bench_util.h"
#include "harness.h"

#ifndef BENCH_AAGW_BIN
#define BENCH_AAGW_BIN "aagw"
#endif

#define PROG "bench_replicate"

enum { EXIT_SKIP = 77 }; /* kcat is missing; BENCH_EXIT_* for the rest */

/* Targets from the issue: a/d >= 0.7, a/c >= 2.5, CPU a/b <= 1.25. */
#define TARGET_A_D 0.70
#define TARGET_A_C 2.50
#define TARGET_CPU_A_B 1.25

/* ------------------------------------------------------------- TYPES --- */

enum meas {
        M_AAGW,
        M_BARE,
        M_PIPE,
        M_PRODUCE,
        M_BARE_BIG,
        M_BARE_HDR,
        M_CNT
};

static const struct bench_meas_info meas_info[M_CNT] = {
    {'a', "aagw", "aagw"},
    {'b', "bare", "bare librdkafka loop"},
    {'c', "kcat_pipe", "kcat -C | kcat -P"},
    {'d', "kcat_produce", "kcat -P (produce only)"},
    {'e', "bare_prefetch", "bare loop, big prefetch"},
    {'f', "bare_header", "bare loop + provenance hdr"},
};

/* The consumer settings of measurement e.  librdkafka before 2.2 stops
 * fetching once a consumer's queue holds queued.min.messages records or
 * queued.max.messages.kbytes, and re-checks only about once a second
 * (confluentinc/librdkafka#2879, fixed by fetch.queue.backoff.ms): a loop
 * that drains the queue faster than that idles for the rest of the
 * second.  With the queue bounds of e (more than a second of data) the
 * loop never idles: e shows what a replicator can reach here once it
 * avoids that stall, at the price of the memory. */
static const char *const bare_big_props[] = {
    "consumer.queued.min.messages=1000000",
    "consumer.queued.max.messages.kbytes=1048576",
};

struct result {
        bool    valid;
        double  steady_rps, wall_rps;
        double  startup_s, wall_s;
        double  cpu_user_s, cpu_sys_s, cpu_per_m;
        double  mock_cpu_per_m;
        double  others_cores; /* CPU used by everything else, in cores */
        int64_t first_cnt;    /* records at the target at the first sighting */
};

struct round {
        struct bench_round b; /* first: the bench_prog callbacks cast */
        const char        *records_file;
        int64_t           *expect; /* records per partition */
        int64_t           *scratch;
        struct result      res[M_CNT];
        struct result (*all)[M_CNT]; /* every run's res (b.all) */
};

/* ----------------------------------------------------------- RECORDS --- */

/* Write the N records as kcat -P -K '\x1f' input lines. */
static int records_file_write(const struct bench_opts *o, const char *path) {
        FILE *f = fopen(path, "w");
        char  key[32], *val = malloc(o->value_size + 1);

        if (!f || !val) {
                bench_errorf("%s: %s", path, strerror(errno));
                if (f)
                        fclose(f);
                free(val);
                return -1;
        }
        for (size_t i = 0; i < o->records; i++) {
                bench_rec_key(i, key, sizeof(key));
                bench_rec_value(i, val, o->value_size, false);
                fprintf(f, "%s\x1f%s\n", key, val);
        }
        free(val);
        if (ferror(f) | fclose(f)) {
                bench_errorf("%s: write failed", path);
                return -1;
        }
        return 0;
}

/* ------------------------------------------------------------- KAFKA --- */

/* Check that every partition of 'topic' holds what r->expect says. */
static int counts_check(struct round *r, rd_kafka_t *rk, const char *topic,
                        const char *what, char *errstr, size_t errstr_size) {
        return bench_counts_check(rk, topic, r->b.o->partitions, r->expect,
                                  NULL, r->scratch, what, errstr, errstr_size);
}

/* Produce the N records to 'topic' on east, each to the partition kcat
 * would pick, and wait until all are acknowledged. */
static int preload(struct round *r, const char *topic, char *errstr,
                   size_t errstr_size) {
        const struct bench_opts *o   = r->b.o;
        struct bench_preload     pl  = {0};
        rd_kafka_t              *rk  = NULL;
        rd_kafka_topic_t        *rkt = NULL;
        char                    *val = malloc(o->value_size + 1);
        int                      rc  = -1;
        char                     key[32];

        if (!val) {
                snprintf(errstr, errstr_size, "out of memory");
                return -1;
        }
        rk = bench_preload_producer(r->b.east, &pl, errstr, errstr_size);
        if (!rk)
                goto out;
        rkt = rd_kafka_topic_new(rk, topic, NULL);
        for (size_t i = 0; i < o->records; i++) {
                size_t        kl = bench_rec_key(i, key, sizeof(key));
                rd_kafka_vu_t vu[5];
                size_t        n;

                bench_rec_value(i, val, o->value_size, false);
                n = bench_rec_vu(
                    vu, rkt, bench_rec_partition(rkt, key, kl, o->partitions),
                    key, kl, val, o->value_size);
                if (bench_produce(rk, vu, n, topic, errstr, errstr_size))
                        goto out;
        }
        rd_kafka_flush(rk, 120000);
        if (pl.failed || pl.delivered != (int64_t)o->records) {
                snprintf(errstr, errstr_size,
                         "preload %s: %" PRId64 " of %zu delivered, %" PRId64
                         " failed (%s)",
                         topic, pl.delivered, o->records, pl.failed,
                         pl.first_err[0] ? pl.first_err : "timeout");
                goto out;
        }
        rc =
            counts_check(r, r->b.east_rk, topic, "source", errstr, errstr_size);
out:
        if (rkt)
                rd_kafka_topic_destroy(rkt);
        if (rk)
                rd_kafka_destroy(rk);
        free(val);
        return rc;
}

/* ------------------------------------------------------------- ROUND --- */

static void topic_names(int run, enum meas m, char *src, char *dst,
                        size_t size) {
        snprintf(src, size, "bench-r%d-%c", run + 1, meas_info[m].letter);
        switch (m) {
        case M_AAGW:
                snprintf(dst, size, "east.%.40s", src); /* prefix policy */
                break;
        case M_PRODUCE:
                snprintf(dst, size, "%.40s", src); /* produced on west */
                break;
        default:
                snprintf(dst, size, "%.40s.copy", src);
                break;
        }
}

/* The command line of measurement 'm', into 'argv' (BENCH_ARGV_MAX
 * entries). */
static void build_argv(struct round *r, enum meas m, const char *src,
                       const char *dst, const char *statedir, const char **argv,
                       char *buf, size_t bufsize) {
        /* clang-format off */
        static const char *const mode[] = {"--mode", "active-passive",
                                           "--primary", "east", NULL};
        static const char *const tail[] = {
            "--log-level", "warn",
            /* Replication alone: the unify stage has its own benchmark
             * (bench_unify). */
            "--unify", "off",
            "--set", "replication.refresh_topics_interval=1s",
            "--set", "clusters.east.properties.consumer.session.timeout.ms=6000",
            NULL};
        /* clang-format on */
        size_t a = 0;

        switch (m) {
        case M_AAGW:
                bench_aagw_argv(&r->b, argv, src, statedir, mode, tail, buf,
                                bufsize);
                return;
        case M_BARE:
                bench_bare_argv(&r->b, argv, src, r->b.west, dst, NULL, 0);
                return;
        case M_BARE_BIG:
                bench_bare_argv(
                    &r->b, argv, src, r->b.west, dst, bare_big_props,
                    sizeof(bare_big_props) / sizeof(bare_big_props[0]));
                return;
        case M_BARE_HDR: {
                /* What aagw writes for a record of 'src' here (origin
                 * east, path east>west, source coordinates, HLC; the id
                 * is derived from the coordinates, so not carried), for
                 * a record in the middle of partition 63. */
                const char *hdr[1] = {buf};
                snprintf(buf, bufsize,
                         "bench.header=aagw.prov=1;east>west;%s:63:%" PRId64
                         ";1764480000123:0;",
                         src,
                         (int64_t)(r->b.o->records / 2 /
                                   (size_t)r->b.o->partitions));
                bench_bare_argv(&r->b, argv, src, r->b.west, dst, hdr, 1);
                return;
        }
        case M_PIPE:
                /* One shell, so that wait4() on it counts both kcats.
                 * Bootstraps and topic names hold no shell metacharacters
                 * (host:port lists and [A-Za-z0-9._-]). */
                snprintf(buf, bufsize,
                         "'%s' -C -b %s -t %s -o beginning -e -q "
                         "-f '%%k\\x1f%%s\\n' | '%s' -P -b %s -t %s "
                         "-K '\\x1f'",
                         harness_kcat_bin(), r->b.east, src, harness_kcat_bin(),
                         r->b.west, dst);
                argv[a++] = "/bin/sh";
                argv[a++] = "-c";
                argv[a++] = buf;
                break;
        case M_PRODUCE:
                argv[a++] = harness_kcat_bin();
                argv[a++] = "-P";
                argv[a++] = "-b";
                argv[a++] = r->b.west;
                argv[a++] = "-t";
                argv[a++] = dst;
                argv[a++] = "-K";
                argv[a++] = "\\x1f";
                argv[a++] = "-l";
                argv[a++] = r->records_file;
                break;
        default:
                break;
        }
        argv[a] = NULL;
}

/* Run measurement 'm' of the round: preload, start, watch the target,
 * stop, verify.  Fills r->res[m]; @returns 0, or -1 (reason printed). */
static int measure(struct bench_round *b, int mi) {
        struct round            *r   = (struct round *)b;
        const enum meas          m   = (enum meas)mi;
        const struct bench_opts *o   = b->o;
        struct result           *res = &r->res[m];
        const int64_t            n   = (int64_t)o->records;
        char                     src[64], dst[64], errstr[1024], buf[4096];
        const char              *argv[BENCH_ARGV_MAX];
        struct bench_meas        mm;
        struct bench_sample      s0, s1;
        struct rusage            ru0, ru1;
        int                      rc = -1;

        memset(res, 0, sizeof(*res));
        topic_names(b->run, m, src, dst, sizeof(src));
        if (bench_meas_init(&mm, b, meas_info[m].letter, meas_info[m].label))
                goto out;
        if (m != M_PRODUCE && preload(r, src, errstr, sizeof(errstr))) {
                bench_errorf("%s: %s", mm.tag, errstr);
                goto out;
        }
        if (bench_meas_target_empty(&mm, b->west_rk, dst, o->partitions))
                goto out;
        build_argv(r, m, src, dst, mm.statedir, argv, buf, sizeof(buf));

        /* Nothing but this child is reaped between ru0 and ru1. */
        getrusage(RUSAGE_CHILDREN, &ru0);
        bench_sample_take(&s0, NULL, b->sandbox);
        if (bench_meas_run(&mm, b, argv, s0.t, b->west_rk, dst, n, NULL, NULL))
                goto out;
        /* Replicators run until told to stop; the kcats end by themselves
         * (-e: at the end of every partition; -P: at the end of input). */
        if (bench_meas_stop(&mm, m == M_AAGW || m == M_BARE ||
                                     m == M_BARE_BIG || m == M_BARE_HDR))
                goto out;
        getrusage(RUSAGE_CHILDREN, &ru1);
        bench_sample_take(&s1, NULL, b->sandbox);
        /* The record counts below decide for aagw under a wrapper. */
        if (bench_meas_exit_ok(
                &mm, m == M_AAGW && o->aagw_prefix ? o->aagw_prefix[0] : NULL))
                goto out;
        /* After the exit: nothing lost, nothing written twice, every
         * record in the partition it belongs to. */
        if (counts_check(r, b->west_rk, dst, "target", errstr,
                         sizeof(errstr))) {
                bench_errorf("%s: %s", mm.tag, errstr);
                goto out;
        }

        res->first_cnt  = mm.first_cnt;
        res->cpu_user_s = bench_tv_s(ru1.ru_utime) - bench_tv_s(ru0.ru_utime);
        res->cpu_sys_s  = bench_tv_s(ru1.ru_stime) - bench_tv_s(ru0.ru_stime);
        res->cpu_per_m  = (res->cpu_user_s + res->cpu_sys_s) * 1e6 / (double)n;
        res->mock_cpu_per_m = (s1.mock - s0.mock) * 1e6 / (double)n;
        res->others_cores =
            bench_others_cores(&s0, &s1, res->cpu_user_s + res->cpu_sys_s);
        res->startup_s = mm.t_first - mm.t0;
        res->wall_s    = mm.t_done - mm.t0;
        res->wall_rps  = (double)n / res->wall_s;
        /* Records that arrived after the first sighting, over the time
         * they took.  A run too short for two polls falls back to wall. */
        res->steady_rps =
            mm.t_done > mm.t_first && res->first_cnt < n
                ? (double)(n - res->first_cnt) / (mm.t_done - mm.t_first)
                : res->wall_rps;
        res->valid = true;
        printf("BENCH run=%d m=%c name=%s records=%" PRId64
               " value_bytes=%zu partitions=%d steady_rps=%.0f "
               "wall_rps=%.0f wall_s=%.3f startup_s=%.3f cpu_user_s=%.3f "
               "cpu_sys_s=%.3f cpu_s_per_1m=%.3f mock_cpu_s_per_1m=%.3f "
               "others_cores=%.2f\n",
               b->run + 1, meas_info[m].letter, meas_info[m].name, n,
               o->value_size, o->partitions, res->steady_rps, res->wall_rps,
               res->wall_s, res->startup_s, res->cpu_user_s, res->cpu_sys_s,
               res->cpu_per_m, res->mock_cpu_per_m, res->others_cores);
        fflush(stdout);
        rc = 0;
out:
        bench_meas_deinit(&mm, false);
        return rc;
}

/* ------------------------------------------------------------ REPORT --- */

static double ratio(const struct result *res, enum meas x, enum meas y) {
        return bench_ratio(res, sizeof(*res),
                           offsetof(struct result, steady_rps), x, y);
}

static double cpu_ratio(const struct result *res, enum meas y) {
        return bench_ratio(res, sizeof(*res),
                           offsetof(struct result, cpu_per_m), M_AAGW, y);
}

static void print_round(const struct round *r) {
        const struct result *res = r->res;

        printf("\nrun %d of %d: %zu records x %zu B, %d partitions\n",
               r->b.run + 1, r->b.o->runs, r->b.o->records, r->b.o->value_size,
               r->b.o->partitions);
        printf("  %-26s %12s %12s %8s %8s %9s %9s %7s\n", "measurement",
               "steady rec/s", "wall rec/s", "wall s", "start s", "CPU s/1M",
               "mock s/1M", "others");
        for (int m = 0; m < M_CNT; m++) {
                if (!(r->b.o->only & (1u << m)) ||
                    !bench_print_row(&meas_info[m], res[m].valid, 26, 12))
                        continue;
                printf(" %12.0f %12.0f %8.2f %8.2f %9.2f %9.2f "
                       "%7.2f\n",
                       res[m].steady_rps, res[m].wall_rps, res[m].wall_s,
                       res[m].startup_s, res[m].cpu_per_m,
                       res[m].mock_cpu_per_m, res[m].others_cores);
        }
        printf("  ratios (steady): a/b %.2f  a/c %.2f  a/d %.2f   CPU a/b "
               "%.2f   (a/e %.2f  a/f %.2f  CPU a/f %.2f)\n",
               ratio(res, M_AAGW, M_BARE), ratio(res, M_AAGW, M_PIPE),
               ratio(res, M_AAGW, M_PRODUCE), cpu_ratio(res, M_BARE),
               ratio(res, M_AAGW, M_BARE_BIG), ratio(res, M_AAGW, M_BARE_HDR),
               cpu_ratio(res, M_BARE_HDR));
        printf("BENCH_RATIOS run=%d a_b=%.3f a_c=%.3f a_d=%.3f cpu_a_b=%.3f "
               "a_e=%.3f a_f=%.3f cpu_a_f=%.3f\n",
               r->b.run + 1, ratio(res, M_AAGW, M_BARE),
               ratio(res, M_AAGW, M_PIPE), ratio(res, M_AAGW, M_PRODUCE),
               cpu_ratio(res, M_BARE), ratio(res, M_AAGW, M_BARE_BIG),
               ratio(res, M_AAGW, M_BARE_HDR), cpu_ratio(res, M_BARE_HDR));
        fflush(stdout);
}

static void print_summary(const struct bench_opts *o, const void *all) {
        static const struct bench_field fields[] = {
            {"steady rec/s", offsetof(struct result, steady_rps), 0},
            {"wall rec/s", offsetof(struct result, wall_rps), 0},
            {"CPU s/1M", offsetof(struct result, cpu_per_m), 2},
            {"others (cores)", offsetof(struct result, others_cores), 2},
            {NULL, 0, 0},
        };
        const size_t             rps      = offsetof(struct result, steady_rps);
        const size_t             cpu      = offsetof(struct result, cpu_per_m);
        const struct bench_ratio ratios[] = {
            {"a/d", rps, M_AAGW, M_PRODUCE, TARGET_A_D, true},
            {"a/c", rps, M_AAGW, M_PIPE, TARGET_A_C, true},
            {"CPU a/b", cpu, M_AAGW, M_BARE, TARGET_CPU_A_B, false},
            {"(a/b, no target)", rps, M_AAGW, M_BARE, NAN, false},
            {"(a/e, no target)", rps, M_AAGW, M_BARE_BIG, NAN, false},
            {"(CPU a/f, no target)", cpu, M_AAGW, M_BARE_HDR, NAN, false},
            {"(CPU f/b, no target)", cpu, M_BARE_HDR, M_BARE, NAN, false},
            {NULL, 0, 0, 0, 0, false},
        };

        bench_print_summary(o, M_CNT, all, sizeof(struct result), fields,
                            ratios);
}

/* -------------------------------------------------------------- MAIN --- */

static void usage(FILE *out) {
        fprintf(out,
                "Usage: bench_replicate [OPTIONS]\n"
                "\n"
                "Replication benchmark, one direction between two `aagw "
                "sandbox` clusters:\n"
                "  a  aagw\n"
                "  b  a bare librdkafka consume -> produce loop (this program, "
                "--bare)\n"
                "  c  kcat -C | kcat -P\n"
                "  d  kcat -P of the same records from a file (the ceiling)\n"
                "  e  b with a consumer queue big enough to avoid librdkafka's "
                "fetch stall\n"
                "See docs/benchmarks.md.\n"
                "\n"
                "Options:\n"
                "  -n, --records N       records per measurement (default "
                "1000000)\n"
                "  -r, --runs K          rounds, each with a fresh sandbox "
                "(default 1)\n"
                "  -m, --only LETTERS    measure only these of abcdef "
                "(default abcdef)\n");
        bench_usage_common(out);
        fprintf(out,
                "                        a librdkafka property for the bare "
                "loop (repeat)\n"
                "  -k, --keep            keep the log directory\n"
                "  -h, --help            this text\n"
                "\n"
                "Environment: AAGW_BIN (default: the aagw of this build), "
                "KCAT, TMPDIR.\n"
                "Exit status: 0 all measurements valid, 1 a measurement "
                "failed, 2 usage,\n"
                "77 kcat missing.\n");
}

/* The version `kcat -V` prints, for the report.  Runs before any measurement:
 * it reaps a child, which must not happen inside a CPU window. */
static void kcat_version(char *buf, size_t size) {
        const char *const argv[] = {harness_kcat_bin(), "-V", NULL};
        harness_output_t  o;
        char              errstr[256];

        snprintf(buf, size, "unknown");
        if (harness_run(argv, NULL, 0, 10000, &o, errstr, sizeof(errstr)) ==
                AAGW_OK &&
            o.out) {
                /* "Version 1.7.1 (JSON, ...": keep the number. */
                char *v = strstr(o.out, "Version ");

                if (v) {
                        v += strlen("Version ");
                        v[strcspn(v, " \n")] = '\0';
                        snprintf(buf, size, "%s", v);
                }
        }
        harness_output_deinit(&o);
}

/* ------------------------------------------------------------- ROUND --- */

static int round_start(struct bench_round *b) {
        struct round            *r = (struct round *)b;
        const struct bench_opts *o = b->o;
        char                     names[2 * M_CNT][64], key[32];
        const char              *topics[2 * M_CNT + 1];
        size_t                   cnt = 0;
        rd_kafka_topic_t        *rkt;

        /* Every topic on both clusters (the sandbox cannot do otherwise);
         * the unused copies stay empty. */
        for (int m = 0; m < M_CNT; m++) {
                topic_names(b->run, (enum meas)m, names[2 * m],
                            names[2 * m + 1], sizeof(names[0]));
                topics[cnt++] = names[2 * m];
                if (strcmp(names[2 * m], names[2 * m + 1]))
                        topics[cnt++] = names[2 * m + 1];
        }
        topics[cnt] = NULL;
        if (bench_sandbox_start(b, topics, true))
                return -1;
        /* Expected records per partition: what the partitioner gives
         * each key, the same in every measurement.  (The partitioner
         * wants a topic handle; an existing topic keeps the mock from
         * auto-creating one.) */
        rkt = rd_kafka_topic_new(b->east_rk, names[2 * M_AAGW], NULL);
        memset(r->expect, 0, sizeof(*r->expect) * (size_t)o->partitions);
        for (size_t i = 0; i < o->records; i++) {
                size_t kl = bench_rec_key(i, key, sizeof(key));

                r->expect[bench_rec_partition(rkt, key, kl, o->partitions)]++;
        }
        rd_kafka_topic_destroy(rkt);
        return 0;
}

static void round_end(struct bench_round *b) {
        print_round((const struct round *)b);
}

int main(int argc, char **argv) {
        static const struct bench_prog prog = {
            .name           = PROG,
            .meas_cnt       = M_CNT,
            .res_size       = sizeof(struct result) * M_CNT,
            .min_value_size = 16,
            .usage          = usage,
            .round_start    = round_start,
            .measure        = measure,
            .round_end      = round_end,
            .summary        = print_summary,
        };
        struct bench_opts o;
        struct round      r;
        char              kv[128], tail[160], *dir = NULL, *records_file = NULL;
        char              self[PATH_MAX];
        int               rc;

        rc = bench_main_start(&prog, argc, argv, &o);
        if (rc >= 0)
                return rc;
        rc = BENCH_EXIT_OK;
        if (!harness_kcat_available() &&
            (o.only & ((1u << M_PIPE) | (1u << M_PRODUCE)))) {
                bench_errorf("kcat not found (set KCAT or PATH): measurements "
                             "c and d need it");
                return EXIT_SKIP;
        }
        dir = bench_setup(BENCH_AAGW_BIN, "bench", self, sizeof(self));
        if (!dir)
                return BENCH_EXIT_RUNTIME;

        memset(&r, 0, sizeof(r));
        r.b.o     = &o;
        r.b.self  = self;
        r.all     = calloc((size_t)o.runs, sizeof(*r.all));
        r.b.res   = r.res;
        r.b.all   = r.all;
        r.expect  = calloc((size_t)o.partitions, sizeof(*r.expect));
        r.scratch = calloc((size_t)o.partitions, sizeof(*r.scratch));
        if (!r.all || !r.expect || !r.scratch) {
                bench_errorf("out of memory");
                rc = BENCH_EXIT_RUNTIME;
                goto out;
        }
        if (o.only & (1u << M_PRODUCE)) {
                records_file = harness_path_join(dir, "records.txt");
                if (!records_file || records_file_write(&o, records_file)) {
                        rc = BENCH_EXIT_RUNTIME;
                        goto out;
                }
        }
        kcat_version(kv, sizeof(kv));
        snprintf(tail, sizeof(tail), ", kcat %s", kv);
        bench_print_host(tail);
        printf("%zu records x %zu B values (keyed), %d partitions, %d "
               "brokers per cluster, %d run%s; aagw %s; logs in %s\n",
               o.records, o.value_size, o.partitions, o.brokers, o.runs,
               o.runs == 1 ? "" : "s", harness_aagw_bin(), dir);
        fflush(stdout);

        r.records_file = records_file;
        rc             = bench_run(&prog, &r.b, dir);
out:
        free(r.expect);
        free(r.scratch);
        free(records_file);
        free(r.all);
        free(dir);
        return rc;
}
