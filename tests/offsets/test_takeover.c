/* tests/offsets/test_takeover.c: aagw takes over remote topics another
 * replicator (MirrorMaker 2) filled, from their offset-syncs and tails.
 *
 * The test plays MM2: it copies east's clicks records (timestamp, key and
 * value unchanged, no provenance) into west's east.clicks and writes
 * MM2-format offset-syncs, then starts aagw with an empty state dir.
 *
 *   - partition 0: copies of source 0..39, newest sync (30, 30): the
 *     target's last record is found where the sync says; aagw resumes at
 *     40, every record once;
 *   - partition 1: copies of 0..19 and then a record that is not in the
 *     source, sync (10, 10): the search fails, aagw resumes after the sync
 *     (11) and says it copies again at most 10 records; it copies 11..19
 *     a second time (9 records), misses none;
 *   - partition 2: copies of 0..14 and no sync at all: counted from the
 *     source's log start, found, resumes at 15, every record once;
 *   - partition 3: copies of 0..9 and 11..19 (a record the offsets do
 *     not account for), sync (5, 5): the target's last record is not at
 *     the offset the sync gives but one further, where the search finds
 *     it; aagw resumes at 20 (source record 10 stays uncopied: that was
 *     the other replicator's doing).
 *
 * Real MM2 on real Kafka: tests/interop/test_mm2_takeover.c. */
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

#include "aagw_policy.h"
#include "ofs.h"

#define N 50

static void produce(struct repl *r, const char *alias, const char *topic,
                    int32_t p, const char *key, const char *val, size_t klen,
                    size_t vlen, int64_t ts) {
        rd_kafka_resp_err_t err = rd_kafka_producev(
            ofs_admin(r, alias), RD_KAFKA_V_TOPIC(topic),
            RD_KAFKA_V_PARTITION(p), RD_KAFKA_V_KEY(key, klen),
            RD_KAFKA_V_VALUE((void *)val, vlen), RD_KAFKA_V_TIMESTAMP(ts),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        assert_int_equal(err, 0);
}

/* MM2's copy of source record 'rec'. */
static void copy_as_mm2(struct repl *r, const struct rrec *rec) {
        produce(r, "west", repl_topic(r, "east.clicks"), rec->p, rec->key,
                rec->val, strlen(rec->key), strlen(rec->val), rec->ts);
}

static void sync_as_mm2(struct repl *r, int32_t p, int64_t up, int64_t down) {
        unsigned char k[512], v[64];
        size_t        kl = aagw_mm2_sync_key(repl_topic(r, "clicks"), p, k,
                                             sizeof(k));
        size_t        vl = aagw_mm2_sync_value(up, down, v, sizeof(v));
        produce(r, "east", "mm2-offset-syncs.west.internal", 0,
                (const char *)k, (const char *)v, kl, vl, 0);
}

static void test_takeover(void **state) {
        struct repl *r = ofs_scene();
        struct rrecs src, dst;
        const struct rrec *by[4][N];
        char         needle[512], *log;

        *state = r;
        for (int p = 0; p < 4; p++)
                repl_produce(r, "east", "clicks", "s", p * 1000, N, 10, NULL,
                             p);
        repl_read(r, "east", "clicks", &src);
        assert_int_equal(src.cnt, 4 * N);
        for (size_t i = 0; i < src.cnt; i++)
                by[src.v[i].p][src.v[i].o] = &src.v[i];
        /* MM2's work, and the newest sync of each partition. */
        for (int o = 0; o < 40; o++)
                copy_as_mm2(r, by[0][o]);
        for (int o = 0; o < 20; o++)
                copy_as_mm2(r, by[1][o]);
        produce(r, "west", repl_topic(r, "east.clicks"), 1, "k", "foreign",
                1, 7, 1714557600000);
        for (int o = 0; o < 15; o++)
                copy_as_mm2(r, by[2][o]);
        for (int o = 0; o < 20; o++)
                if (o != 10)
                        copy_as_mm2(r, by[3][o]);
        sync_as_mm2(r, 0, 20, 20);
        sync_as_mm2(r, 0, 30, 30);
        sync_as_mm2(r, 1, 10, 10);
        sync_as_mm2(r, 3, 5, 5);
        assert_int_equal(rd_kafka_flush(ofs_admin(r, "west"), 10000), 0);
        assert_int_equal(rd_kafka_flush(ofs_admin(r, "east"), 10000), 0);

        ofs_gw_start(r, NULL);
        /* 50 + (21 + 39) + 50 + (19 + 30) */
        repl_expect_size(r, "west", "east.clicks", 4 * N + 9, OFS_TIMEOUT_MS);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        repl_read(r, "west", "east.clicks", &dst);
        assert_int_equal(dst.cnt, 4 * N + 9);
        int seen[4][N] = {{0}}, foreign = 0;
        for (size_t i = 0; i < dst.cnt; i++) {
                const struct rrec *d = &dst.v[i];
                if (!strcmp(d->val, "foreign")) {
                        foreign++;
                        continue;
                }
                int idx = atoi(strchr(d->val, '-') + 1) - d->p * 1000;
                assert_true(idx >= 0 && idx < N);
                assert_string_equal(d->key, by[d->p][idx]->key);
                assert_int_equal(d->ts, by[d->p][idx]->ts);
                seen[d->p][idx]++;
        }
        assert_int_equal(foreign, 1);
        for (int p = 0; p < 4; p++)
                for (int o = 0; o < N; o++)
                        if (seen[p][o] != (p == 1 && o >= 11 && o < 20   ? 2
                                           : p == 3 && o == 10 ? 0
                                                               : 1))
                                fail_msg("partition %d: source record %d "
                                         "copied %d times",
                                         p, o, seen[p][o]);

        /* What the log tells an operator, one line per partition. */
        static const char *const says[4] = {
            "ends at offset 40, its newest offset-sync maps source 30 to "
            "target 30; the target's last record is source record 39 (as "
            "the offsets say); resuming at source offset 40",
            "ends at offset 21, its newest offset-sync maps source 10 to "
            "target 10, but the source record of the target's last one was "
            "not found; unless the target holds copies of this flow's, "
            "resuming at source offset 11, which copies again at most 10 "
            "records",
            "ends at offset 15, no offset-sync for it in "
            "mm2-offset-syncs.west.internal, so counting from the source's "
            "log start 0; the target's last record is source record 14 (as "
            "the offsets say); resuming at source offset 15",
            "ends at offset 19, its newest offset-sync maps source 5 to "
            "target 5; the target's last record is source record 19 (found "
            "past a gap in the source offsets); resuming at source offset "
            "20"};
        log = repl_log_text(r);
        for (int p = 0; p < 4; p++) {
                snprintf(needle, sizeof(needle),
                         "%s [%d]: taking over from another replicator "
                         "(MirrorMaker 2): %s [%d] at west %s",
                         repl_topic(r, "clicks"), p,
                         repl_topic(r, "east.clicks"), p, says[p]);
                if (!strstr(log, needle))
                        fail_msg("not in the log: %s", needle);
        }
        free(log);
        rrecs_deinit(&src);
        rrecs_deinit(&dst);
        ofs_done();
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_takeover, repl_setup,
                                            repl_teardown),
        };
        return cmocka_run_group_tests_name("offsets-takeover", tests, NULL,
                                           NULL);
}
