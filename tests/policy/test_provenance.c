/* tests/policy/test_provenance.c: the provenance header: the wire format
 * (exact values), round trips, and every class of hostile header with its
 * exact reason. */
#include "policy_test.h"

static const char *const three[] = {"east", "west", "north"};

static int setup(void **state) {
        *state = mkpol(three, 3, AAGW_NAMING_PREFIX, ".", false);
        return 0;
}

static int teardown(void **state) {
        aagw_repl_policy_destroy(*state);
        return 0;
}

#define PROV "aagw.prov"
/* West holds a record east wrote, with an explicit id. */
#define VALID "1;east>west;clicks:3:1234;1714557600123:7;id-1"

static struct aagw_header prov(const char *v) {
        return hdr(PROV, v);
}

/* A provenance header of 'len' bytes at 'v' (may hold NULs). */
static struct aagw_header prov_n(const void *v, size_t len) {
        struct aagw_header h = {PROV, v, len};
        return h;
}

static void expect_fields(const struct aagw_prov *p) {
        assert_string_equal(p->origin, "east");
        assert_int_equal(p->path_len, 2);
        assert_string_equal(p->path[0], "east");
        assert_string_equal(p->path[1], "west");
        assert_int_equal(p->id_len, 4);
        assert_memory_equal(p->id, "id-1", 5);
        assert_string_equal(p->src_topic, "clicks");
        assert_int_equal(p->src_partition, 3);
        assert_int_equal(p->src_offset, 1234);
        assert_true(p->hlc == aagw_hlc_make(1714557600123, 7));
}

/* Decode one header set and expect 'want'. */
static void expect_decode(const aagw_repl_policy_t *pol,
                          const struct aagw_header *h, size_t n,
                          aagw_reason_t want) {
        struct aagw_prov p;
        aagw_reason_t    got;

        p.path_len = 9;
        got        = aagw_prov_decode(pol, h, n, &p);
        if (got != want)
                fail_msg("got %s, want %s", aagw_reason_name(got),
                         aagw_reason_name(want));
        if (want != AAGW_REASON_OK)
                assert_int_equal(p.path_len, 0);
}

/* The encoded value of 'p' is exactly 'want' ('len' bytes; -1: strlen). */
static void expect_encode(const aagw_repl_policy_t *pol,
                          const struct aagw_prov *p, const char *want,
                          int len) {
        struct aagw_prov_hdrs out;
        size_t n = len < 0 ? strlen(want) : (size_t)len;

        assert_int_equal(aagw_prov_encode(pol, p, &out), AAGW_OK);
        assert_int_equal(out.cnt, 1);
        assert_string_equal(out.hdrs[0].name, PROV);
        if (out.hdrs[0].size != n || memcmp(out.hdrs[0].value, want, n))
                fail_msg("got \"%.*s\", want \"%.*s\"", (int)out.hdrs[0].size,
                         (const char *)out.hdrs[0].value, (int)n, want);
}

/* east's clicks [3] @1234, copied to west, with id 'id'. */
static void mkprov(struct aagw_prov *p, const char *id) {
        memset(p, 0, sizeof(*p));
        strcpy(p->origin, "east");
        strcpy(p->path[0], "east");
        strcpy(p->path[1], "west");
        p->path_len = 2;
        p->id_len   = strlen(id);
        memcpy(p->id, id, p->id_len);
        strcpy(p->src_topic, "clicks");
        p->src_partition = 3;
        p->src_offset    = 1234;
        p->hlc           = aagw_hlc_make(1714557600123, 7);
}

/* -------------------------------- BASICS ------------------------------- */

static void test_decode_valid(void **state) {
        aagw_repl_policy_t *pol = *state;
        struct aagw_header  h[12];
        struct aagw_prov    p;

        h[0] = prov(VALID);
        assert_int_equal(aagw_prov_decode(pol, h, 1, &p), AAGW_REASON_OK);
        expect_fields(&p);
        assert_int_equal(aagw_prov_validate(pol, &p, "west"), AAGW_REASON_OK);
        assert_int_equal(aagw_prov_validate(pol, &p, NULL), AAGW_REASON_OK);

        /* Anywhere among the producer's own headers and the reserved
         * names, which mean nothing: not even the draft format's five. */
        h[0]  = hdr("event-id", "e-1");
        h[1]  = hdr("aagw.origin", "north");
        h[2]  = hdr("aagw.path", "north>west");
        h[3]  = hdr("aagw.id", "forged");
        h[4]  = hdr("aagw.src", "x:0:0");
        h[5]  = hdr("aagw.hlc", NULL);
        h[6]  = prov(VALID);
        h[7]  = hdr("aagw.hop", "clicks:0:1");
        h[8]  = hdr("aagw.dlq.reason", "prov_duplicate");
        h[9]  = hdr("aagwx.prov", "1;west;clicks:0:0;0:0;");
        h[10] = hdr("aagw.prov2", NULL);
        h[11] = hdr("trace", NULL);
        assert_int_equal(aagw_prov_decode(pol, h, 12, &p), AAGW_REASON_OK);
        expect_fields(&p);
}

static void test_decode_derived_id(void **state) {
        aagw_repl_policy_t *pol = *state;
        struct aagw_header  h[1];
        struct aagw_prov    p;

        /* empty ID: the derived id, rebuilt from origin and src */
        h[0] = prov("1;east>west;clicks:3:1234;1714557600123:0;");
        assert_int_equal(aagw_prov_decode(pol, h, 1, &p), AAGW_REASON_OK);
        assert_string_equal(p.origin, "east");
        assert_int_equal(p.id_len, 18);
        assert_memory_equal(p.id, "east:clicks:3:1234", 19);
        assert_true(p.hlc == aagw_hlc_make(1714557600123, 0));
        /* the origin is path[0], whatever the last hop */
        h[0] = prov("1;north>east>west;a.b-c_d:0:0;0:0;");
        assert_int_equal(aagw_prov_decode(pol, h, 1, &p), AAGW_REASON_OK);
        assert_string_equal(p.origin, "north");
        assert_int_equal(p.path_len, 3);
        assert_int_equal(p.id_len, 17);
        assert_memory_equal(p.id, "north:a.b-c_d:0:0", 18);
        /* spelled out, it is the same id (aagw writes the short form) */
        h[0] = prov("1;east>west;clicks:3:1234;1714557600123:0;"
                    "east:clicks:3:1234");
        assert_int_equal(aagw_prov_decode(pol, h, 1, &p), AAGW_REASON_OK);
        assert_int_equal(p.id_len, 18);
        assert_memory_equal(p.id, "east:clicks:3:1234", 18);
        expect_encode(pol, &p, "1;east>west;clicks:3:1234;1714557600123:0;",
                      -1);
}

static void test_decode_raw_id(void **state) {
        aagw_repl_policy_t *pol = *state;
        struct aagw_header  h[1];
        struct aagw_prov    p;
        static const char   v[] = "1;east>west;clicks:3:1234;1:2;a;b\0c;;";

        /* the id is the rest of the value: ';', NULs and all */
        h[0] = prov_n(v, sizeof(v) - 1);
        assert_int_equal(aagw_prov_decode(pol, h, 1, &p), AAGW_REASON_OK);
        assert_int_equal(p.id_len, 7);
        assert_memory_equal(p.id, "a;b\0c;;", 8);
        assert_int_equal(p.path_len, 2);
        assert_true(p.hlc == aagw_hlc_make(1, 2));
        expect_encode(pol, &p, v, (int)sizeof(v) - 1);
        /* one byte, a lone ';' */
        h[0] = prov("1;east;t:0:0;0:0;;");
        assert_int_equal(aagw_prov_decode(pol, h, 1, &p), AAGW_REASON_OK);
        assert_int_equal(p.id_len, 1);
        assert_memory_equal(p.id, ";", 2);
}

static void test_decode_absent(void **state) {
        aagw_repl_policy_t *pol = *state;
        struct aagw_header  h[12];
        struct aagw_prov    p;

        p.path_len = 9;
        assert_int_equal(aagw_prov_decode(pol, NULL, 0, &p), AAGW_REASON_OK);
        assert_int_equal(p.path_len, 0);
        h[0] = hdr("event-id", "e-1");
        h[1] = hdr("x", NULL);
        /* reserved names under the prefix are ignored, valid or not */
        h[2]       = hdr("aagw.future", "v2");
        h[3]       = hdr("aagw.", "");
        h[4]       = hdr("aagw.origin", "east");
        h[5]       = hdr("aagw.path", "east>west");
        h[6]       = hdr("aagw.id", "id-1");
        h[7]       = hdr("aagw.src", "clicks:3:1234");
        h[8]       = hdr("aagw.hlc", "1714557600123:7");
        h[9]       = hdr("aagw.hop", NULL);
        h[10]      = hdr("aagw.pro", VALID);
        h[11]      = hdr("AAGW.prov", VALID);
        p.path_len = 9;
        assert_int_equal(aagw_prov_decode(pol, h, 12, &p), AAGW_REASON_OK);
        assert_int_equal(p.path_len, 0);
        /* nothing to check in no provenance */
        assert_int_equal(aagw_prov_validate(pol, &p, "west"), AAGW_REASON_OK);
}

static void test_encode_exact(void **state) {
        aagw_repl_policy_t *pol = *state;
        struct aagw_prov    p;

        mkprov(&p, "id-1");
        strcpy(p.path[2], "north");
        p.path_len = 3;
        expect_encode(pol, &p,
                      "1;east>west>north;clicks:3:1234;1714557600123:7;id-1",
                      -1);
        /* the derived id is left out */
        mkprov(&p, "east:clicks:3:1234");
        p.hlc = aagw_hlc_make(1714557600123, 0);
        expect_encode(pol, &p, "1;east>west;clicks:3:1234;1714557600123:0;",
                      -1);
        assert_int_equal(strlen("1;east>west;clicks:3:1234;1714557600123:0;"),
                         42);
        /* ... but only when it is exactly the derived id */
        mkprov(&p, "east:clicks:3:123");
        expect_encode(pol, &p,
                      "1;east>west;clicks:3:1234;1714557600123:7;"
                      "east:clicks:3:123",
                      -1);
        mkprov(&p, "east:clicks:3:12345");
        expect_encode(pol, &p,
                      "1;east>west;clicks:3:1234;1714557600123:7;"
                      "east:clicks:3:12345",
                      -1);
        mkprov(&p, "west:clicks:3:1234");
        expect_encode(pol, &p,
                      "1;east>west;clicks:3:1234;1714557600123:7;"
                      "west:clicks:3:1234",
                      -1);
        /* an id with ';' goes as it is */
        mkprov(&p, ";x;");
        expect_encode(pol, &p, "1;east>west;clicks:3:1234;1714557600123:7;;x;",
                      -1);
        /* a path of one, zeros */
        memset(&p, 0, sizeof(p));
        strcpy(p.origin, "east");
        strcpy(p.path[0], "east");
        p.path_len = 1;
        strcpy(p.src_topic, "t");
        p.id_len = aagw_id_derive("east", "t", 0, 0, p.id, sizeof(p.id));
        expect_encode(pol, &p, "1;east;t:0:0;0:0;", -1);
}

static void test_custom_prefix(void **state) {
        struct aagw_repl_conf c;
        aagw_repl_policy_t   *pol;
        struct aagw_header    h[1];
        struct aagw_prov      p;
        struct aagw_prov_hdrs out;
        (void)state;

        aagw_repl_conf_init(&c);
        c.sites         = three;
        c.site_cnt      = 3;
        c.header_prefix = "x-repl-";
        pol             = must_policy(&c);
        /* aagw.* means nothing to this policy ... */
        h[0] = prov(VALID);
        assert_int_equal(aagw_prov_decode(pol, h, 1, &p), AAGW_REASON_OK);
        assert_int_equal(p.path_len, 0);
        assert_false(aagw_prov_is_own_header(pol, "aagw.prov"));
        /* ... x-repl-prov does */
        h[0].name = "x-repl-prov";
        assert_int_equal(aagw_prov_decode(pol, h, 1, &p), AAGW_REASON_OK);
        expect_fields(&p);
        assert_int_equal(aagw_prov_encode(pol, &p, &out), AAGW_OK);
        assert_int_equal(out.cnt, 1);
        assert_string_equal(out.hdrs[0].name, "x-repl-prov");
        assert_int_equal(out.hdrs[0].size, strlen(VALID));
        assert_memory_equal(out.hdrs[0].value, VALID, strlen(VALID));
        assert_true(aagw_prov_is_own_header(pol, "x-repl-anything"));
        aagw_repl_policy_destroy(pol);
}

static void test_is_own_header(void **state) {
        aagw_repl_policy_t *pol = *state;

        assert_true(aagw_prov_is_own_header(pol, "aagw.prov"));
        assert_true(aagw_prov_is_own_header(pol, "aagw.origin"));
        assert_true(aagw_prov_is_own_header(pol, "aagw.hop"));
        assert_true(aagw_prov_is_own_header(pol, "aagw.dlq.reason"));
        assert_true(aagw_prov_is_own_header(pol, "aagw.future"));
        assert_true(aagw_prov_is_own_header(pol, "aagw."));
        assert_false(aagw_prov_is_own_header(pol, "aagw"));
        assert_false(aagw_prov_is_own_header(pol, "AAGW.prov"));
        assert_false(aagw_prov_is_own_header(pol, "event-id"));
        assert_false(aagw_prov_is_own_header(pol, NULL));
}

/* ----------------------------- ROUND TRIPS ----------------------------- */

/* Decode what was encoded, and encode it again: same fields, same bytes. */
static void roundtrip(const aagw_repl_policy_t *pol,
                      const struct aagw_prov *p) {
        struct aagw_prov_hdrs a, b;
        struct aagw_prov      q;

        assert_int_equal(aagw_prov_encode(pol, p, &a), AAGW_OK);
        assert_int_equal(a.cnt, 1);
        assert_int_equal(aagw_prov_decode(pol, a.hdrs, a.cnt, &q),
                         AAGW_REASON_OK);
        assert_string_equal(q.origin, p->origin);
        assert_int_equal(q.path_len, p->path_len);
        for (size_t i = 0; i < p->path_len; i++)
                assert_string_equal(q.path[i], p->path[i]);
        assert_int_equal(q.id_len, p->id_len);
        assert_memory_equal(q.id, p->id, p->id_len);
        assert_string_equal(q.src_topic, p->src_topic);
        assert_int_equal(q.src_partition, p->src_partition);
        assert_int_equal(q.src_offset, p->src_offset);
        assert_true(q.hlc == p->hlc);
        assert_int_equal(aagw_prov_encode(pol, &q, &b), AAGW_OK);
        assert_int_equal(a.hdrs[0].size, b.hdrs[0].size);
        assert_memory_equal(a.hdrs[0].value, b.hdrs[0].value, a.hdrs[0].size);
}

static void test_roundtrip_limits(void **state) {
        struct aagw_repl_conf c;
        aagw_repl_policy_t   *pol;
        char                  names16[16][AAGW_ALIAS_MAX + 1];
        const char           *sites[16];
        struct aagw_prov      p;
        struct aagw_prov_hdrs out;
        (void)state;

        /* sixteen 64-byte aliases: the longest path there is */
        for (int i = 0; i < 16; i++) {
                fill(names16[i], 'a', 64);
                names16[i][0] = (char)('A' + i);
                sites[i]      = names16[i];
        }
        aagw_repl_conf_init(&c);
        c.sites    = sites;
        c.site_cnt = 16;
        pol        = must_policy(&c);
        memset(&p, 0, sizeof(p));
        strcpy(p.origin, sites[0]);
        for (int i = 0; i < 16; i++)
                strcpy(p.path[i], sites[i]);
        p.path_len = 16;
        /* 1024 bytes of every value, NUL and ';' included */
        for (int i = 0; i < AAGW_ID_MAX; i++)
                p.id[i] = (char)(i * 7);
        p.id_len = AAGW_ID_MAX;
        fill(p.src_topic, 'T', AAGW_TOPIC_MAX);
        p.src_partition = INT32_MAX;
        p.src_offset    = INT64_MAX;
        p.hlc           = UINT64_MAX;
        roundtrip(pol, &p);
        assert_int_equal(aagw_prov_validate(pol, &p, sites[15]),
                         AAGW_REASON_OK);
        /* the longest value there is: 2 + 1039 + 1 + 280 + 1 + 21 + 1 +
         * 1024 bytes */
        assert_int_equal(aagw_prov_encode(pol, &p, &out), AAGW_OK);
        assert_int_equal(out.hdrs[0].size, 2369);
        /* the same with the derived id: 1024 bytes shorter */
        p.id_len = aagw_id_derive(p.origin, p.src_topic, p.src_partition,
                                  p.src_offset, p.id, sizeof(p.id));
        roundtrip(pol, &p);
        assert_int_equal(aagw_prov_encode(pol, &p, &out), AAGW_OK);
        assert_int_equal(out.hdrs[0].size, 2369 - 1024);

        /* the smallest */
        memset(&p, 0, sizeof(p));
        strcpy(p.origin, "A");
        strcpy(p.path[0], "A");
        p.path_len = 1;
        p.id[0]    = '\0';
        p.id_len   = 1;
        strcpy(p.src_topic, "t");
        roundtrip(pol, &p);
        expect_encode(pol, &p, "1;A;t:0:0;0:0;\0", 15);
        aagw_repl_policy_destroy(pol);
}

static void test_roundtrip_random(void **state) {
        aagw_repl_policy_t *pol = *state;
        uint64_t            x   = 0xdeadbeefcafef00dull;
        static const char   tchars[] =
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";

        for (int n = 0; n < 2000; n++) {
                struct aagw_prov p;
                size_t           tl;
#define NEXT() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
                memset(&p, 0, sizeof(p));
                p.path_len = 1 + NEXT() % 3;
                for (size_t i = 0; i < p.path_len; i++)
                        strcpy(p.path[i], three[(i + n) % 3]);
                strcpy(p.origin, p.path[0]);
                tl = 3 + NEXT() % (AAGW_TOPIC_MAX - 3);
                for (size_t i = 0; i < tl; i++)
                        p.src_topic[i] = tchars[NEXT() % (sizeof(tchars) - 1)];
                p.src_topic[tl] = '\0';
                p.src_partition = (int32_t)(NEXT() & INT32_MAX);
                p.src_offset    = (int64_t)(NEXT() & INT64_MAX);
                p.hlc           = NEXT();
                if (n % 4 == 0) {
                        p.id_len = aagw_id_derive(
                            p.origin, p.src_topic, p.src_partition,
                            p.src_offset, p.id, sizeof(p.id));
                } else {
                        p.id_len = 1 + NEXT() % AAGW_ID_MAX;
                        for (size_t i = 0; i < p.id_len; i++)
                                p.id[i] = n % 4 == 1 ? ";:>"[NEXT() % 3]
                                                     : (char)NEXT();
                }
                roundtrip(pol, &p);
#undef NEXT
        }
}

static void test_encode_refuses_invalid(void **state) {
        aagw_repl_policy_t   *pol = *state;
        struct aagw_prov      good, p;
        struct aagw_prov_hdrs out;

        memset(&good, 0, sizeof(good));
        strcpy(good.origin, "east");
        strcpy(good.path[0], "east");
        strcpy(good.path[1], "west");
        good.path_len = 2;
        good.id[0]    = 'x';
        good.id_len   = 1;
        strcpy(good.src_topic, "clicks");
        assert_int_equal(aagw_prov_encode(pol, &good, &out), AAGW_OK);

#define REFUSE(mutation)                                                       \
        do {                                                                   \
                p = good;                                                      \
                mutation;                                                      \
                assert_int_equal(aagw_prov_encode(pol, &p, &out),              \
                                 AAGW_ERR_INVAL);                              \
        } while (0)
        REFUSE(p.path_len = 0);
        REFUSE(p.path_len = 17);
        REFUSE(strcpy(p.origin, "ea st"));
        REFUSE(strcpy(p.origin, "west"));
        REFUSE(strcpy(p.path[1], "east"));
        REFUSE(strcpy(p.path[1], ""));
        REFUSE(memset(p.path[1], 'a', sizeof(p.path[1])));
        REFUSE(memset(p.origin, 'a', sizeof(p.origin)));
        REFUSE(p.id_len = 0);
        REFUSE(p.id_len = AAGW_ID_MAX + 1);
        REFUSE(strcpy(p.src_topic, "a/b"));
        REFUSE(strcpy(p.src_topic, "a;b"));
        REFUSE(strcpy(p.src_topic, ".."));
        REFUSE(p.src_partition = -1);
        REFUSE(p.src_offset = -1);
#undef REFUSE
        assert_int_equal(aagw_prov_encode(NULL, &good, &out), AAGW_ERR_INVAL);
        assert_int_equal(aagw_prov_encode(pol, NULL, &out), AAGW_ERR_INVAL);
        assert_int_equal(aagw_prov_encode(pol, &good, NULL), AAGW_ERR_INVAL);
}

/* ---------------------------- HOSTILE HEADERS -------------------------- */

#define A64 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define TAIL ";clicks:3:4;1:0;"

/* Whole values (value, len; len -1 means strlen). */
static const struct {
        const char   *value;
        int           len;
        aagw_reason_t want;
} value_cases[] = {
    /* the version */
    {"", -1, AAGW_REASON_PROV_VERSION},
    {"0;east;clicks:3:4;1:0;", -1, AAGW_REASON_PROV_VERSION},
    {"2;east;clicks:3:4;1:0;", -1, AAGW_REASON_PROV_VERSION},
    {"2", -1, AAGW_REASON_PROV_VERSION},
    {"11;east;clicks:3:4;1:0;", -1, AAGW_REASON_PROV_VERSION},
    {"1:east;clicks:3:4;1:0;", -1, AAGW_REASON_PROV_VERSION},
    {" 1;east;clicks:3:4;1:0;", -1, AAGW_REASON_PROV_VERSION},
    {";1;east;clicks:3:4;1:0;", -1, AAGW_REASON_PROV_VERSION},
    {"east", -1, AAGW_REASON_PROV_VERSION},
    {"\0;east;clicks:3:4;1:0;", 22, AAGW_REASON_PROV_VERSION},
    /* missing fields: the value ends before the ';' that ends the hlc */
    {"1", -1, AAGW_REASON_PROV_INCOMPLETE},
    {"1;", -1, AAGW_REASON_PROV_INCOMPLETE},
    {"1;east>west", -1, AAGW_REASON_PROV_INCOMPLETE},
    {"1;east>west;", -1, AAGW_REASON_PROV_INCOMPLETE},
    {"1;east>west;clicks:3:4", -1, AAGW_REASON_PROV_INCOMPLETE},
    {"1;east>west;clicks:3:4;", -1, AAGW_REASON_PROV_INCOMPLETE},
    {"1;east>west;clicks:3:4;1:0", -1, AAGW_REASON_PROV_INCOMPLETE},
    /* a bad field before the value ends is reported as such */
    {"1;ea st", -1, AAGW_REASON_PROV_INCOMPLETE},
    {"1;ea st;", -1, AAGW_REASON_PROV_PATH_INVALID},
    {"1;east;clicks:x", -1, AAGW_REASON_PROV_INCOMPLETE},
    {"1;east;clicks:x:4;", -1, AAGW_REASON_PROV_SRC_PARTITION_INVALID},
    /* the path */
    {"1;" TAIL, -1, AAGW_REASON_PROV_PATH_INVALID},
    {"1;east>" TAIL, -1, AAGW_REASON_PROV_PATH_INVALID},
    {"1;>east" TAIL, -1, AAGW_REASON_PROV_PATH_INVALID},
    {"1;east>>west" TAIL, -1, AAGW_REASON_PROV_PATH_INVALID},
    {"1;east>we st" TAIL, -1, AAGW_REASON_PROV_PATH_INVALID},
    {"1;east,west" TAIL, -1, AAGW_REASON_PROV_PATH_INVALID},
    {"1;east:west" TAIL, -1, AAGW_REASON_PROV_PATH_INVALID},
    {"1;\xc3\xa9st" TAIL, -1, AAGW_REASON_PROV_PATH_INVALID},
    {"1;east>west\0;clicks:3:4;1:0;", 28, AAGW_REASON_PROV_PATH_INVALID},
    {"1;" A64 "a" TAIL, -1, AAGW_REASON_PROV_PATH_INVALID},
    {"1;east>" A64 "a" TAIL, -1, AAGW_REASON_PROV_PATH_INVALID},
    {"1;" A64 ">west" TAIL, -1, AAGW_REASON_OK},
    {"1;a>b>c>d>e>f>g>h>i>j>k>l>m>n>o>p>q" TAIL, -1,
     AAGW_REASON_PROV_PATH_TOO_LONG},
    /* invalid hops before the 17th are reported as such */
    {"1;a>b>c>d>e>f>g>h>i>j>k>l>m>n>o>p>q>" TAIL, -1,
     AAGW_REASON_PROV_PATH_TOO_LONG},
    {"1;a> >c>d>e>f>g>h>i>j>k>l>m>n>o>p>q" TAIL, -1,
     AAGW_REASON_PROV_PATH_INVALID},
    /* src */
    {"1;east;clicks;1:0;", -1, AAGW_REASON_PROV_SRC_INVALID},
    {"1;east;clicks:3;1:0;", -1, AAGW_REASON_PROV_SRC_INVALID},
    {"1;east;;1:0;", -1, AAGW_REASON_PROV_SRC_INVALID},
    {"1;east;:3:4;1:0;", -1, AAGW_REASON_PROV_SRC_INVALID},
    {"1;east;cl/icks:3:4;1:0;", -1, AAGW_REASON_PROV_SRC_INVALID},
    {"1;east;..:3:4;1:0;", -1, AAGW_REASON_PROV_SRC_INVALID},
    {"1;east;.:3:4;1:0;", -1, AAGW_REASON_PROV_SRC_INVALID},
    {"1;east;clicks:x:4;1:0;", -1, AAGW_REASON_PROV_SRC_PARTITION_INVALID},
    {"1;east;clicks::4;1:0;", -1, AAGW_REASON_PROV_SRC_PARTITION_INVALID},
    {"1;east;clicks:-1:4;1:0;", -1, AAGW_REASON_PROV_SRC_PARTITION_INVALID},
    {"1;east;clicks:+1:4;1:0;", -1, AAGW_REASON_PROV_SRC_PARTITION_INVALID},
    {"1;east;clicks:03:4;1:0;", -1, AAGW_REASON_PROV_SRC_PARTITION_INVALID},
    {"1;east;clicks:2147483648:4;1:0;", -1,
     AAGW_REASON_PROV_SRC_PARTITION_INVALID},
    {"1;east;clicks: 3:4;1:0;", -1, AAGW_REASON_PROV_SRC_PARTITION_INVALID},
    {"1;east;clicks:3:;1:0;", -1, AAGW_REASON_PROV_SRC_OFFSET_INVALID},
    {"1;east;clicks:3:x;1:0;", -1, AAGW_REASON_PROV_SRC_OFFSET_INVALID},
    {"1;east;clicks:3:-4;1:0;", -1, AAGW_REASON_PROV_SRC_OFFSET_INVALID},
    {"1;east;clicks:3:4:5;1:0;", -1, AAGW_REASON_PROV_SRC_OFFSET_INVALID},
    {"1;east;clicks:3:9223372036854775808;1:0;", -1,
     AAGW_REASON_PROV_SRC_OFFSET_INVALID},
    {"1;east;clicks:3:4\n;1:0;", -1, AAGW_REASON_PROV_SRC_OFFSET_INVALID},
    /* hlc */
    {"1;east;clicks:3:4;;", -1, AAGW_REASON_PROV_HLC_INVALID},
    {"1;east;clicks:3:4;abc;", -1, AAGW_REASON_PROV_HLC_INVALID},
    {"1;east;clicks:3:4;1714557600123;", -1, AAGW_REASON_PROV_HLC_INVALID},
    {"1;east;clicks:3:4;1:70000;", -1, AAGW_REASON_PROV_HLC_INVALID},
    {"1;east;clicks:3:4;0x10:0;", -1, AAGW_REASON_PROV_HLC_INVALID},
    {"1;east;clicks:3:4;281474976710656:0;", -1, AAGW_REASON_PROV_HLC_INVALID},
    {"1;east;clicks:3:4;01:0;", -1, AAGW_REASON_PROV_HLC_INVALID},
    {"1;east;clicks:3:4;112499205189795847;", -1,
     AAGW_REASON_PROV_HLC_INVALID},
    /* 22 bytes with no ';': too long to be a clock, missing fields or not */
    {"1;east;clicks:3:4;1234567890123456789012", -1,
     AAGW_REASON_PROV_HLC_INVALID},
    {"1;east;clicks:3:4;123456789012345678901", -1,
     AAGW_REASON_PROV_INCOMPLETE},
};

static void test_hostile_values(void **state) {
        aagw_repl_policy_t *pol = *state;

        for (size_t i = 0; i < ARRAY_LEN(value_cases); i++) {
                struct aagw_header h[1];
                struct aagw_prov   p;
                aagw_reason_t      got;
                const char        *v = value_cases[i].value;

                h[0] = prov_n(v, value_cases[i].len < 0
                                     ? strlen(v)
                                     : (size_t)value_cases[i].len);
                p.path_len = 9;
                got        = aagw_prov_decode(pol, h, 1, &p);
                if (got != value_cases[i].want)
                        fail_msg("case %zu (\"%s\"): got %s, want %s", i, v,
                                 aagw_reason_name(got),
                                 aagw_reason_name(value_cases[i].want));
                if (got != AAGW_REASON_OK)
                        assert_int_equal(p.path_len, 0);
        }
}

/* Values far past their limits: refused once a field exceeds its limit,
 * without scanning the rest. */
static void test_oversized(void **state) {
        aagw_repl_policy_t *pol = *state;
        static char         big[1 << 20];
        static const struct {
                const char   *head; /* then 'a' up to len bytes */
                size_t        len;
                aagw_reason_t want;
        } cases[] = {
            {"", sizeof(big), AAGW_REASON_PROV_VERSION},
            {"1;", sizeof(big), AAGW_REASON_PROV_PATH_TOO_LONG},
            {"1;", 2 + 16 * 65, AAGW_REASON_PROV_PATH_TOO_LONG},
            {"1;east;", sizeof(big), AAGW_REASON_PROV_SRC_TOO_LONG},
            {"1;east;", 7 + 281, AAGW_REASON_PROV_SRC_TOO_LONG},
            {"1;east;clicks:3:4;", sizeof(big), AAGW_REASON_PROV_HLC_INVALID},
            {"1;east;clicks:3:4;1:0;", 22 + 1025,
             AAGW_REASON_PROV_ID_TOO_LONG},
            {"1;east;clicks:3:4;1:0;", sizeof(big),
             AAGW_REASON_PROV_ID_TOO_LONG},
            {"1;east;clicks:3:4;1:0;", 22 + 1024, AAGW_REASON_OK},
        };

        for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
                struct aagw_header h[1];
                size_t             hl = strlen(cases[i].head);

                memset(big, 'a', sizeof(big));
                memcpy(big, cases[i].head, hl);
                h[0] = prov_n(big, cases[i].len);
                expect_decode(pol, h, 1, cases[i].want);
        }
}

/* The longest accepted value of each field. */
static void test_at_limits(void **state) {
        aagw_repl_policy_t *pol = *state;
        struct aagw_header  h[1];
        struct aagw_prov    p;
        static char         v[4096];
        char                id[1025], topic[251], path[1040];
        size_t              n;

        fill(topic, 't', 249);
        fill(id, 'i', 1024);
        id[0] = ';';
        strcpy(path, "a>b>c>d>e>f>g>h>i>j>k>l>m>n>o>" A64);
        n = (size_t)snprintf(v, sizeof(v),
                             "1;%s;%s:2147483647:9223372036854775807;"
                             "281474976710655:65535;%s",
                             path, topic, id);
        assert_int_equal(n, 2 + 94 + 1 + 280 + 1 + 21 + 1 + 1024);
        h[0] = prov_n(v, n);
        assert_int_equal(aagw_prov_decode(pol, h, 1, &p), AAGW_REASON_OK);
        assert_string_equal(p.origin, "a");
        assert_int_equal(p.id_len, 1024);
        assert_memory_equal(p.id, id, 1024);
        assert_int_equal(strlen(p.src_topic), 249);
        assert_int_equal(p.src_partition, INT32_MAX);
        assert_int_equal(p.src_offset, INT64_MAX);
        assert_true(p.hlc == UINT64_MAX);
        assert_int_equal(p.path_len, 16);
        assert_string_equal(p.path[15], A64);
        /* syntactically fine, but not consistent */
        assert_int_equal(aagw_prov_validate(pol, &p, NULL),
                         AAGW_REASON_PROV_ORIGIN_UNKNOWN);
        /* one byte more in any field is too much */
        fill(topic, 't', 250);
        n    = (size_t)snprintf(v, sizeof(v), "1;east;%s:0:0;0:0;", topic);
        h[0] = prov_n(v, n);
        expect_decode(pol, h, 1, AAGW_REASON_PROV_SRC_INVALID);
}

static void test_header_set(void **state) {
        aagw_repl_policy_t *pol = *state;
        struct aagw_header  h[4];

        /* null-valued */
        h[0] = prov(NULL);
        expect_decode(pol, h, 1, AAGW_REASON_PROV_NULL_VALUE);
        h[0] = hdr("event-id", "e-1");
        h[1] = prov(NULL);
        expect_decode(pol, h, 2, AAGW_REASON_PROV_NULL_VALUE);
        /* twice, even with the same value, wherever they come */
        h[0] = prov(VALID);
        h[1] = prov(VALID);
        expect_decode(pol, h, 2, AAGW_REASON_PROV_DUPLICATE);
        h[0] = prov(VALID);
        h[1] = hdr("event-id", "e-1");
        h[2] = hdr("aagw.origin", "east");
        h[3] = prov("1;west;clicks:0:0;0:0;");
        expect_decode(pol, h, 4, AAGW_REASON_PROV_DUPLICATE);
        /* a repeat that is null: the repeat is seen first */
        h[0] = prov(VALID);
        h[1] = prov(NULL);
        expect_decode(pol, h, 2, AAGW_REASON_PROV_DUPLICATE);
        /* a null header that is then repeated: the null is seen first */
        h[0] = prov(NULL);
        h[1] = prov(VALID);
        expect_decode(pol, h, 2, AAGW_REASON_PROV_NULL_VALUE);
        /* header-set problems come before value problems */
        h[0] = prov("2;bad");
        h[1] = prov("");
        expect_decode(pol, h, 2, AAGW_REASON_PROV_DUPLICATE);
        /* the value's fields in wire order: path before hlc before id */
        h[0] = prov("1;ea st;clicks:3:4;x;");
        expect_decode(pol, h, 1, AAGW_REASON_PROV_PATH_INVALID);
        h[0] = prov("1;east;x;x;");
        expect_decode(pol, h, 1, AAGW_REASON_PROV_SRC_INVALID);
        /* a NULL header name is skipped, not dereferenced */
        h[0]       = prov(VALID);
        h[1].name  = NULL;
        h[1].value = "x";
        h[1].size  = 1;
        expect_decode(pol, h, 2, AAGW_REASON_OK);
}

/* Many headers: linear, and the decision is the same. */
static void test_many_headers(void **state) {
        aagw_repl_policy_t       *pol = *state;
        static struct aagw_header h[100001];
        struct aagw_prov          p;

        for (size_t i = 0; i < 100000; i++)
                h[i] = hdr(i % 2 ? "aagw.noise" : "aagw.origin", "v");
        h[100000] = prov(VALID);
        assert_int_equal(aagw_prov_decode(pol, h, 100001, &p), AAGW_REASON_OK);
        expect_fields(&p);
        h[7] = prov("x");
        assert_int_equal(aagw_prov_decode(pol, h, 100001, &p),
                         AAGW_REASON_PROV_DUPLICATE);
}

/* ------------------------------ VALIDATION ----------------------------- */

static void test_forged_paths(void **state) {
        aagw_repl_policy_t *pol = *state;
        static const struct {
                const char   *path, *site;
                aagw_reason_t want;
        } cases[] = {
            {"east>west", "west", AAGW_REASON_OK},
            {"east", "east", AAGW_REASON_OK},
            {"east>west>north", "north", AAGW_REASON_OK},
            {"mars>west", "west", AAGW_REASON_PROV_ORIGIN_UNKNOWN},
            {"mars", "mars", AAGW_REASON_PROV_ORIGIN_UNKNOWN},
            {"east>mars>west", "west", AAGW_REASON_PROV_PATH_UNKNOWN_SITE},
            {"east>west>east", "east", AAGW_REASON_PROV_PATH_REPEATS_SITE},
            {"east>east", "east", AAGW_REASON_PROV_PATH_REPEATS_SITE},
            /* the first offending hop decides */
            {"east>mars>east", "east", AAGW_REASON_PROV_PATH_UNKNOWN_SITE},
            {"east>east>mars", "mars", AAGW_REASON_PROV_PATH_REPEATS_SITE},
            /* consistent, but not where we read it */
            {"east>west", "north", AAGW_REASON_PROV_PATH_NOT_AT_SITE},
            {"east>west", "east", AAGW_REASON_PROV_PATH_NOT_AT_SITE},
            {"east", "west", AAGW_REASON_PROV_PATH_NOT_AT_SITE},
            {"west>east", "west", AAGW_REASON_PROV_PATH_NOT_AT_SITE},
        };

        for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
                struct aagw_header h[1];
                struct aagw_prov   p;
                aagw_reason_t      got;
                char               v[256];

                snprintf(v, sizeof(v), "1;%s;clicks:3:1234;1:0;",
                         cases[i].path);
                h[0] = prov(v);
                assert_int_equal(aagw_prov_decode(pol, h, 1, &p),
                                 AAGW_REASON_OK);
                assert_string_equal(p.origin, p.path[0]);
                got = aagw_prov_validate(pol, &p, cases[i].site);
                if (got != cases[i].want)
                        fail_msg("path %s at %s: got %s, want %s",
                                 cases[i].path, cases[i].site,
                                 aagw_reason_name(got),
                                 aagw_reason_name(cases[i].want));
        }
}

static void test_allow_unknown_sites(void **state) {
        struct aagw_repl_conf c;
        aagw_repl_policy_t   *pol;
        struct aagw_header    h[1];
        struct aagw_prov      p;
        (void)state;

        aagw_repl_conf_init(&c);
        c.sites               = three;
        c.site_cnt            = 3;
        c.allow_unknown_sites = true;
        pol                   = must_policy(&c);
        h[0] = prov("1;mars>venus>west;clicks:3:1234;1:0;");
        assert_int_equal(aagw_prov_decode(pol, h, 1, &p), AAGW_REASON_OK);
        assert_string_equal(p.origin, "mars");
        assert_int_equal(aagw_prov_validate(pol, &p, "west"), AAGW_REASON_OK);
        /* the structural rules still hold */
        h[0] = prov("1;mars>venus>mars>west;clicks:3:1234;1:0;");
        assert_int_equal(aagw_prov_decode(pol, h, 1, &p), AAGW_REASON_OK);
        assert_int_equal(aagw_prov_validate(pol, &p, "west"),
                         AAGW_REASON_PROV_PATH_REPEATS_SITE);
        aagw_repl_policy_destroy(pol);
}

/* ------------------------------- REASONS ------------------------------- */

static void test_reason_strings(void **state) {
        (void)state;
        for (int i = 0; i < AAGW_REASON_COUNT; i++) {
                const char *n = aagw_reason_name((aagw_reason_t)i);
                assert_non_null(n);
                assert_true(strlen(n) > 1);
                assert_true(strspn(n, "abcdefghijklmnopqrstuvwxyz_") ==
                            strlen(n));
                assert_true(strlen(aagw_reason_str((aagw_reason_t)i)) > 5);
                for (int j = 0; j < i; j++)
                        assert_string_not_equal(
                            n, aagw_reason_name((aagw_reason_t)j));
        }
        assert_string_equal(
            aagw_reason_name(AAGW_REASON_PROV_PATH_REPEATS_SITE),
            "prov_path_repeats_site");
        assert_string_equal(aagw_reason_str(AAGW_REASON_PROV_DUPLICATE),
                            "the provenance header appears twice");
        /* the tokens metrics and dead letters carry */
        assert_string_equal(aagw_reason_name(AAGW_REASON_PROV_VERSION),
                            "prov_version");
        assert_string_equal(aagw_reason_name(AAGW_REASON_PROV_NULL_VALUE),
                            "prov_null_value");
        assert_string_equal(aagw_reason_name(AAGW_REASON_PROV_INCOMPLETE),
                            "prov_incomplete");
        assert_string_equal(aagw_reason_name(AAGW_REASON_PROV_ID_TOO_LONG),
                            "prov_id_too_long");
        assert_string_equal(aagw_reason_name(AAGW_REASON_PROV_ORIGIN_UNKNOWN),
                            "prov_origin_unknown");
        assert_string_equal(aagw_reason_name(AAGW_REASON_COUNT), "unknown");
        assert_string_equal(aagw_reason_name((aagw_reason_t)-1), "unknown");
        assert_string_equal(aagw_reason_str(AAGW_REASON_COUNT),
                            "unknown reason");
        for (int i = 0; i < AAGW_SKIP_COUNT; i++) {
                const char *n = aagw_skip_name((aagw_skip_t)i);
                assert_true(strlen(n) > 1);
                assert_true(strlen(aagw_skip_str((aagw_skip_t)i)) > 5);
                for (int j = 0; j < i; j++)
                        assert_string_not_equal(n,
                                                aagw_skip_name((aagw_skip_t)j));
        }
        assert_string_equal(aagw_skip_name(AAGW_SKIP_PATH_HAS_TARGET),
                            "path_has_target");
        assert_string_equal(aagw_skip_name(AAGW_SKIP_COUNT), "unknown");
        assert_string_equal(aagw_skip_str(AAGW_SKIP_COUNT), "unknown cause");
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_decode_valid),
            cmocka_unit_test(test_decode_derived_id),
            cmocka_unit_test(test_decode_raw_id),
            cmocka_unit_test(test_decode_absent),
            cmocka_unit_test(test_encode_exact),
            cmocka_unit_test(test_custom_prefix),
            cmocka_unit_test(test_is_own_header),
            cmocka_unit_test(test_roundtrip_limits),
            cmocka_unit_test(test_roundtrip_random),
            cmocka_unit_test(test_encode_refuses_invalid),
            cmocka_unit_test(test_hostile_values),
            cmocka_unit_test(test_oversized),
            cmocka_unit_test(test_at_limits),
            cmocka_unit_test(test_header_set),
            cmocka_unit_test(test_many_headers),
            cmocka_unit_test(test_forged_paths),
            cmocka_unit_test(test_allow_unknown_sites),
            cmocka_unit_test(test_reason_strings),
        };
        return cmocka_run_group_tests_name("provenance", tests, setup,
                                           teardown);
}
