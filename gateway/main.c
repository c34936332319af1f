/*
 * gateway/main.c: the `aagw` program: command dispatch, --help, --version.
 *
 *   aagw [run] [--mode MODE] [-c FILE] [...]   run the gateway
 *   aagw config check -c FILE                  validate and print config
 *   aagw sandbox [...]                         embedded Kafka clusters
 */
#include "gateway_int.h"

#include <stdio.h>
#include <string.h>

#include <rocksdb/c.h>

#include "aagw_build.h"

static void usage(FILE *out) {
        fprintf(out,
                "Usage: aagw [run] [OPTIONS]             run the gateway\n"
                "       aagw config check [-c FILE] [OPTIONS]\n"
                "                                        validate a config, "
                "print it normalized\n"
                "       aagw config reference [--markdown]\n"
                "                                        list every config "
                "key\n"
                "       aagw sandbox [OPTIONS]           start embedded Kafka "
                "clusters on loopback\n"
                "       aagw status [--admin HOST:PORT]  a running gateway's "
                "state\n"
                "       aagw audit id|key|recent|summary [...]\n"
                "                                        what the unify stage "
                "did (dedup audit)\n"
                "       aagw offsets translate --group G --from A --to B\n"
                "                                        translate a group's "
                "offsets\n"
                "       aagw failover --group G --to B   move a group's "
                "offsets to B (also\n"
                "                                        back, after a "
                "failover)\n"
                "       aagw drill --group G --from A --to B\n"
                "                                        failover drill with "
                "RPO/RTO report\n"
                "       aagw --version | --help\n"
                "\n"
                "aagw replicates Kafka topics between data centers in both "
                "directions\n"
                "and prevents loops with alias prefixes and provenance "
                "headers; at each site\n"
                "it writes one unified stream per topic (T.unified) where "
                "every event\n"
                "appears once (dedup) or only its newest version (lww).\n"
                "\n"
                "Run `aagw <command> --help` for the options of a command; "
                "`aagw run --help`\n"
                "lists the run options, which may also be given without "
                "`run`.\n");
}

static void version(void) {
        printf("aagw %s\n", AAGW_VERSION);
        printf("librdkafka %s\n", rd_kafka_version_str());
        printf("RocksDB %s\n", AAGW_ROCKSDB_VERSION);
}

int main(int argc, char **argv) {
        static const struct {
                const char *name;
                int (*fn)(int, char **);
        } cmds[] = {
            {"run", gw_cmd_run},
            {"config", gw_cmd_config},
            {"sandbox", gw_cmd_sandbox},
            {"status", gw_cmd_status},
            {"audit", gw_cmd_audit},
            /* disaster-recovery commands (cli_offsets.c) */
            {"offsets", gw_cmd_offsets},
            {"failover", gw_cmd_failover},
            {"drill", gw_cmd_drill},
        };

        if (argc >= 2) {
                if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
                    !strcmp(argv[1], "help")) {
                        usage(stdout);
                        return EXIT_OK;
                }
                if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
                        version();
                        return EXIT_OK;
                }
                for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
                        if (!strcmp(argv[1], cmds[i].name))
                                return cmds[i].fn(argc - 1, argv + 1);
                }
                if (argv[1][0] != '-') {
                        gw_errorf("unknown command '%s'", argv[1]);
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        /* No command word: options belong to `run`
         * (`aagw --mode active-active`). */
        return gw_cmd_run(argc, argv);
}
