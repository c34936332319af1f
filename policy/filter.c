/* policy/filter.c: include/exclude regex lists for topics and groups.
 *
 * Patterns are POSIX extended regexes (regcomp(3), REG_EXTENDED |
 * REG_NOSUB) that must match the whole name, as Java's
 * Pattern.matcher().matches() does in MirrorMaker 2's filters: "clicks"
 * matches only "clicks".  We get that by compiling "^(" pattern ")$". */
#include "policy_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Wrapping a pattern in "^(...)$" is only faithful if the pattern's own
 * parentheses balance.  glibc treats an unmatched ')' in an ERE as a
 * literal, so "a)b" alone means the text "a)b", but wrapped it would close
 * our group early: "^(a)b)$" matches "ab)".  Find such a ')' (outside
 * bracket expressions and escapes) so it can be refused instead.
 * Unterminated brackets are left for regcomp() to report. */
static bool has_unmatched_rparen(const char *pat) {
        int depth = 0;

        for (const char *p = pat; *p; p++) {
                if (*p == '\\') {
                        if (p[1])
                                p++;
                        continue;
                }
                if (*p == '[') {
                        /* A ']' first in the list (after an optional '^')
                         * is a literal; "[:class:]", "[=e=]" and "[.c.]"
                         * may hold a ']' of their own. */
                        p++;
                        if (*p == '^')
                                p++;
                        if (*p == ']')
                                p++;
                        while (*p && *p != ']') {
                                if (*p == '[' && (p[1] == ':' || p[1] == '=' ||
                                                  p[1] == '.')) {
                                        char        d = p[1];
                                        const char *q = p + 2;
                                        while (*q &&
                                               !(q[0] == d && q[1] == ']'))
                                                q++;
                                        if (!*q)
                                                return false;
                                        p = q + 2;
                                        continue;
                                }
                                p++;
                        }
                        if (!*p)
                                return false;
                        continue;
                }
                if (*p == '(')
                        depth++;
                else if (*p == ')' && depth-- == 0)
                        return true;
        }
        return false;
}

/* Compile one pattern, anchored, into 're'.  Returns 0, or -1 with
 * "what[i] \"pattern\": reason" in 'errstr' (regerror()'s text when
 * regcomp() refuses it). */
static int compile_one(regex_t *re, const char *what, size_t i, const char *pat,
                       char *errstr, size_t errstr_size) {
        char   rerr[256];
        char  *anchored;
        size_t len;
        int    rc;

        if (!pat || !*pat) {
                snprintf(errstr, errstr_size,
                         "%s[%zu] \"%s\": empty regular expression", what, i,
                         pat ? pat : "");
                return -1;
        }
        /* The bare pattern first, so regerror() describes what the user
         * wrote rather than our wrapped version of it. */
        rc = regcomp(re, pat, REG_EXTENDED | REG_NOSUB);
        if (rc) {
                regerror(rc, re, rerr, sizeof(rerr));
                snprintf(errstr, errstr_size, "%s[%zu] \"%s\": %s", what, i,
                         pat, rerr);
                return -1;
        }
        regfree(re);
        if (has_unmatched_rparen(pat)) {
                snprintf(errstr, errstr_size,
                         "%s[%zu] \"%s\": unmatched ) (write \\) for a "
                         "literal parenthesis)",
                         what, i, pat);
                return -1;
        }
        len      = strlen(pat);
        anchored = malloc(len + 5);
        if (!anchored) {
                snprintf(errstr, errstr_size, "out of memory");
                return -1;
        }
        memcpy(anchored, "^(", 2);
        memcpy(anchored + 2, pat, len);
        memcpy(anchored + 2 + len, ")$", 3);
        rc = regcomp(re, anchored, REG_EXTENDED | REG_NOSUB);
        free(anchored);
        if (rc) {
                regerror(rc, re, rerr, sizeof(rerr));
                snprintf(errstr, errstr_size, "%s[%zu] \"%s\": %s", what, i,
                         pat, rerr);
                return -1;
        }
        return 0;
}

int policy_filter_add(struct policy_filter *f, const char *what,
                      const char *const *pats, size_t cnt, char *errstr,
                      size_t errstr_size) {
        regex_t *res;

        if (!cnt)
                return 0;
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
                regfree(&f->res[i]);
        free(f->res);
        f->res = NULL;
        f->cnt = 0;
}

bool policy_filter_match(const struct policy_filter *f, const char *name) {
        for (size_t i = 0; i < f->cnt; i++)
                if (!regexec(&f->res[i], name, 0, NULL, 0))
                        return true;
        return false;
}
