/* policy/filter.c: include/exclude regex lists for topics and groups.
 *
 * Patterns follow MirrorMaker 2, which compiles them with Java's
 * java.util.regex and tests Pattern.matcher(name).matches(): the pattern
 * must match the whole name, and the syntax is Perl's family (\d, (?i),
 * lazy and possessive quantifiers, lookaround).  PCRE2 speaks the same
 * dialect for everything a topic or group pattern needs, so an MM2 list
 * means the same here.  We do not wrap the pattern in "^(...)$": the
 * PCRE2_ANCHORED | PCRE2_ENDANCHORED options give whole-name matching
 * while the user's own parentheses keep their meaning, and PCRE2's error
 * offsets point into what the user wrote.
 *
 * PCRE2's nesting limit (250 parentheses) and a match limit bound both
 * compile and match: a hostile pattern is an error, never a deep stack. */
#include "policy_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Generous for topic names (at most 249 characters) yet small enough that
 * a pathological pattern fails fast instead of spinning. */
#define FILTER_MATCH_LIMIT 1000000u

/* Compile one pattern into '*out'.  Returns 0, or -1 with
 * "what[i] \"pattern\": reason at offset N" in 'errstr'; a pattern longer
 * than 64 bytes is shown cut, so the reason always fits. */
static int compile_one(pcre2_code **out, const char *what, size_t i,
                       const char *pat, char *errstr, size_t errstr_size) {
        int         ecode;
        PCRE2_SIZE  eoff;
        PCRE2_UCHAR msg[256];

        if (!pat || !*pat) {
                snprintf(errstr, errstr_size,
                         "%s[%zu] \"%s\": empty regular expression", what, i,
                         pat ? pat : "");
                return -1;
        }
        *out = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                             PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_UTF |
                                 PCRE2_MATCH_INVALID_UTF,
                             &ecode, &eoff, NULL);
        if (!*out) {
                size_t len = strlen(pat);

                pcre2_get_error_message(ecode, msg, sizeof(msg));
                snprintf(errstr, errstr_size,
                         "%s[%zu] \"%.*s%s\": %s at offset %zu", what, i,
                         len > 64 ? 60 : (int)len, pat,
                         len > 64 ? "..." : "", (const char *)msg,
                         (size_t)eoff);
                return -1;
        }
        return 0;
}

int aagw_regex_check(const char *pat, char *errstr, size_t errstr_size) {
        pcre2_code *re = NULL;
        char        why[512];

        if (compile_one(&re, "regex", 0, pat, why, sizeof(why))) {
                /* Drop the "regex[0] " list prefix: the caller names the
                 * key itself. */
                snprintf(errstr, errstr_size, "%s", why + strlen("regex[0] "));
                return -1;
        }
        pcre2_code_free(re);
        return 0;
}

int policy_filter_add(struct policy_filter *f, const char *what,
                      const char *const *pats, size_t cnt, char *errstr,
                      size_t errstr_size) {
        pcre2_code **res;

        if (!cnt)
                return 0;
        if (!f->mctx) {
                f->mctx = pcre2_match_context_create(NULL);
                if (!f->mctx) {
                        snprintf(errstr, errstr_size, "out of memory");
                        return -1;
                }
                pcre2_set_match_limit(f->mctx, FILTER_MATCH_LIMIT);
        }
        res = realloc(f->res, (f->cnt + cnt) * sizeof(*res));
        if (!res) {
                snprintf(errstr, errstr_size, "out of memory");
                return -1;
        }
        f->res = res;
        for (size_t i = 0; i < cnt; i++) {
                if (compile_one(&f->res[f->cnt], what, i, pats[i], errstr,
                                errstr_size))
                        return -1;
                f->cnt++;
        }
        return 0;
}

void policy_filter_deinit(struct policy_filter *f) {
        for (size_t i = 0; i < f->cnt; i++)
                pcre2_code_free(f->res[i]);
        free(f->res);
        pcre2_match_context_free(f->mctx);
        f->res  = NULL;
        f->mctx = NULL;
        f->cnt  = 0;
}

/* Filters are consulted when topics and groups are discovered, not per
 * record, so a match-data block per call is cheap and keeps a policy
 * shared by several flow threads free of locks.  A match that hits the
 * limit (or fails on memory) counts as "no match": an include list then
 * leaves the name out, an exclude list lets it through, and the name is
 * looked at again at the next discovery. */
bool policy_filter_match(const struct policy_filter *f, const char *name) {
        pcre2_match_data *md;
        bool              hit = false;

        if (!f->cnt)
                return false;
        md = pcre2_match_data_create(1, NULL);
        if (!md)
                return false;
        for (size_t i = 0; i < f->cnt && !hit; i++)
                hit = pcre2_match(f->res[i], (PCRE2_SPTR)name,
                                  PCRE2_ZERO_TERMINATED, 0, 0, md,
                                  f->mctx) >= 0;
        pcre2_match_data_free(md);
        return hit;
}
