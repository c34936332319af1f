/*
 * gateway/config.h: aagw's configuration (YAML file + command-line flags).
 *
 * Every setting is a row of one key table (config_keys.c): name, type,
 * default, range, CLI flag and description.  That table drives the YAML
 * parser, flag overrides, `aagw config check`, `aagw config reference` and
 * docs/configuration.md, so they cannot drift apart.
 *
 * Values are kept by their concrete path ("replication.policy",
 * "clusters.east.bootstrap_servers") together with where they came from
 * (file:line:col or the flag), so any later check can point at the source.
 *
 * Once loaded and validated, the program reads them as typed fields
 * (struct aagw_settings, from aagw_config_settings()): each row of the
 * table also says where its value lands, as librdkafka's property table
 * does with offsetof, so a misspelt key is a compile error rather than a
 * NULL at run time.
 */
#ifndef AAGW_CONFIG_H
#define AAGW_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "aagw_policy.h"

typedef struct aagw_config aagw_config_t;

/* Value types of the key table. */
enum cfg_type {
        CT_STR,      /* free text, length range in min/max */
        CT_NAME,     /* [A-Za-z0-9._-]+ (gateway id) */
        CT_ALIAS,    /* a site alias: [A-Za-z0-9_-]+, <= 64 chars */
        CT_INT,      /* integer within min..max */
        CT_BOOL,     /* true/false (also yes/no, on/off) */
        CT_ENUM,     /* one of the '|'-separated words in 'choices' */
        CT_DURATION, /* 500ms, 5s, 10m, 24h, 7d; stored in milliseconds */
        CT_HOSTPORT, /* HOST:PORT, port 1..65535 (0 allowed if min == 0) */
        CT_IDRULE,   /* header:NAME | key | json:FIELD | hash | derived */
        CT_KEYRULE,  /* key | json:FIELD (last-write-wins entity key) */
        CT_SEP,      /* topic separator: 1..max of [A-Za-z0-9._-] */
        CT_LIST,     /* list of strings */
        CT_REGEXES,  /* list of regexes (PCRE2, MM2's Java dialect) */
        CT_FLOWS,    /* list of "src->dst" */
        CT_PROPS,    /* mapping passed through to librdkafka */
};

#define CF_SECRET   0x1 /* value never printed */
#define CF_REQUIRED 0x2 /* must be set (per instance for clusters.*) */

/* ------------------------------ SETTINGS ------------------------------- */

/* The words of the enum keys, in the order of their 'choices' in the key
 * table: a bound enum field holds the word's index (test_config.c checks
 * each constant against its word).  gateway.log_level,
 * replication.policy, replication.bad_provenance and
 * replication.missing_id bind to the policy's own enums
 * (aagw_log_level_t, aagw_naming_t, aagw_bad_action_t), whose order
 * their choices follow. */
enum gw_mode {
        GW_MODE_ACTIVE_ACTIVE,
        GW_MODE_ACTIVE_PASSIVE,
        GW_MODE_AGGREGATE,
};
enum gw_fetch_window { GW_FETCH_WINDOW_AUTO, GW_FETCH_WINDOW_FIXED };
enum gw_rebalance { GW_REBALANCE_EAGER, GW_REBALANCE_COOPERATIVE };
enum gw_on_truncation { GW_TRUNCATION_RESUME, GW_TRUNCATION_FAIL };
enum gw_unify_mode {
        GW_UNIFY_INHERIT = -1, /* unify.topics.T.mode unset: unify.mode */
        GW_UNIFY_DEDUP,
        GW_UNIFY_LWW,
        GW_UNIFY_OFF,
};
enum gw_filter { GW_FILTER_BLOOM, GW_FILTER_EXACT };
enum gw_syncs_location { GW_SYNCS_AT_SOURCE, GW_SYNCS_AT_TARGET };

/* The items of a list key, borrowed from the config, and whether the
 * file or a flag gave them (false: the default, or nothing). */
struct aagw_cfg_list {
        const char *const *items;
        size_t             n;
        bool               set;
};

/* librdkafka pass-through properties: kv[2*i] a name, kv[2*i+1] its
 * value, n pairs; borrowed. */
struct aagw_cfg_props {
        const char *const *kv;
        size_t             n;
};

/* clusters.ALIAS.* */
struct aagw_cluster_settings {
        const char           *alias;
        const char           *bootstrap_servers;
        struct aagw_cfg_props properties;
};

/* replication.per_flow."SRC->DST".*: unset lists have set == false. */
struct aagw_flow_settings {
        const char          *name; /* "east->west" */
        struct aagw_cfg_list topics, topics_exclude;
};

/* unify.topics.TOPIC.*: GW_UNIFY_INHERIT and NULL where unify.* applies. */
struct aagw_unify_topic_settings {
        const char        *name;
        enum gw_unify_mode mode;
        const char        *id, *entity_key, *output;
};

/*
 * Every key of the table as a typed field, named as the key (durations
 * with _ms).  Strings are borrowed from the config, NULL when unset and
 * without default; integers and durations unset without default are 0.
 * The instance mappings (clusters, replication.per_flow, unify.topics)
 * are arrays in the order their entries were first given.
 */
struct aagw_settings {
        struct {
                const char      *id;
                enum gw_mode     mode;
                const char      *site, *primary, *central;
                const char      *state_dir;
                aagw_log_level_t log_level;
        } gateway;
        struct {
                const char *listen, *token;
                struct {
                        const char *cert, *key, *key_password, *client_ca;
                } tls;
                const char *health_listen;
        } admin;
        struct {
                bool        enabled;
                const char *member;
                int64_t     work_partitions;
                int64_t     session_timeout_ms, transaction_timeout_ms;
                int64_t     commit_interval_ms;
                bool        standby;
                bool        route;
                enum gw_rebalance rebalance;
        } scale_out;
        struct aagw_cluster_settings *clusters;
        size_t                        nclusters;
        struct {
                aagw_naming_t              policy;
                const char                *separator;
                struct aagw_cfg_list       topics, topics_exclude;
                struct aagw_cfg_list       groups, groups_exclude;
                struct aagw_cfg_list       flows;
                struct aagw_flow_settings *per_flow;
                size_t                     nper_flow;
                bool                       multi_hop;
                int64_t                    refresh_topics_interval_ms;
                enum gw_fetch_window       fetch_window;
                int                        fetch_connections; /* 0: auto */
                const char                *header_prefix;
                aagw_bad_action_t          bad_provenance, missing_id;
                bool                       loop_check_topics;
                bool                       loop_check_headers;
                int64_t                    factor; /* 0: unset */
                bool                       sync_topic_configs;
                int64_t                    sync_topic_configs_interval_ms;
                struct aagw_cfg_list       topic_configs_exclude;
                bool                       sync_topic_acls;
                int64_t                    sync_topic_acls_interval_ms;
                enum gw_on_truncation      on_truncation;
        } replication;
        struct {
                enum gw_unify_mode                mode;
                const char                       *id, *entity_key;
                int64_t                           window_ms;
                bool                              audit_accepted;
                const char                       *suffix;
                int64_t                           cache_mb, filter_mb;
                enum gw_filter                    filter;
                struct aagw_unify_topic_settings *topics;
                size_t                            ntopics;
        } unify;
        struct {
                int64_t                heartbeats_interval_ms;
                bool                   offset_syncs;
                enum gw_syncs_location offset_syncs_location;
                int64_t                offset_syncs_max_rate;
                int64_t                checkpoints_interval_ms;
                bool                   sync_group_offsets;
                bool                   takeover;
        } mm2;
};

/* How a row's value is stored in its field. */
enum cfg_ftype {
        FT_NONE,  /* not bound (the table's end) */
        FT_STR,   /* const char * */
        FT_I64,   /* int64_t: CT_INT, or CT_DURATION in milliseconds */
        FT_BOOL,  /* bool */
        FT_ENUM,  /* an int-sized enum (or int): the word's index */
        FT_LIST,  /* struct aagw_cfg_list */
        FT_PROPS, /* struct aagw_cfg_props */
};

/* The storage of field 'f' of struct 'T', from the field's declared type:
 * a field of any other type does not compile. */
#define GW_CFG_FTYPE(T, f)                                                     \
        _Generic(((T *)0)->f,                                                  \
            const char *: FT_STR,                                              \
            int64_t: FT_I64,                                                   \
            bool: FT_BOOL,                                                     \
            int: FT_ENUM,                                                      \
            unsigned: FT_ENUM,                                                 \
            struct aagw_cfg_list: FT_LIST,                                     \
            struct aagw_cfg_props: FT_PROPS)
/* The three binding columns of a row: offset, storage, the field's name. */
#define GW_CFG_FIELD(T, f) offsetof(T, f), GW_CFG_FTYPE(T, f), #f

struct cfg_key {
        const char   *path;    /* "replication.policy", "clusters.*.x" */
        enum cfg_type type;
        const char   *def;     /* default as text; lists '\n'-separated */
        int64_t       min, max;
        const char   *choices; /* CT_ENUM: "prefix|identity" */
        const char   *flag;    /* equivalent command-line flag, or NULL */
        unsigned      flags;
        const char   *desc;
        /* Where the value lands: in struct aagw_settings, or for
         * "KIND.*.LEAF" in the instance struct of KIND (clusters:
         * aagw_cluster_settings, replication.per_flow:
         * aagw_flow_settings, unify.topics: aagw_unify_topic_settings). */
        size_t         off;
        enum cfg_ftype ftype;
        const char    *field; /* "replication.refresh_topics_interval_ms" */
};

/* The table, terminated by a row with path == NULL. */
extern const struct cfg_key aagw_config_keys[];

/* ------------------------------ LIFECYCLE ------------------------------ */

/* A config holding only defaults.  NULL on allocation failure. */
aagw_config_t *aagw_config_new(void);
void           aagw_config_destroy(aagw_config_t *cfg);

/*
 * Load a YAML file on top of what 'cfg' holds.  Every problem found is
 * recorded (see aagw_config_errors()); parsing goes on after semantic
 * errors so one run reports them all.  ${VAR} and ${VAR:-default} in scalar
 * values are replaced from the environment.
 * Returns AAGW_OK or AAGW_ERR_CONFIG.
 */
aagw_err_t aagw_config_load_file(aagw_config_t *cfg, const char *path);

/* Same, from a string; 'name' stands for the file name in messages. */
aagw_err_t aagw_config_load_string(aagw_config_t *cfg, const char *name,
                                   const char *yaml, size_t len);

/* The names of the environment variables that ${VAR} references in the
 * loaded files read (each once, in order of first use).  They may hold
 * secrets: the children aagw starts are given an environment without them
 * (aagw_kafka_child_env_hide()).  Returns the count; '*namesp' is
 * borrowed, valid until the config is destroyed. */
size_t aagw_config_env_refs(const aagw_config_t *cfg,
                            const char *const **namesp);

/*
 * Set one key from the command line, overriding the file.  'key' is a
 * concrete path ("replication.policy", "clusters.east.bootstrap_servers");
 * for list keys the value is appended, except that the first flag-set of a
 * list replaces what the file gave.  'origin' names the flag in messages
 * ("--policy").
 */
aagw_err_t aagw_config_set(aagw_config_t *cfg, const char *key,
                           const char *value, const char *origin);

/*
 * Set one key as read at 'file':'line':'col' of a file in another format
 * (an mm2.properties file): errors point there, and command-line flags
 * override it as they override a YAML file.  A list key called several
 * times collects the items.
 */
aagw_err_t aagw_config_set_at(aagw_config_t *cfg, const char *key,
                              const char *value, const char *file, int line,
                              int col);

/*
 * Cross-checks that need the whole config: required keys, aliases that must
 * name configured clusters, mode-specific keys, librdkafka properties
 * (validated with rd_kafka_conf_set()), listen address rules.
 */
aagw_err_t aagw_config_validate(aagw_config_t *cfg);

/* All recorded errors, one per line ("" when none); borrowed.  Only the
 * first AAGW_CONFIG_ERRORS_SHOWN are listed; a last line then counts the
 * rest ("... and N more errors (only the first 20 are listed)"). */
#define AAGW_CONFIG_ERRORS_SHOWN 20
const char *aagw_config_errors(const aagw_config_t *cfg);

/* Record an error, or a warning, against 'file':'line' (line 0: the file
 * as a whole) and key 'path' (NULL: none), for readers of other formats
 * (mm2_import.c). */
void aagw_config_error_at(aagw_config_t *cfg, const char *file, int line,
                          const char *path, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void aagw_config_warn_at(aagw_config_t *cfg, const char *file, int line,
                         const char *path, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Settings that were read but not applied ("file:line: key: ignored:
 * why", one per line; "" when none); borrowed.  Not errors: callers print
 * them as warnings. */
const char *aagw_config_warnings(const aagw_config_t *cfg);

/* ------------------------ MIRRORMAKER 2 PROPERTIES ---------------------- */

/* True once aagw_config_load_file() read a file as mm2.properties. */
bool aagw_config_from_mm2(const aagw_config_t *cfg);

/* True if 'text' is a MirrorMaker 2 properties file rather than YAML (it
 * sets "clusters =" or "X.bootstrap.servers"). */
bool aagw_config_is_mm2_properties(const char *text, size_t len);

/* Translate an mm2.properties text into this config: each aagw setting is
 * recorded at the line of the MM2 key it came from; keys aagw does not
 * apply become warnings ("ignored") or errors ("refused").  Returns AAGW_OK
 * or AAGW_ERR_CONFIG (see aagw_config_errors()). */
aagw_err_t aagw_config_load_mm2(aagw_config_t *cfg, const char *file,
                                const char *text, size_t len);

/* The same translation printed as aagw YAML on 'out' (nothing is printed
 * when a key is refused).  Secret properties are written as ${MM2_...}
 * environment references unless 'secrets'.  A PKCS#12 trust store is
 * converted to a PEM file in 'pem_dir' (an absolute path; the YAML names
 * the file), written once the translation is accepted; NULL: inline
 * ssl.ca.pem, as aagw_config_load_mm2() does.  Errors and warnings
 * (notes on converted files among them) go to 'cfg' as for
 * aagw_config_load_mm2().  Returns AAGW_OK, AAGW_ERR_CONFIG (refused), or
 * AAGW_ERR_STORE (a PEM file could not be written). */
aagw_err_t aagw_config_mm2_to_yaml(aagw_config_t *cfg, const char *file,
                                   const char *text, size_t len, bool secrets,
                                   const char *pem_dir, FILE *out);

/* Write 's' as a double-quoted YAML scalar. */
void aagw_config_yaml_quote(FILE *out, const char *s);

/* ------------------------------- OUTPUT -------------------------------- */

/* The effective config as normalized YAML, every key with its value or
 * default, secrets replaced by AAGW_REDACTED.  The output loads back into
 * the same config (secrets aside). */
void aagw_config_dump(const aagw_config_t *cfg, FILE *out);

/* The key table for humans: plain text (markdown=false) or the markdown
 * reference embedded in docs/configuration.md. */
void aagw_config_reference(FILE *out, bool markdown);

/* ------------------------------- SETTINGS ------------------------------ */

/* The config as typed fields, bound by the last aagw_config_validate()
 * (whether or not it found errors).  Borrowed: valid until the config is
 * destroyed or changed; reading it after a change (aagw_config_set(), a
 * load) without validating again is a bug, and asserted. */
const struct aagw_settings *aagw_config_settings(const aagw_config_t *cfg);

/* The entry of an instance mapping by its name (cluster alias, flow
 * "src->dst", topic), or NULL; borrowed like the settings. */
const struct aagw_cluster_settings *
aagw_settings_cluster(const struct aagw_settings *s, const char *alias);
const struct aagw_flow_settings *
aagw_settings_per_flow(const struct aagw_settings *s, const char *src,
                       const char *dst);
const struct aagw_unify_topic_settings *
aagw_settings_unify_topic(const struct aagw_settings *s, const char *topic);

/* The word a plain key's enum field holds, from the key table's
 * choices, in 'buf': "active-active" for &s->gateway.mode.  Returns
 * 'buf', or NULL if 'field' is not such a field of 's'. */
const char *aagw_settings_word(const struct aagw_settings *s, const void *field,
                               char *buf, size_t size);

/* ------------------------------- GETTERS ------------------------------- */

/* For the config's own checks, tools and tests: the program reads
 * aagw_config_settings().  Paths are concrete.  A key that is not set yields
 * its default; a key with no default yields NULL / 0 / an empty list.  Returned
 * strings are borrowed and valid until the config is destroyed or changed. */
const char *aagw_config_str(const aagw_config_t *cfg, const char *path);
int64_t     aagw_config_int(const aagw_config_t *cfg, const char *path);
bool        aagw_config_bool(const aagw_config_t *cfg, const char *path);
int64_t     aagw_config_duration_ms(const aagw_config_t *cfg,
                                    const char *path);
/* The items of a list key; returns the count, '*itemsp' borrowed. */
size_t aagw_config_list(const aagw_config_t *cfg, const char *path,
                        const char *const **itemsp);
/* True if the key was set by the file or a flag (not a default). */
bool aagw_config_is_set(const aagw_config_t *cfg, const char *path);

/* Names of the entries of an instance mapping ("clusters",
 * "unify.topics"), in the order they were first given. */
size_t      aagw_config_instance_cnt(const aagw_config_t *cfg,
                                     const char *kind);
const char *aagw_config_instance(const aagw_config_t *cfg, const char *kind,
                                 size_t idx);

/* The librdkafka pass-through properties of cluster 'alias' as name/value
 * pairs: (*kvp)[2*i] is a name, (*kvp)[2*i+1] its value.  Returns the
 * number of pairs; '*kvp' is borrowed. */
size_t aagw_config_cluster_props(const aagw_config_t *cfg, const char *alias,
                                 const char *const **kvp);

/* ------------------------------- HELPERS ------------------------------- */

/* Parse "500ms", "5s", "10m", "24h", "7d" (and sums like "1h30m").
 * Returns 0 and the milliseconds, or -1. */
int aagw_duration_parse(const char *s, int64_t *msp);

/* Format milliseconds in the largest unit that divides it exactly. */
void aagw_duration_format(int64_t ms, char *buf, size_t size);

#endif
