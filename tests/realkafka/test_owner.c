/*
 * tests/realkafka/test_owner.c: the work-ownership module
 * (replicator/owner.c) fences a stalled process on a real broker
 * (scale-out within a site), through the module's API.
 *
 * One cluster (east, one broker), topics work (2 partitions), out and
 * probe (1 each).  Owner A (session 6 s, max.poll 7 s) is given both work
 * partitions and commits a transaction that wrote "A1" to out.  Owner B
 * joins; A stops polling; B is given both once A is past its
 * max.poll.interval.ms, and commits "B1".  A wakes, still believing it
 * owns both, and writes "A2" in a transaction: its commit must come back
 * FENCED, with both partitions reported lost.  Read back, out holds A1
 * and B1 for read_committed readers and never A2; read_uncommitted shows
 * A2 was written (the zombie tried).  Then A rejoins and the group
 * splits the work, and a second producer with A's transactional.id makes
 * A's next commit FATAL; A renews its producer (the twin was no member
 * of the group), but not once a consumer with A's client id joined the
 * group (another process named A), and a new owner A is refused after
 * waiting for that member to leave.  The work topic holds records past the
 * committed offsets throughout: the owners' consumers fetch none.  And owner_txn_enforced() says a real broker
 * enforces transactions (the mock's answer: tests/replication/
 * test_owner_mock.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replicator_int.h"
#include "rk.h"

struct seen {
        int gained, lost;
};

static void on_gained(void *opaque,
                      const rd_kafka_topic_partition_list_t *parts) {
        ((struct seen *)opaque)->gained += parts->cnt;
}

static void on_lost(void *opaque, const rd_kafka_topic_partition_list_t *parts) {
        ((struct seen *)opaque)->lost += parts->cnt;
}

static const char *const quiet[] = {"log_level", "3"};

static struct owner *owner_try(const char *bs, const char *member,
                               int session_ms, struct seen *seen, char *err,
                               size_t errsize) {
        char              txn_id[64];
        struct owner_conf c = {.bootstraps           = bs,
                               .props                = quiet,
                               .prop_cnt             = 1,
                               .group                = "owners",
                               .topic                = "work",
                               .member               = member,
                               .transactional_id     = txn_id,
                               .session_timeout_ms   = session_ms,
                               .max_poll_interval_ms = session_ms + 1000,
                               .txn_timeout_ms       = 10000,
                               .on_gained            = on_gained,
                               .on_lost              = on_lost,
                               .opaque               = seen};

        snprintf(txn_id, sizeof(txn_id), "aagw.test.%s", member);
        return owner_new(&c, err, errsize);
}

static struct owner *owner(const char *bs, const char *member,
                           struct seen *seen) {
        char          err[512];
        struct owner *o = owner_try(bs, member, 6000, seen, err, sizeof(err));
        if (!o)
                fail_msg("owner_new(%s): %s", member, err);
        return o;
}

/* The members view (replicator/members.c) of group "owners", every
 * 300 ms. */
static aagw_members_t *owners_view(const char *bs) {
        static const char *const groups[] = {"owners"};
        static const char *const stages[] = {"test"};
        struct aagw_members_conf mc       = {.bootstraps  = bs,
                                             .props       = quiet,
                                             .prop_cnt    = 1,
                                             .groups      = groups,
                                             .stages      = stages,
                                             .n           = 1,
                                             .interval_ms = 300};
        char                     err[512];
        aagw_members_t          *ms = aagw_members_new(&mc, err, sizeof(err));

        if (!ms)
                fail_msg("members view: %s", err);
        return ms;
}

/* Poll 'o' until it owns 'want' work partitions; returns the ms it took. */
static int64_t wait_owns(struct owner *o, const char *who, int want,
                         int timeout_ms) {
        char    err[512];
        int64_t t0 = harness_now_ms();

        while (owner_partitions(o)->cnt != want) {
                if (harness_now_ms() - t0 > timeout_ms)
                        fail_msg("%s owns %d work partitions after %d ms, "
                                 "want %d",
                                 who, owner_partitions(o)->cnt, timeout_ms,
                                 want);
                if (owner_poll(o, 100, err, sizeof(err)))
                        fail_msg("owner_poll(%s): %s", who, err);
        }
        return harness_now_ms() - t0;
}

/* One transaction of 'o': 'val' to out, work [0] and [1] (those listed
 * in 'parts', -1 ends) at 'offset'. */
static owner_result_t txn(struct owner *o, const char *val,
                          const int32_t *parts, int64_t offset, char *err,
                          size_t err_size) {
        owner_result_t rc = owner_begin(o, err, err_size);

        if (rc)
                return rc;
        assert_int_equal(
            rd_kafka_producev(owner_producer(o), RD_KAFKA_V_TOPIC("out"),
                              RD_KAFKA_V_PARTITION(0),
                              RD_KAFKA_V_VALUE((void *)val, strlen(val)),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_END),
            RD_KAFKA_RESP_ERR_NO_ERROR);
        rd_kafka_topic_partition_list_t *offs =
            rd_kafka_topic_partition_list_new(2);
        for (int i = 0; parts[i] >= 0; i++)
                rd_kafka_topic_partition_list_add(offs, "work", parts[i])
                    ->offset = offset;
        rc = owner_commit(o, offs, err, err_size);
        rd_kafka_topic_partition_list_destroy(offs);
        return rc;
}

/* Read out [0] from the beginning with 'isolation' until the end of the
 * partition is at 'min_end' or later (a read_committed reader's end is
 * the last stable offset: it must get past the zombie's records), the
 * values into 'vals'.  Returns the end offset. */
static int64_t read_out(const char *bs, const char *isolation,
                        int64_t min_end, struct rk_bag *vals) {
        char             err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        const char      *kv[] = {"bootstrap.servers", bs,
                                 "group.id", "test-owner-reader",
                                 "enable.partition.eof", "true",
                                 "isolation.level", isolation,
                                 "log_level", "3",
                                 NULL};
        int64_t          end = -1, t0 = harness_now_ms();

        for (size_t i = 0; kv[i]; i += 2)
                assert_int_equal(
                    rd_kafka_conf_set(conf, kv[i], kv[i + 1], err, sizeof(err)),
                    RD_KAFKA_CONF_OK);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
        assert_non_null(rk);
        rd_kafka_topic_partition_list_t *a = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(a, "out", 0)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
        assert_int_equal(rd_kafka_assign(rk, a), 0);
        rd_kafka_topic_partition_list_destroy(a);
        while (end < 0 && harness_now_ms() - t0 < 20000) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
                if (!m)
                        continue;
                if (!m->err) {
                        char v[64];
                        snprintf(v, sizeof(v), "%.*s", (int)m->len,
                                 (const char *)m->payload);
                        rk_bag_add(vals, v);
                        print_message("#   %s: %s at offset %" PRId64 "\n",
                                      isolation, v, m->offset);
                } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                        if (m->offset >= min_end)
                                end = m->offset;
                } else
                        print_message("#   %s: %s\n", isolation,
                                      rd_kafka_message_errstr(m));
                rd_kafka_message_destroy(m);
        }
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
        if (end < 0)
                fail_msg("a %s reader of out [0] did not reach offset "
                         "%" PRId64 " within 20 s",
                         isolation, min_end);
        return end;
}

/* Polls 'c' (if any), 'a' and 'b' until the coordinator lists 'n'
 * members of the owners' group, Stable; fails after 30 s.  Returns the
 * group as described then (the caller frees it). */
static struct aagw_group_info *wait_members(const char *bs, size_t n,
                                            rd_kafka_t *c, struct owner *a,
                                            struct owner *b,
                                            const char *what) {
        char                    err[512];
        aagw_members_t         *ms = owners_view(bs);
        struct aagw_group_info *g  = calloc(1, sizeof(*g));
        int64_t                 t0 = harness_now_ms();

        assert_non_null(ms);
        assert_non_null(g);
        for (;;) {
                assert_int_equal(aagw_members_get(ms, g, 1), 1);
                if (!g->error[0] && g->n == n && !strcmp(g->state, "Stable"))
                        break;
                if (harness_now_ms() - t0 > 30000)
                        fail_msg("%s: the group has %zu members (%s), not "
                                 "%zu; error \"%s\"",
                                 what, g->n, g->state, n, g->error);
                rd_kafka_message_t *m = c ? rd_kafka_consumer_poll(c, 50)
                                          : NULL;
                if (m)
                        rd_kafka_message_destroy(m);
                assert_int_equal(
                    owner_poll(a, c ? 0 : 50, err, sizeof(err)), 0);
                assert_int_equal(owner_poll(b, 0, err, sizeof(err)), 0);
        }
        aagw_members_destroy(ms);
        return g;
}

/* A plain consumer in the owners' group with client id 'cid', once the
 * coordinator lists it next to owners 'a' and 'b'. */
static rd_kafka_t *join_as(const char *bs, const char *cid, struct owner *a,
                           struct owner *b) {
        char             err[512];
        rd_kafka_conf_t *dc   = rd_kafka_conf_new();
        const char      *kv[] = {"bootstrap.servers", bs,
                                 "group.id", "owners",
                                 "client.id", cid,
                                 "partition.assignment.strategy", "roundrobin",
                                 "session.timeout.ms", "6000",
                                 "log_level", "3", NULL};

        for (size_t i = 0; kv[i]; i += 2)
                assert_int_equal(
                    rd_kafka_conf_set(dc, kv[i], kv[i + 1], err, sizeof(err)),
                    RD_KAFKA_CONF_OK);
        rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, dc, err, sizeof(err));
        assert_non_null(c);
        rd_kafka_poll_set_consumer(c);
        rd_kafka_topic_partition_list_t *sub =
            rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(sub, "work", RD_KAFKA_PARTITION_UA);
        assert_int_equal(rd_kafka_subscribe(c, sub), 0);
        rd_kafka_topic_partition_list_destroy(sub);
        free(wait_members(bs, 3, c, a, b, cid));
        return c;
}

/* 'c' leaves the group; returns once the coordinator lists 'a' and 'b'
 * alone again. */
static void leave(const char *bs, rd_kafka_t *c, struct owner *a,
                  struct owner *b) {
        rd_kafka_consumer_close(c);
        rd_kafka_destroy(c);
        free(wait_members(bs, 2, NULL, a, b, "after the leave"));
}

static void test_owner(void **state) {
        struct rk *r = rk_new("rk-owner");
        char       err[1024] = "";

        *state = r;
        static const char *const small[] = {
            "offsets.topic.num.partitions=4",
            "transaction.state.log.num.partitions=4", NULL};
        rk_cluster_start_with(r, "east", 1, small);
        rk_create_topic(r, "east", "work", 2, 1, 0);
        rk_create_topic(r, "east", "out", 1, 1, 0);
        rk_create_topic(r, "east", "probe", 1, 1, 0);
        /* Records in the work topic past the offsets the owners commit:
         * the membership consumers must not fetch them. */
        rk_produce(r, "east", "work", 2, "w", 10);
        const char *bs = rk_bs(r, "east");
        print_message("# cluster up at %.1f s\n", rk_elapsed(r));

        int64_t t0 = harness_now_ms();
        int     enforced =
            owner_txn_enforced(bs, quiet, 1, "probe", err, sizeof(err));
        print_message("# owner_txn_enforced: %d (%s) in %" PRId64 " ms\n",
                      enforced, err, harness_now_ms() - t0);
        assert_int_equal(enforced, 1);

        static const int32_t both[] = {0, 1, -1};
        struct seen          sa = {0, 0}, sb = {0, 0};
        struct owner        *a = owner(bs, "A", &sa);
        print_message("# A owns both work partitions after %" PRId64 " ms\n",
                      wait_owns(a, "A", 2, 30000));
        assert_true(owner_owned(a, 0) && owner_owned(a, 1));
        assert_int_equal(sa.gained, 2);
        owner_result_t rc = txn(a, "A1", both, 1, err, sizeof(err));
        if (rc)
                fail_msg("A's first transaction: %d: %s", rc, err);

        /* B joins; A stops polling and loses everything once it is past
         * its max.poll.interval.ms. */
        struct owner *b = owner(bs, "B", &sb);
        print_message("# B owns both work partitions after %" PRId64 " ms "
                      "(A not polling; its max.poll.interval.ms is 7 s)\n",
                      wait_owns(b, "B", 2, 40000));
        rc = txn(b, "B1", both, 2, err, sizeof(err));
        if (rc)
                fail_msg("B's transaction: %d: %s", rc, err);

        /* A wakes without polling, believing it owns both. */
        assert_true(owner_owned(a, 0) && owner_owned(a, 1));
        rc = txn(a, "A2", both, 3, err, sizeof(err));
        print_message("# A's commit after waking: %d: %s\n", rc, err);
        assert_int_equal(rc, AAGW_OWNER_FENCED);
        assert_true(strstr(err, "Unknown member") ||
                    strstr(err, "Illegal generation"));
        assert_non_null(strstr(err, "group owners has moved on without "
                                    "this member"));
        assert_int_equal(sa.lost, 2);
        assert_false(owner_owned(a, 0) || owner_owned(a, 1));
        assert_int_equal(owner_partitions(a)->cnt, 0);

        /* What a reader sees: the zombie's record is never visible to
         * a reader of committed data.  Whether it reached the log at all
         * depends on timing: librdkafka 2.8.0 aborts the transaction
         * once the commit of its offsets is refused, and purges a record
         * still waiting in its queue (linger.ms) instead of sending it;
         * if it was sent, only read_uncommitted shows it. */
        struct rk_bag *unc = rk_bag_new(), *com = rk_bag_new();
        int64_t        end = read_out(bs, "read_uncommitted", 1, unc);
        assert_true(rk_bag_count(unc, "A2") <= 1);
        print_message("# the zombie's record %s the log\n",
                      rk_bag_count(unc, "A2") ? "reached" : "never reached");
        read_out(bs, "read_committed", end, com);
        assert_int_equal(rk_bag_count(com, "A1"), 1);
        assert_int_equal(rk_bag_count(com, "B1"), 1);
        assert_int_equal(rk_bag_count(com, "A2"), 0);
        assert_int_equal(rk_bag_total(com), 2);
        print_message("# out: read_committed A1 B1 (%" PRId64 " records), "
                      "read_uncommitted %" PRId64 " records with A2, end "
                      "%" PRId64 "\n",
                      rk_bag_total(com), rk_bag_total(unc), end);
        rk_bag_destroy(unc);
        rk_bag_destroy(com);

        /* A polls again: it rejoins and the group splits the work (B
         * must poll too: with the eager protocol it gives both up and
         * takes one back). */
        t0 = harness_now_ms();
        while (owner_partitions(a)->cnt != 1 || owner_partitions(b)->cnt != 1) {
                if (harness_now_ms() - t0 > 30000)
                        fail_msg("after A rejoined, A owns %d and B %d "
                                 "work partitions, want 1 each",
                                 owner_partitions(a)->cnt,
                                 owner_partitions(b)->cnt);
                assert_int_equal(owner_poll(a, 50, err, sizeof(err)), 0);
                assert_int_equal(owner_poll(b, 50, err, sizeof(err)), 0);
        }
        int32_t mine[] = {owner_partitions(a)->elems[0].partition, -1};
        print_message("# A rejoined: A owns [%" PRId32 "], B owns "
                      "[%" PRId32 "] after %" PRId64 " ms\n",
                      mine[0], owner_partitions(b)->elems[0].partition,
                      harness_now_ms() - t0);
        rc = txn(a, "A3", mine, 4, err, sizeof(err));
        if (rc)
                fail_msg("A's transaction after rejoining: %d: %s", rc, err);

        /* The members view (/status, /metrics) describes the group as
         * its coordinator sees it: A and B, one work partition each. */
        {
                int64_t                 t1 = harness_now_ms();
                struct aagw_group_info *g =
                    wait_members(bs, 2, NULL, a, b, "members view");
                const struct aagw_member_info *ma =
                    !strcmp(g->m[0].member, "A") ? &g->m[0] : &g->m[1];
                const struct aagw_member_info *mb = ma == &g->m[0] ? &g->m[1]
                                                                   : &g->m[0];
                assert_string_equal(ma->member, "A");
                assert_string_equal(mb->member, "B");
                assert_string_equal(ma->instance, owner_instance(a));
                assert_string_equal(mb->instance, owner_instance(b));
                assert_string_not_equal(ma->instance, mb->instance);
                assert_int_equal(ma->nparts, 1);
                assert_int_equal(mb->nparts, 1);
                assert_int_equal(ma->parts[0], mine[0]);
                assert_int_equal(mb->parts[0],
                                 owner_partitions(b)->elems[0].partition);
                assert_string_equal(g->stage, "test");
                print_message("# members view: %s %s [%d] and %s [%d] "
                              "after %" PRId64 " ms\n",
                              g->state, ma->member, (int)ma->parts[0],
                              mb->member, (int)mb->parts[0],
                              harness_now_ms() - t1);
                free(g);
        }

        /* Another producer initialises A's transactional.id: A's
         * producer is fenced for good. */
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers", bs, err,
                                           sizeof(err)),
                         RD_KAFKA_CONF_OK);
        assert_int_equal(rd_kafka_conf_set(conf, "transactional.id",
                                           "aagw.test.A", err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_t *twin = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err,
                                        sizeof(err));
        assert_non_null(twin);
        rd_kafka_error_t *e = rd_kafka_init_transactions(twin, 30000);
        if (e)
                fail_msg("init_transactions of A's twin: %s",
                         rd_kafka_error_string(e));
        rc = txn(a, "A4", mine, 5, err, sizeof(err));
        print_message("# A's commit after a twin took its transactional.id: "
                      "%d: %s\n",
                      rc, err);
        assert_int_equal(rc, AAGW_OWNER_FATAL);
        assert_non_null(strstr(err, "fatal producer error"));
        assert_non_null(strstr(err, "another process initialised "
                                    "transactions with this "
                                    "transactional.id"));
        rd_kafka_destroy(twin);

        /* The twin was no member of the group: A may make a new
         * producer (what a zombie fenced by its coordinator does). */
        rc = owner_renew(a, err, sizeof(err));
        if (rc)
                fail_msg("A's renewal after the twin: %d: %s", rc, err);

        /* A's own membership under a member id A's consumer does not
         * report (what the group lists while a consumer it dropped
         * after a pause rejoins): the same instance, so A renews. */
        {
                char cid[128];
                snprintf(cid, sizeof(cid), "aagw-A-owner~%s",
                         owner_instance(a));
                rd_kafka_t *self = join_as(bs, cid, a, b);
                rc               = owner_renew(a, err, sizeof(err));
                if (rc)
                        fail_msg("A's renewal beside its own instance under "
                                 "another member id: %d: %s",
                                 rc, err);
                print_message("# A renews beside its own instance (%s) "
                              "under another member id\n",
                              owner_instance(a));
                leave(bs, self, a, b);
        }

        /* Another process named A joins the group (a consumer with the
         * client id an owner A of an earlier version has, no instance):
         * A may not renew, and a new owner A is refused once the other
         * did not leave within its session (2 s) plus 5 s. */
        {
                rd_kafka_t *dup = join_as(bs, "aagw-A-owner", a, b);
                rc              = owner_renew(a, err, sizeof(err));
                print_message("# A's renewal with a second A in the group: "
                              "%d: %s\n",
                              rc, err);
                assert_int_equal(rc, AAGW_OWNER_FATAL);
                assert_non_null(strstr(err, "member name A is taken"));
                struct seen   sc = {0, 0};
                t0               = harness_now_ms();
                struct owner *c2 =
                    owner_try(bs, "A", 2000, &sc, err, sizeof(err));
                int64_t waited = harness_now_ms() - t0;
                print_message("# a new owner A refused after %" PRId64
                              " ms: %s\n",
                              waited, err);
                assert_null(c2);
                assert_non_null(strstr(err, "member name A is taken"));
                assert_true(waited >= 7000);
                rd_kafka_consumer_close(dup);
                rd_kafka_destroy(dup);
        }

        /* Both consumers were given work partitions with committed
         * offsets (1..4) below the end (5): nothing was fetched. */
        assert_int_equal(owner_dropped(a), 0);
        assert_int_equal(owner_dropped(b), 0);

        t0 = harness_now_ms();
        owner_destroy(a);
        owner_destroy(b);
        print_message("# both owners closed in %" PRId64 " ms; wall %.1f s\n",
                      harness_now_ms() - t0, rk_elapsed(r));
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_owner, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
