/*
 * gateway/config_int.h: what the files of the configuration share (not
 * for the rest of gateway/): config.c (loading: the YAML walk, flags,
 * getters, validation), config_values.c (keys and values: matching a path
 * to the key table, the value checks) and config_out.c (output: dump and
 * reference).
 */
#ifndef GW_CONFIG_INT_H
#define GW_CONFIG_INT_H

#include "gateway_int.h"

enum origin { ORIG_DEFAULT, ORIG_FILE, ORIG_FLAG };

/* Where a value (or one list item) came from. */
struct src {
        const char *file; /* interned file name, or the flag; NULL: default */
        int         line, col;
};

/* One stored setting.  Lists and property maps keep every item with its
 * own source so a later check can point at the exact element. */
struct cfg_val {
        const struct cfg_key *key;
        char                 *path;
        enum origin           origin;
        char                **items; /* CT_PROPS: name, value, name, ... */
        struct src           *srcs;
        size_t                n, cap;
};

/* A named entry of an instance mapping: clusters.east, unify.topics.clicks */
struct cfg_inst {
        char      *kind; /* "clusters", "unify.topics" */
        char      *name;
        struct src src;
};

struct aagw_config {
        struct cfg_val  *vals;
        size_t           nvals, capvals;
        struct cfg_inst *insts;
        size_t           ninsts, capinsts;
        char           **names; /* interned file names and flag names */
        size_t           nnames;
        char            *errs;
        size_t           errlen, errcap;
        int              nerrs;
        size_t           errs_shown; /* length before the "more" line */
        char            *warns; /* settings read but not applied */
        size_t           warnlen, warncap;
        bool             from_mm2; /* a file was read as mm2.properties */
        char           **envrefs; /* variables ${VAR} references read */
        size_t           nenvrefs;
};

/* config_values.c */
bool                  gw_cfg_is_list_type(enum cfg_type t);
const struct cfg_key *gw_cfg_key_for_path(const char *path, const char **subp);
const struct cfg_key *gw_cfg_key_exact(const char *pattern);
bool                  gw_cfg_is_section(const char *pattern);
const char *gw_cfg_suggest(const char *prefix, const char *name, char *buf,
                           size_t size);
bool        gw_cfg_all_chars(const char *s, const char *extra);
bool        gw_cfg_inst_name_ok(const char *kind, const char *name,
                                const char **whyp);
/* One scalar against its key's type: 0 with a malloc()ed normalised
 * copy in '*normp', or -1 with the reason in 'why'. */
int  gw_cfg_check_value(const struct cfg_key *k, const char *s, char **normp,
                        char *why, size_t size);
void gw_cfg_choices_text(const char *choices, char *buf, size_t size);

/* config.c */
struct cfg_val *gw_cfg_val_find(const aagw_config_t *cfg, const char *path);

#endif
