/*
 * tests/realkafka/test_aggregate.c: the seeds' aggregation topology on
 * real Kafka: three edge clusters (factory-a, -b, -c) into a central one,
 * configured from the seeds' own MirrorMaker 2 file
 * (tests/unit/mm2-seeds/aggregation.properties) through `aagw config
 * import-mm2`, plus a fan-out (factory-a into factory-b as well).
 *
 * Four single-broker clusters.  Each edge writes `orders` (2 partitions);
 * some keys are written at two edges (the same event forwarded by both).
 * One aagw process for the central site (`--site central`, as one would
 * run it there) with the unify stage on (`--unify dedup --id key`), and a
 * second one for factory-b (`--site factory-b`) running the fan-out flow
 * factory-a->factory-b added to the imported config.
 *
 * Asserted, with our own readers:
 *  - every edge's orders is at central under its prefix
 *    (factory-X.orders), record for record, partition for partition;
 *  - central writes nothing back: the central process runs exactly the
 *    three flows X->central, and no edge holds a topic named central.*;
 *  - the fan-out: factory-a.orders at factory-b holds what factory-a's
 *    orders holds too;
 *  - checkpoints: a group committed at each edge shows at central
 *    (factory-X.checkpoints.internal), and `aagw offsets translate
 *    --from factory-X --to central` maps its committed offset exactly;
 *  - central's orders.unified holds every key once, also those written at
 *    two edges.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <librdkafka/rdkafka.h>

#include "rk.h"

#define PARTS 2
#define PER_EDGE 200 /* keys o<e>-<i> per edge */
#define SHARED 50    /* keys "s<i>" written at factory-a and factory-b */
#define COMMITTED 60 /* the group's offset on orders [0] at factory-a */
#define TIMEOUT_MS 90000

static const char *const edges[] = {"factory-a", "factory-b", "factory-c"};

/* The records of 'topic' at 'alias', partition by partition, in order:
 * the values joined with '\n', one string per partition (malloc()ed). */
static void read_parts(struct rk *r, const char *alias, const char *topic,
                       char *out[PARTS]) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        char             errstr[512];
        rd_kafka_t      *rk;

        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           rk_bs(r, alias), errstr,
                                           sizeof(errstr)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_conf_set(conf, "group.id", "aggregate-check", NULL, 0);
        rd_kafka_conf_set(conf, "enable.partition.eof", "true", NULL, 0);
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", NULL, 0);
        rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
        assert_non_null(rk);
        rd_kafka_poll_set_consumer(rk);
        for (int p = 0; p < PARTS; p++) {
                rd_kafka_topic_partition_list_t *l =
                    rd_kafka_topic_partition_list_new(1);
                size_t  cap = 4096, len = 0;
                char   *buf      = malloc(cap);
                int64_t deadline = harness_now_ms() + 60000;
                bool    eof      = false;

                rd_kafka_topic_partition_list_add(l, topic, p)->offset =
                    RD_KAFKA_OFFSET_BEGINNING;
                assert_int_equal(rd_kafka_assign(rk, l), 0);
                rd_kafka_topic_partition_list_destroy(l);
                buf[0] = '\0';
                while (!eof && harness_now_ms() < deadline) {
                        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
                        if (!m)
                                continue;
                        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
                                eof = true;
                        else if (!m->err) {
                                while (len + m->len + 2 > cap)
                                        buf = realloc(buf, cap *= 2);
                                memcpy(buf + len, m->payload, m->len);
                                len += m->len;
                                buf[len++] = '\n';
                                buf[len]   = '\0';
                        }
                        rd_kafka_message_destroy(m);
                }
                if (!eof)
                        fail_msg("%s at %s [%d]: no end in 60 s", topic, alias,
                                 p);
                out[p] = buf;
        }
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
}

/* 'copy' at 'at' holds what 'topic' at 'alias' holds, partition by
 * partition, in order. */
static void expect_same(struct rk *r, const char *alias, const char *topic,
                        const char *at, const char *copy) {
        char *a[PARTS], *b[PARTS];

        read_parts(r, alias, topic, a);
        read_parts(r, at, copy, b);
        for (int p = 0; p < PARTS; p++) {
                if (strcmp(a[p], b[p]))
                        fail_msg("%s [%d] at %s differs from %s at %s", copy, p,
                                 at, topic, alias);
                assert_true(strlen(a[p]) > 0);
                free(a[p]);
                free(b[p]);
        }
}

/* Commit 'offset' for group 'group' on 'topic' [0] at 'alias'. */
static void commit(struct rk *r, const char *alias, const char *group,
                   const char *topic, int64_t offset) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        char             errstr[512];
        rd_kafka_t      *rk;

        rd_kafka_conf_set(conf, "bootstrap.servers", rk_bs(r, alias), errstr,
                          sizeof(errstr));
        rd_kafka_conf_set(conf, "group.id", group, errstr, sizeof(errstr));
        rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
        assert_non_null(rk);
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, topic, 0)->offset = offset;
        assert_int_equal(rd_kafka_commit(rk, l, 0), 0);
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_destroy(rk);
}

/* No topic named central.* at 'alias'. */
static void expect_no_central_topic(struct rk *r, const char *alias) {
        rd_kafka_conf_t                *conf = rd_kafka_conf_new();
        const struct rd_kafka_metadata *md;
        char                            errstr[512];
        rd_kafka_t                     *rk;

        rd_kafka_conf_set(conf, "bootstrap.servers", rk_bs(r, alias), errstr,
                          sizeof(errstr));
        rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
        assert_non_null(rk);
        assert_int_equal(rd_kafka_metadata(rk, 1, NULL, &md, 30000), 0);
        for (int i = 0; i < md->topic_cnt; i++)
                if (!strncmp(md->topics[i].topic, "central.", 8))
                        fail_msg("%s holds %s: central wrote back", alias,
                                 md->topics[i].topic);
        rd_kafka_metadata_destroy(md);
        rd_kafka_destroy(rk);
}

/* `aagw ARGS... -c CONF <every cluster>`; its exit code, output in 'o'. */
static int aagw(struct rk *r, const char *conf, const char *const *words,
                harness_output_t *o) {
        const char *argv[96];
        size_t      a = 0;

        argv[a++] = harness_aagw_bin();
        for (size_t i = 0; words[i]; i++)
                argv[a++] = words[i];
        argv[a++] = "-c";
        argv[a++] = conf;
        a += rk_gw_cluster_args(r, argv + a, 64);
        argv[a] = NULL;
        assert_int_equal(
            harness_run(argv, NULL, 0, 60000, o, r->errstr, sizeof(r->errstr)),
            AAGW_OK);
        return harness_exit_code(o->status);
}

static void test_aggregate(void **state) {
        struct rk       *r       = rk_new("rk-aggregate");
        struct rk_gw     central = {0}, fanout = {0};
        harness_output_t o;
        char            *conf, *yaml, seed[600], key[32];

        *state = r;
        for (size_t e = 0; e < 3; e++)
                rk_cluster_start(r, edges[e], 1);
        rk_cluster_start(r, "central", 1);
        for (size_t e = 0; e < 3; e++)
                rk_create_topic(r, edges[e], "orders", PARTS, 1, 0);
        rk_create_topic(r, "central", "orders", PARTS, 1, 0);
        rk_create_topic(r, "central", "orders.unified", PARTS, 1, 0);

        /* The seeds' file, imported as it is; the clusters' addresses come
         * from the command line (rk_gw_cluster_args). */
        snprintf(seed, sizeof(seed),
                 "%s/tests/unit/mm2-seeds/aggregation.properties",
                 getenv("AAGW_SOURCE_ROOT"));
        const char *imp[] = {harness_aagw_bin(), "config", "import-mm2", seed,
                             NULL};
        assert_int_equal(
            harness_run(imp, NULL, 0, 30000, &o, r->errstr, sizeof(r->errstr)),
            AAGW_OK);
        if (harness_exit_code(o.status))
                fail_msg("import-mm2: %s", o.err);
        /* The fan-out flow, beside the seeds' three. */
        assert_non_null(strstr(o.out, "    - \"factory-c->central\""));
        assert_true(asprintf(&yaml, "%s", o.out) > 0);
        harness_output_deinit(&o);
        char *at = strstr(yaml, "    - \"factory-c->central\"");
        at       = strchr(at, '\n');
        assert_non_null(at);
        char *full;
        assert_true(asprintf(&full, "%.*s\n    - \"factory-a->factory-b\"%s",
                             (int)(at - yaml), yaml, at) > 0);
        conf = rk_write(r, "aggregate.yaml", full);
        free(full);
        free(yaml);

        /* Each edge's own orders, and the shared keys at a and b. */
        for (size_t e = 0; e < 3; e++) {
                char prefix[16];
                snprintf(prefix, sizeof(prefix), "o%zu-", e);
                rk_produce_keyed(r, edges[e], "orders", PARTS, prefix, 0,
                                 PER_EDGE);
        }
        rk_produce_keyed(r, "factory-a", "orders", PARTS, "s", 0, SHARED);
        rk_produce_keyed(r, "factory-b", "orders", PARTS, "s", 0, SHARED);

        const char *cargs[] = {"-c",      conf,
                               "--site",  "central",
                               "--unify", "dedup",
                               "--id",    "key",
                               "--admin", "127.0.0.1:0",
                               "--set",   "replication.topics=orders",
                               "--set",   "mm2.checkpoints_interval=1s",
                               NULL};
        rk_gwn_start(r, &central, "central", cargs);
        const char *fargs[] = {
            "-c",      conf,  "--site", "factory-b",
            "--unify", "off", "--set",  "replication.topics=orders",
            NULL};
        rk_gwn_start(r, &fanout, "fanout", fargs);

        /* Every edge at central, record for record. */
        for (size_t e = 0; e < 3; e++) {
                char copy[64];
                int  want = PER_EDGE + (e < 2 ? SHARED : 0);
                snprintf(copy, sizeof(copy), "%s.orders", edges[e]);
                rk_expect_size(r, "central", copy, want, TIMEOUT_MS);
                expect_same(r, edges[e], "orders", "central", copy);
        }
        /* The fan-out: factory-a also at factory-b. */
        rk_expect_size(r, "factory-b", "factory-a.orders", PER_EDGE + SHARED,
                       TIMEOUT_MS);
        expect_same(r, "factory-a", "orders", "factory-b", "factory-a.orders");

        /* Central runs the three flows into it and nothing else. */
        char *st = rk_gwn_http_get(&central, "/status");
        assert_non_null(st);
        json_object *j = json_tokener_parse(st), *fl;
        assert_non_null(j);
        assert_true(json_object_object_get_ex(j, "flows", &fl));
        assert_int_equal(json_object_array_length(fl), 3);
        for (size_t i = 0; i < 3; i++) {
                json_object *n;
                char         want[64];
                json_object_object_get_ex(json_object_array_get_idx(fl, i),
                                          "name", &n);
                snprintf(want, sizeof(want), "%s->central", edges[i]);
                bool found = false;
                for (size_t k = 0; k < 3; k++) {
                        json_object *nk;
                        json_object_object_get_ex(
                            json_object_array_get_idx(fl, k), "name", &nk);
                        found |= !strcmp(json_object_get_string(nk), want);
                }
                assert_true(found);
                assert_non_null(strstr(json_object_get_string(n), "->central"));
        }
        json_object_put(j);
        free(st);
        for (size_t e = 0; e < 3; e++)
                expect_no_central_topic(r, edges[e]);

        /* Checkpoints and translation, from every edge to central. */
        for (size_t e = 0; e < 3; e++) {
                char ckpt[64], copy[64];
                snprintf(ckpt, sizeof(ckpt), "%s.checkpoints.internal",
                         edges[e]);
                snprintf(copy, sizeof(copy), "%s.orders", edges[e]);
                commit(r, edges[e], "g1", "orders", COMMITTED + (int)e);
                if (!rk_wait_size(r, "central", ckpt, 1, TIMEOUT_MS)) {
                        rk_gwn_dump_log(&central, 60);
                        fail_msg("no checkpoint of %s at central", edges[e]);
                }
                const char *tr[] = {
                    "offsets", "translate", "--group", "g1",     "--from",
                    edges[e],  "--to",      "central", "--json", NULL};
                int rc = aagw(r, conf, tr, &o);
                if (rc)
                        fail_msg("translate from %s: exit %d\n%s%s", edges[e],
                                 rc, o.out, o.err);
                json_object *t = json_tokener_parse(o.out), *parts;
                assert_non_null(t);
                assert_true(json_object_object_get_ex(t, "partitions", &parts));
                bool p0 = false;
                for (size_t i = 0; i < json_object_array_length(parts); i++) {
                        json_object *pe = json_object_array_get_idx(parts, i),
                                    *v, *tt;
                        json_object_object_get_ex(pe, "partition", &v);
                        if (json_object_get_int(v) != 0)
                                continue;
                        p0 = true;
                        json_object_object_get_ex(pe, "target_topic", &tt);
                        assert_string_equal(json_object_get_string(tt), copy);
                        json_object_object_get_ex(pe, "translated", &v);
                        /* An exact copy from offset 0: the same offset. */
                        assert_int_equal(json_object_get_int64(v),
                                         COMMITTED + (int)e);
                        json_object_object_get_ex(pe, "exact", &v);
                        assert_true(json_object_get_boolean(v));
                }
                assert_true(p0);
                json_object_put(t);
                harness_output_deinit(&o);
        }

        /* Unified at central: every key once, the shared ones too. */
        struct rk_bag *u     = rk_bag_new();
        int64_t        total = 3 * PER_EDGE + SHARED;
        rk_expect_size(r, "central", "orders.unified", total, TIMEOUT_MS);
        assert_int_equal(
            rk_count(r, "central", "orders.unified", "read_committed", u),
            total);
        assert_int_equal(rk_bag_distinct(u), total);
        for (int i = 0; i < SHARED; i++) {
                snprintf(key, sizeof(key), "s%d", i);
                assert_int_equal(rk_bag_count(u, key), 1);
        }
        rk_bag_destroy(u);

        assert_int_equal(rk_gwn_stop(r, &fanout, SIGTERM, 30000), 0);
        assert_int_equal(rk_gwn_stop(r, &central, SIGTERM, 30000), 0);
        free(conf);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_aggregate, rk_teardown),
        };
        return cmocka_run_group_tests_name("kafka-aggregate", tests, NULL,
                                           NULL);
}
