/*
 * tests/unify/unify.h: shared by the unify stage's end-to-end tests, on
 * top of the replication fixture (tests/replication/repl.h): a gateway
 * with the unify stage and its admin endpoint, the stage's figures read
 * from GET /status (curl, json-c), and a librdkafka producer that sets
 * record timestamps (kcat cannot).
 */
#ifndef AAGW_TEST_UNIFY_H
#define AAGW_TEST_UNIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "repl.h"

/* The unify figures of one site, from /status. */
struct ustat {
        bool    found;
        char    state[32];
        int64_t records_in, records_out, accepted, dropped, superseded,
            identical, rejected, recovered, replayed, inflight, lag,
            diverged;
        int64_t inputs; /* inputs assigned */
};

/** GET @p path ("/metrics") from the running gateway's admin endpoint;
 *  @returns the body (malloc()ed) or NULL if it does not answer. */
char *unify_http_get(struct repl *r, const char *path);

/** Start the gateway with `--unify MODE --admin 127.0.0.1:0` plus
 *  @p extra (NULL-terminated, may be NULL) and wait for its admin
 *  address. */
void unify_gw_start(struct repl *r, const char *mode,
                    const char *const *extra);

/** Read the unify figures of @p site; false if the gateway does not
 *  answer (yet). */
bool unify_stat(struct repl *r, const char *site, struct ustat *out);

/** Wait until @p site's stage has read every input (lag 0), nothing is
 *  in flight, and (if @p min_in >= 0) it took in at least @p min_in
 *  records.  Fails the test with the gateway log after @p timeout_ms. */
void unify_wait_idle(struct repl *r, const char *site, int64_t min_in,
                     int timeout_ms);

/** One record for unify_produce(). */
struct urec {
        const char *key;   /* NULL: null key */
        const char *value; /* NULL: tombstone */
        int64_t     ts;    /* create time, ms; 0: now */
        int32_t     partition; /* -1: by key */
};

/** Produce @p n records to @p topic at @p alias and wait for every
 *  acknowledgement; fills offsets[i] / partitions[i] if not NULL. */
void unify_produce(struct repl *r, const char *alias, const char *topic,
                   const struct urec *recs, size_t n, int64_t *offsets,
                   int32_t *partitions);

/** Run `aagw audit ARGS... --json --state-dir STATE` while the gateway
 *  runs; returns the exit code, the output's JSON lines parsed into
 *  @p objs (json_object *, caller puts each; at most @p max) and their
 *  count in @p n, stderr in @p err (may be NULL). */
int unify_audit(struct repl *r, const char *const *args, void **objs,
                size_t max, size_t *n, char *err, size_t errsize);

/** The JSON string field @p field of @p json, copied into @p buf; false if
 *  absent.  Enough for the flat objects the tests write. */
bool unify_json_field(const char *json, const char *field, char *buf,
                      size_t size);

#endif
