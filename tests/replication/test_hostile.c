/* tests/replication/test_hostile.c: provenance headers from producers are
 * untrusted input (DESIGN.md).  A producer at east writes records with
 * hostile aagw.* headers between valid ones:
 *
 *   incomplete     aagw.prov "1;east;clicks:0:1": no clock, no id
 *   dup-prov       aagw.prov twice, the same valid value
 *   long-id        aagw.prov with a 1100-byte id (limit 1024)
 *   null-prov      aagw.prov null-valued
 *   bad-version    aagw.prov "2;...": a format this aagw does not know
 *   junk-dup       200 headers: aagw.prov with junk values (40 times)
 *                  between the draft format's names
 *   unknown-origin aagw.prov well formed, origin "north" (not a site)
 *   not-at-site    aagw.prov well formed, path "west" read at east
 *   forged-path    aagw.prov well formed, path "west>east": it claims to
 *                  have been at west already, so it is never sent there
 *   draft-headers  the draft format's five headers (aagw.origin, .path,
 *                  .id, .src, .hlc), well formed, path "west>east": now
 *                  reserved names that mean nothing, so a valid local
 *                  record whose copy drops them
 *   junk-200       200 junk headers, none a provenance header (100 under
 *                  the aagw. prefix, 100 outside): a valid local record
 *
 * dead-letter (the default): the bad ones land in aagw.dlq.east at west
 * with aagw.dlq.reason and aagw.dlq.source, the forged path is skipped,
 * junk-200 and every valid record replicate, the gateway keeps running.
 * pass: the bad ones replicate as local records with fresh provenance.
 * fail: the gateway exits 1 with a clear error at the first bad record,
 * and fails the same way again after a restart (it never skips it). */
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

#include "repl.h"

#define PARTS 8
#define HOT_PART 3 /* hostile records and what follows them */
#define GOOD_PRE 20
#define GOOD_POST 20
#define JUNK 200
#define REPL_TIMEOUT_MS 60000

static const char *const sites[] = {"east", "west"};

enum expect { DLQ, SKIPPED, COPIED };

struct hcase {
        const char   *name; /* the value is "hostile-<name>" */
        enum expect   expect;
        aagw_reason_t reason; /* DLQ */
        const char  **hdrs;   /* NULL-terminated */
};

struct fx {
        struct repl *r;
        struct hcase cases[16];
        size_t       ncases;
        char        *long_id;
        char        *junk[JUNK + 1]; /* junk-200, NULL-terminated */
        char        *jdup[JUNK + 1]; /* junk-dup, NULL-terminated */
        const char  *hv[16][JUNK + 1];
};

static int setup(void **state) {
        struct fx *f = calloc(1, sizeof(*f));

        *state = f;
        return f ? 0 : -1;
}

static int teardown(void **state) {
        struct fx *f = *state;

        repl_destroy(f->r, false);
        free(f->long_id);
        for (int i = 0; i < JUNK; i++) {
                free(f->junk[i]);
                free(f->jdup[i]);
        }
        free(f);
        return 0;
}

/* Add case 'name' with the headers in 'h' (copied into f->hv). */
static void add_case(struct fx *f, const char *name, enum expect e,
                     aagw_reason_t reason, const char *const *h) {
        struct hcase *c = &f->cases[f->ncases];
        size_t        n = 0;

        assert_true(f->ncases < 16);
        for (; h[n]; n++) {
                assert_true(n <= JUNK);
                f->hv[f->ncases][n] = h[n];
        }
        f->hv[f->ncases][n] = NULL;
        c->name             = name;
        c->expect           = e;
        c->reason           = reason;
        c->hdrs             = f->hv[f->ncases];
        f->ncases++;
}

static void make_cases(struct fx *f) {
        static const char *const names[] = {"aagw.prov", "aagw.origin",
                                            "aagw.path", "aagw.src",
                                            "aagw.hlc"};
        char                    *idh;

        f->long_id = malloc(1100 + 1);
        assert_non_null(f->long_id);
        memset(f->long_id, 'x', 1100);
        f->long_id[1100] = '\0';
        assert_true(asprintf(&idh, "aagw.prov=1;east;clicks:0:1;1:0;%s",
                             f->long_id) > 0);
        free(f->long_id);
        f->long_id = idh;
        for (int i = 0; i < JUNK; i++) {
                assert_true(asprintf(&f->junk[i], "%s%03d=junk-%d",
                                     i % 2 ? "aagw.junk-" : "x-junk-", i,
                                     i * 7919) > 0);
                assert_true(asprintf(&f->jdup[i], "%s=%%junk%d%%", names[i % 5],
                                     i) > 0);
        }

        add_case(f, "incomplete", DLQ, AAGW_REASON_PROV_INCOMPLETE,
                 (const char *[]){"aagw.prov=1;east;clicks:0:1", NULL});
        add_case(f, "dup-prov", DLQ, AAGW_REASON_PROV_DUPLICATE,
                 (const char *[]){"aagw.prov=1;east;clicks:0:1;1700000000000:0;",
                                  "x-trace=1",
                                  "aagw.prov=1;east;clicks:0:1;1700000000000:0;",
                                  NULL});
        add_case(f, "long-id", DLQ, AAGW_REASON_PROV_ID_TOO_LONG,
                 (const char *[]){f->long_id, NULL});
        /* kcat sends "-H name" without '=' as a null-valued header. */
        add_case(f, "null-prov", DLQ, AAGW_REASON_PROV_NULL_VALUE,
                 (const char *[]){"aagw.prov", NULL});
        add_case(f, "bad-version", DLQ, AAGW_REASON_PROV_VERSION,
                 (const char *[]){"aagw.prov=2;east;clicks:0:1;1700000000000:0;",
                                  NULL});
        add_case(f, "junk-dup", DLQ, AAGW_REASON_PROV_DUPLICATE,
                 (const char *const *)f->jdup);
        add_case(f, "unknown-origin", DLQ, AAGW_REASON_PROV_ORIGIN_UNKNOWN,
                 (const char *[]){"aagw.prov=1;north>east;clicks:0:1;"
                                  "1700000000000:0;north-1",
                                  NULL});
        add_case(f, "not-at-site", DLQ, AAGW_REASON_PROV_PATH_NOT_AT_SITE,
                 (const char *[]){"aagw.prov=1;west;clicks:0:1;"
                                  "1700000000000:0;west-1",
                                  NULL});
        add_case(f, "forged-path", SKIPPED, AAGW_REASON_OK,
                 (const char *[]){"aagw.prov=1;west>east;clicks:0:5;"
                                  "1700000000000:0;forged-1",
                                  NULL});
        add_case(f, "draft-headers", COPIED, AAGW_REASON_OK,
                 (const char *[]){"aagw.origin=west", "aagw.path=west>east",
                                  "aagw.id=forged-1", "aagw.src=clicks:0:5",
                                  "aagw.hlc=1700000000000:0", "x-trace=2",
                                  NULL});
        add_case(f, "junk-200", COPIED, AAGW_REASON_OK,
                 (const char *const *)f->junk);
}

/* East's clicks as this test names it (scoped: see repl.h). */
static const char *clicks;

static void start(struct fx *f) {
        f->r   = repl_new(sites, 2);
        clicks = repl_topic(f->r, "clicks");
        repl_create_topic(f->r, NULL, "clicks", PARTS);
        repl_create_topic(f->r, "west", "east.clicks", PARTS);
        repl_create_topic(f->r, "east", "west.clicks", PARTS);
        make_cases(f);
}

/* Valid records before (spread by key), every hostile case, valid
 * records after: the hostile ones and those after in one partition, so
 * "the valid ones after them replicated" means the flow got past them. */
static void produce_all(struct fx *f, size_t ncases) {
        const char *trace[] = {"trace=good", NULL};
        char        tag[64];

        repl_produce(f->r, "east", "clicks", "good", 0, GOOD_PRE, 7, trace, -1);
        for (size_t i = 0; i < ncases; i++) {
                snprintf(tag, sizeof(tag), "hostile-%s", f->cases[i].name);
                repl_produce(f->r, "east", "clicks", tag, 0, 1, 1,
                             f->cases[i].hdrs, HOT_PART);
        }
        repl_produce(f->r, "east", "clicks", "good", GOOD_PRE, GOOD_POST, 7,
                     trace, HOT_PART);
}

static const struct rrec *find(const struct rrecs *rs, const char *tag) {
        char want[80];

        snprintf(want, sizeof(want), "%s-0000000", tag);
        for (size_t i = 0; i < rs->cnt; i++)
                if (!strcmp(rs->v[i].val, want))
                        return &rs->v[i];
        return NULL;
}

/* The records of 'rs' whose value starts with "good-". */
static void only_good(const struct rrecs *rs, struct rrecs *out) {
        memset(out, 0, sizeof(*out));
        memcpy(out->topic, rs->topic, sizeof(out->topic));
        out->v = calloc(rs->cnt + 1, sizeof(*out->v));
        assert_non_null(out->v);
        for (size_t i = 0; i < rs->cnt; i++)
                if (!strncmp(rs->v[i].val, "good-", 5))
                        out->v[out->cnt++] = rs->v[i];
}

/* The dead-letter topic 'dlq' at 'alias' holds the records of every
 * gateway replicating from that source (on shared real clusters, other
 * tests' too): read it into 'all' and put in 'mine' (release with free()
 * of mine->v) those whose aagw.dlq.source names this test's topic.
 * @returns mine->cnt; 0 if the topic does not exist. */
static size_t dlq_mine(struct fx *f, const char *alias, const char *dlq,
                       struct rrecs *all, struct rrecs *mine) {
        char want[300], buf[600];

        memset(all, 0, sizeof(*all));
        memset(mine, 0, sizeof(*mine));
        if (!repl_topic_listed(f->r, alias, dlq))
                return 0;
        repl_read(f->r, alias, dlq, all);
        mine->v = calloc(all->cnt + 1, sizeof(*mine->v));
        assert_non_null(mine->v);
        snprintf(want, sizeof(want), "%s:%s:",
                 strcmp(alias, "west") ? "west" : "east", clicks);
        for (size_t i = 0; i < all->cnt; i++)
                if (rrec_hdr(&all->v[i], "aagw.dlq.source", buf,
                             sizeof(buf)) == 1 &&
                    !strncmp(buf, want, strlen(want)))
                        mine->v[mine->cnt++] = all->v[i];
        return mine->cnt;
}

/* dlq_mine()'s count only. */
static size_t dlq_count(struct fx *f, const char *alias, const char *dlq) {
        struct rrecs all, mine;
        size_t       n = dlq_mine(f, alias, dlq, &all, &mine);

        free(mine.v);
        rrecs_deinit(&all);
        return n;
}

struct dlq_cond {
        struct fx *f;
        size_t     want, last;
};

static bool dlq_reached(void *arg) {
        struct dlq_cond *c = arg;

        c->last = dlq_count(c->f, "west", "aagw.dlq.east");
        return c->last >= c->want;
}

/* The copy of 'x' in 'copy' carries exactly fresh provenance for x's
 * coordinates and the producer's non-aagw headers, nothing of its
 * hostile aagw.* headers. */
static void expect_fresh_copy(const struct rrec *x, const struct rrec *y) {
        char want[512], got[512], a[8192], b[8192];

        assert_non_null(y);
        assert_int_equal(x->p, y->p);
        assert_string_equal(x->key, y->key);
        assert_int_equal(x->ts, y->ts);
        rrec_hdrs_without(x, "aagw.", a, sizeof(a));
        rrec_hdrs_without(y, "aagw.", b, sizeof(b));
        assert_string_equal(a, b);
        /* One aagw.* header, the provenance, exactly; nothing forged. */
        assert_int_equal(rrec_hdr(y, "aagw.prov", got, sizeof(got)), 1);
        snprintf(want, sizeof(want), "1;east>west;%s:%d:%" PRId64
                 ";%" PRId64 ":0;", clicks, (int)x->p, x->o, x->ts);
        assert_string_equal(got, want);
        {
                size_t n = 0;
                for (const char *s = y->hdrs; (s = strstr(s, "aagw.")); s++)
                        if (s == y->hdrs || s[-1] == ',')
                                n++;
                assert_int_equal(n, 1);
        }
}

/* ---------------------------- DEAD LETTER ------------------------------- */

static void test_dead_letter(void **state) {
        struct fx   *f = *state;
        struct rrecs src, copy, dlq, dlq_all, gsrc, gcopy;
        size_t       ndlq = 0, ncopied = 0;
        char         buf[2048], want[512];

        start(f);
        repl_gw_start(f->r, NULL);
        produce_all(f, f->ncases);
        for (size_t i = 0; i < f->ncases; i++) {
                ndlq += f->cases[i].expect == DLQ;
                ncopied += f->cases[i].expect == COPIED;
        }
        repl_expect_size(f->r, "west", "east.clicks",
                         GOOD_PRE + GOOD_POST + (int64_t)ncopied,
                         REPL_TIMEOUT_MS);
        /* Not named before the gateway made it: reading would create it. */
        assert_true(repl_topic_listed(f->r, "west", "aagw.dlq.east"));
        {
                struct dlq_cond dc = {f, ndlq, 0};

                if (!harness_wait_until(dlq_reached, &dc, REPL_TIMEOUT_MS)) {
                        repl_dump_log(f->r, 40);
                        fail_msg("aagw.dlq.east at west holds %zu of this "
                                 "test's records, expected %zu",
                                 dc.last, ndlq);
                }
        }
        assert_true(repl_gw_running(f->r));
        assert_int_equal(repl_gw_stop(f->r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        repl_read(f->r, "east", "clicks", &src);
        repl_read(f->r, "west", "east.clicks", &copy);
        assert_int_equal(dlq_mine(f, "west", "aagw.dlq.east", &dlq_all, &dlq),
                         ndlq);
        assert_int_equal(copy.cnt, GOOD_PRE + GOOD_POST + ncopied);
        for (size_t i = 0; i < f->ncases; i++) {
                const struct hcase *c = &f->cases[i];
                const struct rrec  *x, *in_copy, *in_dlq;
                char                tag[64];

                snprintf(tag, sizeof(tag), "hostile-%s", c->name);
                x       = find(&src, tag);
                in_copy = find(&copy, tag);
                in_dlq  = find(&dlq, tag);
                assert_non_null(x);
                switch (c->expect) {
                case DLQ:
                        if (in_copy || !in_dlq)
                                fail_msg("%s: copied %d, dead-lettered %d", tag,
                                         in_copy != NULL, in_dlq != NULL);
                        assert_int_equal(rrec_hdr(in_dlq, "aagw.dlq.reason",
                                                  buf, sizeof(buf)),
                                         1);
                        assert_string_equal(buf, aagw_reason_name(c->reason));
                        assert_int_equal(rrec_hdr(in_dlq, "aagw.dlq.source",
                                                  buf, sizeof(buf)),
                                         1);
                        snprintf(want, sizeof(want), "east:%s:%d:%" PRId64,
                                 clicks, (int)x->p, x->o);
                        assert_string_equal(buf, want);
                        /* The record itself, as the producer wrote it. */
                        assert_string_equal(in_dlq->key, x->key);
                        assert_int_equal(in_dlq->ts, x->ts);
                        assert_int_equal(
                            strncmp(in_dlq->hdrs, x->hdrs, strlen(x->hdrs)), 0);
                        break;
                case SKIPPED:
                        if (in_copy || in_dlq)
                                fail_msg("%s: copied %d, dead-lettered %d", tag,
                                         in_copy != NULL, in_dlq != NULL);
                        break;
                case COPIED:
                        assert_null(in_dlq);
                        expect_fresh_copy(x, in_copy);
                        if (!strcmp(c->name, "draft-headers")) {
                                /* The five draft names dropped (checked by
                                 * expect_fresh_copy), x-trace kept. */
                                assert_int_equal(rrec_hdr(in_copy, "x-trace",
                                                          buf, sizeof(buf)),
                                                 1);
                                assert_string_equal(buf, "2");
                                break;
                        }
                        /* 100 x-junk-* kept, 100 aagw.junk-* dropped. */
                        assert_int_equal(
                            rrec_hdr(in_copy, "x-junk-000", NULL, 0), 1);
                        assert_int_equal(
                            rrec_hdr(in_copy, "x-junk-198", buf, sizeof(buf)),
                            1);
                        assert_string_equal(buf, "junk-1567962");
                        assert_null(strstr(in_copy->hdrs, "aagw.junk-"));
                        break;
                }
        }
        /* Every valid record, before and after the hostile ones, exactly
         * once and in order. */
        only_good(&src, &gsrc);
        only_good(&copy, &gcopy);
        assert_int_equal(gsrc.cnt, GOOD_PRE + GOOD_POST);
        repl_check_copy(&gsrc, "clicks", "east", &gcopy, "east>west");
        /* Nothing dead-lettered the other way. */
        {
                const char *at_east[] = {"clicks", "west.clicks"};
                repl_expect_topics(f->r, "east", at_east, 2);
                /* (The flow makes its dead-letter topic at start.) */
                assert_int_equal(dlq_count(f, "east", "aagw.dlq.west"), 0);
        }
        free(gsrc.v);
        free(gcopy.v);
        rrecs_deinit(&src);
        rrecs_deinit(&copy);
        free(dlq.v);
        rrecs_deinit(&dlq_all);
}

/* -------------------------------- PASS ---------------------------------- */

static void test_pass(void **state) {
        static const char *const extra[] = {
            "--set", "replication.bad_provenance=pass", NULL};
        struct fx   *f = *state;
        struct rrecs src, copy, gsrc, gcopy;
        size_t       nskip = 0;

        start(f);
        repl_gw_start(f->r, extra);
        produce_all(f, f->ncases);
        for (size_t i = 0; i < f->ncases; i++)
                nskip += f->cases[i].expect == SKIPPED;
        repl_expect_size(f->r, "west", "east.clicks",
                         GOOD_PRE + GOOD_POST + (int64_t)(f->ncases - nskip),
                         REPL_TIMEOUT_MS);
        assert_true(repl_gw_running(f->r));
        assert_int_equal(repl_gw_stop(f->r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        repl_read(f->r, "east", "clicks", &src);
        repl_read(f->r, "west", "east.clicks", &copy);
        assert_int_equal(copy.cnt, GOOD_PRE + GOOD_POST + f->ncases - nskip);
        for (size_t i = 0; i < f->ncases; i++) {
                const struct hcase *c = &f->cases[i];
                const struct rrec  *x, *y;
                char                tag[64];

                snprintf(tag, sizeof(tag), "hostile-%s", c->name);
                x = find(&src, tag);
                y = find(&copy, tag);
                assert_non_null(x);
                if (c->expect == SKIPPED) {
                        assert_null(y);
                        continue;
                }
                /* Bad provenance stripped, fresh provenance stamped. */
                expect_fresh_copy(x, y);
        }
        only_good(&src, &gsrc);
        only_good(&copy, &gcopy);
        repl_check_copy(&gsrc, "clicks", "east", &gcopy, "east>west");
        /* Nothing was dead-lettered. */
        assert_int_equal(dlq_count(f, "west", "aagw.dlq.east"), 0);
        free(gsrc.v);
        free(gcopy.v);
        rrecs_deinit(&src);
        rrecs_deinit(&copy);
}

/* -------------------------------- FAIL ---------------------------------- */

static void test_fail_closed(void **state) {
        static const char *const extra[] = {
            "--set", "replication.bad_provenance=fail", NULL};
        struct fx         *f = *state;
        struct rrecs       src, copy;
        const char        *trace[] = {"trace=good", NULL};
        char              *text, want[256];
        const struct rrec *bad;

        start(f);
        /* Valid records, one bad record, valid records: one partition. */
        repl_produce(f->r, "east", "clicks", "good", 0, GOOD_PRE, 7, trace,
                     HOT_PART);
        repl_produce(f->r, "east", "clicks", "hostile-incomplete", 0, 1, 1,
                     f->cases[0].hdrs, HOT_PART);
        repl_produce(f->r, "east", "clicks", "good", GOOD_PRE, GOOD_POST, 7,
                     trace, HOT_PART);
        repl_read(f->r, "east", "clicks", &src);
        bad = find(&src, "hostile-incomplete");
        assert_non_null(bad);
        assert_int_equal(bad->o, GOOD_PRE);

        for (int run = 0; run < 2; run++) {
                repl_gw_start(f->r, extra);
                int code = repl_gw_wait_exit(f->r, REPL_TIMEOUT_MS);
                if (code != 1) {
                        repl_dump_log(f->r, 30);
                        fail_msg("run %d: exit %d, expected 1", run, code);
                }
                text = repl_log_text(f->r);
                snprintf(want, sizeof(want),
                         "east->west: failed: %s [%d] offset %" PRId64
                         ": bad provenance (prov_incomplete) and "
                         "bad_provenance is fail",
                         clicks, HOT_PART, bad->o);
                if (!strstr(text, want)) {
                        repl_dump_log(f->r, 30);
                        fail_msg("run %d: no '%s' in the log", run, want);
                }
                free(text);
                /* Everything before the bad record, nothing after it. */
                repl_read(f->r, "west", "east.clicks", &copy);
                assert_int_equal(copy.cnt, GOOD_PRE);
                for (size_t i = 0; i < copy.cnt; i++) {
                        snprintf(want, sizeof(want), "good-%07zu", i);
                        assert_string_equal(copy.v[i].val, want);
                }
                rrecs_deinit(&copy);
        }
        rrecs_deinit(&src);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_dead_letter, setup, teardown),
            cmocka_unit_test_setup_teardown(test_pass, setup, teardown),
            cmocka_unit_test_setup_teardown(test_fail_closed, setup, teardown),
        };

        return cmocka_run_group_tests_name("replication-hostile", tests, NULL,
                                           NULL);
}
