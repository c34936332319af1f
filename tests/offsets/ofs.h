/*
 * tests/offsets/ofs.h: what the offsets end-to-end tests share, on top of
 * the replication fixture (tests/replication/repl.h): the two-site scene
 * (east -> west, prefix policy, the MM2 topics created with one
 * partition), records with skipped ones among them, group offsets through
 * the Admin API, raw reads for the test's own MM2 decoder, running the
 * aagw offsets commands, and JSON output parsed with json-c.
 */
#ifndef AAGW_TEST_OFS_H
#define AAGW_TEST_OFS_H

#include <json-c/json.h>

#include "aagw_replicator.h"
#include "repl.h"

#define OFS_TIMEOUT_MS 60000

/* East's clicks (4 partitions) -> west's east.clicks; heartbeats, syncs,
 * checkpoints topics made with 1 partition.  Gateway not started. */
struct repl *ofs_scene(void);

/* ofs_scene() with the topic names (scope) of 'prev' (NULL: new ones). */
struct repl *ofs_scene_like(const struct repl *prev);

/* Start the gateway east->west with the MM2 settings the tests use
 * (checkpoints every second for group g1, admin endpoint on a free port)
 * plus 'extra' (NULL-terminated, may be NULL). */
void ofs_gw_start(struct repl *r, const char *const *extra);

/* An admin-capable handle on 'alias' (cached, freed with ofs_done). */
rd_kafka_t *ofs_admin(struct repl *r, const char *alias);
void        ofs_done(void);

/* Commit 'offset' for 'group' at 'alias' (asserts success). */
void ofs_commit(struct repl *r, const char *alias, const char *group,
                const char *topic, int32_t partition, int64_t offset);
/* The committed offset of 'group', -1 if none. */
int64_t ofs_committed(struct repl *r, const char *alias, const char *group,
                      const char *topic, int32_t partition);

/* Every record of 'topic' ['partition'] at 'alias', raw, passed to 'fn'
 * (key, value, offset).  Returns the count. */
typedef void(ofs_rec_fn)(void *arg, const void *key, size_t klen,
                         const void *val, size_t vlen, int64_t offset);
size_t ofs_read_raw(struct repl *r, const char *alias, const char *topic,
                    int32_t partition, ofs_rec_fn *fn, void *arg);

/* Run `aagw WORDS... --cluster east=.. --cluster west=..` (every site of
 * 'r'); returns the
 * exit code, output in 'o' (caller deinits). */
int ofs_aagw(struct repl *r, const char *const *words, harness_output_t *o);

/* Source offsets of the copies in west's east.clicks ['partition'], in
 * target order, from their provenance (kcat read); returns the count. */
size_t ofs_copies(struct repl *r, int32_t partition, int64_t *src, size_t max);

/* The right translation of committed C: copies of source offsets < C. */
int64_t ofs_expected(const int64_t *src, size_t n, int64_t c);

/* Produce 'cnt' records to east's clicks ['partition'] with value
 * "<tag>-<i>": kind 0 plain, 1 a provenance whose path holds west (a loop
 * verdict skips it), 2 malformed provenance (dead-lettered). */
void ofs_produce(struct repl *r, int32_t partition, const char *tag, int from,
                 int cnt, int kind);

/* Wait until the gateway's committed position for east clicks
 * ['partition'] reaches 'want'. */
void ofs_wait_position(struct repl *r, int32_t partition, int64_t want);

#endif
