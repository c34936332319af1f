/*
 * gateway/cli_run.c: `aagw [run]`: the gateway's lifecycle.
 *
 *   config -> logging -> clusters (configured, or embedded demo clusters)
 *   -> state dir lock -> flows -> run until SIGINT/SIGTERM or --duration
 *   -> stop consuming, flush, store positions -> exit 0.
 */
#include "gateway_int.h"

#include <stdlib.h>
#include <string.h>

#include "aagw_dedup.h"

static void usage_run(FILE *out) {
        fprintf(out,
                "Usage: aagw [run] [--mode MODE] [-c FILE] [OPTIONS]\n"
                "\n"
                "Replicate topics between the configured clusters and keep "
                "each site's\n"
                "unified stream. Without clusters (no -c, no --cluster) it "
                "starts two\n"
                "embedded clusters, east and west, on loopback.\n"
                "\nOptions (each equals a config key and overrides the "
                "file):\n");
        gw_config_flags_usage(out);
        fprintf(out,
                "      --duration SECONDS         stop after this long "
                "(default: until SIGINT/SIGTERM)\n"
                "      --dump-config              print the effective config "
                "and exit\n"
                "  -h, --help                     this text\n"
                "\nExit status: 0 stopped cleanly, 1 runtime failure, 2 usage "
                "or config error.\n");
}

int gw_cmd_run(int argc, char **argv) {
        struct gw_run_opts ro;
        aagw_config_t     *cfg = NULL;
        aagw_sandbox_t    *sb  = NULL;
        aagw_statedir_t   *sd  = NULL;
        struct gw_plan     plan;
        char               err[1024];
        int                rc;

        rc = gw_config_from_args(argc, argv, true, usage_run, &cfg, &ro);
        if (rc == GW_HELP_SHOWN)
                return EXIT_OK;
        if (rc != EXIT_OK)
                return rc;
        if (ro.dump_config) {
                aagw_config_dump(cfg, stdout);
                aagw_config_destroy(cfg);
                return EXIT_OK;
        }
        gw_log_init((aagw_log_level_t)aagw_log_level_parse(
            aagw_config_str(cfg, "gateway.log_level")));
        gw_signals_install();
        rc = EXIT_RUNTIME;

        /* Take the state dir first: a second instance must be refused
         * before it touches any cluster. */
        sd = aagw_statedir_open(aagw_config_str(cfg, "gateway.state_dir"), err,
                                sizeof(err));
        if (!sd) {
                gw_errorf("%s", err);
                goto out;
        }

        if (aagw_config_instance_cnt(cfg, "clusters") == 0) {
                /* The demo: two embedded clusters stand in for two DCs. */
                static const char *const demo[] = {"east", "west"};
                sb = aagw_sandbox_new(demo, 2, 3, err, sizeof(err));
                if (!sb) {
                        gw_errorf("cannot start the embedded clusters: %s",
                                  err);
                        goto out;
                }
                /* The mock cannot create topics through the Admin API,
                 * so the local topic and both remote copies exist up
                 * front, with the same partition count. */
                static const char *const topics[] = {"clicks", "east.clicks",
                                                     "west.clicks"};
                for (size_t i = 0; i < 3; i++)
                        if (aagw_sandbox_create_topic(sb, NULL, topics[i], 8,
                                                      err, sizeof(err))) {
                                gw_errorf("embedded clusters: %s", err);
                                goto out;
                        }
                for (size_t i = 0; i < 2; i++) {
                        char key[128];
                        snprintf(key, sizeof(key),
                                 "clusters.%s.bootstrap_servers", demo[i]);
                        aagw_config_set(cfg, key,
                                        aagw_sandbox_bootstraps(sb, demo[i]),
                                        "demo");
                        aagw_log(AAGW_LOG_INFO, "DEMO",
                                 "embedded cluster %s at %s", demo[i],
                                 aagw_sandbox_bootstraps(sb, demo[i]));
                }
                aagw_log(AAGW_LOG_INFO, "DEMO",
                         "try: echo hello | kcat -P -b %s -t clicks; "
                         "kcat -C -b %s -t east.clicks -f '%%s %%h\\n'",
                         aagw_sandbox_bootstraps(sb, "east"),
                         aagw_sandbox_bootstraps(sb, "west"));
                if (aagw_config_validate(cfg) != AAGW_OK) {
                        gw_errorf("%s", aagw_config_errors(cfg));
                        rc = EXIT_USAGE;
                        goto out;
                }
        }

        if (gw_plan_flows(cfg, &plan, err, sizeof(err)) == -1) {
                gw_errorf("%s", err);
                rc = EXIT_USAGE;
                goto out;
        }
        for (size_t i = 0; i < plan.nflows; i++)
                aagw_log(AAGW_LOG_INFO, "RUN", "flow %s->%s",
                         plan.flows[i].src, plan.flows[i].dst);

        rc = gw_engine_run(cfg, &plan, sd, ro.duration_s, NULL);
out:
        aagw_statedir_close(sd);
        aagw_sandbox_destroy(sb);
        aagw_config_destroy(cfg);
        return rc;
}
