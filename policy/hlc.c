/* policy/hlc.c: the hybrid logical clock of provenance.
 *
 * Packing milliseconds above a 16-bit counter makes the HLC rules plain
 * integer arithmetic: "same millisecond, counter + 1, carry into the next
 * millisecond on overflow" is just +1, and the receive rule is a max.  No
 * function reads a clock, so every rule is testable with any wall time,
 * including one that steps backwards. */
#include "policy_int.h"

#include <string.h>

uint64_t aagw_hlc_make(int64_t ms, uint16_t counter) {
        if (ms < 0)
                ms = 0;
        if (ms > AAGW_HLC_MS_MAX)
                ms = AAGW_HLC_MS_MAX;
        return (uint64_t)ms << 16 | counter;
}

int64_t aagw_hlc_ms(uint64_t hlc) {
        return (int64_t)(hlc >> 16);
}

uint16_t aagw_hlc_counter(uint64_t hlc) {
        return (uint16_t)(hlc & 0xffff);
}

/* The smallest HLC after 'h'; it saturates rather than wrap to 0, which
 * would send the clock back to 1970 (reachable only in year 10889 or from
 * a forged remote value). */
static uint64_t after(uint64_t h) {
        return h == UINT64_MAX ? h : h + 1;
}

static uint64_t max2(uint64_t a, uint64_t b) {
        return a > b ? a : b;
}

uint64_t aagw_hlc_tick(uint64_t *clock, int64_t wall_ms) {
        /* (wall, 0) if the wall clock moved past us, else (ms, counter+1). */
        *clock = max2(aagw_hlc_make(wall_ms, 0), after(*clock));
        return *clock;
}

uint64_t aagw_hlc_merge(uint64_t *clock, uint64_t remote, int64_t wall_ms) {
        /* The receive rule of Kulkarni et al.: the new millisecond is the
         * largest of ours, theirs and the wall's; the counter continues
         * from whichever of ours and theirs had that millisecond, or
         * restarts at 0 if only the wall clock had it.  In packed form
         * that is max((wall, 0), max(ours, theirs) + 1). */
        *clock = max2(aagw_hlc_make(wall_ms, 0), after(max2(*clock, remote)));
        return *clock;
}

bool aagw_hlc_plausible(uint64_t hlc, int64_t wall_ms, int64_t max_drift_ms) {
        int64_t ms = aagw_hlc_ms(hlc);

        if (max_drift_ms < 0)
                max_drift_ms = 0;
        if (wall_ms >= ms)
                return true;
        /* ms <= 2^48 and wall_ms >= INT64_MIN: the difference fits. */
        return (uint64_t)ms - (uint64_t)wall_ms <= (uint64_t)max_drift_ms;
}

size_t aagw_hlc_format(uint64_t hlc, char *buf, size_t size) {
        char   tmp[32];
        size_t n;

        n        = policy_fmt_dec(tmp, (uint64_t)aagw_hlc_ms(hlc));
        tmp[n++] = ':';
        n += policy_fmt_dec(tmp + n, aagw_hlc_counter(hlc));
        if (size) {
                size_t c = n < size ? n : size - 1;
                memcpy(buf, tmp, c);
                buf[c] = '\0';
        }
        return n;
}

bool aagw_hlc_parse(const char *text, size_t len, uint64_t *hlc) {
        const char *colon = text ? memchr(text, ':', len) : NULL;
        uint64_t    ms, counter;

        if (!colon ||
            !policy_parse_dec(text, (size_t)(colon - text),
                              (uint64_t)AAGW_HLC_MS_MAX, &ms) ||
            !policy_parse_dec(colon + 1, len - (size_t)(colon - text) - 1,
                              0xffff, &counter))
                return false;
        *hlc = ms << 16 | counter;
        return true;
}
