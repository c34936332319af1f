/* policy/lww.c: the last-write-wins order.  A version is (hybrid logical
 * clock, origin alias, global id); comparing them the same way at every
 * site is what makes the sites converge on one winner per entity without
 * talking to each other. */
#include "aagw_policy.h"

#include <string.h>

/* Bytewise, a proper prefix first. */
static int bytes_cmp(const void *a, size_t al, const void *b, size_t bl) {
        int c = memcmp(a, b, al < bl ? al : bl);
        if (c)
                return c;
        return al < bl ? -1 : al > bl;
}

int aagw_version_cmp(const struct aagw_version *a,
                     const struct aagw_version *b) {
        if (a->hlc != b->hlc)
                return a->hlc < b->hlc ? -1 : 1;
        int c = bytes_cmp(a->origin, strnlen(a->origin, sizeof(a->origin)),
                          b->origin, strnlen(b->origin, sizeof(b->origin)));
        if (c)
                return c < 0 ? -1 : 1;
        size_t al = a->id_len < sizeof(a->id) ? a->id_len : sizeof(a->id);
        size_t bl = b->id_len < sizeof(b->id) ? b->id_len : sizeof(b->id);
        c         = bytes_cmp(a->id, al, b->id, bl);
        return c < 0 ? -1 : c > 0;
}
