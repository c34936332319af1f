/*
 * replicator/replicator_int.h: what the files of replicator/ share.  Not
 * for other folders.
 */
#ifndef AAGW_REPLICATOR_INT_H
#define AAGW_REPLICATOR_INT_H

#include "aagw_replicator.h"

/* ---------------------- MM2 TOPICS OF ONE FLOW (offsets.c) ---------------- */

/* The MM2-format side of a flow: heartbeats into the source's `heartbeats`
 * topic, offset-syncs (written from the flow thread through mm2_sync()),
 * checkpoints for consumer groups, on a thread of its own so that slow
 * Admin API calls never stall the data path. */
struct mm2;

/* 'target_producer' is the flow's (borrowed; outlives the mm2). */
struct mm2 *mm2_new(aagw_flow_t *flow, const struct aagw_flow_conf *c,
                    rd_kafka_t *target_producer, char *errstr,
                    size_t errstr_size);
int         mm2_start(struct mm2 *m, char *errstr, size_t errstr_size);
/* Ask the thread to stop (returns at once; thread-safe): slow Admin API
 * calls in progress are abandoned. */
void mm2_stop(struct mm2 *m);
/* Stop the thread, flush what was produced (up to 'timeout_ms'), free.
 * NULL is a no-op. */
void mm2_destroy(struct mm2 *m, int timeout_ms);

/* Write one offset-sync: source 'topic' ['partition'] offset 'upstream'
 * is (or goes) at 'downstream' in the target.  Flow thread only; never
 * blocks. */
void mm2_sync(struct mm2 *m, const char *topic, int32_t partition,
              int64_t upstream, int64_t downstream, bool lossy);

/* Counters for aagw_flow_stats(). */
void mm2_stats(const struct mm2 *m, struct aagw_flow_stats *st);

/* Whether 'topic' is the heartbeats topic this deployment writes. */
bool mm2_is_heartbeats(const char *topic);

#endif
