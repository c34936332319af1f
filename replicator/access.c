/*
 * replicator/access.c: whether aagw can log in to each cluster and is
 * allowed what it does there (aagw_replicator.h, "CLUSTER ACCESS").
 *
 * A refused login looks like an unreachable cluster from the stages'
 * side: their requests time out.  The cause is only in librdkafka's own
 * log lines (its broker threads log each failed connection with facility
 * FAIL), so every client's log callback passes those lines here, where
 * they are matched against the causes an operator can act on.  The texts
 * are librdkafka's (2.x) and OpenSSL's; a line that matches nothing
 * known is left alone (the cluster shows as unreachable, as before).
 */
#include "replicator_int.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define ACCESS_MAX 16
/* Distinct problems of one cluster remembered for the log: a denied
 * gateway meets several at once (a group, a topic it creates, one it
 * writes), each again at every retry. */
#define SEEN_MAX 8

struct access_entry {
        char               alias[AAGW_ALIAS_MAX + 1];
        char               bootstraps[1024];
        bool               answered; /* a request to it succeeded once */
        struct aagw_access st;
        struct {
                uint64_t hash;   /* of cause and what; 0: free */
                int64_t  last_ms;
        } seen[SEEN_MAX];
};

static pthread_mutex_t     lock = PTHREAD_MUTEX_INITIALIZER;
static struct access_entry table[ACCESS_MAX];
static size_t              ntable;

void aagw_access_register(const char *alias, const char *bootstraps) {
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < ntable; i++)
                if (!strcmp(table[i].alias, alias)) {
                        pthread_mutex_unlock(&lock);
                        return;
                }
        if (ntable < ACCESS_MAX) {
                struct access_entry *e = &table[ntable++];
                memset(e, 0, sizeof(*e));
                snprintf(e->alias, sizeof(e->alias), "%s", alias);
                snprintf(e->bootstraps, sizeof(e->bootstraps), "%s",
                         bootstraps ? bootstraps : "");
        }
        pthread_mutex_unlock(&lock);
}

void aagw_access_reset(void) {
        pthread_mutex_lock(&lock);
        ntable = 0;
        pthread_mutex_unlock(&lock);
}

const char *aagw_access_cause_name(aagw_access_cause_t c) {
        switch (c) {
        case AAGW_ACCESS_OK: return "ok";
        case AAGW_ACCESS_AUTHENTICATION: return "authentication";
        case AAGW_ACCESS_TLS: return "tls";
        case AAGW_ACCESS_PROTOCOL: return "security_protocol";
        case AAGW_ACCESS_AUTHORIZATION: return "authorization";
        }
        return "?";
}

const char *aagw_access_cause_text(aagw_access_cause_t c) {
        switch (c) {
        case AAGW_ACCESS_OK: return "ok";
        case AAGW_ACCESS_AUTHENTICATION: return "authentication failed";
        case AAGW_ACCESS_TLS: return "TLS handshake failed";
        case AAGW_ACCESS_PROTOCOL:
                return "security.protocol does not match the listener";
        case AAGW_ACCESS_AUTHORIZATION: return "not authorized";
        }
        return "?";
}

bool aagw_access_current(const char *alias, struct aagw_access *out) {
        return aagw_access_get(alias, out) && out->cause != AAGW_ACCESS_OK &&
               aagw_wall_ms() - out->last_ms < AAGW_ACCESS_CURRENT_MS;
}

/* The broker refused the TLS session over the client's certificate: none
 * sent, or one it does not accept; aagw_access_note_line() tells which. */
static const char CLIENT_CERT[] = "client certificate";

aagw_access_cause_t aagw_access_classify(const char *line, char *what,
                                         size_t what_size) {
        static const struct {
                const char         *needle;
                aagw_access_cause_t cause;
                const char         *what;
        } known[] = {
            /* SASL: a wrong password or an unknown user (Kafka does not
             * tell them apart), a mechanism the listener does not offer. */
            {"Unsupported SASL mechanism", AAGW_ACCESS_AUTHENTICATION,
             "the broker does not offer this sasl.mechanism"},
            {"SASL authentication error", AAGW_ACCESS_AUTHENTICATION,
             "login refused: wrong sasl.username or sasl.password, or a "
             "user the cluster does not know"},
            {"Authentication failed", AAGW_ACCESS_AUTHENTICATION,
             "login refused: wrong sasl.username or sasl.password, or a "
             "user the cluster does not know"},
            {"SASL handshake failed", AAGW_ACCESS_AUTHENTICATION,
             "SASL handshake refused: check sasl.mechanism and "
             "security.protocol"},
            /* TLS, from the most specific reason to the least. */
            {"certificate required", AAGW_ACCESS_TLS, CLIENT_CERT},
            {"alert bad certificate", AAGW_ACCESS_TLS, CLIENT_CERT},
            {"alert unknown ca", AAGW_ACCESS_TLS, CLIENT_CERT},
            {"certificate unknown", AAGW_ACCESS_TLS, CLIENT_CERT},
            {"ostname mismatch", AAGW_ACCESS_TLS,
             "the broker's certificate does not name the host in "
             "bootstrap_servers (fix the certificate's subjectAltName, or "
             "set ssl.endpoint.identification.algorithm=none)"},
            {"certificate verify failed", AAGW_ACCESS_TLS,
             "the broker's certificate is not signed by a CA aagw trusts "
             "(ssl.ca.location), or does not name the host in "
             "bootstrap_servers"},
            {"wrong version number", AAGW_ACCESS_PROTOCOL,
             "the listener does not speak TLS: security.protocol should "
             "be PLAINTEXT or SASL_PLAINTEXT"},
            {"packet length too long", AAGW_ACCESS_PROTOCOL,
             "the listener does not speak TLS: security.protocol should "
             "be PLAINTEXT or SASL_PLAINTEXT"},
            {"connecting to a SSL listener", AAGW_ACCESS_PROTOCOL,
             "the listener speaks TLS or SASL: set security.protocol to "
             "SSL, SASL_SSL or SASL_PLAINTEXT as the cluster expects"},
            {"connecting to a PLAINTEXT broker listener", AAGW_ACCESS_PROTOCOL,
             "the listener does not speak TLS: security.protocol should "
             "be PLAINTEXT or SASL_PLAINTEXT"},
            /* Authorization, where no stage sees it: an idle
             * idempotent producer's id refused (a fatal error). */
            {"Cluster authorization failed: Failed to acquire",
             AAGW_ACCESS_AUTHORIZATION,
             "a producer id denied: allow aagw's principal IDEMPOTENT_WRITE "
             "on the cluster, or WRITE on the topics it writes"},
            {"SSL handshake failed", AAGW_ACCESS_TLS,
             "no TLS session with the broker (the reason is the TLS "
             "library's)"},
        };
        for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
                if (strstr(line, known[i].needle)) {
                        snprintf(what, what_size, "%s", known[i].what);
                        return known[i].cause;
                }
        return AAGW_ACCESS_OK;
}

/* The librdkafka line without its "[thrd:...]: host:port/id: " prefix and
 * its "(after N ms in state X...)" tail: the reason as the broker or TLS
 * library gave it. */
static void reason_of(const char *line, char *out, size_t size) {
        const char *p = line, *q;
        size_t      n;

        if (!strncmp(p, "[thrd:", 6) && (q = strstr(p, "]: ")))
                p = q + 3;
        /* The client's name ("aagw-east->west-meta#producer-6: "), then
         * the broker ("sasl_ssl://127.0.0.1:9093/1: "): words without a
         * space before a ": ". */
        for (int i = 0; i < 3 && (q = strstr(p, ": ")) &&
                        !memchr(p, ' ', (size_t)(q - p));
             i++)
                p = q + 2;
        n = strlen(p);
        if ((q = strstr(p, " (after ")))
                n = (size_t)(q - p);
        snprintf(out, size, "%.*s", (int)n, p);
}

/* Whether 'cause' and 'what' are new for 'e': not seen within
 * AAGW_ACCESS_CURRENT_MS (FNV-1a of both; the oldest slot is reused). */
static bool seen_news(struct access_entry *e, aagw_access_cause_t cause,
                      const char *what, int64_t now) {
        uint64_t h = 1469598103934665603ULL ^ (uint64_t)cause;
        size_t   old = 0;

        for (const char *c = what; *c; c++)
                h = (h ^ (unsigned char)*c) * 1099511628211ULL;
        h |= 1;
        for (size_t i = 0; i < SEEN_MAX; i++) {
                if (e->seen[i].hash == h) {
                        bool news = now - e->seen[i].last_ms >=
                                    AAGW_ACCESS_CURRENT_MS;
                        e->seen[i].last_ms = now;
                        return news;
                }
                if (e->seen[i].last_ms < e->seen[old].last_ms)
                        old = i;
        }
        e->seen[old].hash    = h;
        e->seen[old].last_ms = now;
        return true;
}

static void note(struct access_entry *e, aagw_access_cause_t cause,
                 const char *what, const char *reason) {
        struct aagw_access *s = &e->st;
        /* One line per cause and fix, not per broker or retry. */
        bool news = seen_news(e, cause, what, aagw_wall_ms());

        if (s->cause == AAGW_ACCESS_OK)
                s->since_ms = aagw_wall_ms();
        s->cause   = cause;
        s->last_ms = aagw_wall_ms();
        s->failures++;
        snprintf(s->what, sizeof(s->what), "%s", what);
        snprintf(s->reason, sizeof(s->reason), "%s", reason);
        if (news)
                aagw_log(AAGW_LOG_ERROR, "ACCESS", "cluster %s: %s: %s (%s)",
                         e->alias, aagw_access_cause_text(cause), what,
                         reason);
}

void aagw_access_note_line(const rd_kafka_t *rk, const char *fac,
                           const char *line) {
        char                what[256], reason[512], bs[1024];
        size_t              bsl = sizeof(bs);
        aagw_access_cause_t cause;

        if (strcmp(fac, "FAIL") && strcmp(fac, "ERROR") &&
            strcmp(fac, "SASL") && strcmp(fac, "SSL"))
                return;
        if (!(cause = aagw_access_classify(line, what, sizeof(what))))
                return;
        if (rd_kafka_conf_get(rd_kafka_conf((rd_kafka_t *)rk),
                              "bootstrap.servers", bs,
                              &bsl) != RD_KAFKA_CONF_OK)
                return;
        if (!strcmp(what, CLIENT_CERT)) {
                char   v[8];
                size_t vl = sizeof(v);
                bool   has = false;
                for (const char *const *k = (const char *const[]){
                         "ssl.certificate.location", "ssl.certificate.pem",
                         "ssl.keystore.location", NULL};
                     *k && !has; k++, vl = sizeof(v))
                        has = rd_kafka_conf_get(rd_kafka_conf((rd_kafka_t *)rk),
                                                *k, v, &vl) ==
                                  RD_KAFKA_CONF_OK && *v;
                snprintf(what, sizeof(what), "%s",
                         has ? "the broker rejected aagw's client "
                               "certificate (not signed by a CA it "
                               "trusts, expired, or not for client use)"
                             : "the broker requires a client certificate "
                               "and aagw sends none: set "
                               "ssl.certificate.location and "
                               "ssl.key.location (or ssl.keystore.location)");
        }
        reason_of(line, reason, sizeof(reason));
        /* A broker that closes the connection while it is asked for its
         * API versions reads the same as a plaintext client at a TLS
         * listener: only a cluster that never answered is taken for the
         * latter (a listener does not change its protocol under aagw). */
        bool ambiguous = strstr(line, "connecting to a SSL listener") != NULL;
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < ntable; i++)
                if (!strcmp(table[i].bootstraps, bs)) {
                        if (!(ambiguous && table[i].answered))
                                note(&table[i], cause, what, reason);
                        break;
                }
        pthread_mutex_unlock(&lock);
}

bool aagw_access_alias_of(const rd_kafka_t *rk, char *alias, size_t size) {
        char   bs[1024];
        size_t bsl   = sizeof(bs);
        bool   found = false;

        if (rd_kafka_conf_get(rd_kafka_conf((rd_kafka_t *)rk),
                              "bootstrap.servers", bs,
                              &bsl) != RD_KAFKA_CONF_OK)
                return false;
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < ntable && !found; i++)
                if ((found = !strcmp(table[i].bootstraps, bs)))
                        snprintf(alias, size, "%s", table[i].alias);
        pthread_mutex_unlock(&lock);
        return found;
}

void aagw_access_note(const char *alias, aagw_access_cause_t cause,
                      const char *what, const char *reason) {
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < ntable; i++)
                if (!strcmp(table[i].alias, alias)) {
                        note(&table[i], cause, what, reason);
                        break;
                }
        pthread_mutex_unlock(&lock);
}

void aagw_access_ok(const char *alias, aagw_access_cause_t cause) {
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < ntable; i++)
                if (!strcmp(table[i].alias, alias))
                        table[i].answered = true;
        for (size_t i = 0; i < ntable; i++)
                if (!strcmp(table[i].alias, alias) &&
                    table[i].st.cause != AAGW_ACCESS_OK &&
                    (cause == AAGW_ACCESS_OK
                         ? table[i].st.cause != AAGW_ACCESS_AUTHORIZATION
                         : table[i].st.cause == cause)) {
                        aagw_log(AAGW_LOG_INFO, "ACCESS",
                                 "cluster %s: %s problem gone",
                                 table[i].alias,
                                 aagw_access_cause_name(table[i].st.cause));
                        table[i].st.cause = AAGW_ACCESS_OK;
                        table[i].st.what[0] = table[i].st.reason[0] = '\0';
                        memset(table[i].seen, 0, sizeof(table[i].seen));
                }
        pthread_mutex_unlock(&lock);
}

bool aagw_access_get(const char *alias, struct aagw_access *out) {
        bool found = false;

        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < ntable; i++)
                if (!strcmp(table[i].alias, alias)) {
                        *out  = table[i].st;
                        found = true;
                        break;
                }
        pthread_mutex_unlock(&lock);
        if (!found)
                memset(out, 0, sizeof(*out));
        return found;
}

size_t aagw_access_aliases(char (*out)[AAGW_ALIAS_MAX + 1], size_t max) {
        size_t n;

        pthread_mutex_lock(&lock);
        n = ntable;
        for (size_t i = 0; i < n && i < max; i++)
                memcpy(out[i], table[i].alias, sizeof(out[i]));
        pthread_mutex_unlock(&lock);
        return n;
}
