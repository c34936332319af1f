/*
 * tests/bench/bench_util.c: what the benchmark programs share (see
 * bench_util.h).  Moved out of bench_replicate.c when bench_unify.c came
 * along; behaviour unchanged, except that the bare loop now reads a
 * comma-separated list of source topics.
 */
#include "bench_util.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

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

rd_kafka_t *bench_client_new(rd_kafka_type_t type, const char *bootstraps,
                             const char *const *props, char *errstr,
                             size_t errstr_size) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        rd_kafka_t      *rk;

        if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps, errstr,
                              errstr_size) ||
            rd_kafka_conf_set(conf, "reconnect.backoff.max.ms", "1000", errstr,
                              errstr_size))
                goto fail;
        for (size_t i = 0; props && props[i]; i += 2)
                if (rd_kafka_conf_set(conf, props[i], props[i + 1], errstr,
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
                     rd_kafka_message_t *m, struct bare_stats *st) {
        rd_kafka_headers_t       *hdrs = NULL;
        rd_kafka_timestamp_type_t tstype;
        int64_t                   ts = rd_kafka_message_timestamp(m, &tstype);
        rd_kafka_vu_t             vu[8];
        size_t                    n = 0;
        rd_kafka_error_t         *error;

        rd_kafka_message_detach_headers(m, &hdrs);
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
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        rd_kafka_t      *rk;
        size_t           rlen = strlen(role);

        if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps, errstr,
                              errstr_size))
                goto fail;
        for (size_t i = 0; props[i]; i += 2)
                if (rd_kafka_conf_set(conf, props[i], props[i + 1], errstr,
                                      errstr_size))
                        goto fail;
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
                                      "linger.ms", "5",
                                      "batch.num.messages", "10000",
                                      "queue.buffering.max.messages",
                                      "500000",
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
        int                              rc   = BENCH_EXIT_RUNTIME;

        if (argc < 5) {
                fprintf(stderr,
                        "usage: %s --bare SRC_BOOTSTRAPS "
                        "SRC_TOPIC[,SRC_TOPIC...] DST_BOOTSTRAPS DST_TOPIC "
                        "[consumer.K=V|producer.K=V]...\n",
                        prog);
                return BENCH_EXIT_USAGE;
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
                bare_copy(pr, rkt, m, &st);
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
