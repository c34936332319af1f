/*
 * gateway/cli_config.c: command-line flags as config overrides, and the
 * `aagw config check|reference` command.
 */
#include "gateway_int.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Long-option codes: table rows get 1000+row, the rest below. */
enum {
        OPT_CONFIG = 'c',
        OPT_HELP   = 'h',
        OPT_CLUSTER = 900,
        OPT_SET,
        OPT_DURATION,
        OPT_DUMP,
        OPT_MARKDOWN,
        OPT_CONNECT,
        OPT_TABLE = 1000,
};

#define MAX_FLAG_ARGS 256

struct pending {
        const char *key;   /* NULL for --cluster / --set (parsed later) */
        const char *value;
        const char *flag;  /* "--policy" */
        int         opt;
};

void gw_config_flags_usage(FILE *out) {
        fprintf(out, "  -c, --config FILE              YAML config file\n"
                     "      --cluster ALIAS=BOOTSTRAPS\n"
                     "                                 clusters.ALIAS."
                     "bootstrap_servers (repeatable)\n");
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++) {
                char left[64];
                if (!k->flag || !strcmp(k->flag, "--cluster"))
                        continue;
                const char *arg = k->type == CT_ENUM ? k->choices : "VALUE";
                switch (k->type) {
                case CT_REGEXES:
                        arg = "REGEX";
                        break;
                case CT_ALIAS:
                        arg = "ALIAS";
                        break;
                case CT_HOSTPORT:
                        arg = "HOST:PORT";
                        break;
                case CT_IDRULE:
                        arg = "RULE";
                        break;
                case CT_BOOL:
                        arg = "true|false";
                        break;
                case CT_NAME:
                        arg = "NAME";
                        break;
                case CT_STR:
                        arg = strstr(k->path, "dir") ? "DIR" : "FILE";
                        break;
                default:
                        break;
                }
                bool is_list = k->type == CT_REGEXES || k->type == CT_LIST;
                snprintf(left, sizeof(left), "%s %s", k->flag, arg);
                if (strlen(left) > 25)
                        fprintf(out, "      %s\n%33s%s%s\n", left, "", k->path,
                                is_list ? " (repeatable)" : "");
                else
                        fprintf(out, "      %-27s%s%s\n", left, k->path,
                                is_list ? " (repeatable)" : "");
        }
        fprintf(out, "      --set KEY=VALUE            any config key, e.g.\n"
                     "                                 --set "
                     "replication.multi_hop=true\n");
}

/* "aagw: warning: FILE:LINE: KEY: ignored: why" for settings a file gave
 * that aagw does not apply (an mm2.properties file's MM2-only keys). */
static void print_warnings(const aagw_config_t *cfg) {
        const char *w = aagw_config_warnings(cfg);
        while (*w) {
                const char *nl = strchr(w, '\n');
                int         n  = nl ? (int)(nl - w) : (int)strlen(w);
                fprintf(stderr, "aagw: warning: %.*s\n", n, w);
                w += n + (nl ? 1 : 0);
        }
}

void gw_config_print_errors(const aagw_config_t *cfg) {
        const char *e = aagw_config_errors(cfg);
        while (*e) {
                const char *nl = strchr(e, '\n');
                int         n  = nl ? (int)(nl - e) : (int)strlen(e);
                fprintf(stderr, "aagw: %.*s\n", n, e);
                e += n + (nl ? 1 : 0);
        }
}

int gw_config_from_args(int argc, char **argv, unsigned opts,
                        void (*usage)(FILE *out), aagw_config_t **cfgp,
                        struct gw_run_opts *ro) {
        struct option  longopts[64];
        struct pending pend[MAX_FLAG_ARGS];
        size_t         nlong = 0, npend = 0;
        aagw_config_t *cfg;
        int            opt;
        bool           bad = false;

        memset(ro, 0, sizeof(*ro));
        ro->duration_s = -1;
        longopts[nlong++] = (struct option){"config", required_argument, NULL,
                                            OPT_CONFIG};
        longopts[nlong++] = (struct option){"help", no_argument, NULL, OPT_HELP};
        longopts[nlong++] = (struct option){"cluster", required_argument, NULL,
                                            OPT_CLUSTER};
        longopts[nlong++] = (struct option){"set", required_argument, NULL,
                                            OPT_SET};
        if (opts & GW_OPTS_CONNECT)
                longopts[nlong++] = (struct option){"connect", no_argument,
                                                    NULL, OPT_CONNECT};
        if (opts & GW_OPTS_RUN) {
                longopts[nlong++] = (struct option){"duration",
                                                    required_argument, NULL,
                                                    OPT_DURATION};
                longopts[nlong++] = (struct option){"dump-config", no_argument,
                                                    NULL, OPT_DUMP};
        }
        for (size_t i = 0; aagw_config_keys[i].path; i++) {
                const struct cfg_key *k = &aagw_config_keys[i];
                if (!k->flag || !strcmp(k->flag, "--cluster"))
                        continue;
                longopts[nlong++] = (struct option){k->flag + 2,
                                                    required_argument, NULL,
                                                    OPT_TABLE + (int)i};
        }
        longopts[nlong] = (struct option){NULL, 0, NULL, 0};

        optind = 1;
        opterr = 0;
        while ((opt = getopt_long(argc, argv, ":c:h", longopts, NULL)) != -1) {
                if (opt == OPT_HELP) {
                        usage(stdout);
                        return GW_HELP_SHOWN;
                }
                if (opt == ':') {
                        gw_errorf("%s requires an argument", argv[optind - 1]);
                        usage(stderr);
                        return EXIT_USAGE;
                }
                if (opt == '?') {
                        if (optopt)
                                gw_errorf("unknown option -%c", optopt);
                        else
                                gw_errorf("unknown option %s",
                                          argv[optind - 1]);
                        usage(stderr);
                        return EXIT_USAGE;
                }
                if (opt == OPT_CONFIG) {
                        ro->config_path = optarg;
                        continue;
                }
                if (opt == OPT_DURATION) {
                        char *end;
                        long  d = strtol(optarg, &end, 10);
                        int64_t ms;
                        if (*end == '\0' && end != optarg && d >= 0 &&
                            d <= 86400 * 365)
                                ro->duration_s = (int)d;
                        else if (aagw_duration_parse(optarg, &ms) == 0 &&
                                 ms >= 1000)
                                ro->duration_s = (int)(ms / 1000);
                        else {
                                gw_errorf("--duration: expected seconds or a "
                                          "duration such as 30s or 5m, got "
                                          "\"%s\"",
                                          optarg);
                                return EXIT_USAGE;
                        }
                        continue;
                }
                if (opt == OPT_DUMP) {
                        ro->dump_config = true;
                        continue;
                }
                if (opt == OPT_CONNECT) {
                        ro->connect = true;
                        continue;
                }
                if (npend == MAX_FLAG_ARGS) {
                        gw_errorf("too many options");
                        return EXIT_USAGE;
                }
                pend[npend].opt   = opt;
                pend[npend].value = optarg;
                pend[npend].key   = opt >= OPT_TABLE
                                        ? aagw_config_keys[opt - OPT_TABLE].path
                                        : NULL;
                pend[npend].flag  = opt >= OPT_TABLE
                                        ? aagw_config_keys[opt - OPT_TABLE].flag
                                        : opt == OPT_CLUSTER ? "--cluster"
                                                             : "--set";
                npend++;
        }
        if (optind < argc) {
                gw_errorf("unexpected argument '%s'", argv[optind]);
                usage(stderr);
                return EXIT_USAGE;
        }

        if (!(cfg = aagw_config_new())) {
                gw_errorf("out of memory");
                return EXIT_RUNTIME;
        }
        if (ro->config_path) {
                aagw_config_load_file(cfg, ro->config_path);
                if (aagw_config_from_mm2(cfg))
                        fprintf(stderr,
                                "aagw: %s: read as a MirrorMaker 2 properties "
                                "file (`aagw config import-mm2 %s` prints it "
                                "as aagw YAML)\n",
                                ro->config_path, ro->config_path);
                print_warnings(cfg);
        }

        /* Flags after the file, so they override it. */
        for (size_t i = 0; i < npend; i++) {
                struct pending *p = &pend[i];
                char            key[1024];
                const char     *eq;

                if (p->key) {
                        aagw_config_set(cfg, p->key, p->value, p->flag);
                        continue;
                }
                eq = strchr(p->value, '=');
                if (!eq || eq == p->value) {
                        gw_errorf("%s: expected %s, got \"%s\"", p->flag,
                                  p->opt == OPT_CLUSTER ? "ALIAS=BOOTSTRAPS"
                                                        : "KEY=VALUE",
                                  p->value);
                        bad = true;
                        continue;
                }
                if (p->opt == OPT_CLUSTER)
                        snprintf(key, sizeof(key),
                                 "clusters.%.*s.bootstrap_servers",
                                 (int)(eq - p->value), p->value);
                else
                        snprintf(key, sizeof(key), "%.*s",
                                 (int)(eq - p->value), p->value);
                aagw_config_set(cfg, key, eq + 1, p->flag);
        }
        /* Validate even after load errors: one run should list every
         * mistake, not make the user fix them one at a time. */
        aagw_config_validate(cfg);
        if (*aagw_config_errors(cfg) || bad) {
                gw_config_print_errors(cfg);
                aagw_config_destroy(cfg);
                return EXIT_USAGE;
        }
        /* The group probes (child processes) inherit no variable the
         * file's ${VAR} references read: those hold the secrets. */
        const char *const *refs;
        size_t             nrefs = aagw_config_env_refs(cfg, &refs);
        if (aagw_kafka_child_env_hide(refs, nrefs)) {
                gw_errorf("out of memory");
                aagw_config_destroy(cfg);
                return EXIT_RUNTIME;
        }
        *cfgp = cfg;
        return EXIT_OK;
}

/* ------------------------------- COMMAND ------------------------------- */

static void usage_check(FILE *out) {
        fprintf(out,
                "Usage: aagw config check [--connect] [-c FILE] [OPTIONS]\n"
                "\n"
                "Load the config file, apply the command-line overrides, "
                "validate\n"
                "everything (librdkafka properties included) and print the "
                "effective\n"
                "config as YAML with secrets redacted. Exit 0 when valid, 2 "
                "with\n"
                "FILE:LINE:COLUMN: key: reason lines on stderr when not.\n"
                "\n"
                "With --connect, instead of printing the config: log in to "
                "every\n"
                "cluster with its properties (all at once, 10 s each for "
                "the login and\n"
                "for the checks) and check what aagw does there: describe "
                "the cluster,\n"
                "read the topics it replicates, write their copies and the "
                "unified\n"
                "topics, use its consumer groups, create topics (validate "
                "only),\n"
                "idempotent writes, and under scale-out transactions (a\n"
                "transactional.id of its own).\n"
                "One line per cluster and check (\"east: login ok (...)\", "
                "\"west: create\n"
                "topics: DENIED (...)\"). Exit 0 when all pass, 1 naming "
                "each failure\n"
                "(a refused login with its cause: password, CA, client "
                "certificate,\n"
                "security.protocol), 2 for config errors.\n"
                "\nOptions:\n"
                "      --connect                  check the clusters as "
                "above\n");
        gw_config_flags_usage(out);
}

static void usage_config(FILE *out) {
        fprintf(out,
                "Usage: aagw config check [--connect] [-c FILE] [OPTIONS]\n"
                "       aagw config reference [--markdown]\n"
                "       aagw config import-mm2 [--show-secrets] [-o OUT] FILE\n"
                "\n"
                "check       validate a config and print it normalized;\n"
                "            --connect: log in to its clusters and check "
                "what aagw\n"
                "            may do there instead\n"
                "reference   describe every config key (--markdown: the text "
                "of\n"
                "            docs/configuration.md)\n"
                "import-mm2  print a MirrorMaker 2 properties file as aagw "
                "YAML;\n"
                "            keys aagw ignores are warnings, keys it cannot "
                "honour\n"
                "            errors (exit 2). Secrets become ${MM2_...} "
                "references\n"
                "            unless --show-secrets. -o OUT writes the YAML "
                "to OUT\n"
                "            (mode 0600); a PKCS#12 trust store is converted "
                "to a PEM\n"
                "            file next to it (without -o: in the current "
                "directory).\n");
}

/* The absolute directory that holds 'out' (the current one when NULL),
 * for the PEM files the import writes next to its YAML; NULL on error. */
static char *output_dir(const char *out) {
        char *dir, *abs;

        if (!out)
                return realpath(".", NULL);
        if (!(dir = strdup(out)))
                return NULL;
        abs = realpath(dirname(dir), NULL);
        free(dir);
        return abs;
}

/* `aagw config import-mm2 [--show-secrets] [-o OUT] FILE`: the YAML on
 * stdout (or in OUT, mode 0600), warnings, notes and errors on stderr.
 * The file is first checked as `-c FILE` would take it (librdkafka
 * properties included): nothing is written for a file that would not
 * run.  A PKCS#12 trust store is converted to a PEM file next to the
 * YAML (in the current directory without -o), which the YAML names. */
static int cmd_import_mm2(int argc, char **argv) {
        const char    *path = NULL, *outp = NULL;
        bool           secrets = false;
        aagw_config_t *cfg = NULL, *chk = NULL;
        char          *text = NULL, *yaml = NULL, *dir = NULL;
        size_t         tlen = 0, ylen = 0;
        FILE          *f, *mem;
        aagw_err_t     err;
        int            rc = EXIT_USAGE, fd;

        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--show-secrets"))
                        secrets = true;
                else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
                        usage_config(stdout);
                        return EXIT_OK;
                } else if (!strcmp(argv[i], "-o")) {
                        if (i + 1 == argc || outp) {
                                gw_errorf("config import-mm2: -o %s",
                                          outp ? "given twice"
                                               : "requires an argument");
                                usage_config(stderr);
                                return EXIT_USAGE;
                        }
                        outp = argv[++i];
                } else if (argv[i][0] == '-' && argv[i][1]) {
                        gw_errorf("config import-mm2: unknown option %s",
                                  argv[i]);
                        usage_config(stderr);
                        return EXIT_USAGE;
                } else if (path) {
                        gw_errorf("config import-mm2: one file only");
                        usage_config(stderr);
                        return EXIT_USAGE;
                } else
                        path = argv[i];
        }
        if (!path) {
                gw_errorf("config import-mm2: name the mm2.properties file");
                usage_config(stderr);
                return EXIT_USAGE;
        }
        if (!(f = fopen(path, "rb"))) {
                gw_errorf("%s: cannot open: %s", path, strerror(errno));
                return EXIT_USAGE;
        }
        mem = open_memstream(&text, &tlen);
        for (int c; mem && (c = getc(f)) != EOF;)
                putc(c, mem);
        fclose(f);
        if (!mem || fclose(mem)) {
                gw_errorf("%s: out of memory", path);
                free(text);
                return EXIT_RUNTIME;
        }
        /* The file through the loader, as `-c` would take it: the YAML
         * must be a config that runs. */
        if (!(chk = aagw_config_new()) || !(cfg = aagw_config_new())) {
                rc = EXIT_RUNTIME;
                goto out;
        }
        if (aagw_config_load_mm2(chk, path, text, tlen) != AAGW_OK ||
            aagw_config_validate(chk) != AAGW_OK) {
                print_warnings(chk);
                gw_config_print_errors(chk);
                goto out;
        }
        if (!(dir = output_dir(outp))) {
                gw_errorf("%s: %s", outp ? outp : ".", strerror(errno));
                rc = EXIT_RUNTIME;
                goto out;
        }
        if (!(mem = open_memstream(&yaml, &ylen))) {
                rc = EXIT_RUNTIME;
                goto out;
        }
        err = aagw_config_mm2_to_yaml(cfg, path, text, tlen, secrets, dir, mem);
        if (fclose(mem) && err == AAGW_OK)
                err = AAGW_ERR_NOMEM;
        print_warnings(cfg);
        if (err != AAGW_OK) {
                gw_config_print_errors(cfg);
                rc = err == AAGW_ERR_CONFIG ? EXIT_USAGE : EXIT_RUNTIME;
                goto out;
        }
        if (!outp) {
                fwrite(yaml, 1, ylen, stdout);
                rc = EXIT_OK;
                goto out;
        }
        /* It may hold secrets (--show-secrets): for aagw's user only. */
        fd = open(outp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || write(fd, yaml, ylen) != (ssize_t)ylen || close(fd)) {
                gw_errorf("%s: cannot write: %s", outp, strerror(errno));
                rc = EXIT_RUNTIME;
                goto out;
        }
        rc = EXIT_OK;
out:
        free(dir);
        free(yaml);
        free(text);
        aagw_config_destroy(chk);
        aagw_config_destroy(cfg);
        return rc;
}

static int cmd_reference(int argc, char **argv) {
        bool markdown = false;
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--markdown"))
                        markdown = true;
                else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
                        usage_config(stdout);
                        return EXIT_OK;
                } else {
                        gw_errorf("config reference: unknown option %s",
                                  argv[i]);
                        usage_config(stderr);
                        return EXIT_USAGE;
                }
        }
        aagw_config_reference(stdout, markdown);
        return EXIT_OK;
}

int gw_cmd_config(int argc, char **argv) {
        struct gw_run_opts ro;
        aagw_config_t     *cfg = NULL;
        int                rc;

        if (argc < 2) {
                gw_errorf("config: a subcommand is required (check, "
                          "reference, import-mm2)");
                usage_config(stderr);
                return EXIT_USAGE;
        }
        if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
                usage_config(stdout);
                return EXIT_OK;
        }
        if (!strcmp(argv[1], "reference"))
                return cmd_reference(argc - 1, argv + 1);
        if (!strcmp(argv[1], "import-mm2"))
                return cmd_import_mm2(argc - 1, argv + 1);
        if (strcmp(argv[1], "check")) {
                gw_errorf("config: unknown subcommand '%s'", argv[1]);
                usage_config(stderr);
                return EXIT_USAGE;
        }
        rc = gw_config_from_args(argc - 1, argv + 1, GW_OPTS_CONNECT,
                                 usage_check, &cfg, &ro);
        if (rc == GW_HELP_SHOWN)
                return EXIT_OK;
        if (rc != EXIT_OK)
                return rc;
        if (ro.connect) {
                rc = gw_connect_check(cfg, stdout);
                aagw_config_destroy(cfg);
                return rc;
        }
        aagw_config_dump(cfg, stdout);
        aagw_config_destroy(cfg);
        return EXIT_OK;
}
