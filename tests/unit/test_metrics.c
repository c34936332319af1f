/*
 * tests/unit/test_metrics.c: GET /metrics rendered from populated states.
 *
 * The flows, unify stages, owner groups and clusters' access states are
 * fakes: the calls gateway/metrics.c makes to read them are linked to the
 * __wrap_ functions below (-Wl,--wrap), which answer from a state this
 * test draws at random, edge values included (unknown lags, counters near
 * 2^64, more topics, groups and clusters than the renderer shows).  Each
 * state is rendered by gw_metrics() and by the renderer it replaced
 * (metrics_before.c), and the two texts must be the same bytes.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "admin_int.h"

char *gw_metrics_before(const struct gw_admin_view *view);

/* ------------------------------- THE STATE ----------------------------- */

#define MAX_FLOWS 6
#define MAX_UNIFY 4
#define MAX_MISSING 70 /* the renderer shows 64 per flow */
#define MAX_GROUPS (GW_MAX_FLOWS + 3)
#define MAX_ALIASES 20 /* the renderer shows 16 */

struct fake_flow {
        char                     name[64];
        aagw_flow_state_t        state;
        struct aagw_flow_stats   st;
        char                     member[32];
        struct aagw_flow_missing missing[MAX_MISSING];
        size_t                   nmissing;
};

struct fake_unify {
        char                    site[32];
        aagw_flow_state_t       state;
        struct aagw_unify_stats st;
};

struct fake_alias {
        char               alias[AAGW_ALIAS_MAX + 1];
        bool               current;
        struct aagw_access acc;
};

static struct {
        struct fake_flow        flows[MAX_FLOWS];
        struct fake_unify       unify[MAX_UNIFY];
        struct aagw_group_info *groups; /* MAX_GROUPS, heap: ~260 KiB each */
        size_t                  ngroups;
        struct fake_alias       aliases[MAX_ALIASES];
        size_t                  naliases;
} S;

/* ------------------------------- THE FAKES ----------------------------- */

void __wrap_aagw_flow_stats(const aagw_flow_t *f, struct aagw_flow_stats *st);
void __wrap_aagw_flow_stats(const aagw_flow_t *f, struct aagw_flow_stats *st) {
        *st = ((const struct fake_flow *)(const void *)f)->st;
}

const char *__wrap_aagw_flow_name(const aagw_flow_t *f);
const char *__wrap_aagw_flow_name(const aagw_flow_t *f) {
        return ((const struct fake_flow *)(const void *)f)->name;
}

aagw_flow_state_t __wrap_aagw_flow_state(const aagw_flow_t *f);
aagw_flow_state_t __wrap_aagw_flow_state(const aagw_flow_t *f) {
        return ((const struct fake_flow *)(const void *)f)->state;
}

size_t __wrap_aagw_flow_missing(const aagw_flow_t        *f,
                                struct aagw_flow_missing *out, size_t max);
size_t __wrap_aagw_flow_missing(const aagw_flow_t        *f,
                                struct aagw_flow_missing *out, size_t max) {
        const struct fake_flow *ff = (const void *)f;
        size_t                  n  = ff->nmissing < max ? ff->nmissing : max;
        if (!out)
                return ff->nmissing;
        memcpy(out, ff->missing, n * sizeof(*out));
        return n;
}

void __wrap_aagw_unify_stats(const aagw_unify_t      *u,
                             struct aagw_unify_stats *st);
void __wrap_aagw_unify_stats(const aagw_unify_t      *u,
                             struct aagw_unify_stats *st) {
        *st = ((const struct fake_unify *)(const void *)u)->st;
}

const char *__wrap_aagw_unify_site(const aagw_unify_t *u);
const char *__wrap_aagw_unify_site(const aagw_unify_t *u) {
        return ((const struct fake_unify *)(const void *)u)->site;
}

aagw_flow_state_t __wrap_aagw_unify_state(const aagw_unify_t *u);
aagw_flow_state_t __wrap_aagw_unify_state(const aagw_unify_t *u) {
        return ((const struct fake_unify *)(const void *)u)->state;
}

size_t __wrap_aagw_members_get(aagw_members_t *ms, struct aagw_group_info *out,
                               size_t max);
size_t __wrap_aagw_members_get(aagw_members_t *ms, struct aagw_group_info *out,
                               size_t max) {
        size_t n = S.ngroups < max ? S.ngroups : max;
        (void)ms;
        memcpy(out, S.groups, n * sizeof(*out));
        return n;
}

size_t __wrap_aagw_access_aliases(char (*out)[AAGW_ALIAS_MAX + 1], size_t max);
size_t __wrap_aagw_access_aliases(char (*out)[AAGW_ALIAS_MAX + 1], size_t max) {
        size_t n = S.naliases < max ? S.naliases : max;
        for (size_t i = 0; i < n; i++)
                memcpy(out[i], S.aliases[i].alias, sizeof(out[i]));
        return n;
}

static const struct fake_alias *alias_find(const char *alias) {
        for (size_t i = 0; i < S.naliases; i++)
                if (!strcmp(S.aliases[i].alias, alias))
                        return &S.aliases[i];
        return NULL;
}

bool __wrap_aagw_access_current(const char *alias, struct aagw_access *out);
bool __wrap_aagw_access_current(const char *alias, struct aagw_access *out) {
        const struct fake_alias *a = alias_find(alias);
        memset(out, 0, sizeof(*out));
        if (!a || !a->current)
                return false;
        *out = a->acc;
        return true;
}

bool __wrap_aagw_access_get(const char *alias, struct aagw_access *out);
bool __wrap_aagw_access_get(const char *alias, struct aagw_access *out) {
        const struct fake_alias *a = alias_find(alias);
        memset(out, 0, sizeof(*out));
        if (!a)
                return false;
        *out = a->acc;
        return true;
}

/* ------------------------------ DRAWING ONE ---------------------------- */

static uint64_t rng_state;

static uint64_t rnd(void) { /* xorshift64* */
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 2685821657736338717ull;
}

static uint64_t below(uint64_t n) {
        return n ? rnd() % n : 0;
}

/* A counter: mostly small, sometimes 0, sometimes near 2^64. */
static uint64_t counter(void) {
        switch (below(8)) {
        case 0:
                return 0;
        case 1:
                return UINT64_MAX - below(3);
        case 2:
                return rnd();
        default:
                return below(100000);
        }
}

/* A gauge that may be unknown (-1) or some other negative. */
static int64_t gauge(void) {
        switch (below(6)) {
        case 0:
                return -1;
        case 1:
                return INT64_MIN + (int64_t)below(2);
        case 2:
                return INT64_MAX;
        default:
                return (int64_t)below(1000000);
        }
}

static int32_t gauge32(void) {
        return below(10) == 0 ? INT32_MAX - (int32_t)below(2)
                              : (int32_t)below(5000) - 2;
}

static void draw_flow(struct fake_flow *f, size_t i, bool big) {
        struct aagw_flow_stats *st = &f->st;

        memset(f, 0, sizeof(*f));
        snprintf(f->name, sizeof(f->name), "site%zu->site%zu", i,
                 (size_t)below(9));
        f->state        = (aagw_flow_state_t)below(AAGW_FLOW_STOPPED + 1);
        st->records_in  = counter();
        st->records_out = counter();
        st->bytes_out   = counter();
        for (int k = 0; k < AAGW_SKIP_COUNT; k++)
                st->skipped[k] = counter();
        for (int k = 0; k < AAGW_REASON_COUNT; k++)
                st->rejected[k] = counter();
        st->diverged          = counter();
        st->bad_passed        = counter();
        st->dead_lettered     = counter();
        st->produce_errors    = counter();
        st->fetch_restarts    = counter();
        st->consumer_restarts = counter();
        st->start_refetches   = counter();
        st->lat_count         = counter();
        st->lat_sum_ms        = counter();
        for (int k = 0; k < AAGW_LAT_BUCKETS; k++)
                st->lat_buckets[k] = counter();
        st->lag                  = gauge();
        st->inflight             = gauge();
        st->topics               = gauge32();
        st->partitions           = gauge32();
        st->topics_refused       = gauge32();
        st->partitions_missing   = gauge32();
        st->topic_configs_synced = counter();
        st->topic_acls_synced    = counter();
        st->topic_sync_errors    = counter();
        st->truncations          = counter();
        st->truncated_records    = counter();
        st->resets               = counter();
        st->target_resets        = counter();
        st->offset_syncs         = counter();
        st->checkpoints          = counter();
        st->heartbeats           = counter();
        st->group_offsets_synced = counter();
        st->heartbeat_latency_ms = gauge();
        st->heartbeat_age_ms     = gauge();
        st->source_down_ms       = below(2) ? 0 : gauge();
        st->target_down_ms       = below(2) ? 0 : gauge();
        st->source_rtt_us      = below(4) ? (int64_t)below(300000000) : gauge();
        st->fetch_window_bytes = gauge();
        st->fetch_queue_records = gauge();
        st->fetch_connections   = (int32_t)below(9);
        if (below(2)) {
                snprintf(f->member, sizeof(f->member), "host-%08x",
                         (unsigned)rnd());
                st->member = f->member;
        }
        st->rebalances      = counter();
        st->txn_committed   = counter();
        st->txn_aborted     = counter();
        st->txn_fenced      = counter();
        st->work_partitions = gauge32();
        f->nmissing         = big        ? MAX_MISSING
                              : below(4) ? below(3)
                                         : below(MAX_MISSING + 1);
        for (size_t k = 0; k < f->nmissing; k++) {
                struct aagw_flow_missing *m = &f->missing[k];
                snprintf(m->topic, sizeof(m->topic), "topic-%zu.%u", k,
                         (unsigned)below(1000));
                snprintf(m->remote, sizeof(m->remote), "x.%s", m->topic);
                /* Partition counts: never negative, so their
                 * difference fits an int. */
                m->source_partitions =
                    below(10) ? (int32_t)below(5000) : INT32_MAX;
                m->target_partitions =
                    below(10) ? (int32_t)below(5000) : INT32_MAX;
        }
}

static void draw_unify(struct fake_unify *u, size_t i) {
        struct aagw_unify_stats *st = &u->st;

        memset(u, 0, sizeof(*u));
        snprintf(u->site, sizeof(u->site), "site%zu", i);
        u->state             = (aagw_flow_state_t)below(AAGW_FLOW_STOPPED + 1);
        st->records_in       = counter();
        st->records_out      = counter();
        st->accepted         = counter();
        st->dropped          = counter();
        st->superseded       = counter();
        st->identical        = counter();
        st->rejected         = counter();
        st->diverged         = counter();
        st->oversized        = counter();
        st->recovered        = counter();
        st->replayed         = counter();
        st->commits          = counter();
        st->fetch_restarts   = counter();
        st->start_refetches  = counter();
        st->inflight         = gauge();
        st->lag              = gauge();
        st->down_ms          = below(2) ? 0 : gauge();
        st->topics           = gauge32();
        st->inputs           = gauge32();
        st->rebalances       = counter();
        st->restores         = counter();
        st->restore_ms_total = counter();
        st->restored_records = counter();
        st->fenced           = counter();
        st->aborted          = counter();
        st->txn_commits      = counter();
        st->owned_partitions = gauge32();
}

static void draw_groups(bool big) {
        S.ngroups = big        ? MAX_GROUPS
                    : below(5) ? below(4)
                               : below(MAX_GROUPS + 1);
        for (size_t i = 0; i < S.ngroups; i++) {
                struct aagw_group_info *g = &S.groups[i];
                memset(g, 0, sizeof(*g));
                snprintf(g->stage, sizeof(g->stage),
                         i ? "s%zu->t" : "unify@s%zu", i);
                if (!below(4))
                        snprintf(g->error, sizeof(g->error), "timed out");
                g->n = big        ? AAGW_MEMBERS_MAX
                       : below(4) ? below(4)
                                  : below(AAGW_MEMBERS_MAX + 1);
                for (size_t k = 0; k < g->n; k++) {
                        snprintf(g->m[k].member, sizeof(g->m[k].member),
                                 "member-%zu", k);
                        g->m[k].nparts = gauge32();
                }
        }
}

static void draw_aliases(bool big) {
        S.naliases = big        ? MAX_ALIASES
                     : below(4) ? below(4)
                                : below(MAX_ALIASES + 1);
        for (size_t i = 0; i < S.naliases; i++) {
                struct fake_alias *a = &S.aliases[i];
                memset(a, 0, sizeof(*a));
                snprintf(a->alias, sizeof(a->alias), "cluster-%zu", i);
                a->current = below(2);
                a->acc.cause =
                    (aagw_access_cause_t)below(AAGW_ACCESS_AUTHORIZATION + 1);
                a->acc.failures = counter();
        }
}

/* -------------------------------- TESTS -------------------------------- */

static int group_setup(void **state) {
        (void)state;
        S.groups = calloc(MAX_GROUPS, sizeof(*S.groups));
        return S.groups ? 0 : -1;
}

static int group_teardown(void **state) {
        (void)state;
        free(S.groups);
        return 0;
}

/* Render the state with both and compare; on a difference, say where.
 * The fakes must have been read: each flow's name and each stage's site
 * is in the text. */
static void compare(const struct gw_admin_view *v, unsigned seed) {
        char *now = gw_metrics(v), *before = gw_metrics_before(v);
        char  want[128];
        assert_non_null(now);
        assert_non_null(before);
        for (size_t i = 0; i < v->nflows; i++) {
                snprintf(want, sizeof(want),
                         "aagw_replication_records_in_total{flow=\"%s\"} "
                         "%" PRIu64 "\n",
                         S.flows[i].name, S.flows[i].st.records_in);
                assert_non_null(strstr(before, want));
        }
        for (size_t i = 0; i < v->nunify; i++) {
                snprintf(want, sizeof(want),
                         "aagw_unify_records_in_total{site=\"%s\"} "
                         "%" PRIu64 "\n",
                         S.unify[i].site, S.unify[i].st.records_in);
                assert_non_null(strstr(before, want));
        }
        if (strcmp(now, before)) {
                size_t at = 0, line = 1;
                while (now[at] && now[at] == before[at])
                        line += now[at++] == '\n';
                fail_msg("seed %u: /metrics differs from the renderer it "
                         "replaced at line %zu:\n  now:    %.120s\n"
                         "  before: %.120s",
                         seed, line, now + at, before + at);
        }
        free(now);
        free(before);
}

/* Random states: flows, stages, groups and clusters, few or many; every
 * 25th with more missing topics, groups, members and clusters than the
 * renderer shows. */
static void test_same_bytes_random_states(void **state) {
        aagw_flow_t  *flows[MAX_FLOWS];
        aagw_unify_t *unify[MAX_UNIFY];
        (void)state;

        for (unsigned seed = 1; seed <= 300; seed++) {
                struct gw_admin_view v   = {0};
                bool                 big = seed % 25 == 0;
                rng_state                = 0x9E3779B97F4A7C15ull * seed;
                v.nflows = big ? MAX_FLOWS : below(MAX_FLOWS + 1);
                v.nunify = big ? MAX_UNIFY : below(MAX_UNIFY + 1);
                for (size_t i = 0; i < v.nflows; i++) {
                        draw_flow(&S.flows[i], i, big);
                        flows[i] = (aagw_flow_t *)(void *)&S.flows[i];
                }
                for (size_t i = 0; i < v.nunify; i++) {
                        draw_unify(&S.unify[i], i);
                        unify[i] = (aagw_unify_t *)(void *)&S.unify[i];
                }
                v.flows = flows;
                v.unify = unify;
                /* Only a process of a scale-out has the groups' view. */
                v.members =
                    big || below(3) ? (aagw_members_t *)(void *)&S : NULL;
                draw_groups(big);
                draw_aliases(big);
                compare(&v, seed);
        }
}

/* Nothing running: the HELP and TYPE lines and aagw_info alone. */
static void test_same_bytes_empty(void **state) {
        struct gw_admin_view v = {0};
        (void)state;
        S.ngroups  = 0;
        S.naliases = 0;
        compare(&v, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_same_bytes_empty),
            cmocka_unit_test(test_same_bytes_random_states),
        };
        return cmocka_run_group_tests_name("metrics", tests, group_setup,
                                           group_teardown);
}
