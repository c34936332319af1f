/* tests/e2e/test_demo.c: the one-command demo, end to end.
 *
 * Runs `aagw --mode active-active --duration 8 --state-dir DIR` (no
 * clusters: the demo) as a child process and reads what a user reads: its
 * stdout.  The summary lines are documented in docs/quickstart.md ("Reading
 * the summary"); this test parses them and checks that they state each
 * invariant as passed with numbers that agree with each other and with
 * the generator's own counts, that live lines came for both sites, that
 * the first copies reached each site within FIRST_COPY_DEADLINE_S, and
 * that the printed `aagw audit id` command runs and shows a dropped
 * duplicate.  Then the negative path a user can hit: running the demo
 * again on the same (now used) state dir is refused with exit 2.
 *
 * Needs AAGW_BIN (set by meson). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* 8 s of traffic, draining and reading back take about 15 s; generous
 * for ASan on a loaded 2-core machine. */
#define DEMO_TIMEOUT_MS 120000
/* The first copy at each site after the traffic started: about 0.5 s on
 * an idle machine (docs/benchmarks.md), the README says within 2 s; a
 * deadline for a loaded machine and ASan, which a copy held back behind
 * discovery's round trips (seconds, before) would still miss. */
#define FIRST_COPY_DEADLINE_S 5.0
#define AUDIT_TIMEOUT_MS 30000

struct fx {
        char            *dir, *state;
        harness_output_t out, audit, again;
        harness_lines_t  lines;
        char             errstr[512];
};

static int setup(void **state) {
        struct fx *f = calloc(1, sizeof(*f));

        if (!f || !(f->dir = harness_tmpdir_new("e2e-demo"))) {
                free(f);
                return -1;
        }
        f->state = harness_path_join(f->dir, "state");
        *state   = f;
        return f->state ? 0 : -1;
}

static int teardown(void **state) {
        struct fx *f = *state;

        harness_output_deinit(&f->out);
        harness_output_deinit(&f->audit);
        harness_output_deinit(&f->again);
        harness_lines_deinit(&f->lines);
        harness_rmtree(f->dir);
        free(f->state);
        free(f->dir);
        free(f);
        return 0;
}

/* The line starting with 'prefix', or fail. */
static const char *line_with(struct fx *f, const char *prefix) {
        for (size_t i = 0; i < f->lines.cnt; i++)
                if (!strncmp(f->lines.v[i], prefix, strlen(prefix)))
                        return f->lines.v[i];
        fail_msg("no line starting with \"%s\" in the demo's output:\n%s",
                 prefix, f->out.out);
        return NULL;
}

/* "SITE: produced P, replicated in R, unified U, dups dropped D, ..." */
static uint64_t dups_dropped(struct fx *f, const char *site) {
        char        prefix[16];
        uint64_t    p, r, u, d;
        const char *l;

        snprintf(prefix, sizeof(prefix), "%s: ", site);
        l = line_with(f, prefix);
        assert_int_equal(sscanf(l + strlen(prefix),
                                "produced %" SCNu64 ", replicated in %" SCNu64
                                ", unified %" SCNu64 ", dups dropped %" SCNu64,
                                &p, &r, &u, &d),
                         4);
        assert_true(p > 0 && r > 0 && u > 0);
        return d;
}

/* One "; AT COPY N records, M missing, X extra of P produced at ORIGIN"
 * segment of the no-loop line; returns P. */
static uint64_t copy_segment(const char *line, const char *at, const char *copy,
                             const char *origin) {
        char        seg[64], org[16];
        const char *p;
        uint64_t    n, missing, extra, produced;

        snprintf(seg, sizeof(seg), "; %s %s ", at, copy);
        p = strstr(line, seg);
        if (!p)
                fail_msg("no \"%s\" in: %s", seg, line);
        assert_int_equal(sscanf(p + strlen(seg),
                                "%" SCNu64 " records, %" SCNu64
                                " missing, %" SCNu64 " extra of %" SCNu64
                                " produced at %15[a-z]",
                                &n, &missing, &extra, &produced, org),
                         5);
        assert_string_equal(org, origin);
        assert_true(produced > 0);
        assert_int_equal(n, produced);
        assert_int_equal(missing, 0);
        assert_int_equal(extra, 0);
        return produced;
}

static void test_demo(void **state) {
        struct fx  *f      = *state;
        const char *argv[] = {harness_aagw_bin(), "--mode", "active-active",
                              "--duration",       "8",      "--state-dir",
                              f->state,           NULL};
        uint64_t    events, retried, records, updates, g, e_rec, e_uni, e_miss,
            w_rec, w_uni, w_miss;
        int         users, n_users, same, right, live_east = 0, live_west = 0;
        const char *l;

        assert_non_null(argv[0]);
        assert_int_equal(harness_run(argv, NULL, 0, DEMO_TIMEOUT_MS, &f->out,
                                     f->errstr, sizeof(f->errstr)),
                         AAGW_OK);
        if (harness_exit_code(f->out.status) != 0)
                fail_msg("the demo exited %d\nstdout:\n%s\nstderr:\n%s",
                         harness_exit_code(f->out.status), f->out.out,
                         f->out.err);
        assert_int_equal(harness_lines_split(f->out.out, &f->lines), 0);

        /* Live lines: "[  3s] east produced ..." once a second per site. */
        for (size_t i = 0; i < f->lines.cnt; i++) {
                const char *s = f->lines.v[i];
                if (s[0] != '[' || !(s = strstr(s, "s] ")))
                        continue;
                live_east += !strncmp(s + 3, "east produced ", 14);
                live_west += !strncmp(s + 3, "west produced ", 14);
        }
        assert_true(live_east >= 6);
        assert_true(live_west >= 6);

        /* The first copies, as the demo saw them in the copies. */
        double fc_east, fc_west;
        l = line_with(f, "timing: ");
        assert_int_equal(sscanf(l,
                                "timing: first copy at east %lf s, at west "
                                "%lf s after the traffic started",
                                &fc_east, &fc_west),
                         2);
        if (fc_east > FIRST_COPY_DEADLINE_S || fc_west > FIRST_COPY_DEADLINE_S)
                fail_msg("first copies %.2f s (east) and %.2f s (west) after "
                         "the traffic started, deadline %.1f s:\n%s",
                         fc_east, fc_west, FIRST_COPY_DEADLINE_S, f->out.out);

        /* What the generator wrote. */
        l = line_with(f, "generated: ");
        assert_int_equal(sscanf(l,
                                "generated: %" SCNu64 " click events (%" SCNu64
                                " retried at the other site: %" SCNu64
                                " click records), %" SCNu64
                                " profile updates of %d",
                                &events, &retried, &records, &updates, &users),
                         5);
        assert_true(events > 8000); /* 2 x 1000/s for 8 s, some slack */
        assert_true(retried > 0 && retried < events / 10);
        assert_int_equal(records, events + retried);
        assert_true(updates > 800);
        assert_non_null(strstr(l, ", 0 delivery failures"));

        /* 1: every event exactly once in each site's clicks.unified. */
        l = line_with(f, "PASS exactly-once: ");
        assert_int_equal(
            sscanf(l,
                   "PASS exactly-once: %" SCNu64
                   " events generated; east clicks.unified %" SCNu64
                   " records, %" SCNu64 " unique, %" SCNu64
                   " missing; west clicks.unified %" SCNu64 " records, %" SCNu64
                   " unique, %" SCNu64 " missing",
                   &g, &e_rec, &e_uni, &e_miss, &w_rec, &w_uni, &w_miss),
            7);
        assert_int_equal(g, events);
        assert_int_equal(e_rec, events);
        assert_int_equal(e_uni, events);
        assert_int_equal(e_miss, 0);
        assert_int_equal(w_rec, events);
        assert_int_equal(w_uni, events);
        assert_int_equal(w_miss, 0);
        /* Each retried event reached each site twice: one copy dropped. */
        assert_int_equal(dups_dropped(f, "east"), retried);
        assert_int_equal(dups_dropped(f, "west"), retried);

        /* 2: no loop, and each copy is exactly its origin's records. */
        l = line_with(f, "PASS no-loop: 0 looped topics; ");
        assert_int_equal(copy_segment(l, "east", "west.clicks", "west") +
                             copy_segment(l, "west", "east.clicks", "east"),
                         records);
        assert_int_equal(copy_segment(l, "east", "west.profiles", "west") +
                             copy_segment(l, "west", "east.profiles", "east"),
                         updates);

        /* 3: the same lww winners at both sites, the generator's. */
        l = line_with(f, "PASS lww: ");
        assert_int_equal(sscanf(l,
                                "PASS lww: %d users updated; winners "
                                "identical at east and west for %d; equal "
                                "to the generator's maximum version for %d",
                                &n_users, &same, &right),
                         3);
        assert_true(n_users > 0 && n_users <= users);
        assert_int_equal(same, n_users);
        assert_int_equal(right, n_users);
        line_with(f, "demo: PASS, all 3 invariants hold");

        /* The first suggested audit command runs and shows a duplicate
         * dropped. */
        const char *cmd = NULL;
        for (size_t i = 0; i < f->lines.cnt && !cmd; i++)
                if (strstr(f->lines.v[i], " audit id "))
                        cmd = f->lines.v[i];
        assert_non_null(cmd);
        char        buf[4096];
        const char *av[16];
        size_t      ac = 0;
        snprintf(buf, sizeof(buf), "%s", cmd);
        for (char *t = strtok(buf, " "); t && strcmp(t, "#") && ac < 15;
             t       = strtok(NULL, " "))
                av[ac++] = t;
        av[ac] = NULL;
        assert_true(ac == 6);
        assert_string_equal(av[1], "audit");
        assert_string_equal(av[5], f->state);
        assert_int_equal(harness_run(av, NULL, 0, AUDIT_TIMEOUT_MS, &f->audit,
                                     f->errstr, sizeof(f->errstr)),
                         AAGW_OK);
        if (harness_exit_code(f->audit.status) != 0)
                fail_msg("%s exited %d: %s", cmd,
                         harness_exit_code(f->audit.status), f->audit.err);
        assert_non_null(strstr(f->audit.out, "dropped"));

        /* A second demo on the used state dir would see stale positions
         * and ids: refused, exit 2, with the reason. */
        assert_int_equal(harness_run(argv, NULL, 0, DEMO_TIMEOUT_MS, &f->again,
                                     f->errstr, sizeof(f->errstr)),
                         AAGW_OK);
        assert_int_equal(harness_exit_code(f->again.status), 2);
        assert_non_null(strstr(f->again.err, "needs an empty state dir"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_demo, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
