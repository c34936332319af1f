/*
 * tests/bench/bench_util.c: what the benchmark programs share (see
 * bench_util.h).  Moved out of bench_replicate.c when bench_unify.c came
 * along; behaviour unchanged, except that the bare loop now reads a
 * comma-separated list of source topics.  The options, the sandbox, the
 * measurement skeleton and the run loop followed when bench_unify.c had
 * grown a copy of each.
 */
#include "bench_util.h"

#include <dirent.h>
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* ------------------------------------------------------------- PROGRAM -- */

static const char *prog_name = "bench";

void bench_set_prog(const char *prog) {
        prog_name = prog;
}

void bench_errorf(const char *fmt, ...) {
        va_list ap;

        fprintf(stderr, "%s: ", prog_name);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

/* ---------------------------------------------------------------- TIME -- */

double bench_now_s(void) {
        return (double)harness_now_ms() / 1000.0;
}

void bench_nap_ms(int ms) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
                ;
}

/* --------------------------------------------------------------- KAFKA -- */

/* A configuration with 'bootstraps' and 'props' (name, value pairs,
 * NULL-terminated; may be NULL).  @returns it, or NULL with the reason
 * in 'errstr'. */
static rd_kafka_conf_t *conf_new(const char        *bootstraps,
                                 const char *const *props, char *errstr,
                                 size_t errstr_size) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps, errstr,
                              errstr_size))
                goto fail;
        for (size_t i = 0; props && props[i]; i += 2)
                if (rd_kafka_conf_set(conf, props[i], props[i + 1], errstr,
                                      errstr_size))
                        goto fail;
        return conf;
fail:
        rd_kafka_conf_destroy(conf);
        return NULL;
}

rd_kafka_t *bench_client_new(rd_kafka_type_t type, const char *bootstraps,
                             const char *const *props, char *errstr,
                             size_t errstr_size) {
        rd_kafka_conf_t *conf =
            conf_new(bootstraps, props, errstr, errstr_size);
        rd_kafka_t *rk;

        if (!conf)
                return NULL;
        if (rd_kafka_conf_set(conf, "reconnect.backoff.max.ms", "1000", errstr,
                              errstr_size))
                goto fail;
        rk = rd_kafka_new(type, conf, errstr, errstr_size);
        if (rk)
                return rk;
fail:
        rd_kafka_conf_destroy(conf);
        return NULL;
}

int bench_watermarks(rd_kafka_t *rk, const char *topic, int cnt, bool low,
                     int64_t *per, int64_t *sum, char *errstr,
                     size_t errstr_size) {
        rd_kafka_topic_partition_list_t *l;
        rd_kafka_resp_err_t              err;
        const char                      *what = low ? "low" : "high";
        int                              rc   = 0;

        l = rd_kafka_topic_partition_list_new(cnt);
        for (int p = 0; p < cnt; p++)
                rd_kafka_topic_partition_list_add(l, topic, p)->offset =
                    low ? RD_KAFKA_OFFSET_BEGINNING : RD_KAFKA_OFFSET_END;
        err = rd_kafka_offsets_for_times(rk, l, BENCH_KAFKA_TIMEOUT_MS);
        if (err) {
                snprintf(errstr, errstr_size, "%s: %s watermarks: %s", topic,
                         what, rd_kafka_err2str(err));
                rc = -1;
                goto out;
        }
        *sum = 0;
        for (int i = 0; i < l->cnt; i++) {
                const rd_kafka_topic_partition_t *tp = &l->elems[i];
                if (tp->err || tp->offset < 0) {
                        snprintf(errstr, errstr_size,
                                 "%s [%" PRId32 "]: %s watermark: %s", topic,
                                 tp->partition, what,
                                 tp->err ? rd_kafka_err2str(tp->err) : "none");
                        rc = -1;
                        goto out;
                }
                if (per)
                        per[tp->partition] = tp->offset;
                *sum += tp->offset;
        }
out:
        rd_kafka_topic_partition_list_destroy(l);
        return rc;
}

/* ----------------------------------------------------------------- CPU -- */

double bench_stat_cpu_s(const char *path) {
        char               buf[1024], *p;
        FILE              *f;
        size_t             n;
        unsigned long long ut, st;

        f = fopen(path, "r");
        if (!f)
                return NAN;
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        /* The command name may hold spaces: fields count from its ')'.
         * utime and stime are fields 14 and 15; field 3 follows ") ". */
        p = strrchr(buf, ')');
        if (!p || sscanf(p + 2,
                         "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
                         "%llu",
                         &ut, &st) != 2)
                return NAN;
        return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

double bench_proc_cpu_s(pid_t pid) {
        char path[64];

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        return bench_stat_cpu_s(path);
}

/* Add the CPU of the children of every thread of 'pid' (recursively) to
 * '*sum'.  A child that exits meanwhile is simply not counted. */
static void children_cpu(pid_t pid, int depth, double *sum) {
        char           dirpath[64], file[320];
        DIR           *d;
        struct dirent *e;

        if (depth > 8)
                return;
        snprintf(dirpath, sizeof(dirpath), "/proc/%d/task", (int)pid);
        d = opendir(dirpath);
        while (d && (e = readdir(d))) {
                FILE *f;
                int   child;

                if (atoi(e->d_name) <= 0)
                        continue;
                snprintf(file, sizeof(file), "%s/%.32s/children", dirpath,
                         e->d_name);
                f = fopen(file, "r");
                while (f && fscanf(f, "%d", &child) == 1) {
                        double c = bench_proc_cpu_s((pid_t)child);

                        if (isfinite(c))
                                *sum += c;
                        children_cpu((pid_t)child, depth + 1, sum);
                }
                if (f)
                        fclose(f);
        }
        if (d)
                closedir(d);
}

double bench_tree_cpu_s(pid_t pid) {
        double sum = bench_proc_cpu_s(pid);

        if (isfinite(sum))
                children_cpu(pid, 0, &sum);
        return sum;
}

double bench_tv_s(struct timeval tv) {
        return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

double bench_machine_busy_s(void) {
        unsigned long long v[8] = {0}, busy = 0;
        FILE              *f = fopen("/proc/stat", "r");
        int                n;

        if (!f)
                return NAN;
        n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
        fclose(f);
        if (n != 8)
                return NAN;
        for (int i = 0; i < 8; i++)
                if (i != 3 && i != 4) /* idle, iowait */
                        busy += v[i];
        return (double)busy / (double)sysconf(_SC_CLK_TCK);
}

void bench_threads_dump(pid_t pid, const char *path) {
        char           dirpath[64], file[128], comm[64];
        FILE          *out = fopen(path, "w");
        DIR           *d;
        struct dirent *e;

        if (!out)
                return;
        snprintf(dirpath, sizeof(dirpath), "/proc/%d/task", (int)pid);
        d = opendir(dirpath);
        while (d && (e = readdir(d))) {
                FILE *f;
                pid_t tid = (pid_t)atoi(e->d_name);

                if (tid <= 0)
                        continue;
                snprintf(file, sizeof(file), "%s/%d/comm", dirpath, (int)tid);
                f = fopen(file, "r");
                if (!f || !fgets(comm, sizeof(comm), f))
                        snprintf(comm, sizeof(comm), "?");
                if (f)
                        fclose(f);
                comm[strcspn(comm, "\n")] = '\0';
                snprintf(file, sizeof(file), "%s/%d/stat", dirpath, (int)tid);
                fprintf(out, "%d %s %.2f\n", (int)tid, comm,
                        bench_stat_cpu_s(file));
        }
        if (d)
                closedir(d);
        fclose(out);
}

/* ------------------------------------------------------------- STRINGS -- */

const char *bench_buf_printf(char *buf, size_t size, size_t *off,
                             const char *fmt, ...) {
        char   *s = buf + *off;
        va_list ap;
        int     n;

        va_start(ap, fmt);
        n = vsnprintf(s, size - *off, fmt, ap);
        va_end(ap);
        *off += n >= 0 && (size_t)n < size - *off ? (size_t)n + 1 : size - *off;
        return s;
}

bool bench_parse_size(const char *s, size_t min, size_t max, size_t *out) {
        char              *end;
        unsigned long long v;

        errno = 0;
        if (*s == '-')
                return false;
        v = strtoull(s, &end, 10);
        if (errno || end == s || *end || v < min || v > max)
                return false;
        *out = (size_t)v;
        return true;
}

char **bench_split_words(const char *s) {
        char  *copy = strdup(s), *save = NULL, *w;
        char **v = calloc(strlen(s) / 2 + 2, sizeof(*v));
        size_t n = 0;

        if (!copy || !v) {
                free(copy);
                free(v);
                return NULL;
        }
        for (w = strtok_r(copy, " \t", &save); w;
             w = strtok_r(NULL, " \t", &save))
                v[n++] = w; /* 'copy' lives as long as the program */
        if (!n) {
                free(copy);
                free(v);
                return NULL;
        }
        return v;
}

/* ------------------------------------------------------------- RECORDS -- */

size_t bench_rec_key(size_t i, char *key, size_t size) {
        return (size_t)snprintf(key, size, "k%010zu", i);
}

void bench_rec_value(size_t i, char *val, size_t vsize, bool json) {
        size_t j;
        int    n;

        if (json)
                n = snprintf(val, vsize + 1, "{\"id\":\"k%010zu\",\"pad\":\"",
                             i);
        else
                n = snprintf(val, vsize + 1, "v%010zu|", i);
        for (j = n > 0 ? (size_t)n : 0; j < vsize; j++)
                val[j] = (char)('a' + (i * 7 + j) % 26);
        if (json) {
                val[vsize - 2] = '"';
                val[vsize - 1] = '}';
        }
        val[vsize] = '\0';
}

int32_t bench_rec_partition(rd_kafka_topic_t *rkt, const char *key,
                            size_t keylen, int partitions) {
        return rd_kafka_msg_partitioner_consistent(rkt, key, keylen, partitions,
                                                   NULL, NULL);
}

size_t bench_rec_vu(rd_kafka_vu_t *vu, rd_kafka_topic_t *rkt, int32_t partition,
                    const char *key, size_t keylen, const char *val,
                    size_t vlen) {
        vu[0].vtype      = RD_KAFKA_VTYPE_RKT;
        vu[0].u.rkt      = rkt;
        vu[1].vtype      = RD_KAFKA_VTYPE_PARTITION;
        vu[1].u.i32      = partition;
        vu[2].vtype      = RD_KAFKA_VTYPE_MSGFLAGS;
        vu[2].u.i        = RD_KAFKA_MSG_F_COPY;
        vu[3].vtype      = RD_KAFKA_VTYPE_KEY;
        vu[3].u.mem.ptr  = (void *)(uintptr_t)key; /* copied: F_COPY */
        vu[3].u.mem.size = keylen;
        vu[4].vtype      = RD_KAFKA_VTYPE_VALUE;
        vu[4].u.mem.ptr  = (void *)(uintptr_t)val;
        vu[4].u.mem.size = vlen;
        return 5;
}

static void preload_dr(rd_kafka_t *rk, const rd_kafka_message_t *m,
                       void *opaque) {
        struct bench_preload *pl = opaque;

        (void)rk;
        if (!m->err) {
                pl->delivered++;
        } else if (pl->failed++ == 0) {
                snprintf(pl->first_err, sizeof(pl->first_err), "%s",
                         rd_kafka_err2str(m->err));
        }
}

rd_kafka_t *bench_preload_producer(const char           *bootstraps,
                                   struct bench_preload *pl, char *errstr,
                                   size_t errstr_size) {
        /* clang-format off */
        const char *const props[] = {"acks", "all",
                                     "linger.ms", "5",
                                     "batch.num.messages", "10000",
                                     "queue.buffering.max.messages", "500000",
                                     "enable.idempotence", "true",
                                     NULL};
        /* clang-format on */
        rd_kafka_conf_t *conf =
            conf_new(bootstraps, props, errstr, errstr_size);
        rd_kafka_t *rk;

        if (!conf)
                return NULL;
        rd_kafka_conf_set_dr_msg_cb(conf, preload_dr);
        rd_kafka_conf_set_opaque(conf, pl);
        rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, errstr_size);
        if (!rk)
                rd_kafka_conf_destroy(conf);
        return rk;
}

int bench_produce(rd_kafka_t *rk, const rd_kafka_vu_t *vu, size_t cnt,
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

int bench_counts_check(rd_kafka_t *rk, const char *topic, int cnt,
                       const int64_t *expect, const int64_t *expect2,
                       int64_t *scratch, const char *what, char *errstr,
                       size_t errstr_size) {
        int64_t sum, total = 0;

        if (bench_watermarks(rk, topic, cnt, false, scratch, &sum, errstr,
                             errstr_size))
                return -1;
        for (int i = 0; i < cnt; i++)
                total += expect[i] + (expect2 ? expect2[i] : 0);
        for (int i = 0; i < cnt; i++) {
                int64_t want = expect[i] + (expect2 ? expect2[i] : 0);

                if (scratch[i] != want) {
                        snprintf(errstr, errstr_size,
                                 "%s %s [%d] holds %" PRId64
                                 " records, expected %" PRId64
                                 " (total %" PRId64 " of %" PRId64 ")",
                                 what, topic, i, scratch[i], want, sum, total);
                        return -1;
                }
        }
        return 0;
}

/* ------------------------------------------------------------- OPTIONS -- */

static const struct option common_longopts[] = {
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
};
#define COMMON_LONGOPTS_CNT                                                    \
        (sizeof(common_longopts) / sizeof(common_longopts[0]))
#define OWN_LONGOPTS_MAX 16

/* Take common option 'opt' with 'arg' into 'o'.  @returns 1 if taken,
 * 0 if 'arg' is invalid, -1 if 'opt' is not a common option. */
static int common_opt(int opt, const char *arg, const struct bench_prog *prog,
                      struct bench_opts *o) {
        size_t v;

        switch (opt) {
        case 'n':
                return bench_parse_size(arg, 1, 100000000, &o->records);
        case 'r':
                if (!bench_parse_size(arg, 1, 100, &v))
                        return 0;
                o->runs = (int)v;
                return 1;
        case 'p':
                if (!bench_parse_size(arg, 1, 10000, &v))
                        return 0;
                o->partitions = (int)v;
                return 1;
        case 'b':
                if (!bench_parse_size(arg, 1, 16, &v))
                        return 0;
                o->brokers = (int)v;
                return 1;
        case 's':
                return bench_parse_size(arg, prog->min_value_size, 100000,
                                        &o->value_size);
        case 'P':
                if (!bench_parse_size(arg, 1, 1000, &v))
                        return 0;
                o->poll_ms = (int)v;
                return 1;
        case 'm':
                o->only = 0;
                for (const char *c = arg; *c; c++) {
                        if (*c < 'a' || *c >= 'a' + prog->meas_cnt)
                                return 0;
                        o->only |= 1u << (*c - 'a');
                }
                return o->only != 0;
        case 'A':
                o->aagw_prefix = bench_split_words(arg);
                return o->aagw_prefix != NULL;
        case 'X':
                if (o->aagw_argc == BENCH_LIST_MAX)
                        return 0;
                o->aagw_args[o->aagw_argc++] = arg;
                return 1;
        case 'Y':
                if (o->bare_propc == BENCH_LIST_MAX || !strchr(arg, '=') ||
                    (strncmp(arg, "consumer.", 9) &&
                     strncmp(arg, "producer.", 9)))
                        return 0;
                o->bare_props[o->bare_propc++] = arg;
                return 1;
        case 'k':
                o->keep = true;
                return 1;
        default:
                return -1;
        }
}

int bench_parse_opts(int argc, char **argv, const struct bench_prog *prog,
                     struct bench_opts *o) {
        struct option longopts[COMMON_LONGOPTS_CNT + OWN_LONGOPTS_MAX + 1];
        char          shortopts[64];
        size_t        n = 0;
        int           opt;

        memcpy(longopts, common_longopts, sizeof(common_longopts));
        n = COMMON_LONGOPTS_CNT;
        for (size_t i = 0; prog->longopts && prog->longopts[i].name; i++) {
                assert(i < OWN_LONGOPTS_MAX);
                longopts[n++] = prog->longopts[i];
        }
        memset(&longopts[n], 0, sizeof(longopts[n]));
        snprintf(shortopts, sizeof(shortopts), ":n:%sr:m:p:b:s:kh",
                 prog->shortopts ? prog->shortopts : "");

        *o     = (struct bench_opts){.records    = 1000000,
                                     .runs       = 1,
                                     .partitions = 64,
                                     .brokers    = 3,
                                     .value_size = 200,
                                     .poll_ms    = 20,
                                     .only       = (1u << prog->meas_cnt) - 1};
        opterr = 0;
        while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) !=
               -1) {
                int taken;

                switch (opt) {
                case 'h':
                        prog->usage(stdout);
                        return BENCH_OPTS_HELP;
                case ':':
                        fprintf(stderr,
                                "%s: option '%s' requires an argument\n",
                                prog_name, argv[optind - 1]);
                        prog->usage(stderr);
                        return BENCH_EXIT_USAGE;
                case '?':
                        goto unknown;
                default:
                        break;
                }
                taken = common_opt(opt, optarg, prog, o);
                if (taken < 0 && prog->own_opt)
                        taken = prog->own_opt(opt, optarg, prog->ctx);
                if (taken < 0)
                        goto unknown;
                if (!taken)
                        goto bad;
        }
        if (optind < argc) {
                fprintf(stderr, "%s: unexpected argument '%s'\n", prog_name,
                        argv[optind]);
                prog->usage(stderr);
                return BENCH_EXIT_USAGE;
        }
        return BENCH_EXIT_OK;
unknown:
        fprintf(stderr, "%s: unknown option '%s'\n", prog_name,
                argv[optind - 1]);
        prog->usage(stderr);
        return BENCH_EXIT_USAGE;
bad:
        fprintf(stderr, "%s: invalid value '%s' for '%s'\n", prog_name, optarg,
                argv[optind - 1]);
        prog->usage(stderr);
        return BENCH_EXIT_USAGE;
}

int bench_main_start(const struct bench_prog *p, int argc, char **argv,
                     struct bench_opts *o) {
        int rc;

        bench_set_prog(p->name);
        if (argc > 1 && !strcmp(argv[1], "--bare"))
                return bench_bare_main(p->name, argc - 1, argv + 1);
        rc = bench_parse_opts(argc, argv, p, o);
        if (rc == BENCH_OPTS_HELP)
                return BENCH_EXIT_OK;
        return rc == BENCH_EXIT_OK ? -1 : rc;
}

void bench_usage_common(FILE *out) {
        fputs("  -p, --partitions P    partitions per topic (default 64)\n"
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
              "      --bare-prop consumer.K=V|producer.K=V\n",
              out);
}

char *bench_setup(const char *aagw_bin, const char *tag, char *self,
                  size_t self_size) {
        ssize_t sl;
        char   *dir;

        if (!getenv("AAGW_BIN") || !*getenv("AAGW_BIN"))
                setenv("AAGW_BIN", aagw_bin, 1);
        sl = readlink("/proc/self/exe", self, self_size - 1);
        if (sl <= 0) {
                bench_errorf("/proc/self/exe: %s", strerror(errno));
                return NULL;
        }
        self[sl] = '\0';
        signal(SIGPIPE, SIG_IGN);
        dir = harness_tmpdir_new(tag);
        if (!dir)
                bench_errorf("cannot create a temporary directory: %s",
                             strerror(errno));
        return dir;
}

void bench_print_host(const char *tail) {
        struct utsname un;
        time_t         now = time(NULL);
        char           date[64];

        uname(&un);
        strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %Z", localtime(&now));
        printf("%s: %s, %s %s, %ld CPUs online, librdkafka %s%s\n", prog_name,
               date, un.sysname, un.release, sysconf(_SC_NPROCESSORS_ONLN),
               rd_kafka_version_str(), tail ? tail : "");
}

/* -------------------------------------------------------------- ROUNDS -- */

int bench_sandbox_start(struct bench_round *r, const char *const *topics,
                        bool west_client) {
        const char **argv;
        char        *bsfile = harness_path_join(r->dir, "bootstraps");
        char        *out    = harness_path_join(r->dir, "sandbox.out");
        char        *err    = harness_path_join(r->dir, "sandbox.err");
        char         parts[16], brokers[16], errstr[512];
        size_t       a = 0, cnt = 0;
        int          rc = -1;

        while (topics[cnt])
                cnt++;
        argv = calloc(16 + 2 * cnt, sizeof(*argv));
        if (!argv || !bsfile || !out || !err) {
                bench_errorf("out of memory");
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
        for (size_t i = 0; i < cnt; i++) {
                argv[a++] = "--topic";
                argv[a++] = topics[i];
        }
        argv[a] = NULL;

        r->sandbox = harness_proc_spawn(argv, out, err, errstr, sizeof(errstr));
        if (!r->sandbox) {
                bench_errorf("sandbox: %s", errstr);
                goto out;
        }
        if (!harness_wait_file(bsfile, BENCH_SANDBOX_TIMEOUT_MS)) {
                bench_errorf("sandbox: no bootstraps after %d ms (see %s)",
                             BENCH_SANDBOX_TIMEOUT_MS, err);
                goto out;
        }
        r->bs = harness_bootstraps_load(bsfile, errstr, sizeof(errstr));
        if (!r->bs) {
                bench_errorf("sandbox: %s", errstr);
                goto out;
        }
        r->east = harness_bootstraps_get(r->bs, "east");
        r->west = harness_bootstraps_get(r->bs, "west");
        if (!r->east || !r->west) {
                bench_errorf("sandbox: %s lacks east or west", bsfile);
                goto out;
        }
        r->east_rk = bench_client_new(RD_KAFKA_PRODUCER, r->east, NULL, errstr,
                                      sizeof(errstr));
        if (r->east_rk && west_client)
                r->west_rk = bench_client_new(RD_KAFKA_PRODUCER, r->west, NULL,
                                              errstr, sizeof(errstr));
        if (!r->east_rk || (west_client && !r->west_rk)) {
                bench_errorf("client: %s", errstr);
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

void bench_sandbox_stop(struct bench_round *r) {
        int status;

        if (r->east_rk)
                rd_kafka_destroy(r->east_rk);
        if (r->west_rk)
                rd_kafka_destroy(r->west_rk);
        r->east_rk = r->west_rk = NULL;
        if (r->sandbox) {
                if (harness_proc_wait(r->sandbox, 0, &status) == AAGW_OK)
                        bench_errorf("sandbox: had exited (status %d) before "
                                     "the end of the round",
                                     harness_exit_code(status));
                harness_proc_signal(r->sandbox, SIGTERM);
                if (harness_proc_wait(r->sandbox, BENCH_STOP_TIMEOUT_MS,
                                      &status) != AAGW_OK)
                        bench_errorf(
                            "sandbox: did not stop on SIGTERM; killed");
                harness_proc_destroy(r->sandbox);
                r->sandbox = NULL;
        }
        harness_bootstraps_destroy(r->bs);
        r->bs   = NULL;
        r->east = r->west = NULL;
}

/* One run: the sandbox, the measurements in this run's order, the end. */
static int round_run(const struct bench_prog *p, struct bench_round *r) {
        const unsigned only   = r->o->only;
        int            failed = 0;

        memset(r->res, 0, p->res_size); /* nothing valid yet */
        if (p->round_start(r)) {
                bench_sandbox_stop(r);
                return -1;
        }
        printf("\nrun %d: order", r->run + 1);
        for (int i = 0; i < p->meas_cnt; i++) {
                int m = (i + r->run) % p->meas_cnt;

                if (only & (1u << m))
                        printf(" %c", 'a' + m);
        }
        printf("; sandbox east=%s west=%s\n", r->east, r->west);
        fflush(stdout);
        for (int i = 0; i < p->meas_cnt; i++) {
                int m = (i + r->run) % p->meas_cnt;

                if ((only & (1u << m)) && p->measure(r, m))
                        failed++;
        }
        bench_sandbox_stop(r);
        p->round_end(r);
        return failed ? -1 : 0;
}

int bench_run(const struct bench_prog *p, struct bench_round *r,
              const char *dir) {
        int failed = 0, rc = BENCH_EXIT_OK;

        for (int k = 0; k < r->o->runs; k++) {
                char name[32];

                r->run = k;
                snprintf(name, sizeof(name), "run%d", k + 1);
                free(r->dir);
                r->dir = harness_path_join(dir, name);
                if (!r->dir || mkdir(r->dir, 0755) == -1) {
                        bench_errorf("%s: %s", r->dir ? r->dir : name,
                                     strerror(errno));
                        rc = BENCH_EXIT_RUNTIME;
                        goto out;
                }
                if (round_run(p, r))
                        failed++;
                memcpy((char *)r->all + (size_t)k * p->res_size, r->res,
                       p->res_size);
        }
        p->summary(r->o, r->all);
        if (failed) {
                rc = BENCH_EXIT_RUNTIME;
                printf("\n%d run%s had invalid measurements; logs kept in "
                       "%s\n",
                       failed, failed == 1 ? "" : "s", dir);
        } else if (!r->o->keep) {
                harness_rmtree(dir);
        } else {
                printf("logs kept in %s\n", dir);
        }
out:
        free(r->dir);
        r->dir = NULL;
        return rc;
}

/* --------------------------------------------------------- MEASUREMENT -- */

void bench_aagw_argv(const struct bench_round *r, const char **argv,
                     const char *topic, const char *statedir,
                     const char *const *mode, const char *const *tail,
                     char *buf, size_t bufsize) {
        const struct bench_opts *o   = r->o;
        size_t                   off = 0, a = 0;
        const char              *east_arg, *west_arg, *regex, *gwid;

        east_arg = bench_buf_printf(buf, bufsize, &off, "east=%s", r->east);
        west_arg = bench_buf_printf(buf, bufsize, &off, "west=%s", r->west);
        regex    = bench_buf_printf(buf, bufsize, &off, "^%s$", topic);
        gwid = bench_buf_printf(buf, bufsize, &off, "bench-r%d", r->run + 1);
        for (size_t i = 0; o->aagw_prefix && o->aagw_prefix[i]; i++)
                argv[a++] = o->aagw_prefix[i];
        argv[a++] = harness_aagw_bin();
        argv[a++] = "--cluster";
        argv[a++] = east_arg;
        argv[a++] = "--cluster";
        argv[a++] = west_arg;
        for (size_t i = 0; mode && mode[i]; i++)
                argv[a++] = mode[i];
        argv[a++] = "--topic";
        argv[a++] = regex;
        argv[a++] = "--gateway-id";
        argv[a++] = gwid;
        argv[a++] = "--state-dir";
        argv[a++] = statedir;
        for (size_t i = 0; tail && tail[i]; i++)
                argv[a++] = tail[i];
        for (int i = 0; i < o->aagw_argc; i++)
                argv[a++] = o->aagw_args[i];
        assert(a < BENCH_ARGV_MAX);
        argv[a] = NULL;
}

void bench_bare_argv(const struct bench_round *r, const char **argv,
                     const char *srcs, const char *dst_bootstraps,
                     const char *dst, const char *const *props, size_t propc) {
        size_t a = 0;

        argv[a++] = r->self;
        argv[a++] = "--bare";
        argv[a++] = r->east;
        argv[a++] = srcs;
        argv[a++] = dst_bootstraps;
        argv[a++] = dst;
        for (size_t i = 0; i < propc; i++)
                argv[a++] = props[i];
        for (int i = 0; i < r->o->bare_propc; i++)
                argv[a++] = r->o->bare_props[i];
        argv[a] = NULL;
}

void bench_sample_take(struct bench_sample *s, harness_proc_t *p,
                       harness_proc_t *sandbox) {
        struct rusage ru;

        getrusage(RUSAGE_SELF, &ru);
        s->t     = bench_now_s();
        s->child = p ? bench_tree_cpu_s(harness_proc_pid(p)) : 0;
        s->mock  = bench_proc_cpu_s(harness_proc_pid(sandbox));
        s->busy  = bench_machine_busy_s();
        s->self  = bench_tv_s(ru.ru_utime) + bench_tv_s(ru.ru_stime);
}

double bench_others_cores(const struct bench_sample *a,
                          const struct bench_sample *b, double child) {
        double c = ((b->busy - a->busy) - child - (b->mock - a->mock) -
                    (b->self - a->self)) /
                   (b->t - a->t);

        return c < 0 ? 0 : c; /* tick rounding */
}

int bench_meas_init(struct bench_meas *mm, const struct bench_round *r,
                    char letter, const char *label) {
        char buf[64];

        memset(mm, 0, sizeof(*mm));
        mm->label = label;
        snprintf(mm->tag, sizeof(mm->tag), "run%d-%c", r->run + 1, letter);
        snprintf(buf, sizeof(buf), "%s.out", mm->tag);
        mm->out = harness_path_join(r->dir, buf);
        snprintf(buf, sizeof(buf), "%s.err", mm->tag);
        mm->err = harness_path_join(r->dir, buf);
        snprintf(buf, sizeof(buf), "%s.state", mm->tag);
        mm->statedir = harness_path_join(r->dir, buf);
        snprintf(buf, sizeof(buf), "%s.trace", mm->tag);
        mm->trace_path = harness_path_join(r->dir, buf);
        snprintf(buf, sizeof(buf), "%s.threads", mm->tag);
        mm->threads_path = harness_path_join(r->dir, buf);
        if (!mm->out || !mm->err || !mm->statedir || !mm->trace_path ||
            !mm->threads_path) {
                bench_errorf("out of memory");
                return -1;
        }
        return 0;
}

void bench_meas_deinit(struct bench_meas *mm, bool keep_state) {
        harness_proc_destroy(mm->proc);
        if (mm->trace)
                fclose(mm->trace);
        if (mm->statedir && !keep_state)
                harness_rmtree(mm->statedir);
        free(mm->out);
        free(mm->err);
        free(mm->statedir);
        free(mm->trace_path);
        free(mm->threads_path);
        memset(mm, 0, sizeof(*mm));
}

int bench_meas_target_empty(struct bench_meas *mm, rd_kafka_t *rk,
                            const char *topic, int partitions) {
        char    errstr[512];
        int64_t sum;

        if (bench_watermarks(rk, topic, partitions, false, NULL, &sum, errstr,
                             sizeof(errstr))) {
                bench_errorf("%s: %s", mm->tag, errstr);
                return -1;
        }
        if (sum) {
                bench_errorf("%s: target %s is not empty (%" PRId64 " records)",
                             mm->tag, topic, sum);
                return -1;
        }
        return 0;
}

/* One poll's verdict on the measured program: 0 go on, 1 done, -1
 * failed (reason printed). */
static int watch_check(struct bench_meas *mm, const struct bench_round *r,
                       const char *topic, int64_t sum, int64_t want, double now,
                       double t_last_progress) {
        int sb_status;

        if (sum > want) {
                bench_errorf("%s: target %s holds %" PRId64
                             " records, more than the %" PRId64
                             " expected: duplicates",
                             mm->tag, topic, sum, want);
                return -1;
        }
        if (sum == want)
                return 1;
        if (harness_proc_wait(r->sandbox, 0, &sb_status) == AAGW_OK) {
                bench_errorf("%s: the sandbox exited (status %d) at %" PRId64
                             " of %" PRId64 " records",
                             mm->tag, harness_exit_code(sb_status), sum, want);
                return -1;
        }
        if (!mm->exited &&
            harness_proc_wait(mm->proc, 0, &mm->status) == AAGW_OK) {
                mm->exited = true;
                mm->t_exit = now;
        }
        if (mm->exited && now - mm->t_exit > BENCH_EXIT_GRACE_MS / 1000.0) {
                bench_errorf("%s: %s exited (status %d) with %" PRId64
                             " of %" PRId64 " records at the target (see %s)",
                             mm->tag, mm->label, harness_exit_code(mm->status),
                             sum, want, mm->err);
                return -1;
        }
        if (mm->t_first == 0 &&
            now - mm->t0 > BENCH_START_TIMEOUT_MS / 1000.0) {
                bench_errorf("%s: no record at the target after %d s (see %s)",
                             mm->tag, BENCH_START_TIMEOUT_MS / 1000, mm->err);
                return -1;
        }
        if (mm->t_first != 0 &&
            now - t_last_progress > BENCH_STALL_TIMEOUT_MS / 1000.0) {
                bench_errorf("%s: stalled at %" PRId64 " of %" PRId64
                             " records for %d s (see %s)",
                             mm->tag, sum, want, BENCH_STALL_TIMEOUT_MS / 1000,
                             mm->err);
                return -1;
        }
        return 0;
}

int bench_meas_run(struct bench_meas *mm, const struct bench_round *r,
                   const char *const *argv, double t0, rd_kafka_t *rk,
                   const char *topic, int64_t want, struct bench_sample *first,
                   struct bench_sample *done) {
        char    errstr[512];
        double  t_last_progress = t0;
        int64_t sum = 0, last_sum = -1;

        mm->t0 = t0;
        mm->proc =
            harness_proc_spawn(argv, mm->out, mm->err, errstr, sizeof(errstr));
        if (!mm->proc) {
                bench_errorf("%s: %s", mm->tag, errstr);
                return -1;
        }
        /* seconds since the start, records at the target: one line per
         * poll, for a look at stalls and ramps. */
        mm->trace = fopen(mm->trace_path, "w");

        for (double next = t0;;) {
                double now;
                int    verdict;

                next += r->o->poll_ms / 1000.0;
                now = bench_now_s();
                if (next > now)
                        bench_nap_ms((int)((next - now) * 1000.0 + 0.5));
                else
                        next = now;
                if (bench_watermarks(rk, topic, r->o->partitions, false, NULL,
                                     &sum, errstr, sizeof(errstr))) {
                        bench_errorf("%s: %s", mm->tag, errstr);
                        return -1;
                }
                now = bench_now_s();
                if (mm->trace)
                        fprintf(mm->trace, "%.3f %" PRId64 "\n", now - t0, sum);
                if (sum > 0 && mm->t_first == 0) {
                        if (first)
                                bench_sample_take(first, mm->proc, r->sandbox);
                        mm->t_first   = now;
                        mm->first_cnt = sum;
                }
                if (sum != last_sum) {
                        last_sum        = sum;
                        t_last_progress = now;
                }
                verdict =
                    watch_check(mm, r, topic, sum, want, now, t_last_progress);
                if (verdict < 0)
                        return -1;
                if (verdict > 0) {
                        if (done)
                                bench_sample_take(done, mm->proc, r->sandbox);
                        mm->t_done = now;
                        return 0;
                }
        }
}

int bench_meas_stop(struct bench_meas *mm, bool term) {
        if (mm->exited)
                return 0;
        if (term) {
                bench_threads_dump(harness_proc_pid(mm->proc),
                                   mm->threads_path);
                harness_proc_signal(mm->proc, SIGTERM);
        }
        if (harness_proc_wait(mm->proc, BENCH_STOP_TIMEOUT_MS, &mm->status) !=
            AAGW_OK) {
                bench_errorf("%s: %s did not exit within %d s%s", mm->tag,
                             mm->label, BENCH_STOP_TIMEOUT_MS / 1000,
                             term ? " of SIGTERM" : "");
                return -1;
        }
        return 0;
}

int bench_meas_exit_ok(struct bench_meas *mm, const char *wrapper) {
        int code = harness_exit_code(mm->status);

        if (code == 0)
                return 0;
        if (wrapper) {
                printf("%s: exit status %d of '%s' ignored\n", mm->tag, code,
                       wrapper);
                return 0;
        }
        bench_errorf("%s: %s exited with status %d (see %s)", mm->tag,
                     mm->label, code, mm->err);
        return -1;
}

/* ------------------------------------------------------------- SUMMARY -- */

bool bench_range(const double *v, int n, double *lo, double *hi) {
        bool any = false;

        for (int i = 0; i < n; i++) {
                if (!isfinite(v[i]))
                        continue;
                if (!any || v[i] < *lo)
                        *lo = v[i];
                if (!any || v[i] > *hi)
                        *hi = v[i];
                any = true;
        }
        return any;
}

void bench_print_range(const char *what, const double *v, int n, int decimals) {
        double lo = 0, hi = 0;

        printf("  %-26s ", what);
        if (!bench_range(v, n, &lo, &hi))
                printf("-\n");
        else if (n > 1)
                printf("%.*f .. %.*f\n", decimals, lo, decimals, hi);
        else
                printf("%.*f\n", decimals, lo);
}

void bench_print_target(const char *what, const double *v, int n, double target,
                        bool at_least) {
        double lo = 0, hi = 0;
        int    met = 0, cnt = 0;

        for (int i = 0; i < n; i++) {
                if (!isfinite(v[i]))
                        continue;
                cnt++;
                met += at_least ? v[i] >= target : v[i] <= target;
        }
        if (!bench_range(v, n, &lo, &hi)) {
                printf("  %-12s %s %.2f: not measured\n", what,
                       at_least ? ">=" : "<=", target);
                return;
        }
        printf("  %-12s %s %.2f: %.2f .. %.2f, met in %d of %d run%s%s\n", what,
               at_least ? ">=" : "<=", target, lo, hi, met, cnt,
               cnt == 1 ? "" : "s",
               met == cnt ? ""
               : met      ? "  (MIXED)"
                          : "  (MISSED)");
}

bool bench_print_row(const struct bench_meas_info *mi, bool valid, int width,
                     int failed_width) {
        char label[64];

        snprintf(label, sizeof(label), "%c %s", mi->letter, mi->label);
        if (valid) {
                printf("  %-*s", width, label);
                return true;
        }
        printf("  %-*s %*s\n", width, label, failed_width, "FAILED");
        return false;
}

/* The figure at 'off' of result 'i' of 'res' (results of 'size' bytes),
 * or NAN if that result is not valid. */
static double figure(const void *res, size_t size, size_t i, size_t off) {
        const char *p = (const char *)res + i * size;
        double      d;

        if (!*(const bool *)p)
                return NAN;
        memcpy(&d, p + off, sizeof(d));
        return d;
}

double bench_ratio(const void *res, size_t size, size_t off, int x, int y) {
        return figure(res, size, (size_t)x, off) /
               figure(res, size, (size_t)y, off);
}

void bench_print_summary(const struct bench_opts *o, int meas_cnt,
                         const void *all, size_t size,
                         const struct bench_field *f,
                         const struct bench_ratio *q) {
        const size_t run_size = size * (size_t)meas_cnt;
        double      *v        = calloc((unsigned)o->runs, sizeof(*v));

        if (!v)
                return;
        printf("\nsummary over %d run%s (min .. max; ratios are per run, "
               "against baselines of the same run)\n",
               o->runs, o->runs == 1 ? "" : "s");
        for (int m = 0; m < meas_cnt; m++) {
                if (!(o->only & (1u << m)))
                        continue;
                for (const struct bench_field *x = f; x->label; x++) {
                        char label[64];

                        for (int k = 0; k < o->runs; k++)
                                v[k] = figure(all, size,
                                              (size_t)k * (size_t)meas_cnt +
                                                  (size_t)m,
                                              x->off);
                        snprintf(label, sizeof(label), "%c %s", 'a' + m,
                                 x->label);
                        bench_print_range(label, v, o->runs, x->decimals);
                }
        }
        printf("targets:\n");
        for (; q->what; q++) {
                for (int k = 0; k < o->runs; k++)
                        v[k] = bench_ratio((const char *)all +
                                               (size_t)k * run_size,
                                           size, q->off, q->x, q->y);
                if (isnan(q->target))
                        bench_print_range(q->what, v, o->runs, 2);
                else
                        bench_print_target(q->what, v, o->runs, q->target,
                                           q->at_least);
        }
        free(v);
}

/* ----------------------------------------------------------- BARE LOOP -- */

static volatile sig_atomic_t bare_stop;

static void bare_on_term(int sig) {
        (void)sig;
        bare_stop = 1;
}

struct bare_stats {
        int64_t consumed, delivered, failed;
        char    first_err[256];
};

static void bare_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        struct bare_stats *st = opaque;

        (void)rk;
        if (!m->err) {
                st->delivered++;
        } else if (st->failed++ == 0) {
                snprintf(st->first_err, sizeof(st->first_err),
                         "%s [%" PRId32 "]: %s", rd_kafka_topic_name(m->rkt),
                         m->partition, rd_kafka_err2str(m->err));
        }
}

/* Produce one copy of 'm'; waits while the producer queue is full.
 * @returns 0, or -1 on a non-retriable error. */
static int bare_copy(rd_kafka_t *pr, rd_kafka_topic_t *rkt,
                     rd_kafka_message_t *m, struct bare_stats *st,
                     const char *hname, const char *hval) {
        rd_kafka_headers_t       *hdrs = NULL;
        rd_kafka_timestamp_type_t tstype;
        int64_t                   ts = rd_kafka_message_timestamp(m, &tstype);
        rd_kafka_vu_t             vu[8];
        size_t                    n = 0;
        rd_kafka_error_t         *error;

        rd_kafka_message_detach_headers(m, &hdrs);
        if (hname) {
                /* bench.header: one more header on every copy, as a
                 * replicator adds its provenance. */
                if (!hdrs)
                        hdrs = rd_kafka_headers_new(1);
                rd_kafka_header_add(hdrs, hname, -1, hval, -1);
        }
        vu[n].vtype        = RD_KAFKA_VTYPE_RKT;
        vu[n++].u.rkt      = rkt;
        vu[n].vtype        = RD_KAFKA_VTYPE_PARTITION;
        vu[n++].u.i32      = m->partition;
        vu[n].vtype        = RD_KAFKA_VTYPE_MSGFLAGS;
        vu[n++].u.i        = RD_KAFKA_MSG_F_COPY;
        vu[n].vtype        = RD_KAFKA_VTYPE_KEY;
        vu[n].u.mem.ptr    = m->key;
        vu[n++].u.mem.size = m->key_len;
        vu[n].vtype        = RD_KAFKA_VTYPE_VALUE;
        vu[n].u.mem.ptr    = m->payload;
        vu[n++].u.mem.size = m->len;
        if (ts >= 0) {
                vu[n].vtype   = RD_KAFKA_VTYPE_TIMESTAMP;
                vu[n++].u.i64 = ts;
        }
        if (hdrs) {
                vu[n].vtype       = RD_KAFKA_VTYPE_HEADERS;
                vu[n++].u.headers = hdrs;
        }
        for (;;) {
                rd_kafka_resp_err_t err;

                error = rd_kafka_produceva(pr, vu, n);
                if (!error)
                        return 0; /* the producer owns 'hdrs' now */
                err = rd_kafka_error_code(error);
                if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                        if (st->failed++ == 0)
                                snprintf(st->first_err, sizeof(st->first_err),
                                         "produce: %s",
                                         rd_kafka_error_string(error));
                        rd_kafka_error_destroy(error);
                        if (hdrs)
                                rd_kafka_headers_destroy(hdrs);
                        return -1;
                }
                rd_kafka_error_destroy(error);
                rd_kafka_poll(pr, 10); /* serve delivery reports */
        }
}

/* The delivery reports' counters: set before the producer exists. */
static struct bare_stats *bare_stats_for_dr;

/* A client of the bare loop: 'props' (name, value pairs), then those of
 * the 'extra' "role.name=value" arguments whose role matches 'role'. */
static rd_kafka_t *bare_client(rd_kafka_type_t type, const char *bootstraps,
                               const char *const *props, const char *role,
                               int extra_cnt, char **extra, char *errstr,
                               size_t errstr_size) {
        rd_kafka_conf_t *conf =
            conf_new(bootstraps, props, errstr, errstr_size);
        rd_kafka_t *rk;
        size_t      rlen = strlen(role);

        if (!conf)
                return NULL;
        for (int i = 0; i < extra_cnt; i++) {
                char  name[256];
                char *eq = strchr(extra[i], '=');

                if (strncmp(extra[i], role, rlen))
                        continue;
                if (!eq || (size_t)(eq - extra[i]) - rlen >= sizeof(name)) {
                        snprintf(errstr, errstr_size, "bad property '%s'",
                                 extra[i]);
                        goto fail;
                }
                snprintf(name, sizeof(name), "%.*s",
                         (int)((size_t)(eq - extra[i]) - rlen),
                         extra[i] + rlen);
                if (rd_kafka_conf_set(conf, name, eq + 1, errstr, errstr_size))
                        goto fail;
        }
        if (type == RD_KAFKA_PRODUCER) {
                rd_kafka_conf_set_dr_msg_cb(conf, bare_dr);
                rd_kafka_conf_set_opaque(conf, bare_stats_for_dr);
        }
        rk = rd_kafka_new(type, conf, errstr, errstr_size);
        if (rk)
                return rk;
fail:
        rd_kafka_conf_destroy(conf);
        return NULL;
}

/* Add every partition of 'topic' to 'asg', from the beginning.
 * @returns 0, or -1 (reason printed). */
static int bare_assign_topic(const char *prog, rd_kafka_t *co,
                             const char                      *topic,
                             rd_kafka_topic_partition_list_t *asg) {
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_topic_t   *src = rd_kafka_topic_new(co, topic, NULL);
        rd_kafka_resp_err_t err;

        err = rd_kafka_metadata(co, 0, src, &md, BENCH_KAFKA_TIMEOUT_MS);
        rd_kafka_topic_destroy(src);
        if (err || md->topic_cnt != 1 || md->topics[0].err ||
            md->topics[0].partition_cnt < 1) {
                fprintf(stderr, "%s: bare: %s: metadata: %s\n", prog, topic,
                        rd_kafka_err2str(err ? err
                                         : md->topic_cnt != 1
                                             ? RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC
                                             : md->topics[0].err));
                if (md)
                        rd_kafka_metadata_destroy(md);
                return -1;
        }
        for (int i = 0; i < md->topics[0].partition_cnt; i++)
                rd_kafka_topic_partition_list_add(
                    asg, topic, md->topics[0].partitions[i].id)
                    ->offset = RD_KAFKA_OFFSET_BEGINNING;
        rd_kafka_metadata_destroy(md);
        return 0;
}

int bench_bare_main(const char *prog, int argc, char **argv) {
        /* clang-format off */
        const char *const cprops[] = {"group.id", "bench-bare",
                                      "enable.auto.commit", "false",
                                      "auto.offset.reset", "earliest",
                                      "enable.partition.eof", "false",
                                      NULL};
        const char *const pprops[] = {"enable.idempotence", "true",
                                      "acks", "all",
                                      "linger.ms", "2",
                                      "batch.num.messages", "10000",
                                      "queue.buffering.max.messages",
                                      "100000",
                                      NULL};
        /* clang-format on */
        struct bare_stats                st = {0};
        rd_kafka_t                      *co = NULL, *pr = NULL;
        rd_kafka_topic_t                *rkt = NULL;
        rd_kafka_topic_partition_list_t *asg = NULL;
        rd_kafka_resp_err_t              err;
        struct sigaction                 sa;
        char                             errstr[512], *topics = NULL;
        char                            *save = NULL, *t;
        char                             hname[64];
        const char                      *hval = NULL;
        int                              rc   = BENCH_EXIT_RUNTIME;

        if (argc < 5) {
                fprintf(stderr,
                        "usage: %s --bare SRC_BOOTSTRAPS "
                        "SRC_TOPIC[,SRC_TOPIC...] DST_BOOTSTRAPS DST_TOPIC "
                        "[consumer.K=V|producer.K=V|bench.header=NAME=VALUE]"
                        "...\n",
                        prog);
                return BENCH_EXIT_USAGE;
        }
        for (int i = 5; i < argc; i++) {
                const char *eq;

                if (strncmp(argv[i], "bench.header=", 13))
                        continue;
                eq = strchr(argv[i] + 13, '=');
                if (!eq || eq == argv[i] + 13 ||
                    (size_t)(eq - argv[i] - 13) >= sizeof(hname)) {
                        fprintf(stderr, "%s: bare: bad '%s'\n", prog,
                                argv[i]);
                        return BENCH_EXIT_USAGE;
                }
                snprintf(hname, sizeof(hname), "%.*s",
                         (int)(eq - argv[i] - 13), argv[i] + 13);
                hval = eq + 1;
        }
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = bare_on_term;
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);

        co = bare_client(RD_KAFKA_CONSUMER, argv[1], cprops, "consumer.",
                         argc - 5, argv + 5, errstr, sizeof(errstr));
        if (!co) {
                fprintf(stderr, "%s: bare: consumer: %s\n", prog, errstr);
                goto out;
        }
        rd_kafka_poll_set_consumer(co);

        bare_stats_for_dr = &st;
        pr = bare_client(RD_KAFKA_PRODUCER, argv[3], pprops, "producer.",
                         argc - 5, argv + 5, errstr, sizeof(errstr));
        if (!pr) {
                fprintf(stderr, "%s: bare: producer: %s\n", prog, errstr);
                goto out;
        }
        rkt = rd_kafka_topic_new(pr, argv[4], NULL);

        /* Every partition of every source, from the beginning. */
        asg    = rd_kafka_topic_partition_list_new(64);
        topics = strdup(argv[2]);
        if (!topics) {
                fprintf(stderr, "%s: bare: out of memory\n", prog);
                goto out;
        }
        for (t = strtok_r(topics, ",", &save); t;
             t = strtok_r(NULL, ",", &save))
                if (bare_assign_topic(prog, co, t, asg))
                        goto out;
        err = rd_kafka_assign(co, asg);
        if (err) {
                fprintf(stderr, "%s: bare: assign: %s\n", prog,
                        rd_kafka_err2str(err));
                goto out;
        }

        while (!bare_stop) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(co, 100);

                rd_kafka_poll(pr, 0);
                if (!m)
                        continue;
                if (m->err) {
                        fprintf(stderr, "%s: bare: consume: %s\n", prog,
                                rd_kafka_message_errstr(m));
                        rd_kafka_message_destroy(m);
                        continue;
                }
                st.consumed++;
                bare_copy(pr, rkt, m, &st, hval ? hname : NULL, hval);
                rd_kafka_message_destroy(m);
        }

        rd_kafka_flush(pr, BENCH_FLUSH_TIMEOUT_MS);
        printf("bare: consumed %" PRId64 " delivered %" PRId64
               " failed %" PRId64 " undelivered %d%s%s\n",
               st.consumed, st.delivered, st.failed, rd_kafka_outq_len(pr),
               st.first_err[0] ? " first error: " : "", st.first_err);
        if (!st.failed && rd_kafka_outq_len(pr) == 0 &&
            st.delivered == st.consumed)
                rc = BENCH_EXIT_OK;
out:
        free(topics);
        if (asg)
                rd_kafka_topic_partition_list_destroy(asg);
        if (rkt)
                rd_kafka_topic_destroy(rkt);
        if (pr)
                rd_kafka_destroy(pr);
        if (co) {
                rd_kafka_consumer_close(co);
                rd_kafka_destroy(co);
        }
        return rc;
}

/* ---------------------------------------------------------- REAL KAFKA -- */

int bench_topic_create(rd_kafka_t *rk, const char *topic, int partitions,
                       char *errstr, size_t errstr_size) {
        rd_kafka_NewTopic_t        *nt;
        rd_kafka_AdminOptions_t    *ao;
        rd_kafka_queue_t           *q;
        rd_kafka_event_t           *ev;
        const rd_kafka_topic_result_t **res;
        size_t                      cnt = 0;
        char                        e[256];
        int                         rc = -1;

        nt = rd_kafka_NewTopic_new(topic, partitions, 1, e, sizeof(e));
        if (!nt) {
                snprintf(errstr, errstr_size, "%s: %s", topic, e);
                return -1;
        }
        ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
        rd_kafka_AdminOptions_set_operation_timeout(ao, BENCH_KAFKA_TIMEOUT_MS,
                                                    NULL, 0);
        q = rd_kafka_queue_new(rk);
        rd_kafka_CreateTopics(rk, &nt, 1, ao, q);
        ev = rd_kafka_queue_poll(q, BENCH_KAFKA_TIMEOUT_MS + 5000);
        if (!ev) {
                snprintf(errstr, errstr_size, "create %s: timed out", topic);
        } else if (rd_kafka_event_error(ev)) {
                snprintf(errstr, errstr_size, "create %s: %s", topic,
                         rd_kafka_event_error_string(ev));
        } else {
                res = rd_kafka_CreateTopics_result_topics(
                    rd_kafka_event_CreateTopics_result(ev), &cnt);
                if (cnt == 1 &&
                    (!rd_kafka_topic_result_error(res[0]) ||
                     rd_kafka_topic_result_error(res[0]) ==
                         RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS))
                        rc = 0;
                else
                        snprintf(errstr, errstr_size, "create %s: %s", topic,
                                 cnt ? rd_kafka_err2str(
                                           rd_kafka_topic_result_error(res[0]))
                                     : "no result");
        }
        if (ev)
                rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
        rd_kafka_AdminOptions_destroy(ao);
        rd_kafka_NewTopic_destroy(nt);
        /* The metadata of a new topic reaches the clients a little
         * later: wait until this client sees every partition. */
        for (int i = 0; rc == 0 && i < 100; i++) {
                const struct rd_kafka_metadata *md  = NULL;
                rd_kafka_topic_t               *rkt = rd_kafka_topic_new(
                    rk, topic, NULL);
                bool ok = !rd_kafka_metadata(rk, 0, rkt, &md, 2000) &&
                          md->topic_cnt == 1 && !md->topics[0].err &&
                          md->topics[0].partition_cnt == partitions;
                for (int p = 0; ok && p < partitions; p++)
                        ok = md->topics[0].partitions[p].leader >= 0 &&
                             !md->topics[0].partitions[p].err;
                if (md)
                        rd_kafka_metadata_destroy(md);
                rd_kafka_topic_destroy(rkt);
                if (ok)
                        return 0;
                bench_nap_ms(100);
        }
        if (rc == 0)
                snprintf(errstr, errstr_size,
                         "create %s: not %d partitions in the metadata", topic,
                         partitions);
        return -1;
}

void bench_topics_delete(rd_kafka_t *rk, const char *const *topics,
                         size_t cnt) {
        rd_kafka_DeleteTopic_t **dt = calloc(cnt, sizeof(*dt));
        rd_kafka_queue_t        *q  = rd_kafka_queue_new(rk);
        rd_kafka_event_t        *ev;

        if (!dt) {
                rd_kafka_queue_destroy(q);
                return;
        }
        for (size_t i = 0; i < cnt; i++)
                dt[i] = rd_kafka_DeleteTopic_new(topics[i]);
        rd_kafka_DeleteTopics(rk, dt, cnt, NULL, q);
        ev = rd_kafka_queue_poll(q, BENCH_KAFKA_TIMEOUT_MS);
        if (ev)
                rd_kafka_event_destroy(ev);
        rd_kafka_DeleteTopic_destroy_array(dt, cnt);
        free(dt);
        rd_kafka_queue_destroy(q);
}

long bench_proc_hwm_kib(pid_t pid) {
        char  path[64], line[256];
        FILE *f;
        long  kib = -1;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        if (!(f = fopen(path, "r")))
                return -1;
        while (fgets(line, sizeof(line), f))
                if (!strncmp(line, "VmHWM:", 6)) {
                        kib = strtol(line + 6, NULL, 10);
                        break;
                }
        fclose(f);
        return kib;
}

const char *const bench_mm2_jvm[] = {
    "-Xms256M", "-Xmx2G", "-server", "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true", NULL};
const char *const bench_perf_jvm[] = {
    "-Xmx512M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true", NULL};

bool bench_java_argv(const char **argv, size_t *a, const char *const *jvm,
                     const char *main, const char *log4j, char *buf,
                     size_t bufsize, size_t *off) {
        const char *lib = getenv("AAGW_KAFKA_LIB");

        if (!lib || !*lib)
                return false;
        argv[(*a)++] = "java";
        for (size_t i = 0; jvm[i]; i++)
                argv[(*a)++] = jvm[i];
        if (log4j)
                argv[(*a)++] = bench_buf_printf(buf, bufsize, off,
                                                "-Dlog4j2.configurationFile=%s",
                                                log4j);
        argv[(*a)++] = "-cp";
        argv[(*a)++] = bench_buf_printf(buf, bufsize, off, "%s/*", lib);
        argv[(*a)++] = main;
        return true;
}

int bench_log4j_write(const char *path) {
        FILE *f = fopen(path, "w");

        if (!f) {
                bench_errorf("%s: %s", path, strerror(errno));
                return -1;
        }
        fputs("status = error\n"
              "appender.err.type = Console\n"
              "appender.err.name = err\n"
              "appender.err.target = SYSTEM_ERR\n"
              "appender.err.layout.type = PatternLayout\n"
              "appender.err.layout.pattern = [%d] %p %m (%c)%n\n"
              "rootLogger.level = warn\n"
              "rootLogger.appenderRef.err.ref = err\n",
              f);
        if (ferror(f) | fclose(f)) {
                bench_errorf("%s: write failed", path);
                return -1;
        }
        return 0;
}

int bench_wan_source(const char **src, const char **rtt_ms) {
        const char *wan  = getenv("AAGW_TEST_WAN_BOOTSTRAPS_EAST");
        const char *kind = getenv("AAGW_TEST_SECURITY_EAST");
        const char *ms   = getenv("AAGW_TEST_WAN_DELAY_MS");

        if (!wan || !*wan) {
                bench_errorf("--wan needs east's WAN listener: run under "
                             "scripts/kafka-clusters --wan-delay MS east west "
                             "(AAGW_TEST_WAN_BOOTSTRAPS_EAST is not set)");
                return -1;
        }
        /* The WAN listener speaks what the gateway's does; these
         * programs' clients take no security settings. */
        if (kind && strcmp(kind, "plaintext")) {
                bench_errorf("--wan: east's WAN listener speaks %s; the "
                             "benchmarks speak plaintext only (start east "
                             "without --security)",
                             kind);
                return -1;
        }
        *src    = wan;
        *rtt_ms = ms && *ms ? ms : "?";
        return 0;
}

int bench_mm2_config_write(const char *path, const char *alias,
                           const char *src, const char *dst,
                           const char *topic, int tasks) {
        FILE *f = fopen(path, "w");

        if (!f) {
                bench_errorf("%s: %s", path, strerror(errno));
                return -1;
        }
        fprintf(f,
                "clusters=%s, west\n"
                "%s.bootstrap.servers=%s\n"
                "west.bootstrap.servers=%s\n"
                "%s->west.enabled=true\n"
                "%s->west.topics=%s\n"
                "west->%s.enabled=false\n"
                "tasks.max=%d\n"
                /* What aagw's flow does too: heartbeats, checkpoints
                 * (no consumer groups here), offset syncs. */
                "emit.heartbeats.interval.seconds=1\n"
                "emit.checkpoints.interval.seconds=1\n"
                "sync.group.offsets.enabled=false\n"
                "refresh.topics.interval.seconds=5\n"
                "refresh.groups.interval.seconds=5\n"
                /* One broker per cluster. */
                "replication.factor=1\n"
                "checkpoints.topic.replication.factor=1\n"
                "heartbeats.topic.replication.factor=1\n"
                "offset-syncs.topic.replication.factor=1\n"
                "offset.storage.replication.factor=1\n"
                "status.storage.replication.factor=1\n"
                "config.storage.replication.factor=1\n"
                "%s.offset.flush.interval.ms=1000\n"
                "west.offset.flush.interval.ms=1000\n"
                /* The guarantees of aagw's producer. */
                "west.producer.enable.idempotence=true\n"
                "west.producer.acks=all\n",
                alias, alias, src, dst, alias, alias, topic, alias, tasks,
                alias);
        if (ferror(f) | fclose(f)) {
                bench_errorf("%s: write failed", path);
                return -1;
        }
        return 0;
}
