/*
 * tests/unit/metrics_before.c: the /metrics renderer as it was before the
 * table-driven one (gateway/metrics.c as of commit 1d4525d), kept verbatim
 * but for its name, gw_metrics_before(): test_metrics.c renders the same
 * populated states with both and wants the same bytes.  A deliberate
 * change to /metrics changes this copy in the same commit, or retires it
 * together with that test.
 */
#include "admin_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "aagw_build.h"

/* Microseconds as seconds; NaN if unknown (negative). */
static const char *us_secs_str(int64_t us, char buf[32]) {
        if (us < 0)
                return "NaN";
        snprintf(buf, 32, "%.6f", (double)us / 1e6);
        return buf;
}

char *gw_metrics_before(const struct gw_admin_view *view) {
        struct sbuf b = {0};
        struct aagw_flow_stats *st =
            calloc(view->nflows ? view->nflows : 1, sizeof(*st));
        if (!st)
                return NULL;
        for (size_t i = 0; i < view->nflows; i++)
                aagw_flow_stats(view->flows[i], &st[i]);

/* One metric: its HELP and TYPE lines, then one sample per flow (or
 * unify stage) i < n, labelled label="labelv". */
#define SERIES(kind, metric, help, n, label, labelv, fmt, val)                 \
        gw_sb_printf(&b, "# HELP " metric " " help "\n# TYPE " metric " " kind \
                      "\n");                                                   \
        for (size_t i = 0; i < (n); i++)                                       \
        gw_sb_printf(&b, metric "{" label "=\"%s\"} " fmt "\n", labelv, val)
#define FLOWS for (size_t i = 0; i < view->nflows; i++)
#define NAME  aagw_flow_name(view->flows[i])
#define COUNTER(metric, help, field)                                           \
        SERIES("counter", metric, help, view->nflows, "flow", NAME,            \
               "%" PRIu64, st[i].field)
#define GAUGE(metric, help, fmt, expr)                                         \
        SERIES("gauge", metric, help, view->nflows, "flow", NAME, fmt, expr)

        gw_sb_printf(&b, "# HELP aagw_info Build information.\n"
                      "# TYPE aagw_info gauge\n"
                      "aagw_info{version=\"%s\",librdkafka=\"%s\","
                      "rocksdb=\"%s\"} 1\n",
                  AAGW_VERSION, rd_kafka_version_str(), AAGW_ROCKSDB_VERSION);
        GAUGE("aagw_flow_up", "1 while the flow runs (or starts), 0 once "
                              "failed or stopped.",
              "%d",
              aagw_flow_state(view->flows[i]) <= AAGW_FLOW_PAUSED ? 1 : 0);
        GAUGE("aagw_flow_paused", "1 while the flow is paused.", "%d",
              aagw_flow_state(view->flows[i]) == AAGW_FLOW_PAUSED);
        COUNTER("aagw_replication_records_in_total",
                "Records consumed from the source.", records_in);
        COUNTER("aagw_replication_records_out_total",
                "Records acknowledged by the target.", records_out);
        COUNTER("aagw_replication_bytes_out_total",
                "Key and value bytes acknowledged by the target.", bytes_out);
        COUNTER("aagw_replication_diverged_total",
                "Records whose provenance path the topic name contradicts "
                "(a forged or forwarded aagw.prov): the sites on the path "
                "will not all hold them.",
                diverged);
        COUNTER("aagw_replication_dead_lettered_total",
                "Records written to the dead-letter topic.", dead_lettered);
        COUNTER("aagw_replication_bad_provenance_passed_total",
                "Records whose bad provenance was stripped (action pass).",
                bad_passed);
        COUNTER("aagw_replication_produce_errors_total",
                "Permanent delivery failures (then dead-lettered).",
                produce_errors);
        COUNTER("aagw_replication_fetch_restarts_total",
                "Source partitions whose fetch was restarted after it stood "
                "still while the leader held more.",
                fetch_restarts);
        COUNTER("aagw_replication_start_refetches_total",
                "Source partitions sought back to their assigned offset "
                "because the first record after an assignment came later.",
                start_refetches);
        COUNTER("aagw_replication_consumer_restarts_total",
                "Times the flow restarted its identity lease after its group "
                "fenced its group.instance.id (another process with the "
                "same identity, or its own rejoin after a stall past "
                "session.timeout.ms).",
                consumer_restarts);
        char lagbuf[24], rttbuf[32];
        GAUGE("aagw_replication_lag_records",
              "Records behind the source high watermark (NaN: unknown, the "
              "source does not answer).",
              "%s", gw_lag_str(st[i].lag, lagbuf));
        GAUGE("aagw_replication_source_reachable",
              "1 while the flow's source cluster answers its requests, 0 "
              "once one failed (then /healthz says degraded).",
              "%d", !st[i].source_down_ms);
        GAUGE("aagw_replication_target_reachable",
              "1 while the flow's target cluster answers its requests, 0 "
              "once one failed (then /healthz says degraded).",
              "%d", !st[i].target_down_ms);
        GAUGE("aagw_replication_source_rtt_seconds",
              "Round trip to the flow's source cluster, measured at the "
              "start (NaN: not yet).",
              "%s", us_secs_str(st[i].source_rtt_us, rttbuf));
        GAUGE("aagw_replication_fetch_window_bytes",
              "Bytes the source consumer may fetch per round trip, all "
              "partitions (replication.fetch_window; 0: not yet, or set by "
              "hand).",
              "%" PRId64, st[i].fetch_window_bytes);
        GAUGE("aagw_replication_fetch_queue_records",
              "Records fetched and waiting in the source consumers' "
              "queues: near 0 while the flow waits on the link.",
              "%" PRId64, st[i].fetch_queue_records);
        GAUGE("aagw_replication_fetch_connections",
              "Source consumers the flow's partitions are spread over, each "
              "with one fetch in flight per broker "
              "(replication.fetch_connections).",
              "%d", (int)st[i].fetch_connections);
        GAUGE("aagw_replication_inflight_records",
              "Records sent and not yet acknowledged.", "%" PRId64,
              st[i].inflight);
        GAUGE("aagw_replication_topics", "Topics being replicated.", "%d",
              st[i].topics);
        GAUGE("aagw_replication_topics_refused",
              "Topics whose copy has fewer partitions than the source (the "
              "partitions it lacks are held).",
              "%d", st[i].topics_refused);
        GAUGE("aagw_replication_partitions_missing",
              "Source partitions held because their copy lacks them.", "%d",
              st[i].partitions_missing);
        COUNTER("aagw_topic_configs_synced_total",
                "Topic config changes applied to remote topics.",
                topic_configs_synced);
        COUNTER("aagw_topic_acls_synced_total",
                "Topic ACLs created for remote topics.", topic_acls_synced);
        COUNTER("aagw_topic_sync_errors_total",
                "Failed topic config or ACL sync calls.", topic_sync_errors);
        GAUGE("aagw_replication_partitions", "Source partitions assigned.",
              "%d", st[i].partitions);
        /* offsets issue: MM2 topics and source truncation */
        COUNTER("aagw_replication_truncations_total",
                "Times a source log start passed the replication position.",
                truncations);
        COUNTER("aagw_replication_truncated_records_total",
                "Source records deleted before they were replicated.",
                truncated_records);
        COUNTER("aagw_replication_source_resets_total",
                "Times a source partition's end offset went backwards.",
                resets);
        COUNTER("aagw_replication_target_resets_total",
                "Times a target topic vanished or its log restarted below "
                "the stored copy position (deleted and recreated).",
                target_resets);
        COUNTER("aagw_mm2_offset_syncs_total", "Offset-sync records written.",
                offset_syncs);
        COUNTER("aagw_mm2_checkpoints_total", "Checkpoint records written.",
                checkpoints);
        COUNTER("aagw_mm2_heartbeats_total", "Heartbeat records written.",
                heartbeats);
        GAUGE("aagw_heartbeat_latency_ms",
              "Age of the last heartbeat copy when the target acknowledged "
              "it (-1: none yet).",
              "%" PRId64, st[i].heartbeat_latency_ms);
        GAUGE("aagw_heartbeat_age_ms",
              "Time since the last heartbeat copy was acknowledged (-1: none "
              "yet); liveness of the direction.",
              "%" PRId64, st[i].heartbeat_age_ms);

        /* Scale-out: labelled with this process's member name too. */
#define SCALE(kind, metric, help, fmt, val)                                    \
        gw_sb_printf(&b, "# HELP " metric " " help "\n# TYPE " metric " " kind \
                      "\n");                                                   \
        FLOWS if (st[i].member) gw_sb_printf(                                  \
            &b, metric "{flow=\"%s\",member=\"%s\"} " fmt "\n", NAME,         \
            st[i].member, val)
        SCALE("counter", "aagw_scale_rebalances_total",
              "Assignments of the flow's owners' group to this member.",
              "%" PRIu64, st[i].rebalances);
        SCALE("counter", "aagw_scale_transactions_committed_total",
              "Transactions of copies committed.", "%" PRIu64,
              st[i].txn_committed);
        SCALE("counter", "aagw_scale_transactions_aborted_total",
              "Transactions aborted (their copies done again).", "%" PRIu64,
              st[i].txn_aborted);
        SCALE("counter", "aagw_scale_transactions_fenced_total",
              "Transactions refused because the owners' group had moved on "
              "without this member (its copies stay invisible).",
              "%" PRIu64, st[i].txn_fenced);
        SCALE("gauge", "aagw_scale_work_partitions",
              "Work partitions this member owns.", "%d",
              st[i].work_partitions);
        SCALE("gauge", "aagw_scale_source_partitions",
              "Source partitions this member copies.", "%d",
              st[i].partitions);
#undef SCALE

        gw_sb_printf(&b, "# HELP aagw_topic_partitions_missing Partitions a "
                         "remote topic lacks (its source has more), per "
                         "topic; absent when none.\n"
                         "# TYPE aagw_topic_partitions_missing gauge\n");
        FLOWS {
                struct aagw_flow_missing *mt = calloc(64, sizeof(*mt));
                size_t nm = mt ? aagw_flow_missing(view->flows[i], mt, 64) : 0;
                for (size_t k = 0; k < nm && k < 64; k++)
                        gw_sb_printf(&b,
                                     "aagw_topic_partitions_missing{flow=\"%s\","
                                     "topic=\"%s\"} %d\n",
                                     NAME, mt[k].topic,
                                     (int)(mt[k].source_partitions -
                                           mt[k].target_partitions));
                free(mt);
        }
        gw_sb_printf(&b, "# HELP aagw_replication_skipped_total Records not "
                      "copied, by cause (loop prevention and filters).\n"
                      "# TYPE aagw_replication_skipped_total counter\n");
        FLOWS for (int k = 1; k < AAGW_SKIP_COUNT; k++) gw_sb_printf(
            &b,
            "aagw_replication_skipped_total{flow=\"%s\",cause=\"%s\"} %" PRIu64
            "\n",
            NAME, aagw_skip_name((aagw_skip_t)k), st[i].skipped[k]);
        gw_sb_printf(&b, "# HELP aagw_replication_rejected_total Records with bad "
                      "provenance or id, by reason.\n"
                      "# TYPE aagw_replication_rejected_total counter\n");
        FLOWS for (int k = 1; k < AAGW_REASON_COUNT; k++) gw_sb_printf(
            &b,
            "aagw_replication_rejected_total{flow=\"%s\",reason=\"%s\"} "
            "%" PRIu64 "\n",
            NAME, aagw_reason_name((aagw_reason_t)k), st[i].rejected[k]);

        gw_sb_printf(&b, "# HELP aagw_replication_latency_ms Time from the "
                      "origin timestamp to the target's acknowledgement.\n"
                      "# TYPE aagw_replication_latency_ms histogram\n");
        FLOWS {
                uint64_t cum = 0;
                for (int k = 0; k < AAGW_LAT_BUCKETS; k++) {
                        cum += st[i].lat_buckets[k];
                        if (k < AAGW_LAT_BUCKETS - 1)
                                gw_sb_printf(&b,
                                          "aagw_replication_latency_ms_bucket{"
                                          "flow=\"%s\",le=\"%" PRId64
                                          "\"} %" PRIu64 "\n",
                                          NAME, aagw_lat_bounds_ms[k], cum);
                        else
                                gw_sb_printf(&b,
                                          "aagw_replication_latency_ms_bucket{"
                                          "flow=\"%s\",le=\"+Inf\"} %" PRIu64
                                          "\n",
                                          NAME, cum);
                }
                gw_sb_printf(&b,
                          "aagw_replication_latency_ms_sum{flow=\"%s\"} "
                          "%" PRIu64 "\n"
                          "aagw_replication_latency_ms_count{flow=\"%s\"} "
                          "%" PRIu64 "\n",
                          NAME, st[i].lat_sum_ms, NAME, st[i].lat_count);
        }
#undef FLOWS
#undef NAME
#undef COUNTER
#undef GAUGE
        free(st);

        struct aagw_unify_stats *us =
            calloc(view->nunify ? view->nunify : 1, sizeof(*us));
        if (!us) {
                free(b.p);
                return NULL;
        }
        for (size_t i = 0; i < view->nunify; i++)
                aagw_unify_stats(view->unify[i], &us[i]);
#define SITES for (size_t i = 0; i < view->nunify; i++)
#define SITE  aagw_unify_site(view->unify[i])
#define UCOUNTER(metric, help, field)                                          \
        SERIES("counter", metric, help, view->nunify, "site", SITE,            \
               "%" PRIu64, us[i].field)
#define UGAUGE(metric, help, fmt, expr)                                        \
        SERIES("gauge", metric, help, view->nunify, "site", SITE, fmt, expr)
        UGAUGE("aagw_unify_up",
               "1 while the unify stage of the site runs (or starts), 0 once "
               "failed or stopped.",
               "%d", aagw_unify_state(view->unify[i]) <= AAGW_FLOW_PAUSED);
        UCOUNTER("aagw_unify_records_in_total",
                 "Input records taken in by the unify stage.", records_in);
        UCOUNTER("aagw_unify_records_out_total",
                 "Records acknowledged by the unified topics.", records_out);
        gw_sb_printf(&b, "# HELP aagw_unify_records_total Input records by "
                      "outcome: accepted (delivered), dropped (dedup: id "
                      "seen before), superseded and identical (lww: not "
                      "newer than the winner), rejected (bad provenance or "
                      "no entity key).\n"
                      "# TYPE aagw_unify_records_total counter\n");
        SITES {
                uint64_t v[5];
                gw_unify_outcome_values(&us[i], v);
                for (int k = 0; k < 5; k++)
                        gw_sb_printf(&b,
                                  "aagw_unify_records_total{site=\"%s\","
                                  "outcome=\"%s\"} %" PRIu64 "\n",
                                  SITE, gw_unify_outcomes[k], v[k]);
        }
        UCOUNTER("aagw_unify_diverged_total",
                 "Input records whose provenance path the topic name "
                 "contradicts (a forged or forwarded aagw.prov): the sites' "
                 "unified topics differ by them; audited as diverged.",
                 diverged);
        UCOUNTER("aagw_unify_oversized_total",
                 "Records whose unified copy was too large for the output: "
                 "written as a stand-in with an empty value, without the "
                 "producer's headers, marked <prefix>unify.oversize.",
                 oversized);
        UCOUNTER("aagw_unify_recovered_total",
                 "Records found in a unified topic at start that the "
                 "previous run wrote after its last stored state; folded "
                 "into the state, not written again.",
                 recovered);
        UCOUNTER("aagw_unify_replayed_total",
                 "Input records read again after a restart that had been "
                 "delivered (recovered) already.",
                 replayed);
        UCOUNTER("aagw_unify_commits_total",
                 "Epochs stored (one RocksDB WriteBatch each).", commits);
        UCOUNTER("aagw_unify_fetch_restarts_total",
                 "Times the stage's input fetches were restarted after an "
                 "input stood still while its leader held more.",
                 fetch_restarts);
        UCOUNTER("aagw_unify_start_refetches_total",
                 "Input partitions sought back to their assigned offset "
                 "because the first record after an assignment came later.",
                 start_refetches);
        UCOUNTER("aagw_unify_rebalances_total",
                 "Scale-out: assignments of the unify owners' group this "
                 "process received.",
                 rebalances);
        UCOUNTER("aagw_unify_restores_total",
                 "Scale-out: changelog partitions restored after gaining "
                 "their output partitions.",
                 restores);
        UCOUNTER("aagw_unify_restore_ms_total",
                 "Scale-out: milliseconds spent restoring changelogs.",
                 restore_ms_total);
        UCOUNTER("aagw_unify_routed_total",
                 "Scale-out: input records this process routed into the "
                 "site's route topics (those whose unified partition another "
                 "process owns).",
                 routed);
        UCOUNTER("aagw_unify_restored_records_total",
                 "Scale-out: changelog records read by restores.",
                 restored_records);
        UCOUNTER("aagw_unify_transactions_total",
                 "Scale-out: transactions committed (output, changelog "
                 "and the owners' fence together).",
                 txn_commits);
        UCOUNTER("aagw_unify_aborted_total",
                 "Scale-out: transactions aborted and redone from the last "
                 "committed positions.",
                 aborted);
        UCOUNTER("aagw_unify_fenced_total",
                 "Scale-out: transactions the group coordinator refused "
                 "because the group had moved on without this process (a "
                 "stalled process come back); nothing of them is visible.",
                 fenced);
        UGAUGE("aagw_unify_owned_partitions",
               "Scale-out: output partitions of unified topics this "
               "process owns.",
               "%d", us[i].owned_partitions);
        UGAUGE("aagw_unify_inflight_records",
               "Records written to unified topics and not yet acknowledged.",
               "%" PRId64, us[i].inflight);
        UGAUGE("aagw_unify_lag_records",
               "Input records not yet read by the unify stage (NaN: not "
               "known, yet or while the site's cluster does not answer).",
               "%s", gw_lag_str(us[i].lag, lagbuf));
        UGAUGE("aagw_unify_cluster_reachable",
               "1 while the site's cluster answers the unify stage's "
               "requests, 0 once one failed (then /healthz says degraded).",
               "%d", !us[i].down_ms);
#undef SITES
#undef SITE
#undef UCOUNTER
#undef UGAUGE
#undef SERIES
        free(us);

        /* Scale-out: the owner groups as last described.  HELP and TYPE
         * always, samples only when this process is a member. */
        struct aagw_group_info *g =
            view->members ? calloc(GW_MAX_FLOWS + 1, sizeof(*g)) : NULL;
        size_t ng = g ? aagw_members_get(view->members, g, GW_MAX_FLOWS + 1)
                      : 0;
        gw_sb_printf(&b, "# HELP aagw_scale_out_members Processes in a "
                         "stage's owner group as its coordinator last "
                         "described it (NaN: the description failed).\n"
                         "# TYPE aagw_scale_out_members gauge\n");
        for (size_t i = 0; i < ng; i++) {
                if (g[i].error[0])
                        gw_sb_printf(&b,
                                     "aagw_scale_out_members{stage=\"%s\"} "
                                     "NaN\n",
                                     g[i].stage);
                else
                        gw_sb_printf(&b,
                                     "aagw_scale_out_members{stage=\"%s\"} "
                                     "%zu\n",
                                     g[i].stage, g[i].n);
        }
        gw_sb_printf(&b, "# HELP aagw_scale_out_work_partitions Work "
                         "partitions each member of a stage's owner group "
                         "owns.\n"
                         "# TYPE aagw_scale_out_work_partitions gauge\n");
        for (size_t i = 0; i < ng; i++)
                for (size_t k = 0; k < g[i].n; k++)
                        gw_sb_printf(&b,
                                     "aagw_scale_out_work_partitions{stage="
                                     "\"%s\",member=\"%s\"} %d\n",
                                     g[i].stage, g[i].m[k].member,
                                     (int)g[i].m[k].nparts);
        free(g);

        char   aliases[16][AAGW_ALIAS_MAX + 1];
        size_t na = aagw_access_aliases(aliases, 16);
        gw_sb_printf(&b, "# HELP aagw_cluster_access_failing 1 while aagw "
                         "cannot log in to the cluster or is denied an "
                         "operation there (cause: authentication, tls, "
                         "security_protocol, authorization; seen in the "
                         "last 30 s), else 0 (cause \"none\").\n"
                         "# TYPE aagw_cluster_access_failing gauge\n");
        for (size_t i = 0; i < na && i < 16; i++) {
                struct aagw_access acc;
                bool now = aagw_access_current(aliases[i], &acc);
                gw_sb_printf(&b,
                             "aagw_cluster_access_failing{cluster=\"%s\","
                             "cause=\"%s\"} %d\n",
                             aliases[i],
                             now ? aagw_access_cause_name(acc.cause) : "none",
                             now ? 1 : 0);
        }
        gw_sb_printf(&b, "# HELP aagw_cluster_access_failures_total Failed "
                         "logins and denied operations seen, per cluster.\n"
                         "# TYPE aagw_cluster_access_failures_total counter\n");
        for (size_t i = 0; i < na && i < 16; i++) {
                struct aagw_access acc;
                aagw_access_get(aliases[i], &acc);
                gw_sb_printf(&b,
                             "aagw_cluster_access_failures_total{cluster="
                             "\"%s\"} %" PRIu64 "\n",
                             aliases[i], acc.failures);
        }
        return b.p;
}
