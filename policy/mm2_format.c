/* policy/mm2_format.c: MirrorMaker 2's internal record formats, and exact offset
 * translation from offset-sync points.
 *
 * The formats are Kafka protocol structs without any framing: a STRING is
 * a big-endian INT16 byte count followed by the bytes, integers are
 * big-endian.  Heartbeat and checkpoint values start with a version INT16
 * (0); offset-sync values do not.  Encoding never writes past the buffer
 * and returns the length it needs, so callers size buffers by asking.
 *
 * Translation.  The replicator writes a sync point whenever the delta
 * between a source offset and its copy's target offset changes, so between
 * two points every copy keeps the first point's delta, and a run of
 * skipped records can only sit at the end of a segment (the next copy
 * would change the delta and start a new one).  Hence: offset = first
 * point + distance, capped at the next point's downstream offset. */
#include "policy_int.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------- WRITER -------------------------------- */

struct wbuf {
        unsigned char *p;
        size_t         size, len;
};

static void put_bytes(struct wbuf *w, const void *b, size_t n) {
        if (w->len < w->size) {
                size_t room = w->size - w->len;
                memcpy(w->p + w->len, b, n < room ? n : room);
        }
        w->len += n;
}

static void put_be(struct wbuf *w, uint64_t v, int bytes) {
        unsigned char b[8];
        for (int i = 0; i < bytes; i++)
                b[i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
        put_bytes(w, b, (size_t)bytes);
}

/* A STRING; longer than INT16 allows is cut (never happens for the names
 * we write: topics are <= 249 bytes, aliases <= 64, groups we keep <=
 * 255). */
static void put_str(struct wbuf *w, const char *s) {
        size_t n = s ? strlen(s) : 0;
        if (n > INT16_MAX)
                n = INT16_MAX;
        put_be(w, n, 2);
        put_bytes(w, s, n);
}

/* ------------------------------- READER -------------------------------- */

struct rbuf {
        const unsigned char *p;
        size_t               len, pos;
        bool                 bad;
};

static uint64_t get_be(struct rbuf *r, int bytes) {
        uint64_t v = 0;
        if (r->bad || r->len - r->pos < (size_t)bytes) {
                r->bad = true;
                return 0;
        }
        for (int i = 0; i < bytes; i++)
                v = v << 8 | r->p[r->pos++];
        return v;
}

/* A STRING into 'dst' (NUL-terminated); too long for 'size' or a null
 * (negative) length is bad input. */
static void get_str(struct rbuf *r, char *dst, size_t size) {
        int16_t n = (int16_t)get_be(r, 2);
        if (r->bad || n < 0 || (size_t)n >= size ||
            r->len - r->pos < (size_t)n) {
                r->bad = true;
                return;
        }
        memcpy(dst, r->p + r->pos, (size_t)n);
        dst[n] = '\0';
        r->pos += (size_t)n;
}

static bool done(const struct rbuf *r) {
        return !r->bad && r->pos == r->len;
}

/* ------------------------------ HEARTBEATS ----------------------------- */

size_t aagw_mm2_heartbeat_key(const char *source, const char *target, void *buf,
                              size_t size) {
        struct wbuf w = {buf, size, 0};
        put_str(&w, source);
        put_str(&w, target);
        return w.len;
}

size_t aagw_mm2_heartbeat_value(int64_t ts, void *buf, size_t size) {
        struct wbuf w = {buf, size, 0};
        put_be(&w, 0, 2);
        put_be(&w, (uint64_t)ts, 8);
        return w.len;
}

bool aagw_mm2_heartbeat_decode(const void *key, size_t key_len, const void *val,
                               size_t val_len, struct aagw_mm2_heartbeat *out) {
        struct rbuf k = {key, key_len, 0, !key};
        struct rbuf v = {val, val_len, 0, !val};

        get_str(&k, out->source, sizeof(out->source));
        get_str(&k, out->target, sizeof(out->target));
        if (get_be(&v, 2) != 0)
                return false; /* a version we do not know */
        out->timestamp_ms = (int64_t)get_be(&v, 8);
        return done(&k) && done(&v);
}

/* ----------------------------- OFFSET SYNCS ---------------------------- */

size_t aagw_mm2_sync_key(const char *topic, int32_t partition, void *buf,
                         size_t size) {
        struct wbuf w = {buf, size, 0};
        put_str(&w, topic);
        put_be(&w, (uint32_t)partition, 4);
        return w.len;
}

size_t aagw_mm2_sync_value(int64_t upstream, int64_t downstream, void *buf,
                           size_t size) {
        struct wbuf w = {buf, size, 0};
        put_be(&w, (uint64_t)upstream, 8);
        put_be(&w, (uint64_t)downstream, 8);
        return w.len;
}

bool aagw_mm2_sync_decode(const void *key, size_t key_len, const void *val,
                          size_t val_len, struct aagw_mm2_sync *out) {
        struct rbuf k = {key, key_len, 0, !key};
        struct rbuf v = {val, val_len, 0, !val};

        get_str(&k, out->topic, sizeof(out->topic));
        out->partition  = (int32_t)get_be(&k, 4);
        out->upstream   = (int64_t)get_be(&v, 8);
        out->downstream = (int64_t)get_be(&v, 8);
        return done(&k) && done(&v) && out->partition >= 0 &&
               out->upstream >= 0 && out->downstream >= 0;
}

/* ----------------------------- CHECKPOINTS ----------------------------- */

size_t aagw_mm2_checkpoint_key(const char *group, const char *topic,
                               int32_t partition, void *buf, size_t size) {
        struct wbuf w = {buf, size, 0};
        put_str(&w, group);
        put_str(&w, topic);
        put_be(&w, (uint32_t)partition, 4);
        return w.len;
}

size_t aagw_mm2_checkpoint_value(int64_t upstream, int64_t downstream,
                                 const char *metadata, void *buf, size_t size) {
        struct wbuf w = {buf, size, 0};
        put_be(&w, 0, 2);
        put_be(&w, (uint64_t)upstream, 8);
        put_be(&w, (uint64_t)downstream, 8);
        put_str(&w, metadata ? metadata : "");
        return w.len;
}

bool aagw_mm2_checkpoint_decode(const void *key, size_t key_len,
                                const void *val, size_t val_len,
                                struct aagw_mm2_checkpoint *out) {
        struct rbuf k = {key, key_len, 0, !key};
        struct rbuf v = {val, val_len, 0, !val};

        get_str(&k, out->group, sizeof(out->group));
        get_str(&k, out->topic, sizeof(out->topic));
        out->partition = (int32_t)get_be(&k, 4);
        if (get_be(&v, 2) != 0)
                return false;
        out->upstream   = (int64_t)get_be(&v, 8);
        out->downstream = (int64_t)get_be(&v, 8);
        get_str(&v, out->metadata, sizeof(out->metadata));
        return done(&k) && done(&v) && out->partition >= 0;
}

/* ------------------------------ TOPIC NAMES ---------------------------- */

/* MM2 builds both names from its separator: "mm2-offset-syncs" SEP
 * cluster SEP "internal" and source SEP "checkpoints" SEP "internal". */
aagw_err_t aagw_mm2_offset_syncs_topic_sep(const char *sep,
                                           const char *cluster, char *buf,
                                           size_t size) {
        if (!sep)
                sep = ".";
        int n = snprintf(buf, size, "mm2-offset-syncs%s%s%sinternal", sep,
                         cluster, sep);
        return n < 0 || (size_t)n >= size || n > AAGW_TOPIC_MAX ? AAGW_ERR_INVAL
                                                                : AAGW_OK;
}

aagw_err_t aagw_mm2_checkpoints_topic_sep(const char *sep, const char *source,
                                          char *buf, size_t size) {
        if (!sep)
                sep = ".";
        int n = snprintf(buf, size, "%s%scheckpoints%sinternal", source, sep,
                         sep);
        return n < 0 || (size_t)n >= size || n > AAGW_TOPIC_MAX ? AAGW_ERR_INVAL
                                                                : AAGW_OK;
}

aagw_err_t aagw_mm2_offset_syncs_topic(const char *cluster, char *buf,
                                       size_t size) {
        return aagw_mm2_offset_syncs_topic_sep(".", cluster, buf, size);
}

aagw_err_t aagw_mm2_checkpoints_topic(const char *source, char *buf,
                                      size_t size) {
        return aagw_mm2_checkpoints_topic_sep(".", source, buf, size);
}

/* ------------------------------ TRANSLATION ---------------------------- */

bool aagw_mm2_points_add(struct aagw_mm2_point *pts, size_t *n, size_t cap,
                         struct aagw_mm2_point p) {
        size_t i;

        if (!cap)
                return false;
        if (*n && p.upstream < pts[*n - 1].upstream) {
                /* Offsets went backwards: the partition was deleted and
                 * recreated (or reset).  Old points describe another log. */
                pts[0] = p;
                *n     = 1;
                return true;
        }
        if (*n && p.upstream == pts[*n - 1].upstream) {
                /* Written again after a restart: the newer one wins, but
                 * a lossy mark is kept (the gap it covers is still there). */
                p.lossy |= pts[*n - 1].lossy;
                pts[*n - 1] = p;
                return false;
        }
        if (*n == cap) {
                memmove(pts, pts + 1, (cap - 1) * sizeof(*pts));
                (*n)--;
        }
        i      = (*n)++;
        pts[i] = p;
        return false;
}

/* The common start of a translation of 'pos' over 'n' points: 'out'
 * cleared; false (with the reason in 'out') if there is nothing to
 * translate. */
static bool xlate_begin(size_t n, int64_t pos, struct aagw_mm2_xlate *out) {
        out->offset = -1;
        out->exact  = false;
        out->why    = "";
        if (pos < 0) {
                out->why = "the group has no committed offset here";
                return false;
        }
        if (!n) {
                out->why = "no offset-sync for this partition (not replicated "
                           "yet, or offset-syncs not readable)";
                return false;
        }
        return true;
}

/* How many of the points (in order) have their upstream offset, or with
 * 'downstream' their downstream one, at or below 'v'. */
static size_t points_at_or_below(const struct aagw_mm2_point *pts, size_t n,
                                 int64_t v, bool downstream) {
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if ((downstream ? pts[mid].downstream : pts[mid].upstream) <=
                    v)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

void aagw_mm2_translate(const struct aagw_mm2_point *pts, size_t n,
                        int64_t committed, int64_t repl_pos,
                        struct aagw_mm2_xlate *out) {
        if (!xlate_begin(n, committed, out))
                return;
        /* The last point with upstream <= committed. */
        size_t lo = points_at_or_below(pts, n, committed, false);
        if (lo == 0) {
                out->offset = pts[0].downstream;
                out->why    = "the committed offset is older than the first "
                              "offset-sync (before replication started, or "
                              "the syncs were compacted away)";
                return;
        }
        const struct aagw_mm2_point *b = &pts[lo - 1];
        out->offset = b->downstream + (committed - b->upstream);
        if (committed == b->upstream) {
                out->exact = true;
                return;
        }
        if (lo < n) {
                const struct aagw_mm2_point *nx = &pts[lo];
                if (out->offset > nx->downstream)
                        out->offset = nx->downstream;
                out->exact = !nx->lossy;
                if (!out->exact)
                        out->why = "offset-syncs in this range were "
                                   "suppressed by the rate bound";
                return;
        }
        out->exact = repl_pos >= committed;
        if (!out->exact)
                out->why = "replication has not reached the committed "
                           "offset yet";
}

void aagw_mm2_translate_back(const struct aagw_mm2_point *pts, size_t n,
                             int64_t position, int64_t repl_pos,
                             struct aagw_mm2_xlate *out, int64_t *reread) {
        *reread = -1;
        if (!xlate_begin(n, position, out))
                return;
        /* The last point with downstream <= position (downstream offsets
         * grow with upstream ones: copies are appended in order).  Of
         * several at the same downstream offset (a skipped run between
         * them) the last one, past the run. */
        size_t lo = points_at_or_below(pts, n, position, true);
        if (lo == 0) {
                /* The group stopped before the first copy we know of: it
                 * read none of the copies, so none is read twice. */
                out->offset = pts[0].upstream;
                *reread     = 0;
                out->why    = "the position is older than the first "
                              "offset-sync (before replication started, or "
                              "the syncs were compacted away)";
                return;
        }
        const struct aagw_mm2_point *b = &pts[lo - 1];
        out->offset = b->upstream + (position - b->downstream);
        if (position == b->downstream) {
                out->exact = true;
                *reread    = 0;
                return;
        }
        if (lo < n) {
                const struct aagw_mm2_point *nx = &pts[lo];
                /* More copies than source records between the two (a
                 * copy written twice): the group read all of the run. */
                if (out->offset > nx->upstream)
                        out->offset = nx->upstream;
                out->exact = !nx->lossy;
                /* Suppressed syncs: records skipped somewhere in the
                 * segment put the answer between the lowest one (none
                 * skipped before the position) and the highest (all of
                 * them). */
                int64_t top = nx->upstream - (nx->downstream - position);
                *reread =
                    out->exact || top < out->offset ? 0 : top - out->offset;
                if (!out->exact)
                        out->why = "offset-syncs in this range were "
                                   "suppressed by the rate bound";
                return;
        }
        /* Past the last point the copies keep its delta as long as the
         * flow wrote no sync we have not read yet: it has, once its own
         * position is at or past the answer (as in aagw_mm2_translate()). */
        out->exact = repl_pos >= out->offset;
        *reread    = out->exact ? 0 : -1;
        if (!out->exact)
                out->why = repl_pos < 0
                               ? "past the last offset-sync, and the copying "
                                 "flow's position is not known"
                               : "replication has not reached the position "
                                 "yet";
}

/* Leg 2 of a composed translation when aagw_mm2_translate() is not exact:
 * the lowest target offset origin offset 'o' can have.  Between point
 * 'b' and the next one (or past the last), each origin record after b
 * was either copied (one target offset each, in order) or skipped, so the
 * copy of 'o' is at least b's downstream and at least the next point's
 * downstream minus the origin records between 'o' and that point.  The
 * highest is the delta's answer; a consumer resuming at the lowest reads
 * at most their difference again.  Returns false (nothing bounds it)
 * before the first point or without points. */
static bool fwd_lowest(const struct aagw_mm2_point *pts, size_t n, int64_t o,
                       int64_t high, int64_t *low, int64_t *slack) {
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (pts[mid].upstream <= o)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo == 0 || high < 0)
                return false;
        const struct aagw_mm2_point *b = &pts[lo - 1];
        *low                           = b->downstream;
        if (lo < n) {
                const struct aagw_mm2_point *nx = &pts[lo];
                int64_t floor = nx->downstream - (nx->upstream - o);
                if (floor > *low)
                        *low = floor;
        }
        if (*low > high)
                *low = high;
        *slack = high - *low;
        return true;
}

void aagw_mm2_translate_via(const struct aagw_mm2_point *back, size_t nback,
                            int64_t                      back_repl_pos,
                            const struct aagw_mm2_point *fwd, size_t nfwd,
                            int64_t fwd_repl_pos, int64_t position,
                            struct aagw_mm2_xlate *out,
                            struct aagw_mm2_via   *via) {
        int64_t r1, low, slack;

        via->origin = -1;
        via->reread = -1;
        via->fwd    = (struct aagw_mm2_xlate){-1, false, ""};
        aagw_mm2_translate_back(back, nback, position, back_repl_pos,
                                &via->back, &r1);
        *out = via->back;
        if (via->back.offset < 0) {
                out->offset = -1;
                return;
        }
        via->origin = via->back.offset;
        aagw_mm2_translate(fwd, nfwd, via->origin, fwd_repl_pos, &via->fwd);
        out->offset = via->fwd.offset;
        out->exact  = via->back.exact && via->fwd.exact;
        out->why    = !via->back.exact ? via->back.why : via->fwd.why;
        if (via->fwd.exact) {
                via->reread = r1;
                return;
        }
        /* Leg 2 is not exact: resume at the lowest copy offset (no
         * record skipped), if anything bounds it. */
        if (!fwd_lowest(fwd, nfwd, via->origin, via->fwd.offset, &low,
                        &slack)) {
                via->reread = -1;
                return;
        }
        out->offset = low;
        via->reread = r1 < 0 ? -1 : r1 + slack;
}
