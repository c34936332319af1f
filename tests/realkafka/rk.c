/* tests/realkafka/rk.c: the real-Kafka fixture (see rk.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "aagw_replicator.h"
#include "rk.h"

/* ------------------------------- FIXTURE -------------------------------- */

static const char LOG4J[] =
    "status = error\n"
    "appender.err.type = Console\n"
    "appender.err.name = err\n"
    "appender.err.target = SYSTEM_ERR\n"
    "appender.err.layout.type = PatternLayout\n"
    "appender.err.layout.pattern = [%d] %p %m (%c)%n\n"
    "rootLogger.level = warn\n"
    "rootLogger.appenderRef.err.ref = err\n";

static void produce(struct rk *r, const char *alias, const char *topic,
                    int parts, const char *prefix, int from, int n,
                    bool keyed) {
        char             err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           rk_bs(r, alias), err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        assert_int_equal(rd_kafka_conf_set(conf, "enable.idempotence", "true",
                                           err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        assert_non_null(p);
        for (int i = from; i < from + n; i++) {
                char v[160];
                int  len = snprintf(v, sizeof(v), "%s%d", prefix, i);
                assert_int_equal(
                    rd_kafka_producev(p, RD_KAFKA_V_TOPIC(topic),
                                      RD_KAFKA_V_PARTITION(i % parts),
                                      RD_KAFKA_V_KEY(keyed ? v : NULL,
                                                     keyed ? (size_t)len : 0),
                                      RD_KAFKA_V_VALUE(v, (size_t)len),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                      RD_KAFKA_V_END),
                    RD_KAFKA_RESP_ERR_NO_ERROR);
        }
        assert_int_equal(rd_kafka_flush(p, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
        rd_kafka_destroy(p);
}

void rk_produce(struct rk *r, const char *alias, const char *topic,
                int parts, const char *prefix, int n) {
        produce(r, alias, topic, parts, prefix, 0, n, false);
}

void rk_produce_keyed(struct rk *r, const char *alias, const char *topic,
                      int parts, const char *prefix, int from, int n) {
        produce(r, alias, topic, parts, prefix, from, n, true);
}

char *rk_path(struct rk *r, const char *name) {
        char *p = harness_path_join(r->dir, name);

        assert_non_null(p);
        return p;
}

char *rk_write(struct rk *r, const char *name, const char *text) {
        char *p = rk_path(r, name);
        FILE *f = fopen(p, "w");

        assert_non_null(f);
        assert_true(fputs(text, f) >= 0);
        assert_int_equal(fclose(f), 0);
        return p;
}

struct rk *rk_new(const char *tag) {
        struct rk       *r = calloc(1, sizeof(*r));
        harness_output_t o;
        char             fetch[4096];
        aagw_err_t       rc;

        assert_non_null(r);
        r->t0  = harness_now_ms();
        r->src = getenv("AAGW_SOURCE_ROOT");
        if (!r->src || !*r->src)
                fail_msg("AAGW_SOURCE_ROOT is not set (meson sets it)");
        if (!harness_aagw_bin())
                fail_msg("AAGW_BIN is not set (meson sets it)");
        /* The jars: a missing Java, Maven or jar fails this suite. */
        snprintf(fetch, sizeof(fetch), "%s/scripts/kafka-fetch", r->src);
        {
                const char *argv[] = {fetch, NULL};
                memset(&o, 0, sizeof(o));
                rc = harness_run(argv, NULL, 0, 900000, &o, r->errstr,
                                 sizeof(r->errstr));
                if (rc || harness_exit_code(o.status) != 0)
                        fail_msg("scripts/kafka-fetch failed (Java, Maven or "
                                 "a jar missing?): %s %s",
                                 rc ? r->errstr : "", o.err ? o.err : "");
                /* The folder is the last line of stdout. */
                char *s = o.out;
                while (s && *s && s[strlen(s) - 1] == '\n')
                        s[strlen(s) - 1] = '\0';
                char *last = s ? strrchr(s, '\n') : NULL;
                r->lib     = strdup(last ? last + 1 : s ? s : "");
                harness_output_deinit(&o);
        }
        assert_non_null(r->lib);
        if (!*r->lib)
                fail_msg("scripts/kafka-fetch printed no jar folder");
        r->dir = harness_tmpdir_new(tag);
        assert_non_null(r->dir);
        r->state = rk_path(r, "state");
        r->log4j = rk_write(r, "log4j2.properties", LOG4J);
        return r;
}

double rk_elapsed(struct rk *r) {
        return (double)(harness_now_ms() - r->t0) / 1000.0;
}

/* The tail (up to 'max' bytes) of file 'path' to stderr under a title. */
static void dump_tail(const char *title, const char *path, size_t max) {
        char  *t = harness_read_file(path, NULL);
        size_t n = t ? strlen(t) : 0;
        fprintf(stderr, "# ---- %s ----\n%s\n", title,
                t ? (n > max ? t + n - max : t) : "");
        free(t);
}

static void launcher_tail(struct rk_cluster *c) {
        if (c->log)
                dump_tail(c->log, c->log, 3000);
}

void rk_destroy(struct rk *r) {
        if (!r)
                return;
        if (r->gw) {
                harness_proc_signal(r->gw, SIGKILL);
                harness_proc_destroy(r->gw);
        }
        for (size_t i = 0; i < r->ncl; i++)
                if (r->c[i].admin)
                        rd_kafka_destroy(r->c[i].admin);
        /* SIGTERM all launchers first: their brokers stop in parallel. */
        for (size_t i = 0; i < r->ncl; i++)
                if (r->c[i].launcher)
                        harness_proc_signal(r->c[i].launcher, SIGTERM);
        for (size_t i = 0; i < r->ncl; i++) {
                struct rk_cluster *c = &r->c[i];
                if (!c->launcher)
                        continue;
                if (harness_proc_wait(c->launcher, 60000, NULL) !=
                    AAGW_OK)
                        fprintf(stderr,
                                "# launcher of %s did not stop in 60 s: "
                                "SIGKILL\n",
                                c->alias);
                harness_proc_destroy(c->launcher);
                harness_clusters_destroy(c->hc);
                free(c->env_file);
                free(c->run_dir);
                free(c->bs_file);
                free(c->log);
                free(c->bs);
        }
        if (r->dir && getenv("AAGW_TEST_KEEP"))
                fprintf(stderr, "# kept %s\n", r->dir);
        else if (r->dir)
                harness_rmtree(r->dir);
        free(r->dir);
        free(r->lib);
        free(r->state);
        free(r->log4j);
        free(r);
}

int rk_teardown(void **state) {
        rk_destroy(*state);
        *state = NULL;
        return 0;
}

/* ------------------------------- CLUSTERS ------------------------------- */

static struct rk_cluster *cluster(struct rk *r, const char *alias) {
        for (size_t i = 0; i < r->ncl; i++)
                if (!strcmp(r->c[i].alias, alias))
                        return &r->c[i];
        fail_msg("no cluster %s", alias);
        return NULL;
}

struct ready_arg {
        struct rk_cluster *c;
        bool               died;
};

static bool launcher_ready(void *arg) {
        struct ready_arg *a = arg;

        if (harness_proc_wait(a->c->launcher, 0, NULL) != AAGW_ERR_TIMEOUT) {
                a->died = true;
                return true;
        }
        return harness_wait_file(a->c->bs_file, 0);
}

void rk_cluster_start(struct rk *r, const char *alias, int brokers) {
        rk_cluster_start_with(r, alias, brokers, NULL);
}

void rk_cluster_start_with(struct rk *r, const char *alias, int brokers,
                           const char *const *props) {
        struct rk_cluster *c;
        char               script[4096], nb[16], name[96];
        struct ready_arg   ra;
        int64_t            t = harness_now_ms();

        assert_true(r->ncl < RK_MAX_CLUSTERS);
        c = &r->c[r->ncl++];
        snprintf(c->alias, sizeof(c->alias), "%s", alias);
        c->brokers = brokers;
        snprintf(name, sizeof(name), "kafka-%s", alias);
        c->run_dir = rk_path(r, name);
        snprintf(name, sizeof(name), "%s.bootstraps", alias);
        c->bs_file = rk_path(r, name);
        snprintf(name, sizeof(name), "launcher-%s.log", alias);
        c->log = rk_path(r, name);
        snprintf(name, sizeof(name), "%s.env", alias);
        c->env_file = rk_path(r, name);
        snprintf(script, sizeof(script), "%s/scripts/kafka-clusters", r->src);
        snprintf(nb, sizeof(nb), "%d", brokers);
        /* 384 MiB heaps: four brokers, aagw and the tools share 2 cores
         * and the memory of a test machine. */
        const char *argv[64] = {script,     "--brokers",         nb,
                                "--dir",    c->run_dir,          "--bootstraps-file",
                                c->bs_file, "--heap",            "384",
                                "--env-file", c->env_file};
        size_t      a        = 11;
        /* The test's directory goes at its end, brokers' data with it: a
         * clean broker stop (2 s or more) is kept for AAGW_TEST_KEEP. */
        if (!getenv("AAGW_TEST_KEEP"))
                argv[a++] = "--fast-stop";
        for (size_t i = 0; props && props[i] && a < 56; i++) {
                argv[a++] = "--set";
                argv[a++] = props[i];
        }
        /* AAGW_TEST_SECURITY: "ALIAS=KIND" words; this cluster's, if any. */
        char *sec = strdup(getenv("AAGW_TEST_SECURITY") ?
                               getenv("AAGW_TEST_SECURITY") : "");
        char *save = NULL;
        assert_non_null(sec);
        for (char *t = strtok_r(sec, " \t", &save); t;
             t = strtok_r(NULL, " \t", &save))
                if (!strncmp(t, alias, strlen(alias)) &&
                    t[strlen(alias)] == '=') {
                        argv[a++] = "--security";
                        argv[a++] = t;
                        break;
                }
        /* With AAGW_TEST_KEEP the launcher keeps the brokers' data and
         * server.log (it removes its run directory otherwise). */
        if (getenv("AAGW_TEST_KEEP"))
                argv[a++] = "--keep";
        argv[a++] = alias;
        argv[a]   = NULL;
        c->launcher = harness_proc_spawn(argv, c->log, c->log, r->errstr,
                                         sizeof(r->errstr));
        free(sec);
        if (!c->launcher)
                fail_msg("kafka-clusters: %s", r->errstr);
        ra = (struct ready_arg){c, false};
        if (!harness_wait_until(launcher_ready, &ra, 240000) || ra.died) {
                launcher_tail(c);
                fail_msg("cluster %s (%d brokers): %s", alias, brokers,
                         ra.died ? "the launcher exited"
                                 : "not ready in 240 s");
        }
        harness_bootstraps_t *b =
            harness_bootstraps_load(c->bs_file, r->errstr, sizeof(r->errstr));
        if (!b)
                fail_msg("%s", r->errstr);
        assert_non_null(harness_bootstraps_get(b, alias));
        c->bs = strdup(harness_bootstraps_get(b, alias));
        harness_bootstraps_destroy(b);
        /* The env file is complete before the bootstraps file appears. */
        const char *const one[] = {alias};
        c->hc = harness_clusters_load(c->env_file, one, 1, r->errstr,
                                      sizeof(r->errstr));
        if (!c->hc)
                fail_msg("cluster %s: %s", alias, r->errstr);

        rd_kafka_conf_t *conf =
            aagw_kafka_conf_new(c->bs, "test-admin", r->errstr, sizeof(r->errstr));
        assert_non_null(conf);
        c->admin =
            rd_kafka_new(RD_KAFKA_PRODUCER, conf, r->errstr, sizeof(r->errstr));
        assert_non_null(c->admin);
        const char *kind = harness_clusters_security(c->hc, alias);
        char        note[600] = "";
        if (strcmp(kind, "plaintext"))
                snprintf(note, sizeof(note), "; the gateway's: %s at %s", kind,
                         harness_clusters_gw_bootstraps(c->hc, alias));
        print_message("# cluster %s: %d broker%s at %s, ready in %.1f s%s\n",
                      alias, brokers, brokers == 1 ? "" : "s", c->bs,
                      (double)(harness_now_ms() - t) / 1000.0, note);
}

const char *rk_bs(struct rk *r, const char *alias) {
        return cluster(r, alias)->bs;
}

size_t rk_gw_cluster_args(struct rk *r, const char **argv, size_t room) {
        size_t a = 0;

        for (size_t i = 0; i < r->ncl; i++) {
                size_t n = harness_clusters_gw_args(r->c[i].hc, r->c[i].alias,
                                                    argv + a, room - a);
                assert_true(n > 0);
                a += n;
        }
        return a;
}

void rk_ctl(struct rk *r, const char *alias, const char *verb, int node,
            int timeout_ms) {
        struct rk_cluster *c = cluster(r, alias);
        char               script[4096], n[16];
        harness_output_t   o;
        aagw_err_t         rc;

        snprintf(script, sizeof(script), "%s/scripts/kafka-clusters", r->src);
        snprintf(n, sizeof(n), "%d", node);
        const char *argv[] = {script, "ctl",  "--dir", c->run_dir,
                              verb,   alias,  n,       NULL};
        memset(&o, 0, sizeof(o));
        rc = harness_run(argv, NULL, 0, timeout_ms, &o, r->errstr,
                         sizeof(r->errstr));
        if (rc || harness_exit_code(o.status) != 0) {
                launcher_tail(c);
                fail_msg("kafka-clusters ctl %s %s %d: %s%s", verb, alias, node,
                         rc ? r->errstr : "", o.err ? o.err : "");
        }
        harness_output_deinit(&o);
}

/* Every partition of the topic led, with at least @isr replicas in sync
 * (0: any); *parts gets the partition count (-1: not listed). */
static bool topic_state(rd_kafka_t *rk, const char *topic, int isr,
                        int *parts) {
        const struct rd_kafka_metadata *md;
        bool                            ok = false;

        *parts = -1;
        /* All topics: naming one could auto-create it (not on these
         * clusters, but the habit is cheap). */
        if (rd_kafka_metadata(rk, 1, NULL, &md, 5000))
                return false;
        for (int i = 0; i < md->topic_cnt; i++) {
                const struct rd_kafka_metadata_topic *t = &md->topics[i];

                if (strcmp(t->topic, topic) || t->err)
                        continue;
                *parts = t->partition_cnt;
                ok     = t->partition_cnt > 0;
                for (int p = 0; ok && p < t->partition_cnt; p++)
                        ok = t->partitions[p].leader >= 0 &&
                             t->partitions[p].isr_cnt >= isr;
        }
        rd_kafka_metadata_destroy(md);
        return ok;
}

struct isr_arg {
        rd_kafka_t *rk;
        const char *topic;
        int         isr, parts;
};

static bool isr_ok(void *arg) {
        struct isr_arg *a = arg;
        return topic_state(a->rk, a->topic, a->isr, &a->parts);
}

bool rk_wait_isr(struct rk *r, const char *alias, const char *topic, int isr,
                 int timeout_ms) {
        struct isr_arg a = {cluster(r, alias)->admin, topic, isr, -1};
        return harness_wait_until(isr_ok, &a, timeout_ms);
}

void rk_create_topic(struct rk *r, const char *alias, const char *topic,
                     int parts, int rf, int min_isr) {
        rk_create_topic_with(r, alias, topic, parts, rf, min_isr, NULL);
}

/* The answer on 'q' to admin request 'what' about 'topic' at 'alias',
 * whose one topic result fails the test unless it is success.  Returns
 * the event (the caller's). */
static rd_kafka_event_t *topic_answer(
    rd_kafka_queue_t *q, const char *what, const char *topic, const char *alias,
    const rd_kafka_topic_result_t **(*results)(rd_kafka_event_t *, size_t *)) {
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 35000);
        size_t            n  = 0;

        if (!ev)
                fail_msg("%s %s at %s: no answer in 35 s", what, topic, alias);
        if (rd_kafka_event_error(ev))
                fail_msg("%s %s at %s: %s", what, topic, alias,
                         rd_kafka_event_error_string(ev));
        const rd_kafka_topic_result_t **res = results(ev, &n);
        if (n != 1 || rd_kafka_topic_result_error(res[0]))
                fail_msg("%s %s at %s: %s", what, topic, alias,
                         n ? rd_kafka_topic_result_error_string(res[0])
                           : "no result");
        return ev;
}

static const rd_kafka_topic_result_t **created(rd_kafka_event_t *ev,
                                               size_t           *n) {
        return rd_kafka_CreateTopics_result_topics(
            rd_kafka_event_CreateTopics_result(ev), n);
}

static const rd_kafka_topic_result_t **grown(rd_kafka_event_t *ev, size_t *n) {
        return rd_kafka_CreatePartitions_result_topics(
            rd_kafka_event_CreatePartitions_result(ev), n);
}

void rk_create_topic_with(struct rk *r, const char *alias, const char *topic,
                          int parts, int rf, int min_isr,
                          const char *const *configs) {
        rd_kafka_t                     *rk = cluster(r, alias)->admin;
        rd_kafka_NewTopic_t            *nt;
        rd_kafka_AdminOptions_t        *o;
        rd_kafka_queue_t               *q;
        rd_kafka_event_t               *ev;
        char                            why[512], v[16];

        nt = rd_kafka_NewTopic_new(topic, parts, rf, why, sizeof(why));
        if (!nt)
                fail_msg("topic %s: %s", topic, why);
        if (min_isr > 0) {
                snprintf(v, sizeof(v), "%d", min_isr);
                assert_int_equal(rd_kafka_NewTopic_set_config(
                                     nt, "min.insync.replicas", v),
                                 0);
        }
        for (size_t i = 0; configs && configs[i]; i += 2)
                assert_int_equal(rd_kafka_NewTopic_set_config(nt, configs[i],
                                                              configs[i + 1]),
                                 0);
        o = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
        rd_kafka_AdminOptions_set_request_timeout(o, 30000, NULL, 0);
        rd_kafka_AdminOptions_set_operation_timeout(o, 30000, NULL, 0);
        q = rd_kafka_queue_new(rk);
        rd_kafka_CreateTopics(rk, &nt, 1, o, q);
        ev = topic_answer(q, "CreateTopics", topic, alias, created);
        rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_NewTopic_destroy(nt);
        struct isr_arg a = {rk, topic, rf, -1};
        if (!harness_wait_until(isr_ok, &a, 60000) || a.parts != parts)
                fail_msg("topic %s at %s: %d partitions led with %d in sync "
                         "not seen in 60 s (listed with %d)",
                         topic, alias, parts, rf, a.parts);
}

void rk_grow_topic(struct rk *r, const char *alias, const char *topic,
                   int total) {
        rd_kafka_t               *rk = cluster(r, alias)->admin;
        char                      why[256];
        rd_kafka_NewPartitions_t *np =
            rd_kafka_NewPartitions_new(topic, (size_t)total, why, sizeof(why));
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);

        if (!np)
                fail_msg("grow %s at %s: %s", topic, alias, why);
        rd_kafka_CreatePartitions(rk, &np, 1, NULL, q);
        rd_kafka_event_t *ev =
            topic_answer(q, "CreatePartitions", topic, alias, grown);
        rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
        rd_kafka_NewPartitions_destroy(np);
}

static bool topic_gone(void *arg) {
        struct isr_arg *a = arg;
        const struct rd_kafka_metadata *md;
        bool gone = false;

        if (rd_kafka_metadata(a->rk, 1, NULL, &md, 5000))
                return false;
        gone = true;
        for (int i = 0; i < md->topic_cnt; i++)
                if (!strcmp(md->topics[i].topic, a->topic) &&
                    !md->topics[i].err)
                        gone = false;
        rd_kafka_metadata_destroy(md);
        return gone;
}

void rk_delete_topic(struct rk *r, const char *alias, const char *topic) {
        rd_kafka_t                     *rk = cluster(r, alias)->admin;
        rd_kafka_DeleteTopic_t         *dt = rd_kafka_DeleteTopic_new(topic);
        rd_kafka_AdminOptions_t        *o;
        rd_kafka_queue_t               *q;
        rd_kafka_event_t               *ev;
        const rd_kafka_topic_result_t **res;
        size_t                          n = 0;

        o = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DELETETOPICS);
        rd_kafka_AdminOptions_set_request_timeout(o, 30000, NULL, 0);
        rd_kafka_AdminOptions_set_operation_timeout(o, 30000, NULL, 0);
        q = rd_kafka_queue_new(rk);
        rd_kafka_DeleteTopics(rk, &dt, 1, o, q);
        ev = rd_kafka_queue_poll(q, 35000);
        if (!ev)
                fail_msg("DeleteTopics %s at %s: no answer in 35 s", topic,
                         alias);
        if (rd_kafka_event_error(ev))
                fail_msg("DeleteTopics %s at %s: %s", topic, alias,
                         rd_kafka_event_error_string(ev));
        res = rd_kafka_DeleteTopics_result_topics(
            rd_kafka_event_DeleteTopics_result(ev), &n);
        if (n != 1 || rd_kafka_topic_result_error(res[0]))
                fail_msg("DeleteTopics %s at %s: %s", topic, alias,
                         n ? rd_kafka_topic_result_error_string(res[0])
                           : "no result");
        rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_DeleteTopic_destroy(dt);
        struct isr_arg a = {rk, topic, 0, -1};
        if (!harness_wait_until(topic_gone, &a, 60000))
                fail_msg("topic %s at %s still listed 60 s after its "
                         "deletion",
                         topic, alias);
}

int rk_leader(struct rk *r, const char *alias, const char *topic,
              int partition) {
        const struct rd_kafka_metadata *md;
        int                             leader = -1;

        if (rd_kafka_metadata(cluster(r, alias)->admin, 1, NULL, &md, 5000))
                return -1;
        for (int i = 0; i < md->topic_cnt; i++) {
                const struct rd_kafka_metadata_topic *t = &md->topics[i];
                if (strcmp(t->topic, topic) || t->err)
                        continue;
                for (int p = 0; p < t->partition_cnt; p++)
                        if (t->partitions[p].id == partition)
                                leader = t->partitions[p].leader;
        }
        rd_kafka_metadata_destroy(md);
        return leader;
}

struct new_leader {
        struct rk  *r;
        const char *alias, *topic;
        int         partition, old, now;
};

static bool leader_moved(void *arg) {
        struct new_leader *a = arg;

        a->now = rk_leader(a->r, a->alias, a->topic, a->partition);
        return a->now >= 0 && a->now != a->old;
}

int rk_wait_new_leader(struct rk *r, const char *alias, const char *topic,
                       int partition, int old, int timeout_ms) {
        struct new_leader a = {r, alias, topic, partition, old, -1};

        return harness_wait_until(leader_moved, &a, timeout_ms) ? a.now : -1;
}

/* rk_size() with the client 'rk'. */
static int64_t size_with(rd_kafka_t *rk, const char *topic) {
        int     parts;
        int64_t sum = 0;

        topic_state(rk, topic, 0, &parts);
        if (parts < 0)
                return -1;
        for (int p = 0; p < parts; p++) {
                int64_t lo, hi;
                if (rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi,
                                                     5000))
                        return -1;
                sum += hi - lo;
        }
        return sum;
}

int64_t rk_size(struct rk *r, const char *alias, const char *topic) {
        int64_t n = size_with(cluster(r, alias)->admin, topic);

        if (n < 0) {
                /* A client that saw the topic deleted keeps refusing the
                 * new one of the same name (librdkafka 2.8 answered -1 for
                 * two minutes after kafka-topic_recreate's recreation):
                 * ask a fresh one. */
                rd_kafka_conf_t *conf = rd_kafka_conf_new();
                char             err[256];
                rd_kafka_t      *rk;

                rd_kafka_conf_set(conf, "bootstrap.servers", rk_bs(r, alias),
                                  err, sizeof(err));
                rd_kafka_conf_set(conf, "enable.metrics.push", "false", err,
                                  sizeof(err));
                if ((rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err,
                                       sizeof(err)))) {
                        n = size_with(rk, topic);
                        rd_kafka_destroy(rk);
                } else {
                        rd_kafka_conf_destroy(conf);
                }
        }
        return n;
}

static int64_t count_into(struct rk *r, const char *alias, const char *topic,
                          const char *isolation, const char *header,
                          struct rk_bag *values);

int64_t rk_count(struct rk *r, const char *alias, const char *topic,
                 const char *isolation, struct rk_bag *values) {
        return count_into(r, alias, topic, isolation, NULL, values);
}

int64_t rk_count_header(struct rk *r, const char *alias, const char *topic,
                        const char *isolation, const char *header,
                        struct rk_bag *values) {
        return count_into(r, alias, topic, isolation, header, values);
}

static int64_t count_into(struct rk *r, const char *alias, const char *topic,
                          const char *isolation, const char *header,
                          struct rk_bag *values) {
        char             err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        const struct rd_kafka_metadata *md;
        int64_t n = 0;

        rd_kafka_conf_set(conf, "bootstrap.servers", rk_bs(r, alias), err,
                          sizeof(err));
        rd_kafka_conf_set(conf, "group.id", "rk-count", err, sizeof(err));
        rd_kafka_conf_set(conf, "isolation.level", isolation, err,
                          sizeof(err));
        rd_kafka_conf_set(conf, "enable.partition.eof", "true", err,
                          sizeof(err));
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", err,
                          sizeof(err));
        rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
        assert_non_null(c);
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(c, topic, NULL);
        assert_int_equal(rd_kafka_metadata(c, 0, rkt, &md, 10000), 0);
        int parts = md->topics[0].partition_cnt;
        rd_kafka_metadata_destroy(md);
        rd_kafka_topic_destroy(rkt);
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(parts);
        for (int p = 0; p < parts; p++)
                rd_kafka_topic_partition_list_add(l, topic, p)->offset =
                    RD_KAFKA_OFFSET_BEGINNING;
        assert_int_equal(rd_kafka_assign(c, l), 0);
        rd_kafka_topic_partition_list_destroy(l);
        int64_t deadline = harness_now_ms() + 60000;
        int     eofs     = 0;
        bool   *eof      = calloc((size_t)parts, sizeof(*eof));
        while (eofs < parts && harness_now_ms() < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 200);
                if (!m)
                        continue;
                if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                        if (!eof[m->partition]) {
                                eof[m->partition] = true;
                                eofs++;
                        }
                } else if (!m->err) {
                        n++;
                        rd_kafka_headers_t *h  = NULL;
                        const void         *hv = NULL;
                        size_t              hs = 0;
                        if (values && header &&
                            (rd_kafka_message_headers(m, &h) ||
                             rd_kafka_header_get_last(h, header, &hv, &hs)))
                                hv = NULL; /* none: counted as "" */
                        if (values) {
                                char        v[256];
                                const char *src =
                                    header ? (const char *)hv
                                           : (const char *)m->payload;
                                size_t len = header ? hs : m->len;
                                snprintf(v, sizeof(v), "%.*s",
                                         (int)(len < 255 ? len : 255),
                                         src ? src : "");
                                rk_bag_add(values, v);
                        }
                }
                rd_kafka_message_destroy(m);
        }
        free(eof);
        assert_int_equal(eofs, parts);
        rd_kafka_consumer_close(c);
        rd_kafka_destroy(c);
        return n;
}

struct size_arg {
        struct rk  *r;
        const char *alias, *topic;
        int64_t     want, last;
};

static bool size_ok(void *arg) {
        struct size_arg *a = arg;
        a->last            = rk_size(a->r, a->alias, a->topic);
        return a->last >= a->want;
}

bool rk_wait_size(struct rk *r, const char *alias, const char *topic,
                  int64_t want, int timeout_ms) {
        struct size_arg a = {r, alias, topic, want, -1};

        if (harness_wait_until(size_ok, &a, timeout_ms))
                return true;
        print_message("# %s at %s holds %" PRId64 " records after %d ms, "
                      "want %" PRId64 "\n",
                      topic, alias, a.last, timeout_ms, want);
        return false;
}

void rk_expect_size(struct rk *r, const char *alias, const char *topic,
                    int64_t want, int timeout_ms) {
        struct size_arg a = {r, alias, topic, want, -1};

        if (!harness_wait_until(size_ok, &a, timeout_ms)) {
                rk_gw_dump_log(r, 60);
                fail_msg("%s at %s holds %" PRId64 " records after %d ms, "
                         "want %" PRId64,
                         topic, alias, a.last, timeout_ms, want);
        }
}

/* -------------------------------- GATEWAY ------------------------------- */

static harness_proc_t *gw_spawn(struct rk *r, const char *state,
                                const char *log, const char *const *extra) {
        const char *argv[192];
        char        props[RK_MAX_CLUSTERS][2][200];
        size_t      a = 0;

        argv[a++] = harness_aagw_bin();
        argv[a++] = "run";
        a += rk_gw_cluster_args(r, argv + a, 64);
        for (size_t i = 0; i < r->ncl; i++) {
                /* A SIGKILLed member holds the group's partitions until
                 * its session expires: the broker's lowest allowed
                 * session (group.min.session.timeout.ms, 6 s). */
                snprintf(props[i][0], sizeof(props[i][0]),
                         "clusters.%s.properties.consumer.session.timeout.ms="
                         "6000",
                         r->c[i].alias);
                snprintf(props[i][1], sizeof(props[i][1]),
                         "clusters.%s.properties.consumer.heartbeat.interval."
                         "ms=1000",
                         r->c[i].alias);
                argv[a++] = "--set";
                argv[a++] = props[i][0];
                argv[a++] = "--set";
                argv[a++] = props[i][1];
        }
        argv[a++] = "--state-dir";
        argv[a++] = state;
        argv[a++] = "--set";
        argv[a++] = "replication.refresh_topics_interval=1s";
        for (size_t i = 0; extra && extra[i]; i++) {
                assert_true(a < sizeof(argv) / sizeof(argv[0]) - 1);
                argv[a++] = extra[i];
        }
        /* AAGW_TEST_GW_SET: more `--set KEY=VALUE` for every run, blank
         * separated (evidence gathering, e.g.
         * clusters.east.properties.producer.debug=eos,msg). */
        char *sets = getenv("AAGW_TEST_GW_SET") ?
                         strdup(getenv("AAGW_TEST_GW_SET")) : NULL;
        char *save = NULL;
        for (char *t = sets ? strtok_r(sets, " \t\n", &save) : NULL; t;
             t = strtok_r(NULL, " \t\n", &save)) {
                assert_true(a < sizeof(argv) / sizeof(argv[0]) - 2);
                argv[a++] = "--set";
                argv[a++] = t;
        }
        argv[a] = NULL;
        harness_proc_t *p = harness_proc_spawn(argv, NULL, log, r->errstr,
                                               sizeof(r->errstr));
        free(sets);
        if (!p)
                fail_msg("aagw: %s", r->errstr);
        return p;
}

void rk_gw_start(struct rk *r, const char *const *extra) {
        assert_null(r->gw);
        r->gw_runs++;
        snprintf(r->gw_log, sizeof(r->gw_log), "%s/gw-%d.log", r->dir,
                 r->gw_runs);
        r->gw = gw_spawn(r, r->state, r->gw_log, extra);
}

static void dump_log_file(const char *path, int lines) {
        char       *text = path[0] ? harness_read_file(path, NULL) : NULL;
        const char *p;
        int         n = 0;

        if (!text)
                return;
        p = text + strlen(text);
        while (p > text && n <= lines)
                if (*--p == '\n')
                        n++;
        fprintf(stderr, "# ---- %s (last %d lines) ----\n%s\n", path,
                lines, p);
        free(text);
}

void rk_gw_dump_log(struct rk *r, int lines) {
        dump_log_file(r->gw_log, lines);
}

void rk_grep_file(const char *path, const char *tag,
                  const char *const *needles) {
        char *text = harness_read_file(path, NULL), *line, *save = NULL;

        if (!text)
                return;
        fprintf(stderr, "# ---- %s: %s ----\n", path,
                tag ? tag : "lines with any tag");
        for (line = strtok_r(text, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
                if (tag && !strstr(line, tag))
                        continue;
                for (size_t i = 0; needles[i]; i++)
                        if (strstr(line, needles[i])) {
                                fprintf(stderr, "%s\n", line);
                                break;
                        }
        }
        free(text);
}

void rk_gw_grep(struct rk *r, const char *tag, const char *const *needles) {
        char path[700];

        for (int run = 1; run <= r->gw_runs; run++) {
                snprintf(path, sizeof(path), "%s/gw-%d.log", r->dir, run);
                rk_grep_file(path, tag, needles);
        }
}

void rk_broker_grep(struct rk *r, const char *alias, const char *tag,
                    const char *const *needles) {
        struct rk_cluster *c = cluster(r, alias);
        char               path[700];

        for (int n = 1; n <= c->brokers; n++) {
                snprintf(path, sizeof(path), "%s/%s/node%d/server.log",
                         c->run_dir, alias, n);
                rk_grep_file(path, tag, needles);
        }
}

static void check_sanitizers(const char *log) {
        static const char *const marks[] = {
            "runtime error:", "AddressSanitizer", "LeakSanitizer"};
        char *text = harness_read_file(log, NULL);

        for (size_t i = 0; text && i < sizeof(marks) / sizeof(marks[0]); i++)
                if (strstr(text, marks[i])) {
                        free(text);
                        dump_log_file(log, 60);
                        fail_msg("aagw: sanitizer report in %s", log);
                }
        free(text);
}

/* A stop that did not finish in time: what every thread of aagw was
 * doing, when gdb is there to ask (it is on the CI machines; without it
 * only the log tail is shown). */
static void dump_stacks(pid_t pid) {
        char             attach[32];
        const char      *argv[] = {"gdb",  "-nx", "-batch", "-p", attach,
                                   "-ex",  "thread apply all bt 30", NULL};
        harness_output_t o;
        char             err[256];

        snprintf(attach, sizeof(attach), "%ld", (long)pid);
        if (harness_run(argv, NULL, 0, 60000, &o, err, sizeof(err)) !=
            AAGW_OK) {
                fprintf(stderr, "# (no stacks: %s)\n", err);
                return;
        }
        fprintf(stderr, "# ---- stacks of aagw (pid %ld) ----\n%s\n",
                (long)pid, o.out ? o.out : "");
        harness_output_deinit(&o);
}

/* Signal 'p', wait for its exit, report a stop that did not finish (its
 * stacks) or ended badly (its log's tail), reap it and look for
 * sanitizer reports. */
static int gw_stop_proc(harness_proc_t *p, const char *log, int sig,
                        int timeout_ms) {
        int status, code = -1;

        harness_proc_signal(p, sig);
        if (harness_proc_wait(p, timeout_ms, &status) == AAGW_OK) {
                code = harness_exit_code(status);
        } else {
                fprintf(stderr, "# aagw still runs %d ms after signal %d\n",
                        timeout_ms, sig);
                dump_stacks(harness_proc_pid(p));
        }
        /* A kill's own status (128 + SIGKILL) says nothing new. */
        if (code != 0 && code != 128 + sig)
                dump_log_file(log, 60);
        harness_proc_destroy(p);
        check_sanitizers(log);
        return code;
}

int rk_gw_stop(struct rk *r, int sig, int timeout_ms) {
        int code;

        assert_non_null(r->gw);
        code  = gw_stop_proc(r->gw, r->gw_log, sig, timeout_ms);
        r->gw = NULL;
        return code;
}

void rk_gw_expect_running(struct rk *r) {
        int status;

        assert_non_null(r->gw);
        if (harness_proc_wait(r->gw, 0, &status) == AAGW_OK) {
                rk_gw_dump_log(r, 60);
                fail_msg("aagw exited (%d) on its own",
                         harness_exit_code(status));
        }
}

/* ---------------------------------- JAVA -------------------------------- */

harness_proc_t *rk_java_spawn(struct rk *r, const char *main_class,
                              const char *const *args, const char *out,
                              const char *err) {
        const char     *argv[64];
        char            cp[4200], l4j[4200];
        size_t          a = 0;
        harness_proc_t *p;

        snprintf(cp, sizeof(cp), "%s/*", r->lib);
        snprintf(l4j, sizeof(l4j), "-Dlog4j2.configurationFile=%s", r->log4j);
        argv[a++] = "java";
        argv[a++] = "-Xms64m";
        argv[a++] = "-Xmx256m";
        argv[a++] = "-XX:+UseSerialGC";
        argv[a++] = "-XX:TieredStopAtLevel=1";
        argv[a++] = "-XX:-UsePerfData";
        argv[a++] = l4j;
        argv[a++] = "-cp";
        argv[a++] = cp;
        argv[a++] = main_class;
        for (size_t i = 0; args && args[i]; i++) {
                assert_true(a < sizeof(argv) / sizeof(argv[0]) - 1);
                argv[a++] = args[i];
        }
        argv[a] = NULL;
        p = harness_proc_spawn(argv, out, err, r->errstr, sizeof(r->errstr));
        if (!p)
                fail_msg("java %s: %s", main_class, r->errstr);
        return p;
}

void rk_java_expect_exit0(struct rk *r, harness_proc_t *p, const char *what,
                          const char *err, int timeout_ms) {
        int status, code = -1;

        (void)r;
        if (harness_proc_wait(p, timeout_ms, &status) == AAGW_OK)
                code = harness_exit_code(status);
        if (code != 0) {
                dump_tail(err, err, 3000);
                fail_msg("%s: %s", what,
                         code < 0 ? "did not exit in time" : "exited non-zero");
        }
}

char *rk_read_topics(struct rk *r, const char *alias, const char *name,
                     const char *const *topics) {
        const char *args[32];
        size_t      a = 0;
        char        errname[128];
        char       *out = rk_path(r, name), *err;

        snprintf(errname, sizeof(errname), "%s.err", name);
        err       = rk_path(r, errname);
        args[a++] = "--bootstrap-server";
        args[a++] = rk_bs(r, alias);
        args[a++] = "--isolation-level";
        args[a++] = "read_committed";
        args[a++] = "--timeout-ms";
        args[a++] = "120000";
        for (size_t i = 0; topics[i]; i++) {
                assert_true(a < 31);
                args[a++] = topics[i];
        }
        args[a] = NULL;
        harness_proc_t *p =
            rk_java_spawn(r, "aagw.kafka.ReadToEnd", args, out, err);
        rk_java_expect_exit0(r, p, "ReadToEnd", err, 150000);
        harness_proc_destroy(p);
        free(err);
        return out;
}

/* ------------------------------ JSON EVENTS ------------------------------ */

void rk_counter_init(struct rk_counter *c, const char *path,
                     const char *event) {
        memset(c, 0, sizeof(*c));
        c->path = path;
        snprintf(c->needle, sizeof(c->needle), "\"name\":\"%s\"", event);
}

int64_t rk_count_poll(struct rk_counter *c) {
        FILE *f = fopen(c->path, "r");
        char  buf[65536];
        size_t n;

        if (!f)
                return c->cnt;
        if (fseek(f, c->off, SEEK_SET) == 0) {
                while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
                        c->off += (long)n;
                        for (size_t i = 0; i < n; i++) {
                                if (buf[i] != '\n') {
                                        if (c->part_len < sizeof(c->part) - 1)
                                                c->part[c->part_len++] = buf[i];
                                        continue;
                                }
                                c->part[c->part_len] = '\0';
                                if (strstr(c->part, c->needle))
                                        c->cnt++;
                                c->part_len = 0;
                        }
                }
        }
        fclose(f);
        return c->cnt;
}

/* A string multiset: open addressing, FNV-1a. */
struct rk_bag_ent {
        char   *s;
        int64_t n;
};
struct rk_bag {
        struct rk_bag_ent *v;
        size_t             cap, used;
        int64_t            total;
};

static uint64_t fnv(const char *s) {
        uint64_t h = 1469598103934665603ULL;
        while (*s)
                h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
        return h;
}

struct rk_bag *rk_bag_new(void) {
        struct rk_bag *b = calloc(1, sizeof(*b));
        assert_non_null(b);
        b->cap = 1024;
        b->v   = calloc(b->cap, sizeof(*b->v));
        assert_non_null(b->v);
        return b;
}

void rk_bag_destroy(struct rk_bag *b) {
        if (!b)
                return;
        for (size_t i = 0; i < b->cap; i++)
                free(b->v[i].s);
        free(b->v);
        free(b);
}

static struct rk_bag_ent *bag_slot(const struct rk_bag *b, const char *s) {
        size_t i = fnv(s) & (b->cap - 1);
        while (b->v[i].s && strcmp(b->v[i].s, s))
                i = (i + 1) & (b->cap - 1);
        return &b->v[i];
}

int64_t rk_bag_add(struct rk_bag *b, const char *s) {
        struct rk_bag_ent *e;

        if ((b->used + 1) * 2 > b->cap) {
                struct rk_bag old = *b;
                b->cap *= 2;
                b->v = calloc(b->cap, sizeof(*b->v));
                assert_non_null(b->v);
                for (size_t i = 0; i < old.cap; i++)
                        if (old.v[i].s)
                                *bag_slot(b, old.v[i].s) = old.v[i];
                free(old.v);
        }
        e = bag_slot(b, s);
        if (!e->s) {
                e->s = strdup(s);
                assert_non_null(e->s);
                b->used++;
        }
        b->total++;
        return ++e->n;
}

int64_t rk_bag_count(const struct rk_bag *b, const char *s) {
        return bag_slot(b, s)->n;
}

int64_t rk_bag_total(const struct rk_bag *b) {
        return b->total;
}

int64_t rk_bag_distinct(const struct rk_bag *b) {
        return (int64_t)b->used;
}

void rk_bag_each(const struct rk_bag *b,
                 void (*fn)(const char *s, int64_t n, void *arg), void *arg) {
        for (size_t i = 0; i < b->cap; i++)
                if (b->v[i].s)
                        fn(b->v[i].s, b->v[i].n, arg);
}

static const char *jstr(json_object *o, const char *name) {
        json_object *v;
        if (!json_object_object_get_ex(o, name, &v) ||
            !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

static int64_t jint(json_object *o, const char *name) {
        json_object *v;
        return json_object_object_get_ex(o, name, &v) ? json_object_get_int64(v)
                                                      : -1;
}

/* Every line of @path that is a JSON object, to @fn. */
static void each_json(const char *path,
                      void (*fn)(json_object *o, const char *name, void *arg),
                      void *arg) {
        harness_lines_t l;
        size_t          len;
        char           *text = harness_read_file(path, &len);

        if (!text)
                fail_msg("%s: %s", path, strerror(errno));
        assert_int_equal(harness_lines_split(text, &l), 0);
        for (size_t i = 0; i < l.cnt; i++) {
                json_object *o;
                const char  *name;

                if (l.v[i][0] != '{')
                        continue;
                o = json_tokener_parse(l.v[i]);
                if (!o)
                        fail_msg("%s line %zu: not JSON: %.200s", path, i + 1,
                                 l.v[i]);
                name = jstr(o, "name");
                if (name)
                        fn(o, name, arg);
                json_object_put(o);
        }
        harness_lines_deinit(&l);
        free(text);
}

static void produced_ev(json_object *o, const char *name, void *arg) {
        struct rk_produced *p = arg;
        const char         *v = jstr(o, "value");

        if (!strcmp(name, "producer_send_success")) {
                assert_non_null(v);
                rk_bag_add(p->acked, v);
        } else if (!strcmp(name, "producer_send_error")) {
                assert_non_null(v);
                rk_bag_add(p->failed, v);
        } else if (!strcmp(name, "tool_data")) {
                p->sent           = jint(o, "sent");
                p->acked_reported = jint(o, "acked");
        }
}

void rk_produced_parse(const char *path, struct rk_produced *out) {
        memset(out, 0, sizeof(*out));
        out->acked          = rk_bag_new();
        out->failed         = rk_bag_new();
        out->sent           = -1;
        out->acked_reported = -1;
        each_json(path, produced_ev, out);
}

void rk_produced_deinit(struct rk_produced *p) {
        rk_bag_destroy(p->acked);
        rk_bag_destroy(p->failed);
        memset(p, 0, sizeof(*p));
}

struct read_arg {
        const char     *topic;
        struct rk_read *rd;
        size_t         *cap;
};

static void read_ev(json_object *o, const char *name, void *arg) {
        struct read_arg *a  = arg;
        struct rk_read  *rd = a->rd;

        if (!strcmp(name, "read_done")) {
                rd->done = true;
                return;
        }
        if (strcmp(name, "record_data"))
                return;
        const char *t = jstr(o, "topic"), *v = jstr(o, "value");
        int64_t     p = jint(o, "partition");
        if (!t || strcmp(t, a->topic))
                return;
        assert_non_null(v);
        assert_true(p >= 0 && p < 1024);
        if (p >= rd->nparts) {
                int n = (int)p + 1;
                rd->part     = realloc(rd->part, (size_t)n * sizeof(*rd->part));
                rd->part_cnt = realloc(rd->part_cnt,
                                       (size_t)n * sizeof(*rd->part_cnt));
                a->cap = realloc(a->cap, (size_t)n * sizeof(*a->cap));
                assert_true(rd->part && rd->part_cnt && a->cap);
                for (int i = rd->nparts; i < n; i++) {
                        rd->part[i]     = NULL;
                        rd->part_cnt[i] = 0;
                        a->cap[i]       = 0;
                }
                rd->nparts = n;
        }
        if (rd->part_cnt[p] == a->cap[p]) {
                a->cap[p]   = a->cap[p] ? 2 * a->cap[p] : 1024;
                rd->part[p] = realloc(rd->part[p], a->cap[p] * sizeof(char *));
                assert_non_null(rd->part[p]);
        }
        rd->part[p][rd->part_cnt[p]++] = strdup(v);
        rk_bag_add(rd->values, v);
        rd->records++;
}

void rk_read_parse(const char *path, const char *topic, struct rk_read *out) {
        struct read_arg a = {topic, out, NULL};

        memset(out, 0, sizeof(*out));
        out->values = rk_bag_new();
        each_json(path, read_ev, &a);
        free(a.cap);
}

void rk_read_deinit(struct rk_read *rd) {
        for (int p = 0; p < rd->nparts; p++) {
                for (size_t i = 0; i < rd->part_cnt[p]; i++)
                        free(rd->part[p][i]);
                free(rd->part[p]);
        }
        free(rd->part);
        free(rd->part_cnt);
        rk_bag_destroy(rd->values);
        memset(rd, 0, sizeof(*rd));
}

int64_t rk_lww_last(const struct rk_read *rd, const char *topic, int keys,
                    int *last) {
        int64_t doubled = 0;

        for (int j = 0; j < keys; j++)
                last[j] = -1;
        for (int p = 0; p < rd->nparts; p++)
                for (size_t i = 0; i < rd->part_cnt[p]; i++) {
                        int j, v;
                        if (sscanf(rd->part[p][i], "k%d.%d", &j, &v) != 2 ||
                            j < 0 || j >= keys)
                                fail_msg("%s holds %s", topic, rd->part[p][i]);
                        if (rk_bag_count(rd->values, rd->part[p][i]) > 1)
                                doubled++;
                        last[j] = v;
                }
        return doubled;
}

struct cmp_arg {
        const struct rk_bag *want, *allowed, *got;
        struct rk_diff      *d;
};

static void cmp_want(const char *s, int64_t n, void *arg) {
        struct cmp_arg *a = arg;
        int64_t         g = rk_bag_count(a->got, s);

        if (g < n) {
                if (!a->d->missing)
                        snprintf(a->d->first_missing,
                                 sizeof(a->d->first_missing), "%s", s);
                a->d->missing += n - g;
        }
}

static void cmp_got(const char *s, int64_t n, void *arg) {
        struct cmp_arg *a = arg;
        int64_t         w = rk_bag_count(a->want, s);

        if (w == 0 && a->allowed && rk_bag_count(a->allowed, s) > 0) {
                a->d->allowed_seen++;
                w = 1;
        } else if (w == 0) {
                if (!a->d->extra)
                        snprintf(a->d->first_extra, sizeof(a->d->first_extra),
                                 "%s", s);
                a->d->extra += n;
                return;
        }
        if (n > w) {
                if (!a->d->dups)
                        snprintf(a->d->first_dup, sizeof(a->d->first_dup),
                                 "%s", s);
                a->d->dups += n - w;
        }
}

bool rk_compare(const struct rk_bag *want, const struct rk_bag *allowed,
                const struct rk_bag *got, struct rk_diff *d) {
        struct cmp_arg a = {want, allowed, got, d};

        memset(d, 0, sizeof(*d));
        rk_bag_each(want, cmp_want, &a);
        rk_bag_each(got, cmp_got, &a);
        return !d->missing && !d->dups && !d->extra;
}

bool rk_check(const char *what, const struct rk_bag *want,
              const struct rk_bag *allowed, const struct rk_read *got) {
        struct rk_diff d;
        bool           ok = rk_compare(want, allowed, got->values, &d);

        print_message("# %-26s %6" PRId64 " records, %6" PRId64
                      " distinct: %" PRId64 " lost, %" PRId64
                      " duplicated, %" PRId64 " unexpected%s%s%s%s%s%s\n",
                      what, got->records, rk_bag_distinct(got->values),
                      d.missing, d.dups, d.extra,
                      d.missing ? "; first lost " : "", d.first_missing,
                      d.dups ? "; first duplicated " : "", d.first_dup,
                      d.extra ? "; first unexpected " : "", d.first_extra);
        if (!got->done)
                print_message("# %s: the reader did not reach the end\n",
                              what);
        return ok && got->done;
}

/* Where the copy of partition @p p goes on after its first difference
 * @p i: a run of source records skipped or repeated, and whether the copy
 * then follows the source in order (indexes are offsets in topics that
 * were never compacted or written in transactions). */
static void describe_gap(const char *what, int p, size_t i,
                         const struct rk_read *src,
                         const struct rk_read *copy) {
        size_t ns = src->part_cnt[p], nc = copy->part_cnt[p], j, k;

        for (j = 0; j < ns; j++)
                if (!strcmp(src->part[p][j], copy->part[p][i]))
                        break;
        if (j == ns) {
                print_message("# %s/%d: %s (index %zu) is not in the "
                              "source partition\n",
                              what, p, copy->part[p][i], i);
                return;
        }
        for (k = 0; i + k < nc && j + k < ns; k++)
                if (strcmp(src->part[p][j + k], copy->part[p][i + k]))
                        break;
        print_message("# %s/%d: copy index %zu holds source index %zu (%s "
                      "%zu source records: %zu..%zu); from there %zu "
                      "records follow the source in order%s (copy %zu "
                      "records, source %zu); around it the copy holds "
                      "%s, [%s], %s\n",
                      what, p, i, j, j > i ? "skips" : "repeats",
                      j > i ? j - i : i - j, j > i ? i : j,
                      j > i ? j - 1 : i - 1, k,
                      i + k == nc ? " to the copy's end" : "", nc, ns,
                      i > 0 ? copy->part[p][i - 1] : "-", copy->part[p][i],
                      i + 1 < nc ? copy->part[p][i + 1] : "-");
}

int64_t rk_order_diffs(const char *what, const struct rk_read *src,
                       const struct rk_read *copy) {
        int64_t bad = 0;

        for (int p = 0; p < src->nparts || p < copy->nparts; p++) {
                size_t ns = p < src->nparts ? src->part_cnt[p] : 0;
                size_t nc = p < copy->nparts ? copy->part_cnt[p] : 0;
                size_t i;
                for (i = 0; i < ns && i < nc; i++)
                        if (strcmp(src->part[p][i], copy->part[p][i]))
                                break;
                if (i < ns && i < nc) {
                        print_message("# %s/%d: index %zu holds %s, the "
                                      "source %s\n",
                                      what, p, i, copy->part[p][i],
                                      src->part[p][i]);
                        describe_gap(what, p, i, src, copy);
                }
                else if (ns != nc)
                        print_message("# %s/%d: %zu records, the source "
                                      "%zu\n",
                                      what, p, nc, ns);
                bad += i < ns || i < nc;
        }
        return bad;
}

static void add_n(const char *s, int64_t n, void *arg) {
        for (int64_t i = 0; i < n; i++)
                rk_bag_add(arg, s);
}

void rk_bag_add_all(struct rk_bag *into, const struct rk_bag *from) {
        rk_bag_each(from, add_n, into);
}

bool rk_check_source(const char *what, const struct rk_bag *acked,
                     const struct rk_bag *failed, const struct rk_read *got) {
        struct rk_diff d;

        rk_compare(acked, failed, got->values, &d);
        print_message("# %-26s %6" PRId64 " records, %6" PRId64
                      " distinct: %" PRId64 " acked lost, %" PRId64
                      " duplicated, %" PRId64 " without an event%s%s%s%s\n",
                      what, got->records, rk_bag_distinct(got->values),
                      d.missing, d.dups, d.extra,
                      d.missing ? "; first lost " : "", d.first_missing,
                      d.dups ? "; first duplicated " : "", d.first_dup);
        return !d.missing && !d.dups && got->done;
}

void rk_producer_stop(struct rk *r, harness_proc_t *p, const char *err) {
        int status, code = -1;

        harness_proc_signal(p, SIGTERM);
        if (harness_proc_wait(p, 60000, &status) == AAGW_OK)
                code = harness_exit_code(status);
        if (code < 0) {
                /* Its shutdown hook is stuck (seen once in hundreds of
                 * runs on a loaded host, never understood).  What it
                 * acknowledged is in its output already, flushed line by
                 * line, and what it had in flight counts as neither
                 * acknowledged nor failed: the checks hold without its
                 * last lines.  Keep its threads for the record, and
                 * stop it hard. */
                char *dump = rk_path(r, "producer-stuck.jstack");
                char  cmd[1200];
                snprintf(cmd, sizeof(cmd), "jstack %ld > '%s' 2>&1",
                         (long)harness_proc_pid(p), dump);
                if (system(cmd) != 0)
                        fprintf(stderr, "# jstack failed\n");
                dump_tail("jstack of the stuck VerifiableProducer", dump, 6000);
                free(dump);
                dump_tail(err, err, 3000);
                harness_proc_signal(p, SIGKILL);
                harness_proc_wait(p, 30000, &status);
                fprintf(stderr, "# VerifiableProducer still running 60 s "
                                "after SIGTERM: killed\n");
                return;
        }
        if (code != 0 && code != 128 + SIGTERM) {
                dump_tail(err, err, 3000);
                fail_msg("VerifiableProducer: bad exit status %d after "
                         "SIGTERM",
                         code);
        }
}

const char RK_PRODUCER_CONFIG[] = "acks=all\n"
                                  "enable.idempotence=true\n"
                                  "retries=2147483647\n"
                                  "max.in.flight.requests.per.connection=5\n"
                                  "delivery.timeout.ms=180000\n"
                                  "request.timeout.ms=10000\n"
                                  "linger.ms=5\n";

harness_proc_t *rk_clicks_producer(struct rk *r, const char *alias,
                                   const char *prefix, const char *throughput,
                                   char **out, char **err) {
        char name[64];

        snprintf(name, sizeof(name), "producer-%s.properties", alias);
        char *pconf = rk_write(r, name, RK_PRODUCER_CONFIG);
        snprintf(name, sizeof(name), "producer-%s.out", alias);
        *out = rk_path(r, name);
        snprintf(name, sizeof(name), "producer-%s.err", alias);
        *err = rk_path(r, name);
        const char *const args[] = {
            "--bootstrap-server", rk_bs(r, alias), "--topic", "clicks",
            "--max-messages", "-1", "--throughput", throughput, "--acks", "-1",
            "--producer.config", pconf, "--value-prefix", prefix,
            "--repeating-keys", "1000", NULL};
        harness_proc_t *p = rk_java_spawn(
            r, "org.apache.kafka.tools.VerifiableProducer", args, *out, *err);
        free(pconf);
        return p;
}

bool rk_verify_clicks(struct rk *r, const struct rk_produced *east,
                      const struct rk_produced *west, const char *what) {
        static const char *const alias[2] = {"east", "west"};
        const struct rk_produced *pr[2]   = {east, west};
        struct rk_read            src[2], copy[2], uni[2];
        struct rk_bag            *all = rk_bag_new(), *none = rk_bag_new();
        char                      topic[2][32], name[64], label[128];
        bool                      ok = true;

        for (int i = 0; i < 2; i++) {
                snprintf(topic[i], sizeof(topic[i]), "%s.clicks",
                         alias[1 - i]);
                const char *const topics[] = {"clicks", topic[i],
                                              "clicks.unified", NULL};
                snprintf(name, sizeof(name), "read-%s-%s", what, alias[i]);
                char *out = rk_read_topics(r, alias[i], name, topics);
                rk_read_parse(out, "clicks", &src[i]);
                rk_read_parse(out, topic[i], &copy[i]);
                rk_read_parse(out, "clicks.unified", &uni[i]);
                free(out);
        }
        for (int i = 0; i < 2; i++) {
                snprintf(label, sizeof(label), "%s: %s clicks (acked)", what,
                         alias[i]);
                ok &= rk_check_source(label, pr[i] ? pr[i]->acked : none,
                                      pr[i] ? pr[i]->failed : NULL, &src[i]);
                rk_bag_add_all(all, src[i].values);
        }
        for (int i = 0; i < 2; i++) {
                snprintf(label, sizeof(label), "%s: %s %s", what, alias[i],
                         topic[i]);
                ok &= rk_check(label, src[1 - i].values, NULL, &copy[i]);
                ok &= rk_order_diffs(label, &src[1 - i], &copy[i]) == 0;
                snprintf(label, sizeof(label), "%s: %s clicks.unified", what,
                         alias[i]);
                ok &= rk_check(label, all, NULL, &uni[i]);
        }
        for (int i = 0; i < 2; i++) {
                rk_read_deinit(&src[i]);
                rk_read_deinit(&copy[i]);
                rk_read_deinit(&uni[i]);
        }
        rk_bag_destroy(all);
        rk_bag_destroy(none);
        return ok;
}

void rk_clicks_clusters(struct rk *r, int east_brokers, int east_min_isr,
                        int parts) {
        static const char *const topics[2][3] = {
            {"clicks", "west.clicks", "clicks.unified"},
            {"clicks", "east.clicks", "clicks.unified"}};

        rk_cluster_start(r, "east", east_brokers);
        rk_cluster_start(r, "west", 1);
        for (int t = 0; t < 3; t++)
                rk_create_topic(r, "east", topics[0][t], parts, east_brokers,
                                east_min_isr);
        for (int t = 0; t < 3; t++)
                rk_create_topic(r, "west", topics[1][t], parts, 1, 0);
}

/* ------------------------------ SEVERAL AAGW ------------------------------ */

void rk_gwn_start(struct rk *r, struct rk_gw *g, const char *name,
                  const char *const *extra) {
        const char *argv[128];
        size_t      a = 0;

        assert_null(g->proc);
        if (name && name != g->name)
                snprintf(g->name, sizeof(g->name), "%s", name);
        snprintf(g->state, sizeof(g->state), "%s/state-%s", r->dir, g->name);
        g->runs++;
        snprintf(g->log, sizeof(g->log), "%s/gw-%s-%d.log", r->dir, g->name,
                 g->runs);
        argv[a++] = "--member";
        argv[a++] = g->name;
        for (size_t i = 0; extra && extra[i]; i++) {
                assert_true(a < sizeof(argv) / sizeof(argv[0]) - 1);
                argv[a++] = extra[i];
        }
        argv[a] = NULL;
        g->proc = gw_spawn(r, g->state, g->log, argv);
}

int rk_gwn_stop(struct rk *r, struct rk_gw *g, int sig, int timeout_ms) {
        int code;

        (void)r;
        assert_non_null(g->proc);
        code    = gw_stop_proc(g->proc, g->log, sig, timeout_ms);
        g->proc = NULL;
        return code;
}

void rk_gwn_dump_log(const struct rk_gw *g, int lines) {
        dump_log_file(g->log, lines);
}

int rk_log_count(const char *path, const char *needle) {
        char *text = harness_read_file(path, NULL);
        int   n    = 0;

        for (const char *p = text; p && (p = strstr(p, needle)); p++)
                n++;
        free(text);
        return n;
}

struct log_wait {
        const char *path, *needle;
        int         above;
};

static bool log_grew(void *arg) {
        struct log_wait *w = arg;
        return rk_log_count(w->path, w->needle) > w->above;
}

void rk_gwn_expect_log(struct rk_gw *g, const char *needle, int above,
                       int timeout_ms) {
        struct log_wait w = {g->log, needle, above};
        if (!harness_wait_until(log_grew, &w, timeout_ms)) {
                rk_gwn_dump_log(g, 40);
                fail_msg("%s: no new \"%s\" within %d ms", g->log, needle,
                         timeout_ms);
        }
}

char *rk_gwn_http_get(const struct rk_gw *g, const char *url) {
        return rk_gwn_http_get_status(g, url, NULL);
}

char *rk_gwn_http_get_status(const struct rk_gw *g, const char *url,
                             int *status) {
        char   path[700], *addr, *colon, req[256], *buf = NULL, *body;
        size_t len = 0;
        int    fd;

        if (status)
                *status = 0;

        snprintf(path, sizeof(path), "%s/admin.addr", g->state);
        if (!(addr = harness_read_file(path, NULL)))
                return NULL;
        addr[strcspn(addr, "\n")] = '\0';
        if (!(colon = strrchr(addr, ':'))) {
                free(addr);
                return NULL;
        }
        *colon = '\0';
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port   = htons((uint16_t)atoi(colon + 1))};
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
            connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
                if (fd >= 0)
                        close(fd);
                free(addr);
                return NULL;
        }
        snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: %s:%s\r\n\r\n",
                 url, addr, colon + 1);
        if (write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
                close(fd);
                free(addr);
                return NULL;
        }
        for (;;) {
                char    chunk[8192];
                ssize_t got = read(fd, chunk, sizeof(chunk));
                if (got <= 0)
                        break;
                buf = realloc(buf, len + (size_t)got + 1);
                memcpy(buf + len, chunk, (size_t)got);
                len += (size_t)got;
                buf[len] = '\0';
        }
        close(fd);
        free(addr);
        if (!buf || !(body = strstr(buf, "\r\n\r\n"))) {
                free(buf);
                return NULL;
        }
        /* "HTTP/1.x NNN ..." */
        if (status && !strncmp(buf, "HTTP/", 5) && strchr(buf, ' '))
                *status = atoi(strchr(buf, ' ') + 1);
        memmove(buf, body + 4, strlen(body + 4) + 1);
        return buf;
}
