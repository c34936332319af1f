/*
 * aagw - active-active replication gateway for Kafka
 *
 * replicator/aagw_replicator.h: the only replicator header other folders may
 * include.  replicator/ owns every librdkafka data-path client: building
 * client configurations, the flows that consume one cluster and produce to
 * another, and the admin handle kept apart from the data path.
 */
#ifndef AAGW_REPLICATOR_H
#define AAGW_REPLICATOR_H

#include <librdkafka/rdkafka.h>

#include "aagw_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --------------------------- CLIENT SETTINGS --------------------------- */

/**
 * @brief Set one librdkafka property on @p conf.
 *
 * @returns AAGW_OK, or AAGW_ERR_CONFIG with "NAME: reason" in @p errstr
 * (librdkafka's own reason: unknown property, invalid value, ...).  Secret
 * values never appear in the message.
 */
aagw_err_t aagw_kafka_conf_set(rd_kafka_conf_t *conf, const char *name,
                               const char *value, char *errstr,
                               size_t errstr_size);

/**
 * @brief A new client configuration for a cluster, with aagw's defaults
 * (reconnect backoff capped at 1 s, client.id "aagw-<role>") and the
 * bootstrap list set.  User properties are applied on top by the caller with
 * aagw_kafka_conf_set().
 *
 * @returns a conf the caller owns (rd_kafka_conf_destroy(), or pass it to
 * rd_kafka_new() which takes it), or NULL with the reason in @p errstr.
 */
rd_kafka_conf_t *aagw_kafka_conf_new(const char *bootstraps, const char *role,
                                     char *errstr, size_t errstr_size);

#ifdef __cplusplus
}
#endif
#endif /* AAGW_REPLICATOR_H */
