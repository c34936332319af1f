/* tests/policy/test_provenance.c: provenance headers: the wire format,
 * round trips, and every class of hostile header with its exact reason. */
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

enum { F_ORIGIN, F_PATH, F_ID, F_SRC, F_HLC };

static const char *const names[] = {"aagw.origin", "aagw.path", "aagw.id",
                                    "aagw.src", "aagw.hlc"};

/* A valid header set: west holds a record east wrote. */
static void valid_set(struct aagw_header h[5]) {
        h[F_ORIGIN] = hdr(names[F_ORIGIN], "east");
        h[F_PATH]   = hdr(names[F_PATH], "east>west");
        h[F_ID]     = hdr(names[F_ID], "id-1");
        h[F_SRC]    = hdr(names[F_SRC], "clicks:3:1234");
        h[F_HLC]    = hdr(names[F_HLC], "1714557600123:7");
}

static void expect_fields(const struct aagw_prov *p) {
        assert_string_equal(p->origin, "east");
        assert_int_equal(p->path_len, 2);
        assert_string_equal(p->path[0], "east");
        assert_string_equal(p->path[1], "west");
        assert_int_equal(p->id_len, 4);
        assert_memory_equal(p->id, "id-1", 4);
        assert_string_equal(p->src_topic, "clicks");
        assert_int_equal(p->src_partition, 3);
        assert_int_equal(p->src_offset, 1234);
        assert_true(p->hlc == aagw_hlc_make(1714557600123, 7));
}

/* -------------------------------- BASICS ------------------------------- */

static void test_decode_valid(void **state) {
        aagw_repl_policy_t *pol = *state;
        struct aagw_header  h[8];
        struct aagw_prov    p;

        valid_set(h);
        assert_int_equal(aagw_prov_decode(pol, h, 5, &p), AAGW_REASON_OK);
        expect_fields(&p);
        assert_int_equal(aagw_prov_validate(pol, &p, "west"), AAGW_REASON_OK);
        assert_int_equal(aagw_prov_validate(pol, &p, NULL), AAGW_REASON_OK);

        /* Any order, mixed with the producer's own headers. */
        h[7]        = h[F_ORIGIN];
        h[5]        = h[F_PATH];
        h[6]        = h[F_HLC];
        h[F_ORIGIN] = hdr("event-id", "e-1");
        h[F_PATH]   = hdr("aagwx.origin", "west");
        h[F_HLC]    = hdr("trace", NULL);
        assert_int_equal(aagw_prov_decode(pol, h, 8, &p), AAGW_REASON_OK);
        expect_fields(&p);
}

static void test_decode_absent(void **state) {
        aagw_repl_policy_t *pol = *state;
        struct aagw_header  h[4];
        struct aagw_prov    p;

        p.path_len = 9;
        assert_int_equal(aagw_prov_decode(pol, NULL, 0, &p), AAGW_REASON_OK);
        assert_int_equal(p.path_len, 0);
        h[0] = hdr("event-id", "e-1");
        h[1] = hdr("x", NULL);
        /* unknown names under the prefix are reserved, and ignored */
        h[2]       = hdr("aagw.future", "v2");
        h[3]       = hdr("aagw.", "");
        p.path_len = 9;
        assert_int_equal(aagw_prov_decode(pol, h, 4, &p), AAGW_REASON_OK);
        assert_int_equal(p.path_len, 0);
        /* nothing to check in no provenance */
        assert_int_equal(aagw_prov_validate(pol, &p, "west"), AAGW_REASON_OK);
}

static void test_encode_exact(void **state) {
        aagw_repl_policy_t   *pol = *state;
        struct aagw_prov      p;
        struct aagw_prov_hdrs out;

        memset(&p, 0, sizeof(p));
        strcpy(p.origin, "east");
        strcpy(p.path[0], "east");
        strcpy(p.path[1], "west");
        strcpy(p.path[2], "north");
        p.path_len = 3;
        memcpy(p.id, "id-1", 4);
        p.id_len = 4;
        strcpy(p.src_topic, "clicks");
        p.src_partition = 3;
        p.src_offset    = 1234;
        p.hlc           = aagw_hlc_make(1714557600123, 7);
        assert_int_equal(aagw_prov_encode(pol, &p, &out), AAGW_OK);
        assert_int_equal(out.cnt, 5);
        for (size_t i = 0; i < 5; i++)
                assert_string_equal(out.hdrs[i].name, names[i]);
        assert_int_equal(out.hdrs[0].size, 4);
        assert_memory_equal(out.hdrs[0].value, "east", 4);
        assert_int_equal(out.hdrs[1].size, 15);
        assert_memory_equal(out.hdrs[1].value, "east>west>north", 15);
        assert_int_equal(out.hdrs[2].size, 4);
        assert_memory_equal(out.hdrs[2].value, "id-1", 4);
        assert_int_equal(out.hdrs[3].size, 13);
        assert_memory_equal(out.hdrs[3].value, "clicks:3:1234", 13);
        assert_int_equal(out.hdrs[4].size, 15);
        assert_memory_equal(out.hdrs[4].value, "1714557600123:7", 15);
}

static void test_custom_prefix(void **state) {
        struct aagw_repl_conf c;
        aagw_repl_policy_t   *pol;
        struct aagw_header    h[5];
        struct aagw_prov      p;
        struct aagw_prov_hdrs out;
        (void)state;

        aagw_repl_conf_init(&c);
        c.sites         = three;
        c.site_cnt      = 3;
        c.header_prefix = "x-repl-";
        pol             = must_policy(&c);
        valid_set(h);
        /* aagw.* means nothing to this policy ... */
        assert_int_equal(aagw_prov_decode(pol, h, 5, &p), AAGW_REASON_OK);
        assert_int_equal(p.path_len, 0);
        assert_false(aagw_prov_is_own_header(pol, "aagw.origin"));
        /* ... x-repl-* does */
        h[0].name = "x-repl-origin";
        h[1].name = "x-repl-path";
        h[2].name = "x-repl-id";
        h[3].name = "x-repl-src";
        h[4].name = "x-repl-hlc";
        assert_int_equal(aagw_prov_decode(pol, h, 5, &p), AAGW_REASON_OK);
        expect_fields(&p);
        assert_int_equal(aagw_prov_encode(pol, &p, &out), AAGW_OK);
        assert_string_equal(out.hdrs[0].name, "x-repl-origin");
        assert_string_equal(out.hdrs[4].name, "x-repl-hlc");
        assert_true(aagw_prov_is_own_header(pol, "x-repl-anything"));
        aagw_repl_policy_destroy(pol);
}

static void test_is_own_header(void **state) {
        aagw_repl_policy_t *pol = *state;

        assert_true(aagw_prov_is_own_header(pol, "aagw.origin"));
        assert_true(aagw_prov_is_own_header(pol, "aagw.future"));
        assert_true(aagw_prov_is_own_header(pol, "aagw."));
        assert_false(aagw_prov_is_own_header(pol, "aagw"));
        assert_false(aagw_prov_is_own_header(pol, "AAGW.origin"));
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
        for (size_t i = 0; i < a.cnt; i++) {
                assert_int_equal(a.hdrs[i].size, b.hdrs[i].size);
                assert_memory_equal(a.hdrs[i].value, b.hdrs[i].value,
                                    a.hdrs[i].size);
        }
}

static void test_roundtrip_limits(void **state) {
        struct aagw_repl_conf c;
        aagw_repl_policy_t   *pol;
        char                  names16[16][AAGW_ALIAS_MAX + 1];
        const char           *sites[16];
        struct aagw_prov      p;
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
        /* 1024 bytes of every value, NUL included */
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

        /* the smallest */
        memset(&p, 0, sizeof(p));
        strcpy(p.origin, "A");
        strcpy(p.path[0], "A");
        p.path_len = 1;
        p.id[0]    = '\0';
        p.id_len   = 1;
        strcpy(p.src_topic, "t");
        roundtrip(pol, &p);
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
                p.id_len = 1 + NEXT() % AAGW_ID_MAX;
                for (size_t i = 0; i < p.id_len; i++)
                        p.id[i] = (char)NEXT();
                tl = 3 + NEXT() % (AAGW_TOPIC_MAX - 3);
                for (size_t i = 0; i < tl; i++)
                        p.src_topic[i] = tchars[NEXT() % (sizeof(tchars) - 1)];
                p.src_topic[tl] = '\0';
                p.src_partition = (int32_t)(NEXT() & INT32_MAX);
                p.src_offset    = (int64_t)(NEXT() & INT64_MAX);
                p.hlc           = NEXT();
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
        REFUSE(strcpy(p.src_topic, ".."));
        REFUSE(p.src_partition = -1);
        REFUSE(p.src_offset = -1);
#undef REFUSE
        assert_int_equal(aagw_prov_encode(NULL, &good, &out), AAGW_ERR_INVAL);
        assert_int_equal(aagw_prov_encode(pol, NULL, &out), AAGW_ERR_INVAL);
        assert_int_equal(aagw_prov_encode(pol, &good, NULL), AAGW_ERR_INVAL);
}

/* ---------------------------- HOSTILE HEADERS -------------------------- */

/* One field replaced by (value, len); len -1 means strlen. */
static const struct {
        int           field;
        const char   *value;
        int           len;
        aagw_reason_t want;
} field_cases[] = {
    {F_ORIGIN, "", -1, AAGW_REASON_PROV_ORIGIN_INVALID},
    {F_ORIGIN, "ea st", -1, AAGW_REASON_PROV_ORIGIN_INVALID},
    {F_ORIGIN, "east\0x", 6, AAGW_REASON_PROV_ORIGIN_INVALID},
    {F_ORIGIN, "east,west", -1, AAGW_REASON_PROV_ORIGIN_INVALID},
    {F_ORIGIN, "\xc3\xa9st", -1, AAGW_REASON_PROV_ORIGIN_INVALID},
    {F_ORIGIN,
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", -1,
     AAGW_REASON_PROV_ORIGIN_TOO_LONG},
    {F_PATH, "", -1, AAGW_REASON_PROV_PATH_INVALID},
    {F_PATH, "east>", -1, AAGW_REASON_PROV_PATH_INVALID},
    {F_PATH, ">east", -1, AAGW_REASON_PROV_PATH_INVALID},
    {F_PATH, "east>>west", -1, AAGW_REASON_PROV_PATH_INVALID},
    {F_PATH, "east>we st", -1, AAGW_REASON_PROV_PATH_INVALID},
    {F_PATH, "east,west", -1, AAGW_REASON_PROV_PATH_INVALID},
    {F_PATH, "east>west\0", 10, AAGW_REASON_PROV_PATH_INVALID},
    {F_PATH,
     "east>aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
     -1, AAGW_REASON_PROV_PATH_INVALID},
    {F_PATH, "a>b>c>d>e>f>g>h>i>j>k>l>m>n>o>p>q", -1,
     AAGW_REASON_PROV_PATH_TOO_LONG},
    /* invalid hops before the 17th are reported as such */
    {F_PATH, "a>b>c>d>e>f>g>h>i>j>k>l>m>n>o>p>q>", -1,
     AAGW_REASON_PROV_PATH_TOO_LONG},
    {F_PATH, "a> >c>d>e>f>g>h>i>j>k>l>m>n>o>p>q", -1,
     AAGW_REASON_PROV_PATH_INVALID},
    {F_ID, "", -1, AAGW_REASON_PROV_ID_EMPTY},
    {F_SRC, "clicks", -1, AAGW_REASON_PROV_SRC_INVALID},
    {F_SRC, "clicks:3", -1, AAGW_REASON_PROV_SRC_INVALID},
    {F_SRC, "", -1, AAGW_REASON_PROV_SRC_INVALID},
    {F_SRC, ":3:4", -1, AAGW_REASON_PROV_SRC_INVALID},
    {F_SRC, "cl/icks:3:4", -1, AAGW_REASON_PROV_SRC_INVALID},
    {F_SRC, "..:3:4", -1, AAGW_REASON_PROV_SRC_INVALID},
    {F_SRC, ".:3:4", -1, AAGW_REASON_PROV_SRC_INVALID},
    {F_SRC, "clicks:x:4", -1, AAGW_REASON_PROV_SRC_PARTITION_INVALID},
    {F_SRC, "clicks::4", -1, AAGW_REASON_PROV_SRC_PARTITION_INVALID},
    {F_SRC, "clicks:-1:4", -1, AAGW_REASON_PROV_SRC_PARTITION_INVALID},
    {F_SRC, "clicks:+1:4", -1, AAGW_REASON_PROV_SRC_PARTITION_INVALID},
    {F_SRC, "clicks:03:4", -1, AAGW_REASON_PROV_SRC_PARTITION_INVALID},
    {F_SRC, "clicks:2147483648:4", -1, AAGW_REASON_PROV_SRC_PARTITION_INVALID},
    {F_SRC, "clicks: 3:4", -1, AAGW_REASON_PROV_SRC_PARTITION_INVALID},
    {F_SRC, "clicks:3:", -1, AAGW_REASON_PROV_SRC_OFFSET_INVALID},
    {F_SRC, "clicks:3:x", -1, AAGW_REASON_PROV_SRC_OFFSET_INVALID},
    {F_SRC, "clicks:3:-4", -1, AAGW_REASON_PROV_SRC_OFFSET_INVALID},
    {F_SRC, "clicks:3:4:5", -1, AAGW_REASON_PROV_SRC_OFFSET_INVALID},
    {F_SRC, "clicks:3:9223372036854775808", -1,
     AAGW_REASON_PROV_SRC_OFFSET_INVALID},
    {F_SRC, "clicks:3:4\n", -1, AAGW_REASON_PROV_SRC_OFFSET_INVALID},
    {F_HLC, "", -1, AAGW_REASON_PROV_HLC_INVALID},
    {F_HLC, "abc", -1, AAGW_REASON_PROV_HLC_INVALID},
    {F_HLC, "1714557600123", -1, AAGW_REASON_PROV_HLC_INVALID},
    {F_HLC, "1:70000", -1, AAGW_REASON_PROV_HLC_INVALID},
    {F_HLC, "0x10:0", -1, AAGW_REASON_PROV_HLC_INVALID},
    {F_HLC, "281474976710656:0", -1, AAGW_REASON_PROV_HLC_INVALID},
    {F_HLC, "112499205189795847", -1, AAGW_REASON_PROV_HLC_INVALID},
};

static void test_hostile_fields(void **state) {
        aagw_repl_policy_t *pol = *state;

        for (size_t i = 0; i < ARRAY_LEN(field_cases); i++) {
                struct aagw_header h[5];
                struct aagw_prov   p;
                aagw_reason_t      got;
                int                f = field_cases[i].field;

                valid_set(h);
                h[f].value = field_cases[i].value;
                h[f].size  = field_cases[i].len < 0
                                 ? strlen(field_cases[i].value)
                                 : (size_t)field_cases[i].len;
                got        = aagw_prov_decode(pol, h, 5, &p);
                if (got != field_cases[i].want)
                        fail_msg("case %zu (%s = \"%s\"): got %s, want %s", i,
                                 names[f], field_cases[i].value,
                                 aagw_reason_name(got),
                                 aagw_reason_name(field_cases[i].want));
                assert_int_equal(p.path_len, 0);
        }
}

/* Values far past their limits: refused by length, without a scan. */
static void test_oversized(void **state) {
        aagw_repl_policy_t *pol = *state;
        static char         big[1 << 20];
        static const struct {
                int           field;
                size_t        len;
                aagw_reason_t want;
        } cases[] = {
            {F_ORIGIN, 65, AAGW_REASON_PROV_ORIGIN_TOO_LONG},
            {F_ORIGIN, sizeof(big), AAGW_REASON_PROV_ORIGIN_TOO_LONG},
            {F_PATH, 16 * 65, AAGW_REASON_PROV_PATH_TOO_LONG},
            {F_PATH, sizeof(big), AAGW_REASON_PROV_PATH_TOO_LONG},
            {F_ID, 1025, AAGW_REASON_PROV_ID_TOO_LONG},
            {F_ID, sizeof(big), AAGW_REASON_PROV_ID_TOO_LONG},
            {F_SRC, 281, AAGW_REASON_PROV_SRC_TOO_LONG},
            {F_SRC, sizeof(big), AAGW_REASON_PROV_SRC_TOO_LONG},
            {F_HLC, sizeof(big), AAGW_REASON_PROV_HLC_INVALID},
        };

        memset(big, 'a', sizeof(big));
        for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
                struct aagw_header h[5];
                struct aagw_prov   p;
                valid_set(h);
                h[cases[i].field].value = big;
                h[cases[i].field].size  = cases[i].len;
                assert_int_equal(aagw_prov_decode(pol, h, 5, &p),
                                 cases[i].want);
        }
}

/* The longest accepted values of each field. */
static void test_at_limits(void **state) {
        aagw_repl_policy_t *pol = *state;
        struct aagw_header  h[5];
        struct aagw_prov    p;
        char                origin[65], id[1025], src[300];

        valid_set(h);
        h[F_ORIGIN] = hdr(names[F_ORIGIN], fill(origin, 'o', 64));
        h[F_ID]     = hdr(names[F_ID], fill(id, 'i', 1024));
        fill(src, 't', 249);
        strcat(src, ":2147483647:9223372036854775807");
        assert_int_equal(strlen(src), 280);
        h[F_SRC]  = hdr(names[F_SRC], src);
        h[F_HLC]  = hdr(names[F_HLC], "281474976710655:65535");
        h[F_PATH] = hdr(names[F_PATH], "a>b>c>d>e>f>g>h>i>j>k>l>m>n>o>p");
        assert_int_equal(aagw_prov_decode(pol, h, 5, &p), AAGW_REASON_OK);
        assert_int_equal(strlen(p.origin), 64);
        assert_int_equal(p.id_len, 1024);
        assert_int_equal(strlen(p.src_topic), 249);
        assert_int_equal(p.src_partition, INT32_MAX);
        assert_int_equal(p.src_offset, INT64_MAX);
        assert_true(p.hlc == UINT64_MAX);
        assert_int_equal(p.path_len, 16);
        assert_string_equal(p.path[15], "p");
        /* syntactically fine, but not consistent */
        assert_int_equal(aagw_prov_validate(pol, &p, NULL),
                         AAGW_REASON_PROV_ORIGIN_UNKNOWN);
}

static void test_header_set(void **state) {
        aagw_repl_policy_t *pol = *state;
        struct aagw_header  h[8];
        struct aagw_prov    p;

        /* null-valued */
        for (int f = 0; f < 5; f++) {
                valid_set(h);
                h[f].value = NULL;
                h[f].size  = 0;
                assert_int_equal(aagw_prov_decode(pol, h, 5, &p),
                                 AAGW_REASON_PROV_NULL_VALUE);
        }
        /* repeated, even with the same value, wherever it comes */
        for (int f = 0; f < 5; f++) {
                valid_set(h);
                h[5] = h[f];
                assert_int_equal(aagw_prov_decode(pol, h, 6, &p),
                                 AAGW_REASON_PROV_DUPLICATE);
                h[5] = h[4];
                h[4] = h[f];
                assert_int_equal(aagw_prov_decode(pol, h, 6, &p),
                                 AAGW_REASON_PROV_DUPLICATE);
        }
        /* a repeated header that is null: the repeat is seen first */
        valid_set(h);
        h[5] = hdr(names[F_ID], NULL);
        assert_int_equal(aagw_prov_decode(pol, h, 6, &p),
                         AAGW_REASON_PROV_DUPLICATE);
        /* a null header that is then repeated: the null is seen first */
        valid_set(h);
        h[5]    = h[F_ID];
        h[F_ID] = hdr(names[F_ID], NULL);
        assert_int_equal(aagw_prov_decode(pol, h, 6, &p),
                         AAGW_REASON_PROV_NULL_VALUE);
        /* header-set problems come before field problems */
        valid_set(h);
        h[F_ORIGIN] = hdr(names[F_ORIGIN], "bad alias!");
        h[5]        = h[F_HLC];
        assert_int_equal(aagw_prov_decode(pol, h, 6, &p),
                         AAGW_REASON_PROV_DUPLICATE);
        /* incomplete: any strict subset */
        for (unsigned mask = 1; mask < 31; mask++) {
                struct aagw_header all[5], sub[5];
                size_t             n = 0;
                valid_set(all);
                for (int f = 0; f < 5; f++)
                        if (mask & (1u << f))
                                sub[n++] = all[f];
                assert_int_equal(aagw_prov_decode(pol, sub, n, &p),
                                 AAGW_REASON_PROV_INCOMPLETE);
        }
        /* fields are checked in wire order: origin before hlc */
        valid_set(h);
        h[F_HLC]    = hdr(names[F_HLC], "x");
        h[F_ORIGIN] = hdr(names[F_ORIGIN], "");
        assert_int_equal(aagw_prov_decode(pol, h, 5, &p),
                         AAGW_REASON_PROV_ORIGIN_INVALID);
        h[F_ORIGIN] = hdr(names[F_ORIGIN], "east");
        h[F_SRC]    = hdr(names[F_SRC], "x");
        assert_int_equal(aagw_prov_decode(pol, h, 5, &p),
                         AAGW_REASON_PROV_SRC_INVALID);
        /* a NULL header name is skipped, not dereferenced */
        valid_set(h);
        h[5].name  = NULL;
        h[5].value = "x";
        h[5].size  = 1;
        assert_int_equal(aagw_prov_decode(pol, h, 6, &p), AAGW_REASON_OK);
}

/* Many headers: linear, and the decision is the same. */
static void test_many_headers(void **state) {
        aagw_repl_policy_t       *pol = *state;
        static struct aagw_header h[100005];
        struct aagw_prov          p;

        for (size_t i = 0; i < 100000; i++)
                h[i] = hdr("aagw.noise", "v");
        valid_set(h + 100000);
        assert_int_equal(aagw_prov_decode(pol, h, 100005, &p), AAGW_REASON_OK);
        expect_fields(&p);
        h[7] = hdr(names[F_PATH], "x");
        assert_int_equal(aagw_prov_decode(pol, h, 100005, &p),
                         AAGW_REASON_PROV_DUPLICATE);
}

/* ------------------------------ VALIDATION ----------------------------- */

static void test_forged_paths(void **state) {
        aagw_repl_policy_t *pol = *state;
        static const struct {
                const char   *origin, *path, *site;
                aagw_reason_t want;
        } cases[] = {
            {"east", "east>west", "west", AAGW_REASON_OK},
            {"east", "east", "east", AAGW_REASON_OK},
            {"east", "east>west>north", "north", AAGW_REASON_OK},
            {"mars", "mars>west", "west", AAGW_REASON_PROV_ORIGIN_UNKNOWN},
            {"mars", "east>west", "west", AAGW_REASON_PROV_ORIGIN_UNKNOWN},
            {"east", "west>east", "east",
             AAGW_REASON_PROV_PATH_NOT_FROM_ORIGIN},
            {"east", "west", "west", AAGW_REASON_PROV_PATH_NOT_FROM_ORIGIN},
            {"east", "east>mars>west", "west",
             AAGW_REASON_PROV_PATH_UNKNOWN_SITE},
            {"east", "east>west>east", "east",
             AAGW_REASON_PROV_PATH_REPEATS_SITE},
            {"east", "east>east", "east", AAGW_REASON_PROV_PATH_REPEATS_SITE},
            /* the first offending hop decides */
            {"east", "east>mars>east", "east",
             AAGW_REASON_PROV_PATH_UNKNOWN_SITE},
            {"east", "east>east>mars", "mars",
             AAGW_REASON_PROV_PATH_REPEATS_SITE},
            /* consistent, but not where we read it */
            {"east", "east>west", "north", AAGW_REASON_PROV_PATH_NOT_AT_SITE},
            {"east", "east>west", "east", AAGW_REASON_PROV_PATH_NOT_AT_SITE},
            {"east", "east", "west", AAGW_REASON_PROV_PATH_NOT_AT_SITE},
        };

        for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
                struct aagw_header h[5];
                struct aagw_prov   p;
                aagw_reason_t      got;
                valid_set(h);
                h[F_ORIGIN] = hdr(names[F_ORIGIN], cases[i].origin);
                h[F_PATH]   = hdr(names[F_PATH], cases[i].path);
                assert_int_equal(aagw_prov_decode(pol, h, 5, &p),
                                 AAGW_REASON_OK);
                got = aagw_prov_validate(pol, &p, cases[i].site);
                if (got != cases[i].want)
                        fail_msg("origin %s path %s at %s: got %s, want %s",
                                 cases[i].origin, cases[i].path, cases[i].site,
                                 aagw_reason_name(got),
                                 aagw_reason_name(cases[i].want));
        }
}

static void test_allow_unknown_sites(void **state) {
        struct aagw_repl_conf c;
        aagw_repl_policy_t   *pol;
        struct aagw_header    h[5];
        struct aagw_prov      p;
        (void)state;

        aagw_repl_conf_init(&c);
        c.sites               = three;
        c.site_cnt            = 3;
        c.allow_unknown_sites = true;
        pol                   = must_policy(&c);
        valid_set(h);
        h[F_ORIGIN] = hdr(names[F_ORIGIN], "mars");
        h[F_PATH]   = hdr(names[F_PATH], "mars>venus>west");
        assert_int_equal(aagw_prov_decode(pol, h, 5, &p), AAGW_REASON_OK);
        assert_int_equal(aagw_prov_validate(pol, &p, "west"), AAGW_REASON_OK);
        /* the structural rules still hold */
        h[F_PATH] = hdr(names[F_PATH], "mars>venus>mars>west");
        assert_int_equal(aagw_prov_decode(pol, h, 5, &p), AAGW_REASON_OK);
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
                            "a provenance header appears twice");
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
            cmocka_unit_test(test_decode_absent),
            cmocka_unit_test(test_encode_exact),
            cmocka_unit_test(test_custom_prefix),
            cmocka_unit_test(test_is_own_header),
            cmocka_unit_test(test_roundtrip_limits),
            cmocka_unit_test(test_roundtrip_random),
            cmocka_unit_test(test_encode_refuses_invalid),
            cmocka_unit_test(test_hostile_fields),
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
