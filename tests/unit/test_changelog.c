/*
 * tests/unit/test_changelog.c: the records of the scale-out unify
 * changelog (replicator/changelog.c, format in replicator_int.h): each
 * kind survives encode -> decode field for field, and what is not a
 * record of this version, or is cut short, is refused rather than
 * misread (a restore skips it).  And the ids topic's settings: what
 * unify.window makes of them, and how an existing topic's settings are
 * judged (too short a retention, or a size limit, loses ids inside the
 * window; longer ones only cost restore time).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "replicator_int.h"

static void roundtrip(const struct changelog_rec *in,
                      struct changelog_rec *out) {
        uint8_t key[CHANGELOG_KEY_MAX], val[CHANGELOG_VAL_MAX];
        size_t  klen, vlen;

        changelog_encode(in, key, &klen, val, &vlen);
        memset(out, 0x5a, sizeof(*out)); /* nothing left from before */
        assert_true(changelog_decode(key, klen, val, vlen, out));
        assert_int_equal(out->kind, in->kind);
        /* Every strict prefix of the value is refused: nothing is read
         * past what the record holds. */
        for (size_t n = 0; n < vlen; n++) {
                struct changelog_rec cut;
                bool ok = changelog_decode(key, klen, val, n, &cut);
                /* A winner's id and an id's topic may be empty, so the
                 * prefix that drops only them decodes (to less). */
                if (ok)
                        assert_true(in->kind != CHANGELOG_POS &&
                                    in->kind != CHANGELOG_RPOS);
        }
}

static void test_id(void **state) {
        struct changelog_rec c, d;
        (void)state;
        memset(&c, 0, sizeof(c));
        c.kind = CHANGELOG_ID;
        for (int i = 0; i < 16; i++)
                c.key[i] = (uint8_t)(i * 17);
        c.hlc       = 0x0123456789abcdefULL;
        c.time_ms   = 1764662400123;
        c.partition = 7;
        c.offset    = 123456789012;
        snprintf(c.origin, sizeof(c.origin), "east");
        snprintf(c.topic, sizeof(c.topic), "east.clicks");
        roundtrip(&c, &d);
        assert_memory_equal(d.key, c.key, 16);
        assert_true(d.hlc == c.hlc);
        assert_true(d.time_ms == c.time_ms);
        assert_int_equal(d.partition, 7);
        assert_true(d.offset == c.offset);
        assert_string_equal(d.origin, "east");
        assert_string_equal(d.topic, "east.clicks");
        assert_int_equal(d.id_len, 0);
        assert_false(d.tombstone);
}

static void test_winner(void **state) {
        struct changelog_rec c, d;
        (void)state;
        memset(&c, 0, sizeof(c));
        c.kind = CHANGELOG_WIN;
        memset(c.key, 0xee, 16);
        c.hlc       = 42;
        c.time_ms   = 5;
        c.tombstone = true;
        snprintf(c.origin, sizeof(c.origin), "west");
        c.id_len = (size_t)snprintf(c.id, sizeof(c.id), "west:profiles:0:9");
        roundtrip(&c, &d);
        assert_memory_equal(d.key, c.key, 16);
        assert_true(d.hlc == 42);
        assert_true(d.tombstone);
        assert_string_equal(d.origin, "west");
        assert_int_equal(d.id_len, c.id_len);
        assert_string_equal(d.id, c.id);
}

static void test_pos(void **state) {
        struct changelog_rec c, d;
        (void)state;
        memset(&c, 0, sizeof(c));
        c.kind      = CHANGELOG_POS;
        c.partition = 11;
        c.offset    = 9876543210;
        snprintf(c.topic, sizeof(c.topic), "clicks");
        roundtrip(&c, &d);
        assert_int_equal(d.partition, 11);
        assert_true(d.offset == c.offset);
        assert_string_equal(d.topic, "clicks");
}

/* A router's position: the position's layout under its own kind, so
 * that no restore takes it for a decision's. */
static void test_rpos(void **state) {
        struct changelog_rec c, d;
        uint8_t              k1[CHANGELOG_KEY_MAX], v1[CHANGELOG_VAL_MAX],
            k2[CHANGELOG_KEY_MAX], v2[CHANGELOG_VAL_MAX];
        size_t kl1, vl1, kl2, vl2;
        (void)state;
        memset(&c, 0, sizeof(c));
        c.kind      = CHANGELOG_RPOS;
        c.partition = 3;
        c.offset    = 77;
        snprintf(c.topic, sizeof(c.topic), "east.clicks");
        roundtrip(&c, &d);
        assert_int_equal(d.kind, CHANGELOG_RPOS);
        assert_int_equal(d.partition, 3);
        assert_true(d.offset == 77);
        assert_string_equal(d.topic, "east.clicks");
        /* Another key than the decision position of the same input
         * partition: compaction keeps both. */
        changelog_encode(&c, k1, &kl1, v1, &vl1);
        c.kind = CHANGELOG_POS;
        changelog_encode(&c, k2, &kl2, v2, &vl2);
        assert_int_equal(kl1, kl2);
        assert_true(memcmp(k1, k2, kl1) != 0);
}

static void test_refused(void **state) {
        struct changelog_rec d;
        uint8_t              val[16] = {0};
        (void)state;
        /* Another version, an unknown kind, a short key, no value. */
        uint8_t v2[18] = {2, 'i'}, kx[18] = {1, 'x'}, k1[2] = {1, 'i'};
        assert_false(changelog_decode(v2, sizeof(v2), val, sizeof(val), &d));
        assert_false(changelog_decode(kx, sizeof(kx), val, sizeof(val), &d));
        assert_false(changelog_decode(k1, sizeof(k1), val, sizeof(val), &d));
        uint8_t ki[18] = {1, 'i'};
        assert_false(changelog_decode(ki, sizeof(ki), NULL, 0, &d));
        /* An origin length past the value's end. */
        uint8_t bad[16 + 13] = {0};
        bad[16 + 12]         = 200;
        assert_false(changelog_decode(ki, sizeof(ki), bad, sizeof(bad), &d));
}

/* ------------------------------------------------------ IDS SETTINGS --- */

static void test_ids_conf(void **state) {
        struct changelog_ids_conf c;
        (void)state;
        /* A day: a tenth of it as the margin, segments of an eighth. */
        changelog_ids_conf(24 * 3600 * 1000LL, &c);
        assert_true(c.retention_ms == 24 * 3600 * 1000LL + 8640000);
        assert_true(c.segment_ms == 3 * 3600 * 1000LL);
        /* Ten minutes: the margin's minute is more than a tenth. */
        changelog_ids_conf(600000, &c);
        assert_true(c.retention_ms == 660000);
        assert_true(c.segment_ms == 75000);
        /* Under a minute: the window itself is the margin; segments
         * still a minute at least. */
        changelog_ids_conf(20000, &c);
        assert_true(c.retention_ms == 40000);
        assert_true(c.segment_ms == 60000);
        /* The smallest window the configuration takes (1 s). */
        changelog_ids_conf(1000, &c);
        assert_true(c.retention_ms == 2000);
        assert_true(c.segment_ms == 60000);
        /* Never below the window: nothing inside it is removed. */
        for (int64_t w = 1000; w < 400LL * 24 * 3600 * 1000; w = w * 3 + 7) {
                changelog_ids_conf(w, &c);
                assert_true(c.retention_ms > w);
                assert_true(c.segment_ms >= 60000);
        }
}

static void test_ids_check(void **state) {
        struct changelog_ids_conf c = {.retention_ms = 40000,
                                       .segment_ms   = 60000};
        static const struct {
                const char           *policy, *retention, *bytes, *segment;
                changelog_ids_state_t want;
        } cases[] = {
            {"delete", "40000", "-1", "60000", CHANGELOG_IDS_AS_WANTED},
            /* Kept longer than needed: set again, no id lost meanwhile. */
            {"delete", "80000", "-1", "60000", CHANGELOG_IDS_DIFFERS},
            {"delete", "-1", "-1", "60000", CHANGELOG_IDS_DIFFERS},
            {"delete", "40000", "-1", "604800000", CHANGELOG_IDS_DIFFERS},
            {"compact", "40000", "-1", "60000", CHANGELOG_IDS_DIFFERS},
            {"compact,delete", "40000", "-1", "60000",
             CHANGELOG_IDS_DIFFERS},
            /* A compacted topic never removes an id, whatever its
             * retention. */
            {"compact", "1000", "10", "60000", CHANGELOG_IDS_DIFFERS},
            /* Removed while still inside the window: unsafe. */
            {"delete", "39999", "-1", "60000", CHANGELOG_IDS_UNSAFE},
            {"compact, delete", "1000", "-1", "60000", CHANGELOG_IDS_UNSAFE},
            {"delete", "40000", "1073741824", "60000", CHANGELOG_IDS_UNSAFE},
            /* Not told, or not a number: set them. */
            {NULL, NULL, NULL, NULL, CHANGELOG_IDS_DIFFERS},
            {"delete", "40000", NULL, "60000", CHANGELOG_IDS_DIFFERS},
            {"delete", "4e4", "-1", "60000", CHANGELOG_IDS_DIFFERS},
            {"delete", "40000x", "-1", "60000", CHANGELOG_IDS_DIFFERS},
            /* "delete" as a word of the list, not a part of one. */
            {"nodelete", "1", "-1", "60000", CHANGELOG_IDS_DIFFERS},
        };
        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                changelog_ids_state_t got = changelog_ids_check(
                    &c, cases[i].policy, cases[i].retention, cases[i].bytes,
                    cases[i].segment);
                if (got != cases[i].want)
                        fail_msg("case %zu (%s, %s, %s, %s): %d, not %d", i,
                                 cases[i].policy ? cases[i].policy : "NULL",
                                 cases[i].retention ? cases[i].retention
                                                    : "NULL",
                                 cases[i].bytes ? cases[i].bytes : "NULL",
                                 cases[i].segment ? cases[i].segment : "NULL",
                                 (int)got, (int)cases[i].want);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_id),        cmocka_unit_test(test_winner),
            cmocka_unit_test(test_pos),       cmocka_unit_test(test_rpos),
            cmocka_unit_test(test_refused),   cmocka_unit_test(test_ids_conf),
            cmocka_unit_test(test_ids_check),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
