/* tests/interop/interop.c: see interop.h. */
#include "interop.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "aagw_replicator.h"

#define START_MS 180000 /* two clusters on a loaded 2-core machine */

static const char *const ALIASES[2] = {"east", "west"};

static int alias_idx(const char *alias) {
        return strcmp(alias, "east") ? 1 : 0;
}

static const char *env_or(const char *name, const char *dflt) {
        const char *v = getenv(name);
        return v && *v ? v : dflt;
}

/* The jar folder: scripts/kafka-fetch prints it (quietly when built). */
static void find_lib(struct io *io) {
        const char      *fetch = env_or("AAGW_KAFKA_FETCH", "scripts/kafka-fetch");
        const char      *argv[] = {fetch, NULL};
        harness_output_t o      = {0};
        harness_lines_t  l      = {0};

        if (getenv("AAGW_KAFKA_LIB") && *getenv("AAGW_KAFKA_LIB")) {
                io->lib = strdup(getenv("AAGW_KAFKA_LIB"));
                return;
        }
        if (harness_run(argv, NULL, 0, 600000, &o, io->errstr,
                        sizeof(io->errstr)) != AAGW_OK ||
            harness_exit_code(o.status) != 0)
                fail_msg("%s failed (Java and Maven are required for the "
                         "kafka suite): %s %s",
                         fetch, io->errstr, o.err ? o.err : "");
        assert_int_equal(harness_lines_split(o.out, &l), 0);
        assert_true(l.cnt > 0);
        io->lib = strdup(l.v[l.cnt - 1]);
        harness_lines_deinit(&l);
        harness_output_deinit(&o);
}

void io_begin(struct io *io, const char *tag) {
        const char *e = getenv("AAGW_TEST_BOOTSTRAPS_EAST");
        const char *w = getenv("AAGW_TEST_BOOTSTRAPS_WEST");

        memset(io, 0, sizeof(*io));
        io->dir = harness_tmpdir_new(tag);
        assert_non_null(io->dir);
        find_lib(io);
        if (e && *e && w && *w) {
                io->hc = harness_clusters_new(ALIASES, 2, 1, io->errstr,
                                              sizeof(io->errstr));
        } else {
                char       *file = harness_path_join(io->dir, "bootstraps");
                char       *envf = harness_path_join(io->dir, "clusters.env");
                char       *log  = harness_path_join(io->dir, "clusters.log");
                char       *sec  = strdup(env_or("AAGW_TEST_SECURITY", ""));
                char       *save = NULL;
                const char *argv[16];
                size_t      a = 0;

                io->run_dir = harness_path_join(io->dir, "kafka");
                argv[a++] =
                    env_or("AAGW_KAFKA_CLUSTERS", "scripts/kafka-clusters");
                argv[a++] = "--bootstraps-file";
                argv[a++] = file;
                argv[a++] = "--env-file";
                argv[a++] = envf;
                argv[a++] = "--dir";
                argv[a++] = io->run_dir;
                for (char *t = strtok_r(sec, " \t", &save); t && a < 12;
                     t = strtok_r(NULL, " \t", &save)) {
                        argv[a++] = "--security";
                        argv[a++] = t;
                }
                argv[a++] = "east";
                argv[a++] = "west";
                argv[a]   = NULL;
                io->launcher = harness_proc_spawn(argv, log, log, io->errstr,
                                                  sizeof(io->errstr));
                if (!io->launcher)
                        fail_msg("kafka-clusters: %s", io->errstr);
                io->own = true;
                int64_t deadline = harness_now_ms() + START_MS;
                while (!harness_wait_file(file, 500)) {
                        if (harness_proc_wait(io->launcher, 0, NULL) == AAGW_OK)
                                fail_msg("kafka-clusters exited before the "
                                         "clusters were ready (see %s)",
                                         log);
                        if (harness_now_ms() > deadline)
                                fail_msg("clusters not ready after %d s (see "
                                         "%s)",
                                         START_MS / 1000, log);
                }
                /* The env file is written before the bootstraps file. */
                io->hc = harness_clusters_load(envf, ALIASES, 2, io->errstr,
                                               sizeof(io->errstr));
                free(file);
                free(envf);
                free(log);
                free(sec);
        }
        if (!io->hc)
                fail_msg("clusters: %s", io->errstr);
        assert_true(harness_clusters_are_real(io->hc));
        for (int i = 0; i < 2; i++)
                print_message("# %s: %s, the gateway's listener %s\n",
                              ALIASES[i],
                              harness_clusters_security(io->hc, ALIASES[i]),
                              io_gw_bs(io, ALIASES[i]));
        for (int i = 0; i < 2; i++) {
                rd_kafka_conf_t *c = rd_kafka_conf_new();
                char             err[256];
                rd_kafka_conf_set(c, "bootstrap.servers", io_bs(io, ALIASES[i]),
                                  err, sizeof(err));
                io->admin[i] =
                    rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
                assert_non_null(io->admin[i]);
        }
}

void io_begin_java(struct io *io, const char *tag) {
        memset(io, 0, sizeof(*io));
        io->dir = harness_tmpdir_new(tag);
        assert_non_null(io->dir);
        find_lib(io);
}

void io_end(struct io *io) {
        for (size_t i = io->nprocs; i > 0; i--) {
                harness_proc_t *p = io->procs[i - 1];
                harness_proc_signal(p, SIGTERM);
                if (harness_proc_wait(p, 20000, NULL) != AAGW_OK)
                        harness_proc_signal(p, SIGKILL);
                harness_proc_destroy(p);
        }
        io->nprocs = 0;
        for (int i = 0; i < 2; i++)
                if (io->admin[i])
                        rd_kafka_destroy(io->admin[i]);
        harness_clusters_destroy(io->hc);
        if (io->launcher) {
                /* The launcher stops its brokers and removes its run dir. */
                harness_proc_signal(io->launcher, SIGTERM);
                if (harness_proc_wait(io->launcher, 60000, NULL) != AAGW_OK)
                        harness_proc_signal(io->launcher, SIGKILL);
                harness_proc_destroy(io->launcher);
        }
        if (io->dir && !getenv("AAGW_TEST_KEEP"))
                harness_rmtree(io->dir);
        free(io->dir);
        free(io->lib);
        free(io->run_dir);
        memset(io, 0, sizeof(*io));
}

const char *io_bs(struct io *io, const char *alias) {
        const char *b = harness_clusters_bootstraps(io->hc, alias);
        assert_non_null(b);
        return b;
}

const char *io_gw_bs(struct io *io, const char *alias) {
        const char *b = harness_clusters_gw_bootstraps(io->hc, alias);
        assert_non_null(b);
        return b;
}

/* argv[a..]: aagw's --cluster (and --set for a secured listener) for east
 * and west; @returns the new a. */
static size_t cluster_args(struct io *io, const char **argv, size_t a,
                           size_t size) {
        for (int i = 0; i < 2; i++) {
                size_t n = harness_clusters_gw_args(io->hc, ALIASES[i],
                                                    argv + a, size - a);
                assert_true(n > 0);
                a += n;
        }
        return a;
}

void io_topic(struct io *io, const char *alias, const char *topic,
              int partitions) {
        if (harness_clusters_create_topic(io->hc, alias, topic, partitions,
                                          io->errstr, sizeof(io->errstr)))
                fail_msg("create %s at %s: %s", topic, alias, io->errstr);
}

void io_produce(struct io *io, const char *alias, const char *topic,
                int32_t partition, int cnt, const char *tag) {
        harness_record_t *r   = calloc((size_t)cnt, sizeof(*r));
        char            (*v)[48] = calloc((size_t)cnt, sizeof(*v));

        assert_non_null(r);
        assert_non_null(v);
        for (int i = 0; i < cnt; i++) {
                snprintf(v[i], sizeof(v[i]), "%s-%d", tag, i);
                r[i].value = v[i];
        }
        if (harness_kcat_produce(io_bs(io, alias), topic, r, (size_t)cnt, NULL,
                                 partition, IO_CMD_MS, io->errstr,
                                 sizeof(io->errstr)))
                fail_msg("produce to %s at %s: %s", topic, alias, io->errstr);
        free(r);
        free(v);
}

void io_commit_metadata(char *buf, size_t size, const char *group,
                        int32_t partition) {
        snprintf(buf, size, "interop:%s:%d", group, (int)partition);
}

void io_commit(struct io *io, const char *alias, const char *group,
               const char *topic, int32_t partition, int64_t offset) {
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_t *tp =
            rd_kafka_topic_partition_list_add(l, topic, partition);
        char meta[256];
        tp->offset = offset;
        io_commit_metadata(meta, sizeof(meta), group, partition);
        tp->metadata      = strdup(meta);
        tp->metadata_size = strlen(meta);
        /* A fresh cluster answers "not coordinator" (or "loading") until
         * its __consumer_offsets partitions are loaded: retry a while. */
        int64_t deadline = harness_now_ms() + 60000;
        int     rc;
        while ((rc = aagw_kafka_group_commit(io->admin[alias_idx(alias)], group,
                                             l, 10000, io->errstr,
                                             sizeof(io->errstr))) &&
               harness_now_ms() < deadline &&
               (strstr(io->errstr, "oordinator") || strstr(io->errstr, "oad"))) {
                struct timespec ts = {0, 500 * 1000000L};
                nanosleep(&ts, NULL);
        }
        if (rc)
                fail_msg("commit %s %s [%d] at %s: %s", group, topic,
                         (int)partition, alias, io->errstr);
        rd_kafka_topic_partition_list_destroy(l);
}

int64_t io_end_offset(struct io *io, const char *alias, const char *topic,
                      int32_t partition) {
        int64_t lo, hi;
        if (rd_kafka_query_watermark_offsets(io->admin[alias_idx(alias)], topic,
                                             partition, &lo, &hi, 10000))
                return -1;
        return hi;
}

long io_read(struct io *io, const char *alias, const char *topic,
             int32_t partition, io_rec_fn *fn, void *arg) {
        rd_kafka_conf_t *c = rd_kafka_conf_new();
        char             err[256];
        int64_t          lo, hi, last = -1;
        long             n = 0;
        rd_kafka_t      *rk;

        rd_kafka_conf_set(c, "bootstrap.servers", io_bs(io, alias), err,
                          sizeof(err));
        rd_kafka_conf_set(c, "group.id", "aagw-interop-reader", err,
                          sizeof(err));
        rd_kafka_conf_set(c, "enable.auto.commit", "false", err, sizeof(err));
        rd_kafka_conf_set(c, "fetch.wait.max.ms", "50", err, sizeof(err));
        rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof(err));
        assert_non_null(rk);
        if (rd_kafka_query_watermark_offsets(rk, topic, partition, &lo, &hi,
                                             10000)) {
                rd_kafka_destroy(rk);
                return -1;
        }
        if (hi > lo) {
                rd_kafka_topic_partition_list_t *a =
                    rd_kafka_topic_partition_list_new(1);
                rd_kafka_topic_partition_list_add(a, topic, partition)->offset =
                    lo;
                rd_kafka_assign(rk, a);
                rd_kafka_topic_partition_list_destroy(a);
                int64_t deadline = harness_now_ms() + 20000;
                while (last < hi - 1 && harness_now_ms() < deadline) {
                        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
                        if (!m)
                                continue;
                        if (!m->err && m->offset < hi) {
                                last = m->offset;
                                n++;
                                fn(arg, m);
                        } else if (!m->err)
                                last = m->offset;
                        rd_kafka_message_destroy(m);
                }
                rd_kafka_assign(rk, NULL);
        }
        rd_kafka_destroy(rk);
        return n;
}

harness_proc_t *io_spawn(struct io *io, const char *name,
                         const char *const *argv) {
        char            file[128];
        char           *log;
        harness_proc_t *p;

        assert_true(io->nprocs < sizeof(io->procs) / sizeof(io->procs[0]));
        snprintf(file, sizeof(file), "%s.log", name);
        log = harness_path_join(io->dir, file);
        p   = harness_proc_spawn(argv, log, log, io->errstr,
                                 sizeof(io->errstr));
        if (!p)
                fail_msg("%s: %s", name, io->errstr);
        free(log);
        io->procs[io->nprocs++] = p;
        return p;
}

harness_proc_t *io_gateway(struct io *io, const char *name,
                           const char *primary, const char *const *extra) {
        char        sub[128];
        const char *argv[128];
        size_t      a = 0;
        char       *state;

        snprintf(sub, sizeof(sub), "state-%s", name);
        state = harness_path_join(io->dir, sub);
        argv[a++] = harness_aagw_bin();
        argv[a++] = "run";
        a = cluster_args(io, argv, a, sizeof(argv) / sizeof(argv[0]) - 48);
        argv[a++] = "--mode";
        argv[a++] = "active-passive";
        argv[a++] = "--primary";
        argv[a++] = primary;
        argv[a++] = "--unify";
        argv[a++] = "off";
        argv[a++] = "--state-dir";
        argv[a++] = state;
        argv[a++] = "--set";
        argv[a++] = "replication.refresh_topics_interval=1s";
        argv[a++] = "--set";
        argv[a++] = "mm2.checkpoints_interval=1s";
        for (size_t i = 0; extra && extra[i]; i++) {
                assert_true(a < sizeof(argv) / sizeof(argv[0]) - 1);
                argv[a++] = extra[i];
        }
        argv[a] = NULL;
        harness_proc_t *p = io_spawn(io, name, argv);
        free(state);
        return p;
}

void io_ctl(struct io *io, const char *verb, const char *alias) {
        const char      *argv[] = {
            env_or("AAGW_KAFKA_CLUSTERS", "scripts/kafka-clusters"),
            "ctl", "--dir", io->run_dir, verb, alias, "1", NULL};
        harness_output_t o      = {0};

        if (!io->own)
                fail_msg("kafka-clusters ctl %s %s: the clusters are not the "
                         "test's own (AAGW_TEST_BOOTSTRAPS_* set)",
                         verb, alias);
        if (harness_run(argv, NULL, 0, 150000, &o, io->errstr,
                        sizeof(io->errstr)) != AAGW_OK ||
            harness_exit_code(o.status) != 0)
                fail_msg("kafka-clusters ctl %s %s: %s%s", verb, alias,
                         io->errstr, o.err ? o.err : "");
        harness_output_deinit(&o);
}

int io_aagw(struct io *io, const char *const *words, harness_output_t *o) {
        const char *argv[128];
        size_t      a = 0;

        argv[a++] = harness_aagw_bin();
        for (size_t i = 0; words[i]; i++) {
                assert_true(a < 64);
                argv[a++] = words[i];
        }
        a       = cluster_args(io, argv, a, sizeof(argv) / sizeof(argv[0]) - 1);
        argv[a] = NULL;
        memset(o, 0, sizeof(*o));
        if (harness_run(argv, NULL, 0, IO_CMD_MS, o, io->errstr,
                        sizeof(io->errstr)) != AAGW_OK)
                fail_msg("aagw %s: %s", words[0], io->errstr);
        return harness_exit_code(o->status);
}

/* Every line of 'text' as "# line". */
static void show_lines(const char *text) {
        while (text && *text) {
                size_t len = strcspn(text, "\n");

                print_message("# %.*s\n", (int)len, text);
                text += len + (text[len] == '\n');
        }
}

void io_show(const char *head, int rc, const harness_output_t *o,
             bool with_err) {
        print_message("# %s: exit %d\n", head, rc);
        show_lines(o->out);
        if (with_err)
                show_lines(o->err);
}

harness_proc_t *io_mm2(struct io *io, const char *topics, const char *extra) {
        char *props = harness_path_join(io->dir, "mm2.properties");
        FILE *f     = fopen(props, "w");
        assert_non_null(f);
        fprintf(f,
                "clusters=east, west\n"
                "east.bootstrap.servers=%s\n"
                "west.bootstrap.servers=%s\n"
                "east->west.enabled=true\n"
                "east->west.topics=%s\n"
                "west->east.enabled=false\n"
                "emit.heartbeats.interval.seconds=1\n"
                "emit.checkpoints.interval.seconds=1\n"
                "refresh.topics.interval.seconds=5\n"
                "replication.factor=1\n"
                "checkpoints.topic.replication.factor=1\n"
                "heartbeats.topic.replication.factor=1\n"
                "offset-syncs.topic.replication.factor=1\n"
                "offset.storage.replication.factor=1\n"
                "status.storage.replication.factor=1\n"
                "config.storage.replication.factor=1\n"
                "east.offset.flush.interval.ms=1000\n"
                "west.offset.flush.interval.ms=1000\n"
                "%s",
                io_gw_bs(io, "east"), io_gw_bs(io, "west"), topics,
                extra ? extra : "");
        /* A secured cluster's client settings, under its alias (MM2 gives
         * "ALIAS.KEY" to every client of that cluster). */
        for (int i = 0; i < 2; i++) {
                const char *jp = harness_clusters_java_props(io->hc,
                                                             ALIASES[i]);
                harness_lines_t l = {0};
                char           *text;

                if (!jp)
                        continue;
                text = harness_read_file(jp, NULL);
                assert_non_null(text);
                assert_int_equal(harness_lines_split(text, &l), 0);
                for (size_t k = 0; k < l.cnt; k++)
                        if (l.v[k][0] && l.v[k][0] != '#')
                                fprintf(f, "%s.%s\n", ALIASES[i], l.v[k]);
                harness_lines_deinit(&l);
                free(text);
        }
        fclose(f);
        const char *args[] = {props};
        const char *argv[32];
        io_java_argv(io, argv, "mm2.log",
                     "org.apache.kafka.connect.mirror.MirrorMaker", args, 1);
        harness_proc_t *p = io_spawn(io, "mm2-jvm", argv);
        free(props);
        return p;
}

void io_java_argv(struct io *io, const char **argv, const char *log,
                  const char *main, const char *const *args, size_t nargs) {
        static char cp[1024], conf[1024];
        char       *cfile = harness_path_join(io->dir, "log4j2.properties");
        char       *lfile = harness_path_join(io->dir, log);
        FILE       *f     = fopen(cfile, "w");
        size_t      a     = 0;

        assert_non_null(f);
        fprintf(f,
                "appender.f.type=File\nappender.f.name=F\n"
                "appender.f.fileName=%s\nappender.f.append=true\n"
                "appender.f.layout.type=PatternLayout\n"
                "appender.f.layout.pattern=[%%d] %%p %%c{1}: %%m%%n\n"
                "rootLogger.level=INFO\nrootLogger.appenderRef.f.ref=F\n",
                lfile);
        fclose(f);
        snprintf(cp, sizeof(cp), "%s/*", io->lib);
        snprintf(conf, sizeof(conf), "-Dlog4j2.configurationFile=%s", cfile);
        argv[a++] = "java";
        argv[a++] = "-Xms64m";
        argv[a++] = "-Xmx384m";
        argv[a++] = "-XX:+UseSerialGC";
        argv[a++] = "-XX:TieredStopAtLevel=1";
        argv[a++] = "-XX:-UsePerfData";
        argv[a++] = conf;
        argv[a++] = "-cp";
        argv[a++] = cp;
        argv[a++] = main;
        for (size_t i = 0; i < nargs; i++)
                argv[a++] = args[i];
        argv[a] = NULL;
        free(cfile);
        free(lfile);
}

json_object *io_mm2_query(struct io *io, const char *const *args,
                          size_t nqueries) {
        size_t           nargs = 0;
        harness_output_t o     = {0};
        harness_lines_t  l     = {0};
        json_object     *arr   = json_object_new_array();
        char             conf[2][1200];

        while (args[nargs])
                nargs++;
        /* --config BS=FILE for each secured cluster, then the queries. */
        const char **all = calloc(nargs + 5, sizeof(*all));
        size_t       n   = 0;
        assert_non_null(all);
        for (int i = 0; i < 2 && io->hc; i++) {
                const char *jp = harness_clusters_java_props(io->hc,
                                                             ALIASES[i]);
                if (!jp)
                        continue;
                snprintf(conf[i], sizeof(conf[i]), "%s=%s",
                         io_gw_bs(io, ALIASES[i]), jp);
                all[n++] = "--config";
                all[n++] = conf[i];
        }
        for (size_t i = 0; i < nargs; i++)
                all[n++] = args[i];
        const char **argv = calloc(n + 16, sizeof(*argv));
        assert_non_null(argv);
        io_java_argv(io, argv, "mm2interop.log", "aagw.kafka.Mm2Interop", all,
                     n);
        if (harness_run(argv, NULL, 0, 120000, &o, io->errstr,
                        sizeof(io->errstr)) != AAGW_OK)
                fail_msg("Mm2Interop: %s (java is required for the kafka "
                         "suite)",
                         io->errstr);
        io_show("Mm2Interop", harness_exit_code(o.status), &o, false);
        assert_int_equal(harness_lines_split(o.out, &l), 0);
        for (size_t i = 0; i < l.cnt; i++) {
                json_object *j;
                if (l.v[i][0] != '{')
                        continue;
                j = json_tokener_parse(l.v[i]);
                assert_non_null(j);
                if (json_object_object_get_ex(j, "error", NULL))
                        fail_msg("Mm2Interop: %s", l.v[i]);
                json_object_array_add(arr, j);
        }
        if (json_object_array_length(arr) != nqueries)
                fail_msg("Mm2Interop answered %zu of %zu queries (exit %d): "
                         "%s",
                         json_object_array_length(arr), nqueries,
                         harness_exit_code(o.status), o.err);
        assert_int_equal(harness_exit_code(o.status), 0);
        harness_lines_deinit(&l);
        harness_output_deinit(&o);
        free(argv);
        free(all);
        return arr;
}

bool io_json_has(json_object *arr, const char *s) {
        for (size_t i = 0; arr && i < json_object_array_length(arr); i++)
                if (!strcmp(json_object_get_string(
                                json_object_array_get_idx(arr, i)),
                            s))
                        return true;
        return false;
}
