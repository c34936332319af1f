/*
 * gateway/metrics.c: GET /metrics of the admin endpoint (admin.c), in the
 * Prometheus text format: build information, then per flow and per unify
 * stage every counter and gauge (docs/metrics.md lists them).
 *
 * One table row per metric: its name, type and help, what its samples are
 * taken over (the flows, the unify stages, the owner groups, the
 * clusters, ...: that also fixes their labels), and for the plain ones
 * which field of the stats struct holds the value and how it is written.
 * render() prints a row; adding a metric is adding a row.
 */
#include "admin_int.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "aagw_build.h"

/* The clusters /metrics shows at most (as aagw_access_register() keeps). */
#define ACCESS_MAX 16
/* The topics per flow whose copy lacks partitions, at most. */
#define MISSING_MAX 64

/* ------------------------------- THE TABLE ----------------------------- */

/* What a metric's samples are taken over, which also fixes the labels. */
enum over {
        OVER_BUILD,    /* one sample {version,librdkafka,rocksdb} */
        OVER_FLOWS,    /* {flow} per flow */
        OVER_SCALE,    /* {flow,member} per flow run by a scale-out member */
        OVER_MISSING,  /* {flow,topic} per topic a flow's copy lacks
                          partitions of */
        OVER_SKIPS,    /* {flow,cause} per flow and skip cause */
        OVER_REASONS,  /* {flow,reason} per flow and rejection reason */
        OVER_LATENCY,  /* the histogram of each flow: {flow,le} buckets,
                          _sum and _count */
        OVER_SITES,    /* {site} per unify stage */
        OVER_OUTCOMES, /* {site,outcome} per unify stage and outcome */
        OVER_GROUPS,   /* {stage} per owner group (scale-out) */
        OVER_MEMBERS,  /* {stage,member} per member of an owner group */
        OVER_FAILING,  /* {cluster,cause} per cluster */
        OVER_FAILURES, /* {cluster} per cluster */
};

/* How a sample's value is read (OVER_FLOWS, OVER_SCALE: from struct
 * aagw_flow_stats; OVER_SITES: from struct aagw_unify_stats). */
enum value {
        V_NONE,   /* the row's 'over' knows its values */
        V_U64,    /* a uint64_t field */
        V_I64,    /* an int64_t field */
        V_I32,    /* an int32_t field */
        V_LAG,    /* an int64_t field, NaN when negative (unknown) */
        V_SECS,   /* an int64_t field in microseconds, as seconds; NaN when
                     negative */
        V_ZERO,   /* 1 while the int64_t field is 0, else 0 */
        V_UP,     /* 1 while the flow or stage starts, runs or is paused */
        V_PAUSED, /* 1 while the flow is paused */
};

struct metric {
        const char *name, *type, *help;
        enum over   over;
        enum value  value;
        size_t      off; /* of the field, for the V_ values that read one */
};

/* Field 'f' of stats struct 'T', written as its type says (a field of
 * another type does not compile). */
#define NUM(T, f)                                                              \
        _Generic(((T *)0)->f, uint64_t: V_U64, int64_t: V_I64,               \
                 int32_t: V_I32),                                              \
            offsetof(T, f)
/* The int64_t field 'f' of 'T', written as 'v' (V_LAG, V_SECS, V_ZERO). */
#define AS(v, T, f) _Generic(((T *)0)->f, int64_t: v), offsetof(T, f)

#define FLOW(f)       OVER_FLOWS, NUM(struct aagw_flow_stats, f)
#define FLOW_AS(v, f) OVER_FLOWS, AS(v, struct aagw_flow_stats, f)
#define SCALE(f)      OVER_SCALE, NUM(struct aagw_flow_stats, f)
#define SITE(f)       OVER_SITES, NUM(struct aagw_unify_stats, f)
#define SITE_AS(v, f) OVER_SITES, AS(v, struct aagw_unify_stats, f)
#define EACH(over)    over, V_NONE, 0

#define C "counter"
#define G "gauge"

/* In the order of the text; docs/metrics.md documents each. */
static const struct metric metrics[] = {
    {"aagw_info", G, "Build information.", EACH(OVER_BUILD)},

    /* ---------------------------------------------------- per flow */
    {"aagw_flow_up", G,
     "1 while the flow runs (or starts), 0 once failed or stopped.", OVER_FLOWS,
     V_UP, 0},
    {"aagw_flow_paused", G, "1 while the flow is paused.", OVER_FLOWS, V_PAUSED,
     0},
    {"aagw_replication_records_in_total", C,
     "Records consumed from the source.", FLOW(records_in)},
    {"aagw_replication_records_out_total", C,
     "Records acknowledged by the target.", FLOW(records_out)},
    {"aagw_replication_bytes_out_total", C,
     "Key and value bytes acknowledged by the target.", FLOW(bytes_out)},
    {"aagw_replication_diverged_total", C,
     "Records whose provenance path the topic name contradicts (a forged "
     "or forwarded aagw.prov): the sites on the path will not all hold "
     "them.",
     FLOW(diverged)},
    {"aagw_replication_dead_lettered_total", C,
     "Records written to the dead-letter topic.", FLOW(dead_lettered)},
    {"aagw_replication_bad_provenance_passed_total", C,
     "Records whose bad provenance was stripped (action pass).",
     FLOW(bad_passed)},
    {"aagw_replication_produce_errors_total", C,
     "Permanent delivery failures (then dead-lettered).", FLOW(produce_errors)},
    {"aagw_replication_fetch_restarts_total", C,
     "Source partitions whose fetch was restarted after it stood still "
     "while the leader held more.",
     FLOW(fetch_restarts)},
    {"aagw_replication_start_refetches_total", C,
     "Source partitions sought back to their assigned offset because the "
     "first record after an assignment came later.",
     FLOW(start_refetches)},
    {"aagw_replication_consumer_restarts_total", C,
     "Times the flow restarted its identity lease after its group fenced "
     "its group.instance.id (another process with the same identity, or "
     "its own rejoin after a stall past session.timeout.ms).",
     FLOW(consumer_restarts)},
    {"aagw_replication_lag_records", G,
     "Records behind the source high watermark (NaN: unknown, the source "
     "does not answer).",
     FLOW_AS(V_LAG, lag)},
    {"aagw_replication_source_reachable", G,
     "1 while the flow's source cluster answers its requests, 0 once one "
     "failed (then /healthz says degraded).",
     FLOW_AS(V_ZERO, source_down_ms)},
    {"aagw_replication_target_reachable", G,
     "1 while the flow's target cluster answers its requests, 0 once one "
     "failed (then /healthz says degraded).",
     FLOW_AS(V_ZERO, target_down_ms)},
    {"aagw_replication_source_rtt_seconds", G,
     "Round trip to the flow's source cluster, measured at the start (NaN: "
     "not yet).",
     FLOW_AS(V_SECS, source_rtt_us)},
    {"aagw_replication_fetch_window_bytes", G,
     "Bytes the source consumer may fetch per round trip, all partitions "
     "(replication.fetch_window; 0: not yet, or set by hand).",
     FLOW(fetch_window_bytes)},
    {"aagw_replication_fetch_queue_records", G,
     "Records fetched and waiting in the source consumers' queues: near 0 "
     "while the flow waits on the link.",
     FLOW(fetch_queue_records)},
    {"aagw_replication_fetch_connections", G,
     "Source consumers the flow's partitions are spread over, each with "
     "one fetch in flight per broker (replication.fetch_connections).",
     FLOW(fetch_connections)},
    {"aagw_replication_inflight_records", G,
     "Records sent and not yet acknowledged.", FLOW(inflight)},
    {"aagw_replication_topics", G, "Topics being replicated.", FLOW(topics)},
    {"aagw_replication_topics_refused", G,
     "Topics whose copy has fewer partitions than the source (the "
     "partitions it lacks are held).",
     FLOW(topics_refused)},
    {"aagw_replication_partitions_missing", G,
     "Source partitions held because their copy lacks them.",
     FLOW(partitions_missing)},
    {"aagw_topic_configs_synced_total", C,
     "Topic config changes applied to remote topics.",
     FLOW(topic_configs_synced)},
    {"aagw_topic_acls_synced_total", C, "Topic ACLs created for remote topics.",
     FLOW(topic_acls_synced)},
    {"aagw_topic_sync_errors_total", C,
     "Failed topic config or ACL sync calls.", FLOW(topic_sync_errors)},
    {"aagw_replication_partitions", G, "Source partitions assigned.",
     FLOW(partitions)},
    {"aagw_replication_truncations_total", C,
     "Times a source log start passed the replication position.",
     FLOW(truncations)},
    {"aagw_replication_truncated_records_total", C,
     "Source records deleted before they were replicated.",
     FLOW(truncated_records)},
    {"aagw_replication_source_resets_total", C,
     "Times a source partition's end offset went backwards.", FLOW(resets)},
    {"aagw_replication_target_resets_total", C,
     "Times a target topic vanished or its log restarted below the stored "
     "copy position (deleted and recreated).",
     FLOW(target_resets)},
    {"aagw_mm2_offset_syncs_total", C, "Offset-sync records written.",
     FLOW(offset_syncs)},
    {"aagw_mm2_checkpoints_total", C, "Checkpoint records written.",
     FLOW(checkpoints)},
    {"aagw_mm2_heartbeats_total", C, "Heartbeat records written.",
     FLOW(heartbeats)},
    {"aagw_heartbeat_latency_ms", G,
     "Age of the last heartbeat copy when the target acknowledged it (-1: "
     "none yet).",
     FLOW(heartbeat_latency_ms)},
    {"aagw_heartbeat_age_ms", G,
     "Time since the last heartbeat copy was acknowledged (-1: none yet); "
     "liveness of the direction.",
     FLOW(heartbeat_age_ms)},

    /* ------------------- per flow of a scale-out member, and member */
    {"aagw_scale_rebalances_total", C,
     "Assignments of the flow's owners' group to this member.",
     SCALE(rebalances)},
    {"aagw_scale_transactions_committed_total", C,
     "Transactions of copies committed.", SCALE(txn_committed)},
    {"aagw_scale_transactions_aborted_total", C,
     "Transactions aborted (their copies done again).", SCALE(txn_aborted)},
    {"aagw_scale_transactions_fenced_total", C,
     "Transactions refused because the owners' group had moved on without "
     "this member (its copies stay invisible).",
     SCALE(txn_fenced)},
    {"aagw_scale_work_partitions", G, "Work partitions this member owns.",
     SCALE(work_partitions)},
    {"aagw_scale_source_partitions", G, "Source partitions this member copies.",
     SCALE(partitions)},

    /* ------------------------------------- per flow, and something */
    {"aagw_topic_partitions_missing", G,
     "Partitions a remote topic lacks (its source has more), per topic; "
     "absent when none.",
     EACH(OVER_MISSING)},
    {"aagw_replication_skipped_total", C,
     "Records not copied, by cause (loop prevention and filters).",
     EACH(OVER_SKIPS)},
    {"aagw_replication_rejected_total", C,
     "Records with bad provenance or id, by reason.", EACH(OVER_REASONS)},
    {"aagw_replication_latency_ms", "histogram",
     "Time from the origin timestamp to the target's acknowledgement.",
     EACH(OVER_LATENCY)},

    /* ---------------------------------------------- per unify stage */
    {"aagw_unify_up", G,
     "1 while the unify stage of the site runs (or starts), 0 once failed "
     "or stopped.",
     OVER_SITES, V_UP, 0},
    {"aagw_unify_records_in_total", C,
     "Input records taken in by the unify stage.", SITE(records_in)},
    {"aagw_unify_records_out_total", C,
     "Records acknowledged by the unified topics.", SITE(records_out)},
    {"aagw_unify_records_total", C,
     "Input records by outcome: accepted (delivered), dropped (dedup: id "
     "seen before), superseded and identical (lww: not newer than the "
     "winner), rejected (bad provenance or no entity key).",
     EACH(OVER_OUTCOMES)},
    {"aagw_unify_diverged_total", C,
     "Input records whose provenance path the topic name contradicts (a "
     "forged or forwarded aagw.prov): the sites' unified topics differ by "
     "them; audited as diverged.",
     SITE(diverged)},
    {"aagw_unify_oversized_total", C,
     "Records whose unified copy was too large for the output: written as "
     "a stand-in with an empty value, without the producer's headers, "
     "marked <prefix>unify.oversize.",
     SITE(oversized)},
    {"aagw_unify_recovered_total", C,
     "Records found in a unified topic at start that the previous run "
     "wrote after its last stored state; folded into the state, not "
     "written again.",
     SITE(recovered)},
    {"aagw_unify_replayed_total", C,
     "Input records read again after a restart that had been delivered "
     "(recovered) already.",
     SITE(replayed)},
    {"aagw_unify_commits_total", C,
     "Epochs stored (one RocksDB WriteBatch each).", SITE(commits)},
    {"aagw_unify_fetch_restarts_total", C,
     "Times the stage's input fetches were restarted after an input stood "
     "still while its leader held more.",
     SITE(fetch_restarts)},
    {"aagw_unify_start_refetches_total", C,
     "Input partitions sought back to their assigned offset because the "
     "first record after an assignment came later.",
     SITE(start_refetches)},
    {"aagw_unify_rebalances_total", C,
     "Scale-out: assignments of the unify owners' group this process "
     "received.",
     SITE(rebalances)},
    {"aagw_unify_restores_total", C,
     "Scale-out: changelog partitions restored after gaining their output "
     "partitions.",
     SITE(restores)},
    {"aagw_unify_restore_ms_total", C,
     "Scale-out: milliseconds spent restoring changelogs.",
     SITE(restore_ms_total)},
    {"aagw_unify_routed_total", C,
     "Scale-out: input records this process routed into the site's route "
     "topics (those whose unified partition another process owns).",
     SITE(routed)},
    {"aagw_unify_restored_records_total", C,
     "Scale-out: changelog records read by restores.", SITE(restored_records)},
    {"aagw_unify_transactions_total", C,
     "Scale-out: transactions committed (output, changelog and the owners' "
     "fence together).",
     SITE(txn_commits)},
    {"aagw_unify_aborted_total", C,
     "Scale-out: transactions aborted and redone from the last committed "
     "positions.",
     SITE(aborted)},
    {"aagw_unify_fenced_total", C,
     "Scale-out: transactions the group coordinator refused because the "
     "group had moved on without this process (a stalled process come "
     "back); nothing of them is visible.",
     SITE(fenced)},
    {"aagw_unify_owned_partitions", G,
     "Scale-out: output partitions of unified topics this process owns.",
     SITE(owned_partitions)},
    {"aagw_unify_inflight_records", G,
     "Records written to unified topics and not yet acknowledged.",
     SITE(inflight)},
    {"aagw_unify_lag_records", G,
     "Input records not yet read by the unify stage (NaN: not known, yet "
     "or while the site's cluster does not answer).",
     SITE_AS(V_LAG, lag)},
    {"aagw_unify_cluster_reachable", G,
     "1 while the site's cluster answers the unify stage's requests, 0 "
     "once one failed (then /healthz says degraded).",
     SITE_AS(V_ZERO, down_ms)},

    /* ---------------------- the owner groups (samples: scale-out) */
    {"aagw_scale_out_members", G,
     "Processes in a stage's owner group as its coordinator last described "
     "it (NaN: the description failed).",
     EACH(OVER_GROUPS)},
    {"aagw_scale_out_work_partitions", G,
     "Work partitions each member of a stage's owner group owns.",
     EACH(OVER_MEMBERS)},

    /* ------------------------------------------------ per cluster */
    {"aagw_cluster_access_failing", G,
     "1 while aagw cannot log in to the cluster or is denied an operation "
     "there (cause: authentication, tls, security_protocol, "
     "authorization; seen in the last 30 s), else 0 (cause \"none\").",
     EACH(OVER_FAILING)},
    {"aagw_cluster_access_failures_total", C,
     "Failed logins and denied operations seen, per cluster.",
     EACH(OVER_FAILURES)},
};

#undef C
#undef G

/* ------------------------------ RENDERING ------------------------------ */

/* Everything the rows read, taken once per scrape. */
struct scrape {
        const struct gw_admin_view *view;
        struct aagw_flow_stats     *fs; /* view->nflows */
        struct aagw_unify_stats    *us; /* view->nunify */
        struct aagw_group_info     *groups;
        size_t                      ngroups;
        char                        aliases[ACCESS_MAX][AAGW_ALIAS_MAX + 1];
        size_t                      naliases;
};

/* Value 'v' of a row read from the stats struct at 'st' (field at
 * 'off'), or the state 'state', as text in 'buf'. */
static const char *value_str(enum value v, const void *st, size_t off,
                             aagw_flow_state_t state, char buf[32]) {
        const char *f = (const char *)st + off;
        int64_t     i64;

        switch (v) {
        case V_U64:
                snprintf(buf, 32, "%" PRIu64, *(const uint64_t *)f);
                break;
        case V_I64:
                snprintf(buf, 32, "%" PRId64, *(const int64_t *)f);
                break;
        case V_I32:
                snprintf(buf, 32, "%d", (int)*(const int32_t *)f);
                break;
        case V_LAG:
                return gw_lag_str(*(const int64_t *)f, buf);
        case V_SECS:
                if ((i64 = *(const int64_t *)f) < 0)
                        return "NaN";
                snprintf(buf, 32, "%.6f", (double)i64 / 1e6);
                break;
        case V_ZERO:
                snprintf(buf, 32, "%d", !*(const int64_t *)f);
                break;
        case V_UP:
                snprintf(buf, 32, "%d", state <= AAGW_FLOW_PAUSED);
                break;
        case V_PAUSED:
                snprintf(buf, 32, "%d", state == AAGW_FLOW_PAUSED);
                break;
        case V_NONE:
                buf[0] = '\0';
                break;
        }
        return buf;
}

/* The names of the causes counted per flow (OVER_SKIPS, OVER_REASONS). */
static const char *skip_name(int k) {
        return aagw_skip_name((aagw_skip_t)k);
}

static const char *reason_name(int k) {
        return aagw_reason_name((aagw_reason_t)k);
}

/* The histogram of flow 'i': cumulative buckets, then _sum and _count. */
static void latency(struct sbuf *b, const char *name, const char *flow,
                    const struct aagw_flow_stats *st) {
        uint64_t cum = 0;

        for (int k = 0; k < AAGW_LAT_BUCKETS; k++) {
                cum += st->lat_buckets[k];
                if (k < AAGW_LAT_BUCKETS - 1)
                        gw_sb_printf(b,
                                     "%s_bucket{flow=\"%s\",le=\"%" PRId64
                                     "\"} %" PRIu64 "\n",
                                     name, flow, aagw_lat_bounds_ms[k], cum);
                else
                        gw_sb_printf(b,
                                     "%s_bucket{flow=\"%s\",le=\"+Inf\"} "
                                     "%" PRIu64 "\n",
                                     name, flow, cum);
        }
        gw_sb_printf(b,
                     "%s_sum{flow=\"%s\"} %" PRIu64 "\n"
                     "%s_count{flow=\"%s\"} %" PRIu64 "\n",
                     name, flow, st->lat_sum_ms, name, flow, st->lat_count);
}

/* Row 'm': its HELP and TYPE lines, then its samples. */
static void render(struct sbuf *b, const struct metric *m,
                   const struct scrape *s) {
        const struct gw_admin_view *v = s->view;
        char                        buf[32];

        gw_sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help,
                     m->name, m->type);
        switch (m->over) {
        case OVER_BUILD:
                gw_sb_printf(b,
                             "%s{version=\"%s\",librdkafka=\"%s\","
                             "rocksdb=\"%s\"} 1\n",
                             m->name, AAGW_VERSION, rd_kafka_version_str(),
                             AAGW_ROCKSDB_VERSION);
                break;
        case OVER_FLOWS:
        case OVER_SCALE:
                for (size_t i = 0; i < v->nflows; i++) {
                        const char *flow = aagw_flow_name(v->flows[i]);
                        const char *val =
                            value_str(m->value, &s->fs[i], m->off,
                                      m->value == V_UP || m->value == V_PAUSED
                                          ? aagw_flow_state(v->flows[i])
                                          : AAGW_FLOW_STOPPED,
                                      buf);
                        if (m->over == OVER_FLOWS)
                                gw_sb_printf(b, "%s{flow=\"%s\"} %s\n", m->name,
                                             flow, val);
                        else if (s->fs[i].member)
                                gw_sb_printf(b,
                                             "%s{flow=\"%s\",member=\"%s\"} "
                                             "%s\n",
                                             m->name, flow, s->fs[i].member,
                                             val);
                }
                break;
        case OVER_MISSING:
                for (size_t i = 0; i < v->nflows; i++) {
                        struct aagw_flow_missing *mt =
                            calloc(MISSING_MAX, sizeof(*mt));
                        size_t nm =
                            mt ? aagw_flow_missing(v->flows[i], mt, MISSING_MAX)
                               : 0;
                        for (size_t k = 0; k < nm && k < MISSING_MAX; k++)
                                gw_sb_printf(
                                    b, "%s{flow=\"%s\",topic=\"%s\"} %d\n",
                                    m->name, aagw_flow_name(v->flows[i]),
                                    mt[k].topic,
                                    (int)(mt[k].source_partitions -
                                          mt[k].target_partitions));
                        free(mt);
                }
                break;
        case OVER_SKIPS:
        case OVER_REASONS: {
                /* The same sample a flow and cause; the causes (from 1:
                 * 0 is none), their names and counts differ. */
                bool        skips         = m->over == OVER_SKIPS;
                const char *label         = skips ? "cause" : "reason";
                const char *(*cause)(int) = skips ? skip_name : reason_name;
                int n = skips ? AAGW_SKIP_COUNT : AAGW_REASON_COUNT;
                for (size_t i = 0; i < v->nflows; i++) {
                        const uint64_t *cnt =
                            skips ? s->fs[i].skipped : s->fs[i].rejected;
                        for (int k = 1; k < n; k++)
                                gw_sb_printf(b,
                                             "%s{flow=\"%s\",%s=\"%s\"} "
                                             "%" PRIu64 "\n",
                                             m->name,
                                             aagw_flow_name(v->flows[i]), label,
                                             cause(k), cnt[k]);
                }
                break;
        }
        case OVER_LATENCY:
                for (size_t i = 0; i < v->nflows; i++)
                        latency(b, m->name, aagw_flow_name(v->flows[i]),
                                &s->fs[i]);
                break;
        case OVER_SITES:
                for (size_t i = 0; i < v->nunify; i++)
                        gw_sb_printf(
                            b, "%s{site=\"%s\"} %s\n", m->name,
                            aagw_unify_site(v->unify[i]),
                            value_str(m->value, &s->us[i], m->off,
                                      m->value == V_UP
                                          ? aagw_unify_state(v->unify[i])
                                          : AAGW_FLOW_STOPPED,
                                      buf));
                break;
        case OVER_OUTCOMES:
                for (size_t i = 0; i < v->nunify; i++) {
                        uint64_t o[5];
                        gw_unify_outcome_values(&s->us[i], o);
                        for (int k = 0; k < 5; k++)
                                gw_sb_printf(
                                    b,
                                    "%s{site=\"%s\",outcome=\"%s\"} %" PRIu64
                                    "\n",
                                    m->name, aagw_unify_site(v->unify[i]),
                                    gw_unify_outcomes[k], o[k]);
                }
                break;
        case OVER_GROUPS:
                for (size_t i = 0; i < s->ngroups; i++) {
                        const struct aagw_group_info *g = &s->groups[i];
                        if (g->error[0])
                                gw_sb_printf(b, "%s{stage=\"%s\"} NaN\n",
                                             m->name, g->stage);
                        else
                                gw_sb_printf(b, "%s{stage=\"%s\"} %zu\n",
                                             m->name, g->stage, g->n);
                }
                break;
        case OVER_MEMBERS:
                for (size_t i = 0; i < s->ngroups; i++)
                        for (size_t k = 0; k < s->groups[i].n; k++)
                                gw_sb_printf(
                                    b, "%s{stage=\"%s\",member=\"%s\"} %d\n",
                                    m->name, s->groups[i].stage,
                                    s->groups[i].m[k].member,
                                    (int)s->groups[i].m[k].nparts);
                break;
        case OVER_FAILING:
                for (size_t i = 0; i < s->naliases; i++) {
                        struct aagw_access acc;
                        bool now = aagw_access_current(s->aliases[i], &acc);
                        gw_sb_printf(b, "%s{cluster=\"%s\",cause=\"%s\"} %d\n",
                                     m->name, s->aliases[i],
                                     now ? aagw_access_cause_name(acc.cause)
                                         : "none",
                                     now ? 1 : 0);
                }
                break;
        case OVER_FAILURES:
                for (size_t i = 0; i < s->naliases; i++) {
                        struct aagw_access acc;
                        aagw_access_get(s->aliases[i], &acc);
                        gw_sb_printf(b, "%s{cluster=\"%s\"} %" PRIu64 "\n",
                                     m->name, s->aliases[i], acc.failures);
                }
                break;
        }
}

char *gw_metrics(const struct gw_admin_view *view) {
        struct sbuf   b = {0};
        struct scrape s = {.view = view};
        size_t        na;

        s.fs = calloc(view->nflows ? view->nflows : 1, sizeof(*s.fs));
        s.us = calloc(view->nunify ? view->nunify : 1, sizeof(*s.us));
        if (!s.fs || !s.us) {
                free(s.fs);
                free(s.us);
                return NULL;
        }
        for (size_t i = 0; i < view->nflows; i++)
                aagw_flow_stats(view->flows[i], &s.fs[i]);
        for (size_t i = 0; i < view->nunify; i++)
                aagw_unify_stats(view->unify[i], &s.us[i]);
        /* The owner groups as last described: only a process of a
         * scale-out has them (a group's view is about 260 KiB). */
        if (view->members &&
            (s.groups = calloc(GW_MAX_FLOWS + 1, sizeof(*s.groups))))
                s.ngroups =
                    aagw_members_get(view->members, s.groups, GW_MAX_FLOWS + 1);
        na         = aagw_access_aliases(s.aliases, ACCESS_MAX);
        s.naliases = na < ACCESS_MAX ? na : ACCESS_MAX;

        for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++)
                render(&b, &metrics[i], &s);
        free(s.fs);
        free(s.us);
        free(s.groups);
        return b.p;
}
