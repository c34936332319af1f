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
 * (aagw_decider_ops) with the decider as its opaque state.  Any other
 * implementation of struct aagw_unify_state_ops serves the stage just as
 * well: tests/unit/test_unify_contract.c runs one kept in memory beside
 * the decider and checks that both give the same answers.
 *
 * The contract sits in policy/ because it is pure words (types, a key
 * derivation, a table of function pointers) that both halves include, and
 * policy/ is the folder both may depend on.
 *
 * One consumed batch costs the stage three calls, plus one per delivery
 * report:
 *
 *   decide()   once: replays, verdicts, audit entries, all into the open
 *              epoch; the accepted records count as in flight in it
 *   acked()    per accepted record's delivery report (lost() instead when
 *              the record will never be acknowledged)
 *   settle()   once at the end with the input positions the batch reached
 *              (seal the epoch, store every epoch whose records are all
 *              acknowledged, open the next), and once per pass of the
 *              stage's loop without them (store what was acknowledged)
 *
 * The other calls run outside the batch path: output() and pos() when
 * topics are discovered and partitions assigned; fold(), fold_out() and
 * fold_commit() in the start-up scan of the output; restore() and drop()
 * under scale-out.
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
        AAGW_UNIFY_REPLAYED   = 5, /**< delivered by the previous run and
                                        found in the output at start (see
                                        fold()): no verdict, no audit */
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

/** An input partition's position at the end of a batch: the next offset
 *  to read.  @p topic is borrowed for the call. */
struct aagw_unify_pos {
        const char *topic;
        int32_t     partition;
        int64_t     next;
};

/** The state the unify stage decides with, opaque to its Kafka side: the
 *  decider of dedup/ (aagw_decider_t is this type) or a test's double. */
typedef struct aagw_unify_state aagw_unify_state_t;

/**
 * @brief The unify stage's state and decisions.  Every call comes from the
 * stage's thread.  In the decider each member is the aagw_decider_*
 * function of the same name (dedup/aagw_dedup.h, "THE DECIDER"), called
 * directly: no wrapper in between.
 *
 * Records are decided in epochs, one consumed batch each: an epoch is
 * stored (its decisions, the input positions it reached, the output
 * offsets acknowledged) only once every record it accepted, and every
 * earlier epoch, is acknowledged by the output.  At most a fixed number
 * of epochs are open or waiting; settle() says when the next cannot open.
 */
/** Where the state hands each audit entry it makes while deciding @p r
 *  (scale-out: into the site's audit topic, in the decision's
 *  transaction): @p entry is @p len bytes in the state's own versioned
 *  form, what `aagw audit` reads back.  @returns 0, or -1 to fail the
 *  decision (the epoch never commits). */
typedef int aagw_unify_audit_fn(void *opaque, const struct aagw_unify_rec *r,
                                const void *entry, size_t len);

struct aagw_unify_state_ops {
        /* ------------------------- per batch -------------------------- */

        /**
         * Decide @p n records in order into the open epoch; each gets
         * r->outcome.  A record whose coordinates fold() met in the output
         * is REPLAYED (once); the rest are decided against what earlier
         * records, pending epochs and the stored state decided.  @p now_ms
         * stamps what is stored.  Every ACCEPTED record counts as in
         * flight in the epoch @p *epoch: the stage sends each and reports
         * its acknowledgement with acked() or its loss with lost().
         * @returns 0, or -1 (store or memory) with @p errstr: the epoch
         * then never commits.
         */
        int (*decide)(aagw_unify_state_t *st, struct aagw_unify_rec *recs,
                      size_t n, int64_t now_ms, unsigned *epoch, char *errstr,
                      size_t errstr_size);
        /** A record of epoch @p ep is acknowledged at output @p out
         *  (output()'s number) partition @p part, offset @p off. */
        void (*acked)(aagw_unify_state_t *st, unsigned ep, int out,
                      int32_t part, int64_t off);
        /** A record of epoch @p ep will never be acknowledged (or was
         *  never sent): that epoch, and every later one, never commits. */
        void (*lost)(aagw_unify_state_t *st, unsigned ep);
        /**
         * The end of a batch, or a pass of the stage's loop.  The open
         * epoch reached the @p n input positions in @p reached; with
         * @p seal it is closed (unless nothing happened in it).  Then
         * every epoch whose records are all acknowledged is stored, in
         * order (their number in @p *committed), and after a seal the
         * next epoch is opened.
         * @returns 1 when an epoch is open for the next batch; 0 while
         * the next epoch's slot is still taken (poll for delivery
         * reports, call again with no positions and no seal); -1 with
         * @p errstr (the store failed).
         */
        int (*settle)(aagw_unify_state_t          *st,
                      const struct aagw_unify_pos *reached, size_t n, bool seal,
                      unsigned *committed, char *errstr, size_t errstr_size);

        /* -------------------- outside the batch path ------------------ */

        /** Register output @p topic with @p nparts partitions.  @returns
         *  its number for acked(), or -1 (memory). */
        int (*output)(aagw_unify_state_t *st, const char *topic,
                      int32_t nparts);
        /** The stored position of an input (@p output false) or output
         *  partition.  @returns 0 with @p next, 1 if none is stored, -1
         *  with @p errstr. */
        int (*pos)(aagw_unify_state_t *st, bool output, const char *topic,
                   int32_t part, int64_t *next, char *errstr,
                   size_t errstr_size);
        /** Fold in one record found in the output at start (delivered by
         *  a run whose epoch never committed), described as it was
         *  decided; its input coordinates make decide() call that input
         *  record REPLAYED.  Stored at the next fold_commit(). */
        int (*fold)(aagw_unify_state_t *st, struct aagw_unify_rec *r,
                    int64_t now_ms, char *errstr, size_t errstr_size);
        /** Output @p topic [@p part] was scanned up to @p next. */
        void (*fold_out)(aagw_unify_state_t *st, const char *topic,
                         int32_t part, int64_t next);
        /** Store what was folded or restored: if it is large, or at the
         *  @p end of an output. */
        int (*fold_commit)(aagw_unify_state_t *st, bool end, char *errstr,
                           size_t errstr_size);
        /** Scale-out: fold in one decision (r->key as decided) restored
         *  from a changelog, decided at @p time_ms; additive. */
        int (*restore)(aagw_unify_state_t *st, const struct aagw_unify_rec *r,
                       int64_t time_ms, char *errstr, size_t errstr_size);
        /** Scale-out: forget every decision not stored yet and open a
         *  fresh epoch.  @returns 0, or -1 (memory). */
        int (*drop)(aagw_unify_state_t *st);
        /** Scale-out: hand every audit entry made from now on to @p fn
         *  as well (NULL: stop).  May be NULL: the state keeps no audit
         *  log. */
        void (*audit_out)(aagw_unify_state_t *st, aagw_unify_audit_fn *fn,
                          void *opaque);
};

#ifdef __cplusplus
}
#endif
#endif /* AAGW_UNIFY_CONTRACT_H */
