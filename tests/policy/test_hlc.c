/* tests/policy/test_hlc.c: the hybrid logical clock. */
#include <inttypes.h>

#include "policy_test.h"

#define H(ms, c) aagw_hlc_make((ms), (c))

static void test_pack(void **state) {
        (void)state;
        assert_true(H(1714557600123, 7) ==
                    ((UINT64_C(1714557600123) << 16) | 7));
        assert_int_equal(aagw_hlc_ms(H(1714557600123, 7)), 1714557600123);
        assert_int_equal(aagw_hlc_counter(H(1714557600123, 7)), 7);
        /* clamped, not wrapped */
        assert_true(H(-5, 3) == 3);
        assert_true(H(INT64_MAX, 0) == (uint64_t)AAGW_HLC_MS_MAX << 16);
        assert_int_equal(aagw_hlc_ms(UINT64_MAX), AAGW_HLC_MS_MAX);
        assert_int_equal(aagw_hlc_counter(UINT64_MAX), 0xffff);
        /* plain integer order is (ms, counter) order */
        assert_true(H(5, 0xffff) < H(6, 0));
        assert_true(H(5, 1) < H(5, 2));
}

static void test_tick(void **state) {
        uint64_t clock = 0;
        (void)state;

        assert_true(aagw_hlc_tick(&clock, 1000) == H(1000, 0));
        assert_true(clock == H(1000, 0));
        /* same millisecond: the counter moves */
        assert_true(aagw_hlc_tick(&clock, 1000) == H(1000, 1));
        /* the wall clock steps back: we do not */
        assert_true(aagw_hlc_tick(&clock, 999) == H(1000, 2));
        assert_true(aagw_hlc_tick(&clock, 0) == H(1000, 3));
        assert_true(aagw_hlc_tick(&clock, -100) == H(1000, 4));
        /* the wall clock passes us: counter restarts */
        assert_true(aagw_hlc_tick(&clock, 1001) == H(1001, 0));
        assert_true(aagw_hlc_tick(&clock, 5000) == H(5000, 0));
}

static void test_tick_counter_overflow(void **state) {
        uint64_t clock = H(5, 0xfffe);
        (void)state;

        assert_true(aagw_hlc_tick(&clock, 5) == H(5, 0xffff));
        /* the counter carries into the next millisecond */
        assert_true(aagw_hlc_tick(&clock, 5) == H(6, 0));
        assert_true(aagw_hlc_tick(&clock, 3) == H(6, 1));
        assert_true(aagw_hlc_tick(&clock, 6) == H(6, 2));
        assert_true(aagw_hlc_tick(&clock, 7) == H(7, 0));
        /* saturates at the very end instead of wrapping to 1970 */
        clock = UINT64_MAX - 1;
        assert_true(aagw_hlc_tick(&clock, 0) == UINT64_MAX);
        assert_true(aagw_hlc_tick(&clock, 0) == UINT64_MAX);
        assert_true(aagw_hlc_tick(&clock, INT64_MAX) == UINT64_MAX);
}

/* A wall clock that jumps around: ticks stay strictly increasing. */
static void test_tick_monotonic(void **state) {
        uint64_t clock = 0, prev = 0, x = 88172645463325252ull;
        int64_t  wall = 1700000000000;
        (void)state;

        for (int i = 0; i < 200000; i++) {
                uint64_t now;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                /* mostly tiny steps, sometimes a jump back by up to 10 s */
                wall += (int64_t)(x % 3) - ((x >> 8) % 97 == 0 ? 10000 : 0);
                now = aagw_hlc_tick(&clock, wall);
                assert_true(now > prev);
                assert_true(aagw_hlc_ms(now) >= wall);
                prev = now;
        }
}

static void test_merge(void **state) {
        uint64_t clock;
        (void)state;

        /* same millisecond on both sides: max counter + 1 */
        clock = H(100, 5);
        assert_true(aagw_hlc_merge(&clock, H(100, 7), 50) == H(100, 8));
        assert_true(clock == H(100, 8));
        clock = H(100, 9);
        assert_true(aagw_hlc_merge(&clock, H(100, 7), 50) == H(100, 10));
        /* ours is ahead */
        clock = H(100, 5);
        assert_true(aagw_hlc_merge(&clock, H(90, 9), 50) == H(100, 6));
        /* theirs is ahead */
        clock = H(100, 5);
        assert_true(aagw_hlc_merge(&clock, H(200, 3), 150) == H(200, 4));
        /* the wall clock is ahead of both */
        clock = H(100, 5);
        assert_true(aagw_hlc_merge(&clock, H(200, 3), 300) == H(300, 0));
        /* their counter overflows into the next millisecond */
        clock = 0;
        assert_true(aagw_hlc_merge(&clock, H(200, 0xffff), 0) == H(201, 0));
        /* a merge then a tick in the same millisecond */
        assert_true(aagw_hlc_tick(&clock, 201) == H(201, 1));
        /* saturation */
        clock = 0;
        assert_true(aagw_hlc_merge(&clock, UINT64_MAX, 0) == UINT64_MAX);
}

static void test_merge_exceeds_both(void **state) {
        uint64_t x = 0x9e3779b97f4a7c15ull;
        (void)state;

        for (int i = 0; i < 100000; i++) {
                uint64_t clock, remote, before, out;
                int64_t  wall;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                clock = H(1000 + (int64_t)(x % 50), (uint16_t)(x >> 20));
                remote =
                    H(1000 + (int64_t)((x >> 8) % 50), (uint16_t)(x >> 40));
                wall   = 1000 + (int64_t)((x >> 16) % 60);
                before = clock;
                out    = aagw_hlc_merge(&clock, remote, wall);
                assert_true(out > before);
                assert_true(out > remote);
                assert_true(aagw_hlc_ms(out) >= wall);
                assert_true(out == clock);
        }
}

static void test_plausible(void **state) {
        (void)state;
        assert_true(aagw_hlc_plausible(H(1000, 0), 900, 100));
        assert_true(aagw_hlc_plausible(H(1000, 65535), 900, 100));
        assert_false(aagw_hlc_plausible(H(1000, 0), 900, 99));
        assert_true(aagw_hlc_plausible(H(1000, 0), 2000, 0));
        assert_true(aagw_hlc_plausible(H(1000, 0), 1000, 0));
        assert_false(aagw_hlc_plausible(H(1001, 0), 1000, -5));
        assert_false(aagw_hlc_plausible(UINT64_MAX, INT64_MIN, INT64_MAX - 1));
        assert_true(aagw_hlc_plausible(UINT64_MAX, INT64_MAX, 0));
}

static void test_format(void **state) {
        char buf[32];
        (void)state;

        assert_int_equal(aagw_hlc_format(H(1714557600123, 0), buf, sizeof(buf)),
                         15);
        assert_string_equal(buf, "1714557600123:0");
        assert_int_equal(aagw_hlc_format(0, buf, sizeof(buf)), 3);
        assert_string_equal(buf, "0:0");
        assert_int_equal(aagw_hlc_format(UINT64_MAX, buf, sizeof(buf)), 21);
        assert_string_equal(buf, "281474976710655:65535");
        /* snprintf() semantics on a short buffer */
        assert_int_equal(aagw_hlc_format(H(1714557600123, 42), buf, 5), 16);
        assert_string_equal(buf, "1714");
        assert_int_equal(aagw_hlc_format(H(1, 2), NULL, 0), 3);
}

/* Every digit count of both fields, checked against printf. */
static void test_format_digits(void **state) {
        char     buf[32], want[32];
        uint64_t p10 = 1;
        (void)state;

        for (int k = 0; k <= 15; k++, p10 *= 10) {
                const uint64_t ms[] = {p10 - 1, p10, p10 + 1, p10 * 5 + 7,
                                       p10 * 9 + p10 - 1};
                for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
                        uint64_t m = ms[i] > AAGW_HLC_MS_MAX ? AAGW_HLC_MS_MAX
                                                              : ms[i];
                        for (uint32_t c = 0; c <= 0xffff; c += 997) {
                                int n = snprintf(want, sizeof(want),
                                                 "%" PRIu64 ":%" PRIu32, m, c);
                                assert_int_equal(
                                    aagw_hlc_format(H(m, c), buf, sizeof(buf)),
                                    n);
                                assert_string_equal(buf, want);
                        }
                }
        }
}

static void test_parse(void **state) {
        static const char *const bad[] = {"",
                                          ":",
                                          "1:",
                                          ":1",
                                          "01:0",
                                          "1:01",
                                          "1:65536",
                                          "-1:0",
                                          "+1:0",
                                          "1:0:0",
                                          "1 :0",
                                          "1:0 ",
                                          " 1:0",
                                          "a:0",
                                          "1:a",
                                          "1.5:0",
                                          "1",
                                          "281474976710656:0",
                                          "99999999999999999999:0",
                                          "18446744073709551616:0",
                                          "1:-1",
                                          "0x1:0"};
        uint64_t                 h     = 77;
        (void)state;

        assert_true(aagw_hlc_parse("1714557600123:7", 15, &h));
        assert_true(h == H(1714557600123, 7));
        assert_true(aagw_hlc_parse("0:0", 3, &h));
        assert_true(h == 0);
        assert_true(aagw_hlc_parse("281474976710655:65535", 21, &h));
        assert_true(h == UINT64_MAX);
        /* the length bounds the text: no NUL needed */
        assert_true(aagw_hlc_parse("12:3trailing", 4, &h));
        assert_true(h == H(12, 3));
        for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
                h = 77;
                if (aagw_hlc_parse(bad[i], strlen(bad[i]), &h))
                        fail_msg("\"%s\" parsed", bad[i]);
                assert_true(h == 77);
        }
        assert_false(aagw_hlc_parse(NULL, 0, &h));
}

static void test_roundtrip(void **state) {
        uint64_t x = 12345;
        char     buf[32];
        (void)state;

        for (int i = 0; i < 100000; i++) {
                uint64_t h;
                size_t   n;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                n = aagw_hlc_format(x, buf, sizeof(buf));
                assert_true(n < 22);
                assert_true(aagw_hlc_parse(buf, n, &h));
                assert_true(h == x);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_pack),
            cmocka_unit_test(test_tick),
            cmocka_unit_test(test_tick_counter_overflow),
            cmocka_unit_test(test_tick_monotonic),
            cmocka_unit_test(test_merge),
            cmocka_unit_test(test_merge_exceeds_both),
            cmocka_unit_test(test_plausible),
            cmocka_unit_test(test_format),
            cmocka_unit_test(test_format_digits),
            cmocka_unit_test(test_parse),
            cmocka_unit_test(test_roundtrip),
        };
        return cmocka_run_group_tests_name("hlc", tests, NULL, NULL);
}
