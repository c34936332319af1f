/*
 * replicator/site_log.c: what a scale-out site's unify stage decided,
 * read back from the site's cluster for `aagw audit`: the changelogs
 * (ids, winners, positions) and the audit topic of every unified topic,
 * whichever member wrote them.  Read committed, so a decision is seen
 * exactly when its transaction committed, as the members see it.
 */
#include "replicator_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void changelog_to_rec(const struct changelog_rec *c, struct aagw_unify_rec *r,
                      struct aagw_prov *pv) {
        memset(r, 0, sizeof(*r));
        r->mode = c->kind == CHANGELOG_WIN ? AAGW_UNIFY_LWW : AAGW_UNIFY_DEDUP;
        memcpy(r->key, c->key, 16);
        size_t ol = strnlen(c->origin, sizeof(pv->origin) - 1);
        memcpy(pv->origin, c->origin, ol);
        pv->origin[ol] = '\0';
        pv->hlc        = c->hlc;
        pv->id_len     = c->id_len;
        memcpy(pv->id, c->id, c->id_len);
        r->prov      = pv;
        r->topic     = c->topic;
        r->partition = c->partition;
        r->offset    = c->offset;
        r->tombstone = c->tombstone;
}

enum part_kind { PART_STATE, PART_IDS, PART_AUDIT };

struct part_read {
        const struct aagw_site_log_read *q;
        enum part_kind                   kind;
        const char                      *topic;
        struct aagw_prov                 pv;
        int64_t                          skipped;
        bool                             failed;
        char                             err[512];
};

static bool part_rec(void *arg, const rd_kafka_message_t *m) {
        struct part_read                *pr = arg;
        const struct aagw_site_log_read *q  = pr->q;
        struct changelog_rec             c;
        struct aagw_unify_rec            r;
        int                              rc;

        if (pr->kind == PART_AUDIT) {
                rc = q->audit(q->opaque, m->payload, m->len);
        } else if (!changelog_decode(m->key, m->key_len, m->payload, m->len,
                                     &c)) {
                pr->skipped++;
                return true;
        } else if (c.kind == CHANGELOG_RPOS) {
                rc = 0; /* a router's position: no decision's */
        } else if (c.kind == CHANGELOG_POS) {
                rc = q->position(q->opaque, c.topic, c.partition, c.offset);
        } else {
                changelog_to_rec(&c, &r, &pr->pv);
                rc = q->decision(q->opaque, &r, c.time_ms);
        }
        if (rc) {
                pr->failed = true;
                snprintf(pr->err, sizeof(pr->err),
                         "%s [%d] offset %" PRId64 ": refused by the reader",
                         pr->topic, (int)m->partition, m->offset);
                return false;
        }
        return true;
}

/* Every partition of 'topic' (of 'parts'), from its start to its end. */
static int read_topic(const struct aagw_site_log_read *q, const char *topic,
                      int parts, enum part_kind kind, int64_t *records,
                      char *errstr, size_t errstr_size) {
        for (int32_t p = 0; p < parts; p++) {
                int64_t             lo, hi, n = 0;
                rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
                    q->probe, topic, p, &lo, &hi, q->timeout_ms);
                if (err) {
                        snprintf(errstr, errstr_size,
                                 "reading the end of %s [%d]: %s", topic,
                                 (int)p, rd_kafka_err2str(err));
                        return -1;
                }
                if (lo >= hi)
                        continue;
                struct part_read pr = {.q = q, .kind = kind, .topic = topic};
                struct aagw_kafka_range r = {.topic      = topic,
                                             .partition  = p,
                                             .from       = lo,
                                             .to         = hi,
                                             .timeout_ms = q->timeout_ms,
                                             .progress   = true,
                                             .stop       = q->stop,
                                             .fn         = part_rec,
                                             .arg        = &pr};
                aagw_kafka_range_end_t  end =
                    aagw_kafka_read_range(q->reader, &r, &n);
                *records += n;
                if (pr.failed) {
                        snprintf(errstr, errstr_size, "%s", pr.err);
                        return -1;
                }
                if (end != AAGW_RANGE_DONE) {
                        snprintf(errstr, errstr_size,
                                 "reading %s [%d] from %" PRId64 " to %" PRId64
                                 ": %s",
                                 topic, (int)p, lo, hi,
                                 end == AAGW_RANGE_TIMEOUT
                                     ? "no progress within the timeout (a "
                                       "transaction of a member that died "
                                       "still open: it ends at "
                                       "scale_out.transaction_timeout)"
                                 : end == AAGW_RANGE_STOPPED
                                     ? "stopped"
                                     : "the partition could not be read");
                        return -1;
                }
                if (pr.skipped)
                        aagw_log(AAGW_LOG_WARN, "AUDIT",
                                 "%s [%d]: %" PRId64
                                 " records that are not changelog records "
                                 "of this version skipped",
                                 topic, (int)p, pr.skipped);
        }
        return 0;
}

aagw_err_t aagw_site_log_read(const struct aagw_site_log_read *q,
                              size_t *ntopics, int64_t *records, char *errstr,
                              size_t errstr_size) {
        const struct rd_kafka_metadata *md = NULL;
        char                            prefix[AAGW_TOPIC_MAX + 1];
        size_t                          plen;
        aagw_err_t                      rc = AAGW_OK;
        rd_kafka_resp_err_t             err;

        *ntopics = 0;
        *records = 0;
        plen     = (size_t)snprintf(prefix, sizeof(prefix), "aagw.%s.%s.audit.",
                                    q->gateway_id, q->site);
        err      = aagw_kafka_metadata(q->probe, true, NULL, &md, q->timeout_ms,
                                       q->stop);
        if (err) {
                snprintf(errstr, errstr_size, "metadata of cluster %s: %s",
                         q->site, rd_kafka_err2str(err));
                return AAGW_ERR_KAFKA;
        }
        for (int i = 0; i < md->topic_cnt && !rc; i++) {
                const char *t = md->topics[i].topic;
                char        state[3 * AAGW_TOPIC_MAX], ids[3 * AAGW_TOPIC_MAX];
                int         n;
                if (strncmp(t, prefix, plen) || !t[plen])
                        continue;
                (*ntopics)++;
                snprintf(state, sizeof(state), "aagw.%s.%s.state.%s",
                         q->gateway_id, q->site, t + plen);
                snprintf(ids, sizeof(ids), "aagw.%s.%s.ids.%s", q->gateway_id,
                         q->site, t + plen);
                /* Decisions before the audit entries that name them. */
                if (((n = replicator_md_partitions(md, state)) > 0 &&
                     read_topic(q, state, n, PART_STATE, records, errstr,
                                errstr_size)) ||
                    ((n = replicator_md_partitions(md, ids)) > 0 &&
                     read_topic(q, ids, n, PART_IDS, records, errstr,
                                errstr_size)) ||
                    read_topic(q, t, md->topics[i].partition_cnt, PART_AUDIT,
                               records, errstr, errstr_size))
                        rc = AAGW_ERR_KAFKA;
        }
        rd_kafka_metadata_destroy(md);
        return rc;
}
