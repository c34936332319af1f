/*
 * gateway/config_keys.c: the one table of configuration keys.
 *
 * Add a setting here and the parser, `aagw config check`, `aagw config
 * reference`, the --help text and docs/configuration.md follow (a test
 * fails until docs/configuration.md is regenerated: scripts/gen-config-docs).
 * Its last column names its field in struct aagw_settings (config.h),
 * which the program reads: tests/unit/test_config.c checks that every key
 * has one, named as the key, that gets the default and a set value.
 */
#include "config.h"

#define NOLIMIT 0, 0

/* The binding columns: where each key's value lands (config.h). */
#define AT(f)          GW_CFG_FIELD(struct aagw_settings, f)
#define CLUSTER(f)     GW_CFG_FIELD(struct aagw_cluster_settings, f)
#define PER_FLOW(f)    GW_CFG_FIELD(struct aagw_flow_settings, f)
#define UNIFY_TOPIC(f) GW_CFG_FIELD(struct aagw_unify_topic_settings, f)
#define UNBOUND        0, FT_NONE, NULL

const struct cfg_key aagw_config_keys[] = {
    /* ---------------------------------------------------------- gateway */
    {"gateway.id", CT_NAME, "aagw", 1, 64, NULL, "--gateway-id", 0,
     "Name of this gateway deployment. Consumer groups are "
     "aagw.<id>.<source>-<target>; every process of one deployment uses "
     "the same id.",
     AT(gateway.id)},
    {"gateway.mode", CT_ENUM, "active-active", NOLIMIT,
     "active-active|active-passive|aggregate", "--mode", 0,
     "Replication topology: active-active replicates every pair of clusters "
     "both ways; active-passive one way from the primary; aggregate every "
     "cluster into the central one.",
     AT(gateway.mode)},
    {"gateway.site", CT_ALIAS, NULL, 1, 64, NULL, "--site", 0,
     "Run only the work whose target is this cluster alias (one process "
     "per data center, as MirrorMaker 2's --clusters). Unset: this process "
     "runs every direction.",
     AT(gateway.site)},
    {"gateway.primary", CT_ALIAS, NULL, 1, 64, NULL, "--primary", 0,
     "active-passive: the cluster that takes writes and replicates to the "
     "others.",
     AT(gateway.primary)},
    {"gateway.central", CT_ALIAS, NULL, 1, 64, NULL, "--central", 0,
     "aggregate: the cluster every other cluster replicates into.",
     AT(gateway.central)},
    {"gateway.state_dir", CT_STR, "aagw-state", 1, 4096, NULL, "--state-dir",
     0,
     "Directory of the RocksDB state (positions, seen ids, audit log). One "
     "process owns it at a time.",
     AT(gateway.state_dir)},
    {"gateway.log_level", CT_ENUM, "info", NOLIMIT, "debug|info|warn|error",
     "--log-level", 0, "Lowest level of log lines written to stderr.",
     AT(gateway.log_level)},

    /* ------------------------------------------------------------ admin */
    {"admin.listen", CT_HOSTPORT, NULL, NOLIMIT, NULL, "--admin", 0,
     "HOST:PORT of the admin HTTP endpoint (health, status, Prometheus "
     "metrics). Unset: no endpoint. A non-loopback address requires "
     "admin.token.",
     AT(admin.listen)},
    {"admin.token", CT_STR, NULL, 16, 256, NULL, NULL, CF_SECRET,
     "Bearer token required by the admin endpoint (at least 16 "
     "characters). Write it as ${AAGW_ADMIN_TOKEN} and keep the variable in "
     "a file only aagw's user can read (a systemd EnvironmentFile), not on "
     "the command line (--set), which every local user can see.",
     AT(admin.token)},
    {"admin.tls.cert", CT_STR, NULL, 1, 4096, NULL, "--admin-cert", 0,
     "PEM file with the admin endpoint's certificate, then any "
     "intermediate CA certificates. Set with admin.tls.key, the endpoint "
     "speaks HTTPS only; both files are read at start.",
     AT(admin.tls.cert)},
    {"admin.tls.key", CT_STR, NULL, 1, 4096, NULL, "--admin-key", 0,
     "PEM file with the private key of admin.tls.cert, encrypted if "
     "admin.tls.key_password is set.",
     AT(admin.tls.key)},
    {"admin.tls.key_password", CT_STR, NULL, 1, 1024, NULL, NULL, CF_SECRET,
     "Password of an encrypted admin.tls.key; set it for an encrypted key "
     "only.",
     AT(admin.tls.key_password)},
    {"admin.tls.client_ca", CT_STR, NULL, 1, 4096, NULL, "--admin-client-ca",
     0,
     "PEM file of the CA certificates that sign the admin endpoint's "
     "clients: every client must present a certificate signed by one of "
     "them, or the TLS handshake fails. admin.token, when set, is required "
     "as well.",
     AT(admin.tls.client_ca)},
    {"admin.health_listen", CT_HOSTPORT, NULL, NOLIMIT, NULL,
     "--admin-health", 0,
     "Loopback HOST:PORT of a second, plain HTTP listener that answers GET "
     "/healthz and /metrics only, with neither token nor client "
     "certificate: for health probes and scrapers on the same host when "
     "the admin endpoint needs them. Needs admin.listen.",
     AT(admin.health_listen)},

    /* -------------------------------------------------------- scale_out */
    {"scale_out.enabled", CT_BOOL, "false", NOLIMIT, NULL, "--scale-out", 0,
     "Share this site's work with the other processes started with the "
     "same gateway.id and gateway.site (docs/deployment.md): consumer "
     "groups on Kafka divide the flows' source partitions and the unify "
     "stage's partitions, and every write is in a transaction the group "
     "fences. Needs gateway.site and clusters that enforce transactions "
     "(Apache Kafka; not the embedded mock).",
     AT(scale_out.enabled)},
    {"scale_out.member", CT_NAME, NULL, 1, 128, NULL, "--member", 0,
     "This process's name among the site's processes: part of its "
     "transactional ids, shown in /status. Two running processes must not "
     "share it. Unset: the host name and a hash of the state directory's "
     "path.",
     AT(scale_out.member)},
    {"scale_out.work_partitions", CT_INT, "12", 1, 1000, NULL, NULL, 0,
     "Partitions of each work topic (aagw.<id>.<site>.unify.work, "
     "aagw.<id>.<source>-<target>.work): the most processes that can share "
     "one stage's work. Fixed once the topics exist.",
     AT(scale_out.work_partitions)},
    {"scale_out.session_timeout", CT_DURATION, "10s", 1000, 300000, NULL,
     NULL, 0,
     "How long a process may be silent before the others take its "
     "partitions over (session.timeout.ms of the owner groups; the "
     "brokers' group.min/max.session.timeout.ms bound it).",
     AT(scale_out.session_timeout_ms)},
    {"scale_out.transaction_timeout", CT_DURATION, "10s", 1000, 900000, NULL,
     NULL, 0,
     "transaction.timeout.ms of the processes' transactions: how long an "
     "open transaction of a process that died holds read_committed readers "
     "of its partitions back before the broker aborts it.",
     AT(scale_out.transaction_timeout_ms)},
    {"scale_out.commit_interval", CT_DURATION, "200ms", 10, 60000, NULL,
     NULL, 0,
     "How often a process commits its open transaction: the latency a "
     "read_committed reader of the unified topics and copies sees.",
     AT(scale_out.commit_interval_ms)},
    {"scale_out.standby", CT_BOOL, "false", NOLIMIT, NULL, NULL, 0,
     "Keep a warm copy of the unify partitions other processes own: each "
     "process reads their changelogs as they are written, so that when it "
     "takes one over it restores only what was written since, not the "
     "whole changelog (docs/deployment.md). Costs every process a read of "
     "every changelog.",
     AT(scale_out.standby)},
    {"scale_out.route", CT_BOOL, "true", NOLIMIT, NULL, NULL, 0,
     "Divide the unify stage's input partitions among the processes, as "
     "the flows divide theirs: each input record is read by one process, "
     "which routes it by its id (dedup) or entity key (lww) into the "
     "site's route topic aagw.<id>.<site>.route.<unified topic>, and the "
     "process that owns the unified partition decides it from there. "
     "false: every process reads every input and decides its own "
     "partitions' records (N processes read each input N times). A site "
     "switched to true keeps what it decided before; switching back to "
     "false is not a supported switch (docs/deployment.md, \"The route "
     "topic\").",
     AT(scale_out.route)},
    {"scale_out.rebalance", CT_ENUM, "eager", NOLIMIT, "eager|cooperative",
     NULL, 0,
     "How the processes' groups move work partitions when a process joins "
     "or leaves: eager stops every process's partitions at each change "
     "and assigns them all again; cooperative (cooperative-sticky, "
     "KIP-429) moves only the partitions that change owner, the others "
     "keep flowing. Every process of a site must use the same: change it "
     "with the whole site stopped (docs/deployment.md).",
     AT(scale_out.rebalance)},

    /* --------------------------------------------------------- clusters */
    {"clusters.*.bootstrap_servers", CT_STR, NULL, 1, 4096, NULL,
     "--cluster", CF_REQUIRED,
     "Bootstrap broker list of the cluster whose alias is the mapping key "
     "(the flag form is --cluster ALIAS=HOST:PORT,...).",
     CLUSTER(bootstrap_servers)},
    {"clusters.*.properties", CT_PROPS, NULL, NOLIMIT, NULL, NULL, 0,
     "librdkafka properties for every client of this cluster (security."
     "protocol, sasl.*, ssl.*, ...), checked with librdkafka during "
     "`aagw config check`. A consumer., producer. or admin. prefix applies "
     "a property to that kind of client only (consumer.session.timeout.ms). "
     "Values whose name contains password, secret or token, and those "
     "librdkafka marks sensitive (ssl.key.pem, ssl.key.location, "
     "ssl.ca.pem, sasl.username, sasl.oauthbearer.config, ...), are "
     "redacted in all output.",
     CLUSTER(properties)},

    /* ------------------------------------------------------ replication */
    {"replication.policy", CT_ENUM, "prefix", NOLIMIT, "prefix|identity",
     "--policy", 0,
     "Remote topic naming: prefix writes east's topic clicks as "
     "east<sep>clicks at the other sites; identity keeps the name and "
     "relies on provenance headers alone to stop loops.",
     AT(replication.policy)},
    {"replication.separator", CT_SEP, ".", 1, AAGW_SEP_MAX, NULL,
     "--separator", 0,
     "Separator between the source alias and the topic name under the "
     "prefix policy: any string of a topic name's characters, as "
     "MirrorMaker 2's (\".\", \"_\", \"--\", \".a.\"), up to 112 and "
     "short enough for mm2-offset-syncs<sep><alias><sep>internal to fit "
     "Kafka's 249 characters. It may not occur in a site alias, nor "
     "start inside one (MM2 splits a name at its first occurrence). "
     "MirrorMaker 2's "
     "internal topics are named with it too, as MM2 names them since Kafka "
     "3.0 (with _: mm2-offset-syncs_west_internal, "
     "east_checkpoints_internal); set MM2 tooling's "
     "replication.policy.separator to the same value.",
     AT(replication.separator)},
    {"replication.topics", CT_REGEXES, ".*", NOLIMIT, NULL, "--topic", 0,
     "Topics to replicate: regexes in MirrorMaker 2's (Java) syntax, PCRE2, "
     "matched against the whole topic name.",
     AT(replication.topics)},
    {"replication.topics_exclude", CT_REGEXES, NULL, NOLIMIT, NULL, NULL, 0,
     "Topics never replicated, in addition to the built-in exclusions "
     "(__.*, .*[-.]internal, .*\\.replica, unified outputs, aagw's own "
     "topics).",
     AT(replication.topics_exclude)},
    {"replication.groups", CT_REGEXES, ".*", NOLIMIT, NULL, NULL, 0,
     "Consumer groups whose offsets are checkpointed.",
     AT(replication.groups)},
    {"replication.groups_exclude", CT_REGEXES,
     "console-consumer-.*\nconnect-.*\n__.*", NOLIMIT, NULL, NULL, 0,
     "Consumer groups never checkpointed.",
     AT(replication.groups_exclude)},
    {"replication.flows", CT_FLOWS, NULL, NOLIMIT, NULL, NULL, 0,
     "Explicit directions as MirrorMaker 2 writes them (\"east->west\"). "
     "Unset: derived from gateway.mode.",
     AT(replication.flows)},
    {"replication.per_flow.*.topics", CT_REGEXES, NULL, NOLIMIT, NULL, NULL,
     0,
     "Topics the flow named by the mapping key (\"east->west\") "
     "replicates, in place of replication.topics (as MirrorMaker 2's "
     "east->west.topics); the built-in exclusions still apply.",
     PER_FLOW(topics)},
    {"replication.per_flow.*.topics_exclude", CT_REGEXES, NULL, NOLIMIT,
     NULL, NULL, 0,
     "Topics that flow never replicates, in place of "
     "replication.topics_exclude (as MirrorMaker 2's "
     "east->west.topics.exclude).",
     PER_FLOW(topics_exclude)},
    {"replication.multi_hop", CT_BOOL, "false", NOLIMIT, NULL, NULL, 0,
     "Re-replicate remote topics to further sites (a chain never repeats a "
     "site). Off: only topics written locally are replicated.",
     AT(replication.multi_hop)},
    {"replication.refresh_topics_interval", CT_DURATION, "5s", 100,
     3600000, NULL, NULL, 0,
     "How often source clusters are scanned for new matching topics.",
     AT(replication.refresh_topics_interval_ms)},
    {"replication.fetch_window", CT_ENUM, "auto", NOLIMIT, "auto|fixed",
     NULL, 0,
     "How much a flow's source consumer fetches per round trip. auto: "
     "measured at the start, the round trip to the source sizes "
     "max.partition.fetch.bytes and queued.max.messages.kbytes so a long "
     "link stays full (320 MiB/s x the round trip, spread over the "
     "partitions, at most 64 MiB; near the cluster the base sizes). fixed: "
     "the base sizes always (1 MiB per partition, a 16 MiB queue). Those "
     "consumer properties set by hand for the source cluster take "
     "precedence either way (operations.md, \"Across a WAN\").",
     AT(replication.fetch_window)},
    {"replication.fetch_connections", CT_ENUM, "auto", NOLIMIT,
     "auto|1|2|3|4|5|6|7|8", NULL, 0,
     "How many source consumers (broker connections, each with one fetch "
     "in flight) a flow spreads its partitions over. auto: one below a "
     "10 ms round trip; across a longer link as many as 320 MiB/s x the "
     "round trip needs at what one connection brings per round trip (the "
     "source broker's socket.send.buffer.bytes, doubled, and this host's "
     "net.ipv4.tcp_rmem maximum), at most 4. A number: that many. Never "
     "more than the flow's partitions (operations.md, \"More than one "
     "connection\").",
     AT(replication.fetch_connections)},
    {"replication.header_prefix", CT_STR, "aagw.", 1, 32, NULL, NULL, 0,
     "Prefix of aagw's header names: the provenance header (<prefix>prov) "
     "and the others reserved for aagw, which copies never carry over.",
     AT(replication.header_prefix)},
    {"replication.bad_provenance", CT_ENUM, "dead-letter", NOLIMIT,
     "pass|dead-letter|fail", NULL, 0,
     "What to do with a record whose provenance headers are malformed or "
     "forged: pass (strip them, treat the record as local), dead-letter "
     "(write it to the dead-letter topic), fail (stop the flow).",
     AT(replication.bad_provenance)},
    {"replication.missing_id", CT_ENUM, "derive", NOLIMIT,
     "derive|dead-letter|fail", NULL, 0,
     "What to do when a record lacks the id its topic's id rule asks for "
     "(no such header, not JSON, no such field): derive (use the derived "
     "id origin:topic:partition:offset), dead-letter, or fail (stop the "
     "flow).",
     AT(replication.missing_id)},
    {"replication.loop_check_topics", CT_BOOL, "true", NOLIMIT, NULL, NULL,
     0,
     "Stop loops by topic name (never send a topic to the site its prefix "
     "names). Only tests switch this off.",
     AT(replication.loop_check_topics)},
    {"replication.loop_check_headers", CT_BOOL, "true", NOLIMIT, NULL, NULL,
     0,
     "Stop loops by provenance (never send a record to a site on its "
     "path). Only tests switch this off.",
     AT(replication.loop_check_headers)},

    /* ---------------------------------------- remote topics (topics.c) */
    {"replication.factor", CT_INT, NULL, 1, 32767, NULL, NULL, 0,
     "Replication factor of the remote topics aagw creates (MirrorMaker "
     "2's replication.factor, whose default is 2). Unset: the target "
     "broker's default.replication.factor.",
     AT(replication.factor)},
    {"replication.sync_topic_configs", CT_BOOL, "true", NOLIMIT, NULL, NULL,
     0,
     "Copy each source topic's own config overrides (cleanup.policy, "
     "retention.ms, ...) to its remote topic, at creation and every "
     "replication.sync_topic_configs_interval (MirrorMaker 2's "
     "sync.topic.configs.enabled). Never copied: min.insync.replicas, "
     "unclean.leader.election.enable, message.timestamp.*, the throttled "
     "replica lists, and replication.topic_configs_exclude.",
     AT(replication.sync_topic_configs)},
    {"replication.sync_topic_configs_interval", CT_DURATION, "10m", 1000,
     86400000, NULL, NULL, 0,
     "How often topic configs are compared and applied (MirrorMaker 2's "
     "sync.topic.configs.interval.seconds).",
     AT(replication.sync_topic_configs_interval_ms)},
    {"replication.topic_configs_exclude", CT_REGEXES, NULL, NOLIMIT, NULL,
     NULL, 0,
     "Topic config names never copied, in addition to MirrorMaker 2's "
     "default exclusions (regexes matched against the whole name, as "
     "MM2's config.properties.exclude).",
     AT(replication.topic_configs_exclude)},
    {"replication.sync_topic_acls", CT_BOOL, "true", NOLIMIT, NULL, NULL, 0,
     "Copy the LITERAL ACLs of each replicated topic to its remote topic, "
     "ALLOW ALL as ALLOW READ and without ALLOW WRITE (only aagw writes a "
     "copy), as MirrorMaker 2's sync.topic.acls.enabled. ACLs are added, "
     "never removed. Needs an authorizer on both clusters.",
     AT(replication.sync_topic_acls)},
    {"replication.sync_topic_acls_interval", CT_DURATION, "10m", 1000,
     86400000, NULL, NULL, 0,
     "How often topic ACLs are copied (MirrorMaker 2's "
     "sync.topic.acls.interval.seconds).",
     AT(replication.sync_topic_acls_interval_ms)},

    /* what to do when the source lost records */
    {"replication.on_truncation", CT_ENUM, "resume", NOLIMIT, "resume|fail",
     NULL, 0,
     "When a source partition lost records before they were replicated "
     "(its log start passed the stored position) or was reset (its end "
     "offset went backwards): resume (log it with the offsets, count it, "
     "resume at the log start) or fail (stop the flow).",
     AT(replication.on_truncation)},

    /* ------------------------------------------------------------ unify */
    {"unify.mode", CT_ENUM, "dedup", NOLIMIT, "dedup|lww|off", "--unify", 0,
     "Default conflict handling of the unified stream: dedup (first "
     "occurrence of an id wins), lww (last write wins per entity key), off "
     "(no unified stream).",
     AT(unify.mode)},
    {"unify.id", CT_IDRULE, "derived", NOLIMIT, NULL, "--id", 0,
     "Where the global message id comes from: header:NAME, key, "
     "json:FIELD, hash (of key and value), or derived (origin alias, topic, "
     "partition, offset).",
     AT(unify.id)},
    {"unify.entity_key", CT_KEYRULE, "key", NOLIMIT, NULL, NULL, 0,
     "lww: the entity whose latest version wins: key or json:FIELD.",
     AT(unify.entity_key)},
    {"unify.window", CT_DURATION, "24h", 1000, 31536000000LL, NULL, NULL, 0,
     "How long ids and versions are remembered. An id seen again after the "
     "window is delivered again. Under scale-out it also sets how long the "
     "ids changelog topics (aagw.<id>.<site>.ids.<unified topic>) keep ids, "
     "and the audit topics (aagw.<id>.<site>.audit.<unified topic>) their "
     "entries: the window plus a tenth of it, at least a minute (a window "
     "under a minute: twice the window); use the same value on every "
     "process of a site.",
     AT(unify.window_ms)},
    {"unify.audit_accepted", CT_BOOL, "false", NOLIMIT, NULL, NULL, 0,
     "dedup: also write an audit log entry for every delivered record. "
     "Off, a delivery is recorded by its seen-id entry (aagw audit id shows "
     "it as first seen) and the audit log holds the exceptions (dropped, "
     "rejected); on, the log is complete at about twice the write cost. "
     "lww always logs accepted versions.",
     AT(unify.audit_accepted)},
    {"unify.suffix", CT_STR, ".unified", 1, 64, NULL, NULL, 0,
     "Suffix of the unified output topic (clicks -> clicks.unified).",
     AT(unify.suffix)},
    {"unify.cache_mb", CT_INT, "64", 8, 65536, NULL, NULL, 0,
     "RocksDB block cache, write buffers and the not yet indexed tail of "
     "the unify state, in MiB.",
     AT(unify.cache_mb)},
    {"unify.filter_mb", CT_INT, "64", 1, 65536, NULL, NULL, 0,
     "In-memory filter in front of the seen-id store, in MiB (on top of "
     "unify.cache_mb). About 1 MiB per million ids in the window keeps "
     "false positives (each costs a RocksDB read) to a few per cent.",
     AT(unify.filter_mb)},
    {"unify.filter", CT_ENUM, "bloom", NOLIMIT, "bloom|exact", NULL, 0,
     "What the filter holds. bloom: a Bloom filter, ~1 MiB per million ids; "
     "a duplicate, or a false positive, is then confirmed by a RocksDB "
     "read. exact: the ids themselves (their 16-byte hashes) behind a "
     "small Bloom filter, ~29 bytes per id in the window, so "
     "unify.filter_mb must be sized for the window's ids (290 MiB for 10 "
     "million); a duplicate is then known without a read (except in the "
     "oldest epoch of the window, where its stored time decides). A full "
     "filter keeps working, with a warning and a read for each id it "
     "could not take.",
     AT(unify.filter)},
    {"unify.topics.*.mode", CT_ENUM, NULL, NOLIMIT, "dedup|lww|off", NULL, 0,
     "Per-topic override of unify.mode (the mapping key is the local topic "
     "name).",
     UNIFY_TOPIC(mode)},
    {"unify.topics.*.id", CT_IDRULE, NULL, NOLIMIT, NULL, NULL, 0,
     "Per-topic override of unify.id.",
     UNIFY_TOPIC(id)},
    {"unify.topics.*.entity_key", CT_KEYRULE, NULL, NOLIMIT, NULL, NULL, 0,
     "Per-topic override of unify.entity_key.",
     UNIFY_TOPIC(entity_key)},
    {"unify.topics.*.output", CT_STR, NULL, 1, 249, NULL, NULL, 0,
     "Per-topic unified output topic name (default <topic><unify.suffix>).",
     UNIFY_TOPIC(output)},

    /* ------------------------------------- mm2 (offsets and failover) */
    {"mm2.heartbeats_interval", CT_DURATION, "1s", 0, 3600000, NULL, NULL, 0,
     "How often each flow writes a heartbeat (MirrorMaker 2 format, key "
     "source and target alias) into the source's `heartbeats` topic, which "
     "is replicated like any topic (east.heartbeats at west); its copies "
     "give each direction's latency and liveness. 0s: no heartbeats.",
     AT(mm2.heartbeats_interval_ms)},
    {"mm2.offset_syncs", CT_BOOL, "true", NOLIMIT, NULL, NULL, 0,
     "Write offset-syncs (MirrorMaker 2 format) whenever the source-to-"
     "target offset delta of a partition changes, so `aagw offsets "
     "translate` and MM2 tooling can translate consumer offsets exactly.",
     AT(mm2.offset_syncs)},
    {"mm2.offset_syncs_location", CT_ENUM, "source", NOLIMIT,
     "source|target", NULL, 0,
     "Where offset-syncs live, as MirrorMaker 2's offset-syncs.topic."
     "location: source (mm2-offset-syncs.<target>.internal on the source) "
     "or target (mm2-offset-syncs.<source>.internal on the target); each "
     "dot is replication.separator.",
     AT(mm2.offset_syncs_location)},
    {"mm2.offset_syncs_max_rate", CT_INT, "100", 1, 1000000, NULL, NULL, 0,
     "Most offset-syncs per second and partition. Above it syncs are "
     "suppressed and the next one is marked lossy (translation in that "
     "range is reported as not exact) until the next position save (every "
     "second) writes an exact one.",
     AT(mm2.offset_syncs_max_rate)},
    {"mm2.checkpoints_interval", CT_DURATION, "10s", 0, 3600000, NULL, NULL,
     0,
     "How often the committed offsets of the groups selected by "
     "replication.groups / groups_exclude are translated and written to "
     "<source>.checkpoints.internal (dots: replication.separator) at the "
     "target (MirrorMaker 2 format). "
     "Clusters that cannot list groups (the embedded one) get the groups "
     "named literally in replication.groups. 0s: no checkpoints.",
     AT(mm2.checkpoints_interval_ms)},
    {"mm2.sync_group_offsets", CT_BOOL, "false", NOLIMIT, NULL, NULL, 0,
     "With each checkpoint, also commit the translated offsets for the group "
     "at the target (MirrorMaker 2's sync.group.offsets.enabled), only "
     "moving it forward. A group with active members at the target is left "
     "alone: the broker refuses offsets for a group that is consuming.",
     AT(mm2.sync_group_offsets)},

    {"mm2.takeover", CT_BOOL, "true", NOLIMIT, NULL, NULL, 0,
     "Take over from MirrorMaker 2: a partition with no stored position "
     "whose remote topic ends with a record aagw did not write resumes "
     "where the other replicator stopped (its offset-syncs and the "
     "target's last record, checked against the source; logged), instead "
     "of copying the source from its log start again.",
     AT(mm2.takeover)},

    {NULL, CT_STR, NULL, NOLIMIT, NULL, NULL, 0, NULL, UNBOUND},
};
