/*
 * gateway/admin_int.h: what the admin endpoint (admin.c) and its /metrics
 * rendering (metrics.c) share.  Not for the rest of gateway/.
 */
#ifndef GW_ADMIN_INT_H
#define GW_ADMIN_INT_H

#include "gateway_int.h"

/* A growing text buffer; p is NULL until the first write. */
struct sbuf {
        char  *p;
        size_t len, cap;
};

/* Append to 'b' (nothing when out of memory). */
void gw_sb_printf(struct sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A lag as text: the number, or "NaN" when unknown (< 0). */
const char *gw_lag_str(int64_t lag, char buf[24]);

/* The unify outcomes in the order of gw_unify_outcome_values(). */
extern const char *const gw_unify_outcomes[5];
void gw_unify_outcome_values(const struct aagw_unify_stats *st, uint64_t v[5]);

/* The /metrics body for 'v' (malloc()ed), or NULL: out of memory. */
char *gw_metrics(const struct gw_admin_view *v);

#endif
