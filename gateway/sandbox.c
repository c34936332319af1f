/* gateway/sandbox.c: embedded Kafka clusters for `aagw sandbox`, the demo,
 * the end-to-end tests and the benchmarks.
 *
 * Each cluster is a librdkafka mock cluster (rdkafka_mock.h) hosted by its
 * own bookkeeping rd_kafka_t.  The mock brokers speak the Kafka protocol on
 * 127.0.0.1 at ports the kernel picks, so any client in any process can use
 * them; what they can not do is listed in the shared MOCK-CLUSTER.md. */
#include "aagw_gateway.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SB_MAX_BROKERS 16
#define SB_MAX_PARTITIONS 10000
#define SB_MAX_ALIAS_LEN 64
/* Kafka's own limit on topic name length. */
#define SB_MAX_TOPIC_LEN 249
/* How long create_topic waits for metadata when it must find out how many
 * partitions an existing topic has.  Loopback answers in milliseconds; the
 * bound only matters if the mock is wedged. */
#define SB_METADATA_TIMEOUT_MS 10000

struct sb_cluster {
        char                    *alias;
        char                    *bootstraps; /* our copy */
        rd_kafka_t              *rk;         /* hosts the mock, never used */
        rd_kafka_mock_cluster_t *mc;
};

struct aagw_sandbox {
        int               brokers;
        size_t            cnt;
        struct sb_cluster clusters[AAGW_SANDBOX_MAX_CLUSTERS];
};

/* ------------------------------ VALIDATION ------------------------------ */

/* Aliases end up in topic names ("east.clicks"), in header values and in
 * environment variable names (AAGW_TEST_BOOTSTRAPS_EAST), so keep them to a
 * charset that is safe in all three. */
static bool alias_ok(const char *alias) {
        size_t len = strlen(alias);

        if (len == 0 || len > SB_MAX_ALIAS_LEN)
                return false;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)alias[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '_' || c == '-'))
                        return false;
        }
        return true;
}

/* The mock accepts any topic name and any partition count, including 0 and
 * "a/b", which real clients then fail on in confusing ways; apply Kafka's
 * rules here instead. */
static bool topic_ok(const char *topic) {
        size_t len = strlen(topic);

        if (len == 0 || len > SB_MAX_TOPIC_LEN || !strcmp(topic, ".") ||
            !strcmp(topic, ".."))
                return false;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)topic[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                      c == '.'))
                        return false;
        }
        return true;
}

/* ------------------------------- CLUSTERS ------------------------------- */

/* The bookkeeping handle has no bootstrap.servers on purpose, and librdkafka
 * says so at NOTICE level on creation.  That warning would only confuse a
 * sandbox user, so it goes to debug; everything else keeps its level. */
static void mock_log_cb(const rd_kafka_t *rk, int level, const char *fac,
                        const char *buf) {
        aagw_log_level_t l;

        if (level <= 3) /* syslog LOG_ERR */
                l = AAGW_LOG_ERROR;
        else if (level <= 4) /* LOG_WARNING */
                l = AAGW_LOG_WARN;
        else if (level <= 6) /* LOG_NOTICE, LOG_INFO */
                l = AAGW_LOG_INFO;
        else
                l = AAGW_LOG_DEBUG;
        if (!strcmp(fac, "CONFWARN"))
                l = AAGW_LOG_DEBUG;
        aagw_log(l, "SANDBOX", "%s: %s", rd_kafka_name(rk), buf);
}

/* Start the mock cluster for 'c->alias'.  The rd_kafka_t is a producer only
 * because the mock needs some handle to live in; nothing is produced on it. */
static int cluster_start(struct sb_cluster *c, int brokers, char *errstr,
                         size_t errstr_size) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        char             client_id[SB_MAX_ALIAS_LEN + 32];
        char             why[512];

        snprintf(client_id, sizeof(client_id), "aagw-sandbox-%s", c->alias);
        rd_kafka_conf_set_log_cb(conf, mock_log_cb);
        if (rd_kafka_conf_set(conf, "client.id", client_id, why, sizeof(why)) !=
            RD_KAFKA_CONF_OK) {
                rd_kafka_conf_destroy(conf);
                snprintf(errstr, errstr_size, "cluster %s: client.id: %s",
                         c->alias, why);
                return -1;
        }
        /* rd_kafka_new() takes 'conf' on success only. */
        c->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof(why));
        if (!c->rk) {
                rd_kafka_conf_destroy(conf);
                snprintf(errstr, errstr_size, "cluster %s: %s", c->alias, why);
                return -1;
        }
        c->mc = rd_kafka_mock_cluster_new(c->rk, brokers);
        if (!c->mc) {
                snprintf(errstr, errstr_size,
                         "cluster %s: cannot start %d mock brokers on "
                         "127.0.0.1 (out of ports or file descriptors?)",
                         c->alias, brokers);
                return -1;
        }
        c->bootstraps = strdup(rd_kafka_mock_cluster_bootstraps(c->mc));
        if (!c->bootstraps) {
                snprintf(errstr, errstr_size, "cluster %s: out of memory",
                         c->alias);
                return -1;
        }
        aagw_log(AAGW_LOG_DEBUG, "SANDBOX", "cluster %s: %d broker%s at %s",
                 c->alias, brokers, brokers == 1 ? "" : "s", c->bootstraps);
        return 0;
}

/* The mock must go before the handle it was created with. */
static void cluster_stop(struct sb_cluster *c) {
        if (c->mc)
                rd_kafka_mock_cluster_destroy(c->mc);
        if (c->rk)
                rd_kafka_destroy(c->rk);
        free(c->bootstraps);
        free(c->alias);
        memset(c, 0, sizeof(*c));
}

static struct sb_cluster *cluster_find(const aagw_sandbox_t *sb,
                                       const char           *alias) {
        for (size_t i = 0; alias && i < sb->cnt; i++)
                if (!strcmp(sb->clusters[i].alias, alias))
                        return (struct sb_cluster *)&sb->clusters[i];
        return NULL;
}

aagw_sandbox_t *aagw_sandbox_new(const char *const *aliases, size_t alias_cnt,
                                 int brokers, char *errstr,
                                 size_t errstr_size) {
        aagw_sandbox_t *sb;

        if (alias_cnt < 1 || alias_cnt > AAGW_SANDBOX_MAX_CLUSTERS) {
                snprintf(errstr, errstr_size,
                         "number of clusters must be 1..%d, not %zu",
                         AAGW_SANDBOX_MAX_CLUSTERS, alias_cnt);
                return NULL;
        }
        if (brokers < 1 || brokers > SB_MAX_BROKERS) {
                snprintf(errstr, errstr_size,
                         "brokers per cluster must be 1..%d, not %d",
                         SB_MAX_BROKERS, brokers);
                return NULL;
        }
        /* Check every alias before starting anything: a typo in the third
         * alias should not cost two cluster start-ups and tear-downs. */
        for (size_t i = 0; i < alias_cnt; i++) {
                if (!aliases[i] || !alias_ok(aliases[i])) {
                        snprintf(errstr, errstr_size,
                                 "invalid cluster alias '%s': use 1..%d of "
                                 "A-Z a-z 0-9 _ -",
                                 aliases[i] ? aliases[i] : "(null)",
                                 SB_MAX_ALIAS_LEN);
                        return NULL;
                }
                for (size_t j = 0; j < i; j++) {
                        if (!strcmp(aliases[i], aliases[j])) {
                                snprintf(errstr, errstr_size,
                                         "duplicate cluster alias '%s'",
                                         aliases[i]);
                                return NULL;
                        }
                }
        }

        sb = calloc(1, sizeof(*sb));
        if (!sb) {
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        sb->brokers = brokers;
        for (size_t i = 0; i < alias_cnt; i++) {
                struct sb_cluster *c = &sb->clusters[i];

                /* Count it first so destroy() cleans up a half-started
                 * cluster too. */
                sb->cnt++;
                c->alias = strdup(aliases[i]);
                if (!c->alias) {
                        snprintf(errstr, errstr_size, "out of memory");
                        aagw_sandbox_destroy(sb);
                        return NULL;
                }
                if (cluster_start(c, brokers, errstr, errstr_size) == -1) {
                        aagw_sandbox_destroy(sb);
                        return NULL;
                }
        }
        return sb;
}

static void *cluster_stop_main(void *arg) {
        cluster_stop(arg);
        return NULL;
}

/* Stop the clusters in parallel, one thread each.  With librdkafka 2.0.2,
 * rd_kafka_mock_cluster_destroy() takes up to a second now and then (about
 * one call in five in our measurements): the mock thread joins its internal
 * broker thread, which notices it should exit only when its 1 s queue wait
 * times out, and nothing public can wake it.  In parallel a sandbox costs
 * at most that second, not a second per cluster.  If a thread can not be
 * started the cluster is stopped here instead. */
void aagw_sandbox_destroy(aagw_sandbox_t *sb) {
        pthread_t thr[AAGW_SANDBOX_MAX_CLUSTERS];
        bool      started[AAGW_SANDBOX_MAX_CLUSTERS];

        if (!sb)
                return;
        for (size_t i = 0; i < sb->cnt; i++) {
                started[i] = pthread_create(&thr[i], NULL, cluster_stop_main,
                                            &sb->clusters[i]) == 0;
                if (!started[i])
                        cluster_stop(&sb->clusters[i]);
        }
        for (size_t i = 0; i < sb->cnt; i++)
                if (started[i])
                        pthread_join(thr[i], NULL);
        free(sb);
}

size_t aagw_sandbox_cluster_cnt(const aagw_sandbox_t *sb) {
        return sb->cnt;
}

const char *aagw_sandbox_alias(const aagw_sandbox_t *sb, size_t idx) {
        return idx < sb->cnt ? sb->clusters[idx].alias : NULL;
}

const char *aagw_sandbox_bootstraps(const aagw_sandbox_t *sb,
                                    const char           *alias) {
        const struct sb_cluster *c = cluster_find(sb, alias);
        return c ? c->bootstraps : NULL;
}

rd_kafka_mock_cluster_t *aagw_sandbox_mock(const aagw_sandbox_t *sb,
                                           const char           *alias) {
        const struct sb_cluster *c = cluster_find(sb, alias);
        return c ? c->mc : NULL;
}

/* -------------------------------- TOPICS -------------------------------- */

/* Ask cluster 'c' over the wire how many partitions 'topic' has.  The mock
 * offers no API for it, and a topic may exist without us having created it
 * (clients auto-create with 4 partitions), so metadata is the only truth.
 * A short-lived client keeps this off the bookkeeping handle, which must
 * stay unconnected so that destroying the mock does not make it log
 * "all brokers down".
 * @returns the count, or -1 with the reason in 'errstr'. */
static int topic_partition_cnt(const struct sb_cluster *c, const char *topic,
                               char *errstr, size_t errstr_size) {
        rd_kafka_conf_t                *conf = rd_kafka_conf_new();
        const struct rd_kafka_metadata *md;
        rd_kafka_resp_err_t             err;
        rd_kafka_t                     *rk;
        char                            why[512];
        int                             cnt = -1;

        rd_kafka_conf_set_log_cb(conf, mock_log_cb);
        if (rd_kafka_conf_set(conf, "bootstrap.servers", c->bootstraps, why,
                              sizeof(why)) != RD_KAFKA_CONF_OK ||
            rd_kafka_conf_set(conf, "client.id", "aagw-sandbox-metadata", why,
                              sizeof(why)) != RD_KAFKA_CONF_OK ||
            !(rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof(why)))) {
                rd_kafka_conf_destroy(conf);
                snprintf(errstr, errstr_size, "cluster %s: %s", c->alias, why);
                return -1;
        }
        /* All topics: asking for one by name could auto-create it. */
        err = rd_kafka_metadata(rk, 1, NULL, &md, SB_METADATA_TIMEOUT_MS);
        if (err) {
                snprintf(errstr, errstr_size, "cluster %s: metadata: %s",
                         c->alias, rd_kafka_err2str(err));
                rd_kafka_destroy(rk);
                return -1;
        }
        for (int i = 0; i < md->topic_cnt; i++)
                if (!strcmp(md->topics[i].topic, topic))
                        cnt = md->topics[i].partition_cnt;
        rd_kafka_metadata_destroy(md);
        rd_kafka_destroy(rk);
        if (cnt == -1)
                snprintf(errstr, errstr_size,
                         "cluster %s: topic %s exists but is not in the "
                         "metadata",
                         c->alias, topic);
        return cnt;
}

/* Create 'topic' on one cluster.  The mock answers TOPIC_ALREADY_EXISTS for
 * a second create whatever the count, so we compare counts ourselves: the
 * same count is success (scripts and tests may pre-create freely), another
 * count is the user's mistake and is reported as such. */
static aagw_err_t topic_create1(aagw_sandbox_t *sb, struct sb_cluster *c,
                                const char *topic, int partitions, char *errstr,
                                size_t errstr_size) {
        int                 rf = sb->brokers < 3 ? sb->brokers : 3;
        rd_kafka_resp_err_t err;
        int                 have;

        err = rd_kafka_mock_topic_create(c->mc, topic, partitions, rf);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
                aagw_log(AAGW_LOG_DEBUG, "SANDBOX",
                         "cluster %s: created topic %s with %d partitions",
                         c->alias, topic, partitions);
                return AAGW_OK;
        }
        if (err != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
                snprintf(errstr, errstr_size,
                         "cluster %s: cannot create topic %s: %s", c->alias,
                         topic, rd_kafka_err2str(err));
                return AAGW_ERR_KAFKA;
        }
        have = topic_partition_cnt(c, topic, errstr, errstr_size);
        if (have == -1)
                return AAGW_ERR_KAFKA;
        if (have != partitions) {
                snprintf(errstr, errstr_size,
                         "cluster %s: topic %s already exists with %d "
                         "partitions, not %d",
                         c->alias, topic, have, partitions);
                return AAGW_ERR_CONFIG;
        }
        return AAGW_OK;
}

aagw_err_t aagw_sandbox_create_topic(aagw_sandbox_t *sb, const char *alias,
                                     const char *topic, int partitions,
                                     char *errstr, size_t errstr_size) {
        struct sb_cluster *c = NULL;

        if (!topic || !topic_ok(topic)) {
                snprintf(errstr, errstr_size,
                         "invalid topic name '%s': use 1..%d of "
                         "A-Z a-z 0-9 . _ -",
                         topic ? topic : "(null)", SB_MAX_TOPIC_LEN);
                return AAGW_ERR_CONFIG;
        }
        if (partitions < 1 || partitions > SB_MAX_PARTITIONS) {
                snprintf(errstr, errstr_size,
                         "topic %s: partitions must be 1..%d, not %d", topic,
                         SB_MAX_PARTITIONS, partitions);
                return AAGW_ERR_CONFIG;
        }
        if (alias) {
                c = cluster_find(sb, alias);
                if (!c) {
                        snprintf(errstr, errstr_size, "no cluster '%s'", alias);
                        return AAGW_ERR_NOENT;
                }
                return topic_create1(sb, c, topic, partitions, errstr,
                                     errstr_size);
        }
        for (size_t i = 0; i < sb->cnt; i++) {
                aagw_err_t err = topic_create1(sb, &sb->clusters[i], topic,
                                               partitions, errstr, errstr_size);
                if (err)
                        return err;
        }
        return AAGW_OK;
}

/* ------------------------------ BOOTSTRAPS ------------------------------ */

void aagw_sandbox_print(const aagw_sandbox_t *sb, FILE *out) {
        for (size_t i = 0; i < sb->cnt; i++)
                fprintf(out, "%s=%s\n", sb->clusters[i].alias,
                        sb->clusters[i].bootstraps);
}

/* write(2) all of 'len' bytes, retrying short writes and EINTR. */
static int write_all(int fd, const char *buf, size_t len) {
        while (len > 0) {
                ssize_t n = write(fd, buf, len);
                if (n == -1) {
                        if (errno == EINTR)
                                continue;
                        return -1;
                }
                buf += n;
                len -= (size_t)n;
        }
        return 0;
}

/* Readers (scripts, the e2e harness) poll for the file and read it as soon
 * as it appears, so it must never be seen half-written: write a temporary
 * file beside it, fsync, then rename over the target, which is atomic
 * within one file system.  The directory is fsynced too so the new name
 * survives a crash; that step is best effort. */
aagw_err_t aagw_sandbox_write_file(const aagw_sandbox_t *sb, const char *path,
                                   char *errstr, size_t errstr_size) {
        char   tmp[PATH_MAX];
        char   dir[PATH_MAX];
        char  *text = NULL;
        size_t len  = 0;
        FILE  *mem;
        char  *slash;
        int    fd, dfd;

        if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >=
            (int)sizeof(tmp)) {
                snprintf(errstr, errstr_size, "%s: path too long", path);
                return AAGW_ERR_CONFIG;
        }
        mem = open_memstream(&text, &len);
        if (!mem) {
                snprintf(errstr, errstr_size, "out of memory");
                return AAGW_ERR_NOMEM;
        }
        aagw_sandbox_print(sb, mem);
        if (fclose(mem) != 0) {
                free(text);
                snprintf(errstr, errstr_size, "out of memory");
                return AAGW_ERR_NOMEM;
        }

        /* O_CLOEXEC: a child forked by another thread meanwhile must not
         * inherit the descriptor. */
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd == -1) {
                snprintf(errstr, errstr_size,
                         "cannot write %s: cannot create a temporary file "
                         "beside it: %s",
                         path, strerror(errno));
                free(text);
                return AAGW_ERR_STORE;
        }
        /* mkostemp() makes the file 0600; bootstraps are no secret and other
         * users' tools (kcat in another account) should read them. */
        if (fchmod(fd, 0644) == -1 || write_all(fd, text, len) == -1 ||
            fsync(fd) == -1) {
                snprintf(errstr, errstr_size, "cannot write %s: %s", tmp,
                         strerror(errno));
                close(fd);
                unlink(tmp);
                free(text);
                return AAGW_ERR_STORE;
        }
        free(text);
        if (close(fd) == -1 || rename(tmp, path) == -1) {
                snprintf(errstr, errstr_size, "cannot write %s: %s", path,
                         strerror(errno));
                unlink(tmp);
                return AAGW_ERR_STORE;
        }

        snprintf(dir, sizeof(dir), "%s", path);
        slash = strrchr(dir, '/');
        if (!slash)
                snprintf(dir, sizeof(dir), ".");
        else if (slash == dir)
                dir[1] = '\0';
        else
                *slash = '\0';
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd != -1) {
                fsync(dfd);
                close(dfd);
        }
        return AAGW_OK;
}
