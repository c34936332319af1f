/*
 * gateway/mm2_int.h: what the two files of the MirrorMaker 2 import share
 * (not for the rest of gateway/): mm2_import.c reads the properties file
 * and translates clusters, flows and replication settings;
 * mm2_security.c translates the Java client's security settings (key and
 * trust stores, JAAS logins) for librdkafka.
 */
#ifndef GW_MM2_INT_H
#define GW_MM2_INT_H

#include "config_int.h"

/* One key of the properties file. */
struct prop {
        char *key, *val;
        int   line;     /* of the key's first character */
        bool  used;     /* translated or reported */
        bool  reported; /* refused or noted once (mm2_refuse_once()) */
        char  lost_esc; /* the first c of a "\c" in the value that
                           Properties.load() read as c alone, where a
                           regex meant "\c" ('.', 'd', ...); or 0 */
};

struct props {
        struct prop *v;
        size_t       n, cap;
};

#define MAX_CLUSTERS 16
#define MAX_FLOWS    (MAX_CLUSTERS * (MAX_CLUSTERS - 1))

/* One aagw setting produced by the translation. */
struct setting {
        char       *key, *val;
        int         line;
        const char *mm2key; /* borrowed from the props */
        const char *note;   /* static, for the YAML comment; or NULL */
};

/* A PEM file the YAML will name (a converted PKCS#12 trust store),
 * written only once the whole translation is accepted. */
struct pem_file {
        char *path, *pem;
};

/* One translation. */
struct mm2 {
        const char      *file;
        const char      *pem_dir; /* where converted stores go; NULL: inline */
        struct pem_file *pems;
        size_t           npems;
        struct props     ps;
        char            *aliases[MAX_CLUSTERS];
        size_t           nalias;
        char            *flows[MAX_FLOWS]; /* enabled, "A->B" */
        size_t           nflows;
        struct setting  *sets;
        size_t           nsets, capsets;
        aagw_config_t   *cfg; /* where errors and warnings go */
        const char      *value_note; /* appended to reports while set */
        bool             refused;
        bool             oom;
};

/* mm2_import.c */

/* The property 'key' of the file, or NULL; borrowed. */
struct prop *mm2_find(struct mm2 *m, const char *key);
/* Record aagw setting 'key' = 'val' from 'from' (copied); 'note' (static)
 * goes into the YAML comment. */
void mm2_add_set_note(struct mm2 *m, const char *key, const char *val,
                      const struct prop *from, const char *note);
void mm2_add_set(struct mm2 *m, const char *key, const char *val,
                 const struct prop *from);
/* Report 'p': an error ("refused: ...", the translation fails), a warning
 * ("ignored: ...") or a note ("converted: ..."); all mark it used.  The
 * _once forms report a property once, however many clusters read it. */
void mm2_refuse(struct mm2 *m, struct prop *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mm2_refuse_once(struct mm2 *m, struct prop *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mm2_ignore(struct mm2 *m, struct prop *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mm2_ignore_once(struct mm2 *m, struct prop *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mm2_converted(struct mm2 *m, struct prop *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Connect worker and MM2 machinery keys (NULL-terminated); a name ending
 * in '.' is a prefix. */
extern const char *const mm2_worker_keys[];
bool mm2_starts_with_any(const char *k, const char *const *list);

/* mm2_security.c */

/* Key and trust stores (ssl.keystore.*, ssl.truststore.*,
 * ssl.key.password) of every client of every cluster, read together;
 * before mm2_client_prop() sees the other keys. */
void mm2_translate_stores(struct mm2 *m);
/* One client property 'name' ("producer." etc. allowed) of cluster
 * 'alias', from 'p'. */
void mm2_client_prop(struct mm2 *m, const char *alias, const char *name,
                     struct prop *p);

#endif
