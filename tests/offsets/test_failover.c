/* tests/offsets/test_failover.c: `aagw failover` moves a consumer group
 * from east to west, and a consumer there continues with no loss and no
 * repeat.
 *
 * A real consumer in group g1 reads 25 of east's 50 records and commits.
 * failover without --force is refused (the embedded cluster cannot say
 * whether g1 has members at west: DescribeConsumerGroups is unsupported),
 * --dry-run commits nothing, --force commits the translated offsets.  A
 * consumer in g1 at west then reads exactly the other 25 (by value, and by
 * provenance origin offsets at or after the committed ones).  While it is
 * a member, another failover is refused by the broker. */
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
#include <time.h>

#include "aagw_policy.h"
#include "ofs.h"

#define TOTAL 50

static void quiet(const rd_kafka_t *rk, int level, const char *fac,
                  const char *buf) {
        (void)rk;
        (void)level;
        (void)fac;
        (void)buf;
}

static rd_kafka_t *group_consumer(struct repl *r, const char *alias,
                                  const char *topic) {
        rd_kafka_conf_t *c = aagw_kafka_conf_new(repl_bs(r, alias), "test-g1",
                                                 r->errstr, sizeof(r->errstr));
        const char      *kv[] = {"group.id",
                                 repl_topic(r, "g1"), /* scoped */
                                 "enable.auto.commit",
                                 "false",
                                 "auto.offset.reset",
                                 "earliest",
                                 "session.timeout.ms",
                                 "6000",
                                 "heartbeat.interval.ms",
                                 "500",
                                 "fetch.wait.max.ms",
                                 "10",
                                 NULL};
        assert_non_null(c);
        rd_kafka_conf_set_log_cb(c, quiet);
        for (size_t i = 0; kv[i]; i += 2)
                assert_int_equal(aagw_kafka_conf_set(c, kv[i], kv[i + 1],
                                                     r->errstr,
                                                     sizeof(r->errstr)),
                                 0);
        rd_kafka_t *rk =
            rd_kafka_new(RD_KAFKA_CONSUMER, c, r->errstr, sizeof(r->errstr));
        assert_non_null(rk);
        rd_kafka_poll_set_consumer(rk);
        rd_kafka_topic_partition_list_t *s =
            rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(s, repl_topic(r, topic),
                                          RD_KAFKA_PARTITION_UA);
        assert_int_equal(rd_kafka_subscribe(rk, s), 0);
        rd_kafka_topic_partition_list_destroy(s);
        return rk;
}

/* Values are "<tag>-NNNNNNN"; seen[] by value index over both tags. */
static int value_index(const rd_kafka_message_t *m) {
        char v[64];
        snprintf(v, sizeof(v), "%.*s", (int)m->len, (const char *)m->payload);
        int i = atoi(strchr(v, '-') + 1);
        return v[0] == 'a' ? i : 30 + i;
}

/* The origin offset in a copy's provenance "1;east>west;clicks:P:O;..." */
static int64_t origin_offset(const rd_kafka_message_t *m) {
        rd_kafka_headers_t *h;
        const void         *v;
        size_t              n;
        char                buf[256];

        assert_int_equal(rd_kafka_message_headers(m, &h), 0);
        assert_int_equal(rd_kafka_header_get_last(h, "aagw.prov", &v, &n), 0);
        snprintf(buf, sizeof(buf), "%.*s", (int)n, (const char *)v);
        char *semi             = strchr(strchr(buf, ';') + 1, ';');
        *strchr(semi + 1, ';') = '\0';
        return strtoll(strrchr(semi, ':') + 1, NULL, 10);
}

/* g1 at west continues after a failover that committed 'c0' and 'c1':
 * the other 25 records, each once ('seen' counts those read at east),
 * all from at or after the committed source offsets, and nothing more.
 * Returns the consumer, still a member of g1. */
static rd_kafka_t *consume_rest(struct repl *r, int *seen, int64_t c0,
                                int64_t c1) {
        rd_kafka_t *wc       = group_consumer(r, "west", "east.clicks");
        int         got      = 0;
        int64_t     deadline = harness_now_ms() + OFS_TIMEOUT_MS;
        while (got < TOTAL - 25 && harness_now_ms() < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(wc, 100);
                if (!m)
                        continue;
                if (!m->err) {
                        int64_t o0 = origin_offset(m);
                        assert_true(o0 >= (m->partition == 0 ? c0 : c1));
                        seen[value_index(m)]++;
                        got++;
                }
                rd_kafka_message_destroy(m);
        }
        /* ...and nothing more: the positions are at the ends. */
        {
                rd_kafka_topic_partition_list_t *a = NULL;
                assert_int_equal(rd_kafka_assignment(wc, &a), 0);
                assert_int_equal(rd_kafka_position(wc, a), 0);
                /* a partition it had nothing to read in has no position:
                 * then its committed offset is where it stands */
                rd_kafka_topic_partition_list_t *cm =
                    rd_kafka_topic_partition_list_copy(a);
                assert_int_equal(rd_kafka_committed(wc, cm, 10000), 0);
                for (int i = 0; i < a->cnt; i++)
                        if (a->elems[i].offset < 0)
                                a->elems[i].offset = cm->elems[i].offset;
                rd_kafka_topic_partition_list_destroy(cm);
                for (int i = 0; i < a->cnt; i++) {
                        int64_t lo, hi;
                        rd_kafka_query_watermark_offsets(wc, a->elems[i].topic,
                                                         a->elems[i].partition,
                                                         &lo, &hi, 10000);
                        if (hi > lo)
                                assert_int_equal(a->elems[i].offset, hi);
                }
                rd_kafka_topic_partition_list_destroy(a);
        }
        for (int i = 0; i < TOTAL; i++)
                if (seen[i] != 1)
                        fail_msg("record %d read %d times across the failover",
                                 i, seen[i]);
        return wc;

}

/* 50 records at east (30 in partition 0, 20 in 1) replicated to west by
 * a gateway that checkpoints g1 every second; g1 reads 25 of them at
 * east and commits ('seen' counts them): its offsets in 'c0', 'c1'. */
static void east_part(struct repl *r, int *seen, int64_t *c0, int64_t *c1) {
        repl_produce(r, "east", "clicks", "a", 0, 30, 0, NULL, 0);
        repl_produce(r, "east", "clicks", "b", 0, 20, 0, NULL, 1);
        ofs_gw_start(r, NULL);
        repl_expect_size(r, "west", "east.clicks", TOTAL, OFS_TIMEOUT_MS);
        ofs_wait_position(r, 0, 30);
        ofs_wait_position(r, 1, 20);

        rd_kafka_t *ec       = group_consumer(r, "east", "clicks");
        int64_t     deadline = harness_now_ms() + OFS_TIMEOUT_MS;
        for (int got = 0; got < 25 && harness_now_ms() < deadline;) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(ec, 100);
                if (!m)
                        continue;
                if (!m->err) {
                        seen[value_index(m)]++;
                        got++;
                }
                rd_kafka_message_destroy(m);
        }
        assert_int_equal(rd_kafka_commit(ec, NULL, 0), 0);
        rd_kafka_consumer_close(ec);
        rd_kafka_destroy(ec);
        *c0 = ofs_committed(r, "east", "g1", "clicks", 0);
        *c1 = ofs_committed(r, "east", "g1", "clicks", 1);
        if (*c0 < 0)
                *c0 = 0; /* read nothing there */
        if (*c1 < 0)
                *c1 = 0;
        assert_int_equal(*c0 + *c1, 25);
}

static void test_failover(void **state) {
        struct repl     *r           = ofs_scene();
        int              seen[TOTAL] = {0};
        int64_t          c0, c1;
        harness_output_t o;

        *state = r;
        east_part(r, seen, &c0, &c1);

        if (!repl_real(r)) {
                /* Refused: the embedded cluster cannot describe groups, so
                 * aagw cannot tell whether g1 has members. */
                const char *plain[] = {"failover", "--group", "g1",
                                       "--to",     "west",    NULL};
                char        want[300];

                assert_int_equal(ofs_aagw(r, plain, &o), 1);
                snprintf(want, sizeof(want),
                         "cannot tell whether group %s has active members "
                         "at west",
                         repl_topic(r, "g1"));
                assert_non_null(strstr(o.err, want));
                assert_non_null(strstr(o.err, "--force"));
                harness_output_deinit(&o);
        } else {
                /* A real cluster describes groups: g1 has no members at
                 * west, so no --force is needed (dry run: nothing is
                 * committed yet). */
                const char *plain[] = {"failover", "--group",   "g1", "--to",
                                       "west",     "--dry-run", NULL};

                if (ofs_aagw(r, plain, &o) != 0)
                        fail_msg("failover --dry-run without --force:\n%s%s",
                                 o.out, o.err);
                assert_non_null(strstr(o.out, "dry run"));
                harness_output_deinit(&o);
        }
        assert_int_equal(ofs_committed(r, "west", "g1", "east.clicks", 0), -1);

        /* Dry run: the plan, nothing committed. */
        const char *dry[] = {"failover", "--group",   "g1",      "--to",
                             "west",     "--dry-run", "--force", NULL};
        assert_int_equal(ofs_aagw(r, dry, &o), 0);
        assert_non_null(strstr(o.out, "dry run"));
        assert_non_null(strstr(o.out, repl_topic(r, "east.clicks")));
        harness_output_deinit(&o);
        assert_int_equal(ofs_committed(r, "west", "g1", "east.clicks", 0), -1);
        assert_int_equal(ofs_committed(r, "west", "g1", "east.clicks", 1), -1);

        /* Forced: committed, translated (no skips here: the same). */
        const char *forced[] = {"failover", "--group", "g1", "--to",
                                "west",     "--force", NULL};
        if (ofs_aagw(r, forced, &o) != 0)
                fail_msg("failover --force:\n%s%s", o.out, o.err);
        {
                char want[300];

                snprintf(want, sizeof(want), "committed group %s at west",
                         repl_topic(r, "g1"));
                assert_non_null(strstr(o.out, want));
        }
        harness_output_deinit(&o);
        if (c0)
                assert_int_equal(
                    ofs_committed(r, "west", "g1", "east.clicks", 0), c0);
        if (c1)
                assert_int_equal(
                    ofs_committed(r, "west", "g1", "east.clicks", 1), c1);

        rd_kafka_t *wc = consume_rest(r, seen, c0, c1);

        /* While g1 has a member at west, even --force is refused: the
         * broker will not take offsets for an active group. */
        assert_int_equal(ofs_aagw(r, forced, &o), 1);
        assert_non_null(strstr(o.err, "refused"));
        harness_output_deinit(&o);
        rd_kafka_consumer_close(wc);
        rd_kafka_destroy(wc);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        ofs_done();
}

/* ------------------------------------------------- SOURCE UNREACHABLE -- */

struct ck_want {
        const char *group, *remote;
        int64_t     up[2], down[2]; /* newest checkpoint per partition */
};

static void on_ck(void *arg, const void *key, size_t klen, const void *val,
                  size_t vlen, int64_t offset) {
        struct ck_want            *w = arg;
        struct aagw_mm2_checkpoint ck;
        (void)offset;
        if (aagw_mm2_checkpoint_decode(key, klen, val, vlen, &ck) &&
            !strcmp(ck.group, w->group) && !strcmp(ck.topic, w->remote) &&
            ck.partition >= 0 && ck.partition < 2) {
                w->up[ck.partition]   = ck.upstream;
                w->down[ck.partition] = ck.downstream;
        }
}

/* The source cluster down (every east broker, on the embedded clusters):
 * `aagw offsets translate` and `aagw failover` take group g1's newest
 * checkpoints at west, say so (target-only mode), refuse to commit
 * without --force (the group may have consumed past the checkpoint), and
 * with it commit the checkpoint offsets; a consumer at west then reads
 * the 25 records g1 had not read at east, each once. */
static void test_failover_source_down(void **state) {
        struct repl     *r           = ofs_scene();
        int              seen[TOTAL] = {0};
        int64_t          c0, c1;
        harness_output_t o;
        struct ck_want   w = {repl_topic(r, "g1"),
                              repl_topic(r, "east.clicks"),
                              {-1, -1},
                              {-1, -1}};

        *state = r;
        east_part(r, seen, &c0, &c1);
        /* g1 may have read nothing in one partition: no commit there, so
         * no checkpoint either (raw[p] -1). */
        int64_t raw[2] = {ofs_committed(r, "east", "g1", "clicks", 0),
                          ofs_committed(r, "east", "g1", "clicks", 1)};
        /* The gateway checkpoints g1's commit, then the disaster. */
        int64_t deadline = harness_now_ms() + OFS_TIMEOUT_MS;
        while ((raw[0] >= 0 && w.up[0] != raw[0]) ||
               (raw[1] >= 0 && w.up[1] != raw[1])) {
                if (harness_now_ms() > deadline)
                        fail_msg("no checkpoint of g1 at %" PRId64 "/%" PRId64
                                 " at west",
                                 raw[0], raw[1]);
                ofs_read_raw(r, "west", "east.checkpoints.internal", 0, on_ck,
                             &w);
                struct timespec nap = {0, 200 * 1000000L};
                nanosleep(&nap, NULL);
        }
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        rd_kafka_mock_cluster_t *mc =
            aagw_sandbox_mock(harness_clusters_sandbox(r->hc), "east");
        assert_non_null(mc);
        for (int b = 1; b <= 3; b++)
                assert_int_equal(rd_kafka_mock_broker_set_down(mc, b), 0);

        const char *tr[] = {"offsets", "translate", "--group", "g1",
                            "--from", "east", "--to", "west",
                            "--source-timeout", "2", "--json", NULL};
        int64_t t0 = harness_now_ms();
        assert_int_equal(ofs_aagw(r, tr, &o), 1); /* never exact */
        print_message("# translate, east down (%" PRId64 " ms): %s",
                      harness_now_ms() - t0, o.out);
        assert_non_null(strstr(o.out, "\"mode\":\"target-only\""));
        for (int p = 0; p < 2; p++) {
                char want[200];
                snprintf(want, sizeof(want), "\"partition\":%d,", p);
                if (raw[p] < 0) {
                        assert_null(strstr(o.out, want));
                        continue;
                }
                snprintf(want, sizeof(want),
                         "\"partition\":%d,\"committed\":%" PRId64, p,
                         raw[p]);
                assert_non_null(strstr(o.out, want));
                snprintf(want, sizeof(want),
                         "\"translated\":%" PRId64 ",\"exact\":false",
                         w.down[p]);
                assert_non_null(strstr(o.out, want));
        }
        harness_output_deinit(&o);

        const char *plain[] = {"failover", "--group", "g1", "--to", "west",
                               "--source-timeout", "2", NULL};
        assert_int_equal(ofs_aagw(r, plain, &o), 1);
        assert_non_null(strstr(o.out, "mode: target-only: east did not "
                                      "answer in 2 s"));
        assert_non_null(strstr(o.err, "east is unreachable"));
        assert_non_null(strstr(o.err, "--force"));
        harness_output_deinit(&o);
        assert_int_equal(ofs_committed(r, "west", "g1", "east.clicks", 0), -1);

        const char *forced[] = {"failover", "--group", "g1", "--to", "west",
                                "--source-timeout", "2", "--force", NULL};
        if (ofs_aagw(r, forced, &o) != 0)
                fail_msg("failover --force, east down:\n%s%s", o.out, o.err);
        assert_non_null(strstr(o.out, "mode: target-only"));
        harness_output_deinit(&o);
        for (int p = 0; p < 2; p++)
                if (raw[p] >= 0)
                        assert_int_equal(ofs_committed(r, "west", "g1",
                                                       "east.clicks", p),
                                         w.down[p]);
        rd_kafka_t *wc = consume_rest(r, seen, c0, c1);
        rd_kafka_consumer_close(wc);
        rd_kafka_destroy(wc);
        for (int b = 1; b <= 3; b++)
                rd_kafka_mock_broker_set_up(mc, b);
        ofs_done();
}

int main(void) {
        struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_failover, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_failover_source_down,
                                            repl_setup, repl_teardown),
        };
        static const char *const mock_only[] = {"test_failover_source_down",
                                                NULL};
        size_t n = repl_mock_only_tests(
            tests, sizeof(tests) / sizeof(tests[0]), mock_only,
            "takes every broker of east down; a shared real cluster serves "
            "other tests (tests/interop/test_mm2_takeover.c stops a real "
            "source cluster of its own)");
        if (!n)
                return 0;
        return _cmocka_run_group_tests("offsets-failover", tests, n, NULL,
                                       NULL);
}
