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
 */
#ifndef AAGW_CONFIG_H
#define AAGW_CONFIG_H

#include <stdbool.h>
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

struct cfg_key {
        const char   *path;    /* "replication.policy", "clusters.*.x" */
        enum cfg_type type;
        const char   *def;     /* default as text; lists '\n'-separated */
        int64_t       min, max;
        const char   *choices; /* CT_ENUM: "prefix|identity" */
        const char   *flag;    /* equivalent command-line flag, or NULL */
        unsigned      flags;
        const char   *desc;
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

/* ------------------------------- GETTERS ------------------------------- */

/* Paths are concrete.  A key that is not set yields its default; a key with
 * no default yields NULL / 0 / an empty list.  Returned strings are
 * borrowed and valid until the config is destroyed or changed. */
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
