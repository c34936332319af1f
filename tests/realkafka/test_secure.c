/*
 * tests/realkafka/test_secure.c: the gateway logs in to Kafka with every
 * kind of secured listener scripts/kafka-clusters makes (SCRAM-SHA-256,
 * SCRAM-SHA-512, SASL/PLAIN and OAUTHBEARER over TLS, mutual TLS), and a
 * wrong password gets it nowhere.
 *
 * One launcher, six single-node clusters: one per kind, each with its
 * PLAINTEXT listener beside the secured one, and a plaintext hub.  Per
 * kind one gateway runs between the kind's cluster, given only its
 * secured listener and the launcher's librdkafka settings for it, and the
 * hub, both ways, on its own topic: it consumes and produces through the
 * secured listener.  The test writes and reads through the plaintext
 * listeners with kcat, which has no part in the login: both copies must
 * be exact (every record once, same partition, same order).  That a
 * plain client is refused by each secured listener shows the copies
 * could not have gone another way.
 *
 * The user `denied` logs in to each listener as well, and the authorizer
 * shows it none of the topics `aagw` sees (the ground later tests of
 * refused operations stand on).
 *
 * Meanwhile a sixth gateway has the SCRAM-SHA-512 cluster with a wrong
 * password: it copies nothing, librdkafka logs the broker's "invalid
 * credentials", and /healthz names the cluster and the refused login
 * (every login failure, and denied operations: test_connect.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rk.h"

#define KINDS   5
#define RECS    300 /* per direction and kind */
#define PARTS   3
#define COPY_MS 90000

/* alias, the launcher's KIND */
static const char *const kind[KINDS][2] = {
    {"s256", "scram-sha-256"}, {"s512", "scram-sha-512"}, {"plain", "plain"},
    {"mtls", "mtls"},          {"oauth", "oauthbearer"},
};
#define HUB "hub"

struct fx {
        struct rk          *r;
        harness_proc_t     *launcher;
        harness_clusters_t *hc;
        harness_proc_t     *gw[KINDS + 1]; /* the last: wrong password */
        struct rk_gw        bad;           /* its state dir, for /healthz */
        char                log[KINDS + 1][600];
        char                topic[KINDS + 1][64];
        char                bad_props[700];
        harness_bootstraps_t *env; /* the launcher's variables */
};

static int teardown(void **state) {
        struct fx *f = *state;

        if (!f)
                return 0;
        for (int i = 0; i <= KINDS; i++)
                if (f->gw[i]) {
                        harness_proc_signal(f->gw[i], SIGTERM);
                        if (harness_proc_wait(f->gw[i], 20000, NULL))
                                harness_proc_signal(f->gw[i], SIGKILL);
                        harness_proc_destroy(f->gw[i]);
                }
        harness_clusters_destroy(f->hc);
        harness_bootstraps_destroy(f->env);
        if (f->launcher) {
                harness_proc_signal(f->launcher, SIGTERM);
                if (harness_proc_wait(f->launcher, 60000, NULL))
                        harness_proc_signal(f->launcher, SIGKILL);
                harness_proc_destroy(f->launcher);
        }
        rk_destroy(f->r);
        free(f);
        *state = NULL;
        return 0;
}

/* ------------------------------------------------------------ CLUSTERS -- */

struct ready {
        struct fx  *f;
        const char *bs_file;
        bool        died;
};

static bool ready(void *arg) {
        struct ready *a = arg;

        if (harness_proc_wait(a->f->launcher, 0, NULL) != AAGW_ERR_TIMEOUT) {
                a->died = true;
                return true;
        }
        return harness_wait_file(a->bs_file, 0);
}

static void start_clusters(struct fx *f) {
        char       *bs_file = rk_path(f->r, "bootstraps");
        char       *env     = rk_path(f->r, "clusters.env");
        char       *log     = rk_path(f->r, "launcher.log");
        char       *dir     = rk_path(f->r, "kafka");
        char        script[4096], sec[KINDS][64];
        const char *argv[48];
        const char *aliases[KINDS + 1];
        size_t      a = 0;
        int64_t     t = harness_now_ms();

        snprintf(script, sizeof(script), "%s/scripts/kafka-clusters",
                 f->r->src);
        argv[a++] = script;
        argv[a++] = "--heap";
        argv[a++] = "256";
        argv[a++] = "--dir";
        argv[a++] = dir;
        argv[a++] = "--env-file";
        argv[a++] = env;
        argv[a++] = "--bootstraps-file";
        argv[a++] = bs_file;
        for (int i = 0; i < KINDS; i++) {
                snprintf(sec[i], sizeof(sec[i]), "%s=%s", kind[i][0],
                         kind[i][1]);
                argv[a++] = "--security";
                argv[a++] = sec[i];
        }
        if (getenv("AAGW_TEST_KEEP"))
                argv[a++] = "--keep";
        for (int i = 0; i < KINDS; i++)
                argv[a++] = aliases[i] = kind[i][0];
        argv[a++] = aliases[KINDS] = HUB;
        argv[a]                    = NULL;
        f->launcher = harness_proc_spawn(argv, log, log, f->r->errstr,
                                         sizeof(f->r->errstr));
        if (!f->launcher)
                fail_msg("kafka-clusters: %s", f->r->errstr);
        struct ready ra = {f, bs_file, false};
        if (!harness_wait_until(ready, &ra, 240000) || ra.died) {
                char *text = harness_read_file(log, NULL);
                fail_msg("the clusters did not start (%s):\n%s",
                         ra.died ? "the launcher exited" : "240 s",
                         text ? text : "");
        }
        f->hc = harness_clusters_load(env, aliases, KINDS + 1, f->r->errstr,
                                      sizeof(f->r->errstr));
        if (!f->hc)
                fail_msg("%s", f->r->errstr);
        f->env = harness_bootstraps_load(env, f->r->errstr,
                                         sizeof(f->r->errstr));
        assert_non_null(f->env);
        print_message("# %d clusters ready in %.1f s\n", KINDS + 1,
                      (double)(harness_now_ms() - t) / 1000.0);
        for (int i = 0; i < KINDS; i++) {
                /* Each kind is what was asked for, on a listener of its
                 * own. */
                assert_string_equal(harness_clusters_security(f->hc,
                                                              kind[i][0]),
                                    kind[i][1]);
                assert_string_not_equal(
                    harness_clusters_gw_bootstraps(f->hc, kind[i][0]),
                    harness_clusters_bootstraps(f->hc, kind[i][0]));
        }
        free(bs_file);
        free(env);
        free(log);
        free(dir);
}

/* A client without security settings gets no metadata from a secured
 * listener (a TLS or SASL handshake was expected of it). */
static void expect_plain_client_refused(const char *alias, const char *bs) {
        char             err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        const struct rd_kafka_metadata *md = NULL;

        assert_int_equal(
            rd_kafka_conf_set(conf, "bootstrap.servers", bs, err, sizeof(err)),
            RD_KAFKA_CONF_OK);
        rd_kafka_conf_set(conf, "log_level", "0", err, sizeof(err));
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err,
                                      sizeof(err));
        assert_non_null(rk);
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 1, NULL, &md, 1500);
        if (!e) {
                rd_kafka_metadata_destroy(md);
                fail_msg("%s: a plaintext client got metadata from the "
                         "secured listener %s",
                         alias, bs);
        }
        rd_kafka_destroy(rk);
}

/* Whether a client with the librdkafka settings file 'props' at 'bs' sees
 * 'topic' in the metadata: 1 yes, 0 no (logged in, the authorizer hides
 * it), -1 no metadata at all. */
static int sees_topic(struct fx *f, const char *bs, const char *props,
                      const char *topic) {
        char                            err[512];
        rd_kafka_conf_t                *conf = rd_kafka_conf_new();
        const struct rd_kafka_metadata *md   = NULL;
        harness_bootstraps_t           *kv;
        int                             seen = 0;

        kv = harness_bootstraps_load(props, f->r->errstr, sizeof(f->r->errstr));
        assert_non_null(kv);
        assert_int_equal(
            rd_kafka_conf_set(conf, "bootstrap.servers", bs, err, sizeof(err)),
            RD_KAFKA_CONF_OK);
        for (size_t i = 0; i < harness_bootstraps_cnt(kv); i++) {
                const char *k = harness_bootstraps_alias(kv, i);
                if (rd_kafka_conf_set(conf, k, harness_bootstraps_get(kv, k),
                                      err, sizeof(err)))
                        fail_msg("%s: %s", props, err);
        }
        harness_bootstraps_destroy(kv);
        rd_kafka_conf_set(conf, "log_level", "0", err, sizeof(err));
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err,
                                      sizeof(err));
        assert_non_null(rk);
        if (rd_kafka_metadata(rk, 1, NULL, &md, 10000)) {
                rd_kafka_destroy(rk);
                return -1;
        }
        for (int i = 0; i < md->topic_cnt; i++)
                seen |= !strcmp(md->topics[i].topic, topic);
        rd_kafka_metadata_destroy(md);
        rd_kafka_destroy(rk);
        return seen;
}

/* ------------------------------------------------------------ GATEWAYS -- */

/* `aagw run` between cluster 'alias' (secured listener) and the hub on
 * 'topic', both ways; 'props' replaces the alias's librdkafka settings
 * file when not NULL. */
static harness_proc_t *gw_start(struct fx *f, int slot, const char *alias,
                                const char *topic, const char *props,
                                char *state, size_t state_size) {
        const char *argv[96];
        size_t      a = 0;
        char        id[64], dir[64], sets[32][300];
        int         nsets = 0;

        snprintf(id, sizeof(id), "sec-%d", slot);
        snprintf(dir, sizeof(dir), "state-%d", slot);
        char *st = rk_path(f->r, dir);
        snprintf(state, state_size, "%s", st);
        free(st);
        snprintf(f->log[slot], sizeof(f->log[slot]), "%s/gw-%d.log",
                 f->r->dir, slot);
        argv[a++] = harness_aagw_bin();
        argv[a++] = "run";
        if (!props) {
                a += harness_clusters_gw_args(f->hc, alias, argv + a, 48);
        } else {
                /* The same listener, the settings from 'props'. */
                static char cl[600];
                char       *text = harness_read_file(props, NULL);
                char       *save = NULL;

                assert_non_null(text);
                snprintf(cl, sizeof(cl), "%s=%s", alias,
                         harness_clusters_gw_bootstraps(f->hc, alias));
                argv[a++] = "--cluster";
                argv[a++] = cl;
                for (char *l = strtok_r(text, "\n", &save); l && nsets < 32;
                     l = strtok_r(NULL, "\n", &save)) {
                        snprintf(sets[nsets], sizeof(sets[nsets]),
                                 "clusters.%s.properties.%s", alias, l);
                        argv[a++] = "--set";
                        argv[a++] = sets[nsets++];
                }
                free(text);
        }
        a += harness_clusters_gw_args(f->hc, HUB, argv + a, 8);
        const char *const tail[] = {
            "--topic",     topic, "--unify", "off",         "--gateway-id", id,
            "--state-dir", state, "--admin", "127.0.0.1:0", "--set",
            "replication.refresh_topics_interval=1s",        NULL};
        for (size_t i = 0; tail[i]; i++)
                argv[a++] = tail[i];
        argv[a]           = NULL;
        harness_proc_t *p = harness_proc_spawn(argv, NULL, f->log[slot],
                                               f->r->errstr,
                                               sizeof(f->r->errstr));
        if (!p)
                fail_msg("aagw: %s", f->r->errstr);
        return p;
}

/* The librdkafka settings of 'alias' with a wrong sasl.password. */
static void write_bad_props(struct fx *f, const char *alias) {
        const char *good = harness_clusters_gw_props(f->hc, alias);
        char       *text, *save = NULL, *out;
        size_t      len;

        assert_non_null(good);
        text = harness_read_file(good, &len);
        assert_non_null(text);
        out = calloc(1, len + 64);
        assert_non_null(out);
        for (char *l = strtok_r(text, "\n", &save); l;
             l = strtok_r(NULL, "\n", &save)) {
                if (!strncmp(l, "sasl.password=", 14))
                        l = "sasl.password=not-the-password";
                strcat(out, l);
                strcat(out, "\n");
        }
        assert_non_null(strstr(out, "not-the-password"));
        char *bad = rk_write(f->r, "wrong-password.properties", out);
        snprintf(f->bad_props, sizeof(f->bad_props), "%s", bad);
        free(bad);
        free(out);
        free(text);
}

/* ------------------------------------------------------------- RECORDS -- */

static void produce(struct fx *f, const char *alias, const char *topic,
                    const char *tag) {
        harness_record_t recs[RECS];
        char             kv[RECS][2][48];

        for (int i = 0; i < RECS; i++) {
                snprintf(kv[i][0], sizeof(kv[i][0]), "k%d", i % 37);
                snprintf(kv[i][1], sizeof(kv[i][1]), "%s-%d", tag, i);
                recs[i] = (harness_record_t){kv[i][0], kv[i][1]};
        }
        if (harness_kcat_produce(harness_clusters_bootstraps(f->hc, alias),
                                 topic, recs, RECS, NULL, -1, 60000,
                                 f->r->errstr, sizeof(f->r->errstr)))
                fail_msg("produce to %s at %s: %s", topic, alias,
                         f->r->errstr);
}

/* "partition key value" lines of 'topic' at 'alias' (plaintext, kcat),
 * grouped by partition in offset order; NULL if it cannot be read. */
static char *read_topic(struct fx *f, const char *alias, const char *topic,
                        size_t *cnt) {
        harness_lines_t l;
        size_t          len = 1;
        char           *out;

        *cnt = 0;
        if (harness_kcat_consume(harness_clusters_bootstraps(f->hc, alias),
                                 topic, "%p %k %s\n", 30000, &l, f->r->errstr,
                                 sizeof(f->r->errstr)))
                return NULL;
        for (size_t i = 0; i < l.cnt; i++)
                len += strlen(l.v[i]) + 1;
        out = calloc(1, len);
        assert_non_null(out);
        for (int p = 0; p < PARTS; p++)
                for (size_t i = 0; i < l.cnt; i++)
                        if (atoi(l.v[i]) == p) {
                                strcat(out, l.v[i]);
                                strcat(out, "\n");
                        }
        *cnt = l.cnt;
        harness_lines_deinit(&l);
        return out;
}

struct copy_arg {
        struct fx  *f;
        const char *alias;
        const char *topic;
        size_t      want;
};

static bool copied(void *arg) {
        struct copy_arg *c = arg;
        size_t           n;
        char            *t = read_topic(c->f, c->alias, c->topic, &n);

        free(t);
        return t && n >= c->want;
}

/* 'copy' at 'to' holds exactly the records of 'src' at 'from': every one
 * once, in its partition, in order. */
static void expect_exact(struct fx *f, const char *what, const char *from,
                         const char *src, const char *to, const char *copy,
                         int slot) {
        struct copy_arg c = {f, to, copy, RECS};
        size_t          ns, nc;

        if (!harness_wait_until(copied, &c, COPY_MS)) {
                rk_grep_file(f->log[slot], NULL,
                             (const char *const[]){" E [", " W [", NULL});
                fail_msg("%s: %s at %s did not reach %d records in %d s",
                         what, copy, to, RECS, COPY_MS / 1000);
        }
        char *a = read_topic(f, from, src, &ns);
        char *b = read_topic(f, to, copy, &nc);
        assert_non_null(a);
        assert_non_null(b);
        assert_int_equal(ns, RECS);
        if (nc != ns || strcmp(a, b))
                fail_msg("%s: %s at %s (%zu records) is not an exact copy of "
                         "%s at %s (%zu)",
                         what, copy, to, nc, src, from, ns);
        free(a);
        free(b);
}

/* ---------------------------------------------------------------- TEST -- */

static void test_secured_listeners(void **state) {
        struct fx *f = calloc(1, sizeof(*f));
        char       state_dir[KINDS + 1][600], copy[128];
        int64_t    t0;

        assert_non_null(f);
        *state = f;
        f->r   = rk_new("rk-secure");
        start_clusters(f);

        /* Topics at both ends (the copies the gateway makes itself, through
         * the secured listener's admin client where it is the target). */
        for (int i = 0; i <= KINDS; i++) {
                const char *alias = i < KINDS ? kind[i][0] : "s512";
                snprintf(f->topic[i], sizeof(f->topic[i]), "t-%s%s", alias,
                         i < KINDS ? "" : "-bad");
                if (harness_clusters_create_topic(f->hc, alias, f->topic[i],
                                                  PARTS, f->r->errstr,
                                                  sizeof(f->r->errstr)) ||
                    (i < KINDS &&
                     harness_clusters_create_topic(f->hc, HUB, f->topic[i],
                                                   PARTS, f->r->errstr,
                                                   sizeof(f->r->errstr))))
                        fail_msg("%s", f->r->errstr);
        }
        write_bad_props(f, "s512");
        t0 = harness_now_ms();
        for (int i = 0; i < KINDS; i++)
                f->gw[i] = gw_start(f, i, kind[i][0], f->topic[i], NULL,
                                    state_dir[i], sizeof(state_dir[i]));
        f->gw[KINDS] = gw_start(f, KINDS, "s512", f->topic[KINDS],
                                f->bad_props, state_dir[KINDS],
                                sizeof(state_dir[KINDS]));
        snprintf(f->bad.state, sizeof(f->bad.state), "%s", state_dir[KINDS]);
        for (int i = 0; i <= KINDS; i++) {
                const char *alias = i < KINDS ? kind[i][0] : "s512";
                produce(f, alias, f->topic[i], alias);
                if (i < KINDS)
                        produce(f, HUB, f->topic[i], HUB);
        }
        for (int i = 0; i < KINDS; i++) {
                const char *bs = harness_clusters_gw_bootstraps(f->hc,
                                                                kind[i][0]);
                char        var[96];

                expect_plain_client_refused(kind[i][0], bs);
                snprintf(var, sizeof(var), "AAGW_TEST_DENIED_PROPS_%s",
                         kind[i][0]);
                for (char *c = var; *c; c++)
                        *c = (char)toupper((unsigned char)*c);
                const char *denied = harness_bootstraps_get(f->env, var);
                assert_non_null(denied);
                assert_int_equal(sees_topic(f, bs,
                                            harness_clusters_gw_props(
                                                f->hc, kind[i][0]),
                                            f->topic[i]),
                                 1);
                if (sees_topic(f, bs, denied, f->topic[i]) != 0)
                        fail_msg("%s: the user denied did not log in, or "
                                 "sees %s",
                                 kind[i][1], f->topic[i]);
        }
        print_message("# a plain client refused by every secured listener; "
                      "the user denied logs in to each and sees none of the "
                      "topics aagw sees\n");

        for (int i = 0; i < KINDS; i++) {
                const char *alias = kind[i][0];
                char        what[96];

                snprintf(what, sizeof(what), "%s -> %s", kind[i][1], HUB);
                snprintf(copy, sizeof(copy), "%s.%s", alias, f->topic[i]);
                expect_exact(f, what, alias, f->topic[i], HUB, copy, i);
                snprintf(what, sizeof(what), "%s -> %s", HUB, kind[i][1]);
                snprintf(copy, sizeof(copy), "%s.%s", HUB, f->topic[i]);
                expect_exact(f, what, HUB, f->topic[i], alias, copy, i);
                print_message("# %-13s %d records each way, exact copies, "
                              "%.1f s after the gateways started\n",
                              kind[i][1], RECS,
                              (double)(harness_now_ms() - t0) / 1000.0);
        }

        /* The wrong password: the broker's refusal in the log, nothing
         * copied while the others copied everything, the refused login
         * on /healthz, and the process still running. */
        const char *const refused[] = {"SASL authentication error",
                                       "invalid credentials", NULL};
        for (int k = 0; refused[k]; k++)
                if (!rk_log_count(f->log[KINDS], refused[k]))
                        fail_msg("wrong password: no \"%s\" in %s", refused[k],
                                 f->log[KINDS]);
        snprintf(copy, sizeof(copy), "s512.%s", f->topic[KINDS]);
        size_t n;
        char  *t = read_topic(f, HUB, copy, &n);
        free(t);
        assert_int_equal(n, 0);
        char *health = rk_gwn_http_get(&f->bad, "/healthz");
        if (!health || !strstr(health, "degraded") ||
            !strstr(health,
                    "cluster s512 (source): authentication failed"))
                fail_msg("wrong password: /healthz says %s",
                         health ? health : "(nothing)");
        print_message("# wrong password: %d refusals logged, 0 records "
                      "copied, /healthz: %.*s\n",
                      rk_log_count(f->log[KINDS], refused[0]),
                      (int)strcspn(health, "\n"), health);
        free(health);
        assert_int_equal(harness_proc_wait(f->gw[KINDS], 0, NULL),
                         AAGW_ERR_TIMEOUT);

        /* Every gateway stops cleanly. */
        for (int i = 0; i <= KINDS; i++) {
                int st = -1;
                harness_proc_signal(f->gw[i], SIGTERM);
                assert_int_equal(harness_proc_wait(f->gw[i], 30000, &st),
                                 AAGW_OK);
                if (harness_exit_code(st) != 0)
                        fail_msg("gateway %d: exit %d after SIGTERM (%s)", i,
                                 harness_exit_code(st), f->log[i]);
                harness_proc_destroy(f->gw[i]);
                f->gw[i] = NULL;
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_secured_listeners, teardown),
        };
        return cmocka_run_group_tests_name("kafka-secure", tests, NULL, NULL);
}
