/*
 * dedup/audit_query.c: what the state knows of one global id or one
 * last-write-wins entity key, for `aagw audit id|key`.
 *
 * The unify stage keys its state by scope (aagw_scoped_key()): seen ids by
 * the site whose unified stream delivered them, winners by site and
 * logical topic ("west/profiles", for profiles and east.profiles alike).
 * A query therefore first finds the scopes the id or key may live in, from
 * the stored positions (every site with a unify stage) and from the audit
 * entries that name it, then looks each scoped key up.  The scope strings
 * are made by the functions the unify stage uses too (the position scopes
 * here, the entity scopes in policy/unify_key.c), so the two cannot drift
 * apart.
 */
#include "dedup_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------- SCOPES -------------------------------- */

void aagw_unify_pos_scope(const char *site, bool output, char *buf,
                          size_t size) {
        snprintf(buf, size, "%s%s%s", AAGW_UNIFY_POS_PREFIX, site,
                 output ? ":out" : "");
}

/* ------------------------------ DISCOVERY ------------------------------- */

struct found {
        size_t n, nalias;
        char   site[AAGW_AUDIT_SCOPES_MAX][AAGW_ALIAS_MAX + 1];
        char   topic[AAGW_AUDIT_SCOPES_MAX][AAGW_TOPIC_MAX + 1];
        char   alias[2 * AAGW_AUDIT_SCOPES_MAX][AAGW_ALIAS_MAX + 1];
};

static void scope_add(struct found *f, const char *site, const char *topic) {
        for (size_t i = 0; i < f->n; i++)
                if (!strcmp(f->site[i], site) &&
                    !strcmp(f->topic[i], topic ? topic : ""))
                        return;
        if (f->n == AAGW_AUDIT_SCOPES_MAX)
                return;
        snprintf(f->site[f->n], sizeof(f->site[0]), "%s", site);
        snprintf(f->topic[f->n], sizeof(f->topic[0]), "%s", topic ? topic : "");
        f->n++;
}

static void alias_add(struct found *f, const char *a) {
        for (size_t i = 0; i < f->nalias; i++)
                if (!strcmp(f->alias[i], a))
                        return;
        if (f->nalias < 2 * AAGW_AUDIT_SCOPES_MAX)
                snprintf(f->alias[f->nalias++], sizeof(f->alias[0]), "%s", a);
}

/* The sites whose unify stage stored positions ("unify:SITE", not
 * "unify:SITE:out"): their seen sets may hold an id without any audit
 * entry (deliveries are logged only with unify.audit_accepted). */
static int cb_unify_site(const char *scope, void *opaque) {
        const char *site = scope + strlen(AAGW_UNIFY_POS_PREFIX);
        if (*site && !strchr(site, ':'))
                scope_add(opaque, site, NULL);
        return 0;
}

static int cb_id_sites(const struct aagw_audit *a, void *opaque) {
        scope_add(opaque, a->site, NULL);
        return 0;
}

/* The (site, input topic) pairs an entity key was seen in, and every alias
 * named, to tell the logical topic (profiles for west.profiles). */
static int cb_key_scopes(const struct aagw_audit *a, void *opaque) {
        struct found *f = opaque;
        alias_add(f, a->site);
        alias_add(f, a->origin);
        scope_add(f, a->site, a->topic);
        return 0;
}

/* The logical topic of an input topic: without every leading
 * "<alias><sep>" of an alias the entries name (the separator is one of
 * the characters the config allows in it). */
static const char *logical_topic(const struct found *f, const char *t) {
        for (bool again = true; again;) {
                again = false;
                for (size_t i = 0; i < f->nalias; i++) {
                        size_t n = strlen(f->alias[i]);
                        if (!strncmp(t, f->alias[i], n) && t[n] &&
                            strchr("._-", t[n]) && t[n + 1]) {
                                t += n + 1;
                                again = true;
                                break;
                        }
                }
        }
        return t;
}

/* -------------------------------- QUERIES ------------------------------- */

aagw_err_t aagw_audit_id_state(aagw_store_t *st, const void *id, size_t len,
                               struct aagw_id_state *out, size_t max,
                               size_t *n, char *errstr, size_t errstr_size) {
        struct found *f = calloc(1, sizeof(*f));
        aagw_err_t    rc;

        *n = 0;
        if (!f) {
                snprintf(errstr, errstr_size, "out of memory");
                return AAGW_ERR_NOMEM;
        }
        if ((rc = aagw_store_pos_scopes(st, AAGW_UNIFY_POS_PREFIX,
                                        cb_unify_site, f, errstr,
                                        errstr_size)) ||
            (rc = aagw_store_audit_by_id(st, id, len, cb_id_sites, f, errstr,
                                         errstr_size)))
                goto out;
        for (size_t i = 0; i < f->n && *n < max; i++) {
                uint8_t key[AAGW_ID_KEY_LEN];
                bool    found = false;

                aagw_scoped_key(f->site[i], id, len, key);
                if ((rc = aagw_store_seen_lookup(st, (const uint8_t(*)[16])key,
                                                 1, &found, &out[*n].seen,
                                                 errstr, errstr_size)))
                        goto out;
                if (!found)
                        continue;
                snprintf(out[*n].site, sizeof(out[*n].site), "%s", f->site[i]);
                (*n)++;
        }
out:
        free(f);
        return rc;
}

aagw_err_t aagw_audit_key_state(aagw_store_t *st, const void *key,
                                size_t len, struct aagw_key_state *out,
                                size_t max, size_t *n, char *errstr,
                                size_t errstr_size) {
        struct found *raw = calloc(2, sizeof(*raw)), *f = raw + 1;
        aagw_err_t    rc;

        *n = 0;
        if (!raw) {
                snprintf(errstr, errstr_size, "out of memory");
                return AAGW_ERR_NOMEM;
        }
        if ((rc = aagw_store_audit_by_key(st, key, len, cb_key_scopes, raw,
                                          errstr, errstr_size)))
                goto out;
        /* (site, input topic) -> (site, logical topic) */
        for (size_t i = 0; i < raw->n; i++)
                scope_add(f, raw->site[i], logical_topic(raw, raw->topic[i]));
        for (size_t i = 0; i < f->n && *n < max; i++) {
                char    scope[AAGW_ALIAS_MAX + AAGW_TOPIC_MAX + 2];
                uint8_t k[AAGW_ID_KEY_LEN];
                bool    found = false;

                aagw_unify_lww_scope(f->site[i], f->topic[i], scope,
                                     sizeof(scope));
                aagw_scoped_key(scope, key, len, k);
                if ((rc = aagw_store_lww_lookup(st, (const uint8_t(*)[16])k, 1,
                                                &found, &out[*n].winner,
                                                errstr, errstr_size)))
                        goto out;
                if (!found)
                        continue;
                snprintf(out[*n].site, sizeof(out[*n].site), "%s", f->site[i]);
                snprintf(out[*n].topic, sizeof(out[*n].topic), "%s",
                         f->topic[i]);
                (*n)++;
        }
out:
        free(raw);
        return rc;
}
