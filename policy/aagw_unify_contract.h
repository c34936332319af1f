/*
 * aagw - active-active replication gateway for Kafka
 *
 * policy/aagw_unify_contract.h: the contract between the unify stage's two
 * halves.
 *
 * The Kafka side (replicator/unify*.c) reads the inputs, writes the
 * unified topics and handles delivery reports; the state behind the
 * decisions (dedup/decider.c) decides each record and stores what was
 * decided.  Neither includes the other's header: they share the words
 * below, and gateway/ hands the stage the decider's table of functions
 * (aagw_decider_ops) with the decider as its opaque state.
 *
 * The contract sits in policy/ because it is pure words (types, a key
 * derivation, a table of function pointers) that both halves include,
 * and policy/ is the folder both may depend on; it has a header of its
 * own so that aagw_policy.h holds decisions only.
 */
#ifndef AAGW_UNIFY_CONTRACT_H
#define AAGW_UNIFY_CONTRACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aagw_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/** How a logical topic is unified. */
typedef enum {
        AAGW_UNIFY_OFF   = 0,
        AAGW_UNIFY_DEDUP = 1, /**< first occurrence of a global id */
        AAGW_UNIFY_LWW   = 2, /**< newest version per entity key */
} aagw_unify_mode_t;

/** What became of one record. */
typedef enum {
        AAGW_UNIFY_ACCEPTED   = 0, /**< deliver it */
        AAGW_UNIFY_DROPPED    = 1, /**< dedup: id seen before */
        AAGW_UNIFY_SUPERSEDED = 2, /**< lww: older than the winner */
        AAGW_UNIFY_IDENTICAL  = 3, /**< lww: the winner's own version */
        AAGW_UNIFY_REJECTED   = 4, /**< bad provenance or no entity key */
} aagw_unify_outcome_t;

/** One record to decide (or, at start, to fold in), as read at the site.
 *  Pointers are borrowed for the call.  decide() writes only the outcome
 *  and a rejected record's provenance (fold() also the key): whatever an
 *  implementation needs while deciding it keeps to itself, so the stage's
 *  array of records is the contract's and nothing more. */
struct aagw_unify_rec {
        aagw_unify_mode_t mode;
        bool              rejected;  /**< provenance refused, or lww and
                                          no entity key: audited only */
        struct aagw_prov *prov;      /**< resolved; a rejected record's is
                                          rewritten to its derived id */
        const char       *scope;     /**< lww: the logical topic's entity
                                          scope (aagw_unify_lww_scope()) */
        const char       *topic;     /**< input topic at the site */
        int32_t           partition;
        int64_t           offset;
        const void       *ekey;      /**< lww: the entity key */
        size_t            ekey_len;
        bool              tombstone; /**< null value */
        bool              diverged;  /**< the provenance path contradicts
                                          the topic name (the verdict's
                                          path_forged): audited as
                                          diverged besides its outcome */
        /** aagw_unify_key() of the record (not needed when rejected): the
         *  output partition and the state's key.  decide() and restore()
         *  take it as given; fold() sets it. */
        uint8_t key[AAGW_ID_KEY_LEN];
        /* Out. */
        aagw_unify_outcome_t outcome;
};

/**
 * @brief The key of @p r at @p site's unify stage, into r->key: its id
 * scoped by @p site (dedup), or its entity key scoped by r->scope (lww),
 * hashed by aagw_scoped_key().
 *
 * One definition for both halves: the Kafka side partitions the output by
 * it (all versions of an entity, all copies of an id, in one partition)
 * and, under scale-out, routes each record to the process owning that
 * partition before anything is decided; the decider keys its state by it.
 * No allocation, no I/O.
 */
void aagw_unify_key(const char *site, struct aagw_unify_rec *r);

/** The scope of a last-write-wins entity: "SITE/TOPIC", with TOPIC the
 *  logical topic ("profiles" for east.profiles too), into @p buf.  Seen
 *  ids are scoped by the site alone (aagw_unify_key()). */
void aagw_unify_lww_scope(const char *site, const char *topic, char *buf,
                          size_t size);

/** The state the unify stage decides with, opaque to its Kafka side: the
 *  decider of dedup/ (aagw_decider_t is this type). */
typedef struct aagw_unify_state aagw_unify_state_t;

/** The unify stage's state and decisions: every call comes from the
 *  stage's thread.  Each member is the decider function of the same name
 *  (dedup/aagw_dedup.h, "THE DECIDER"), called directly: no wrapper in
 *  between on the per-record path. */
struct aagw_unify_state_ops {
        int (*decide)(aagw_unify_state_t *st, struct aagw_unify_rec *recs,
                      size_t n, int64_t now_ms, char *errstr,
                      size_t errstr_size);
        bool (*replayed)(aagw_unify_state_t *st, const char *topic,
                         int32_t part, int64_t off);
        int (*pos)(aagw_unify_state_t *st, bool output, const char *topic,
                   int32_t part, int64_t *next, char *errstr,
                   size_t errstr_size);
        void (*reached)(aagw_unify_state_t *st, const char *topic,
                        int32_t part, int64_t next);
        int (*output)(aagw_unify_state_t *st, const char *topic,
                      int32_t nparts);
        unsigned (*sent)(aagw_unify_state_t *st);
        void (*acked)(aagw_unify_state_t *st, unsigned ep, int out,
                      int32_t part, int64_t off);
        void (*lost)(aagw_unify_state_t *st, unsigned ep);
        int (*seal)(aagw_unify_state_t *st);
        bool (*open)(aagw_unify_state_t *st);
        int (*commit)(aagw_unify_state_t *st, char *errstr,
                      size_t errstr_size);
        int (*fold)(aagw_unify_state_t *st, struct aagw_unify_rec *r,
                    int64_t now_ms, char *errstr, size_t errstr_size);
        void (*fold_out)(aagw_unify_state_t *st, const char *topic,
                         int32_t part, int64_t next);
        int (*fold_commit)(aagw_unify_state_t *st, bool end, char *errstr,
                           size_t errstr_size);
        int (*restore)(aagw_unify_state_t *st, const struct aagw_unify_rec *r,
                       int64_t time_ms, char *errstr, size_t errstr_size);
        int (*drop)(aagw_unify_state_t *st);
};

#ifdef __cplusplus
}
#endif
#endif /* AAGW_UNIFY_CONTRACT_H */
