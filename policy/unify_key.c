/*
 * policy/unify_key.c: the unify stage's keys and entity scopes, the part of
 * the unify contract (aagw_unify_contract.h) that is a rule rather than a
 * type.  Both halves of the stage call these, and the audit queries build
 * the same scopes, so the output partition of a record, the state's key
 * for it and what `aagw audit key` looks up cannot drift apart.
 */
#include "aagw_unify_contract.h"

#include <stdio.h>

void aagw_unify_key(const char *site, struct aagw_unify_rec *r) {
        if (r->mode == AAGW_UNIFY_DEDUP)
                aagw_scoped_key(site, r->prov->id, r->prov->id_len, r->key);
        else
                aagw_scoped_key(r->scope, r->ekey, r->ekey_len, r->key);
}

void aagw_unify_lww_scope(const char *site, const char *topic, char *buf,
                          size_t size) {
        snprintf(buf, size, "%s/%s", site, topic);
}
