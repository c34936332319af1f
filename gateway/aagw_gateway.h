/*
 * aagw - active-active replication gateway for Kafka
 *
 * gateway/aagw_gateway.h: the public face of the gateway library that the
 * `aagw` program, the end-to-end tests and the benchmarks link against.
 */
#ifndef AAGW_GATEWAY_H
#define AAGW_GATEWAY_H

#include <stdio.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "aagw_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------- SANDBOX ------------------------------- */

/**
 * The sandbox: one librdkafka mock cluster per site alias, all in this
 * process, brokers listening on 127.0.0.1 at ports the kernel picks.  Any
 * Kafka client (librdkafka, kcat) can connect to the bootstraps it reports.
 * It is the harness behind `aagw sandbox`, every e2e test, the benchmarks
 * and the demo.  See shared MOCK-CLUSTER.md for what the mock can not do.
 */
typedef struct aagw_sandbox aagw_sandbox_t;

/** Largest number of clusters one sandbox runs. */
#define AAGW_SANDBOX_MAX_CLUSTERS 8

/**
 * @brief Start one mock cluster per alias in @p aliases.
 *
 * @param aliases     site aliases, [A-Za-z0-9_-]+, unique; copied.
 * @param alias_cnt   1..AAGW_SANDBOX_MAX_CLUSTERS.
 * @param brokers     brokers per cluster, 1..16.
 * @returns the sandbox, or NULL with the reason in @p errstr.
 */
aagw_sandbox_t *aagw_sandbox_new(const char *const *aliases, size_t alias_cnt,
                                 int brokers, char *errstr,
                                 size_t errstr_size);

/** Stop every cluster and free the sandbox.  NULL is a no-op. */
void aagw_sandbox_destroy(aagw_sandbox_t *sb);

/** @returns the number of clusters. */
size_t aagw_sandbox_cluster_cnt(const aagw_sandbox_t *sb);

/** @returns the alias of cluster @p idx; borrowed, valid until destroy. */
const char *aagw_sandbox_alias(const aagw_sandbox_t *sb, size_t idx);

/** @returns the bootstrap list ("127.0.0.1:P1,127.0.0.1:P2") of @p alias,
 *  or NULL if there is no such cluster; borrowed, valid until destroy. */
const char *aagw_sandbox_bootstraps(const aagw_sandbox_t *sb,
                                    const char *alias);

/** @returns the mock cluster of @p alias for fault injection
 *  (rd_kafka_mock_broker_set_down() etc.), or NULL; borrowed. */
rd_kafka_mock_cluster_t *aagw_sandbox_mock(const aagw_sandbox_t *sb,
                                           const char *alias);

/**
 * @brief Create @p topic with @p partitions partitions (replication factor
 * min(3, brokers)) on cluster @p alias, or on every cluster if @p alias is
 * NULL.  Creating a topic that exists with the same partition count is not
 * an error.
 */
aagw_err_t aagw_sandbox_create_topic(aagw_sandbox_t *sb, const char *alias,
                                     const char *topic, int partitions,
                                     char *errstr, size_t errstr_size);

/**
 * @brief Write one `alias=bootstraps` line per cluster to @p out.
 */
void aagw_sandbox_print(const aagw_sandbox_t *sb, FILE *out);

/**
 * @brief Write the `alias=bootstraps` lines to @p path atomically (a
 * temporary file in the same directory, fsync, rename), so a reader that
 * sees the file sees all of it.
 */
aagw_err_t aagw_sandbox_write_file(const aagw_sandbox_t *sb, const char *path,
                                   char *errstr, size_t errstr_size);

#ifdef __cplusplus
}
#endif
#endif /* AAGW_GATEWAY_H */
