/* tests/policy/test_verdict.c: per-record verdicts, each loop-prevention
 * mechanism alone, bad-provenance actions, and whole-topology simulations
 * that show each mechanism stops loops by itself. */
#include "policy_test.h"

static const char *const two[]   = {"east", "west"};
static const char *const three[] = {"east", "west", "north"};
static const char *const four[]  = {"east", "west", "north", "south"};

#define NO_TOPIC AAGW_VERDICT_F_NO_TOPIC_CHECK
#define NO_HEADER AAGW_VERDICT_F_NO_HEADER_CHECK

static aagw_repl_policy_t *pol_ex(const char *const *sites, size_t n,
                                  aagw_naming_t naming, bool multi_hop,
                                  aagw_bad_action_t bad,
                                  aagw_bad_action_t missing) {
        struct aagw_repl_conf c;

        aagw_repl_conf_init(&c);
        c.sites             = sites;
        c.site_cnt          = n;
        c.naming            = naming;
        c.multi_hop         = multi_hop;
        c.on_bad_provenance = bad;
        c.on_missing_id     = missing;
        return must_policy(&c);
}

static aagw_repl_policy_t *pol_of(const char *const *sites, size_t n,
                                  aagw_naming_t naming, bool multi_hop) {
        return pol_ex(sites, n, naming, multi_hop, AAGW_BAD_DEAD_LETTER,
                      AAGW_BAD_PASS);
}

static struct aagw_rec mkrec(const char *topic, const struct aagw_header *h,
                             size_t n) {
        struct aagw_rec r = {0};
        r.topic           = topic;
        r.partition       = 3;
        r.offset          = 1234;
        r.timestamp_ms    = 1714557600123;
        r.key             = "k";
        r.key_len         = 1;
        r.value           = "{\"id\":\"j-1\"}";
        r.value_len       = strlen(r.value);
        r.hdrs            = h;
        r.hdr_cnt         = n;
        return r;
}

/* Valid provenance of a record path[0] wrote, now at the end of 'path',
 * with the explicit id "id-1".  The value lives until the next call. */
static void prov_set(struct aagw_header *h, const char *path) {
        static char v[512];

        snprintf(v, sizeof(v), "1;%s;clicks:3:1234;1714557600123:7;id-1",
                 path);
        h[0] = hdr("aagw.prov", v);
}

/* The outgoing provenance is exactly the one header aagw.prov = 'want',
 * and it decodes and validates at the target. */
static void expect_out(const aagw_repl_policy_t  *pol,
                       const struct aagw_verdict *v, const char *target,
                       const char *want) {
        struct aagw_prov p;

        assert_int_equal(v->kind, AAGW_VERDICT_REPLICATE);
        assert_int_equal(v->hdrs.cnt, 1);
        assert_string_equal(v->hdrs.hdrs[0].name, "aagw.prov");
        if (v->hdrs.hdrs[0].size != strlen(want) ||
            memcmp(v->hdrs.hdrs[0].value, want, strlen(want)))
                fail_msg("aagw.prov: got \"%.*s\", want \"%s\"",
                         (int)v->hdrs.hdrs[0].size,
                         (const char *)v->hdrs.hdrs[0].value, want);
        assert_int_equal(aagw_prov_decode(pol, v->hdrs.hdrs, v->hdrs.cnt, &p),
                         AAGW_REASON_OK);
        assert_int_equal(aagw_prov_validate(pol, &p, target), AAGW_REASON_OK);
}

static void verdict(const aagw_repl_policy_t *pol, const char *src,
                    const char *dst, const struct aagw_rec *r,
                    const aagw_id_rule_t *rule, unsigned flags,
                    struct aagw_verdict *v) {
        assert_int_equal(aagw_repl_verdict(pol, src, dst, r, rule, flags, v),
                         AAGW_OK);
}

/* ------------------------------- BASICS -------------------------------- */

static void test_fresh_record(void **state) {
        aagw_repl_policy_t *pol = pol_of(two, 2, AAGW_NAMING_PREFIX, false);
        struct aagw_verdict v;
        struct aagw_header  h[1] = {{"event-id", "e-1", 3}};
        struct aagw_rec     r    = mkrec("clicks", h, 1);
        (void)state;

        verdict(pol, "east", "west", &r, NULL, 0, &v);
        assert_true(v.fresh);
        assert_int_equal(v.reason, AAGW_REASON_OK);
        assert_int_equal(v.id_reason, AAGW_REASON_OK);
        assert_int_equal(v.skip, AAGW_SKIP_NONE);
        expect_out(pol, &v, "west",
                   "1;east>west;clicks:3:1234;1714557600123:0;");
        assert_string_equal(v.prov.origin, "east");
        assert_int_equal(v.prov.path_len, 2);
        /* every flag combination stamps the same for a local record */
        for (unsigned f = 0; f < 4; f++) {
                verdict(pol, "east", "west", &r, NULL, f, &v);
                expect_out(pol, &v, "west",
                   "1;east>west;clicks:3:1234;1714557600123:0;");
        }
        /* the draft format's five names are reserved, not provenance: a
         * producer's copies of them make no difference */
        {
                struct aagw_header d[6] = {
                    {"aagw.origin", "west", 4},
                    {"aagw.path", "west>east", 9},
                    {"aagw.id", "forged", 6},
                    {"aagw.src", "x:0:0", 5},
                    {"aagw.hlc", "1:1", 3},
                    {"event-id", "e-1", 3},
                };
                struct aagw_rec rd = mkrec("clicks", d, 6);
                verdict(pol, "east", "west", &rd, NULL, 0, &v);
                assert_true(v.fresh);
                assert_int_equal(v.reason, AAGW_REASON_OK);
                expect_out(pol, &v, "west",
                           "1;east>west;clicks:3:1234;1714557600123:0;");
        }
        /* no timestamp: the clock starts at zero; a huge one clamps */
        r.timestamp_ms = -1;
        verdict(pol, "east", "west", &r, NULL, 0, &v);
        expect_out(pol, &v, "west",
                   "1;east>west;clicks:3:1234;0:0;");
        r.timestamp_ms = INT64_MAX;
        verdict(pol, "east", "west", &r, NULL, 0, &v);
        expect_out(pol, &v, "west",
                   "1;east>west;clicks:3:1234;281474976710655:0;");
        aagw_repl_policy_destroy(pol);
}

static void test_fresh_id_rules(void **state) {
        aagw_repl_policy_t *pol  = pol_of(two, 2, AAGW_NAMING_PREFIX, false);
        struct aagw_header  h[1] = {{"event-id", "e-1", 3}};
        struct aagw_rec     r    = mkrec("clicks", h, 1);
        struct aagw_verdict v;
        static const struct {
                const char *spec, *prov;
        } cases[] = {
            {"header:event-id", "1;east>west;clicks:3:1234;1714557600123:0;e-1"},
            {"key", "1;east>west;clicks:3:1234;1714557600123:0;k"},
            {"json:id", "1;east>west;clicks:3:1234;1714557600123:0;j-1"},
            /* the derived id is not spelled out */
            {"derived", "1;east>west;clicks:3:1234;1714557600123:0;"}};
        (void)state;

        for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
                char            err[128];
                aagw_id_rule_t *rule =
                    aagw_id_rule_new(cases[i].spec, err, sizeof(err));
                assert_non_null(rule);
                verdict(pol, "east", "west", &r, rule, 0, &v);
                expect_out(pol, &v, "west", cases[i].prov);
                aagw_id_rule_destroy(rule);
        }
        aagw_repl_policy_destroy(pol);
}

/* Valid provenance is carried, whatever the id rule would say now. */
static void test_keeps_provenance(void **state) {
        aagw_repl_policy_t *pol = pol_of(three, 3, AAGW_NAMING_IDENTITY, true);
        struct aagw_header  h[6];
        struct aagw_rec     r;
        struct aagw_verdict v;
        char                err[128];
        aagw_id_rule_t     *rule = aagw_id_rule_new("key", err, sizeof(err));
        (void)state;

        prov_set(h, "east>west");
        h[1] = hdr("event-id", "e-1");
        r    = mkrec("clicks", h, 2);
        verdict(pol, "west", "north", &r, rule, 0, &v);
        assert_false(v.fresh);
        expect_out(pol, &v, "north",
                   "1;east>west>north;clicks:3:1234;1714557600123:7;id-1");
        aagw_id_rule_destroy(rule);
        aagw_repl_policy_destroy(pol);
}

/* --------------------------- ONE MECHANISM ----------------------------- */

enum hdrs_kind { NONE, VALID, HOSTILE };

struct vcase {
        const char *const  *sites;
        size_t              nsites;
        aagw_naming_t       naming;
        bool                multi_hop;
        const char         *source, *target, *topic;
        enum hdrs_kind      hk;
        const char         *origin, *path; /* VALID; origin = path[0] */
        aagw_verdict_kind_t kind;
        aagw_skip_t         skip;
        const char         *out_origin, *out_path; /* REPLICATE */
};

#define P AAGW_NAMING_PREFIX
#define I AAGW_NAMING_IDENTITY
#define REP AAGW_VERDICT_REPLICATE
#define SKP AAGW_VERDICT_SKIP

static void run_cases(const struct vcase *cases, size_t n, unsigned flags) {
        for (size_t i = 0; i < n; i++) {
                const struct vcase *c = &cases[i];
                aagw_repl_policy_t *pol =
                    pol_of(c->sites, c->nsites, c->naming, c->multi_hop);
                struct aagw_header  h[1];
                size_t              nh = 0;
                char                want[128];
                struct aagw_rec     r;
                struct aagw_verdict v;

                if (c->hk == VALID) {
                        assert_int_equal(strncmp(c->path, c->origin,
                                                 strlen(c->origin)),
                                         0);
                        prov_set(h, c->path);
                        nh = 1;
                } else if (c->hk == HOSTILE) {
                        prov_set(h, "east>>west");
                        nh = 1;
                }
                r = mkrec(c->topic, h, nh);
                verdict(pol, c->source, c->target, &r, NULL, flags, &v);
                if (v.kind != c->kind || v.skip != c->skip)
                        fail_msg("case %zu (%s -> %s, %s): got %d/%s, want "
                                 "%d/%s",
                                 i, c->source, c->target, c->topic, v.kind,
                                 aagw_skip_name(v.skip), c->kind,
                                 aagw_skip_name(c->skip));
                if (c->kind == REP) {
                        assert_string_equal(v.prov.origin, c->out_origin);
                        assert_int_equal(v.hdrs.cnt, 1);
                        snprintf(want, sizeof(want), "1;%s;", c->out_path);
                        assert_true(v.hdrs.hdrs[0].size > strlen(want));
                        assert_memory_equal(v.hdrs.hdrs[0].value, want,
                                            strlen(want));
                } else {
                        assert_int_equal(v.hdrs.cnt, 0);
                }
                aagw_repl_policy_destroy(pol);
        }
}

/* Topic names alone: provenance headers are ignored, valid or not. */
static void test_topic_check_alone(void **state) {
        static const struct vcase cases[] = {
            /* west's copy of east's clicks never goes back to east, with or
             * without headers */
            {two, 2, P, false, "west", "east", "east.clicks", VALID, "east",
             "east>west", SKP, AAGW_SKIP_TOPIC_FROM_TARGET, NULL, NULL},
            {two, 2, P, false, "west", "east", "east.clicks", NONE, NULL, NULL,
             SKP, AAGW_SKIP_TOPIC_FROM_TARGET, NULL, NULL},
            {two, 2, P, true, "west", "east", "east.clicks", NONE, NULL, NULL,
             SKP, AAGW_SKIP_TOPIC_FROM_TARGET, NULL, NULL},
            /* a local name: the header mechanism would skip it, this one
             * does not look */
            {two, 2, P, false, "west", "east", "clicks", VALID, "east",
             "east>west", REP, AAGW_SKIP_NONE, "west", "west>east"},
            {two, 2, P, false, "west", "east", "clicks", HOSTILE, NULL, NULL,
             REP, AAGW_SKIP_NONE, "west", "west>east"},
            {three, 3, P, false, "west", "north", "east.clicks", NONE, NULL,
             NULL, SKP, AAGW_SKIP_REMOTE_TOPIC, NULL, NULL},
            {three, 3, P, true, "west", "north", "east.clicks", VALID, "east",
             "east>west", REP, AAGW_SKIP_NONE, "west", "west>north"},
            {three, 3, P, true, "north", "west", "west.east.clicks", NONE, NULL,
             NULL, SKP, AAGW_SKIP_TOPIC_FROM_TARGET, NULL, NULL},
            {three, 3, P, true, "north", "east", "west.east.clicks", NONE, NULL,
             NULL, SKP, AAGW_SKIP_TOPIC_FROM_TARGET, NULL, NULL},
            {three, 3, P, true, "east", "west", "north.east.clicks", NONE, NULL,
             NULL, SKP, AAGW_SKIP_CHAIN_REPEATS_SITE, NULL, NULL},
            /* identity names say nothing: alone, this mechanism cannot
             * stop an identity loop (see the simulation below) */
            {two, 2, I, false, "west", "east", "clicks", VALID, "east",
             "east>west", REP, AAGW_SKIP_NONE, "west", "west>east"},
        };
        (void)state;
        run_cases(cases, ARRAY_LEN(cases), NO_HEADER);
}

/* Provenance alone: topic names are not looked at. */
static void test_header_check_alone(void **state) {
        static const struct vcase cases[] = {
            {two, 2, I, false, "west", "east", "clicks", VALID, "east",
             "east>west", SKP, AAGW_SKIP_PATH_HAS_TARGET, NULL, NULL},
            {two, 2, P, false, "west", "east", "east.clicks", VALID, "east",
             "east>west", SKP, AAGW_SKIP_PATH_HAS_TARGET, NULL, NULL},
            /* no headers: the name would have stopped it, this one does
             * not look */
            {two, 2, P, false, "west", "east", "east.clicks", NONE, NULL, NULL,
             REP, AAGW_SKIP_NONE, "west", "west>east"},
            {two, 2, I, false, "east", "west", "clicks", NONE, NULL, NULL, REP,
             AAGW_SKIP_NONE, "east", "east>west"},
            /* three sites: a copy is not copied on without multi_hop */
            {three, 3, I, false, "west", "north", "clicks", VALID, "east",
             "east>west", SKP, AAGW_SKIP_REMOTE_RECORD, NULL, NULL},
            {three, 3, P, false, "west", "north", "east.clicks", VALID, "east",
             "east>west", SKP, AAGW_SKIP_REMOTE_RECORD, NULL, NULL},
            {three, 3, I, true, "west", "north", "clicks", VALID, "east",
             "east>west", REP, AAGW_SKIP_NONE, "east", "east>west>north"},
            {three, 3, I, true, "north", "east", "clicks", VALID, "east",
             "east>west>north", SKP, AAGW_SKIP_PATH_HAS_TARGET, NULL, NULL},
            {three, 3, I, true, "north", "west", "clicks", VALID, "east",
             "east>west>north", SKP, AAGW_SKIP_PATH_HAS_TARGET, NULL, NULL},
            {three, 3, I, false, "north", "west", "clicks", VALID, "east",
             "east>west>north", SKP, AAGW_SKIP_PATH_HAS_TARGET, NULL, NULL},
            /* a record of the source's own, aagw-stamped (unify output
             * style, path of one) is local */
            {three, 3, I, false, "east", "west", "clicks", VALID, "east",
             "east", REP, AAGW_SKIP_NONE, "east", "east>west"},
        };
        (void)state;
        run_cases(cases, ARRAY_LEN(cases), NO_TOPIC);
}

/* Both on: the name decides first, so hostile headers on a topic that is
 * skipped anyway are not even decoded. */
static void test_both_checks(void **state) {
        static const struct vcase cases[] = {
            {two, 2, P, false, "west", "east", "east.clicks", VALID, "east",
             "east>west", SKP, AAGW_SKIP_TOPIC_FROM_TARGET, NULL, NULL},
            {two, 2, P, false, "west", "east", "east.clicks", HOSTILE, NULL,
             NULL, SKP, AAGW_SKIP_TOPIC_FROM_TARGET, NULL, NULL},
            {two, 2, I, false, "west", "east", "clicks", VALID, "east",
             "east>west", SKP, AAGW_SKIP_PATH_HAS_TARGET, NULL, NULL},
            {three, 3, P, true, "west", "north", "east.clicks", VALID, "east",
             "east>west", REP, AAGW_SKIP_NONE, "east", "east>west>north"},
            {three, 3, P, false, "west", "north", "east.clicks", VALID, "east",
             "east>west", SKP, AAGW_SKIP_REMOTE_TOPIC, NULL, NULL},
            {three, 3, I, false, "west", "north", "clicks", VALID, "east",
             "east>west", SKP, AAGW_SKIP_REMOTE_RECORD, NULL, NULL},
        };
        (void)state;
        run_cases(cases, ARRAY_LEN(cases), 0);
}

static void test_path_hop_limit(void **state) {
        char                names[17][8];
        const char         *sites[17];
        char                path[256];
        size_t              k = 0;
        struct aagw_header  h[5];
        struct aagw_rec     r;
        struct aagw_verdict v;
        aagw_repl_policy_t *pol;
        (void)state;

        for (int i = 0; i < 17; i++) {
                snprintf(names[i], sizeof(names[i]), "s%d", i);
                sites[i] = names[i];
        }
        pol = pol_of(sites, 17, AAGW_NAMING_IDENTITY, true);
        /* s0 > ... > s14: fifteen hops, one more fits */
        for (int i = 0; i < 15; i++)
                k += (size_t)snprintf(path + k, sizeof(path) - k, "%ss%d",
                                      i ? ">" : "", i);
        prov_set(h, path);
        r = mkrec("clicks", h, 1);
        verdict(pol, "s14", "s15", &r, NULL, 0, &v);
        assert_int_equal(v.kind, AAGW_VERDICT_REPLICATE);
        assert_int_equal(v.prov.path_len, 16);
        /* sixteen: full */
        strcat(path, ">s15");
        prov_set(h, path);
        verdict(pol, "s15", "s16", &r, NULL, 0, &v);
        assert_int_equal(v.kind, AAGW_VERDICT_SKIP);
        assert_int_equal(v.skip, AAGW_SKIP_TOO_MANY_HOPS);
        aagw_repl_policy_destroy(pol);
}

static void test_name_too_long(void **state) {
        aagw_repl_policy_t *pol = pol_of(two, 2, AAGW_NAMING_PREFIX, false);
        aagw_repl_policy_t *id  = pol_of(two, 2, AAGW_NAMING_IDENTITY, false);
        char                t[250];
        struct aagw_rec     r;
        struct aagw_verdict v;
        (void)state;

        r = mkrec(fill(t, 'a', 245), NULL, 0);
        /* not loop prevention: applies whatever the flags */
        for (unsigned f = 0; f < 4; f++) {
                verdict(pol, "east", "west", &r, NULL, f, &v);
                assert_int_equal(v.kind, AAGW_VERDICT_SKIP);
                assert_int_equal(v.skip, AAGW_SKIP_NAME_TOO_LONG);
        }
        verdict(id, "east", "west", &r, NULL, 0, &v);
        assert_int_equal(v.kind, AAGW_VERDICT_REPLICATE);
        r = mkrec(fill(t, 'a', 244), NULL, 0);
        verdict(pol, "east", "west", &r, NULL, 0, &v);
        assert_int_equal(v.kind, AAGW_VERDICT_REPLICATE);
        aagw_repl_policy_destroy(pol);
        aagw_repl_policy_destroy(id);
}

/* ----------------------------- BAD RECORDS ----------------------------- */

/* West reads these; each is bad in its own way. */
#define GOOD "1;east>west;clicks:3:1234;1714557600123:7;id-1"
static const struct {
        const char   *prov, *extra_name, *extra_value;
        aagw_reason_t want;
} bad_sets[] = {
    {GOOD, "aagw.prov", GOOD, AAGW_REASON_PROV_DUPLICATE},
    {GOOD, "aagw.prov", NULL, AAGW_REASON_PROV_DUPLICATE},
    {NULL, NULL, NULL, AAGW_REASON_PROV_NULL_VALUE},
    {"2;east>west;clicks:3:1234;1714557600123:7;id-1", NULL, NULL,
     AAGW_REASON_PROV_VERSION},
    {"1;east>west;clicks:3:1234;1714557600123:7", NULL, NULL,
     AAGW_REASON_PROV_INCOMPLETE},
    {"1;east>>west;clicks:3:1234;1714557600123:7;id-1", NULL, NULL,
     AAGW_REASON_PROV_PATH_INVALID},
    {"1;mars>west;clicks:3:1234;1714557600123:7;id-1", NULL, NULL,
     AAGW_REASON_PROV_ORIGIN_UNKNOWN},
    {"1;east>mars>west;clicks:3:1234;1714557600123:7;id-1", NULL, NULL,
     AAGW_REASON_PROV_PATH_UNKNOWN_SITE},
    {"1;east>north;clicks:3:1234;1714557600123:7;id-1", NULL, NULL,
     AAGW_REASON_PROV_PATH_NOT_AT_SITE},
    {"1;east>west>north>west;clicks:3:1234;1714557600123:7;id-1", NULL, NULL,
     AAGW_REASON_PROV_PATH_REPEATS_SITE},
    /* the draft format's names are reserved, not provenance */
    {"1;east>north;clicks:3:1234;1714557600123:7;id-1", "aagw.path",
     "east>west", AAGW_REASON_PROV_PATH_NOT_AT_SITE},
};

static void test_bad_provenance_actions(void **state) {
        static const aagw_bad_action_t actions[] = {
            AAGW_BAD_PASS, AAGW_BAD_DEAD_LETTER, AAGW_BAD_FAIL};
        (void)state;

        for (size_t a = 0; a < ARRAY_LEN(actions); a++) {
                aagw_repl_policy_t *pol =
                    pol_ex(three, 3, AAGW_NAMING_IDENTITY, false, actions[a],
                           AAGW_BAD_PASS);
                for (size_t i = 0; i < ARRAY_LEN(bad_sets); i++) {
                        struct aagw_header  h[2];
                        size_t              n = 1;
                        struct aagw_rec     r;
                        struct aagw_verdict v;

                        h[0] = hdr("aagw.prov", bad_sets[i].prov);
                        if (bad_sets[i].extra_name)
                                h[n++] = hdr(bad_sets[i].extra_name,
                                             bad_sets[i].extra_value);
                        r = mkrec("clicks", h, n);
                        verdict(pol, "west", "east", &r, NULL, 0, &v);
                        if (v.reason != bad_sets[i].want)
                                fail_msg("set %zu: got %s, want %s", i,
                                         aagw_reason_name(v.reason),
                                         aagw_reason_name(bad_sets[i].want));
                        if (actions[a] == AAGW_BAD_PASS) {
                                /* stripped: the record is west's own now */
                                assert_true(v.fresh);
                                expect_out(pol, &v, "east",
                   "1;west>east;clicks:3:1234;1714557600123:0;");
                        } else {
                                assert_int_equal(v.kind, AAGW_VERDICT_REJECT);
                                assert_int_equal(v.action, actions[a]);
                                assert_int_equal(v.hdrs.cnt, 0);
                        }
                }
                aagw_repl_policy_destroy(pol);
        }
}

/* The header check off means provenance is not looked at: no REJECT. */
static void test_bad_provenance_ignored_without_header_check(void **state) {
        aagw_repl_policy_t *pol = pol_of(three, 3, AAGW_NAMING_IDENTITY, false);
        struct aagw_header  h[6];
        struct aagw_rec     r;
        struct aagw_verdict v;
        (void)state;

        prov_set(h, "east>west");
        h[1] = hdr("aagw.prov", NULL);
        r    = mkrec("clicks", h, 2);
        verdict(pol, "west", "east", &r, NULL, 0, &v);
        assert_int_equal(v.kind, AAGW_VERDICT_REJECT);
        assert_int_equal(v.reason, AAGW_REASON_PROV_DUPLICATE);
        verdict(pol, "west", "east", &r, NULL, NO_HEADER, &v);
        assert_int_equal(v.reason, AAGW_REASON_OK);
        expect_out(pol, &v, "east",
                   "1;west>east;clicks:3:1234;1714557600123:0;");
        aagw_repl_policy_destroy(pol);
}

static void test_missing_id_actions(void **state) {
        aagw_repl_policy_t *pass = pol_ex(two, 2, AAGW_NAMING_PREFIX, false,
                                          AAGW_BAD_PASS, AAGW_BAD_PASS);
        aagw_repl_policy_t *dlq  = pol_ex(two, 2, AAGW_NAMING_PREFIX, false,
                                          AAGW_BAD_PASS, AAGW_BAD_DEAD_LETTER);
        aagw_repl_policy_t *fail = pol_ex(two, 2, AAGW_NAMING_PREFIX, false,
                                          AAGW_BAD_PASS, AAGW_BAD_FAIL);
        char                err[128];
        aagw_id_rule_t     *rule =
            aagw_id_rule_new("header:event-id", err, sizeof(err));
        struct aagw_header  h[6];
        struct aagw_rec     r = mkrec("clicks", NULL, 0);
        struct aagw_verdict v;
        (void)state;

        /* pass: the derived id stands in, and the caller learns why */
        verdict(pass, "east", "west", &r, rule, 0, &v);
        assert_int_equal(v.id_reason, AAGW_REASON_ID_NO_HEADER);
        assert_int_equal(v.reason, AAGW_REASON_OK);
        expect_out(pass, &v, "west",
                   "1;east>west;clicks:3:1234;1714557600123:0;");
        verdict(dlq, "east", "west", &r, rule, 0, &v);
        assert_int_equal(v.kind, AAGW_VERDICT_REJECT);
        assert_int_equal(v.action, AAGW_BAD_DEAD_LETTER);
        assert_int_equal(v.reason, AAGW_REASON_ID_NO_HEADER);
        assert_int_equal(v.id_reason, AAGW_REASON_ID_NO_HEADER);
        verdict(fail, "east", "west", &r, rule, 0, &v);
        assert_int_equal(v.kind, AAGW_VERDICT_REJECT);
        assert_int_equal(v.action, AAGW_BAD_FAIL);

        /* valid provenance carries its id: the rule is not consulted */
        prov_set(h, "west>east");
        r = mkrec("west.clicks", h, 1);
        verdict(dlq, "east", "west", &r, rule, NO_TOPIC, &v);
        assert_int_equal(v.kind, AAGW_VERDICT_SKIP);
        prov_set(h, "east");
        r = mkrec("clicks", h, 1);
        verdict(dlq, "east", "west", &r, rule, 0, &v);
        assert_int_equal(v.id_reason, AAGW_REASON_OK);
        expect_out(dlq, &v, "west",
                   "1;east>west;clicks:3:1234;1714557600123:7;id-1");

        /* stripped provenance and a missing id: both reported */
        prov_set(h, "east");
        h[1] = hdr("aagw.prov", "1;east;clicks:3:1234;1:1;");
        r    = mkrec("clicks", h, 2);
        verdict(pass, "east", "west", &r, rule, 0, &v);
        assert_int_equal(v.reason, AAGW_REASON_PROV_DUPLICATE);
        assert_int_equal(v.id_reason, AAGW_REASON_ID_NO_HEADER);
        expect_out(pass, &v, "west",
                   "1;east>west;clicks:3:1234;1714557600123:0;");

        aagw_id_rule_destroy(rule);
        aagw_repl_policy_destroy(pass);
        aagw_repl_policy_destroy(dlq);
        aagw_repl_policy_destroy(fail);
}

/* ------------------------------ CALLER BUGS ---------------------------- */

static void test_invalid_calls(void **state) {
        aagw_repl_policy_t   *pol  = pol_of(two, 2, AAGW_NAMING_PREFIX, false);
        struct aagw_header    h[1] = {{"x", "y", 1}};
        struct aagw_rec       r    = mkrec("clicks", NULL, 0), bad;
        struct aagw_verdict   v;
        char                  t[300];
        struct aagw_repl_conf c;
        aagw_repl_policy_t   *open;
        (void)state;

#define INVAL(...)                                                             \
        assert_int_equal(aagw_repl_verdict(__VA_ARGS__), AAGW_ERR_INVAL)
        INVAL(NULL, "east", "west", &r, NULL, 0, &v);
        INVAL(pol, NULL, "west", &r, NULL, 0, &v);
        INVAL(pol, "east", NULL, &r, NULL, 0, &v);
        INVAL(pol, "east", "west", NULL, NULL, 0, &v);
        INVAL(pol, "east", "west", &r, NULL, 0, NULL);
        INVAL(pol, "east", "east", &r, NULL, 0, &v);
        INVAL(pol, "mars", "west", &r, NULL, 0, &v);
        INVAL(pol, "east", "mars", &r, NULL, 0, &v);
        INVAL(pol, "east", "", &r, NULL, 0, &v);
        bad       = r;
        bad.topic = NULL;
        INVAL(pol, "east", "west", &bad, NULL, 0, &v);
        bad.topic = "";
        INVAL(pol, "east", "west", &bad, NULL, 0, &v);
        bad.topic = "a/b";
        INVAL(pol, "east", "west", &bad, NULL, 0, &v);
        bad.topic = fill(t, 'a', 250);
        INVAL(pol, "east", "west", &bad, NULL, 0, &v);
        bad           = r;
        bad.partition = -1;
        INVAL(pol, "east", "west", &bad, NULL, 0, &v);
        bad        = r;
        bad.offset = -1;
        INVAL(pol, "east", "west", &bad, NULL, 0, &v);
        bad         = r;
        bad.hdr_cnt = 1;
        INVAL(pol, "east", "west", &bad, NULL, 0, &v);
        bad.hdrs = h;
        assert_int_equal(
            aagw_repl_verdict(pol, "east", "west", &bad, NULL, 0, &v), AAGW_OK);
#undef INVAL
        assert_int_equal(aagw_prov_resolve(pol, "mars", &r, NULL, 0, &v),
                         AAGW_ERR_INVAL);
        assert_int_equal(aagw_prov_resolve(NULL, "east", &r, NULL, 0, &v),
                         AAGW_ERR_INVAL);

        /* allow_unknown_sites: any alias may be a flow endpoint */
        aagw_repl_conf_init(&c);
        c.sites               = two;
        c.site_cnt            = 2;
        c.allow_unknown_sites = true;
        open                  = must_policy(&c);
        assert_int_equal(
            aagw_repl_verdict(open, "east", "mars", &r, NULL, 0, &v), AAGW_OK);
        assert_int_equal(v.kind, AAGW_VERDICT_REPLICATE);
        assert_int_equal(
            aagw_repl_verdict(open, "east", "ma rs", &r, NULL, 0, &v),
            AAGW_ERR_INVAL);
        aagw_repl_policy_destroy(open);
        aagw_repl_policy_destroy(pol);
}

/* One verdict struct reused: nothing of an earlier outcome leaks. */
static void test_reuse(void **state) {
        aagw_repl_policy_t *pol = pol_of(two, 2, AAGW_NAMING_IDENTITY, false);
        struct aagw_header  h[6];
        struct aagw_rec     r;
        struct aagw_verdict v;
        (void)state;

        memset(&v, 0x5a, sizeof(v));
        r = mkrec("clicks", NULL, 0);
        verdict(pol, "east", "west", &r, NULL, 0, &v);
        assert_int_equal(v.kind, AAGW_VERDICT_REPLICATE);
        assert_int_equal(v.skip, AAGW_SKIP_NONE);
        assert_int_equal(v.reason, AAGW_REASON_OK);
        assert_int_equal(v.id_reason, AAGW_REASON_OK);
        prov_set(h, "east>west");
        r = mkrec("clicks", h, 1);
        verdict(pol, "west", "east", &r, NULL, 0, &v);
        assert_int_equal(v.kind, AAGW_VERDICT_SKIP);
        assert_int_equal(v.hdrs.cnt, 0);
        assert_false(v.fresh);
        h[1] = hdr("aagw.prov", "x");
        r    = mkrec("clicks", h, 2);
        verdict(pol, "west", "east", &r, NULL, 0, &v);
        assert_int_equal(v.kind, AAGW_VERDICT_REJECT);
        assert_int_equal(v.skip, AAGW_SKIP_NONE);
        assert_int_equal(v.hdrs.cnt, 0);
        r = mkrec("clicks", NULL, 0);
        verdict(pol, "east", "west", &r, NULL, 0, &v);
        assert_int_equal(v.kind, AAGW_VERDICT_REPLICATE);
        assert_int_equal(v.reason, AAGW_REASON_OK);
        assert_int_equal(v.action, AAGW_BAD_PASS);
        aagw_repl_policy_destroy(pol);
}

/* ------------------------------- RESOLVE ------------------------------- */

static void test_resolve(void **state) {
        aagw_repl_policy_t *pol = pol_of(two, 2, AAGW_NAMING_PREFIX, false);
        struct aagw_header  h[6];
        struct aagw_rec     r;
        struct aagw_verdict v;
        (void)state;

        /* a local record: fresh, path of one, no headers encoded */
        r = mkrec("clicks", NULL, 0);
        assert_int_equal(aagw_prov_resolve(pol, "east", &r, NULL, 0, &v),
                         AAGW_OK);
        assert_int_equal(v.kind, AAGW_VERDICT_REPLICATE);
        assert_true(v.fresh);
        assert_string_equal(v.prov.origin, "east");
        assert_int_equal(v.prov.path_len, 1);
        assert_string_equal(v.prov.path[0], "east");
        assert_int_equal(v.prov.id_len, 18);
        assert_memory_equal(v.prov.id, "east:clicks:3:1234", 18);
        assert_true(v.prov.hlc == aagw_hlc_make(1714557600123, 0));
        assert_int_equal(v.hdrs.cnt, 0);

        /* west's copy, read at west: provenance as stored */
        prov_set(h, "east>west");
        r = mkrec("east.clicks", h, 1);
        assert_int_equal(aagw_prov_resolve(pol, "west", &r, NULL, 0, &v),
                         AAGW_OK);
        assert_int_equal(v.kind, AAGW_VERDICT_REPLICATE);
        assert_false(v.fresh);
        assert_string_equal(v.prov.origin, "east");
        assert_int_equal(v.prov.path_len, 2);
        assert_memory_equal(v.prov.id, "id-1", 4);

        /* the same record read at east is not where its path ends */
        assert_int_equal(aagw_prov_resolve(pol, "east", &r, NULL, 0, &v),
                         AAGW_OK);
        assert_int_equal(v.kind, AAGW_VERDICT_REJECT);
        assert_int_equal(v.reason, AAGW_REASON_PROV_PATH_NOT_AT_SITE);
        assert_int_equal(v.action, AAGW_BAD_DEAD_LETTER);
        /* the topic check flag means nothing here */
        assert_int_equal(aagw_prov_resolve(pol, "east", &r, NULL, NO_TOPIC, &v),
                         AAGW_OK);
        assert_int_equal(v.kind, AAGW_VERDICT_REJECT);
        assert_int_equal(
            aagw_prov_resolve(pol, "east", &r, NULL, NO_HEADER, &v), AAGW_OK);
        assert_int_equal(v.kind, AAGW_VERDICT_REPLICATE);
        assert_true(v.fresh);
        assert_memory_equal(v.prov.id, "east:east.clicks:3:1234", 23);
        aagw_repl_policy_destroy(pol);
}

/* ----------------------------- SIMULATION ------------------------------ */

/* Replicate one record around a full mesh of sites until nothing moves,
 * the way the replicators would: every copy at every site is offered to
 * every other site.  Returns the number of records in existence, or -1 if
 * it is still growing after SIM_MAX (a loop). */
#define SIM_MAX 200

struct sim_rec {
        size_t             site;
        char               topic[AAGW_TOPIC_MAX + 1];
        struct aagw_header hdrs[AAGW_PROV_HDR_CNT + 1];
        size_t             hdr_cnt;
        char               buf[AAGW_PROV_ENC_MAX];
};

static int simulate(const aagw_repl_policy_t *pol, const char *const *sites,
                    size_t n, unsigned flags) {
        static struct sim_rec recs[SIM_MAX];
        struct aagw_verdict   v;
        size_t                cnt = 1;

        memset(&recs[0], 0, sizeof(recs[0]));
        strcpy(recs[0].topic, "clicks");
        recs[0].hdrs[0] = hdr("event-id", "e-1");
        recs[0].hdr_cnt = 1;
        for (size_t i = 0; i < cnt; i++) {
                for (size_t t = 0; t < n; t++) {
                        struct sim_rec *from = &recs[i], *to;
                        struct aagw_rec r;
                        size_t          pos = 0;

                        if (t == from->site)
                                continue;
                        r = mkrec(from->topic, from->hdrs, from->hdr_cnt);
                        r.offset = (int64_t)i;
                        verdict(pol, sites[from->site], sites[t], &r, NULL,
                                flags, &v);
                        assert_int_not_equal(v.kind, AAGW_VERDICT_REJECT);
                        if (v.kind != AAGW_VERDICT_REPLICATE)
                                continue;
                        if (cnt == SIM_MAX)
                                return -1;
                        to = &recs[cnt++];
                        memset(to, 0, sizeof(*to));
                        to->site = t;
                        assert_int_equal(
                            aagw_repl_remote_topic(pol, sites[from->site],
                                                   from->topic, to->topic,
                                                   sizeof(to->topic)),
                            AAGW_OK);
                        /* the producer's headers, then ours */
                        for (size_t k = 0; k < from->hdr_cnt; k++)
                                if (!aagw_prov_is_own_header(
                                        pol, from->hdrs[k].name))
                                        to->hdrs[to->hdr_cnt++] = from->hdrs[k];
                        for (size_t k = 0; k < v.hdrs.cnt; k++) {
                                struct aagw_header *o = &v.hdrs.hdrs[k];
                                memcpy(to->buf + pos, o->value, o->size);
                                to->hdrs[to->hdr_cnt].name  = o->name;
                                to->hdrs[to->hdr_cnt].value = to->buf + pos;
                                to->hdrs[to->hdr_cnt].size  = o->size;
                                to->hdr_cnt++;
                                pos += o->size;
                        }
                }
        }
        return (int)cnt;
}

static void test_simulated_topologies(void **state) {
        static const struct {
                const char *const *sites;
                size_t             n;
                aagw_naming_t      naming;
                bool               multi_hop;
                unsigned           flags;
                int                want;
        } cases[] = {
            /* both mechanisms, and each alone, under the prefix policy */
            {two, 2, P, false, 0, 2},
            {two, 2, P, false, NO_HEADER, 2},
            {two, 2, P, false, NO_TOPIC, 2},
            {three, 3, P, false, 0, 3},
            {three, 3, P, false, NO_HEADER, 3},
            {three, 3, P, false, NO_TOPIC, 3},
            /* multi_hop: every simple path from the origin, once */
            {three, 3, P, true, 0, 5},
            {three, 3, P, true, NO_HEADER, 5},
            {three, 3, P, true, NO_TOPIC, 5},
            {four, 4, P, false, 0, 4},
            {four, 4, P, true, 0, 16},
            {four, 4, P, true, NO_HEADER, 16},
            {four, 4, P, true, NO_TOPIC, 16},
            /* identity: only provenance can stop a loop */
            {two, 2, I, false, 0, 2},
            {two, 2, I, false, NO_TOPIC, 2},
            {three, 3, I, false, NO_TOPIC, 3},
            {three, 3, I, true, NO_TOPIC, 5},
            {four, 4, I, true, NO_TOPIC, 16},
            /* and the test has teeth: without it, it loops */
            {two, 2, I, false, NO_HEADER, -1},
            {three, 3, I, true, NO_HEADER, -1},
            {three, 3, P, true, NO_HEADER | NO_TOPIC, -1},
        };
        (void)state;

        for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
                aagw_repl_policy_t *pol =
                    pol_of(cases[i].sites, cases[i].n, cases[i].naming,
                           cases[i].multi_hop);
                int got =
                    simulate(pol, cases[i].sites, cases[i].n, cases[i].flags);
                if (got != cases[i].want)
                        fail_msg("case %zu: %d records, want %d", i, got,
                                 cases[i].want);
                aagw_repl_policy_destroy(pol);
        }
}

/* ----------------------------- PER TOPIC ------------------------------ */

/* Same outcome, field for field and byte for byte. */
static void expect_same(const struct aagw_verdict *a,
                        const struct aagw_verdict *b, const char *what) {
        if (a->kind != b->kind || a->skip != b->skip ||
            a->reason != b->reason || a->id_reason != b->id_reason ||
            a->fresh != b->fresh ||
            (a->kind == AAGW_VERDICT_REJECT && a->action != b->action))
                fail_msg("%s: kind %d/%d skip %d/%d reason %d/%d", what,
                         a->kind, b->kind, a->skip, b->skip, a->reason,
                         b->reason);
        if (a->kind != AAGW_VERDICT_REPLICATE)
                return;
        assert_int_equal(a->hdrs.cnt, b->hdrs.cnt);
        assert_int_equal(a->hdrs.hdrs[0].size, b->hdrs.hdrs[0].size);
        if (memcmp(a->hdrs.hdrs[0].value, b->hdrs.hdrs[0].value,
                   a->hdrs.hdrs[0].size))
                fail_msg("%s: aagw.prov differs", what);
}

/* aagw_repl_precheck() once per topic, then PRECHECKED per record, gives
 * what the full verdict gives: every policy kind, flow, topic shape,
 * flag combination and kind of record. */
static void test_precheck_matches_verdict(void **state) {
        char        longt[250];
        const char *topics[] = {"clicks",        "west.clicks",
                                "east.clicks",   "north.west.clicks",
                                "west.east.clicks", "heartbeats",
                                fill(longt, 'a', 245)};
        const char *paths[] = {NULL, "east", "west", "east>west",
                               "north>east", "east>north>west"};
        struct aagw_header h[2];
        size_t             checked = 0, skipped_topics = 0;
        (void)state;

        for (int naming = 0; naming < 2; naming++) {
                for (int hop = 0; hop < 2; hop++) {
                        aagw_repl_policy_t *pol = pol_of(
                            three, 3,
                            naming ? AAGW_NAMING_IDENTITY : AAGW_NAMING_PREFIX,
                            hop);
                        for (size_t s = 0; s < 3; s++)
                        for (size_t d = 0; d < 3; d++) {
                        if (s == d)
                                continue;
                        for (size_t t = 0; t < sizeof(topics) / sizeof(*topics); t++)
                        for (unsigned fl = 0; fl < 4; fl++) {
                                aagw_skip_t c;
                                assert_int_equal(
                                    aagw_repl_precheck(pol, three[s], three[d],
                                                       topics[t], fl, &c),
                                    AAGW_OK);
                                if (c != AAGW_SKIP_NONE)
                                        skipped_topics++;
                                for (size_t k = 0; k < sizeof(paths) / sizeof(*paths); k++) {
                                        struct aagw_verdict a, b;
                                        size_t             n = 0;
                                        if (paths[k])
                                                prov_set(h, paths[k]), n = 1;
                                        struct aagw_rec r = mkrec(topics[t], h, n);
                                        verdict(pol, three[s], three[d], &r,
                                                NULL, fl, &a);
                                        if (c != AAGW_SKIP_NONE) {
                                                assert_int_equal(a.kind, AAGW_VERDICT_SKIP);
                                                assert_int_equal(a.skip, c);
                                                continue;
                                        }
                                        verdict(pol, three[s], three[d], &r,
                                                NULL,
                                                fl | AAGW_VERDICT_F_PRECHECKED,
                                                &b);
                                        expect_same(&a, &b, topics[t]);
                                        checked++;
                                }
                        }
                        }
                        aagw_repl_policy_destroy(pol);
                }
        }
        /* Both branches were taken, many times. */
        assert_true(checked > 1000);
        assert_true(skipped_topics > 100);

        /* What the verdict refuses, the precheck refuses. */
        aagw_repl_policy_t *pol = pol_of(two, 2, AAGW_NAMING_PREFIX, false);
        aagw_skip_t         c;
        assert_int_equal(aagw_repl_precheck(pol, "east", "east", "clicks", 0, &c),
                         AAGW_ERR_INVAL);
        assert_int_equal(aagw_repl_precheck(pol, "east", "mars", "clicks", 0, &c),
                         AAGW_ERR_INVAL);
        assert_int_equal(aagw_repl_precheck(pol, "east", "west", "bad topic", 0,
                                            &c),
                         AAGW_ERR_INVAL);
        assert_int_equal(aagw_repl_precheck(pol, "east", "west", NULL, 0, &c),
                         AAGW_ERR_INVAL);
        assert_int_equal(aagw_repl_precheck(pol, "east", "west", "clicks", 0,
                                            NULL),
                         AAGW_ERR_INVAL);
        /* PRECHECKED still refuses what is wrong with the record itself. */
        struct aagw_rec     r = mkrec("clicks", NULL, 0);
        struct aagw_verdict v;
        r.offset              = -1;
        assert_int_equal(aagw_repl_verdict(pol, "east", "west", &r, NULL,
                                           AAGW_VERDICT_F_PRECHECKED, &v),
                         AAGW_ERR_INVAL);
        aagw_repl_policy_destroy(pol);
}

/* The encoding of resolved provenance is aagw_prov_encode()'s, byte for
 * byte; the id is left out exactly when it is the derived one. */
/* Provenance a producer forged (or an application
 * forwarded from a copy) is valid, but under the prefix policy the topic
 * name contradicts its path: the verdict is unchanged (skip, or a copy)
 * and path_forged says the sites will diverge. */
static void test_path_forged(void **state) {
        static const struct {
                const char *topic, *path, *src, *dst;
                bool        forged;
                aagw_verdict_kind_t kind;
        } cases[] = {
            /* what aagw writes: path = name's chain + the holding site */
            {"west.clicks", "west>east", "east", "west", false,
             AAGW_VERDICT_SKIP},
            {"west.east.clicks", "east>west>north", "north", "east", false,
             AAGW_VERDICT_SKIP},
            /* a local topic claiming to be west's copy */
            {"clicks", "west>east", "east", "west", true, AAGW_VERDICT_SKIP},
            /* claiming another origin than the name */
            {"north.clicks", "west>east", "east", "west", true,
             AAGW_VERDICT_SKIP},
            /* claiming fewer hops than the name */
            {"west.clicks", "east", "east", "west", true,
             AAGW_VERDICT_REPLICATE},
        };
        (void)state;

        for (int naming = 0; naming < 2; naming++) {
                aagw_repl_policy_t *pol =
                    pol_of(three, 3, (aagw_naming_t)naming, true);
                for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
                        struct aagw_header  h[1];
                        struct aagw_rec     r;
                        struct aagw_verdict v;
                        prov_set(h, cases[i].path);
                        r = mkrec(cases[i].topic, h, 1);
                        assert_int_equal(aagw_repl_verdict(pol, cases[i].src,
                                                           cases[i].dst, &r,
                                                           NULL, NO_TOPIC, &v),
                                         AAGW_OK);
                        /* identity: a copy's name says nothing, so
                         * nothing is flagged */
                        bool want = naming == AAGW_NAMING_PREFIX &&
                                    cases[i].forged;
                        if (v.path_forged != want)
                                fail_msg("%s %s on %s->%s (%s): path_forged "
                                         "%d, want %d",
                                         cases[i].topic, cases[i].path,
                                         cases[i].src, cases[i].dst,
                                         naming ? "identity" : "prefix",
                                         v.path_forged, want);
                        assert_int_equal(v.kind, cases[i].kind);
                        assert_int_equal(aagw_prov_resolve(pol, cases[i].src,
                                                           &r, NULL, 0, &v),
                                         AAGW_OK);
                        assert_int_equal(v.path_forged, want);
                }
                /* a verdict made on the name alone clears the flag of
                 * the previous record */
                struct aagw_header  h[1];
                struct aagw_verdict v;
                prov_set(h, "west>east");
                struct aagw_rec r = mkrec("clicks", h, 1);
                assert_int_equal(aagw_repl_verdict(pol, "east", "west", &r,
                                                   NULL, 0, &v),
                                 AAGW_OK);
                r = mkrec("west.clicks", NULL, 0);
                assert_int_equal(aagw_repl_verdict(pol, "east", "west", &r,
                                                   NULL, 0, &v),
                                 AAGW_OK);
                assert_false(v.path_forged);
                aagw_repl_policy_destroy(pol);
        }
}

static void test_encode_resolved(void **state) {
        aagw_repl_policy_t *pol = pol_of(two, 2, AAGW_NAMING_PREFIX, false);
        const char *ids[] = {NULL, /* the derived id */
                             "east:clicks:3:12345", "east:clicks:3:123",
                             "west:clicks:3:1234", "east:clicks:31:234",
                             "east:clicks:3:1234x", "id-1",
                             "east:clicks:3:1234"};
        const bool  omitted[] = {true, false, false, false, false, false,
                                 false, true};
        (void)state;

        for (size_t i = 0; i < sizeof(ids) / sizeof(*ids); i++) {
                struct aagw_verdict   v;
                struct aagw_prov_hdrs a, b;
                struct aagw_header    h[1];
                struct aagw_rec       r;
                if (ids[i]) {
                        static char val[512];
                        snprintf(val, sizeof(val),
                                 "1;east;clicks:3:1234;1714557600123:7;%s",
                                 ids[i]);
                        h[0] = hdr("aagw.prov", val);
                        r    = mkrec("clicks", h, 1);
                } else {
                        r = mkrec("clicks", NULL, 0);
                }
                assert_int_equal(aagw_prov_resolve(pol, "east", &r, NULL, 0, &v),
                                 AAGW_OK);
                assert_int_equal(v.kind, AAGW_VERDICT_REPLICATE);
                assert_int_equal(aagw_prov_encode(pol, &v.prov, &a), AAGW_OK);
                aagw_prov_encode_resolved(pol, &v.prov, &b);
                assert_int_equal(a.hdrs[0].size, b.hdrs[0].size);
                assert_memory_equal(a.hdrs[0].value, b.hdrs[0].value,
                                    a.hdrs[0].size);
                const char *val = b.hdrs[0].value;
                bool        empty = val[b.hdrs[0].size - 1] == ';';
                if (empty != omitted[i])
                        fail_msg("id %s: encoded \"%.*s\"",
                                 ids[i] ? ids[i] : "(derived)",
                                 (int)b.hdrs[0].size, val);
                /* And it reads back as the same id. */
                struct aagw_prov back;
                assert_int_equal(aagw_prov_decode(pol, b.hdrs, b.cnt, &back),
                                 AAGW_REASON_OK);
                assert_int_equal(back.id_len, v.prov.id_len);
                assert_memory_equal(back.id, v.prov.id, back.id_len);
        }
        aagw_repl_policy_destroy(pol);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_fresh_record),
            cmocka_unit_test(test_fresh_id_rules),
            cmocka_unit_test(test_keeps_provenance),
            cmocka_unit_test(test_topic_check_alone),
            cmocka_unit_test(test_header_check_alone),
            cmocka_unit_test(test_both_checks),
            cmocka_unit_test(test_path_hop_limit),
            cmocka_unit_test(test_name_too_long),
            cmocka_unit_test(test_bad_provenance_actions),
            cmocka_unit_test(test_bad_provenance_ignored_without_header_check),
            cmocka_unit_test(test_missing_id_actions),
            cmocka_unit_test(test_invalid_calls),
            cmocka_unit_test(test_reuse),
            cmocka_unit_test(test_resolve),
            cmocka_unit_test(test_simulated_topologies),
            cmocka_unit_test(test_precheck_matches_verdict),
            cmocka_unit_test(test_encode_resolved),
            cmocka_unit_test(test_path_forged),
        };
        return cmocka_run_group_tests_name("verdict", tests, NULL, NULL);
}
