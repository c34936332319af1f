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
 *
 * and reports records/s, CPU seconds per million records and the ratios
 * a/b, a/c, a/d and CPU a/b.  docs/benchmarks.md explains the method and
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

#include "bench_util.h"
#include "harness.h"

#ifndef BENCH_AAGW_BIN
#define BENCH_AAGW_BIN "aagw"
#endif

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_SKIP = 77 };
#define OPTS_HELP (-1) /* parse_opts(): help printed, exit 0 */

#define SANDBOX_TIMEOUT_MS 60000 /* sandbox up, topics created */
#define START_TIMEOUT_MS 90000   /* spawn -> first record at the target */
#define STALL_TIMEOUT_MS 30000   /* no progress at the target */
#define EXIT_GRACE_MS 10000      /* child exited -> last record visible */
#define STOP_TIMEOUT_MS 60000    /* SIGTERM -> exit */

/* Targets from the issue: a/d >= 0.7, a/c >= 2.5, CPU a/b <= 1.25. */
#define TARGET_A_D 0.70
#define TARGET_A_C 2.50
#define TARGET_CPU_A_B 1.25

/* ------------------------------------------------------------- TYPES --- */

enum meas { M_AAGW, M_BARE, M_PIPE, M_PRODUCE, M_BARE_BIG, M_CNT };

static const struct {
        char        letter;
        const char *name; /* machine-readable */
        const char *label;
} meas_info[M_CNT] = {
    {'a', "aagw", "aagw"},
    {'b', "bare", "bare librdkafka loop"},
    {'c', "kcat_pipe", "kcat -C | kcat -P"},
    {'d', "kcat_produce", "kcat -P (produce only)"},
    {'e', "bare_prefetch", "bare loop, big prefetch"},
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

struct opts {
        size_t      records;
        int         runs;
        int         partitions;
        int         brokers;
        size_t      value_size;
        int         poll_ms;
        unsigned    only; /* bit per enum meas */
        bool        keep;
        char      **aagw_prefix;   /* NULL-terminated, or NULL */
        const char *aagw_args[32]; /* appended to aagw's command line */
        int         aagw_argc;
        const char *bare_props[32]; /* consumer.K=V / producer.K=V */
        int         bare_propc;
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
        const struct opts    *o;
        int                   run;
        char                 *dir; /* logs of this round */
        const char           *records_file;
        char                 *self; /* this program, for --bare */
        harness_proc_t       *sandbox;
        harness_bootstraps_t *bs;
        const char           *east, *west;
        rd_kafka_t           *east_rk, *west_rk;
        int64_t              *expect; /* records per partition */
        int64_t              *scratch;
        struct result         res[M_CNT];
};

static void errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void errorf(const char *fmt, ...) {
        va_list ap;

        fputs("bench_replicate: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

/* ----------------------------------------------------------- RECORDS --- */

/* Record 'i': key "k<10 digits>", value of exactly 'vsize' printable bytes
 * (never '\n' or '\x1f', the kcat separators).  'val' holds vsize + 1. */
static size_t rec_key(size_t i, char *key, size_t size) {
        return (size_t)snprintf(key, size, "k%010zu", i);
}

static void rec_value(size_t i, char *val, size_t vsize) {
        int n = snprintf(val, vsize + 1, "v%010zu|", i);

        for (size_t j = n > 0 ? (size_t)n : 0; j < vsize; j++)
                val[j] = (char)('a' + (i * 7 + j) % 26);
        val[vsize] = '\0';
}

/* The partition kcat -P (and every librdkafka producer with the default
 * partitioner) picks for a keyed record: crc32(key) % partitions. */
static int32_t rec_partition(rd_kafka_topic_t *rkt, const char *key,
                             size_t keylen, int partitions) {
        return rd_kafka_msg_partitioner_consistent(rkt, key, keylen, partitions,
                                                   NULL, NULL);
}

/* Write the N records as kcat -P -K '\x1f' input lines. */
static int records_file_write(const struct opts *o, const char *path) {
        FILE *f = fopen(path, "w");
        char  key[32], *val = malloc(o->value_size + 1);

        if (!f || !val) {
                errorf("%s: %s", path, strerror(errno));
                if (f)
                        fclose(f);
                free(val);
                return -1;
        }
        for (size_t i = 0; i < o->records; i++) {
                rec_key(i, key, sizeof(key));
                rec_value(i, val, o->value_size);
                fprintf(f, "%s\x1f%s\n", key, val);
        }
        free(val);
        if (ferror(f) | fclose(f)) {
                errorf("%s: write failed", path);
                return -1;
        }
        return 0;
}

/* ------------------------------------------------------------- KAFKA --- */

/* Check that every partition of 'topic' holds what 'expect' says. */
static int counts_check(struct round *r, rd_kafka_t *rk, const char *topic,
                        const char *what, char *errstr, size_t errstr_size) {
        const int p = r->o->partitions;
        int64_t   sum, want = (int64_t)r->o->records;

        if (bench_watermarks(rk, topic, p, false, r->scratch, &sum, errstr,
                             errstr_size))
                return -1;
        for (int i = 0; i < p; i++) {
                if (r->scratch[i] != r->expect[i]) {
                        snprintf(errstr, errstr_size,
                                 "%s %s [%d] holds %" PRId64
                                 " records, expected %" PRId64
                                 " (total %" PRId64 " of %" PRId64 ")",
                                 what, topic, i, r->scratch[i], r->expect[i],
                                 sum, want);
                        return -1;
                }
        }
        return 0;
}

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

/* Produce the N records to 'topic' on east, each to the partition kcat
 * would pick, and wait until all are acknowledged. */
static int preload(struct round *r, const char *topic, char *errstr,
                   size_t errstr_size) {
        /* clang-format off */
        const char *const props[] = {"acks", "all",
                                     "linger.ms", "5",
                                     "batch.num.messages", "10000",
                                     "queue.buffering.max.messages", "500000",
                                     "enable.idempotence", "true",
                                     NULL};
        /* clang-format on */
        struct preload    pl   = {0};
        rd_kafka_conf_t  *conf = rd_kafka_conf_new();
        rd_kafka_t       *rk   = NULL;
        rd_kafka_topic_t *rkt  = NULL;
        char             *val  = malloc(r->o->value_size + 1);
        int               rc   = -1;
        char              key[32];

        if (!val) {
                snprintf(errstr, errstr_size, "out of memory");
                rd_kafka_conf_destroy(conf);
                return -1;
        }
        if (rd_kafka_conf_set(conf, "bootstrap.servers", r->east, errstr,
                              errstr_size)) {
                rd_kafka_conf_destroy(conf);
                goto out;
        }
        for (size_t i = 0; props[i]; i += 2)
                if (rd_kafka_conf_set(conf, props[i], props[i + 1], errstr,
                                      errstr_size)) {
                        rd_kafka_conf_destroy(conf);
                        goto out;
                }
        rd_kafka_conf_set_dr_msg_cb(conf, preload_dr);
        rd_kafka_conf_set_opaque(conf, &pl);
        rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, errstr_size);
        if (!rk) {
                rd_kafka_conf_destroy(conf);
                goto out;
        }
        rkt = rd_kafka_topic_new(rk, topic, NULL);
        for (size_t i = 0; i < r->o->records; i++) {
                size_t              kl = rec_key(i, key, sizeof(key));
                rd_kafka_resp_err_t err;
                rd_kafka_vu_t       vu[5];

                rec_value(i, val, r->o->value_size);
                vu[0].vtype     = RD_KAFKA_VTYPE_RKT;
                vu[0].u.rkt     = rkt;
                vu[1].vtype     = RD_KAFKA_VTYPE_PARTITION;
                vu[1].u.i32     = rec_partition(rkt, key, kl, r->o->partitions);
                vu[2].vtype     = RD_KAFKA_VTYPE_MSGFLAGS;
                vu[2].u.i       = RD_KAFKA_MSG_F_COPY;
                vu[3].vtype     = RD_KAFKA_VTYPE_KEY;
                vu[3].u.mem.ptr = key;
                vu[3].u.mem.size = kl;
                vu[4].vtype      = RD_KAFKA_VTYPE_VALUE;
                vu[4].u.mem.ptr  = val;
                vu[4].u.mem.size = r->o->value_size;
                for (;;) {
                        rd_kafka_error_t *error = rd_kafka_produceva(rk, vu, 5);

                        err = error ? rd_kafka_error_code(error)
                                    : RD_KAFKA_RESP_ERR_NO_ERROR;
                        if (error)
                                rd_kafka_error_destroy(error);
                        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
                                break;
                        rd_kafka_poll(rk, 10);
                }
                if (err) {
                        snprintf(errstr, errstr_size, "preload %s: %s", topic,
                                 rd_kafka_err2str(err));
                        goto out;
                }
                rd_kafka_poll(rk, 0);
        }
        rd_kafka_flush(rk, 120000);
        if (pl.failed || pl.delivered != (int64_t)r->o->records) {
                snprintf(errstr, errstr_size,
                         "preload %s: %" PRId64 " of %zu delivered, %" PRId64
                         " failed (%s)",
                         topic, pl.delivered, r->o->records, pl.failed,
                         pl.first_err[0] ? pl.first_err : "timeout");
                goto out;
        }
        rc = counts_check(r, r->east_rk, topic, "source", errstr, errstr_size);
out:
        if (rkt)
                rd_kafka_topic_destroy(rkt);
        if (rk)
                rd_kafka_destroy(rk);
        free(val);
        return rc;
}

/* ----------------------------------------------------------- PROCESS --- */

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

static int sandbox_start(struct round *r) {
        const char **argv;
        char        *bsfile = harness_path_join(r->dir, "bootstraps");
        char        *out    = harness_path_join(r->dir, "sandbox.out");
        char        *err    = harness_path_join(r->dir, "sandbox.err");
        char         parts[16], brokers[16], errstr[512];
        char         names[2 * M_CNT][64];
        size_t       a  = 0;
        int          rc = -1;

        argv = calloc(16 + 4 * M_CNT, sizeof(*argv));
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
         * the unused copies stay empty. */
        for (int m = 0; m < M_CNT; m++) {
                topic_names(r->run, (enum meas)m, names[2 * m],
                            names[2 * m + 1], sizeof(names[0]));
                argv[a++] = "--topic";
                argv[a++] = names[2 * m];
                if (strcmp(names[2 * m], names[2 * m + 1])) {
                        argv[a++] = "--topic";
                        argv[a++] = names[2 * m + 1];
                }
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
        r->west_rk = r->east_rk ? bench_client_new(RD_KAFKA_PRODUCER, r->west,
                                                   NULL, errstr, sizeof(errstr))
                                : NULL;
        if (!r->west_rk) {
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
        if (r->west_rk)
                rd_kafka_destroy(r->west_rk);
        r->east_rk = r->west_rk = NULL;
        if (r->sandbox) {
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
static void build_argv(struct round *r, enum meas m, const char *src,
                       const char *dst, const char *statedir, const char **argv,
                       char *buf, size_t bufsize) {
        size_t a = 0;

        switch (m) {
        case M_AAGW: {
                size_t      off = 0;
                const char *east_arg, *west_arg, *regex, *gwid;

                east_arg =
                    bench_buf_printf(buf, bufsize, &off, "east=%s", r->east);
                west_arg =
                    bench_buf_printf(buf, bufsize, &off, "west=%s", r->west);
                regex = bench_buf_printf(buf, bufsize, &off, "^%s$", src);
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
                argv[a++] = "active-passive";
                argv[a++] = "--primary";
                argv[a++] = "east";
                argv[a++] = "--topic";
                argv[a++] = regex;
                argv[a++] = "--gateway-id";
                argv[a++] = gwid;
                argv[a++] = "--state-dir";
                argv[a++] = statedir;
                argv[a++] = "--log-level";
                argv[a++] = "warn";
                /* Replication alone: the unify stage has its own
                 * benchmark (bench_unify). */
                argv[a++] = "--unify";
                argv[a++] = "off";
                argv[a++] = "--set";
                argv[a++] = "replication.refresh_topics_interval=1s";
                argv[a++] = "--set";
                argv[a++] = "clusters.east.properties.consumer.session."
                            "timeout.ms=6000";
                for (int i = 0; i < r->o->aagw_argc; i++)
                        argv[a++] = r->o->aagw_args[i];
                break;
        }
        case M_BARE:
        case M_BARE_BIG:
                argv[a++] = r->self;
                argv[a++] = "--bare";
                argv[a++] = r->east;
                argv[a++] = src;
                argv[a++] = r->west;
                argv[a++] = dst;
                if (m == M_BARE_BIG)
                        for (size_t i = 0; i < sizeof(bare_big_props) /
                                                   sizeof(bare_big_props[0]);
                             i++)
                                argv[a++] = bare_big_props[i];
                for (int i = 0; i < r->o->bare_propc; i++)
                        argv[a++] = r->o->bare_props[i];
                break;
        case M_PIPE:
                /* One shell, so that wait4() on it counts both kcats.
                 * Bootstraps and topic names hold no shell metacharacters
                 * (host:port lists and [A-Za-z0-9._-]). */
                snprintf(buf, bufsize,
                         "'%s' -C -b %s -t %s -o beginning -e -q "
                         "-f '%%k\\x1f%%s\\n' | '%s' -P -b %s -t %s "
                         "-K '\\x1f'",
                         harness_kcat_bin(), r->east, src, harness_kcat_bin(),
                         r->west, dst);
                argv[a++] = "/bin/sh";
                argv[a++] = "-c";
                argv[a++] = buf;
                break;
        case M_PRODUCE:
                argv[a++] = harness_kcat_bin();
                argv[a++] = "-P";
                argv[a++] = "-b";
                argv[a++] = r->west;
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
static int measure(struct round *r, enum meas m) {
        const struct opts *o   = r->o;
        struct result     *res = &r->res[m];
        const int64_t      n   = (int64_t)o->records;
        char               src[64], dst[64], errstr[1024], buf[4096];
        const char        *argv[ARGV_MAX];
        char              *out = NULL, *err = NULL, *statedir = NULL;
        char              *trace_path = NULL, *threads_path = NULL;
        FILE              *trace = NULL;
        char               tag[32];
        harness_proc_t    *p = NULL;
        struct rusage      ru0, ru1, self0, self1;
        double             mock0, mock1, t0, t_first = 0, t_done = 0;
        double             busy0, busy1, t_reaped;
        double             t_last_progress, t_exit = 0;
        int64_t            sum = 0, last_sum = -1;
        bool               exited = false, stopped = false;
        int                status = 0, rc = -1;

        memset(res, 0, sizeof(*res));
        topic_names(r->run, m, src, dst, sizeof(src));
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

        if (m != M_PRODUCE && preload(r, src, errstr, sizeof(errstr))) {
                errorf("%s: %s", tag, errstr);
                goto out;
        }
        if (bench_watermarks(r->west_rk, dst, o->partitions, false, NULL, &sum,
                             errstr, sizeof(errstr))) {
                errorf("%s: %s", tag, errstr);
                goto out;
        }
        if (sum) {
                errorf("%s: target %s is not empty (%" PRId64 " records)", tag,
                       dst, sum);
                goto out;
        }
        build_argv(r, m, src, dst, statedir, argv, buf, sizeof(buf));

        /* Nothing but this child is reaped between ru0 and ru1. */
        getrusage(RUSAGE_CHILDREN, &ru0);
        getrusage(RUSAGE_SELF, &self0);
        busy0 = bench_machine_busy_s();
        mock0 = bench_proc_cpu_s(harness_proc_pid(r->sandbox));
        t0    = bench_now_s();
        p     = harness_proc_spawn(argv, out, err, errstr, sizeof(errstr));
        if (!p) {
                errorf("%s: %s", tag, errstr);
                goto out;
        }
        t_last_progress = t0;
        /* seconds since the start, records at the target: one line per
         * poll, for a look at stalls and ramps. */
        trace = fopen(trace_path, "w");

        /* Watch the target until it holds all N records. */
        for (double next = t0;;) {
                double t;

                next += o->poll_ms / 1000.0;
                t = bench_now_s();
                if (next > t)
                        bench_nap_ms((int)((next - t) * 1000.0 + 0.5));
                else
                        next = t;
                if (bench_watermarks(r->west_rk, dst, o->partitions, false,
                                     NULL, &sum, errstr, sizeof(errstr))) {
                        errorf("%s: %s", tag, errstr);
                        goto out;
                }
                t = bench_now_s();
                if (trace)
                        fprintf(trace, "%.3f %" PRId64 "\n", t - t0, sum);
                if (sum > 0 && t_first == 0) {
                        t_first        = t;
                        res->first_cnt = sum;
                }
                if (sum != last_sum) {
                        last_sum        = sum;
                        t_last_progress = t;
                }
                if (sum > n) {
                        errorf("%s: target %s holds %" PRId64
                               " records, more than the %" PRId64
                               " sent: duplicates",
                               tag, dst, sum, n);
                        goto out;
                }
                if (sum == n) {
                        t_done = t;
                        break;
                }
                if (!exited && harness_proc_wait(p, 0, &status) == AAGW_OK) {
                        exited = true;
                        t_exit = t;
                }
                if (exited && t - t_exit > EXIT_GRACE_MS / 1000.0) {
                        errorf("%s: %s exited (status %d) with %" PRId64
                               " of %" PRId64 " records at the target (see "
                               "%s)",
                               tag, meas_info[m].label,
                               harness_exit_code(status), sum, n, err);
                        goto out;
                }
                if (t_first == 0 && t - t0 > START_TIMEOUT_MS / 1000.0) {
                        errorf("%s: no record at the target after %d s (see "
                               "%s)",
                               tag, START_TIMEOUT_MS / 1000, err);
                        goto out;
                }
                if (t_first != 0 &&
                    t - t_last_progress > STALL_TIMEOUT_MS / 1000.0) {
                        errorf("%s: stalled at %" PRId64 " of %" PRId64
                               " records for %d s (see %s)",
                               tag, sum, n, STALL_TIMEOUT_MS / 1000, err);
                        goto out;
                }
        }

        /* Replicators run until told to stop; the kcats end by themselves
         * (-e: at the end of every partition; -P: at the end of input). */
        if (!exited) {
                if (m == M_AAGW || m == M_BARE || m == M_BARE_BIG) {
                        bench_threads_dump(harness_proc_pid(p), threads_path);
                        harness_proc_signal(p, SIGTERM);
                        stopped = true;
                }
                if (harness_proc_wait(p, STOP_TIMEOUT_MS, &status) != AAGW_OK) {
                        errorf("%s: %s did not exit within %d s%s", tag,
                               meas_info[m].label, STOP_TIMEOUT_MS / 1000,
                               stopped ? " of SIGTERM" : "");
                        goto out;
                }
        }
        t_reaped = bench_now_s();
        getrusage(RUSAGE_CHILDREN, &ru1);
        getrusage(RUSAGE_SELF, &self1);
        busy1 = bench_machine_busy_s();
        mock1 = bench_proc_cpu_s(harness_proc_pid(r->sandbox));
        if (harness_exit_code(status) != 0) {
                /* A wrapper (perf record) passes SIGTERM on and reports
                 * the signal; the record counts below still decide. */
                if (m == M_AAGW && o->aagw_prefix) {
                        printf("%s: exit status %d of '%s' ignored\n", tag,
                               harness_exit_code(status), o->aagw_prefix[0]);
                } else {
                        errorf("%s: %s exited with status %d (see %s)", tag,
                               meas_info[m].label, harness_exit_code(status),
                               err);
                        goto out;
                }
        }
        /* After the exit: nothing lost, nothing written twice, every
         * record in the partition it belongs to. */
        if (counts_check(r, r->west_rk, dst, "target", errstr,
                         sizeof(errstr))) {
                errorf("%s: %s", tag, errstr);
                goto out;
        }

        res->cpu_user_s = bench_tv_s(ru1.ru_utime) - bench_tv_s(ru0.ru_utime);
        res->cpu_sys_s  = bench_tv_s(ru1.ru_stime) - bench_tv_s(ru0.ru_stime);
        res->cpu_per_m  = (res->cpu_user_s + res->cpu_sys_s) * 1e6 / (double)n;
        res->mock_cpu_per_m = (mock1 - mock0) * 1e6 / (double)n;
        /* The noise gauge: machine CPU in the window that neither the
         * measured program, the sandbox nor this program used (other
         * engineers' tests on a shared machine), in cores. */
        res->others_cores =
            ((busy1 - busy0) - (res->cpu_user_s + res->cpu_sys_s) -
             (mock1 - mock0) -
             (bench_tv_s(self1.ru_utime) + bench_tv_s(self1.ru_stime) -
              bench_tv_s(self0.ru_utime) - bench_tv_s(self0.ru_stime))) /
            (t_reaped - t0);
        if (res->others_cores < 0)
                res->others_cores = 0; /* tick rounding */
        res->startup_s = t_first - t0;
        res->wall_s    = t_done - t0;
        res->wall_rps  = (double)n / res->wall_s;
        /* Records that arrived after the first sighting, over the time
         * they took.  A run too short for two polls falls back to wall. */
        res->steady_rps =
            t_done > t_first && res->first_cnt < n
                ? (double)(n - res->first_cnt) / (t_done - t_first)
                : res->wall_rps;
        res->valid = true;
        printf("BENCH run=%d m=%c name=%s records=%" PRId64
               " value_bytes=%zu partitions=%d steady_rps=%.0f "
               "wall_rps=%.0f wall_s=%.3f startup_s=%.3f cpu_user_s=%.3f "
               "cpu_sys_s=%.3f cpu_s_per_1m=%.3f mock_cpu_s_per_1m=%.3f "
               "others_cores=%.2f\n",
               r->run + 1, meas_info[m].letter, meas_info[m].name, n,
               o->value_size, o->partitions, res->steady_rps, res->wall_rps,
               res->wall_s, res->startup_s, res->cpu_user_s, res->cpu_sys_s,
               res->cpu_per_m, res->mock_cpu_per_m, res->others_cores);
        fflush(stdout);
        rc = 0;
out:
        harness_proc_destroy(p);
        if (trace)
                fclose(trace);
        if (statedir)
                harness_rmtree(statedir);
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
        return res[x].steady_rps / res[y].steady_rps;
}

static double cpu_ratio(const struct result *res) {
        if (!res[M_AAGW].valid || !res[M_BARE].valid)
                return NAN;
        return res[M_AAGW].cpu_per_m / res[M_BARE].cpu_per_m;
}

static void print_round(const struct round *r) {
        const struct result *res = r->res;

        printf("\nrun %d of %d: %zu records x %zu B, %d partitions\n",
               r->run + 1, r->o->runs, r->o->records, r->o->value_size,
               r->o->partitions);
        printf("  %-26s %12s %12s %8s %8s %9s %9s %7s\n", "measurement",
               "steady rec/s", "wall rec/s", "wall s", "start s", "CPU s/1M",
               "mock s/1M", "others");
        for (int m = 0; m < M_CNT; m++) {
                char label[40];

                if (!(r->o->only & (1u << m)))
                        continue;
                snprintf(label, sizeof(label), "%c %s", meas_info[m].letter,
                         meas_info[m].label);
                if (!res[m].valid) {
                        printf("  %-26s %12s\n", label, "FAILED");
                        continue;
                }
                printf("  %-26s %12.0f %12.0f %8.2f %8.2f %9.2f %9.2f "
                       "%7.2f\n",
                       label, res[m].steady_rps, res[m].wall_rps, res[m].wall_s,
                       res[m].startup_s, res[m].cpu_per_m,
                       res[m].mock_cpu_per_m, res[m].others_cores);
        }
        printf("  ratios (steady): a/b %.2f  a/c %.2f  a/d %.2f   CPU a/b "
               "%.2f   (a/e %.2f)\n",
               ratio(res, M_AAGW, M_BARE), ratio(res, M_AAGW, M_PIPE),
               ratio(res, M_AAGW, M_PRODUCE), cpu_ratio(res),
               ratio(res, M_AAGW, M_BARE_BIG));
        printf("BENCH_RATIOS run=%d a_b=%.3f a_c=%.3f a_d=%.3f cpu_a_b=%.3f "
               "a_e=%.3f\n",
               r->run + 1, ratio(res, M_AAGW, M_BARE),
               ratio(res, M_AAGW, M_PIPE), ratio(res, M_AAGW, M_PRODUCE),
               cpu_ratio(res), ratio(res, M_AAGW, M_BARE_BIG));
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
                        v[k] = res[k][m].valid ? res[k][m].steady_rps : NAN;
                snprintf(label, sizeof(label), "%c steady rec/s",
                         meas_info[m].letter);
                bench_print_range(label, v, o->runs, 0);
                for (int k = 0; k < o->runs; k++)
                        v[k] = res[k][m].valid ? res[k][m].wall_rps : NAN;
                snprintf(label, sizeof(label), "%c wall rec/s",
                         meas_info[m].letter);
                bench_print_range(label, v, o->runs, 0);
                for (int k = 0; k < o->runs; k++)
                        v[k] = res[k][m].valid ? res[k][m].cpu_per_m : NAN;
                snprintf(label, sizeof(label), "%c CPU s/1M",
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
                v[k] = ratio(res[k], M_AAGW, M_PRODUCE);
        bench_print_target("a/d", v, o->runs, TARGET_A_D, true);
        for (int k = 0; k < o->runs; k++)
                v[k] = ratio(res[k], M_AAGW, M_PIPE);
        bench_print_target("a/c", v, o->runs, TARGET_A_C, true);
        for (int k = 0; k < o->runs; k++)
                v[k] = cpu_ratio(res[k]);
        bench_print_target("CPU a/b", v, o->runs, TARGET_CPU_A_B, false);
        for (int k = 0; k < o->runs; k++)
                v[k] = ratio(res[k], M_AAGW, M_BARE);
        bench_print_range("(a/b, no target)", v, o->runs, 2);
        for (int k = 0; k < o->runs; k++)
                v[k] = ratio(res[k], M_AAGW, M_BARE_BIG);
        bench_print_range("(a/e, no target)", v, o->runs, 2);
        free(v);
}

/* -------------------------------------------------------------- MAIN --- */

static void usage(FILE *out) {
        fprintf(
            out,
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
            "  -m, --only LETTERS    measure only these of abcde "
            "(default abcde)\n"
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

static int parse_opts(int argc, char **argv, struct opts *o) {
        static const struct option longopts[] = {
            {"records", required_argument, NULL, 'n'},
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
                               .runs       = 1,
                               .partitions = 64,
                               .brokers    = 3,
                               .value_size = 200,
                               .poll_ms    = 20,
                               .only       = (1u << M_CNT) - 1};
        opterr = 0;
        while ((opt = getopt_long(argc, argv, ":n:r:m:p:b:s:kh", longopts,
                                  NULL)) != -1) {
                switch (opt) {
                case 'n':
                        if (!bench_parse_size(optarg, 1, 100000000,
                                              &o->records))
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
                        if (!bench_parse_size(optarg, 16, 100000,
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
                                "bench_replicate: option '%s' requires an "
                                "argument\n",
                                argv[optind - 1]);
                        usage(stderr);
                        return EXIT_USAGE;
                default:
                        fprintf(stderr,
                                "bench_replicate: unknown option '%s'\n",
                                argv[optind - 1]);
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "bench_replicate: unexpected argument '%s'\n",
                        argv[optind]);
                usage(stderr);
                return EXIT_USAGE;
        }
        return EXIT_OK;
bad:
        fprintf(stderr, "bench_replicate: invalid value '%s' for '%s'\n",
                optarg, argv[optind - 1]);
        usage(stderr);
        return EXIT_USAGE;
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

static int run_round(struct round *r, const struct opts *o) {
        int failed = 0;

        memset(r->res, 0, sizeof(r->res)); /* nothing valid yet */
        if (sandbox_start(r)) {
                sandbox_stop(r);
                return -1;
        }
        /* Expected records per partition: what the partitioner gives
         * each key, the same in every measurement.  (The partitioner
         * wants a topic handle; an existing topic keeps the mock from
         * auto-creating one.) */
        {
                char              key[32], src[64], dst[64];
                rd_kafka_topic_t *rkt;

                topic_names(r->run, M_AAGW, src, dst, sizeof(src));
                rkt = rd_kafka_topic_new(r->east_rk, src, NULL);

                memset(r->expect, 0,
                       sizeof(*r->expect) * (size_t)o->partitions);
                for (size_t i = 0; i < o->records; i++) {
                        size_t kl = rec_key(i, key, sizeof(key));
                        r->expect[rec_partition(rkt, key, kl, o->partitions)]++;
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
        char           kv[128], *dir = NULL, *records_file = NULL;
        char           self[PATH_MAX];
        ssize_t        sl;
        struct utsname un;
        time_t         now = time(NULL);
        char           date[64];
        int            rc, failed = 0;

        if (argc > 1 && !strcmp(argv[1], "--bare"))
                return bench_bare_main("bench_replicate", argc - 1, argv + 1);

        rc = parse_opts(argc, argv, &o);
        if (rc == OPTS_HELP)
                return EXIT_OK;
        if (rc != EXIT_OK)
                return rc;
        if (!getenv("AAGW_BIN") || !*getenv("AAGW_BIN"))
                setenv("AAGW_BIN", BENCH_AAGW_BIN, 1);
        if (!harness_kcat_available() &&
            (o.only & ((1u << M_PIPE) | (1u << M_PRODUCE)))) {
                errorf("kcat not found (set KCAT or PATH): measurements c "
                       "and d need it");
                return EXIT_SKIP;
        }
        sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (sl <= 0) {
                errorf("/proc/self/exe: %s", strerror(errno));
                return EXIT_RUNTIME;
        }
        self[sl] = '\0';
        signal(SIGPIPE, SIG_IGN);

        dir = harness_tmpdir_new("bench");
        all = calloc((size_t)o.runs, sizeof(*all));
        memset(&r, 0, sizeof(r));
        r.expect  = calloc((size_t)o.partitions, sizeof(*r.expect));
        r.scratch = calloc((size_t)o.partitions, sizeof(*r.scratch));
        if (!dir || !all || !r.expect || !r.scratch) {
                errorf("cannot create a temporary directory: %s",
                       strerror(errno));
                rc = EXIT_RUNTIME;
                goto out;
        }
        if (o.only & (1u << M_PRODUCE)) {
                records_file = harness_path_join(dir, "records.txt");
                if (!records_file || records_file_write(&o, records_file)) {
                        rc = EXIT_RUNTIME;
                        goto out;
                }
        }
        kcat_version(kv, sizeof(kv));
        uname(&un);
        strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %Z", localtime(&now));
        printf("bench_replicate: %s, %s %s, %ld CPUs online, librdkafka %s, "
               "kcat %s\n",
               date, un.sysname, un.release, sysconf(_SC_NPROCESSORS_ONLN),
               rd_kafka_version_str(), kv);
        printf("%zu records x %zu B values (keyed), %d partitions, %d "
               "brokers per cluster, %d run%s; aagw %s; logs in %s\n",
               o.records, o.value_size, o.partitions, o.brokers, o.runs,
               o.runs == 1 ? "" : "s", harness_aagw_bin(), dir);
        fflush(stdout);

        r.o            = &o;
        r.self         = self;
        r.records_file = records_file;
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
        free(r.dir);
        free(r.expect);
        free(r.scratch);
        free(records_file);
        free(all);
        free(dir);
        return rc;
}
