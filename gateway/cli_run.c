/*
 * gateway/cli_run.c: `aagw [run]`: the gateway's lifecycle.
 *
 *   config (and the admin endpoint's TLS files) -> logging -> state dir
 *   lock -> admin ports -> clusters
 *   (configured, or the demo's embedded ones, gateway/demo.c) -> flows
 *   and unify stages -> run until SIGINT/SIGTERM or --duration (the demo:
 *   until its checks ran) -> stop consuming, flush, store positions ->
 *   exit 0.  A refusal (state dir locked, admin port in use) comes before
 *   anything is started or logged: one line, exit 1.
 */
#include "gateway_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aagw_dedup.h"

/* The demo's traffic when --duration is not given. */
#define GW_DEMO_DURATION_S 20

static void usage_run(FILE *out) {
        fprintf(out,
                "Usage: aagw [run] [--mode MODE] [-c FILE] [OPTIONS]\n"
                "\n"
                "Replicate topics between the configured clusters and keep "
                "each site's\n"
                "unified stream. Without clusters (no -c, no --cluster) it "
                "runs the demo:\n"
                "two embedded clusters, east and west, on loopback, a "
                "generated clickstream\n"
                "at both sites, one live line per site and second, and a "
                "checked summary\n"
                "(exit 1 if an invariant fails).\n"
                "\nOptions (each equals a config key and overrides the "
                "file):\n");
        gw_config_flags_usage(out);
        fprintf(out,
                "      --duration SECONDS         stop after this long "
                "(default: until SIGINT/SIGTERM;\n"
                "                                 the demo: 20 s of traffic, "
                "0 until Ctrl-C)\n"
                "      --dump-config              print the effective config "
                "and exit\n"
                "  -h, --help                     this text\n"
                "\nExit status: 0 stopped cleanly, 1 runtime failure, 2 usage "
                "or config error.\n");
}

int gw_cmd_run(int argc, char **argv) {
        struct gw_run_opts     ro;
        aagw_config_t         *cfg  = NULL;
        gw_demo_t             *demo = NULL;
        aagw_statedir_t       *sd   = NULL;
        struct gw_plan         plan;
        struct gw_engine_hooks hooks;
        struct gw_admin_tls    tls  = {0};
        struct gw_admin_conf   admin = {.fd = -1, .health_fd = -1};
        const struct aagw_settings *s;
        char                   err[1024];
        bool                   is_demo;
        int                    rc;

        rc = gw_config_from_args(argc, argv, GW_OPTS_RUN, usage_run, &cfg, &ro);
        if (rc == GW_HELP_SHOWN)
                return EXIT_OK;
        if (rc != EXIT_OK)
                return rc;
        if (ro.dump_config) {
                aagw_config_dump(cfg, stdout);
                aagw_config_destroy(cfg);
                return EXIT_OK;
        }
        /* The TLS files are part of the config: a bad one is a config
         * error (exit 2), found before anything starts. */
        if (gw_admin_tls_init(&tls, cfg, err, sizeof(err))) {
                gw_errorf("%s", err);
                rc = EXIT_USAGE;
                goto out;
        }
        /* No clusters: the demo (gateway/demo.c).  Its live lines and
         * summary go to stdout, the log to stderr as always. */
        s       = aagw_config_settings(cfg);
        is_demo = s->nclusters == 0;
        gw_log_init(s->gateway.log_level);
        gw_signals_install();
        if (is_demo &&
            (rc = gw_demo_state_dir(cfg, err, sizeof(err))) != EXIT_OK) {
                gw_errorf("%s", err);
                goto out;
        }
        /* The demo may have given the config a state dir. */
        s  = aagw_config_settings(cfg);
        rc = EXIT_RUNTIME;

        /* Take the state dir first: a second instance must be refused
         * before it touches any cluster. */
        sd = aagw_statedir_open(s->gateway.state_dir, err, sizeof(err));
        if (!sd) {
                gw_errorf("%s", err);
                goto out;
        }
        /* Then the admin ports, for the same reason: a gateway that
         * could not serve them must not have started flows first. */
        if (s->admin.listen && (admin.fd = gw_admin_listen(
                                    s->admin.listen, err, sizeof(err))) == -1) {
                gw_errorf("admin endpoint: %s", err);
                goto out;
        }
        if (s->admin.health_listen &&
            (admin.health_fd = gw_admin_listen(s->admin.health_listen, err,
                                               sizeof(err))) == -1) {
                gw_errorf("admin health listener: %s", err);
                goto out;
        }
        admin.token = s->admin.token;
        admin.tls   = &tls;

        if (is_demo) {
                if ((rc = gw_demo_check_state_dir(aagw_statedir_path(sd), err,
                                                  sizeof(err))) != EXIT_OK) {
                        gw_errorf("%s", err);
                        goto out;
                }
                rc = EXIT_RUNTIME;
                /* Traffic for --duration, 20 s unless given (0: until
                 * Ctrl-C); the engine runs until the demo's checks end. */
                demo = gw_demo_new(
                    cfg, ro.duration_s < 0 ? GW_DEMO_DURATION_S : ro.duration_s,
                    stdout, err, sizeof(err));
                if (!demo) {
                        gw_errorf("demo: %s", err);
                        goto out;
                }
                if (aagw_config_validate(cfg) != AAGW_OK) {
                        gw_errorf("%s", aagw_config_errors(cfg));
                        rc = EXIT_USAGE;
                        goto out;
                }
                gw_demo_hooks(demo, &hooks);
        }

        if (gw_plan_flows(cfg, &plan, err, sizeof(err)) == -1) {
                gw_errorf("%s", err);
                rc = EXIT_USAGE;
                goto out;
        }
        for (size_t i = 0; i < plan.nflows; i++)
                aagw_log(AAGW_LOG_INFO, "RUN", "flow %s->%s", plan.flows[i].src,
                         plan.flows[i].dst);

        /* The engine takes the sockets (and sets them to -1). */
        rc = gw_engine_run(cfg, &plan, sd, is_demo ? 0 : ro.duration_s,
                           is_demo ? &hooks : NULL,
                           admin.fd != -1 ? &admin : NULL);
        if (is_demo)
                rc = gw_demo_finish(demo, rc);
out:
        if (admin.fd != -1)
                close(admin.fd);
        if (admin.health_fd != -1)
                close(admin.health_fd);
        gw_admin_tls_deinit(&tls);
        aagw_statedir_close(sd);
        gw_demo_destroy(demo);
        aagw_config_destroy(cfg);
        return rc;
}
