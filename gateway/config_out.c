/*
 * gateway/config_out.c: the configuration printed: `aagw config dump`
 * (every effective value, secrets masked) and the key reference.
 */
#include "config_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* -------------------------------- OUTPUT ------------------------------- */

/* Write 's' as a YAML double-quoted scalar. */
void aagw_config_yaml_quote(FILE *out, const char *s) {
        fputc('"', out);
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;
                /* YAML allows no C1 control (U+0080-U+009F) and neither
                 * U+FFFE nor U+FFFF unescaped, and reads U+0085, U+2028
                 * and U+2029 as line breaks: write them as escapes of the
                 * same code point, or the dump would not load back as it
                 * was. */
                if (c == 0xc2 && (unsigned char)s[1] >= 0x80 &&
                    (unsigned char)s[1] <= 0x9f) {
                        fprintf(out, "\\x%02x", (unsigned char)s[1]);
                        s++;
                        continue;
                }
                if (c == 0xe2 && (unsigned char)s[1] == 0x80 &&
                    ((unsigned char)s[2] == 0xa8 || (unsigned char)s[2] == 0xa9)) {
                        fputs(s[2] == (char)0xa8 ? "\\L" : "\\P", out);
                        s += 2;
                        continue;
                }
                if (c == 0xef && (unsigned char)s[1] == 0xbf &&
                    ((unsigned char)s[2] == 0xbe || (unsigned char)s[2] == 0xbf)) {
                        fprintf(out, "\\uFFF%c", s[2] == (char)0xbe ? 'E' : 'F');
                        s += 2;
                        continue;
                }
                /* The loader reads "${" as an environment reference and
                 * "$${" as a literal "${": keep a literal one literal. */
                if (c == '$' && s[1] == '{') {
                        fputs("$$", out);
                        continue;
                }
                if (c == '"' || c == '\\')
                        fprintf(out, "\\%c", c);
                else if (c == '\n')
                        fputs("\\n", out);
                else if (c == '\t')
                        fputs("\\t", out);
                else if (c < 0x20 || c == 0x7f)
                        fprintf(out, "\\x%02x", c);
                else
                        fputc(c, out);
        }
        fputc('"', out);
}

static bool plain_type(enum cfg_type t) {
        return t == CT_INT || t == CT_BOOL || t == CT_ENUM ||
               t == CT_DURATION;
}

static void dump_value(FILE *out, const struct cfg_key *k,
                       const struct cfg_val *v, const char *name,
                       int indent) {
        if (!v || (!v->n && !gw_cfg_is_list_type(k->type) && k->type != CT_PROPS)) {
                fprintf(out, "%*s# %s: (unset)\n", indent, "", name);
                return;
        }
        if (k->type == CT_PROPS) {
                fprintf(out, "%*s%s:%s\n", indent, "", name, v->n ? "" : " {}");
                for (size_t i = 0; i + 1 < v->n; i += 2) {
                        fprintf(out, "%*s", indent + 2, "");
                        aagw_config_yaml_quote(out, v->items[i]);
                        fputs(": ", out);
                        aagw_config_yaml_quote(out, aagw_key_is_secret(v->items[i])
                                            ? AAGW_REDACTED
                                            : v->items[i + 1]);
                        fputc('\n', out);
                }
                return;
        }
        if (gw_cfg_is_list_type(k->type)) {
                fprintf(out, "%*s%s:%s\n", indent, "", name, v->n ? "" : " []");
                for (size_t i = 0; i < v->n; i++) {
                        fprintf(out, "%*s- ", indent + 2, "");
                        aagw_config_yaml_quote(out, v->items[i]);
                        fputc('\n', out);
                }
                return;
        }
        fprintf(out, "%*s%s: ", indent, "", name);
        if (k->flags & CF_SECRET)
                aagw_config_yaml_quote(out, AAGW_REDACTED);
        else if (plain_type(k->type))
                fputs(v->items[0], out);
        else
                aagw_config_yaml_quote(out, v->items[0]);
        fputc('\n', out);
}

/* Print every key of the table in table order, opening and closing YAML
 * sections as the dotted paths change.  Instance patterns ("clusters.*")
 * are printed once per instance with all their keys. */
void aagw_config_dump(const aagw_config_t *cfg, FILE *out) {
        char prev_top[64] = "", prev_sub[64] = "";

        fputs("# aagw effective configuration (secrets redacted)\n", out);
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++) {
                const char *dot  = strchr(k->path, '.');
                size_t      tlen = (size_t)(dot - k->path);
                char        top[64];
                snprintf(top, sizeof(top), "%.*s", (int)tlen, k->path);
                const char *star = strstr(k->path, ".*.");
                if (strcmp(top, prev_top)) {
                        fprintf(out, "%s:\n", top);
                        snprintf(prev_top, sizeof(prev_top), "%s", top);
                        *prev_sub = '\0';
                }
                if (!star) {
                        /* "section.name", or "section.sub.name" (admin.tls.*)
                         * under a "sub:" mapping opened once. */
                        const char *dot2 = strchr(dot + 1, '.');
                        char        sub[64];
                        if (!dot2) {
                                *prev_sub = '\0';
                                dump_value(out, k, gw_cfg_val_find(cfg, k->path),
                                           dot + 1, 2);
                                continue;
                        }
                        snprintf(sub, sizeof(sub), "%.*s",
                                 (int)(dot2 - dot - 1), dot + 1);
                        if (strcmp(sub, prev_sub)) {
                                fprintf(out, "  %s:\n", sub);
                                snprintf(prev_sub, sizeof(prev_sub), "%s", sub);
                        }
                        dump_value(out, k, gw_cfg_val_find(cfg, k->path),
                                   dot2 + 1, 4);
                        continue;
                }
                char kind[128];
                snprintf(kind, sizeof(kind), "%.*s",
                         (int)(star - k->path), k->path);
                /* "clusters" instances sit right under their section;
                 * "unify.topics" ones under a "topics:" sub-mapping. */
                const char *sub    = strchr(kind, '.');
                int         indent = sub ? 4 : 2;
                size_t      ninst  = aagw_config_instance_cnt(cfg, kind);
                if (sub)
                        fprintf(out, "  %s:%s\n", sub + 1, ninst ? "" : " {}");
                else if (!ninst)
                        fprintf(out, "  {}\n");
                for (size_t i = 0; i < ninst; i++) {
                        const char *in = aagw_config_instance(cfg, kind, i);
                        fprintf(out, "%*s%s:\n", indent, "", in);
                        for (const struct cfg_key *k2 = k; k2->path; k2++) {
                                if (strncmp(k2->path, kind, strlen(kind)) ||
                                    strncmp(k2->path + strlen(kind), ".*.", 3))
                                        continue;
                                char        path[512];
                                const char *leaf = k2->path + strlen(kind) + 3;
                                snprintf(path, sizeof(path), "%s.%s.%s", kind,
                                         in, leaf);
                                const struct cfg_val *v = gw_cfg_val_find(cfg, path);
                                if (!v && !(k2->flags & CF_REQUIRED))
                                        continue;
                                dump_value(out, k2, v, leaf, indent + 2);
                        }
                }
                /* Skip the remaining rows of this instance pattern. */
                while (k[1].path && !strncmp(k[1].path, kind, strlen(kind)) &&
                       !strncmp(k[1].path + strlen(kind), ".*.", 3))
                        k++;
        }
}

static const char *type_text(const struct cfg_key *k, char *buf, size_t size) {
        char a[160], b[32];
        switch (k->type) {
        case CT_STR:
                return "string";
        case CT_NAME:
                return "name (A-Z a-z 0-9 . _ -)";
        case CT_ALIAS:
                return "cluster alias";
        case CT_INT:
                snprintf(buf, size, "integer, %" PRId64 " to %" PRId64,
                         k->min, k->max);
                return buf;
        case CT_BOOL:
                return "boolean";
        case CT_ENUM:
                gw_cfg_choices_text(k->choices, a, sizeof(a));
                snprintf(buf, size, "one of %s", a);
                return buf;
        case CT_DURATION:
                aagw_duration_format(k->min, a, sizeof(a));
                aagw_duration_format(k->max, b, sizeof(b));
                snprintf(buf, size, "duration, %s to %s", a, b);
                return buf;
        case CT_HOSTPORT:
                return "HOST:PORT";
        case CT_IDRULE:
                return "id rule: header:NAME | key | json:FIELD | hash | "
                       "derived";
        case CT_KEYRULE:
                return "key rule: key | json:FIELD";
        case CT_SEP:
                return "separator";
        case CT_LIST:
                return "list of strings";
        case CT_REGEXES:
                return "list of regexes (PCRE2/Java syntax, whole name)";
        case CT_FLOWS:
                return "list of SOURCE->TARGET";
        case CT_PROPS:
                return "mapping of librdkafka properties";
        }
        return "?";
}

static void def_text(const struct cfg_key *k, char *buf, size_t size) {
        size_t o = 0;
        if (!k->def) {
                snprintf(buf, size, "%s",
                         (k->flags & CF_REQUIRED) ? "required" : "unset");
                return;
        }
        for (const char *p = k->def; *p && o + 3 < size; p++) {
                if (*p == '\n') {
                        buf[o++] = ',';
                        buf[o++] = ' ';
                } else
                        buf[o++] = *p;
        }
        buf[o] = '\0';
}

void aagw_config_reference(FILE *out, bool markdown) {
        char tbuf[256], d[256];

        for (const struct cfg_key *k = aagw_config_keys; k->path; k++) {
                const char *t = type_text(k, tbuf, sizeof(tbuf));
                def_text(k, d, sizeof(d));
                if (markdown) {
                        fprintf(out, "### `%s`\n\n", k->path);
                        fprintf(out, "- type: %s\n", t);
                        fprintf(out, "- default: %s%s%s\n",
                                k->def ? "`" : "", d, k->def ? "`" : "");
                        if (k->flag)
                                fprintf(out, "- flag: `%s`\n", k->flag);
                        if (k->flags & CF_SECRET)
                                fprintf(out, "- secret: redacted in all "
                                             "output\n");
                        /* Markdown would take <id> for an HTML tag. */
                        fputc('\n', out);
                        for (const char *p = k->desc; *p; p++) {
                                if (*p == '<')
                                        fputs("&lt;", out);
                                else if (*p == '>')
                                        fputs("&gt;", out);
                                else
                                        fputc(*p, out);
                        }
                        fputs("\n\n", out);
                        continue;
                }
                fprintf(out, "%s\n    %s; default: %s%s%s\n", k->path, t, d,
                        k->flag ? "; flag: " : "", k->flag ? k->flag : "");
                /* Wrap the description at 76 columns, indented. */
                const char *p = k->desc;
                while (*p) {
                        size_t len = strlen(p), cut = len;
                        if (len > 72) {
                                cut = 72;
                                while (cut > 0 && p[cut] != ' ')
                                        cut--;
                                if (cut == 0)
                                        cut = 72;
                        }
                        fprintf(out, "    %.*s\n", (int)cut, p);
                        p += cut;
                        while (*p == ' ')
                                p++;
                }
        }
}
