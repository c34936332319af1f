/*
 * gateway/unify_state.c: the dedup decider (dedup/decider.c) behind the
 * unify stage's state callbacks (replicator/unify.c).  Neither side
 * includes the other's header; each callback here passes its call on to
 * the decider function of the same name.
 */
#include "gateway_int.h"

#include "aagw_dedup.h"
#include "aagw_replicator.h"

static void lww_scope(void *st, const char *topic, char *buf, size_t size) {
        aagw_decider_lww_scope(st, topic, buf, size);
}

static void key(void *st, struct aagw_unify_rec *r) {
        aagw_decider_key(st, r);
}

static int decide(void *st, struct aagw_unify_rec *recs, size_t n,
                  int64_t now_ms, char *errstr, size_t errstr_size) {
        return aagw_decider_decide(st, recs, n, now_ms, errstr, errstr_size);
}

static bool replayed(void *st, const char *topic, int32_t part, int64_t off) {
        return aagw_decider_replayed(st, topic, part, off);
}

static int pos(void *st, bool output, const char *topic, int32_t part,
               int64_t *next, char *errstr, size_t errstr_size) {
        return aagw_decider_pos(st, output, topic, part, next, errstr,
                                errstr_size);
}

static void reached(void *st, const char *topic, int32_t part, int64_t next) {
        aagw_decider_reached(st, topic, part, next);
}

static int output(void *st, const char *topic, int32_t nparts) {
        return aagw_decider_output(st, topic, nparts);
}

static unsigned sent(void *st) {
        return aagw_decider_sent(st);
}

static void acked(void *st, unsigned ep, int out, int32_t part, int64_t off) {
        aagw_decider_acked(st, ep, out, part, off);
}

static void lost(void *st, unsigned ep) {
        aagw_decider_lost(st, ep);
}

static int seal(void *st) {
        return aagw_decider_seal(st);
}

static bool open_next(void *st) {
        return aagw_decider_open(st);
}

static int commit(void *st, char *errstr, size_t errstr_size) {
        return aagw_decider_commit(st, errstr, errstr_size);
}

static int fold(void *st, struct aagw_unify_rec *r, int64_t now_ms,
                char *errstr, size_t errstr_size) {
        return aagw_decider_fold(st, r, now_ms, errstr, errstr_size);
}

static void fold_out(void *st, const char *topic, int32_t part, int64_t next) {
        aagw_decider_fold_out(st, topic, part, next);
}

static int fold_commit(void *st, bool end, char *errstr, size_t errstr_size) {
        return aagw_decider_fold_commit(st, end, errstr, errstr_size);
}

const struct aagw_unify_state_ops gw_decider_ops = {
    .lww_scope   = lww_scope,
    .key         = key,
    .decide      = decide,
    .replayed    = replayed,
    .pos         = pos,
    .reached     = reached,
    .output      = output,
    .sent        = sent,
    .acked       = acked,
    .lost        = lost,
    .seal        = seal,
    .open        = open_next,
    .commit      = commit,
    .fold        = fold,
    .fold_out    = fold_out,
    .fold_commit = fold_commit,
};
