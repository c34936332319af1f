/*
 * gateway/admin.c: the admin HTTP endpoint (libmicrohttpd).
 *
 *   GET  /                        the status page (HTML, inline JS and CSS,
 *                                 drawn from /status once a second)
 *   GET  /healthz                 200 "ok" while no flow has failed and
 *                                 every cluster answers, else 503
 *   GET  /status                  JSON: gateway, flows, partitions, counters
 *   GET  /status?format=text      the same as sectioned key:value text
 *                                 (what `aagw status` prints)
 *   GET  /metrics                 Prometheus text format
 *   POST /flows/SRC-DST/pause     stop consuming (in-flight records finish)
 *   POST /flows/SRC-DST/resume
 *
 * libmicrohttpd runs its own thread; handlers only read flow counters
 * (atomics) and flip pause flags, so they never block the data path.  With
 * admin.token set every request needs "Authorization: Bearer <token>",
 * compared in constant time, except GET / itself: the page is a fixed
 * file with no data in it, and a browser cannot send the header when it
 * navigates.  The page takes the token from the URL fragment (/#token=T,
 * which never leaves the browser) and sends it with its own requests.
 * Listening on a non-loopback address without a token is refused by
 * config validation.
 *
 * Idle connections cannot blind it.  Anyone who can reach the port can
 * open connections without sending anything (no token needed for that);
 * with a plain connection limit, 64 of them kept every real request out
 * until they timed out.  So connections are tracked: one that is not
 * being answered (it sent nothing yet, or only part of a request, head
 * or body, or it sits between keep-alive requests) is "idle", and when a
 * new connection would make more than ADMIN_IDLE_MAX idle ones, the
 * oldest idle one is closed (shutdown(2) on its socket; libmicrohttpd
 * then sees the end and drops it).  A real client sends its request
 * right after connecting, so it is the newest, never the oldest, and an
 * idle flood only ever evicts itself.  The hard limit (ADMIN_CONN_MAX)
 * sits well above ADMIN_IDLE_MAX, so it is reached only by requests being
 * answered; an inactivity timeout of ADMIN_TIMEOUT_S closes what is left.
 * All of this runs in libmicrohttpd's one polling thread (no locks).
 *
 * TLS (admin.tls.*): with a certificate and key the endpoint speaks
 * HTTPS only (libmicrohttpd over GnuTLS; the files are read and checked
 * at start, admin_tls.c).  With admin.tls.client_ca the TLS handshake
 * requires a client certificate that chains to it: each new session is
 * switched from libmicrohttpd's "request" to "require" and GnuTLS
 * verifies the certificate during the handshake, so a client without one
 * never gets to send a request.  The handler checks the verification
 * again before answering (fail closed should a libmicrohttpd release
 * start sessions later than the connection notification).  The bearer
 * token applies on top.
 *
 * Health listener (admin.health_listen): a second daemon on a loopback
 * socket, plain HTTP, answering GET /healthz and /metrics only, with
 * neither token nor certificate, for probes on the same host.  It has its
 * own thread, so each listener keeps its own connection bookkeeping.
 */
#include "admin_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <json-c/json.h>
#include <microhttpd.h>

#include "aagw_build.h"
#include "status_page.h" /* gw_status_page[], from status_page.html */

/* Idle connections beyond which the oldest is closed; the hard
 * connection limit; the inactivity timeout.  Measured: behind 400 open
 * idle connections (280 with a whole head and part of a body, 100
 * silent, 20 with half a head) curl got /healthz in 6-8 ms (28-230 ms on
 * a loaded machine), its own start included.  With the former
 * 64-connection limit alone it was refused until they timed out; with
 * body senders counted as busy, 260 of them delayed it 4.8 s. */
#define ADMIN_IDLE_MAX  32u
#define ADMIN_CONN_MAX  256u
#define ADMIN_TIMEOUT_S 5u

/* One open connection; on the idle list while not being answered. */
struct aconn {
        struct aconn          *prev, *next;
        struct MHD_Connection *c;
        bool                   idle;
};

/* One libmicrohttpd daemon: the endpoint, or the health listener.
 * Everything but 'a' is touched by its daemon's thread only. */
struct listener {
        struct gw_admin   *a;
        struct MHD_Daemon *mhd;
        bool               health_only;
        char               addr[300];
        struct aconn      *idle_head, *idle_tail; /* oldest first */
        unsigned           nidle;
        uint64_t           evicted;
        int64_t            log_ms;      /* libmicrohttpd's last line */
        unsigned           log_dropped; /* lines left out since */
};

struct gw_admin {
        struct listener       main, health;
        struct gw_admin_view  view;
        char                 *token;
        bool                  tls, client_certs;
};

/* ------------------------------------------------------------ BUFFERS --- */

void gw_sb_printf(struct sbuf *b, const char *fmt, ...) {
        va_list ap;
        for (;;) {
                size_t room = b->cap - b->len;
                va_start(ap, fmt);
                int n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
                va_end(ap);
                if (n < 0)
                        return;
                if ((size_t)n < room) {
                        b->len += (size_t)n;
                        return;
                }
                size_t ncap = (b->cap + (size_t)n + 1) * 2;
                char  *np   = realloc(b->p, ncap);
                if (!np)
                        return;
                b->p   = np;
                b->cap = ncap;
        }
}

/* ------------------------------------------------------------ HELPERS --- */

static const char *state_of(const aagw_flow_t *f) {
        return aagw_flow_state_name(aagw_flow_state(f));
}

static uint64_t sum(const uint64_t *v, size_t n) {
        uint64_t s = 0;
        for (size_t i = 0; i < n; i++)
                s += v[i];
        return s;
}

/* Constant-time comparison, so the token cannot be guessed by timing. */
static bool token_ok(const struct gw_admin *a, struct MHD_Connection *c) {
        const char *h;
        size_t      tl, hl;
        unsigned    diff = 0;

        if (!a->token)
                return true;
        h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                        MHD_HTTP_HEADER_AUTHORIZATION);
        if (!h || strncmp(h, "Bearer ", 7))
                return false;
        h += 7;
        tl = strlen(a->token);
        hl = strlen(h);
        for (size_t i = 0; i < tl; i++)
                diff |= (unsigned)(a->token[i] ^ (i < hl ? h[i] : 0));
        return diff == 0 && hl == tl;
}

/* Queue a response.  'extra' is NULL or a NULL-terminated list of header
 * name, value pairs. */
static enum MHD_Result reply_hdrs(struct MHD_Connection *c, unsigned status,
                                  const char *ctype, char *body, size_t len,
                                  enum MHD_ResponseMemoryMode mode,
                                  const char *const *extra) {
        struct MHD_Response *r =
            MHD_create_response_from_buffer(len, body, mode);
        enum MHD_Result rc;

        if (!r) {
                if (mode == MHD_RESPMEM_MUST_FREE)
                        free(body);
                return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
        if (status == MHD_HTTP_UNAUTHORIZED)
                MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                        "Bearer");
        for (size_t i = 0; extra && extra[i]; i += 2)
                MHD_add_response_header(r, extra[i], extra[i + 1]);
        rc = MHD_queue_response(c, status, r);
        MHD_destroy_response(r);
        return rc;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status,
                             const char *ctype, char *body, size_t len,
                             bool take) {
        return reply_hdrs(c, status, ctype, body, len,
                          take ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_MUST_COPY,
                          NULL);
}

/* The status page: the embedded file, with a policy that allows only its
 * own inline script and style and requests back to this endpoint. */
static enum MHD_Result reply_page(struct MHD_Connection *c) {
        static const char *const hdrs[] = {
            "Content-Security-Policy",
            "default-src 'none'; script-src 'unsafe-inline'; "
            "style-src 'unsafe-inline'; connect-src 'self'; img-src data:; "
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            "Referrer-Policy", "no-referrer",
            NULL};
        return reply_hdrs(c, MHD_HTTP_OK, "text/html; charset=utf-8",
                          (char *)gw_status_page, GW_STATUS_PAGE_LEN,
                          MHD_RESPMEM_PERSISTENT, hdrs);
}

static enum MHD_Result reply_405(struct MHD_Connection *c, const char *allow,
                                 const char *text) {
        const char *const hdrs[] = {"Allow", allow, NULL};
        return reply_hdrs(c, MHD_HTTP_METHOD_NOT_ALLOWED,
                          "text/plain; charset=utf-8", (char *)text,
                          strlen(text), MHD_RESPMEM_MUST_COPY, hdrs);
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status,
                                  const char *text) {
        return reply(c, status, "text/plain; charset=utf-8", (char *)text,
                     strlen(text), false);
}

/* ------------------------------------------------------------- STATUS --- */

/* "source" and "target" of a flow named "east->west". */
static void add_ends(json_object *o, const char *name) {
        const char *arrow = strstr(name, "->");

        if (!arrow)
                return;
        json_object_object_add(
            o, "source",
            json_object_new_string_len(name, (int)(arrow - name)));
        json_object_object_add(o, "target", json_object_new_string(arrow + 2));
}

/* Upper bound of the histogram bucket holding the 99th percentile: what
 * Prometheus' histogram_quantile() would land in, without interpolation.
 * 0 before the first sample; the last finite bound for the +Inf bucket. */
static int64_t latency_p99(const struct aagw_flow_stats *st) {
        uint64_t need, cum = 0;

        if (!st->lat_count)
                return 0;
        need = st->lat_count - st->lat_count / 100;
        for (int k = 0; k < AAGW_LAT_BUCKETS - 1; k++) {
                cum += st->lat_buckets[k];
                if (cum >= need)
                        return aagw_lat_bounds_ms[k];
        }
        return aagw_lat_bounds_ms[AAGW_LAT_BUCKETS - 2];
}

/* Every cluster alias at either end of a flow, in order of appearance. */
static json_object *sites_json(const struct gw_admin *a) {
        json_object *arr = json_object_new_array();

        for (size_t i = 0; i < a->view.nflows; i++) {
                const char *n     = aagw_flow_name(a->view.flows[i]);
                const char *arrow = strstr(n, "->");
                const char *end[2][2];

                if (!arrow)
                        continue;
                end[0][0] = n;
                end[0][1] = arrow;
                end[1][0] = arrow + 2;
                end[1][1] = arrow + 2 + strlen(arrow + 2);
                for (int e = 0; e < 2; e++) {
                        size_t len  = (size_t)(end[e][1] - end[e][0]);
                        bool   seen = false;
                        for (size_t j = 0; j < json_object_array_length(arr);
                             j++) {
                                const char *s = json_object_get_string(
                                    json_object_array_get_idx(arr, j));
                                if (strlen(s) == len &&
                                    !strncmp(s, end[e][0], len))
                                        seen = true;
                        }
                        if (!seen)
                                json_object_array_add(
                                    arr, json_object_new_string_len(
                                             end[e][0], (int)len));
                }
        }
        return arr;
}

/* Scale-out: this member, its ownership and transactions, and the
 * source partitions it copies, per topic ("scale_out": null when off). */
static void add_scale_out(json_object *o, const aagw_flow_t *f,
                          const struct aagw_flow_stats *st) {
        struct aagw_flow_part_stats *ps;
        json_object                 *s, *owned;
        size_t                       n;

        if (!st->member) {
                json_object_object_add(o, "scale_out", NULL);
                return;
        }
        s = json_object_new_object();
        json_object_object_add(s, "member", json_object_new_string(st->member));
        json_object_object_add(s, "work_partitions",
                               json_object_new_int(st->work_partitions));
        json_object_object_add(
            s, "rebalances", json_object_new_int64((int64_t)st->rebalances));
        json_object_object_add(
            s, "transactions_committed",
            json_object_new_int64((int64_t)st->txn_committed));
        json_object_object_add(
            s, "transactions_aborted",
            json_object_new_int64((int64_t)st->txn_aborted));
        json_object_object_add(
            s, "transactions_fenced",
            json_object_new_int64((int64_t)st->txn_fenced));
        owned = json_object_new_object();
        n     = aagw_flow_partitions(f, NULL, 0);
        ps    = calloc(n ? n : 1, sizeof(*ps));
        if (ps) {
                n = aagw_flow_partitions(f, ps, n);
                for (size_t i = 0; i < n; i++) {
                        json_object *a;
                        if (!ps[i].assigned)
                                continue;
                        if (!json_object_object_get_ex(owned, ps[i].topic,
                                                       &a)) {
                                a = json_object_new_array();
                                json_object_object_add(owned, ps[i].topic, a);
                        }
                        json_object_array_add(
                            a, json_object_new_int(ps[i].partition));
                }
                free(ps);
        }
        json_object_object_add(s, "owned", owned);
        json_object_object_add(o, "scale_out", s);
}

/* Remote topics (replicator/topics.c): config and ACL sync, and the
 * copies with fewer partitions than their source, with the fix. */
static void add_remote_topics(json_object *o, const aagw_flow_t *f,
                              const struct aagw_flow_stats *st) {
        struct aagw_flow_missing *m;
        size_t                    n = aagw_flow_missing(f, NULL, 0);
        json_object              *a = json_object_new_array();

        json_object_object_add(o, "partitions_missing",
                               json_object_new_int(st->partitions_missing));
        json_object_object_add(
            o, "topic_configs_synced",
            json_object_new_int64((int64_t)st->topic_configs_synced));
        json_object_object_add(
            o, "topic_acls_synced",
            json_object_new_int64((int64_t)st->topic_acls_synced));
        json_object_object_add(
            o, "topic_sync_errors",
            json_object_new_int64((int64_t)st->topic_sync_errors));
        m = calloc(n ? n : 1, sizeof(*m));
        if (m) {
                n = aagw_flow_missing(f, m, n);
                for (size_t i = 0; i < n; i++) {
                        json_object *t = json_object_new_object();
                        json_object_object_add(
                            t, "topic", json_object_new_string(m[i].topic));
                        json_object_object_add(
                            t, "remote", json_object_new_string(m[i].remote));
                        json_object_object_add(
                            t, "source_partitions",
                            json_object_new_int(m[i].source_partitions));
                        json_object_object_add(
                            t, "target_partitions",
                            json_object_new_int(m[i].target_partitions));
                        json_object_object_add(
                            t, "fix", json_object_new_string(m[i].fix));
                        json_object_array_add(a, t);
                }
                free(m);
        }
        json_object_object_add(o, "topics_missing_partitions", a);
}

static json_object *flow_json(const aagw_flow_t *f) {
        struct aagw_flow_stats       st;
        json_object                 *o = json_object_new_object(), *a;
        char                         err[512];
        struct aagw_flow_part_stats *ps;
        size_t                       n;

        aagw_flow_stats(f, &st);
        aagw_flow_error(f, err, sizeof(err));
        json_object_object_add(o, "name", json_object_new_string(aagw_flow_name(f)));
        json_object_object_add(o, "state", json_object_new_string(state_of(f)));
        if (err[0])
                json_object_object_add(o, "error", json_object_new_string(err));
        add_ends(o, aagw_flow_name(f)); /* after name, state: added later */
        json_object_object_add(o, "topics", json_object_new_int(st.topics));
        json_object_object_add(o, "topics_refused",
                               json_object_new_int(st.topics_refused));
        json_object_object_add(o, "partitions",
                               json_object_new_int(st.partitions));
        json_object_object_add(o, "records_in",
                               json_object_new_int64((int64_t)st.records_in));
        json_object_object_add(o, "records_out",
                               json_object_new_int64((int64_t)st.records_out));
        json_object_object_add(o, "bytes_out",
                               json_object_new_int64((int64_t)st.bytes_out));
        json_object_object_add(o, "dead_lettered",
                               json_object_new_int64((int64_t)st.dead_lettered));
        json_object_object_add(o, "diverged",
                               json_object_new_int64((int64_t)st.diverged));
        json_object_object_add(o, "bad_provenance_passed",
                               json_object_new_int64((int64_t)st.bad_passed));
        json_object_object_add(o, "produce_errors",
                               json_object_new_int64((int64_t)st.produce_errors));
        /* unknown (the source does not answer): null, never a stale 0 */
        json_object_object_add(o, "lag", st.lag < 0
                                             ? NULL
                                             : json_object_new_int64(st.lag));
        json_object_object_add(o, "source_reachable",
                               json_object_new_boolean(!st.source_down_ms));
        json_object_object_add(o, "target_reachable",
                               json_object_new_boolean(!st.target_down_ms));
        json_object_object_add(o, "source_down_ms",
                               json_object_new_int64(st.source_down_ms));
        json_object_object_add(o, "target_down_ms",
                               json_object_new_int64(st.target_down_ms));
        json_object_object_add(o, "inflight", json_object_new_int64(st.inflight));
        /* null until measured: the source has not answered yet */
        json_object_object_add(
            o, "source_rtt_ms",
            st.source_rtt_us < 0
                ? NULL
                : json_object_new_double((double)st.source_rtt_us / 1000));
        json_object_object_add(o, "fetch_window_bytes",
                               json_object_new_int64(st.fetch_window_bytes));
        json_object_object_add(o, "fetch_queue_records",
                               json_object_new_int64(st.fetch_queue_records));
        json_object_object_add(o, "fetch_connections",
                               json_object_new_int(st.fetch_connections));
        /* null before the first heartbeat copy is acknowledged */
        json_object_object_add(o, "heartbeat_latency_ms",
                               st.heartbeat_age_ms < 0
                                   ? NULL
                                   : json_object_new_int64(
                                         st.heartbeat_latency_ms));
        json_object_object_add(o, "heartbeat_age_ms",
                               st.heartbeat_age_ms < 0
                                   ? NULL
                                   : json_object_new_int64(st.heartbeat_age_ms));
        json_object_object_add(
            o, "latency_avg_ms",
            json_object_new_int64(st.lat_count ? (int64_t)(st.lat_sum_ms /
                                                           st.lat_count)
                                               : 0));
        json_object_object_add(o, "latency_p99_ms",
                               json_object_new_int64(latency_p99(&st)));
        a = json_object_new_object();
        for (int k = 1; k < AAGW_SKIP_COUNT; k++)
                json_object_object_add(a, aagw_skip_name((aagw_skip_t)k),
                                       json_object_new_int64(
                                           (int64_t)st.skipped[k]));
        json_object_object_add(o, "skipped", a);
        a = json_object_new_object();
        for (int k = 1; k < AAGW_REASON_COUNT; k++)
                if (st.rejected[k])
                        json_object_object_add(
                            a, aagw_reason_name((aagw_reason_t)k),
                            json_object_new_int64((int64_t)st.rejected[k]));
        json_object_object_add(o, "rejected", a);

        n  = aagw_flow_partitions(f, NULL, 0);
        ps = calloc(n ? n : 1, sizeof(*ps));
        a  = json_object_new_array();
        if (ps) {
                n = aagw_flow_partitions(f, ps, n);
                for (size_t i = 0; i < n; i++) {
                        json_object *p = json_object_new_object();
                        json_object_object_add(
                            p, "topic", json_object_new_string(ps[i].topic));
                        json_object_object_add(
                            p, "partition", json_object_new_int(ps[i].partition));
                        json_object_object_add(p, "position",
                                               json_object_new_int64(ps[i].next));
                        json_object_object_add(p, "high",
                                               json_object_new_int64(ps[i].high));
                        json_object_object_add(
                            p, "lag",
                            json_object_new_int64(ps[i].high > ps[i].next &&
                                                          ps[i].next >= 0
                                                      ? ps[i].high - ps[i].next
                                                      : 0));
                        json_object_object_add(
                            p, "records_out",
                            json_object_new_int64((int64_t)ps[i].records_out));
                        json_object_array_add(a, p);
                }
                free(ps);
        }
        json_object_object_add(o, "partitions_detail", a);
        add_scale_out(o, f, &st);
        add_remote_topics(o, f, &st);
        return o;
}

const char *const gw_unify_outcomes[5] = {"accepted", "dropped",
                                          "superseded", "identical",
                                          "rejected"};

void gw_unify_outcome_values(const struct aagw_unify_stats *st,
                             uint64_t v[5]) {
        v[0] = st->accepted;
        v[1] = st->dropped;
        v[2] = st->superseded;
        v[3] = st->identical;
        v[4] = st->rejected;
}

static json_object *unify_json(const aagw_unify_t *u) {
        json_object          *o = json_object_new_object();
        struct aagw_unify_stats st;
        char                  err[512];
        uint64_t              v[5];

        aagw_unify_stats(u, &st);
        aagw_unify_error(u, err, sizeof(err));
        gw_unify_outcome_values(&st, v);
        json_object_object_add(o, "site", json_object_new_string(
                                              aagw_unify_site(u)));
        json_object_object_add(o, "state", json_object_new_string(
                                               aagw_flow_state_name(
                                                   aagw_unify_state(u))));
        if (err[0])
                json_object_object_add(o, "error", json_object_new_string(err));
        json_object_object_add(o, "topics", json_object_new_int(st.topics));
        json_object_object_add(o, "inputs", json_object_new_int(st.inputs));
#define U64(name, val)                                                         \
        json_object_object_add(o, name, json_object_new_int64((int64_t)(val)))
        U64("records_in", st.records_in);
        U64("records_out", st.records_out);
        for (int k = 0; k < 5; k++)
                U64(gw_unify_outcomes[k], v[k]);
        U64("diverged", st.diverged);
        U64("oversized", st.oversized);
        U64("recovered", st.recovered);
        U64("replayed", st.replayed);
        U64("commits", st.commits);
        U64("inflight", st.inflight);
        json_object_object_add(o, "lag", st.lag < 0
                                             ? NULL
                                             : json_object_new_int64(st.lag));
        json_object_object_add(o, "cluster_reachable",
                               json_object_new_boolean(!st.down_ms));
        U64("cluster_down_ms", st.down_ms);
        const char *member = aagw_unify_member(u);
        if (member) {
                char owned[1024];
                aagw_unify_owned(u, owned, sizeof(owned));
                json_object *so = json_object_new_object();
                json_object_object_add(so, "member",
                                       json_object_new_string(member));
                json_object_object_add(so, "owned",
                                       json_object_new_string(owned));
                json_object_object_add(
                    so, "owned_partitions",
                    json_object_new_int(st.owned_partitions));
#define SO64(name, val)                                                        \
        json_object_object_add(so, name, json_object_new_int64((int64_t)(val)))
                SO64("rebalances", st.rebalances);
                SO64("restores", st.restores);
                SO64("restore_ms_total", st.restore_ms_total);
                SO64("restored_records", st.restored_records);
                SO64("routed", st.routed);
                SO64("transactions", st.txn_commits);
                SO64("aborted", st.aborted);
                SO64("fenced", st.fenced);
#undef SO64
                json_object_object_add(o, "scale_out", so);
        }
#undef U64
        return o;
}

/* The site's owner groups as last described (scale-out), heap-copied:
 * NULL and 0 without scale-out or memory. */
static struct aagw_group_info *groups_copy(const struct gw_admin *a,
                                           size_t *n) {
        struct aagw_group_info *g;

        *n = 0;
        if (!a->view.members ||
            !(g = calloc(GW_MAX_FLOWS + 1, sizeof(*g))))
                return NULL;
        *n = aagw_members_get(a->view.members, g, GW_MAX_FLOWS + 1);
        return g;
}

static json_object *members_json(const struct gw_admin *a) {
        size_t                  n;
        struct aagw_group_info *g = groups_copy(a, &n);
        json_object            *o = json_object_new_object();
        json_object            *groups = json_object_new_array();

        json_object_object_add(o, "member",
                               json_object_new_string(a->view.member));
        for (size_t i = 0; i < n; i++) {
                json_object *go = json_object_new_object();
                json_object *ms = json_object_new_array();

                json_object_object_add(go, "stage",
                                       json_object_new_string(g[i].stage));
                json_object_object_add(go, "group",
                                       json_object_new_string(g[i].group));
                json_object_object_add(go, "state",
                                       json_object_new_string(g[i].state));
                if (g[i].error[0])
                        json_object_object_add(
                            go, "error", json_object_new_string(g[i].error));
                json_object_object_add(go, "described_at_ms",
                                       json_object_new_int64(g[i].at_ms));
                for (size_t k = 0; k < g[i].n; k++) {
                        const struct aagw_member_info *m = &g[i].m[k];
                        json_object *mo = json_object_new_object();
                        json_object *ps = json_object_new_array();

                        json_object_object_add(
                            mo, "member", json_object_new_string(m->member));
                        json_object_object_add(mo, "host",
                                               json_object_new_string(m->host));
                        json_object_object_add(
                            mo, "self",
                            json_object_new_boolean(
                                !strcmp(m->member, a->view.member)));
                        for (int32_t p = 0; p < m->nparts; p++)
                                json_object_array_add(
                                    ps, json_object_new_int(m->parts[p]));
                        json_object_object_add(mo, "work_partitions", ps);
                        json_object_array_add(ms, mo);
                }
                json_object_object_add(go, "members", ms);
                json_object_array_add(groups, go);
        }
        json_object_object_add(o, "groups", groups);
        free(g);
        return o;
}

/* The same as sectioned text: a line per member of each group. */
static void members_text(const struct gw_admin *a, struct sbuf *b) {
        size_t                  n;
        struct aagw_group_info *g = groups_copy(a, &n);

        gw_sb_printf(b, "\n# Scale-out\nmember:%s\n", a->view.member);
        for (size_t i = 0; i < n; i++) {
                gw_sb_printf(b, "group:%s %s state:%s members:%zu%s%s\n",
                             g[i].stage, g[i].group, g[i].state, g[i].n,
                             g[i].error[0] ? " error:" : "", g[i].error);
                for (size_t k = 0; k < g[i].n; k++) {
                        const struct aagw_member_info *m = &g[i].m[k];

                        gw_sb_printf(b, "  member:%s%s host:%s work_partitions:",
                                     m->member,
                                     strcmp(m->member, a->view.member)
                                         ? ""
                                         : " (this process)",
                                     m->host);
                        for (int32_t p = 0; p < m->nparts; p++)
                                gw_sb_printf(b, "%s%d", p ? "," : "",
                                             (int)m->parts[p]);
                        gw_sb_printf(b, "%s\n", m->nparts ? "" : "none");
                }
        }
        free(g);
}
/* Whether aagw can log in to each cluster and is allowed what it does
 * there: "access" is "ok" or the cause of the failures seen in the last
 * 30 s (aagw_access_current()). */
static json_object *clusters_json(void) {
        char         aliases[16][AAGW_ALIAS_MAX + 1];
        size_t       n   = aagw_access_aliases(aliases, 16);
        json_object *arr = json_object_new_array();

        for (size_t i = 0; i < n && i < 16; i++) {
                struct aagw_access acc;
                bool         now = aagw_access_current(aliases[i], &acc);
                json_object *c   = json_object_new_object();

                if (!now)
                        aagw_access_get(aliases[i], &acc);
                json_object_object_add(c, "alias",
                                       json_object_new_string(aliases[i]));
                json_object_object_add(
                    c, "access",
                    json_object_new_string(aagw_access_cause_name(
                        now ? acc.cause : AAGW_ACCESS_OK)));
                if (now) {
                        json_object_object_add(
                            c, "problem", json_object_new_string(acc.what));
                        json_object_object_add(
                            c, "reason", json_object_new_string(acc.reason));
                        json_object_object_add(
                            c, "since_ms", json_object_new_int64(acc.since_ms));
                }
                json_object_object_add(
                    c, "access_failures",
                    json_object_new_int64((int64_t)acc.failures));
                json_object_array_add(arr, c);
        }
        return arr;
}


static char *status_json(const struct gw_admin *a) {
        json_object *o = json_object_new_object(), *flows;
        json_object *v = json_object_new_object();
        char        *out;

        json_object_object_add(o, "gateway_id",
                               json_object_new_string(a->view.gateway_id));
        json_object_object_add(o, "site",
                               a->view.site ? json_object_new_string(a->view.site)
                                            : NULL);
        json_object_object_add(o, "mode", json_object_new_string(a->view.mode));
        json_object_object_add(o, "uptime_s",
                               json_object_new_int64(
                                   (int64_t)(time(NULL) - a->view.started)));
        json_object_object_add(v, "aagw", json_object_new_string(AAGW_VERSION));
        json_object_object_add(v, "librdkafka",
                               json_object_new_string(rd_kafka_version_str()));
        json_object_object_add(v, "rocksdb",
                               json_object_new_string(AAGW_ROCKSDB_VERSION));
        json_object_object_add(o, "versions", v);
        json_object_object_add(o, "now_ms",
                               json_object_new_int64(aagw_wall_ms()));
        json_object_object_add(o, "sites", sites_json(a));
        json_object_object_add(o, "clusters", clusters_json());
        flows = json_object_new_array();
        for (size_t i = 0; i < a->view.nflows; i++)
                json_object_array_add(flows, flow_json(a->view.flows[i]));
        json_object_object_add(o, "flows", flows);
        json_object *un = json_object_new_array();
        for (size_t i = 0; i < a->view.nunify; i++)
                json_object_array_add(un, unify_json(a->view.unify[i]));
        json_object_object_add(o, "unify", un);
        if (a->view.member)
                json_object_object_add(o, "scale_out", members_json(a));
        out = strdup(json_object_to_json_string_ext(
            o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
        return out;
}

/* A lag for text and /metrics: "NaN" when unknown (-1), never 0. */
const char *gw_lag_str(int64_t lag, char buf[24]) {
        if (lag < 0)
                return "NaN";
        snprintf(buf, 24, "%" PRId64, lag);
        return buf;
}

/* The same figures as sectioned key:value text: one section per flow. */
/* Scale-out lines of a flow for `aagw status`: this member, its
 * ownership, and the source partitions it copies ("owned:clicks 0,3
 * heartbeats 0"). */
static void scale_out_text(struct sbuf *b, const aagw_flow_t *f,
                           const struct aagw_flow_stats *st) {
        struct aagw_flow_part_stats *ps;
        size_t n = aagw_flow_partitions(f, NULL, 0);
        const char *topic = NULL;

        gw_sb_printf(b,
                     "member:%s\nwork_partitions:%d\nrebalances:%" PRIu64
                     "\ntransactions_committed:%" PRIu64
                     "\ntransactions_aborted:%" PRIu64
                     "\ntransactions_fenced:%" PRIu64 "\nowned:",
                     st->member, st->work_partitions, st->rebalances,
                     st->txn_committed, st->txn_aborted, st->txn_fenced);
        if ((ps = calloc(n ? n : 1, sizeof(*ps)))) {
                n = aagw_flow_partitions(f, ps, n);
                for (size_t i = 0; i < n; i++) {
                        if (!ps[i].assigned)
                                continue;
                        bool same = topic && !strcmp(topic, ps[i].topic);
                        gw_sb_printf(b, "%s%s%s%d", same || !topic ? "" : " ",
                                     same ? "" : ps[i].topic,
                                     same ? "," : " ", (int)ps[i].partition);
                        topic = ps[i].topic;
                }
                free(ps);
        }
        gw_sb_printf(b, "%s\n", topic ? "" : "none");
}

static char *status_text(const struct gw_admin *a) {
        struct sbuf b = {0};

        gw_sb_printf(&b, "# Gateway\ngateway_id:%s\nsite:%s\nmode:%s\n"
                      "uptime_s:%" PRId64 "\nversion:%s\nlibrdkafka:%s\n"
                      "rocksdb:%s\n",
                  a->view.gateway_id, a->view.site ? a->view.site : "(all)",
                  a->view.mode, (int64_t)(time(NULL) - a->view.started),
                  AAGW_VERSION, rd_kafka_version_str(), AAGW_ROCKSDB_VERSION);
        for (size_t i = 0; i < a->view.nflows; i++) {
                const aagw_flow_t     *f = a->view.flows[i];
                struct aagw_flow_stats st;
                char                   err[512], lag[24];

                aagw_flow_stats(f, &st);
                aagw_flow_error(f, err, sizeof(err));
                gw_sb_printf(&b,
                          "\n# Flow %s\nstate:%s\n%s%s%stopics:%d\n"
                          "topics_refused:%d\npartitions_missing:%d\n"
                          "partitions:%d\n"
                          "records_in:%" PRIu64 "\nrecords_out:%" PRIu64
                          "\nbytes_out:%" PRIu64 "\nskipped:%" PRIu64
                          "\nrejected:%" PRIu64 "\ndead_lettered:%" PRIu64
                          "\nlag:%s\ninflight:%" PRId64
                          "\nlatency_avg_ms:%" PRIu64 "\n"
                          "source_down_ms:%" PRId64 "\ntarget_down_ms:%" PRId64
                          "\n",
                          aagw_flow_name(f), state_of(f), err[0] ? "error:" : "",
                          err, err[0] ? "\n" : "", st.topics, st.topics_refused,
                          st.partitions_missing, st.partitions,
                          st.records_in, st.records_out,
                          st.bytes_out, sum(st.skipped, AAGW_SKIP_COUNT),
                          sum(st.rejected, AAGW_REASON_COUNT),
                          st.dead_lettered, gw_lag_str(st.lag, lag),
                          st.inflight,
                          st.lat_count ? st.lat_sum_ms / st.lat_count : 0,
                          st.source_down_ms, st.target_down_ms);
                /* MM2-format topics and truncation */
                gw_sb_printf(&b,
                          "truncations:%" PRIu64 "\ntruncated_records:%" PRIu64
                          "\nresets:%" PRIu64 "\ntarget_resets:%" PRIu64
                          "\noffset_syncs:%" PRIu64
                          "\ncheckpoints:%" PRIu64 "\nheartbeats:%" PRIu64
                          "\nheartbeat_latency_ms:%" PRId64
                          "\nheartbeat_age_ms:%" PRId64 "\n",
                          st.truncations, st.truncated_records, st.resets,
                          st.target_resets,
                          st.offset_syncs, st.checkpoints, st.heartbeats,
                          st.heartbeat_latency_ms, st.heartbeat_age_ms);
                if (st.member)
                        scale_out_text(&b, f, &st);
        }
        for (size_t i = 0; i < a->view.nunify; i++) {
                const aagw_unify_t   *u = a->view.unify[i];
                struct aagw_unify_stats st;
                char                  err[512], lag[24];
                uint64_t              v[5];

                aagw_unify_stats(u, &st);
                aagw_unify_error(u, err, sizeof(err));
                gw_unify_outcome_values(&st, v);
                gw_sb_printf(&b,
                          "\n# Unify %s\nstate:%s\n%s%s%stopics:%d\n"
                          "inputs:%d\nrecords_in:%" PRIu64
                          "\nrecords_out:%" PRIu64 "\n",
                          aagw_unify_site(u),
                          aagw_flow_state_name(aagw_unify_state(u)),
                          err[0] ? "error:" : "", err, err[0] ? "\n" : "",
                          st.topics, st.inputs, st.records_in,
                          st.records_out);
                for (int k = 0; k < 5; k++)
                        gw_sb_printf(&b, "%s:%" PRIu64 "\n", gw_unify_outcomes[k],
                                  v[k]);
                gw_sb_printf(&b,
                          "recovered:%" PRIu64 "\nreplayed:%" PRIu64
                          "\ncommits:%" PRIu64 "\ninflight:%" PRId64
                          "\nlag:%s\ncluster_down_ms:%" PRId64 "\n",
                          st.recovered, st.replayed, st.commits, st.inflight,
                          gw_lag_str(st.lag, lag), st.down_ms);
                const char *member = aagw_unify_member(u);
                if (member) {
                        char owned[1024];
                        aagw_unify_owned(u, owned, sizeof(owned));
                        gw_sb_printf(
                            &b,
                            "member:%s\nowned:%s\nowned_partitions:%d"
                            "\nrebalances:%" PRIu64 "\nrestores:%" PRIu64
                            "\nrestore_ms_total:%" PRIu64
                            "\nrestored_records:%" PRIu64 "\nrouted:%" PRIu64
                            "\ntransactions:%" PRIu64 "\naborted:%" PRIu64
                            "\nfenced:%" PRIu64 "\n",
                            member, owned, st.owned_partitions, st.rebalances,
                            st.restores, st.restore_ms_total,
                            st.restored_records, st.routed, st.txn_commits,
                            st.aborted, st.fenced);
                }
        }
        if (a->view.member)
                members_text(a, &b);
        return b.p;
}

/* ------------------------------------------------------------ HANDLER --- */

/* Host of a "Host:" or Origin authority ("h", "h:p", "[v6]", "[v6]:p"). */
static void authority_host(const char *auth, char *host, size_t size) {
        if (!gw_split_hostport(auth, host, size)) {
                size_t len = strlen(auth);
                if (auth[0] == '[' && len >= 2 && auth[len - 1] == ']')
                        snprintf(host, size, "%.*s", (int)(len - 2), auth + 1);
                else
                        snprintf(host, size, "%s", auth);
        }
}

/* Without a token the endpoint only listens on loopback, but a browser can
 * still be led to it by a name that resolves to 127.0.0.1 (DNS
 * rebinding): then its Host header carries that name.  Accept only hosts
 * that are loopback addresses or "localhost".  Clients that send no Host
 * at all (HTTP/1.0 tools) are not browsers and pass. */
static bool host_ok(struct MHD_Connection *c) {
        const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                    MHD_HTTP_HEADER_HOST);
        char        host[256];

        if (!h)
                return true;
        authority_host(h, host, sizeof(host));
        return gw_host_is_loopback(host);
}

/* A browser names the page that made a request in Origin.  Requests from
 * another site's page (a form that POSTs /flows/.../pause, say) carry a
 * foreign origin: refuse them.  Same-origin pages and non-browser clients
 * (no Origin) pass. */
static bool same_origin(struct MHD_Connection *c) {
        const char *o = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                    "Origin");
        const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                    MHD_HTTP_HEADER_HOST);

        if (!o)
                return true;
        if (!h)
                return false;
        if (!strncmp(o, "http://", 7))
                return !strcmp(o + 7, h);
        /* Behind a TLS-terminating proxy that keeps the Host header. */
        if (!strncmp(o, "https://", 8))
                return !strcmp(o + 8, h);
        return false;
}

static aagw_flow_t *flow_by_path(const struct gw_admin *a, const char *name,
                                 size_t len) {
        for (size_t i = 0; i < a->view.nflows; i++) {
                /* URL form "east-west" or the flow's own "east->west". */
                const char *n     = aagw_flow_name(a->view.flows[i]);
                const char *arrow = strstr(n, "->");
                size_t      sl    = (size_t)(arrow - n);
                if (len == strlen(n) && !strncmp(n, name, len))
                        return a->view.flows[i];
                if (len == strlen(n) - 1 && !strncmp(n, name, sl) &&
                    name[sl] == '-' && !strncmp(arrow + 2, name + sl + 1,
                                                len - sl - 1))
                        return a->view.flows[i];
        }
        return NULL;
}

/* The first flow or unify stage that failed, as "what failed: why\n" in
 * 'msg'; false if none did. */
static bool first_failure(const struct gw_admin *a, char *msg, size_t size) {
        char err[600];

        for (size_t i = 0; i < a->view.nflows; i++)
                if (aagw_flow_state(a->view.flows[i]) == AAGW_FLOW_FAILED) {
                        aagw_flow_error(a->view.flows[i], err, sizeof(err));
                        snprintf(msg, size, "flow %s failed: %s\n",
                                 aagw_flow_name(a->view.flows[i]), err);
                        return true;
                }
        for (size_t i = 0; i < a->view.nunify; i++)
                if (aagw_unify_state(a->view.unify[i]) == AAGW_FLOW_FAILED) {
                        aagw_unify_error(a->view.unify[i], err, sizeof(err));
                        snprintf(msg, size, "unify stage at %s failed: %s\n",
                                 aagw_unify_site(a->view.unify[i]), err);
                        return true;
                }
        return false;
}

/* "degraded: ..." naming every flow and unify stage whose cluster does
 * not answer, and which cluster; false if all answer. */
static bool degraded(const struct gw_admin *a, char *msg, size_t size) {
        size_t len = (size_t)snprintf(msg, size, "degraded:");

#define ADD(...)                                                                       do {                                                                                   if (len < size)                                                                        len += (size_t)snprintf(msg + len, size - len,                                                         __VA_ARGS__);                          } while (0)
        bool               any = false;
        struct aagw_access acc;
        for (size_t i = 0; i < a->view.nflows; i++) {
                const aagw_flow_t     *f = a->view.flows[i];
                struct aagw_flow_stats st;
                char                   src[AAGW_ALIAS_MAX + 1];
                const char            *arrow;

                aagw_flow_stats(f, &st);
                arrow = strstr(aagw_flow_name(f), "->");
                snprintf(src, sizeof(src), "%.*s",
                         arrow ? (int)(arrow - aagw_flow_name(f)) : 0,
                         aagw_flow_name(f));
                if (aagw_access_current(src, &acc)) {
                        ADD("%s flow %s: cluster %s (source): %s: %s (%s)",
                            any ? ";" : "", aagw_flow_name(f), src,
                            aagw_access_cause_text(acc.cause), acc.what,
                            acc.reason);
                        any = true;
                } else if (st.source_down_ms) {
                        ADD("%s flow %s cannot reach %s (source) for %" PRId64
                            " s, lag unknown",
                            any ? ";" : "", aagw_flow_name(f), src,
                            st.source_down_ms / 1000);
                        any = true;
                }
                if (arrow && aagw_access_current(arrow + 2, &acc)) {
                        ADD("%s flow %s: cluster %s (target): %s: %s (%s)",
                            any ? ";" : "", aagw_flow_name(f), arrow + 2,
                            aagw_access_cause_text(acc.cause), acc.what,
                            acc.reason);
                        any = true;
                } else if (st.target_down_ms) {
                        ADD("%s flow %s cannot reach %s (target) for %" PRId64
                            " s",
                            any ? ";" : "", aagw_flow_name(f),
                            arrow ? arrow + 2 : "", st.target_down_ms / 1000);
                        any = true;
                }
        }
        for (size_t i = 0; i < a->view.nunify; i++) {
                struct aagw_unify_stats st;
                const char *site = aagw_unify_site(a->view.unify[i]);
                aagw_unify_stats(a->view.unify[i], &st);
                if (aagw_access_current(site, &acc)) {
                        ADD("%s unify stage at %s: cluster %s: %s: %s (%s)",
                            any ? ";" : "", site, site,
                            aagw_access_cause_text(acc.cause), acc.what,
                            acc.reason);
                        any = true;
                        continue;
                }
                if (!st.down_ms)
                        continue;
                ADD("%s unify stage at %s cannot reach %s for %" PRId64
                    " s, lag unknown",
                    any ? ";" : "", aagw_unify_site(a->view.unify[i]),
                    aagw_unify_site(a->view.unify[i]), st.down_ms / 1000);
                any = true;
        }
        ADD("\n");
#undef ADD
        return any;
}

/* ------------------------------------------------------- CONNECTIONS --- */

static void idle_remove(struct listener *l, struct aconn *ac) {
        if (!ac->idle)
                return;
        if (ac->prev)
                ac->prev->next = ac->next;
        else
                l->idle_head = ac->next;
        if (ac->next)
                ac->next->prev = ac->prev;
        else
                l->idle_tail = ac->prev;
        ac->prev = ac->next = NULL;
        ac->idle            = false;
        l->nidle--;
}

/* Put 'ac' at the young end of the idle list; then, above the cap, close
 * the oldest idle connection (never 'ac' itself, the cap is above 1). */
static void idle_add(struct listener *l, struct aconn *ac) {
        if (ac->idle)
                return;
        ac->prev = l->idle_tail;
        ac->next = NULL;
        if (l->idle_tail)
                l->idle_tail->next = ac;
        else
                l->idle_head = ac;
        l->idle_tail = ac;
        ac->idle     = true;
        l->nidle++;
        while (l->nidle > ADMIN_IDLE_MAX) {
                struct aconn *old = l->idle_head;
                const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
                    old->c, MHD_CONNECTION_INFO_CONNECTION_FD);
                idle_remove(l, old);
                if (ci)
                        shutdown(ci->connect_fd, SHUT_RDWR);
                if (l->evicted++ == 0)
                        aagw_log(AAGW_LOG_WARN, "ADMIN",
                                 "more than %u idle connections to the admin "
                                 "endpoint; closing the oldest ones (logged "
                                 "once)",
                                 ADMIN_IDLE_MAX);
        }
}

static struct aconn *conn_of(struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return ci ? ci->socket_context : NULL;
}

/* The connection's TLS session; NULL on plain HTTP. */
static gnutls_session_t tls_session(struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        return ci ? (gnutls_session_t)ci->tls_session : NULL;
}

/* A new TLS session, before its handshake: libmicrohttpd asks for a
 * client certificate (it was given a trust list) but lets the handshake
 * go on without one, and does not check it.  Require one, and have GnuTLS
 * verify it against admin.tls.client_ca in the handshake (no name to
 * match: any certificate that CA signed is a client). */
static void require_client_cert(struct MHD_Connection *c) {
        gnutls_session_t s = tls_session(c);

        if (!s)
                return; /* the handler refuses the request (client_cert_ok) */
        gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
        gnutls_session_set_verify_cert(s, NULL, 0);
}

/* The client presented a certificate that verified against
 * admin.tls.client_ca. */
static bool client_cert_ok(struct MHD_Connection *c) {
        gnutls_session_t s = tls_session(c);
        unsigned         status, n = 0;

        return s && gnutls_certificate_get_peers(s, &n) && n > 0 &&
               gnutls_certificate_verify_peers2(s, &status) == 0 &&
               status == 0;
}

/* A connection opened or closed. */
static void notify_conn(void *cls, struct MHD_Connection *c, void **ctx,
                        enum MHD_ConnectionNotificationCode code) {
        struct listener *l = cls;
        struct aconn    *ac;

        if (code == MHD_CONNECTION_NOTIFY_STARTED) {
                if (!l->health_only && l->a->client_certs)
                        require_client_cert(c);
                if (!(ac = calloc(1, sizeof(*ac))))
                        return; /* untracked: still served, never evicted */
                ac->c = c;
                *ctx  = ac;
                idle_add(l, ac);
        } else if ((ac = *ctx)) {
                idle_remove(l, ac);
                free(ac);
                *ctx = NULL;
        }
}

/* A request was answered (or aborted): the connection is idle again
 * until its next request (keep-alive). */
static void notify_done(void *cls, struct MHD_Connection *c, void **con_cls,
                        enum MHD_RequestTerminationCode code) {
        struct listener *l  = cls;
        struct aconn    *ac = conn_of(c);
        (void)con_cls;
        (void)code;
        if (ac)
                idle_add(l, ac);
}

/* libmicrohttpd's own messages (a failed TLS handshake, a connection
 * refused at the limit) in the log's format.  Anyone who can reach the
 * port can make it write one per connection, so at most one line a
 * second gets through, with the count of those left out since. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
        struct listener *l   = cls;
        int64_t          now = aagw_mono_ms();
        char             raw[400], line[800];

        if (l->log_ms && now - l->log_ms < 1000) {
                l->log_dropped++;
                return;
        }
        vsnprintf(raw, sizeof(raw), fmt, ap);
        raw[strcspn(raw, "\n")] = '\0';
        /* Its words for any failed handshake, whatever the cause. */
        if (l->a->tls && !l->health_only && strstr(raw, "handshake"))
                snprintf(line, sizeof(line),
                         "TLS handshake failed (libmicrohttpd: %s): a client "
                         "that does not speak TLS, does not trust our "
                         "certificate%s",
                         raw,
                         l->a->client_certs
                             ? ", or has no certificate signed by "
                               "admin.tls.client_ca"
                             : "");
        else
                snprintf(line, sizeof(line), "libmicrohttpd: %s", raw);
        if (l->log_dropped)
                aagw_log(AAGW_LOG_WARN, "ADMIN",
                         "%s (%u earlier lines left out: one a second at most)",
                         line, l->log_dropped);
        else
                aagw_log(AAGW_LOG_WARN, "ADMIN", "%s", line);
        l->log_ms      = now;
        l->log_dropped = 0;
}

static enum MHD_Result reply_healthz(const struct gw_admin *a,
                                     struct MHD_Connection *c) {
        char msg[2048];
        return first_failure(a, msg, sizeof(msg)) ||
                       degraded(a, msg, sizeof(msg))
                   ? reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, msg)
                   : reply_text(c, MHD_HTTP_OK, "ok\n");
}

static enum MHD_Result reply_metrics(const struct gw_admin *a,
                                     struct MHD_Connection *c) {
        char *body = gw_metrics(&a->view);
        if (!body)
                return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                  "out of memory\n");
        return reply(c, MHD_HTTP_OK,
                     "text/plain; version=0.0.4; charset=utf-8", body,
                     strlen(body), true);
}

/* The health listener: /healthz and /metrics, nothing else. */
static enum MHD_Result handle_health(const struct gw_admin *a,
                                     struct MHD_Connection *c,
                                     const char *url, bool get) {
        bool known = !strcmp(url, "/healthz") || !strcmp(url, "/metrics");

        if (!known)
                return reply_text(c, MHD_HTTP_NOT_FOUND,
                                  "not found: this listener serves /healthz "
                                  "and /metrics only\n");
        if (!get)
                return reply_405(c, "GET, HEAD", "use GET\n");
        return !strcmp(url, "/healthz") ? reply_healthz(a, c)
                                        : reply_metrics(a, c);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
                              const char *url, const char *method,
                              const char *version, const char *upload,
                              size_t *upload_size, void **con_cls) {
        struct listener *l = cls;
        struct gw_admin *a = l->a;
        (void)version;
        (void)upload;

        /* First call per request: headers only.  Let a POST body (none
         * expected) stream in, then answer on the last call.  Until then
         * the connection stays idle (evictable): a body dripped in byte
         * by byte must not hold a connection either. */
        if (!*con_cls) {
                *con_cls = (void *)1;
                return MHD_YES;
        }
        if (*upload_size) {
                *upload_size = 0;
                return MHD_YES;
        }
        struct aconn *ac = conn_of(c);
        if (ac) /* the whole request arrived: being answered, not idle */
                idle_remove(l, ac);
        bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");

        if (a->client_certs && !l->health_only && !client_cert_ok(c))
                return reply_text(c, MHD_HTTP_FORBIDDEN,
                                  "a client certificate signed by "
                                  "admin.tls.client_ca is required\n");
        /* The health listener is loopback-only and has no token. */
        if ((!a->token || l->health_only) && !host_ok(c))
                return reply_text(c, MHD_HTTP_FORBIDDEN,
                                  "Host must name a loopback address\n");
        if (!same_origin(c))
                return reply_text(c, MHD_HTTP_FORBIDDEN,
                                  "cross-origin request refused\n");
        if (l->health_only)
                return handle_health(a, c, url, get);
        /* The page holds no data; what it shows comes from /status, which
         * needs the token like everything else. */
        if (!strcmp(url, "/") && get)
                return reply_page(c);
        if (!token_ok(a, c))
                return reply_text(c, MHD_HTTP_UNAUTHORIZED,
                                  "missing or wrong bearer token\n");
        if (!get && (!strcmp(url, "/") || !strcmp(url, "/healthz") ||
                     !strcmp(url, "/status") || !strcmp(url, "/metrics")))
                return reply_405(c, "GET, HEAD", "use GET\n");

        if (!strcmp(url, "/healthz") && get)
                return reply_healthz(a, c);
        if (!strcmp(url, "/status") && get) {
                const char *fmt =
                    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
                                                "format");
                bool  text = fmt && !strcmp(fmt, "text");
                char *body = text ? status_text(a) : status_json(a);
                if (!body)
                        return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                          "out of memory\n");
                return reply(c, MHD_HTTP_OK,
                             text ? "text/plain; charset=utf-8"
                                  : "application/json",
                             body, strlen(body), true);
        }
        if (!strcmp(url, "/metrics") && get)
                return reply_metrics(a, c);
        if (!strncmp(url, "/flows/", 7)) {
                const char *name  = url + 7;
                const char *slash = strrchr(name, '/');
                if (!slash || strcmp(method, "POST"))
                        return reply_405(c, "POST",
                                         "use POST /flows/SRC-DST/pause or "
                                         "/resume\n");
                aagw_flow_t *f = flow_by_path(a, name, (size_t)(slash - name));
                bool pause = !strcmp(slash, "/pause");
                if (!f)
                        return reply_text(c, MHD_HTTP_NOT_FOUND,
                                          "no such flow\n");
                if (!pause && strcmp(slash, "/resume"))
                        return reply_text(c, MHD_HTTP_NOT_FOUND,
                                          "use /pause or /resume\n");
                /* Recorded first: a pause that a restart would forget is
                 * refused rather than half-done. */
                if (a->view.paused && a->view.pause_file) {
                        size_t i = 0;
                        char   why[600], msg[700];
                        while (a->view.flows[i] != f)
                                i++;
                        bool was = a->view.paused[i];
                        a->view.paused[i] = pause;
                        if (gw_pauses_save(a->view.pause_file, a->view.flows,
                                           a->view.nflows, a->view.paused,
                                           why, sizeof(why))) {
                                a->view.paused[i] = was;
                                aagw_log(AAGW_LOG_ERROR, "ADMIN",
                                         "%s of flow %s refused: %s",
                                         pause ? "pause" : "resume",
                                         aagw_flow_name(f), why);
                                snprintf(msg, sizeof(msg),
                                         "cannot record it in the state "
                                         "dir: %s\n",
                                         why);
                                return reply_text(
                                    c, MHD_HTTP_INTERNAL_SERVER_ERROR, msg);
                        }
                }
                aagw_flow_pause(f, pause);
                aagw_log(AAGW_LOG_INFO, "ADMIN", "%s requested for flow %s",
                         pause ? "pause" : "resume", aagw_flow_name(f));
                return reply_text(c, MHD_HTTP_ACCEPTED,
                                  pause ? "pausing\n" : "resuming\n");
        }
        return reply_text(c, MHD_HTTP_NOT_FOUND,
                          "not found: try /, /healthz, /status, /metrics\n");
}

/* ------------------------------------------------------------- PAUSES --- */

int gw_pauses_load(const char *path, const char *const *names, size_t n,
                   bool *paused, char *errstr, size_t errstr_size) {
        FILE *f = fopen(path, "r");
        char  line[512];

        if (!f) {
                if (errno == ENOENT)
                        return 0;
                snprintf(errstr, errstr_size, "%s: %s", path,
                         strerror(errno));
                return -1;
        }
        while (fgets(line, sizeof(line), f)) {
                bool known = false;
                line[strcspn(line, "\r\n")] = '\0';
                if (!*line)
                        continue;
                for (size_t i = 0; i < n; i++)
                        if (!strcmp(names[i], line))
                                paused[i] = known = true;
                if (!known)
                        aagw_log(AAGW_LOG_WARN, "ADMIN",
                                 "%s names flow %s, which does not run now; "
                                 "ignored",
                                 path, line);
        }
        fclose(f);
        return 0;
}

int gw_pauses_save(const char *path, aagw_flow_t *const *flows, size_t n,
                   const bool *paused, char *errstr, size_t errstr_size) {
        char  tmp[4200];
        FILE *f;
        bool  any = false;

        for (size_t i = 0; i < n; i++)
                any |= paused[i];
        if (!any) {
                if (unlink(path) && errno != ENOENT) {
                        snprintf(errstr, errstr_size, "removing %s: %s", path,
                                 strerror(errno));
                        return -1;
                }
                return 0;
        }
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        if (!(f = fopen(tmp, "w"))) {
                snprintf(errstr, errstr_size, "%s: %s", tmp, strerror(errno));
                return -1;
        }
        for (size_t i = 0; i < n; i++)
                if (paused[i])
                        fprintf(f, "%s\n", aagw_flow_name(flows[i]));
        if (fflush(f) || fsync(fileno(f))) {
                snprintf(errstr, errstr_size, "writing %s: %s", tmp,
                         strerror(errno));
                fclose(f);
                unlink(tmp);
                return -1;
        }
        if (fclose(f) || rename(tmp, path)) {
                snprintf(errstr, errstr_size, "writing %s: %s", path,
                         strerror(errno));
                unlink(tmp);
                return -1;
        }
        return 0;
}

/* ---------------------------------------------------------- LIFECYCLE --- */

int gw_admin_listen(const char *addr, char *errstr, size_t errstr_size) {
        char             host[256];
        const char      *colon;
        struct addrinfo  hints, *res = NULL;
        int              rc, fd, one = 1;

        /* HOST:PORT or [V6]:PORT, already checked by the config. */
        if (!(colon = gw_split_hostport(addr, host, sizeof(host)))) {
                snprintf(errstr, errstr_size, "bad admin address %s", addr);
                return -1;
        }
        memset(&hints, 0, sizeof(hints));
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags    = AI_PASSIVE;
        if ((rc = getaddrinfo(host, colon + 1, &hints, &res)) || !res) {
                snprintf(errstr, errstr_size, "admin.listen %s: %s", addr,
                         gai_strerror(rc));
                return -1;
        }
        fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd == -1 ||
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
            bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 64)) {
                snprintf(errstr, errstr_size, "cannot listen on %s: %s",
                         addr, strerror(errno));
                if (fd != -1)
                        close(fd);
                fd = -1;
        }
        freeaddrinfo(res);
        return fd;
}

/* "HOST:PORT" of the socket 'fd' in 'out'; whether it is IPv6 in '*v6'. */
static int sock_addr(int fd, char *out, size_t size, bool *v6, char *errstr,
                     size_t errstr_size) {
        struct sockaddr_storage ss;
        socklen_t               sslen = sizeof(ss);
        char                    host[INET6_ADDRSTRLEN];
        unsigned                port;

        if (getsockname(fd, (struct sockaddr *)&ss, &sslen)) {
                snprintf(errstr, errstr_size, "admin socket: %s",
                         strerror(errno));
                return -1;
        }
        *v6 = ss.ss_family == AF_INET6;
        if (*v6) {
                const struct sockaddr_in6 *s6 = (const void *)&ss;
                inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
                port = ntohs(s6->sin6_port);
        } else {
                const struct sockaddr_in *s4 = (const void *)&ss;
                inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
                port = ntohs(s4->sin_port);
        }
        snprintf(out, size, "%s%s%s:%u", *v6 ? "[" : "", host, *v6 ? "]" : "",
                 port);
        return 0;
}

/* Start listener 'l' on 'fd' (owned from now on, closed on failure);
 * 'tls' NULL: plain HTTP. */
static int listener_start(struct listener *l, int fd,
                          const struct gw_admin_tls *tls, char *errstr,
                          size_t errstr_size) {
        /* poll(), not select(): the admin socket's number may be above
         * FD_SETSIZE in a process holding RocksDB files and Kafka
         * connections. */
        unsigned              flags = MHD_USE_POLL_INTERNAL_THREAD |
                         MHD_USE_ERROR_LOG;
        bool                  v6;
        struct MHD_OptionItem tls_opts[5];
        size_t                n = 0;

        if (sock_addr(fd, l->addr, sizeof(l->addr), &v6, errstr,
                      errstr_size)) {
                close(fd);
                return -1;
        }
        if (v6)
                flags |= MHD_USE_IPv6;
        if (tls) {
                flags |= MHD_USE_TLS;
                tls_opts[n++] = (struct MHD_OptionItem){
                    MHD_OPTION_HTTPS_MEM_CERT, 0, tls->cert};
                tls_opts[n++] = (struct MHD_OptionItem){
                    MHD_OPTION_HTTPS_MEM_KEY, 0, tls->key};
                if (tls->key_password)
                        tls_opts[n++] = (struct MHD_OptionItem){
                            MHD_OPTION_HTTPS_KEY_PASSWORD, 0,
                            tls->key_password};
                /* A trust list makes libmicrohttpd ask for client
                 * certificates; notify_conn() makes it a must. */
                if (tls->client_ca)
                        tls_opts[n++] = (struct MHD_OptionItem){
                            MHD_OPTION_HTTPS_MEM_TRUST, 0, tls->client_ca};
        }
        tls_opts[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
        /* On success libmicrohttpd owns 'fd' and closes it at the stop. */
        /* The logger first, or libmicrohttpd logs to stderr until it
         * gets to it. */
        l->mhd = MHD_start_daemon(flags, 0, NULL, NULL, handle, l,
                                  MHD_OPTION_EXTERNAL_LOGGER, mhd_log, l,
                                  MHD_OPTION_LISTEN_SOCKET, fd,
                                  MHD_OPTION_CONNECTION_TIMEOUT,
                                  ADMIN_TIMEOUT_S,
                                  MHD_OPTION_CONNECTION_LIMIT, ADMIN_CONN_MAX,
                                  MHD_OPTION_NOTIFY_CONNECTION, notify_conn, l,
                                  MHD_OPTION_NOTIFY_COMPLETED, notify_done, l,
                                  MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
        if (!l->mhd) {
                /* admin_tls.c checked the files as libmicrohttpd would;
                 * what is left is rare (out of memory, no threads). */
                snprintf(errstr, errstr_size, "cannot serve %son %s%s",
                         tls ? "HTTPS " : "", l->addr,
                         tls ? " (libmicrohttpd refused the TLS setup; see "
                               "the log line before)"
                             : "");
                close(fd);
                return -1;
        }
        return 0;
}

struct gw_admin *gw_admin_start(const struct gw_admin_conf *conf,
                                const struct gw_admin_view *view,
                                char *errstr, size_t errstr_size) {
        struct gw_admin           *a   = calloc(1, sizeof(*a));
        const struct gw_admin_tls *tls = conf->tls;
        int                        health_fd = conf->health_fd;

        if (!a) {
                snprintf(errstr, errstr_size, "out of memory");
                close(conf->fd);
                if (health_fd != -1)
                        close(health_fd);
                return NULL;
        }
        if (tls && !tls->cert)
                tls = NULL;
        a->view         = *view;
        a->tls          = tls != NULL;
        a->client_certs = tls && tls->client_ca;
        a->main.a = a->health.a = a;
        a->health.health_only   = true;
        if (conf->token && !(a->token = strdup(conf->token))) {
                snprintf(errstr, errstr_size, "out of memory");
                close(conf->fd);
                goto fail;
        }
        if (listener_start(&a->main, conf->fd, tls, errstr, errstr_size))
                goto fail;
        if (health_fd != -1) {
                health_fd = -1; /* listener_start() owns it */
                if (listener_start(&a->health, conf->health_fd, NULL, errstr,
                                   errstr_size)) {
                        char why[600];
                        snprintf(why, sizeof(why), "%s", errstr);
                        snprintf(errstr, errstr_size, "health listener: %s",
                                 why);
                        goto fail;
                }
        }
        return a;
fail:
        if (health_fd != -1)
                close(health_fd);
        gw_admin_stop(a);
        return NULL;
}

const char *gw_admin_addr(const struct gw_admin *a) {
        return a->main.addr;
}

const char *gw_admin_health_addr(const struct gw_admin *a) {
        return a->health.mhd ? a->health.addr : NULL;
}

bool gw_admin_is_tls(const struct gw_admin *a) {
        return a->tls;
}

void gw_admin_stop(struct gw_admin *a) {
        if (!a)
                return;
        if (a->health.mhd)
                MHD_stop_daemon(a->health.mhd);
        if (a->main.mhd)
                MHD_stop_daemon(a->main.mhd);
        free(a->token);
        free(a);
}
