/*
 * gateway/mm2_security.c: a MirrorMaker 2 file's security settings for
 * librdkafka.
 *
 * MM2 clients are Java clients.  Most of their properties carry over to
 * librdkafka by name (security.protocol, sasl.mechanism, timeouts), but
 * not how they hold keys and log in:
 *
 *   - key and trust stores are files of a type (JKS, PKCS12, PEM) or
 *     inline PEM, read together per client (mm2_translate_stores()):
 *     librdkafka reads a PKCS#12 keystore and PEM, so a PEM store maps to
 *     its PEM settings, a PKCS#12 trust store is converted to PEM here
 *     (pkcs12.c), and a JKS store is refused with the keytool command
 *     that converts it;
 *   - a JAAS login line (sasl.jaas.config) maps by its module: PLAIN and
 *     SCRAM to sasl.username/sasl.password, OAUTHBEARER to librdkafka's
 *     OIDC or unsecured-token settings;
 *   - an empty ssl.endpoint.identification.algorithm (Java's "no host
 *     name check") is librdkafka's "none".
 *
 * A setting that would change how aagw authenticates if dropped is
 * refused, naming the key as the file writes it and the fix.  MM2 layers
 * client settings "A.consumer.x" over "A.x" over the top-level "x"; so
 * does cget().
 */
#include "mm2_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <librdkafka/rdkafka.h>

/* Does librdkafka know property 'name'? */
static bool rdkafka_knows(const char *name) {
        rd_kafka_conf_t *c = rd_kafka_conf_new();
        char             err[256];
        bool             known;

        if (!c)
                return false;
        known = rd_kafka_conf_set(c, name, "", err, sizeof(err)) !=
                RD_KAFKA_CONF_UNKNOWN;
        rd_kafka_conf_destroy(c);
        return known;
}

/* ------------------------------------------------------------- clients -- */

/* The client roles MM2 lets a cluster's keys be narrowed to
 * ("A.consumer.x"); "" is every client. */
static const char *const roles[] = {"", "producer.", "consumer.", "admin.",
                                    NULL};

/* The property the client of cluster 'alias' in 'role' reads for 'name',
 * as MM2 layers them: "A.role.name", then "A.name", then the top-level
 * "name". */
static struct prop *cget(struct mm2 *m, const char *alias, const char *role,
                         const char *name) {
        char         key[512];
        struct prop *p;

        if (*role) {
                snprintf(key, sizeof(key), "%s.%s%s", alias, role, name);
                if ((p = mm2_find(m, key)))
                        return p;
        }
        snprintf(key, sizeof(key), "%s.%s", alias, name);
        if ((p = mm2_find(m, key)))
                return p;
        return mm2_find(m, name);
}

/* Set librdkafka property 'name' for the 'role' clients of 'alias'. */
static void out_prop(struct mm2 *m, const char *alias, const char *role,
                     const char *name, const char *val, const struct prop *from,
                     const char *note) {
        char key[1024];

        snprintf(key, sizeof(key), "clusters.%s.properties.%s%s", alias, role,
                 name);
        mm2_add_set_note(m, key, val, from, note);
}

/* Key 'other' as the file would write it next to 'p', whose key ends in
 * 'bare': "us-east.ssl.truststore.location" and "ssl.truststore.type"
 * give "us-east.ssl.truststore.type". */
static const char *sibling(char *buf, size_t size, const struct prop *p,
                           const char *bare, const char *other) {
        size_t kl = strlen(p->key), bl = strlen(bare);
        int    pl = kl >= bl ? (int)(kl - bl) : 0;

        snprintf(buf, size, "%.*s%s", pl, p->key, other);
        return buf;
}

/* 's' as one shell word: as it is when it holds nothing the shell reads
 * specially, else in single quotes. */
static const char *shell_word(char *buf, size_t size, const char *s) {
        size_t o = 0;

        if (*s &&
            strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                      "0123456789_./-+:,@%=") == strlen(s)) {
                snprintf(buf, size, "%s", s);
                return buf;
        }
        for (const char *c = s; o + 5 < size; c++) {
                if (c == s)
                        buf[o++] = '\'';
                if (!*c)
                        break;
                if (*c == '\'') {
                        memcpy(buf + o, "'\\''", 4);
                        o += 4;
                } else
                        buf[o++] = *c;
        }
        buf[o++] = '\'';
        buf[o]   = '\0';
        return buf;
}

/* 'path' with its extension, if one of the '|'-separated 'exts', replaced
 * by 'ext' (or 'ext' added): "/x/ts.jks" -> "/x/ts.p12". */
static const char *swap_ext(char *buf, size_t size, const char *path,
                            const char *exts, const char *ext) {
        const char *dot   = strrchr(path, '.');
        const char *slash = strrchr(path, '/');
        size_t      keep  = strlen(path);

        if (dot && (!slash || dot > slash)) {
                size_t el = strlen(dot + 1);
                for (const char *e = exts; *e;) {
                        size_t n = strcspn(e, "|");
                        if (n == el && !strncasecmp(e, dot + 1, n))
                                keep = (size_t)(dot - path);
                        e += n + (e[n] == '|');
                }
        }
        snprintf(buf, size, "%.*s%s", (int)keep, path, ext);
        return buf;
}

/*
 * PEM text as a properties file holds it, in the layout OpenSSL reads.
 * Kafka's parser takes a PEM block with any blanks, so operators write an
 * inline key or certificate on one logical line: continuation lines join
 * with their line breaks gone.  OpenSSL wants the BEGIN line, the base64
 * in lines, the END line.  Returns a malloc()ed copy of every block laid
 * out so, or NULL if 'in' is not one or more PEM blocks (or '*oom').
 */
static char *pem_normalize(const char *in, bool *oom) {
        char *out = malloc(strlen(in) * 2 + 64), *o = out;
        int   blocks = 0;

        if (!out) {
                *oom = true;
                return NULL;
        }
        for (const char *p = in;;) {
                const char *label, *le, *end;
                size_t      ll, col = 0;

                while (isspace((unsigned char)*p))
                        p++;
                if (!*p)
                        break;
                if (strncmp(p, "-----BEGIN ", 11))
                        goto bad;
                label = p + 11;
                if (!(le = strstr(label, "-----")) || le == label)
                        goto bad;
                ll = (size_t)(le - label);
                o += sprintf(o, "-----BEGIN %.*s-----\n", (int)ll, label);
                for (p = le + 5; *p && *p != '-'; p++) {
                        if (isspace((unsigned char)*p))
                                continue;
                        if (!isalnum((unsigned char)*p) && !strchr("+/=", *p))
                                goto bad; /* headers, or not base64 */
                        *o++ = *p;
                        if (++col == 64) {
                                *o++ = '\n';
                                col  = 0;
                        }
                }
                if (col)
                        *o++ = '\n';
                if (strncmp(p, "-----END ", 9) || strncmp(p + 9, label, ll) ||
                    strncmp(p + 9 + ll, "-----", 5))
                        goto bad;
                end = p + 9 + ll + 5;
                o += sprintf(o, "-----END %.*s-----\n", (int)ll, label);
                p = end;
                blocks++;
        }
        *o = '\0';
        if (blocks)
                return out;
bad:
        free(out);
        return NULL;
}

/* ------------------------------------------------ key and trust stores -- */

/* How the Java client reads a key or trust store: by its type. */
enum store_kind { SK_PEM, SK_PKCS12, SK_JKS, SK_OTHER };

/* The kind of store 'loc' given its type property 'type' (NULL: unset).
 * Unset, Kafka asks Java for a JKS store, and Java reads a PKCS#12 file
 * under that name too; so go by the extension (.jks, .p12, .pfx, and
 * .pem, .crt, .cer for a file that can only be PEM), then by the file's
 * first bytes, and take JKS when neither tells.  '*namep': the type's
 * name, for messages. */
static enum store_kind store_kind(const struct prop *type, const char *loc,
                                  const char **namep) {
        static const struct {
                const char     *ext;
                enum store_kind kind;
                const char     *name;
        } exts[] = {{"jks", SK_JKS, "JKS"},       {"p12", SK_PKCS12, "PKCS12"},
                    {"pfx", SK_PKCS12, "PKCS12"}, {"pem", SK_PEM, "PEM"},
                    {"crt", SK_PEM, "PEM"},       {"cer", SK_PEM, "PEM"}};
        const char   *dot   = strrchr(loc, '.');
        const char   *slash = strrchr(loc, '/');
        unsigned char head[16];
        size_t        n = 0;
        struct stat   st;
        FILE         *f;

        if (type && *type->val) {
                *namep = type->val;
                return !strcasecmp(type->val, "PEM")      ? SK_PEM
                       : !strcasecmp(type->val, "PKCS12") ? SK_PKCS12
                       : !strcasecmp(type->val, "JKS")    ? SK_JKS
                                                          : SK_OTHER;
        }
        for (size_t i = 0; dot && (!slash || dot > slash) &&
                           i < sizeof(exts) / sizeof(exts[0]);
             i++)
                if (!strcasecmp(dot + 1, exts[i].ext)) {
                        *namep = exts[i].name;
                        return exts[i].kind;
                }
        /* Only a regular file: opening a FIFO would wait for a writer. */
        if (!stat(loc, &st) && S_ISREG(st.st_mode) && (f = fopen(loc, "rb"))) {
                n = fread(head, 1, sizeof(head), f);
                fclose(f);
        }
        *namep = "JKS";
        if (n >= 4 && !memcmp(head, "\xce\xce\xce\xce", 4)) {
                *namep = "JCEKS";
                return SK_OTHER;
        }
        if (n >= 1 && head[0] == 0x30) {
                *namep = "PKCS12";
                return SK_PKCS12;
        }
        if (n >= 11 && !memcmp(head, "-----BEGIN ", 11)) {
                *namep = "PEM";
                return SK_PEM;
        }
        return SK_JKS;
}

/* Refuse the store at 'loc' (of 'kind_name', not one librdkafka reads)
 * with the keytool command that makes a PKCS#12 copy, and the keys to
 * set then.  'what': "keystore" or "trust store"; 'base': "ssl.keystore"
 * or "ssl.truststore". */
static void refuse_keytool(struct mm2 *m, struct prop *loc, const char *what,
                           const char *base, const char *kind_name) {
        char src[600], dst_path[600], dst[600], lockey[512], typekey[512];
        char bare[64], other[64], srctype[80] = "";

        snprintf(bare, sizeof(bare), "%s.location", base);
        snprintf(other, sizeof(other), "%s.type", base);
        sibling(lockey, sizeof(lockey), loc, bare, bare);
        sibling(typekey, sizeof(typekey), loc, bare, other);
        swap_ext(dst_path, sizeof(dst_path), loc->val,
                 "jks|jceks|keystore|ks|bcfks|truststore", ".p12");
        if (strcasecmp(kind_name, "JKS"))
                snprintf(srctype, sizeof(srctype), " -srcstoretype %s",
                         kind_name);
        shell_word(src, sizeof(src), loc->val);
        mm2_refuse_once(
            m, loc,
            "%s is a %s %s, which librdkafka cannot read; convert it "
            "to PKCS#12 with `keytool -importkeystore -srckeystore "
            "%s%s -destkeystore %s -deststoretype PKCS12`, then set "
            "%s = %s and %s = PKCS12%s",
            loc->val, kind_name, what, src, srctype,
            shell_word(dst, sizeof(dst), dst_path), lockey, dst_path, typekey,
            !strcmp(what, "keystore")
                ? ""
                : " (aagw converts a PKCS#12 trust store to PEM)");
}

/* Inline PEM from 'p' into librdkafka's 'name', or a refusal. */
static void out_pem(struct mm2 *m, const char *alias, const char *role,
                    const char *name, struct prop *p) {
        char *pem = pem_normalize(p->val, &m->oom);

        if (!pem) {
                if (!m->oom)
                        mm2_refuse_once(
                            m, p,
                            "not PEM text: expected \"-----BEGIN "
                            "...-----\" base64 \"-----END ...-----\" "
                            "blocks");
                return;
        }
        p->used = true;
        out_prop(m, alias, role, name, pem, p, NULL);
        free(pem);
}

/* A converted trust store: PEM text 'pem' from the store at 'loc'. */
static void trust_pkcs12_out(struct mm2 *m, const char *alias, const char *role,
                             struct prop *loc, char *pem, size_t ncerts) {
        static const char note[] = "(PKCS#12 trust store converted to PEM)";
        struct pem_file  *nv;
        char              path[4096];

        if (!m->pem_dir) {
                out_prop(m, alias, role, "ssl.ca.pem", pem, loc, note);
                mm2_converted(
                    m, loc,
                    "the %zu certificate(s) of PKCS#12 trust store %s "
                    "are given to librdkafka as ssl.ca.pem for cluster "
                    "%s",
                    ncerts, loc->val, alias);
                free(pem);
                return;
        }
        snprintf(path, sizeof(path), "%s/%s%s%.*s-truststore.pem", m->pem_dir,
                 alias, *role ? "-" : "", *role ? (int)strlen(role) - 1 : 0,
                 role);
        nv = realloc(m->pems, (m->npems + 1) * sizeof(*nv));
        if (!nv || !(nv[m->npems].path = strdup(path))) {
                if (nv)
                        m->pems = nv;
                free(pem);
                m->oom = true;
                return;
        }
        m->pems                 = nv;
        m->pems[m->npems++].pem = pem;
        out_prop(m, alias, role, "ssl.ca.location", path, loc, note);
        mm2_converted(
            m, loc,
            "the %zu certificate(s) of PKCS#12 trust store %s are "
            "written to %s (PEM), which ssl.ca.location of cluster %s "
            "names",
            ncerts, loc->val, path, alias);
}

/* The trust store of one client: ssl.truststore.* as librdkafka's CA
 * settings. */
static void trust_store(struct mm2 *m, const char *alias, const char *role) {
        struct prop *type = cget(m, alias, role, "ssl.truststore.type");
        struct prop *loc  = cget(m, alias, role, "ssl.truststore.location");
        struct prop *pw   = cget(m, alias, role, "ssl.truststore.password");
        struct prop *certs =
            cget(m, alias, role, "ssl.truststore.certificates");
        const char *kind_name;
        char        k1[512], k2[600], k3[512], why[256], pemp[600], lp[600];
        char       *pem;
        size_t      ncerts;

        if (type)
                type->used = true;
        if (certs) {
                if (type && strcasecmp(type->val, "PEM"))
                        mm2_refuse_once(m, type,
                                        "inline certificates (%s) are PEM: set "
                                        "%s = PEM",
                                        certs->key,
                                        sibling(k1, sizeof(k1), type,
                                                "ssl.truststore.type",
                                                "ssl.truststore.type"));
                if (loc)
                        mm2_refuse_once(m, loc,
                                        "%s is set too, which the Java client "
                                        "refuses: keep one of the two",
                                        certs->key);
                if (pw)
                        mm2_ignore_once(m, pw,
                                        "a PEM trust store has no password");
                out_pem(m, alias, role, "ssl.ca.pem", certs);
                return;
        }
        if (!loc) {
                if (pw)
                        mm2_ignore_once(
                            m, pw, "there is no trust store (%s is not set)",
                            sibling(k1, sizeof(k1), pw,
                                    "ssl.truststore.password",
                                    "ssl.truststore.location"));
                return;
        }
        loc->used = true;
        switch (store_kind(type, loc->val, &kind_name)) {
        case SK_PEM:
                if (pw)
                        mm2_ignore_once(m, pw,
                                        "a PEM trust store has no password");
                out_prop(m, alias, role, "ssl.ca.location", loc->val, loc,
                         NULL);
                return;
        case SK_PKCS12:
                if (pw)
                        pw->used = true;
                if (gw_pkcs12_certs_pem(loc->val, pw ? pw->val : NULL, &pem,
                                        &ncerts, why, sizeof(why))) {
                        swap_ext(pemp, sizeof(pemp), loc->val, "p12|pfx",
                                 ".pem");
                        mm2_refuse_once(
                            m, loc,
                            "cannot read PKCS#12 trust store %s (%s) to "
                            "convert it to the PEM librdkafka reads; convert "
                            "it with `openssl pkcs12 -in %s -nokeys -out %s` "
                            "(add -legacy for a store written by Java 8 to "
                            "11), then set %s = %s and %s = PEM",
                            loc->val, why, shell_word(lp, sizeof(lp), loc->val),
                            shell_word(k2, sizeof(k2), pemp),
                            sibling(k1, sizeof(k1), loc,
                                    "ssl.truststore.location",
                                    "ssl.truststore.location"),
                            pemp,
                            sibling(k3, sizeof(k3), loc,
                                    "ssl.truststore.location",
                                    "ssl.truststore.type"));
                        return;
                }
                if (!ncerts) {
                        free(pem);
                        mm2_refuse_once(m, loc,
                                        "PKCS#12 trust store %s holds no CA "
                                        "certificate",
                                        loc->val);
                        return;
                }
                trust_pkcs12_out(m, alias, role, loc, pem, ncerts);
                return;
        case SK_JKS:
        case SK_OTHER:
                refuse_keytool(m, loc, "trust store", "ssl.truststore",
                               kind_name);
                return;
        }
}

/* The key store of one client: ssl.keystore.* and ssl.key.password as
 * librdkafka's client certificate settings. */
static void key_store(struct mm2 *m, const char *alias, const char *role) {
        struct prop *type  = cget(m, alias, role, "ssl.keystore.type");
        struct prop *loc   = cget(m, alias, role, "ssl.keystore.location");
        struct prop *pw    = cget(m, alias, role, "ssl.keystore.password");
        struct prop *keypw = cget(m, alias, role, "ssl.key.password");
        struct prop *key   = cget(m, alias, role, "ssl.keystore.key");
        struct prop *chain =
            cget(m, alias, role, "ssl.keystore.certificate.chain");
        const char *kind_name;
        char        k1[512];

        if (type)
                type->used = true;
        if (key || chain) {
                struct prop *one = key ? key : chain;
                if (type && strcasecmp(type->val, "PEM"))
                        mm2_refuse_once(m, type,
                                        "an inline key and certificate chain "
                                        "(%s) are PEM: set %s = PEM",
                                        one->key,
                                        sibling(k1, sizeof(k1), type,
                                                "ssl.keystore.type",
                                                "ssl.keystore.type"));
                if (!key || !chain)
                        mm2_refuse_once(
                            m, one,
                            "set %s too: the client needs its key "
                            "and its certificate chain",
                            key ? sibling(k1, sizeof(k1), key,
                                          "ssl.keystore.key",
                                          "ssl.keystore.certificate."
                                          "chain")
                                : sibling(k1, sizeof(k1), chain,
                                          "ssl.keystore.certificate."
                                          "chain",
                                          "ssl.keystore.key"));
                if (loc)
                        mm2_refuse_once(m, loc,
                                        "%s is set too, which the Java client "
                                        "refuses: keep one of the two",
                                        one->key);
                if (pw)
                        mm2_ignore_once(m, pw,
                                        "a PEM key has no store password (%s "
                                        "protects the key)",
                                        sibling(k1, sizeof(k1), pw,
                                                "ssl.keystore.password",
                                                "ssl.key.password"));
                if (key && chain) {
                        out_pem(m, alias, role, "ssl.key.pem", key);
                        out_pem(m, alias, role, "ssl.certificate.pem", chain);
                        if (keypw) {
                                keypw->used = true;
                                out_prop(m, alias, role, "ssl.key.password",
                                         keypw->val, keypw, NULL);
                        }
                }
                return;
        }
        if (!loc) {
                if (pw)
                        mm2_ignore_once(
                            m, pw, "there is no keystore (%s is not set)",
                            sibling(k1, sizeof(k1), pw, "ssl.keystore.password",
                                    "ssl.keystore.location"));
                if (keypw)
                        mm2_ignore_once(m, keypw,
                                        "there is no key (neither %s nor %s is "
                                        "set)",
                                        sibling(k1, sizeof(k1), keypw,
                                                "ssl.key.password",
                                                "ssl.keystore.location"),
                                        "ssl.keystore.key");
                return;
        }
        loc->used = true;
        switch (store_kind(type, loc->val, &kind_name)) {
        case SK_PEM:
                /* Kafka's PEM keystore is one file with the key and the
                 * certificate chain; OpenSSL finds each in it. */
                if (pw)
                        mm2_ignore_once(m, pw,
                                        "a PEM keystore has no store password "
                                        "(%s protects the key)",
                                        sibling(k1, sizeof(k1), pw,
                                                "ssl.keystore.password",
                                                "ssl.key.password"));
                out_prop(m, alias, role, "ssl.key.location", loc->val, loc,
                         NULL);
                out_prop(m, alias, role, "ssl.certificate.location", loc->val,
                         loc, NULL);
                if (keypw) {
                        keypw->used = true;
                        out_prop(m, alias, role, "ssl.key.password", keypw->val,
                                 keypw, NULL);
                }
                return;
        case SK_PKCS12:
                if (!pw) {
                        mm2_refuse_once(
                            m, loc,
                            "librdkafka opens a PKCS#12 keystore with "
                            "its password: set %s",
                            sibling(k1, sizeof(k1), loc,
                                    "ssl.keystore.location",
                                    "ssl.keystore.password"));
                        return;
                }
                /* One password opens the store and its key, as keytool
                 * writes PKCS#12: a different key password cannot be
                 * given to librdkafka. */
                if (keypw && strcmp(keypw->val, pw->val)) {
                        mm2_refuse_once(
                            m, keypw,
                            "librdkafka opens a PKCS#12 keystore and "
                            "its key with %s alone, and this "
                            "password differs: remove %s or make it "
                            "equal to %s",
                            pw->key, keypw->key, pw->key);
                        return;
                }
                if (keypw)
                        keypw->used = true;
                pw->used = true;
                out_prop(m, alias, role, "ssl.keystore.location", loc->val, loc,
                         NULL);
                out_prop(m, alias, role, "ssl.keystore.password", pw->val, pw,
                         NULL);
                return;
        case SK_JKS:
        case SK_OTHER:
                if (pw)
                        pw->used = true;
                if (keypw)
                        keypw->used = true;
                refuse_keytool(m, loc, "keystore", "ssl.keystore", kind_name);
                return;
        }
}

/* The properties that make up a key or trust store, read together. */
static const char *const store_keys[] = {"ssl.keystore.type",
                                         "ssl.keystore.location",
                                         "ssl.keystore.password",
                                         "ssl.keystore.key",
                                         "ssl.keystore.certificate.chain",
                                         "ssl.key.password",
                                         "ssl.truststore.type",
                                         "ssl.truststore.location",
                                         "ssl.truststore.password",
                                         "ssl.truststore.certificates",
                                         NULL};

/* Key and trust stores of every client of every cluster: per role that
 * names one of their keys ("A.consumer.ssl.keystore.location"), and for
 * all clients. */
void mm2_translate_stores(struct mm2 *m) {
        for (size_t a = 0; a < m->nalias; a++) {
                for (size_t r = 0; roles[r]; r++) {
                        bool any = false;
                        for (size_t k = 0; store_keys[k] && !any; k++) {
                                char key[512];
                                snprintf(key, sizeof(key), "%s.%s%s",
                                         m->aliases[a], roles[r],
                                         store_keys[k]);
                                any =
                                    mm2_find(m, key) ||
                                    (!*roles[r] && mm2_find(m, store_keys[k]));
                        }
                        if (!any)
                                continue;
                        key_store(m, m->aliases[a], roles[r]);
                        trust_store(m, m->aliases[a], roles[r]);
                        /* Each was translated, reported, or is implied
                         * by the others (a password librdkafka does not
                         * need once the store is converted). */
                        for (size_t k = 0; store_keys[k]; k++) {
                                struct prop *p = cget(m, m->aliases[a],
                                                      roles[r], store_keys[k]);
                                if (p)
                                        p->used = true;
                        }
                }
        }
        /* Top-level keys with no cluster to read them are used all the
         * same (no flow: reported elsewhere). */
        for (size_t k = 0; store_keys[k]; k++) {
                struct prop *p = mm2_find(m, store_keys[k]);
                if (p)
                        p->used = true;
        }
}

/* --------------------------------------------------------- JAAS logins -- */

#define JAAS_MAX_OPTS 32

/* One JAAS login, "Module flag name=value ...;": the value of Kafka's
 * sasl.jaas.config. */
struct jaas {
        char  *module; /* the class: "org....ScramLoginModule" */
        char  *name[JAAS_MAX_OPTS], *val[JAAS_MAX_OPTS];
        size_t n;
};

static void jaas_free(struct jaas *j) {
        free(j->module);
        for (size_t i = 0; i < j->n; i++) {
                free(j->name[i]);
                free(j->val[i]);
        }
        memset(j, 0, sizeof(*j));
}

/* The word or quoted string at '*s', read as Kafka reads the line (Java's
 * StreamTokenizer: "..." or '...', a backslash taking the next character
 * as it is); NULL if there is none, the quote is not closed, or '*oom'. */
static char *jaas_token(const char **s, bool *oom) {
        const char *p = *s;
        char       *out, *o;

        while (isspace((unsigned char)*p))
                p++;
        *s = p;
        if (!*p || *p == ';' || *p == '=')
                return NULL;
        if (!(out = o = malloc(strlen(p) + 1))) {
                *oom = true;
                return NULL;
        }
        if (*p == '"' || *p == '\'') {
                char q = *p++;
                while (*p && *p != q) {
                        if (*p == '\\' && p[1])
                                p++;
                        *o++ = *p++;
                }
                if (*p != q) {
                        free(out);
                        return NULL;
                }
                p++;
        } else {
                while (*p && !isspace((unsigned char)*p) && *p != ';' &&
                       *p != '=')
                        *o++ = *p++;
        }
        *o = '\0';
        *s = p;
        return out;
}

/* Parse 's' into 'j'; -1 if it is not one JAAS login (or '*oom'). */
static int jaas_parse(const char *s, struct jaas *j, bool *oom) {
        char *flag;
        bool  ok;

        memset(j, 0, sizeof(*j));
        if (!(j->module = jaas_token(&s, oom)))
                return -1;
        if (!(flag = jaas_token(&s, oom)))
                goto bad;
        ok = !strcasecmp(flag, "required") || !strcasecmp(flag, "requisite") ||
             !strcasecmp(flag, "sufficient") || !strcasecmp(flag, "optional");
        free(flag);
        if (!ok)
                goto bad;
        for (;;) {
                char *nm, *v;
                while (isspace((unsigned char)*s))
                        s++;
                if (!*s)
                        return 0;
                if (*s == ';') {
                        for (s++; isspace((unsigned char)*s); s++)
                                ;
                        if (*s)
                                goto bad; /* a second login */
                        return 0;
                }
                if (j->n == JAAS_MAX_OPTS || !(nm = jaas_token(&s, oom)))
                        goto bad;
                while (isspace((unsigned char)*s))
                        s++;
                if (*s != '=') {
                        free(nm);
                        goto bad;
                }
                s++;
                if (!(v = jaas_token(&s, oom))) {
                        free(nm);
                        goto bad;
                }
                j->name[j->n]  = nm;
                j->val[j->n++] = v;
        }
bad:
        jaas_free(j);
        return -1;
}

static const char *jaas_get(const struct jaas *j, const char *name) {
        for (size_t i = 0; i < j->n; i++)
                if (!strcmp(j->name[i], name))
                        return j->val[i];
        return NULL;
}

/* Append 'sep' (unless at the start), then the printf() of 'fmt', to
 * 'buf' of 'size'; false if it does not fit. */
static bool __attribute__((format(printf, 4, 5)))
cat(char *buf, size_t size, char sep, const char *fmt, ...) {
        size_t  n = strlen(buf);
        int     w;
        va_list ap;

        if (n && n + 1 < size)
                buf[n++] = sep;
        va_start(ap, fmt);
        w = vsnprintf(buf + n, size - n, fmt, ap);
        va_end(ap);
        return w >= 0 && (size_t)w < size - n;
}

/*
 * An OAuthBearerLoginModule login, either of Kafka's two kinds:
 *  - OIDC (client credentials): the JAAS options clientId, clientSecret,
 *    scope and extension_NAME, with the token endpoint in
 *    sasl.oauthbearer.token.endpoint.url (passed on as it is, librdkafka
 *    has the same name) and Kafka's OAuthBearerLoginCallbackHandler;
 *    librdkafka's sasl.oauthbearer.method=oidc does the same;
 *  - the unsecured test login (unsecuredLoginStringClaim_sub="alice"),
 *    which librdkafka builds in: sasl.oauthbearer.config "principal=alice
 *    ..." with enable.sasl.oauthbearer.unsecure.jwt.
 */
static void oauth_login(struct mm2 *m, const char *alias, const char *role,
                        struct prop *p, const struct jaas *j) {
        struct prop *url =
            cget(m, alias, role, "sasl.oauthbearer.token.endpoint.url");
        struct prop *cb =
            cget(m, alias, role, "sasl.login.callback.handler.class");
        const char *id     = jaas_get(j, "clientId");
        const char *secret = jaas_get(j, "clientSecret");
        const char *scope  = jaas_get(j, "scope");
        const char *pcn    = jaas_get(j, "unsecuredLoginPrincipalClaimName");
        const char *scn    = jaas_get(j, "unsecuredLoginScopeClaimName");
        char        k1[512], pclaim[300], lclaim[300], conf[2048] = "";
        const char *principal, *v;

        sibling(k1, sizeof(k1), p, "sasl.jaas.config",
                "sasl.oauthbearer.token.endpoint.url");
        if (url || cb || id || secret) {
                char ext[2048] = "";
                if (!url || !id || !secret) {
                        mm2_refuse_once(
                            m, p,
                            "an OIDC login needs the JAAS options "
                            "clientId=\"...\" and clientSecret=\"...\" "
                            "and %s = https://...; %s is missing",
                            k1,
                            !id       ? "clientId"
                            : !secret ? "clientSecret"
                                      : k1);
                        return;
                }
                for (size_t i = 0; i < j->n; i++)
                        if (!strncmp(j->name[i], "extension_", 10) &&
                            !cat(ext, sizeof(ext), ',', "%s=%s",
                                 j->name[i] + 10, j->val[i])) {
                                mm2_refuse_once(m, p, "too many extensions");
                                return;
                        }
                p->used = true;
                out_prop(m, alias, role, "sasl.oauthbearer.method", "oidc", p,
                         NULL);
                out_prop(m, alias, role, "sasl.oauthbearer.client.id", id, p,
                         NULL);
                out_prop(m, alias, role, "sasl.oauthbearer.client.secret",
                         secret, p, NULL);
                if (scope)
                        out_prop(m, alias, role, "sasl.oauthbearer.scope",
                                 scope, p, NULL);
                if (*ext)
                        out_prop(m, alias, role, "sasl.oauthbearer.extensions",
                                 ext, p, NULL);
                return;
        }
        snprintf(pclaim, sizeof(pclaim), "unsecuredLoginStringClaim_%s",
                 pcn ? pcn : "sub");
        snprintf(lclaim, sizeof(lclaim), "unsecuredLoginListClaim_%s",
                 scn ? scn : "scope");
        if (!(principal = jaas_get(j, pclaim))) {
                mm2_refuse_once(
                    m, p,
                    "an OAUTHBEARER login converts as OIDC (JAAS "
                    "options clientId and clientSecret, and %s) or as "
                    "Kafka's unsecured test login "
                    "(unsecuredLoginStringClaim_sub=\"PRINCIPAL\"); "
                    "this one is neither",
                    k1);
                return;
        }
        /* librdkafka's unsecured token takes blank-separated name=value
         * settings: what it has of Kafka's options, no value with a
         * blank. */
        for (size_t i = 0; i < j->n; i++) {
                const char *nm   = j->name[i];
                bool        used = !strcmp(nm, pclaim) || !strcmp(nm, lclaim) ||
                            !strcmp(nm, "unsecuredLoginPrincipalClaimName") ||
                            !strcmp(nm, "unsecuredLoginScopeClaimName") ||
                            !strcmp(nm, "unsecuredLoginLifetimeSeconds") ||
                            !strncmp(nm, "unsecuredLoginExtension_", 24);
                if (used && strpbrk(j->val[i], " \t\r\n")) {
                        mm2_refuse_once(
                            m, p,
                            "JAAS option %s holds a blank, which "
                            "librdkafka's sasl.oauthbearer.config "
                            "cannot carry (it separates its settings "
                            "with blanks)",
                            nm);
                        return;
                }
                if (!used && !strncmp(nm, "unsecuredLogin", 14) && !p->reported)
                        aagw_config_warn_at(m->cfg, m->file, p->line, p->key,
                                            "ignored: JAAS option %s: "
                                            "librdkafka's unsecured token "
                                            "carries only the principal, "
                                            "scope, lifetime and extensions",
                                            nm);
        }
        cat(conf, sizeof(conf), ' ', "principal=%s", principal);
        if (pcn && strcmp(pcn, "sub"))
                cat(conf, sizeof(conf), ' ', "principalClaimName=%s", pcn);
        if (scn)
                cat(conf, sizeof(conf), ' ', "scopeClaimName=%s", scn);
        if ((v = jaas_get(j, lclaim)) && *v) {
                /* Kafka's list claim: its first character separates the
                 * items; librdkafka's scope is comma-separated. */
                char list[1024];
                snprintf(list, sizeof(list), "%s", v + 1);
                for (char *c = list; *c; c++)
                        if (*c == *v)
                                *c = ',';
                cat(conf, sizeof(conf), ' ', "scope=%s", list);
        }
        if ((v = jaas_get(j, "unsecuredLoginLifetimeSeconds")))
                cat(conf, sizeof(conf), ' ', "lifeSeconds=%s", v);
        for (size_t i = 0; i < j->n; i++)
                if (!strncmp(j->name[i], "unsecuredLoginExtension_", 24))
                        cat(conf, sizeof(conf), ' ', "extension_%s=%s",
                            j->name[i] + 24, j->val[i]);
        p->used     = true;
        p->reported = true;
        out_prop(m, alias, role, "sasl.oauthbearer.config", conf, p, NULL);
        out_prop(m, alias, role, "enable.sasl.oauthbearer.unsecure.jwt", "true",
                 p, NULL);
}

/* sasl.jaas.config 'p' of a client: the login module's options as
 * librdkafka's SASL settings. */
static void jaas_login(struct mm2 *m, const char *alias, const char *role,
                       struct prop *p) {
        struct jaas j;
        const char *cls;

        if (jaas_parse(p->val, &j, &m->oom)) {
                if (!m->oom)
                        mm2_refuse_once(m, p,
                                        "not a JAAS login (\"LoginModule "
                                        "required name=\\\"value\\\" ...;\")");
                return;
        }
        cls = strrchr(j.module, '.') ? strrchr(j.module, '.') + 1 : j.module;
        if (!strcmp(cls, "ScramLoginModule") ||
            !strcmp(cls, "PlainLoginModule")) {
                const char *u  = jaas_get(&j, "username");
                const char *pw = jaas_get(&j, "password");
                if (!u || !pw)
                        mm2_refuse_once(m, p,
                                        "a %s login needs the options "
                                        "username=\"...\" and password=\"...\"",
                                        cls);
                else {
                        p->used = true;
                        out_prop(m, alias, role, "sasl.username", u, p, NULL);
                        out_prop(m, alias, role, "sasl.password", pw, p, NULL);
                }
        } else if (!strcmp(cls, "OAuthBearerLoginModule"))
                oauth_login(m, alias, role, p, &j);
        else
                mm2_refuse_once(
                    m, p,
                    "only PLAIN, SCRAM and OAUTHBEARER logins convert, "
                    "not %s; set librdkafka's sasl.* properties under "
                    "clusters.%s.properties",
                    cls, alias);
        jaas_free(&j);
}

/* ------------------------------------------------- one client property -- */

/* Java client settings that only tune the Java client's own OAUTHBEARER
 * login or check the token it was given. */
static const char *const java_login_keys[] = {
    "sasl.login.refresh.",
    "sasl.login.connect.timeout.ms",
    "sasl.login.read.timeout.ms",
    "sasl.login.retry.backoff.ms",
    "sasl.login.retry.backoff.max.ms",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.jwks.endpoint.",
    "sasl.oauthbearer.expected.",
    NULL};

/*
 * One client property 'name' (role prefix "producer."/"consumer."/"admin."
 * allowed) of cluster 'alias', from 'p'.  librdkafka's names match the Java
 * client's for most of what matters here (security.protocol,
 * sasl.mechanism, timeouts).  The JAAS login, the host name check and the
 * Java-only login keys are handled here, key and trust stores before
 * (mm2_translate_stores()); the rest is passed if librdkafka knows the
 * name.
 */
void mm2_client_prop(struct mm2 *m, const char *alias, const char *name,
                     struct prop *p) {
        char        key[1024];
        const char *role = "", *bare = name;

        for (const char *const *r = roles + 1; *r; r++)
                if (!strncmp(name, *r, strlen(*r))) {
                        role = *r;
                        bare = name + strlen(*r);
                }
        if (mm2_starts_with_any(name, mm2_worker_keys)) {
                mm2_ignore(m, p,
                           "a Kafka Connect worker setting; aagw keeps its "
                           "state in the state directory");
                return;
        }
        if (!strcmp(bare, "sasl.jaas.config")) {
                jaas_login(m, alias, role, p);
                return;
        }
        if (!strcmp(bare, "ssl.endpoint.identification.algorithm")) {
                /* Java turns the host name check off with an empty value,
                 * librdkafka with "none". */
                if (!*p->val || !strcasecmp(p->val, "https")) {
                        p->used = true;
                        out_prop(m, alias, role, bare,
                                 *p->val ? "https" : "none", p, NULL);
                } else
                        mm2_refuse_once(
                            m, p,
                            "expected https, or nothing to turn the "
                            "broker host name check off");
                return;
        }
        if (!strcmp(bare, "sasl.login.callback.handler.class")) {
                /* Kafka's OIDC handler is what the OAUTHBEARER login
                 * translation (oauth_login()) stands for. */
                const char *cls =
                    strrchr(p->val, '.') ? strrchr(p->val, '.') + 1 : p->val;
                if (!strcmp(cls, "OAuthBearerLoginCallbackHandler"))
                        p->used = true;
                else
                        mm2_refuse_once(
                            m, p,
                            "a custom Java class has no aagw "
                            "equivalent; Kafka's "
                            "OAuthBearerLoginCallbackHandler (OIDC) "
                            "converts");
                return;
        }
        if (mm2_starts_with_any(bare, java_login_keys)) {
                mm2_ignore_once(
                    m, p,
                    "tunes the Java client's own OAUTHBEARER login or "
                    "its check of the token; librdkafka fetches and "
                    "refreshes the token itself and the broker checks "
                    "it");
                return;
        }
        if (!rdkafka_knows(bare)) {
                if (!strncmp(bare, "ssl.", 4) || !strncmp(bare, "sasl.", 5) ||
                    !strncmp(bare, "security.", 9))
                        mm2_refuse_once(
                            m, p,
                            "a Java-only security setting librdkafka "
                            "does not have; dropping it could change "
                            "how aagw authenticates");
                else
                        mm2_ignore(m, p,
                                   "a Java client setting librdkafka does not "
                                   "have");
                return;
        }
        p->used = true;
        snprintf(key, sizeof(key), "clusters.%s.properties.%s", alias, name);
        mm2_add_set(m, key, p->val, p);
}
