/*
 * tests/interop/test_mm2_to_aagw.c: aagw's offset commands on topics that
 * real MirrorMaker 2 replicates, on real Kafka.
 *
 * MM2 (dedicated mode, one JVM) replicates east's topic T to west's
 * east.T, whose partitions hold a few foreign records first (so target
 * offsets are not source offsets).  Group g committed at east: the end of
 * partition 0, the middle of 1, near the start of 2.  Once MM2 replicated
 * everything, wrote its last offset-syncs and its checkpoints of g stopped
 * changing:
 *
 *   - `aagw offsets translate --json` gives, per partition, the offset of
 *     RemoteClusterUtils.translateOffsets() (MM2's own translation, read
 *     from its checkpoints), says it comes from the checkpoint, and calls
 *     it exact exactly when it is the right answer (prefill + committed:
 *     MM2 translates at most one record past an offset-sync, so in the
 *     middle of a partition its answer re-reads records);
 *   - `aagw failover --dry-run` refuses the inexact ones without --force,
 *     prints the same offsets with it, and commits nothing at west;
 *   - MM2 writes the east->west heartbeats into west's own `heartbeats`
 *     (aagw's decoder reads them), not into east's, so `aagw drill`,
 *     which looks for them in east.heartbeats at west, fails at its
 *     heartbeat step (docs/operations.md says so).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "aagw_policy.h"
#include "aagw_replicator.h"
#include "interop.h"

#define NPART 3
#define NREC  250 /* past MM2's offset.lag.max (100): several syncs */

static struct io io;

static char    topic[128], remote[160];
static int64_t committed[NPART] = {NREC, NREC / 2 - 5, 3};
static int     prefill[NPART];

static int teardown(void **state) {
        (void)state;
        if (io.dir)
                io_end(&io);
        return 0;
}

static harness_proc_t *start_mm2(void) {
        return io_mm2(&io, topic, "groups=g\n"
                      "sync.group.offsets.enabled=false\n"
                      "refresh.groups.interval.seconds=1\n");
}

/* What MM2 has written so far. */
struct state {
        int64_t last_sync[NPART]; /* newest offset-sync's upstream */
        int64_t ck_up[NPART], ck_down[NPART];
        int64_t ck_end;           /* end offset of the checkpoints topic */
};

static void on_sync(void *arg, const rd_kafka_message_t *m) {
        struct state        *s = arg;
        struct aagw_mm2_sync y;
        if (aagw_mm2_sync_decode(m->key, m->key_len, m->payload, m->len, &y) &&
            !strcmp(y.topic, topic) && y.partition < NPART &&
            y.upstream > s->last_sync[y.partition])
                s->last_sync[y.partition] = y.upstream;
}

static void on_ck(void *arg, const rd_kafka_message_t *m) {
        struct state              *s = arg;
        struct aagw_mm2_checkpoint c;
        if (aagw_mm2_checkpoint_decode(m->key, m->key_len, m->payload, m->len,
                                       &c) &&
            !strcmp(c.group, "g") && !strcmp(c.topic, remote) &&
            c.partition < NPART) {
                s->ck_up[c.partition]   = c.upstream;
                s->ck_down[c.partition] = c.downstream;
        }
}

/* MM2 copied every record, synced the last one and checkpointed g's
 * committed offsets. */
static bool mm2_done(struct state *s) {
        memset(s, 0xff, sizeof(*s)); /* -1 everywhere */
        io_read(&io, "east", "mm2-offset-syncs.west.internal", 0, on_sync, s);
        io_read(&io, "west", "east.checkpoints.internal", 0, on_ck, s);
        s->ck_end = io_end_offset(&io, "west", "east.checkpoints.internal", 0);
        for (int p = 0; p < NPART; p++)
                if (io_end_offset(&io, "west", remote, p) != prefill[p] + NREC ||
                    s->last_sync[p] != NREC - 1 || s->ck_up[p] != committed[p])
                        return false;
        return true;
}

static void on_hb(void *arg, const rd_kafka_message_t *m) {
        int                      *n = arg;
        struct aagw_mm2_heartbeat hb;
        if (aagw_mm2_heartbeat_decode(m->key, m->key_len, m->payload, m->len,
                                      &hb) &&
            !strcmp(hb.source, "east") && !strcmp(hb.target, "west"))
                (*n)++;
}

static json_object *get(json_object *o, const char *k) {
        json_object *v = NULL;
        if (!json_object_object_get_ex(o, k, &v))
                fail_msg("no \"%s\" in %s", k, json_object_to_json_string(o));
        return v;
}

/* The TRANSLATED column of `aagw failover` for 'partition'. */
static int64_t failover_row(const char *out, int partition) {
        harness_lines_t l = {0};
        int64_t         t = -1;
        assert_int_equal(harness_lines_split(out, &l), 0);
        for (size_t i = 0; i < l.cnt; i++) {
                char    tp[200], rt[200];
                int     p;
                long long c, x;
                if (sscanf(l.v[i], "%199s %d %lld %199s %lld", tp, &p, &c,
                           rt, &x) == 5 &&
                    !strcmp(tp, topic) && p == partition) {
                        assert_string_equal(rt, remote);
                        assert_int_equal(c, committed[p]);
                        t = x;
                }
        }
        harness_lines_deinit(&l);
        return t;
}

static void test_aagw_reads_mm2(void **state) {
        struct state s;
        (void)state;

        io_begin(&io, "interop-m2a");
        char *name = harness_unique_name("t");
        snprintf(topic, sizeof(topic), "%s", name);
        snprintf(remote, sizeof(remote), "east.%s", name);
        free(name);
        io_topic(&io, "east", topic, NPART);
        io_topic(&io, "west", remote, NPART);
        for (int p = 0; p < NPART; p++) {
                prefill[p] = 2 + 3 * p;
                io_produce(&io, "west", remote, p, prefill[p], "foreign");
                io_produce(&io, "east", topic, p, NREC, "mm2");
                io_commit(&io, "east", "g", topic, p, committed[p]);
        }
        harness_proc_t *mm2_jvm = start_mm2();

        /* Wait until MM2 is done and its checkpoints of g stay put for 3 s
         * (its checkpoint task catches up with the last syncs). */
        int64_t deadline = harness_now_ms() + 150000, since = -1, end = -1;
        for (;;) {
                if (harness_now_ms() > deadline)
                        fail_msg("MirrorMaker 2 did not replicate %s and "
                                 "checkpoint group g in time (see mm2.log)",
                                 topic);
                if (harness_proc_wait(mm2_jvm, 0, NULL) == AAGW_OK)
                        fail_msg("MirrorMaker 2 exited (see mm2-jvm.log and "
                                 "mm2.log in %s)",
                                 io.dir);
                if (!mm2_done(&s))
                        since = -1;
                else if (since < 0 || s.ck_end != end) {
                        since = harness_now_ms();
                        end   = s.ck_end;
                } else if (harness_now_ms() - since >= 3000)
                        break;
                struct timespec ts = {0, 300 * 1000000L};
                nanosleep(&ts, NULL);
        }

        /* MM2's own translation. */
        const char *q[] = {"translate", io_gw_bs(&io, "west"), ".", "east", "g",
                           NULL};
        json_object *a    = io_mm2_query(&io, q, 1);
        json_object *offs = get(json_object_array_get_idx(a, 0), "offsets");
        int64_t      mm2[NPART] = {-1, -1, -1};
        assert_int_equal(json_object_array_length(offs), NPART);
        for (size_t i = 0; i < NPART; i++) {
                json_object *o = json_object_array_get_idx(offs, i);
                int          p = json_object_get_int(get(o, "partition"));
                assert_string_equal(json_object_get_string(get(o, "topic")),
                                    remote);
                assert_true(p >= 0 && p < NPART);
                mm2[p] = json_object_get_int64(get(o, "offset"));
                /* Its checkpoints are what the test read, and carry the
                 * commit's metadata (what aagw's checkpoints do too). */
                assert_int_equal(mm2[p], s.ck_down[p]);
                char meta[256];
                io_commit_metadata(meta, sizeof(meta), "g", p);
                assert_string_equal(json_object_get_string(get(o, "metadata")),
                                    meta);
        }

        /* aagw offsets translate. */
        harness_output_t o;
        const char *tw[] = {"offsets", "translate", "--group", "g", "--from",
                            "east",    "--to",      "west",    "--json", NULL};
        int         rc   = io_aagw(&io, tw, &o);
        io_show("aagw offsets translate", rc, &o, true);
        json_object *j = json_tokener_parse(o.out);
        assert_non_null(j);
        json_object *parts = get(j, "partitions");
        assert_int_equal(json_object_array_length(parts), NPART);
        int same = 0, exact = 0;
        for (size_t i = 0; i < NPART; i++) {
                json_object *r = json_object_array_get_idx(parts, i);
                int          p = json_object_get_int(get(r, "partition"));
                int64_t      t = json_object_get_int64(get(r, "translated"));
                bool         right = t == prefill[p] + committed[p];
                assert_string_equal(json_object_get_string(get(r, "target_topic")),
                                    remote);
                assert_int_equal(t, mm2[p]);
                same++;
                assert_string_equal(
                    json_object_get_string(get(r, "translated_by")),
                    "checkpoint");
                assert_int_equal(json_object_get_boolean(get(r, "exact")), right);
                /* MM2 never translates past the right answer. */
                assert_true(t <= prefill[p] + committed[p]);
                exact += right;
                print_message("# [%d] committed %lld: MM2 %lld, aagw %lld, "
                              "right %lld\n",
                              p, (long long)committed[p], (long long)mm2[p],
                              (long long)t,
                              (long long)(prefill[p] + committed[p]));
        }
        /* The end of a partition is exact: MM2 synced its last record. */
        assert_int_equal(mm2[0], prefill[0] + NREC);
        assert_int_equal(rc, exact == NPART ? 0 : 1);
        json_object_put(j);
        harness_output_deinit(&o);

        /* aagw failover --dry-run: refused while inexact, the same offsets
         * with --force, nothing committed. */
        const char *fw[] = {"failover", "--dry-run", "--group", "g", "--from",
                            "east",     "--to",      "west",    NULL, NULL};
        rc = io_aagw(&io, fw, &o);
        io_show("aagw failover --dry-run", rc, &o, true);
        for (int p = 0; p < NPART; p++)
                assert_int_equal(failover_row(o.out, p), mm2[p]);
        if (exact < NPART) {
                assert_int_equal(rc, 1);
                assert_non_null(strstr(o.err, "not exact"));
                assert_non_null(strstr(o.err, "MirrorMaker 2's checkpoint"));
                harness_output_deinit(&o);
                fw[8] = "--force";
                rc    = io_aagw(&io, fw, &o);
                io_show("--force", rc, &o, true);
                for (int p = 0; p < NPART; p++)
                        assert_int_equal(failover_row(o.out, p), mm2[p]);
        }
        assert_int_equal(rc, 0);
        assert_non_null(strstr(o.out, "dry run: nothing committed"));
        harness_output_deinit(&o);
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(NPART);
        for (int p = 0; p < NPART; p++)
                rd_kafka_topic_partition_list_add(l, remote, p);
        assert_int_equal(aagw_kafka_group_offsets(io.admin[1], "g", l, 10000,
                                                  io.errstr, sizeof(io.errstr)),
                         0);
        for (int p = 0; p < NPART; p++)
                assert_true(l->elems[p].offset < 0);
        rd_kafka_topic_partition_list_destroy(l);

        /* MM2's heartbeats east->west are at west, in "heartbeats". */
        int hb = 0;
        assert_true(io_read(&io, "west", "heartbeats", 0, on_hb, &hb) > 0);
        assert_true(hb > 0);
        const char *dw[] = {"drill", "--group", "g", "--from", "east",
                            "--to",  "west",    "--json", NULL};
        rc = io_aagw(&io, dw, &o);
        io_show("aagw drill", rc, &o, false);
        assert_int_equal(rc, 1);
        assert_non_null(strstr(o.out, "\"result\":\"failed\""));
        assert_non_null(strstr(o.out, "heartbeat"));
        assert_non_null(strstr(o.out, "\"committed\":false"));
        harness_output_deinit(&o);

        print_message("# %d partitions: aagw = RemoteClusterUtils, %d of them "
                      "exact\n",
                      same, exact);
        json_object_put(a);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_aagw_reads_mm2, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
