/* tests/policy/test_idrule.c: global id rules and storage keys. */
#include "policy_test.h"

#include <xxhash.h>

static aagw_id_rule_t *must_rule(const char *spec) {
        char            errstr[256] = "";
        aagw_id_rule_t *r = aagw_id_rule_new(spec, errstr, sizeof(errstr));
        if (!r)
                fail_msg("aagw_id_rule_new(%s): %s", spec, errstr);
        return r;
}

static struct aagw_rec rec_kv(const char *key, const char *value) {
        struct aagw_rec r = {0};
        r.topic           = "clicks";
        r.partition       = 3;
        r.offset          = 1234;
        r.timestamp_ms    = 1714557600123;
        r.key             = key;
        r.key_len         = key ? strlen(key) : 0;
        r.value           = value;
        r.value_len       = value ? strlen(value) : 0;
        return r;
}

/* Apply 'spec' to 'rec'; on success compare with 'want' ('want_len'
 * bytes, or strlen if negative). */
static void expect_id(const char *spec, const struct aagw_rec *rec,
                      aagw_reason_t reason, const char *want, int want_len) {
        aagw_id_rule_t *rule = spec ? must_rule(spec) : NULL;
        char            buf[AAGW_ID_MAX + 1];
        size_t          len = 999;
        aagw_reason_t   got;

        got = aagw_id_extract(rule, "east", rec, buf, sizeof(buf), &len);
        aagw_id_rule_destroy(rule);
        if (got != reason)
                fail_msg("%s: got %s, want %s", spec ? spec : "(null)",
                         aagw_reason_name(got), aagw_reason_name(reason));
        if (reason != AAGW_REASON_OK)
                return;
        if (want_len < 0)
                want_len = (int)strlen(want);
        assert_int_equal(len, want_len);
        assert_memory_equal(buf, want, (size_t)want_len);
        assert_int_equal(buf[len], '\0');
}

static void test_rule_specs(void **state) {
        static const char *const good[] = {
            "derived", "key",        "hash",    "header:event-id",
            "json:id", "header:a:b", "json:x y"};
        static const struct {
                const char *spec, *msg;
        } bad[] = {
            {"", "id rule \"\": expected header:NAME, key, json:FIELD, hash or "
                 "derived"},
            {"KEY", "id rule \"KEY\": expected header:NAME, key, json:FIELD, "
                    "hash or derived"},
            {"keys", "id rule \"keys\": expected header:NAME, key, "
                     "json:FIELD, hash or derived"},
            {"header", "id rule \"header\": expected header:NAME, key, "
                       "json:FIELD, hash or derived"},
            {"header:", "id rule \"header:\": NAME must be 1 to 255 bytes"},
            {"json:", "id rule \"json:\": FIELD must be 1 to 255 bytes"},
        };
        char errstr[512];
        char longspec[300];
        (void)state;

        for (size_t i = 0; i < ARRAY_LEN(good); i++)
                aagw_id_rule_destroy(must_rule(good[i]));
        for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
                errstr[0] = '\0';
                assert_null(
                    aagw_id_rule_new(bad[i].spec, errstr, sizeof(errstr)));
                assert_string_equal(errstr, bad[i].msg);
        }
        assert_null(aagw_id_rule_new(NULL, errstr, sizeof(errstr)));
        strcpy(longspec, "json:");
        fill(longspec + 5, 'f', 255);
        aagw_id_rule_destroy(must_rule(longspec));
        fill(longspec + 5, 'f', 256);
        assert_null(aagw_id_rule_new(longspec, errstr, sizeof(errstr)));
        assert_true(strstr(errstr, "FIELD must be 1 to 255 bytes") != NULL);
        aagw_id_rule_destroy(NULL);
}

/* aagw_id_rule_check(), what the configuration check uses: the same
 * grammar, and for entity keys only key and json:FIELD. */
static void test_rule_check(void **state) {
        static const char *const id_ok[] = {"derived", "key", "hash",
                                            "header:h", "json:f"};
        static const char *const ek_bad[] = {"derived", "hash", "header:h",
                                             "json:", "", "KEY"};
        char err[512], longspec[300];
        (void)state;

        for (size_t i = 0; i < ARRAY_LEN(id_ok); i++)
                assert_true(aagw_id_rule_check(id_ok[i], false, err,
                                               sizeof(err)));
        assert_true(aagw_id_rule_check("key", true, err, sizeof(err)));
        assert_true(aagw_id_rule_check("json:user", true, err, sizeof(err)));
        for (size_t i = 0; i < ARRAY_LEN(ek_bad); i++) {
                char want[128];
                assert_false(aagw_id_rule_check(ek_bad[i], true, err,
                                                sizeof(err)));
                snprintf(want, sizeof(want),
                         "expected key or json:FIELD, got \"%s\"", ek_bad[i]);
                assert_string_equal(err, want);
        }
        assert_false(aagw_id_rule_check("json:", false, err, sizeof(err)));
        assert_string_equal(err, "expected header:NAME, key, json:FIELD, "
                                 "hash or derived, got \"json:\"");
        /* NAME and FIELD: 1 to 255 bytes, as aagw_id_rule_new() takes. */
        memset(longspec, 'a', sizeof(longspec));
        memcpy(longspec, "header:", 7);
        longspec[7 + 255] = '\0';
        assert_true(aagw_id_rule_check(longspec, false, err, sizeof(err)));
        longspec[7 + 255] = 'a';
        longspec[7 + 256] = '\0';
        assert_false(aagw_id_rule_check(longspec, false, err, sizeof(err)));
}

static void test_derived(void **state) {
        struct aagw_rec r = rec_kv(NULL, NULL);
        char            buf[64];
        (void)state;

        expect_id(NULL, &r, AAGW_REASON_OK, "east:clicks:3:1234", -1);
        expect_id("derived", &r, AAGW_REASON_OK, "east:clicks:3:1234", -1);
        r.partition = 0;
        r.offset    = INT64_MAX;
        expect_id("derived", &r, AAGW_REASON_OK,
                  "east:clicks:0:9223372036854775807", -1);
        assert_int_equal(
            aagw_id_derive("west", "t", -1, INT64_MIN, buf, sizeof(buf)), 30);
        assert_string_equal(buf, "west:t:-1:-9223372036854775808");
        /* snprintf() semantics */
        assert_int_equal(aagw_id_derive("east", "clicks", 3, 1234, buf, 8), 18);
        assert_string_equal(buf, "east:cl");
        assert_int_equal(aagw_id_derive("east", "clicks", 3, 1234, NULL, 0),
                         18);
}

static void test_key(void **state) {
        struct aagw_rec r = rec_kv("user-42", "v");
        char            big[AAGW_ID_MAX + 2];
        (void)state;

        expect_id("key", &r, AAGW_REASON_OK, "user-42", -1);
        /* binary keys, NUL bytes included */
        r.key     = "a\0b";
        r.key_len = 3;
        expect_id("key", &r, AAGW_REASON_OK, "a\0b", 3);
        r = rec_kv(NULL, "v");
        expect_id("key", &r, AAGW_REASON_ID_NO_KEY, NULL, 0);
        r = rec_kv("", "v");
        expect_id("key", &r, AAGW_REASON_ID_EMPTY, NULL, 0);
        r = rec_kv(fill(big, 'k', AAGW_ID_MAX), "v");
        expect_id("key", &r, AAGW_REASON_OK, big, -1);
        r = rec_kv(fill(big, 'k', AAGW_ID_MAX + 1), "v");
        expect_id("key", &r, AAGW_REASON_ID_TOO_LONG, NULL, 0);
}

static void test_header(void **state) {
        struct aagw_header h[4];
        struct aagw_rec    r = rec_kv("k", "v");
        char               big[AAGW_ID_MAX + 2];
        (void)state;

        h[0]      = hdr("event-id", "first");
        h[1]      = hdr("other", "x");
        h[2]      = hdr("event-id", "last");
        h[3]      = hdr("event-idx", "no");
        r.hdrs    = h;
        r.hdr_cnt = 4;
        /* the last one wins, as lastHeader() */
        expect_id("header:event-id", &r, AAGW_REASON_OK, "last", -1);
        expect_id("header:other", &r, AAGW_REASON_OK, "x", -1);
        expect_id("header:missing", &r, AAGW_REASON_ID_NO_HEADER, NULL, 0);
        expect_id("header:Event-Id", &r, AAGW_REASON_ID_NO_HEADER, NULL, 0);
        h[2] = hdr("event-id", NULL);
        expect_id("header:event-id", &r, AAGW_REASON_ID_NULL_HEADER, NULL, 0);
        h[2] = hdr("event-id", "");
        expect_id("header:event-id", &r, AAGW_REASON_ID_EMPTY, NULL, 0);
        h[2] = hdr("event-id", fill(big, 'h', AAGW_ID_MAX + 1));
        expect_id("header:event-id", &r, AAGW_REASON_ID_TOO_LONG, NULL, 0);
        h[2].name = NULL;
        expect_id("header:event-id", &r, AAGW_REASON_OK, "first", -1);
        r.hdrs    = NULL;
        r.hdr_cnt = 0;
        expect_id("header:event-id", &r, AAGW_REASON_ID_NO_HEADER, NULL, 0);
}

/* value, expected reason, expected id (for OK) */
static const struct {
        const char   *value;
        aagw_reason_t want;
        const char   *id;
} json_cases[] = {
    {"{\"id\":\"abc\"}", AAGW_REASON_OK, "abc"},
    {" \t\r\n{ \"id\" : \"abc\" } \n", AAGW_REASON_OK, "abc"},
    {"{\"id\":42}", AAGW_REASON_OK, "42"},
    {"{\"id\":-7}", AAGW_REASON_OK, "-7"},
    {"{\"id\":0}", AAGW_REASON_OK, "0"},
    /* integers are rendered in decimal, which for RFC 8259 integers in
     * range is the text as written */
    {"{\"id\":9223372036854775807}", AAGW_REASON_OK, "9223372036854775807"},
    {"{\"id\":9223372036854775808}", AAGW_REASON_OK, "9223372036854775808"},
    {"{\"id\":18446744073709551614}", AAGW_REASON_OK, "18446744073709551614"},
    {"{\"id\":-9223372036854775807}", AAGW_REASON_OK, "-9223372036854775807"},
    /* Changed with json-c, which clamps an integer outside int64/uint64 to
     * INT64_MIN or UINT64_MAX (0.16): those two values are refused, so an
     * overflow cannot make distinct ids equal.  Was OK with the digits as
     * written. */
    {"{\"id\":123456789012345678901234567890}", AAGW_REASON_ID_FIELD_INVALID,
     NULL},
    {"{\"id\":18446744073709551615}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":-9223372036854775808}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":-9223372036854775809}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    /* New with json-c: "-0" is the integer 0 (the scanner gave "-0"), and
     * json-c accepts a leading zero after the minus sign */
    {"{\"id\":-0}", AAGW_REASON_OK, "0"},
    {"{\"id\":-01}", AAGW_REASON_OK, "-1"},
    /* elsewhere in the value an overflow does not matter (json-c 0.16) */
    {"{\"id\":\"a\",\"n\":123456789012345678901234567890}", AAGW_REASON_OK,
     "a"},
    {"{\"a\":1,\"b\":[1,{\"id\":\"x\"}],\"id\":\"top\",\"c\":null}",
     AAGW_REASON_OK, "top"},
    {"{\"a\":{\"id\":\"nested\"},\"id\":\"y\"}", AAGW_REASON_OK, "y"},
    {"{\"id\":\"a\\u00e9\\n\\\"\\/\\\\\\b\\f\\r\\t\"}", AAGW_REASON_OK,
     "a\xc3\xa9\n\"/\\\b\f\r\t"},
    {"{\"id\":\"\\ud83d\\ude00\"}", AAGW_REASON_OK, "\xf0\x9f\x98\x80"},
    {"{\"id\":\"\\u20AC\"}", AAGW_REASON_OK, "\xe2\x82\xac"},
    {"{\"id\":\"\xe2\x82\xac raw\"}", AAGW_REASON_OK, "\xe2\x82\xac raw"},
    /* no UTF-8 validation */
    {"{\"id\":\"\xff\xfe\"}", AAGW_REASON_OK, "\xff\xfe"},
    /* Changed with json-c, which decodes a lone surrogate to U+FFFD (the
     * scanner refused the field): the same id as a real U+FFFD */
    {"{\"id\":\"\\ud800\"}", AAGW_REASON_OK, "\xef\xbf\xbd"},
    {"{\"id\":\"\\udc00x\"}", AAGW_REASON_OK, "\xef\xbf\xbdx"},
    {"{\"id\":\"\\ud800\\u0041\"}", AAGW_REASON_OK, "\xef\xbf\xbd\x41"},
    {"{\"id\":\"\\ud800\\ud800\\udc00\"}", AAGW_REASON_OK,
     "\xef\xbf\xbd\xf0\x90\x80\x80"},
    {"{\"id\":\"\\ufffd\"}", AAGW_REASON_OK, "\xef\xbf\xbd"},
    {"{\"id\":\"\xef\xbf\xbd\"}", AAGW_REASON_OK, "\xef\xbf\xbd"},
    /* Changed with json-c: strict mode still takes raw control characters
     * in strings (the scanner: not JSON) */
    {"{\"id\":\"tab\there\"}", AAGW_REASON_OK, "tab\there"},
    /* the key may be written with escapes too */
    {"{\"\\u0069d\":\"k\"}", AAGW_REASON_OK, "k"},
    {"{\"x\":[[],{},\"\",true,false,null,1.5e-3,-0.0]  ,\"id\":\"z\"}",
     AAGW_REASON_OK, "z"},
    /* unusable field values */
    {"{\"id\":1.5}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":1e3}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":1E+3}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":1e400}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":-0.0}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":null}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":true}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":false}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":{\"v\":1}}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":[\"a\"]}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    /* New with json-c: it takes these (as fractions) in strict mode */
    {"{\"id\":1.}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":01.5}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":NaN}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":Infinity}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":-Infinity}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":\"a\",\"x\":[NaN,1.]}", AAGW_REASON_OK, "a"},
    {"{\"id\":\"\"}", AAGW_REASON_ID_EMPTY, NULL},
    /* missing */
    {"{}", AAGW_REASON_ID_NO_FIELD, NULL},
    {" { } ", AAGW_REASON_ID_NO_FIELD, NULL},
    {"{\"ID\":\"x\"}", AAGW_REASON_ID_NO_FIELD, NULL},
    {"{\"idx\":\"x\",\"i\":\"y\"}", AAGW_REASON_ID_NO_FIELD, NULL},
    {"{\"a\":{\"id\":\"x\"}}", AAGW_REASON_ID_NO_FIELD, NULL},
    {"{\"\\ud800id\":\"x\"}", AAGW_REASON_ID_NO_FIELD, NULL},
    /* Changed with json-c: twice, the last one wins whatever the values
     * (the scanner refused the field, id_dup_field).  json-c keeps no trace
     * of the earlier copy. */
    {"{\"id\":\"a\",\"id\":\"b\"}", AAGW_REASON_OK, "b"},
    {"{\"id\":\"a\",\"x\":1,\"id\":\"a\"}", AAGW_REASON_OK, "a"},
    {"{\"id\":1.5,\"id\":\"a\"}", AAGW_REASON_OK, "a"},
    {"{\"id\":\"a\",\"id\":1.5}", AAGW_REASON_ID_FIELD_INVALID, NULL},
    {"{\"id\":\"a\",\"id\":7}", AAGW_REASON_OK, "7"},
    /* New with json-c: a key is cut at an escaped NUL */
    {"{\"id\\u0000x\":\"v\"}", AAGW_REASON_OK, "v"},
    {"{\"id\":\"a\",\"id\\u0000\":\"b\"}", AAGW_REASON_OK, "b"},
    /* JSON, not an object */
    {"[1,2]", AAGW_REASON_ID_NOT_OBJECT, NULL},
    {"\"id\"", AAGW_REASON_ID_NOT_OBJECT, NULL},
    {"42", AAGW_REASON_ID_NOT_OBJECT, NULL},
    {" null ", AAGW_REASON_ID_NOT_OBJECT, NULL},
    {"-0", AAGW_REASON_ID_NOT_OBJECT, NULL},
    {"true", AAGW_REASON_ID_NOT_OBJECT, NULL},
    {"42 ", AAGW_REASON_ID_NOT_OBJECT, NULL},
    /* not JSON */
    {"", AAGW_REASON_ID_NOT_JSON, NULL},
    {"   ", AAGW_REASON_ID_NOT_JSON, NULL},
    {"not json", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\"", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\"", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\"} x", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\"}}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\",}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{,\"id\":\"a\"}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\" \"a\"}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{id:\"a\"}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{'id':'a'}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\" \"b\":1}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\\x\"}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\\u12G4\"}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\\u12\"}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"\\ud800\\uZZZZ\"}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":01}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":-}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":+1}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":.5}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":1e}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":tru}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":nul}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\",\"x\":[1,]}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\",\"x\":[1 2]}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\",\"x\":{\"k\"}}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\",\"x\":{\"k\":1,}}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\",\"x\":[}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\",\"x\":{]}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\",\"x\":[1]]}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"[1,2", AAGW_REASON_ID_NOT_JSON, NULL},
    {"42 43", AAGW_REASON_ID_NOT_JSON, NULL},
    {"\xef\xbb\xbf{\"id\":\"a\"}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"nul", AAGW_REASON_ID_NOT_JSON, NULL},
    {"\"ab", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":0x10}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":nan}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":-Inf}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\\'\"}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\"}{}", AAGW_REASON_ID_NOT_JSON, NULL},
    /* no comments, and only RFC 8259 whitespace */
    {"{\"id\":\"a\"}/**/", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\"/**/}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\"}\v", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"a\"}\f", AAGW_REASON_ID_NOT_JSON, NULL},
    /* an error after the field still makes the value not JSON */
    {"{\"id\":1.5,\"x\":}", AAGW_REASON_ID_NOT_JSON, NULL},
    {"{\"id\":\"\",\"x\":}", AAGW_REASON_ID_NOT_JSON, NULL},
};

static void test_json(void **state) {
        (void)state;
        for (size_t i = 0; i < ARRAY_LEN(json_cases); i++) {
                struct aagw_rec r = rec_kv("k", json_cases[i].value);
                char            buf[AAGW_ID_MAX + 1];
                size_t          len  = 0;
                aagw_id_rule_t *rule = must_rule("json:id");
                aagw_reason_t   got =
                    aagw_id_extract(rule, "east", &r, buf, sizeof(buf), &len);
                aagw_id_rule_destroy(rule);
                if (got != json_cases[i].want)
                        fail_msg("case %zu %s: got %s, want %s", i,
                                 json_cases[i].value, aagw_reason_name(got),
                                 aagw_reason_name(json_cases[i].want));
                if (got == AAGW_REASON_OK) {
                        assert_int_equal(len, strlen(json_cases[i].id));
                        assert_memory_equal(buf, json_cases[i].id, len);
                        assert_int_equal(buf[len], '\0');
                }
        }
}

static void test_json_edges(void **state) {
        static char     v[8192];
        struct aagw_rec r = rec_kv("k", NULL);
        size_t          k;
        (void)state;

        /* tombstone */
        expect_id("json:id", &r, AAGW_REASON_ID_NO_VALUE, NULL, 0);
        /* a NUL byte in the value is just a bad byte, not the end */
        r.value     = "{\"id\":\"a\"}\0";
        r.value_len = 11;
        expect_id("json:id", &r, AAGW_REASON_ID_NOT_JSON, NULL, 0);
        r.value_len = 10;
        expect_id("json:id", &r, AAGW_REASON_OK, "a", -1);
        /* the value length bounds the scan */
        r.value_len = 9;
        expect_id("json:id", &r, AAGW_REASON_ID_NOT_JSON, NULL, 0);

        /* 1024 bytes fit, 1025 do not */
        k = (size_t)snprintf(v, sizeof(v), "{\"id\":\"");
        fill(v + k, 'x', 1024);
        strcat(v, "\"}");
        r = rec_kv("k", v);
        expect_id("json:id", &r, AAGW_REASON_OK, v + k, 1024);
        fill(v + k, 'x', 1025);
        strcat(v, "\"}");
        r = rec_kv("k", v);
        expect_id("json:id", &r, AAGW_REASON_ID_TOO_LONG, NULL, 0);
        /* Changed with json-c: 1025 digits overflow uint64 and are clamped,
         * so the field is refused as unusable (was id_too_long). */
        k = (size_t)snprintf(v, sizeof(v), "{\"id\":");
        fill(v + k, '7', 1025);
        strcat(v, "}");
        r = rec_kv("k", v);
        expect_id("json:id", &r, AAGW_REASON_ID_FIELD_INVALID, NULL, 0);
        /* an escaped NUL is part of a string id */
        r = rec_kv("k", "{\"id\":\"a\\u0000b\"}");
        expect_id("json:id", &r, AAGW_REASON_OK, "a\0b", 3);
        /* a raw NUL inside a string is not JSON */
        r.value     = "{\"id\":\"a\0b\"}";
        r.value_len = 12;
        expect_id("json:id", &r, AAGW_REASON_ID_NOT_JSON, NULL, 0);
        /* a 1024-byte id only fits a buffer of 1025 */
        k = (size_t)snprintf(v, sizeof(v), "{\"id\":\"");
        fill(v + k, 'x', 1024);
        strcat(v, "\"}");
        r = rec_kv("k", v);
        {
                aagw_id_rule_t *rule = must_rule("json:id");
                char            buf[AAGW_ID_MAX + 1];
                size_t          len = 0;
                assert_int_equal(
                    aagw_id_extract(rule, "east", &r, buf, AAGW_ID_MAX, &len),
                    AAGW_REASON_ID_TOO_LONG);
                assert_int_equal(aagw_id_extract(rule, "east", &r, buf,
                                                 AAGW_ID_MAX + 1, &len),
                                 AAGW_REASON_OK);
                assert_int_equal(len, AAGW_ID_MAX);
                aagw_id_rule_destroy(rule);
        }

        /* 512 levels of nesting are fine, 513 are not JSON */
        k = (size_t)snprintf(v, sizeof(v), "{\"d\":");
        for (int i = 0; i < 511; i++)
                v[k++] = '[';
        for (int i = 0; i < 511; i++)
                v[k++] = ']';
        k += (size_t)snprintf(v + k, sizeof(v) - k, ",\"id\":\"deep\"}");
        r = rec_kv("k", v);
        expect_id("json:id", &r, AAGW_REASON_OK, "deep", -1);
        k = (size_t)snprintf(v, sizeof(v), "{\"d\":");
        for (int i = 0; i < 512; i++)
                v[k++] = '[';
        for (int i = 0; i < 512; i++)
                v[k++] = ']';
        k += (size_t)snprintf(v + k, sizeof(v) - k, ",\"id\":\"deep\"}");
        r = rec_kv("k", v);
        expect_id("json:id", &r, AAGW_REASON_ID_NOT_JSON, NULL, 0);
        /* the bound counts a top-level array too: 512 levels are JSON
         * (but no object), 513 are not JSON */
        memset(v, '[', 512);
        memset(v + 512, ']', 512);
        v[1024] = '\0';
        r       = rec_kv("k", v);
        expect_id("json:id", &r, AAGW_REASON_ID_NOT_OBJECT, NULL, 0);
        memset(v, '[', 513);
        memset(v + 513, ']', 513);
        v[1026] = '\0';
        r       = rec_kv("k", v);
        expect_id("json:id", &r, AAGW_REASON_ID_NOT_JSON, NULL, 0);
        /* deep and unterminated */
        memset(v, '[', sizeof(v) - 1);
        v[sizeof(v) - 1] = '\0';
        r                = rec_kv("k", v);
        expect_id("json:id", &r, AAGW_REASON_ID_NOT_JSON, NULL, 0);
        for (k = 0; k + 5 < sizeof(v); k += 5)
                memcpy(v + k, "{\"a\":", 5);
        v[k] = '\0';
        r    = rec_kv("k", v);
        expect_id("json:id", &r, AAGW_REASON_ID_NOT_JSON, NULL, 0);
        /* many members: the whole tree is built and freed */
        k = (size_t)snprintf(v, sizeof(v), "{\"id\":\"wide\"");
        for (int i = 0; k + 16 < sizeof(v); i++)
                k += (size_t)snprintf(v + k, sizeof(v) - k, ",\"k%d\":[%d]", i,
                                      i);
        v[k++] = '}';
        v[k]   = '\0';
        r      = rec_kv("k", v);
        expect_id("json:id", &r, AAGW_REASON_OK, "wide", -1);
}

/* The long escaped string above: check all of it, not only the prefix. */
static void test_json_escaped_full(void **state) {
        static char     v[8192], want[2048];
        struct aagw_rec r;
        size_t          k = 0;
        (void)state;

        k = (size_t)snprintf(v, sizeof(v), "{\"id\":\"");
        for (int i = 0; i < 512; i++) {
                k += (size_t)snprintf(v + k, sizeof(v) - k, "\\u00e9");
                want[2 * i]     = '\xc3';
                want[2 * i + 1] = '\xa9';
        }
        strcat(v, "\"}");
        r = rec_kv("k", v);
        expect_id("json:id", &r, AAGW_REASON_OK, want, 1024);
        /* one more escaped character: 1026 bytes */
        k = (size_t)snprintf(v, sizeof(v), "{\"id\":\"x");
        for (int i = 0; i < 512; i++)
                k += (size_t)snprintf(v + k, sizeof(v) - k, "\\u00e9");
        strcat(v, "\"}");
        r = rec_kv("k", v);
        expect_id("json:id", &r, AAGW_REASON_ID_TOO_LONG, NULL, 0);
}

/* The field name is matched exactly, including unusual characters. */
static void test_json_field_names(void **state) {
        struct aagw_rec r = rec_kv("k", "{\"a b\":\"1\",\"a.b\":\"2\","
                                        "\"\":\"3\",\"\\\"q\":\"4\"}");
        (void)state;

        expect_id("json:a b", &r, AAGW_REASON_OK, "1", -1);
        expect_id("json:a.b", &r, AAGW_REASON_OK, "2", -1);
        expect_id("json:\"q", &r, AAGW_REASON_OK, "4", -1);
        expect_id("json:a", &r, AAGW_REASON_ID_NO_FIELD, NULL, 0);
}

/* XXH3-128 of a buffer, in canonical hex. */
static void hex128(const void *p, size_t len, char out[33]) {
        XXH128_canonical_t c;
        XXH128_canonicalFromHash(&c, XXH3_128bits(p, len));
        for (int i = 0; i < 16; i++)
                snprintf(out + 2 * i, 3, "%02x", c.digest[i]);
}

/* The documented framing: le64 length (all ones for null), bytes; for the
 * key, then the value.  Computed here in one shot, independently of the
 * streaming code under test. */
static void framed(const char *key, size_t kl, const char *val, size_t vl,
                   char out[33]) {
        unsigned char buf[256];
        size_t        n       = 0;
        uint64_t      lens[2] = {key ? kl : UINT64_MAX, val ? vl : UINT64_MAX};
        const char   *p[2]    = {key, val};

        for (int i = 0; i < 2; i++) {
                for (int b = 0; b < 8; b++)
                        buf[n++] = (unsigned char)(lens[i] >> (8 * b));
                if (p[i]) {
                        memcpy(buf + n, p[i], lens[i]);
                        n += lens[i];
                }
        }
        hex128(buf, n, out);
}

static void test_hash(void **state) {
        struct aagw_rec r = rec_kv("ab", "c");
        char            want[33], a[AAGW_ID_MAX + 1], b[AAGW_ID_MAX + 1];
        size_t          la, lb;
        aagw_id_rule_t *rule = must_rule("hash");
        (void)state;

        framed("ab", 2, "c", 1, want);
        expect_id("hash", &r, AAGW_REASON_OK, want, 32);
        /* pinned: the hash rule is part of the id contract */
        expect_id("hash", &r, AAGW_REASON_OK,
                  "f2eda2708bcfd51cc05c0ee4c9f60440", 32);
        assert_int_equal(aagw_id_extract(rule, "east", &r, a, sizeof(a), &la),
                         AAGW_REASON_OK);
        /* the split between key and value matters */
        r = rec_kv("a", "bc");
        assert_int_equal(aagw_id_extract(rule, "east", &r, b, sizeof(b), &lb),
                         AAGW_REASON_OK);
        assert_string_not_equal(a, b);
        framed("a", 1, "bc", 2, want);
        assert_string_equal(b, want);
        /* null and empty differ */
        r = rec_kv(NULL, "v");
        assert_int_equal(aagw_id_extract(rule, "east", &r, a, sizeof(a), &la),
                         AAGW_REASON_OK);
        framed(NULL, 0, "v", 1, want);
        assert_string_equal(a, want);
        r = rec_kv("", "v");
        assert_int_equal(aagw_id_extract(rule, "east", &r, b, sizeof(b), &lb),
                         AAGW_REASON_OK);
        assert_string_not_equal(a, b);
        /* a tombstone with a null key still has an id */
        r = rec_kv(NULL, NULL);
        framed(NULL, 0, NULL, 0, want);
        expect_id("hash", &r, AAGW_REASON_OK, want, 32);
        /* coordinates do not enter it: replays and copies agree */
        r           = rec_kv("ab", "c");
        r.partition = 9;
        r.offset    = 1;
        r.topic     = "other";
        framed("ab", 2, "c", 1, want);
        expect_id("hash", &r, AAGW_REASON_OK, want, 32);
        aagw_id_rule_destroy(rule);
}

static void test_small_buffer(void **state) {
        struct aagw_rec r    = rec_kv("abcd", "v");
        aagw_id_rule_t *rule = must_rule("key");
        char            buf[8];
        size_t          len = 0;
        (void)state;

        assert_int_equal(aagw_id_extract(rule, "east", &r, buf, 4, &len),
                         AAGW_REASON_ID_TOO_LONG);
        assert_int_equal(aagw_id_extract(rule, "east", &r, buf, 5, &len),
                         AAGW_REASON_OK);
        assert_string_equal(buf, "abcd");
        assert_int_equal(aagw_id_extract(rule, "east", &r, buf, 0, &len),
                         AAGW_REASON_ID_TOO_LONG);
        aagw_id_rule_destroy(rule);
        assert_int_equal(
            aagw_id_extract(NULL, "east", &r, buf, sizeof(buf), &len),
            AAGW_REASON_ID_TOO_LONG);
}

static void test_id_key(void **state) {
        uint8_t              key[AAGW_ID_KEY_LEN], key2[AAGW_ID_KEY_LEN];
        static const uint8_t empty[AAGW_ID_KEY_LEN] = {
            0x99, 0xaa, 0x06, 0xd3, 0x01, 0x47, 0x98, 0xd8,
            0x60, 0x01, 0xc3, 0x24, 0x46, 0x8d, 0x49, 0x7f};
        char hex[33], mine[33];
        (void)state;

        /* XXH3-128 of nothing, a published test vector */
        aagw_id_key("", 0, key);
        assert_memory_equal(key, empty, sizeof(key));
        aagw_id_key("east:clicks:3:1234", 18, key);
        hex128("east:clicks:3:1234", 18, hex);
        for (int i = 0; i < 16; i++)
                snprintf(mine + 2 * i, 3, "%02x", key[i]);
        assert_string_equal(mine, hex);
        aagw_id_key("east:clicks:3:1235", 18, key2);
        assert_memory_not_equal(key, key2, sizeof(key));
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_rule_specs),
            cmocka_unit_test(test_rule_check),
            cmocka_unit_test(test_derived),
            cmocka_unit_test(test_key),
            cmocka_unit_test(test_header),
            cmocka_unit_test(test_json),
            cmocka_unit_test(test_json_edges),
            cmocka_unit_test(test_json_escaped_full),
            cmocka_unit_test(test_json_field_names),
            cmocka_unit_test(test_hash),
            cmocka_unit_test(test_small_buffer),
            cmocka_unit_test(test_id_key),
        };
        return cmocka_run_group_tests_name("idrule", tests, NULL, NULL);
}
