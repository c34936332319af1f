/*
 * aagw - active-active replication gateway for Kafka
 *
 * policy/aagw_policy.h: policy/'s decisions, the header other folders
 * include for them.
 *
 * policy/ holds pure decisions and no I/O: topic naming, filters,
 * provenance headers, loop-prevention verdicts, id rules, the
 * last-write-wins order, the hybrid logical clock's arithmetic and MM2's
 * record formats.  Everything here is unit-testable without a broker, a
 * disk or a clock you cannot set.  Two more headers sit beside it:
 * aagw_base.h (clocks, counters, error codes, logging: included here, as
 * every user needs the error codes) and aagw_unify_contract.h (the words
 * the unify stage's Kafka side and its decider share).
 */
#ifndef AAGW_POLICY_H
#define AAGW_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aagw_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------- SECRETS ------------------------------- */

/**
 * @returns true if a configuration key names a secret whose value must never
 * be printed or logged: any key containing "password", "secret" or "token"
 * (case insensitive), and every property librdkafka 2.8.0 marks sensitive
 * (ssl.key.pem, ssl.key.location, ssl_key, ssl.ca.pem, sasl.username,
 * sasl.oauthbearer.config, ...), alone or as the end of a dotted path
 * ("clusters.east.properties.producer.ssl.key.pem").
 */
bool aagw_key_is_secret(const char *key);

/** The text printed instead of a secret value. */
#define AAGW_REDACTED "[redacted]"

/* ===== REPLICATION POLICY ===== */

/*
 * The decision layer of replication and of the unify stage: topic naming,
 * topic and group filters, provenance headers, loop-prevention verdicts and
 * global id rules.  Nothing here does I/O or reads a clock; the per-record
 * functions never allocate, except the json:FIELD id rule (json-c builds
 * the parsed value, freed before the call returns).  docs/provenance.md is
 * the user-facing account.
 *
 * PROVENANCE WIRE FORMAT (version 1).  This is a wire contract: every aagw
 * that reads a topic must agree on it.  P is the header prefix (default
 * "aagw.", conf.header_prefix).  Provenance is ONE header, P "prov"
 * ("aagw.prov"), whose value is ASCII text without a terminating NUL,
 * except the id, which is opaque bytes:
 *
 *   "1;" PATH ";" TOPIC ":" PART ":" OFFSET ";" MS ":" COUNTER ";" ID
 *
 *   1       the format version; a value not starting with "1;" is bad
 *           provenance (AAGW_REASON_PROV_VERSION), never guessed at
 *   PATH    ALIAS{">"ALIAS}: every site the record has been written at,
 *           origin first, INCLUDING the site it is stored at now, e.g.
 *           "east>west" for a record east wrote and aagw copied to west;
 *           the origin is PATH[0]
 *   TOPIC ":" PART ":" OFFSET   origin coordinates, e.g. "clicks:3:1234"
 *   MS ":" COUNTER              origin hybrid logical clock, e.g.
 *                               "1714557600123:0"
 *   ID      the global message id: the rest of the value, 0..1024 bytes,
 *           any bytes (';' included).  Empty means the derived id
 *           ORIGIN ":" TOPIC ":" PART ":" OFFSET (aagw_id_derive()), which
 *           the reader rebuilds; aagw writes an empty ID whenever the id
 *           is the derived one.  So the common value is about 40 bytes:
 *           "1;east>west;clicks:3:1234;1714557600123:0;"
 *
 *   ALIAS   = 1..64 of [A-Za-z0-9_-]
 *   TOPIC   = 1..249 of [A-Za-z0-9._-], not "." or ".."
 *   PART    = decimal 0..2147483647,         no sign, no leading zero
 *   OFFSET  = decimal 0..9223372036854775807, no sign, no leading zero
 *   MS      = decimal 0..2^48-1 (Unix ms),   no sign, no leading zero
 *   COUNTER = decimal 0..65535,              no sign, no leading zero
 *   PATH    = 1..16 aliases, no alias twice
 *
 * A record carries either no P "prov" header (it was written by a producer
 * at the site it is read from) or exactly one, non-null.  Anything else is
 * bad provenance (see aagw_reason_t).  Other header names under P are
 * reserved for aagw: readers ignore them and the replicator does not copy
 * them (aagw_prov_is_own_header()).  Among them are the five headers of
 * the draft format (P origin, path, id, src, hlc: never deployed, now
 * meaningless), P "hop" (the replicator's own) and P "dlq." (dead
 * letters).  A later, incompatible format will use a new leading version.
 */

/* ------------------------------- LIMITS -------------------------------- */

#define AAGW_ALIAS_MAX     64   /**< bytes in a site alias */
#define AAGW_SITES_MAX     64   /**< sites in one policy */
#define AAGW_TOPIC_MAX     249  /**< bytes in a Kafka topic name */
/** Bytes in the topic name separator.  MirrorMaker 2 takes any string,
 *  but its offset-syncs topic, "mm2-offset-syncs" SEP alias SEP
 *  "internal", must still be a topic name: with a one-character alias
 *  that leaves (249 - 16 - 8 - 1) / 2 = 112 for each separator.  Longer
 *  aliases allow less; aagw_repl_policy_new() checks each site. */
#define AAGW_SEP_MAX       112
#define AAGW_AFFIX_MAX     64   /**< header prefix, own prefix, suffix */
#define AAGW_PROV_MAX_HOPS 16   /**< sites in a provenance path */
#define AAGW_ID_MAX        1024 /**< bytes in a global message id */
#define AAGW_ID_KEY_LEN    16   /**< bytes in the storage key of an id */
#define AAGW_ID_ARG_MAX    255  /**< bytes in NAME / FIELD of an id rule */
#define AAGW_PROV_HDR_CNT  1    /**< headers in an encoded provenance */
#define AAGW_PROV_ENC_MAX  2560 /**< bytes of the encoded value (+ NUL) */

/* ------------------------------- RECORDS ------------------------------- */

/**
 * @brief One record header, as librdkafka's rd_kafka_header_get_all()
 * hands it out.
 *
 * @p name is NUL-terminated.  @p value NULL is a null-valued header (Kafka
 * allows it and hostile producers send it); otherwise it points at @p size
 * bytes.  Everything is borrowed.
 */
struct aagw_header {
        const char *name;
        const void *value;
        size_t      size;
};

/**
 * @brief A read-only view of one consumed record.  Everything is borrowed
 * from the caller for the duration of the call it is passed to.
 */
struct aagw_rec {
        const char               *topic;        /**< topic at the source */
        int32_t                   partition;    /**< >= 0 */
        int64_t                   offset;       /**< >= 0 */
        int64_t                   timestamp_ms; /**< < 0: unknown */
        const void               *key;          /**< NULL: null key */
        size_t                    key_len;
        const void               *value;        /**< NULL: tombstone */
        size_t                    value_len;
        const struct aagw_header *hdrs;         /**< may be NULL if 0 */
        size_t                    hdr_cnt;
};

/* -------------------------- REASONS AND CAUSES ------------------------- */

/**
 * @brief Why a record's provenance or id could not be used.
 *
 * Values are stable for one build only; use aagw_reason_name() in metrics
 * labels, logs and dead-letter headers.  Callers count them (policy/ keeps
 * no counters): an array of AAGW_REASON_COUNT counters indexed by reason.
 */
typedef enum {
        AAGW_REASON_OK = 0,
        /* the header (aagw_prov_decode) */
        AAGW_REASON_PROV_NULL_VALUE,  /**< the provenance header is null */
        AAGW_REASON_PROV_DUPLICATE,   /**< the provenance header repeats */
        AAGW_REASON_PROV_INCOMPLETE,  /**< the value ends before its ID */
        AAGW_REASON_PROV_VERSION,     /**< the value is not "1;..." */
        /* one field (aagw_prov_decode) */
        AAGW_REASON_PROV_PATH_INVALID,  /**< empty hop, bad alias */
        AAGW_REASON_PROV_PATH_TOO_LONG, /**< > 16 hops or 1039 bytes */
        AAGW_REASON_PROV_ID_TOO_LONG,
        AAGW_REASON_PROV_SRC_INVALID,   /**< shape or topic name */
        AAGW_REASON_PROV_SRC_TOO_LONG,
        AAGW_REASON_PROV_SRC_PARTITION_INVALID,
        AAGW_REASON_PROV_SRC_OFFSET_INVALID,
        AAGW_REASON_PROV_HLC_INVALID,
        /* consistency (aagw_prov_validate) */
        AAGW_REASON_PROV_ORIGIN_UNKNOWN,    /**< path[0] not a site */
        AAGW_REASON_PROV_PATH_UNKNOWN_SITE, /**< not a configured site */
        AAGW_REASON_PROV_PATH_REPEATS_SITE,
        AAGW_REASON_PROV_PATH_NOT_AT_SITE, /**< last hop != where it is read */
        /* id rules (aagw_id_extract) */
        AAGW_REASON_ID_NO_HEADER,     /**< header:NAME absent */
        AAGW_REASON_ID_NULL_HEADER,   /**< header:NAME is null-valued */
        AAGW_REASON_ID_NO_KEY,        /**< key rule, null key */
        AAGW_REASON_ID_NO_VALUE,      /**< json rule, tombstone */
        AAGW_REASON_ID_NOT_JSON,      /**< json rule, value is not JSON */
        AAGW_REASON_ID_NOT_OBJECT,    /**< json rule, JSON but no object */
        AAGW_REASON_ID_NO_FIELD,      /**< json rule, field absent */
        AAGW_REASON_ID_DUP_FIELD,     /**< no longer returned: json-c keeps
                                         the last of a repeated field; kept
                                         so reason names stay stable */
        AAGW_REASON_ID_FIELD_INVALID, /**< json rule, not string/integer */
        AAGW_REASON_ID_EMPTY,         /**< the id would be empty */
        AAGW_REASON_ID_TOO_LONG,      /**< the id would exceed 1024 bytes */
        AAGW_REASON_COUNT
} aagw_reason_t;

/** @returns a stable snake_case token for @p r ("prov_path_repeats_site"),
 *  static, never NULL ("unknown" when out of range). */
const char *aagw_reason_name(aagw_reason_t r);
/** @returns a one-line human description of @p r, static, never NULL. */
const char *aagw_reason_str(aagw_reason_t r);

/**
 * @brief Why a topic or record is not replicated to a target.  These are
 * the normal, expected outcomes of loop prevention and filtering, not
 * errors.
 */
typedef enum {
        AAGW_SKIP_NONE = 0,
        AAGW_SKIP_INTERNAL,          /**< internal topic, never replicated */
        AAGW_SKIP_FILTERED,          /**< include/exclude filters */
        AAGW_SKIP_TOPIC_FROM_TARGET, /**< name chain contains the target */
        AAGW_SKIP_REMOTE_TOPIC,      /**< remote topic, multi_hop off */
        AAGW_SKIP_CHAIN_REPEATS_SITE, /**< multi_hop: chain repeats a site */
        AAGW_SKIP_TOO_MANY_HOPS,     /**< would exceed 16 sites */
        AAGW_SKIP_NAME_TOO_LONG,     /**< remote name > 249 bytes */
        AAGW_SKIP_PATH_HAS_TARGET,   /**< provenance path has the target */
        AAGW_SKIP_REMOTE_RECORD,     /**< record was replicated into the
                                          source, multi_hop off */
        AAGW_SKIP_COUNT
} aagw_skip_t;

/** @returns a stable snake_case token for @p s, static, never NULL. */
const char *aagw_skip_name(aagw_skip_t s);
/** @returns a one-line human description of @p s, static, never NULL. */
const char *aagw_skip_str(aagw_skip_t s);

/* ---------------------------- POLICY OBJECT ---------------------------- */

typedef enum {
        AAGW_NAMING_PREFIX   = 0, /**< east's clicks is east<sep>clicks */
        AAGW_NAMING_IDENTITY = 1, /**< east's clicks is clicks everywhere */
} aagw_naming_t;

/** What to do with a record whose provenance (or id) cannot be used. */
typedef enum {
        AAGW_BAD_PASS        = 0, /**< strip / derive, replicate as local */
        AAGW_BAD_DEAD_LETTER = 1, /**< REJECT: write to the dead-letter topic */
        AAGW_BAD_FAIL        = 2, /**< REJECT: stop the flow (fail closed) */
} aagw_bad_action_t;

/**
 * @brief Settings of a replication policy.  Fill it with
 * aagw_repl_conf_init(), then set fields.  Pointers are borrowed only for
 * the aagw_repl_policy_new() call, which copies what it keeps.
 */
struct aagw_repl_conf {
        const char *const *sites;    /**< every site alias of the deployment */
        size_t             site_cnt; /**< 1..AAGW_SITES_MAX */
        aagw_naming_t      naming;
        const char        *separator;      /**< NULL: "."; 1..AAGW_SEP_MAX
                                                topic chars */
        bool               multi_hop;      /**< re-replicate remote data */
        bool               allow_unknown_sites; /**< accept provenance
                                                     naming other sites */
        const char        *header_prefix;  /**< NULL: "aagw." */
        const char        *own_prefix;     /**< NULL: "aagw."; aagw's own
                                                topics and groups */
        const char        *unified_suffix; /**< NULL: ".unified" */
        /** Topics to replicate; NULL: ".*". */
        const char *const *topics_include;
        size_t             topics_include_cnt;
        /** Topics never replicated, on top of the built-in exclusions. */
        const char *const *topics_exclude;
        size_t             topics_exclude_cnt;
        /** Groups to checkpoint; NULL: ".*". */
        const char *const *groups_include;
        size_t             groups_include_cnt;
        /** Groups never checkpointed; NULL: the MM2 defaults
         *  console-consumer-.*, connect-.*, __.* (a list replaces them). */
        const char *const *groups_exclude;
        size_t             groups_exclude_cnt;
        /** Topic configs never copied to remote topics, on top of
         *  MirrorMaker 2's default exclusions (see
         *  aagw_repl_config_allowed()). */
        const char *const *configs_exclude;
        size_t             configs_exclude_cnt;
        aagw_bad_action_t  on_bad_provenance; /**< default DEAD_LETTER */
        aagw_bad_action_t  on_missing_id;     /**< default PASS (derive) */
};

/** Set @p conf to the defaults (no sites: the caller must add them). */
void aagw_repl_conf_init(struct aagw_repl_conf *conf);

typedef struct aagw_repl_policy aagw_repl_policy_t; /* opaque */

/**
 * @brief Check @p conf and build a policy from it (filters compiled once).
 *
 * @returns a policy the caller destroys with aagw_repl_policy_destroy(), or
 * NULL with the reason in @p errstr (a bad alias, an ambiguous alias and
 * separator pair, a bad regex with regerror()'s text, ...).
 * A policy is immutable: any number of threads may use it at once.
 */
aagw_repl_policy_t *aagw_repl_policy_new(const struct aagw_repl_conf *conf,
                                         char *errstr, size_t errstr_size);

/** NULL is a no-op. */
void aagw_repl_policy_destroy(aagw_repl_policy_t *pol);

/** @returns the separator of the prefix policy ("." unless configured;
 *  kept under the identity policy too, where it names only MM2's
 *  internal topics); borrowed from @p pol. */
const char *aagw_repl_separator(const aagw_repl_policy_t *pol);

/* ---------------------------- TOPIC NAMING ----------------------------- */

/**
 * @brief Name of @p topic of site @p source once copied to another site:
 * "<source><sep><topic>" (prefix) or @p topic (identity), NUL-terminated
 * into @p buf.
 *
 * @returns AAGW_OK, or AAGW_ERR_INVAL if @p source is not a valid alias,
 * the name would exceed AAGW_TOPIC_MAX, or @p buf is too small
 * (AAGW_TOPIC_MAX + 1 always suffices).
 */
aagw_err_t aagw_repl_remote_topic(const aagw_repl_policy_t *pol,
                                  const char *source, const char *topic,
                                  char *buf, size_t size);

/**
 * @brief The site a remote topic was copied from: the alias of its leading
 * "<alias><sep>", if that alias is a configured site (prefix policy only).
 *
 * @returns the alias (borrowed from @p pol), or NULL for a local topic and
 * always under the identity policy.
 */
const char *aagw_repl_topic_source(const aagw_repl_policy_t *pol,
                                   const char *topic);

/** @returns @p topic without its leading "<alias><sep>" (a pointer into
 *  @p topic: the name one hop upstream), or NULL if it is not remote. */
const char *aagw_repl_topic_upstream(const aagw_repl_policy_t *pol,
                                     const char *topic);

/** @returns true if aagw_repl_topic_source() is not NULL. */
bool aagw_repl_topic_is_remote(const aagw_repl_policy_t *pol,
                               const char *topic);

/**
 * @brief The sites a (multi-hop) remote topic crossed, origin first.
 *
 * Each hop prepends its source alias, so "west.east.clicks" is east's
 * clicks, copied to west (as east.clicks), then copied from west to the
 * site that holds the name: the chain is {"east", "west"} and the base
 * name "clicks".  Only configured site aliases are peeled off.
 *
 * @param chain receives up to @p max aliases (borrowed from @p pol),
 *              origin first; may be NULL when @p max is 0.
 * @param base  if not NULL, receives a pointer into @p topic at the base
 *              name (@p topic itself for a local topic).
 * @returns the number of hops, which may exceed @p max (as snprintf does);
 *          0 for a local topic and always under the identity policy.
 */
size_t aagw_repl_topic_chain(const aagw_repl_policy_t *pol, const char *topic,
                             const char **chain, size_t max,
                             const char **base);

/**
 * @brief true for topics aagw never replicates, whatever the filters say:
 * Kafka's ("__" or "." prefix), Connect's and MirrorMaker 2's ("-internal"
 * or ".internal" suffix, and "<sep>internal" with the policy's separator,
 * as MM2 names its internal topics with a custom one), aagw's own (own
 * prefix, e.g. dead-letter topics) and unified outputs (unified suffix).
 */
bool aagw_repl_topic_is_internal(const aagw_repl_policy_t *pol,
                                 const char *topic);

/** @returns true if @p topic is not internal, matches an include regex and
 *  matches no exclude regex (built-ins: __.*, .*[-.]internal,
 *  .*\.replica).  Regexes match the whole name. */
bool aagw_repl_topic_allowed(const aagw_repl_policy_t *pol, const char *topic);

/**
 * @brief Check one topic or group pattern the way the filters compile it:
 * PCRE2 (the Perl/Java dialect of MirrorMaker 2's filters), matched against
 * whole names.  The one check behind `aagw config check` and `aagw run`,
 * so both accept and refuse the same patterns.
 * @returns 0, or -1 with "\"pattern\": reason at offset N" in @p errstr
 * (an empty pattern is refused).
 */
int aagw_regex_check(const char *pat, char *errstr, size_t errstr_size);

/**
 * @brief Is topic config @p name copied from a source topic to its remote
 * copy?  Never for MirrorMaker 2's default config.properties.exclude
 * (follower/leader.replication.throttled.replicas, min.insync.replicas,
 * unclean.leader.election.enable, message.timestamp.*: settings that
 * belong to the cluster, not to the data) nor for a name matching the
 * user's configs_exclude regexes (whole-name matches).
 */
bool aagw_repl_config_allowed(const aagw_repl_policy_t *pol, const char *name);

/** @returns true if consumer group @p group is to be checkpointed: not
 *  under the own prefix, included and not excluded. */
bool aagw_repl_group_allowed(const aagw_repl_policy_t *pol, const char *group);

/**
 * @brief Should topic @p topic of site @p source be replicated to site
 * @p target?  The per-topic decision, for subscription time.
 *
 * Checks, in this order: internal, filters, then the name rules (under the
 * prefix policy): the chain contains @p target (TOPIC_FROM_TARGET); the
 * topic is remote and multi_hop is off (REMOTE_TOPIC); the chain plus
 * @p source repeats a site (CHAIN_REPEATS_SITE); chain + source + target
 * exceed AAGW_PROV_MAX_HOPS (TOO_MANY_HOPS); the remote name is too long
 * (NAME_TOO_LONG).
 *
 * @returns AAGW_SKIP_NONE to replicate, else the cause.
 */
aagw_skip_t aagw_repl_topic_check(const aagw_repl_policy_t *pol,
                                  const char *source, const char *target,
                                  const char *topic);

/**
 * @brief Name of the dead-letter topic for records read from site
 * @p source: "<own_prefix>dlq.<source>" ("aagw.dlq.east"), into @p buf.
 * Being under the own prefix, it is never replicated.
 *
 * @returns AAGW_OK, or AAGW_ERR_INVAL for a bad alias or a short @p buf.
 */
aagw_err_t aagw_repl_dlq_topic(const aagw_repl_policy_t *pol,
                               const char *source, char *buf, size_t size);

/* ----------------------- HYBRID LOGICAL CLOCK -------------------------- */

/*
 * An HLC value is a uint64_t: Unix milliseconds in the high 48 bits and a
 * logical counter in the low 16, so plain integer comparison orders them.
 * No function here reads a clock: the wall time is always a parameter.
 */

#define AAGW_HLC_MS_MAX ((INT64_C(1) << 48) - 1)

/** @returns the HLC for (@p ms, @p counter); @p ms is clamped to
 *  0..AAGW_HLC_MS_MAX. */
uint64_t aagw_hlc_make(int64_t ms, uint16_t counter);
/** @returns the millisecond part of @p hlc. */
int64_t aagw_hlc_ms(uint64_t hlc);
/** @returns the counter part of @p hlc. */
uint16_t aagw_hlc_counter(uint64_t hlc);

/**
 * @brief Advance @p clock for a local event at wall time @p wall_ms.
 *
 * The result is strictly greater than the previous @p clock even when the
 * wall clock steps back; a counter overflow carries into the next
 * millisecond.  It saturates at the maximum value (year 10889).
 * @returns the new value, also stored in @p clock.
 */
uint64_t aagw_hlc_tick(uint64_t *clock, int64_t wall_ms);

/**
 * @brief Advance @p clock on receiving @p remote at wall time @p wall_ms
 * (the HLC receive rule): the result exceeds both @p clock and @p remote.
 * A remote value far in the future drags the clock along: check it first
 * with aagw_hlc_plausible().
 * @returns the new value, also stored in @p clock.
 */
uint64_t aagw_hlc_merge(uint64_t *clock, uint64_t remote, int64_t wall_ms);

/** @returns false if @p hlc is more than @p max_drift_ms ahead of
 *  @p wall_ms. */
bool aagw_hlc_plausible(uint64_t hlc, int64_t wall_ms, int64_t max_drift_ms);

/** Format @p hlc as "MS:COUNTER" (the wire text).  @returns the length
 *  (excluding the NUL), as snprintf() does; 22 bytes always suffice. */
size_t aagw_hlc_format(uint64_t hlc, char *buf, size_t size);

/** Parse the wire text "MS:COUNTER" (@p len bytes, no NUL needed).
 *  @returns false, leaving @p hlc untouched, unless it is canonical. */
bool aagw_hlc_parse(const char *text, size_t len, uint64_t *hlc);

/* ---------------------------- PROVENANCE ------------------------------- */

/**
 * @brief Decoded provenance, in caller storage (about 2.4 KB; fine on the
 * stack).  path_len 0 means "the record carries no provenance".
 * Strings are NUL-terminated; the id is @p id_len bytes (plus a NUL that
 * is not part of it: ids may contain any byte).  @p origin is always
 * path[0]: decoding copies it, encoding refuses anything else.  @p id is
 * always the full id (decoding rebuilds the derived id from an empty ID).
 */
struct aagw_prov {
        char     origin[AAGW_ALIAS_MAX + 1];
        size_t   path_len;
        char     path[AAGW_PROV_MAX_HOPS][AAGW_ALIAS_MAX + 1];
        size_t   id_len;
        char     id[AAGW_ID_MAX + 1];
        char     src_topic[AAGW_TOPIC_MAX + 1];
        int32_t  src_partition;
        int64_t  src_offset;
        uint64_t hlc;
};

/**
 * @brief Encoded provenance: @p cnt (1) headers ready to add to a produced
 * record.  Names are borrowed from the policy; values point into @p buf.
 */
struct aagw_prov_hdrs {
        size_t             cnt;
        struct aagw_header hdrs[AAGW_PROV_HDR_CNT];
        char               buf[AAGW_PROV_ENC_MAX];
};

/**
 * @brief Find and parse the provenance header among @p hdrs.
 *
 * Checks the header set (duplicate, null value) in header order, then the
 * value in wire order: version, path, src, hlc, id, each against the wire
 * format and its limit (a field that ends the value early is
 * PROV_INCOMPLETE).  Never allocates; linear in @p cnt, and reads at most
 * about 2.4 KB of the value whatever its size.
 *
 * @returns AAGW_REASON_OK with @p out->path_len 0 (no provenance header)
 * or > 0 (decoded), else the first problem found (@p out->path_len is
 * then 0, the other fields unspecified).
 */
aagw_reason_t aagw_prov_decode(const aagw_repl_policy_t *pol,
                               const struct aagw_header *hdrs, size_t cnt,
                               struct aagw_prov *out);

/**
 * @brief Check provenance from aagw_prov_decode() for consistency (a
 * path_len of 0 passes): the origin (path[0], ORIGIN_UNKNOWN) and every
 * hop (PATH_UNKNOWN_SITE) are configured sites (unless
 * allow_unknown_sites), no hop repeats, and the last hop is @p site, where
 * the record was read (skipped if @p site is NULL).  In that order, first
 * failure wins.  @p p->origin is not consulted: it is path[0].
 */
aagw_reason_t aagw_prov_validate(const aagw_repl_policy_t *pol,
                                 const struct aagw_prov *p, const char *site);

/**
 * @brief Encode @p p into @p out: the one P "prov" header, with an empty
 * ID if @p p->id is the derived id.
 * @returns AAGW_OK, or AAGW_ERR_INVAL if @p p breaks the wire format (aagw
 * never writes provenance it would reject).
 */
aagw_err_t aagw_prov_encode(const aagw_repl_policy_t *pol,
                            const struct aagw_prov *p,
                            struct aagw_prov_hdrs *out);

/** @returns true if header @p name is under the header prefix: the
 *  replicator drops such headers from the copy and adds the verdict's. */
bool aagw_prov_is_own_header(const aagw_repl_policy_t *pol, const char *name);

/* --------------------------- LAST WRITE WINS --------------------------- */

/** A last-write-wins version: (hlc, origin, id), compared in that order
 *  (hlc numerically, origin and id bytewise, shorter first on a tie).
 *  Every site compares the same way, so all pick the same winner without
 *  talking to each other. */
struct aagw_version {
        uint64_t hlc;
        char     origin[AAGW_ALIAS_MAX + 1];
        size_t   id_len;
        char     id[AAGW_ID_MAX + 1];
};

/** @returns <0, 0, >0 as @p a is older than, equal to, newer than @p b.
 *  A tombstone is compared by its version like any record. */
int aagw_version_cmp(const struct aagw_version *a,
                     const struct aagw_version *b);

/* -------------------------------- IDS ---------------------------------- */

typedef struct aagw_id_rule aagw_id_rule_t; /* opaque */

/**
 * @brief Compile an id rule: "header:NAME" (the last header NAME), "key",
 * "json:FIELD" (a top-level string or integer field of a JSON object
 * value, parsed with json-c; a repeated field: the last one), "hash"
 * (XXH3-128 of key and value, 32 hex digits) or "derived"
 * ("ORIGIN:TOPIC:PARTITION:OFFSET").  NAME and FIELD are 1..255 bytes.
 *
 * @returns a rule the caller destroys, or NULL with the reason in @p errstr.
 */
aagw_id_rule_t *aagw_id_rule_new(const char *spec, char *errstr,
                                 size_t errstr_size);
/**
 * @brief Check @p spec as aagw_id_rule_new() would parse it, without
 * building a rule; with @p entity_key, only the forms an entity key may
 * take (key, json:FIELD).  For configuration checks.
 * @returns true, or false with "expected ..., got \"SPEC\"" in @p errstr.
 */
bool aagw_id_rule_check(const char *spec, bool entity_key, char *errstr,
                        size_t errstr_size);

/** NULL is a no-op. */
void aagw_id_rule_destroy(aagw_id_rule_t *rule);

/**
 * @brief Apply @p rule (NULL: derived) to @p rec, read at site @p origin
 * (used by the derived rule only).
 *
 * Writes the id and a NUL into @p buf (@p size >= AAGW_ID_MAX + 1 always
 * suffices), its length into @p lenp.  Only the json rule allocates
 * (json-c's tree of the value, freed before returning); thread-safe.
 * @returns AAGW_REASON_OK or an AAGW_REASON_ID_* reason.
 */
aagw_reason_t aagw_id_extract(const aagw_id_rule_t *rule, const char *origin,
                              const struct aagw_rec *rec, char *buf,
                              size_t size, size_t *lenp);

/**
 * @brief The derived id "ORIGIN:TOPIC:PARTITION:OFFSET": the same bytes at
 * every site and after every replay, so replays dedup.
 * @returns the length, as snprintf() does.
 */
size_t aagw_id_derive(const char *origin, const char *topic,
                      int32_t partition, int64_t offset, char *buf,
                      size_t size);

/** The storage key of an id: XXH3-128 (seed 0) of its bytes, in canonical
 *  (big-endian) byte order so keys sort the same on every host. */
void aagw_id_key(const void *id, size_t len, uint8_t key[AAGW_ID_KEY_LEN]);

/** A storage key inside a scope: XXH3-128 of @p scope, a NUL, and @p len
 *  bytes of @p data, canonical byte order.  The unify stage keys seen ids
 *  by scope "SITE" (each site's unified stream has its own seen set, also
 *  when one process runs several sites on one store) and last-write-wins
 *  entities by "SITE/TOPIC" (TOPIC: the logical topic, "profiles" for
 *  east.profiles too), so neither sites nor topics share state. */
void aagw_scoped_key(const char *scope, const void *data, size_t len,
                     uint8_t key[AAGW_ID_KEY_LEN]);

/* ----------------------------- COORDINATES ----------------------------- */

/** Room for "TOPIC:PARTITION:OFFSET" and its NUL. */
#define AAGW_COORDS_MAX (AAGW_TOPIC_MAX + 32)

/**
 * @brief Write "TOPIC:PARTITION:OFFSET" (a record's coordinates, as in the
 * hop and unify input headers) into @p buf, which has room for
 * AAGW_COORDS_MAX bytes.  @returns the length without the NUL.
 */
size_t aagw_coords_format(char *buf, const char *topic, int32_t partition,
                          int64_t offset);

/**
 * @brief Parse @p len bytes of "TOPIC:PARTITION:OFFSET" (split at the last
 * two colons; the numbers decimal and not negative) into @p topic
 * (@p tsize bytes, NUL-terminated), @p partition and @p offset.
 * @returns false if the text is not such coordinates or the topic does
 * not fit.
 */
bool aagw_coords_parse(const char *v, size_t len, char *topic, size_t tsize,
                       int32_t *partition, int64_t *offset);

/* ------------------------------ VERDICTS ------------------------------- */

typedef enum {
        AAGW_VERDICT_REPLICATE = 0, /**< produce it with v->hdrs */
        AAGW_VERDICT_SKIP      = 1, /**< do not copy; v->skip says why */
        AAGW_VERDICT_REJECT    = 2, /**< bad record; v->reason, v->action */
} aagw_verdict_kind_t;

/** Disable the topic-name loop rules (tests, one mechanism at a time). */
#define AAGW_VERDICT_F_NO_TOPIC_CHECK  0x1
/** Disable provenance entirely: incoming provenance headers are ignored
 *  (neither trusted nor checked) and every record is stamped as local to
 *  the source.  Tests only. */
#define AAGW_VERDICT_F_NO_HEADER_CHECK 0x2
/** The caller ran aagw_repl_precheck() for this source, target, topic
 *  and flags, and it returned AAGW_SKIP_NONE: those checks are not run
 *  again per record (the flow does this once per topic). */
#define AAGW_VERDICT_F_PRECHECKED      0x4

/**
 * @brief The outcome of aagw_repl_verdict() / aagw_prov_resolve(), in
 * caller storage (about 5 KB; reuse one per thread).
 */
struct aagw_verdict {
        aagw_verdict_kind_t kind;
        aagw_skip_t         skip;      /**< SKIP: the cause */
        aagw_reason_t       reason;    /**< REJECT: the cause; REPLICATE:
                                            non-OK if bad provenance was
                                            stripped (action pass) */
        aagw_reason_t       id_reason; /**< non-OK if the id rule failed
                                            (then the derived id is used,
                                            or the record is rejected) */
        aagw_bad_action_t   action;    /**< REJECT: DEAD_LETTER or FAIL */
        bool                fresh;     /**< provenance stamped here: the
                                            record originates at source */
        /** Valid provenance whose path the topic name contradicts (prefix
         *  policy): aagw did not write the record where it is read (a
         *  forged header, or an application that forwarded a copy's
         *  headers).  The sites on its path that do not hold it will never
         *  get it from here, so the sites' unified streams differ: a
         *  divergence.  The verdict itself is unchanged. */
        bool                path_forged;
        struct aagw_prov    prov;      /**< REPLICATE: outgoing provenance
                                            (resolve: as stored) */
        struct aagw_prov_hdrs hdrs;    /**< REPLICATE: prov, encoded */
};

/**
 * @brief Decide one record's fate on the flow @p source -> @p target.  The
 * hot path: no allocation, no I/O, linear in the record's headers.
 *
 * In order:
 *  1. unless NO_TOPIC_CHECK, the topic-name rules of
 *     aagw_repl_topic_check() (not internal/filters: those are per topic);
 *     NAME_TOO_LONG under the prefix policy always;
 *  2. the record's provenance as read at @p source (aagw_prov_resolve());
 *     bad provenance or a failed id rule gives REJECT unless the action is
 *     pass;
 *  3. unless NO_HEADER_CHECK, for provenance the record brought along:
 *     the path contains @p target (PATH_HAS_TARGET); the record was
 *     replicated into @p source and multi_hop is off (REMOTE_RECORD); the
 *     path is full (TOO_MANY_HOPS);
 *  4. REPLICATE: origin, id, src and hlc are kept from valid provenance,
 *     or stamped fresh (origin @p source, id from @p id_rule, src the
 *     record's coordinates, hlc = (timestamp, 0)); @p target is appended
 *     to the path, since the path names every site holding the record.
 *
 * @param id_rule the topic's id rule; NULL: derived.
 * @param flags   AAGW_VERDICT_F_*.
 * @returns AAGW_OK with the outcome in @p v, or AAGW_ERR_INVAL for caller
 * bugs: NULL arguments, @p source or @p target not a configured site (or
 * not an alias, with allow_unknown_sites), @p source == @p target, an
 * invalid topic name, a negative partition or offset.
 */
aagw_err_t aagw_repl_verdict(const aagw_repl_policy_t *pol,
                             const char *source, const char *target,
                             const struct aagw_rec *rec,
                             const aagw_id_rule_t *id_rule, unsigned flags,
                             struct aagw_verdict *v);

/**
 * @brief What aagw_repl_verdict() checks that depends only on the flow and
 * the topic, not on a record: the endpoints, the topic's name, the
 * topic-name loop rules (step 1, unless NO_TOPIC_CHECK in @p flags) and
 * the remote name's length.  Run once per topic; when @p *cause is
 * AAGW_SKIP_NONE, that topic's records may be decided with
 * AAGW_VERDICT_F_PRECHECKED, with the same answers.
 * @returns AAGW_OK and @p *cause (the topic's skip cause, or NONE), or
 * AAGW_ERR_INVAL as aagw_repl_verdict() would for any record of it.
 */
aagw_err_t aagw_repl_precheck(const aagw_repl_policy_t *pol,
                              const char *source, const char *target,
                              const char *topic, unsigned flags,
                              aagw_skip_t *cause);

/**
 * @brief The provenance of a record as read at @p site, for the unify
 * stage: step 2 of aagw_repl_verdict() alone.  v->kind is REPLICATE (the
 * record is usable; v->prov is valid, fresh if it carried none) or REJECT.
 * v->hdrs is not filled.  Only AAGW_VERDICT_F_NO_HEADER_CHECK applies.
 * @returns as aagw_repl_verdict().
 */
aagw_err_t aagw_prov_resolve(const aagw_repl_policy_t *pol, const char *site,
                             const struct aagw_rec *rec,
                             const aagw_id_rule_t *id_rule, unsigned flags,
                             struct aagw_verdict *v);

/**
 * @brief aagw_prov_encode() for provenance that is valid by construction:
 * v->prov of a verdict that aagw_prov_resolve() or aagw_repl_verdict()
 * returned as REPLICATE, unchanged since.  Nothing is checked again.
 */
void aagw_prov_encode_resolved(const aagw_repl_policy_t *pol,
                               const struct aagw_prov *p,
                               struct aagw_prov_hdrs *out);

/* ========== MM2 INTERNAL TOPICS AND OFFSET TRANSLATION ========== */

/*
 * MirrorMaker 2's internal topics in its wire format, so MM2-aware tooling
 * (RemoteClusterUtils, dashboards) reads what aagw writes.  Kafka protocol
 * types: STRING = INT16 length (big-endian) + UTF-8 bytes; INT16, INT32,
 * INT64 big-endian; fields in this order:
 *
 *   heartbeats                    key   {source STRING, target STRING}
 *                                 value {version INT16 = 0}{timestamp INT64}
 *   mm2-offset-syncs.<c>.internal key   {topic STRING, partition INT32}
 *                                 value {upstreamOffset INT64, offset INT64}
 *   <source>.checkpoints.internal key   {group STRING, topic STRING,
 *                                        partition INT32}
 *                                 value {version INT16 = 0}{upstreamOffset
 *                                        INT64, offset INT64, metadata
 *                                        STRING}
 *
 * Offset-sync topic is the UPSTREAM topic; a checkpoint's topic is the
 * DOWNSTREAM (remote) topic, as MM2 writes them.  Encoders return the
 * encoded length as snprintf() does (nothing is written past @p size);
 * decoders refuse truncated input, trailing bytes, negative lengths and
 * strings longer than the destination.
 */

#define AAGW_MM2_GROUP_MAX 255 /**< bytes in a consumer group id we keep */
#define AAGW_MM2_META_MAX  255 /**< bytes of checkpoint metadata we keep */
#define AAGW_MM2_HEARTBEATS_TOPIC "heartbeats"
/** Header on an offset-sync record whose segment is not exact (syncs
 *  between it and the previous one were suppressed by the rate bound).
 *  MM2 ignores headers. */
#define AAGW_MM2_SYNC_LOSSY_HDR "aagw.sync.lossy"

struct aagw_mm2_heartbeat {
        char    source[AAGW_ALIAS_MAX + 1];
        char    target[AAGW_ALIAS_MAX + 1];
        int64_t timestamp_ms;
};

struct aagw_mm2_sync {
        char    topic[AAGW_TOPIC_MAX + 1]; /**< upstream topic */
        int32_t partition;
        int64_t upstream;   /**< source offset ... */
        int64_t downstream; /**< ... and where it is (or goes) at the target */
};

struct aagw_mm2_checkpoint {
        char    group[AAGW_MM2_GROUP_MAX + 1];
        char    topic[AAGW_TOPIC_MAX + 1]; /**< downstream topic */
        int32_t partition;
        int64_t upstream;   /**< committed offset at the source */
        int64_t downstream; /**< translated offset at the target */
        char    metadata[AAGW_MM2_META_MAX + 1];
};

size_t aagw_mm2_heartbeat_key(const char *source, const char *target,
                              void *buf, size_t size);
size_t aagw_mm2_heartbeat_value(int64_t timestamp_ms, void *buf, size_t size);
bool   aagw_mm2_heartbeat_decode(const void *key, size_t key_len,
                                 const void *val, size_t val_len,
                                 struct aagw_mm2_heartbeat *out);

size_t aagw_mm2_sync_key(const char *topic, int32_t partition, void *buf,
                         size_t size);
size_t aagw_mm2_sync_value(int64_t upstream, int64_t downstream, void *buf,
                           size_t size);
bool   aagw_mm2_sync_decode(const void *key, size_t key_len, const void *val,
                            size_t val_len, struct aagw_mm2_sync *out);

size_t aagw_mm2_checkpoint_key(const char *group, const char *topic,
                               int32_t partition, void *buf, size_t size);
size_t aagw_mm2_checkpoint_value(int64_t upstream, int64_t downstream,
                                 const char *metadata, void *buf,
                                 size_t size);
bool   aagw_mm2_checkpoint_decode(const void *key, size_t key_len,
                                  const void *val, size_t val_len,
                                  struct aagw_mm2_checkpoint *out);

/** "mm2-offset-syncs.<cluster>.internal" into @p buf; AAGW_ERR_INVAL if
 *  it does not fit.  MM2's default separator; see the _sep variant. */
aagw_err_t aagw_mm2_offset_syncs_topic(const char *cluster, char *buf,
                                       size_t size);
/** "<source>.checkpoints.internal" into @p buf. */
aagw_err_t aagw_mm2_checkpoints_topic(const char *source, char *buf,
                                      size_t size);
/**
 * The same names with separator @p sep ("." when NULL) in place of each
 * dot, as MM2's DefaultReplicationPolicy names them since Kafka 3.0
 * (replication.policy.separator "_": "mm2-offset-syncs_<cluster>_internal",
 * "<source>_checkpoints_internal").  The heartbeats topic keeps its name
 * whatever the separator.
 */
aagw_err_t aagw_mm2_offset_syncs_topic_sep(const char *sep,
                                           const char *cluster, char *buf,
                                           size_t size);
aagw_err_t aagw_mm2_checkpoints_topic_sep(const char *sep, const char *source,
                                          char *buf, size_t size);

/**
 * One offset-sync point of one partition, for translation: source offset
 * @p upstream is (or will be, if it is not copied) at target offset
 * @p downstream; every source offset below it is below @p downstream.
 * @p lossy: syncs between the previous point and this one were suppressed.
 */
struct aagw_mm2_point {
        int64_t upstream, downstream;
        bool    lossy;
};

/**
 * @brief Add @p p to the points of one partition, kept sorted by upstream
 * offset in @p pts (capacity @p cap, @p *n used).  A point at the same
 * upstream replaces the old one; a point BELOW the last one means the
 * source partition was reset (its offsets restarted): every older point
 * is dropped.  When full, the oldest point goes.
 * @returns true if a reset was detected.
 */
bool aagw_mm2_points_add(struct aagw_mm2_point *pts, size_t *n, size_t cap,
                         struct aagw_mm2_point p);

/** The outcome of aagw_mm2_translate(). */
struct aagw_mm2_xlate {
        int64_t     offset; /**< where the group resumes at the target, -1 */
        bool        exact;  /**< no gap and no repeat, provably */
        const char *why;    /**< static text when not exact, else "" */
};

/**
 * @brief Translate committed source offset @p committed (the next offset
 * the group reads) into the target offset to resume at, from the points
 * of its partition (sorted, as aagw_mm2_points_add() keeps them).
 *
 * Between two points the copies keep the delta of the first; a run of
 * skipped records (loop verdicts, dead letters) ends at the next point, so
 * the result is the first point's delta capped at the next point's
 * downstream offset.  Past the last point the result is exact only once
 * replication reached @p committed (@p repl_pos: the replicator's own
 * committed position, -1 if unknown).
 */
void aagw_mm2_translate(const struct aagw_mm2_point *pts, size_t n,
                        int64_t committed, int64_t repl_pos,
                        struct aagw_mm2_xlate *out);

/**
 * @brief The other way round: a group's position @p position (the next
 * offset it reads) in a partition of the copy, into the offset to resume
 * at in the origin partition, from the same points (those of the flow
 * that made the copy).  Used when a group moves onto the site that holds
 * the origin of a remote topic it read (west.clicks at east -> clicks at
 * west).
 *
 * The answer is the largest source offset whose translation (as
 * aagw_mm2_translate() gives it) is at or below @p position: the group
 * read every copy of the source records below it and none above, so a
 * run of skipped records (never copied, never read) is stepped over.
 * Exact unless the segment is lossy (syncs suppressed: the answer is then
 * the lowest possible one and @p reread says how many records a consumer
 * resuming there may read twice), the position is before the first point
 * (the first point's upstream, never a copy it read), or past the last
 * point beyond what the copying flow's own position at the origin
 * reached (@p repl_pos, -1 if unknown).
 *
 * @param reread records that may be read twice at the origin: 0 when
 *        exact, -1 when nothing bounds it.
 */
void aagw_mm2_translate_back(const struct aagw_mm2_point *pts, size_t n,
                             int64_t position, int64_t repl_pos,
                             struct aagw_mm2_xlate *out, int64_t *reread);

/** The two legs of aagw_mm2_translate_via(), for the report. */
struct aagw_mm2_via {
        int64_t               origin; /**< origin offset (leg 1), -1 */
        struct aagw_mm2_xlate back; /**< leg 1: copy at the source -> origin */
        struct aagw_mm2_xlate fwd;  /**< leg 2: origin -> copy at the target */
        int64_t reread; /**< records that may be read twice, -1 unknown */
};

/**
 * @brief A group's position @p position in the copy, at the source site,
 * of a THIRD site's topic (north.clicks at east, moving to west), into
 * the offset to resume at in the target site's copy of the same origin
 * topic (north.clicks at west), composed through the origin: back
 * through the points of the flow origin->source (@p back, @p nback; that
 * flow's position at the origin @p back_repl_pos, -1 unknown), as
 * aagw_mm2_translate_back() does, then forward through the points of the
 * flow origin->target (@p fwd, @p nfwd, @p fwd_repl_pos), as
 * aagw_mm2_translate() does.
 *
 * Exact only if both legs are.  Otherwise @p out holds the lowest offset
 * that cannot skip a record the group did not read: leg 1 already gives
 * its lowest; where leg 2 is not exact (a lossy segment, or past its last
 * point before the flow got there) the origin offset's copy may sit
 * lower than the delta says (records skipped between the points), so
 * the lowest possible copy offset is taken, and the difference counts in
 * @p via->reread (leg 1's bound plus leg 2's; -1 if either is unbounded).
 * @p out->why is the first inexact leg's reason (@p via tells which).
 */
void aagw_mm2_translate_via(const struct aagw_mm2_point *back, size_t nback,
                            int64_t                      back_repl_pos,
                            const struct aagw_mm2_point *fwd, size_t nfwd,
                            int64_t fwd_repl_pos, int64_t position,
                            struct aagw_mm2_xlate *out,
                            struct aagw_mm2_via   *via);

#ifdef __cplusplus
}
#endif
#endif /* AAGW_POLICY_H */
