/*
 * gateway/config_int.h: what the files of the configuration share (not
 * for the rest of gateway/): config.c (loading: the YAML walk, flags,
 * getters, validation), config_values.c (keys and values: matching a path
 * to the key table, the value checks), config_out.c (output: dump and
 * reference), and mm2_import.c with its PKCS#12 reader, pkcs12.c.
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
        /* The values as typed fields, filled by aagw_config_validate();
         * 'bound' turns false at any change, until the next one. */
        struct aagw_settings set;
        bool                 bound;
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

/* The largest key or trust store file the MM2 import reads. */
#define GW_STORE_MAX (1024 * 1024)

/* pkcs12.c: the certificates of the PKCS#12 trust store 'path', opened
 * with 'pass' (NULL: none), as PEM text in '*pemp' (malloc()ed, the
 * caller frees it) and their number in '*ncertsp'.  A private key and its
 * own certificate, if the store has one, are left out: not CAs.  Returns
 * 0, or -1 with the reason in 'why' (OpenSSL's, such as "mac verify
 * failure" for a wrong password). */
int gw_pkcs12_certs_pem(const char *path, const char *pass, char **pemp,
                        size_t *ncertsp, char *why, size_t why_size);

#endif
