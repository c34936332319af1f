/* tests/offsets/ofs.c: the offsets tests' shared scene (see ofs.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ofs.h"

static rd_kafka_t *admins[2];
static char        admin_bs[2][600]; /* whose clusters they talk to */

struct repl *ofs_scene(void) {
        return ofs_scene_like(NULL);
}

struct repl *ofs_scene_like(const struct repl *prev) {
        static const char *const sites[] = {"east", "west"};
        struct repl             *r       = repl_new(sites, 2);

        if (prev)
                repl_share_scope(r, prev);

        repl_create_topic(r, "east", "clicks", 4);
        repl_create_topic(r, "west", "east.clicks", 4);
        repl_create_topic(r, "east", "heartbeats", 1);
        repl_create_topic(r, "west", "east.heartbeats", 1);
        repl_create_topic(r, "east", "mm2-offset-syncs.west.internal", 1);
        repl_create_topic(r, "west", "east.checkpoints.internal", 1);
        return r;
}

void ofs_gw_start(struct repl *r, const char *const *extra) {
        static char groups[200];
        const char *argv[64] = {"--mode",    "active-passive",
                                "--primary", "east",
                                "--admin",   "127.0.0.1:0",
                                "--set",     "mm2.checkpoints_interval=1s",
                                "--set",     groups,
                                "--set",     "mm2.heartbeats_interval=1s"};
        size_t      a        = 12;

        snprintf(groups, sizeof(groups), "replication.groups=%s",
                 repl_topic(r, "g1"));

        for (size_t i = 0; extra && extra[i]; i++)
                argv[a++] = extra[i];
        argv[a] = NULL;
        repl_gw_start(r, argv);
}

static void quiet(const rd_kafka_t *rk, int level, const char *fac,
                  const char *buf) {
        (void)rk;
        (void)level;
        (void)fac;
        (void)buf;
}

rd_kafka_t *ofs_admin(struct repl *r, const char *alias) {
        int i = strcmp(alias, "east") ? 1 : 0;
        /* A test that failed left the previous test's handles behind. */
        if (admins[i] && strcmp(admin_bs[i], repl_bs(r, alias))) {
                rd_kafka_destroy(admins[i]);
                admins[i] = NULL;
        }
        if (!admins[i]) {
                snprintf(admin_bs[i], sizeof(admin_bs[i]), "%s",
                         repl_bs(r, alias));
                rd_kafka_conf_t *c =
                    aagw_kafka_conf_new(repl_bs(r, alias), "test-ofs",
                                        r->errstr, sizeof(r->errstr));
                assert_non_null(c);
                rd_kafka_conf_set_log_cb(c, quiet);
                admins[i] = rd_kafka_new(RD_KAFKA_PRODUCER, c, r->errstr,
                                         sizeof(r->errstr));
                assert_non_null(admins[i]);
        }
        return admins[i];
}

void ofs_done(void) {
        for (int i = 0; i < 2; i++) {
                if (admins[i])
                        rd_kafka_destroy(admins[i]);
                admins[i] = NULL;
        }
}

void ofs_commit(struct repl *r, const char *alias, const char *group,
                const char *topic, int32_t partition, int64_t offset) {
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(1);
        char err[512];

        /* Groups are scoped like topics ("g1" -> "<scope>-g1"): real
         * clusters are shared by the tests; aagw.* stays as it is. */
        group = repl_topic(r, group);
        topic = repl_topic(r, topic);
        rd_kafka_topic_partition_list_add(l, topic, partition)->offset = offset;
        if (aagw_kafka_group_commit(ofs_admin(r, alias), group, l, 10000, err,
                                    sizeof(err)))
                fail_msg("commit %s %s [%d] at %s: %s", group, topic,
                         (int)partition, alias, err);
        rd_kafka_topic_partition_list_destroy(l);
}

int64_t ofs_committed(struct repl *r, const char *alias, const char *group,
                      const char *topic, int32_t partition) {
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(1);
        char    err[512];
        int64_t off;

        group = repl_topic(r, group); /* scoped, as in ofs_commit() */
        topic = repl_topic(r, topic);
        rd_kafka_topic_partition_list_add(l, topic, partition);
        if (aagw_kafka_group_offsets(ofs_admin(r, alias), group, l, 10000, err,
                                     sizeof(err)))
                fail_msg("offsets of %s at %s: %s", group, alias, err);
        off = l->elems[0].offset;
        rd_kafka_topic_partition_list_destroy(l);
        return off < 0 ? -1 : off;
}

size_t ofs_read_raw(struct repl *r, const char *alias, const char *topic,
                    int32_t partition, ofs_rec_fn *fn, void *arg) {
        rd_kafka_conf_t *c = aagw_kafka_conf_new(repl_bs(r, alias), "test-raw",
                                                 r->errstr, sizeof(r->errstr));
        int64_t          lo, hi, last = -1;
        size_t           n = 0;

        assert_non_null(c);
        topic = repl_topic(r, topic);
        rd_kafka_conf_set_log_cb(c, quiet);
        assert_int_equal(aagw_kafka_conf_set(c, "group.id", "test-raw",
                                             r->errstr, sizeof(r->errstr)),
                         0);
        aagw_kafka_conf_set(c, "fetch.wait.max.ms", "10", r->errstr,
                            sizeof(r->errstr));
        rd_kafka_t *rk =
            rd_kafka_new(RD_KAFKA_CONSUMER, c, r->errstr, sizeof(r->errstr));
        assert_non_null(rk);
        assert_int_equal(rd_kafka_query_watermark_offsets(rk, topic, partition,
                                                          &lo, &hi, 10000),
                         0);
        rd_kafka_topic_partition_list_t *a =
            rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(a, topic, partition)->offset = lo;
        rd_kafka_assign(rk, a);
        rd_kafka_topic_partition_list_destroy(a);
        int64_t deadline = harness_now_ms() + OFS_TIMEOUT_MS;
        while (last < hi - 1 && harness_now_ms() < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
                if (!m)
                        continue;
                if (!m->err && m->offset < hi) {
                        fn(arg, m->key, m->key_len, m->payload, m->len,
                           m->offset);
                        n++;
                        last = m->offset;
                }
                rd_kafka_message_destroy(m);
        }
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
        if (last < hi - 1)
                fail_msg("%s [%d] at %s: read to %" PRId64 " of %" PRId64,
                         topic, (int)partition, alias, last + 1, hi);
        return n;
}

int ofs_aagw(struct repl *r, const char *const *words, harness_output_t *o) {
        const char *argv[128];
        size_t      a = 0;

        argv[a++] = harness_aagw_bin();
        for (size_t i = 0; words[i]; i++) {
                /* the group, scoped as in ofs_commit() */
                bool group = i > 0 && !strcmp(words[i - 1], "--group");

                argv[a++] = group ? repl_topic(r, words[i]) : words[i];
        }
        for (size_t i = 0; i < r->nsites; i++) {
                size_t n = harness_clusters_gw_args(
                    r->hc, r->sites[i], argv + a,
                    sizeof(argv) / sizeof(argv[0]) - a - 3);

                assert_true(n > 0);
                a += n;
        }
        /* the test gateway's id (see repl_gw_start()): the commands read
         * its replication position from its group aagw.<id>.<flow> */
        argv[a++] = "--gateway-id";
        argv[a++] = repl_gateway_id(r);
        argv[a]   = NULL;
        if (harness_run(argv, NULL, 0, OFS_TIMEOUT_MS, o, r->errstr,
                        sizeof(r->errstr)))
                fail_msg("aagw %s: %s", words[0], r->errstr);
        if (strstr(o->err, "runtime error:") ||
            strstr(o->err, "AddressSanitizer"))
                fail_msg("aagw %s: sanitizer report:\n%s", words[0], o->err);
        return harness_exit_code(o->status);
}

size_t ofs_copies(struct repl *r, int32_t partition, int64_t *src, size_t max) {
        struct rrecs rs;
        size_t       n = 0;

        repl_read(r, "west", "east.clicks", &rs);
        for (size_t i = 0; i < rs.cnt; i++) {
                struct rprov pv;
                if (rs.v[i].p != partition)
                        continue;
                assert_int_equal(rrec_prov(&rs.v[i], &pv), 1);
                const char *c = strrchr(pv.src, ':');
                assert_non_null(c);
                assert_true(n < max);
                assert_int_equal(rs.v[i].o, (int64_t)n); /* in order, dense */
                src[n++] = strtoll(c + 1, NULL, 10);
        }
        rrecs_deinit(&rs);
        return n;
}

int64_t ofs_expected(const int64_t *src, size_t n, int64_t c) {
        int64_t k = 0;
        for (size_t i = 0; i < n; i++)
                k += src[i] < c;
        return k;
}

void ofs_produce(struct repl *r, int32_t partition, const char *tag, int from,
                 int cnt, int kind) {
        const char *loop[] = {
            "aagw.prov=1;west>east;clicks:0:5;1714557600123:0;", NULL};
        const char *bad[] = {"aagw.prov=garbage", NULL};

        repl_produce(r, "east", "clicks", tag, from, cnt, 0,
                     kind == 1   ? loop
                     : kind == 2 ? bad
                                 : NULL,
                     partition);
}

struct pos_cond {
        struct repl *r;
        int32_t      partition;
        int64_t      want, last;
};

static bool pos_reached(void *arg) {
        struct pos_cond *c = arg;
        char group[200];

        /* The gateway's group: aagw.<gateway id>.<flow> (see repl.c). */
        snprintf(group, sizeof(group), "aagw.%s.east-west",
                 repl_gateway_id(c->r));
        c->last = ofs_committed(c->r, "east", group, "clicks", c->partition);
        return c->last >= c->want;
}

void ofs_wait_position(struct repl *r, int32_t partition, int64_t want) {
        struct pos_cond c = {r, partition, want, -1};
        if (!harness_wait_until(pos_reached, &c, OFS_TIMEOUT_MS)) {
                repl_dump_log(r, 40);
                fail_msg("gateway position of clicks [%d] is %" PRId64
                         ", expected %" PRId64,
                         (int)partition, c.last, want);
        }
}
