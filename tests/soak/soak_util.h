/*
 * aagw - active-active replication gateway for Kafka
 *
 * tests/soak/soak_util.h: what the soak program needs besides the harness:
 * a string -> integer hash map, a bare HTTP GET with a deadline (for the
 * admin endpoint's /healthz and /metrics), and Prometheus text helpers.
 */
#ifndef AAGW_SOAK_UTIL_H
#define AAGW_SOAK_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------- STRING MAP ------------------------------- */

/** Open-addressing map from byte strings (copied) to an int64. */
struct smap {
        char   **k;
        size_t  *klen;
        int64_t *v;
        size_t   cap, cnt;
};

/** @returns the value slot of @p key, or NULL if absent. */
int64_t *smap_get(const struct smap *m, const char *key, size_t len);

/** @returns the value slot of @p key, inserted with @p init if absent;
 *  aborts if out of memory (a test program). */
int64_t *smap_put(struct smap *m, const char *key, size_t len, int64_t init);

/** Iterate: @returns the next used index >= @p *i, or false at the end. */
bool smap_next(const struct smap *m, size_t *i);

void smap_deinit(struct smap *m);

/* ------------------------------- HTTP ---------------------------------- */

/**
 * @brief GET http://@p addr@p path (addr "HOST:PORT", IPv4 literal) with
 * HTTP/1.0, everything within @p timeout_ms.
 * @returns the status code (e.g. 200, 503), or -1 if there was no answer
 * (connect refused, timeout); the body (malloc()ed, NUL-terminated) in
 * @p body if not NULL, NULL when there was none.
 */
int soak_http_get(const char *addr, const char *path, int timeout_ms,
                  char **body);

/* ---------------------------- PROMETHEUS ------------------------------- */

/**
 * @returns the sum of every sample of metric @p name (any labels) in the
 * Prometheus text @p text; @p found (may be NULL) tells whether there was
 * one; @p min (may be NULL) receives the smallest sample.
 */
double soak_metric_sum(const char *text, const char *name, bool *found,
                       double *min);

/**
 * @brief Append to @p out every sample of metric @p name as
 * "short{labels}=value " (short: @p name without the "aagw_" prefix).
 */
void soak_metric_lines(const char *text, const char *name, char *out,
                       size_t size);

/** @returns the int64 after "\"field\":" in a JSON text we wrote
 *  ourselves, or @p dflt. */
int64_t soak_json_int(const char *json, size_t len, const char *field,
                      int64_t dflt);

/** @brief Copy the string value of "\"field\":\"...\"" into @p out.
 *  @returns false if absent or too long. */
bool soak_json_str(const char *json, size_t len, const char *field, char *out,
                   size_t size);

#endif
