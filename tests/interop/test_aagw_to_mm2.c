/*
 * tests/interop/test_aagw_to_mm2.c: MirrorMaker 2's own client code reads
 * what aagw writes, on real Kafka.
 *
 * Two gateways replicate at once, each with its own separator, from
 * AAGW_TEST_SEPARATORS ("SEP1 SEP2"; meson runs ". _" as
 * interop-aagw-to-mm2 and the seed document's ".a. .b." as
 * interop-separator): one east -> west with SEP1 (topic A: east<SEP1>A at
 * west), one west -> east with SEP2 (topic B: west<SEP2>B at east).
 * Opposite directions because one cluster cannot hold the internal topics
 * of both "." and "_": Kafka refuses a topic name that differs from an
 * existing one only by '.' versus '_' (mm2-offset-syncs_west_internal
 * collides with mm2-offset-syncs.west.internal).  The remote partitions are pre-filled
 * with a few foreign records, so target offsets differ from source
 * offsets.  A group per gateway has committed offsets at its source (end,
 * middle, start).  Then one JVM asks MM2's code, with the matching
 * separator, at each target:
 *
 *   - DefaultReplicationPolicy's internal topic names = aagw's;
 *   - RemoteClusterUtils.translateOffsets = `aagw offsets translate`,
 *     partition by partition, = the right answer (prefill + committed),
 *     with the metadata of the group's commit, as MM2 carries it;
 *   - MirrorClient: remoteTopics, heartbeatTopics, checkpointTopics,
 *     upstreamClusters, replicationHops(source) name aagw's topics.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "aagw_policy.h"
#include "interop.h"

#define NPART 3
#define NREC  40

struct variant {
        const char *sep, *id, *group, *src, *dst;
        char        topic[128];  /* at east */
        char        remote[160]; /* at west */
        char        ckpt[128], syncs[128], hb_remote[64];
        int64_t     committed[NPART];
        int         prefill[NPART];
};

static void setup_variant(struct io *io, struct variant *v, const char *base) {
        char *name = harness_unique_name(base);
        snprintf(v->topic, sizeof(v->topic), "%s", name);
        free(name);
        snprintf(v->remote, sizeof(v->remote), "%s%s%s", v->src, v->sep,
                 v->topic);
        snprintf(v->hb_remote, sizeof(v->hb_remote), "%s%sheartbeats", v->src,
                 v->sep);
        assert_int_equal(aagw_mm2_checkpoints_topic_sep(v->sep, v->src, v->ckpt,
                                                        sizeof(v->ckpt)),
                         AAGW_OK);
        assert_int_equal(aagw_mm2_offset_syncs_topic_sep(
                             v->sep, v->dst, v->syncs, sizeof(v->syncs)),
                         AAGW_OK);
        io_topic(io, v->src, v->topic, NPART);
        io_topic(io, v->src, "heartbeats", 1);
        io_topic(io, v->src, v->syncs, 1);
        io_topic(io, v->dst, v->remote, NPART);
        io_topic(io, v->dst, v->ckpt, 1);
        for (int p = 0; p < NPART; p++) {
                v->prefill[p] = 2 + 3 * p;
                io_produce(io, v->dst, v->remote, p, v->prefill[p], "foreign");
                io_produce(io, v->src, v->topic, p, NREC, v->id);
        }
        /* End, middle, start. */
        v->committed[0] = NREC;
        v->committed[1] = NREC / 2 + 3;
        v->committed[2] = 0;
        for (int p = 0; p < NPART; p++)
                io_commit(io, v->src, v->group, v->topic, p, v->committed[p]);
}

/* Checkpoints of the variant's group at west: newest per partition. */
struct ck_scan {
        struct variant *v;
        int64_t         up[NPART], down[NPART];
};

static void on_ck(void *arg, const rd_kafka_message_t *m) {
        struct ck_scan            *s = arg;
        struct aagw_mm2_checkpoint ck;
        if (aagw_mm2_checkpoint_decode(m->key, m->key_len, m->payload, m->len,
                                       &ck) &&
            !strcmp(ck.group, s->v->group) && !strcmp(ck.topic, s->v->remote) &&
            ck.partition >= 0 && ck.partition < NPART) {
                s->up[ck.partition]   = ck.upstream;
                s->down[ck.partition] = ck.downstream;
        }
}

struct wait_arg {
        struct io      *io;
        struct variant *v;
};

/* Every partition has a checkpoint of the group's committed offset. */
static bool checkpointed(void *arg) {
        struct wait_arg *w = arg;
        struct ck_scan   s = {.v = w->v};
        for (int p = 0; p < NPART; p++)
                s.up[p] = -1;
        io_read(w->io, w->v->dst, w->v->ckpt, 0, on_ck, &s);
        for (int p = 0; p < NPART; p++)
                if (s.up[p] != w->v->committed[p])
                        return false;
        return io_end_offset(w->io, w->v->dst, w->v->hb_remote, 0) > 0;
}

static json_object *get(json_object *o, const char *k) {
        json_object *v = NULL;
        if (!json_object_object_get_ex(o, k, &v))
                fail_msg("no \"%s\" in %s", k, json_object_to_json_string(o));
        return v;
}

/* `aagw offsets translate --json` for the variant, checked against the
 * right answer; returns the parsed output.  Waits until it is exact: the
 * gateway commits its own positions (which make a translation past the
 * last sync exact) once a second, asynchronously. */
static json_object *aagw_translate(struct io *io, struct variant *v) {
        harness_output_t o;
        int64_t          deadline = harness_now_ms() + 60000;
        const char *w[] = {"offsets", "translate", "--group", v->group,
                           "--from",  v->src,      "--to",    v->dst,
                           "--json",  "--separator", v->sep,
                           "--set",   NULL,        NULL};
        char        gid[64];
        snprintf(gid, sizeof(gid), "gateway.id=%s", v->id);
        w[12] = gid;
        int rc;
        while ((rc = io_aagw(io, w, &o)) != 0 && harness_now_ms() < deadline) {
                struct timespec ts = {0, 500 * 1000000L};
                harness_output_deinit(&o);
                nanosleep(&ts, NULL);
        }
        char head[64];
        snprintf(head, sizeof(head), "aagw offsets translate (%s)", v->sep);
        io_show(head, rc, &o, true);
        assert_int_equal(rc, 0);
        json_object *j = json_tokener_parse(o.out);
        assert_non_null(j);
        json_object *parts = get(j, "partitions");
        assert_int_equal(json_object_array_length(parts), NPART);
        for (size_t i = 0; i < NPART; i++) {
                json_object *r = json_object_array_get_idx(parts, i);
                int p = json_object_get_int(get(r, "partition"));
                assert_true(p >= 0 && p < NPART);
                assert_string_equal(json_object_get_string(get(r, "target_topic")),
                                    v->remote);
                assert_true(json_object_get_boolean(get(r, "exact")));
                assert_int_equal(json_object_get_int64(get(r, "translated")),
                                 v->prefill[p] + v->committed[p]);
        }
        harness_output_deinit(&o);
        return j;
}

/* RemoteClusterUtils' answer = aagw's, partition by partition. */
static int compare_translate(json_object *mm2, json_object *ours,
                             struct variant *v) {
        json_object *offs  = get(mm2, "offsets");
        json_object *parts = get(ours, "partitions");
        int          same  = 0;

        assert_string_equal(json_object_get_string(get(mm2, "group")), v->group);
        assert_int_equal(json_object_array_length(offs),
                         json_object_array_length(parts));
        for (size_t i = 0; i < json_object_array_length(parts); i++) {
                json_object *r = json_object_array_get_idx(parts, i);
                bool         found = false;
                for (size_t k = 0; k < json_object_array_length(offs); k++) {
                        json_object *m = json_object_array_get_idx(offs, k);
                        if (strcmp(json_object_get_string(get(m, "topic")),
                                   json_object_get_string(get(r, "target_topic"))) ||
                            json_object_get_int(get(m, "partition")) !=
                                json_object_get_int(get(r, "partition")))
                                continue;
                        found = true;
                        assert_int_equal(json_object_get_int64(get(m, "offset")),
                                         json_object_get_int64(get(r, "translated")));
                        /* The commit's metadata comes back, as from MM2. */
                        char meta[256];
                        io_commit_metadata(meta, sizeof(meta), v->group,
                                           json_object_get_int(get(m, "partition")));
                        assert_string_equal(
                            json_object_get_string(get(m, "metadata")), meta);
                        same++;
                }
                assert_true(found);
        }
        return same;
}

/* MirrorClient at the variant's target.  The other gateway writes
 * "heartbeats" there (its source): a heartbeats topic to MM2 too. */
static void check_client(struct io *io, json_object *c, struct variant *v,
                         const struct variant *other) {
        json_object *rt = get(c, "remote_topics"), *up = get(c, "upstream_clusters"),
                    *hb = get(c, "heartbeat_topics"), *ck = get(c, "checkpoint_topics");

        assert_string_equal(json_object_get_string(get(c, "separator")), v->sep);
        assert_true(io_json_has(rt, v->remote));
        assert_true(io_json_has(rt, v->hb_remote));
        assert_false(io_json_has(rt, other->remote));
        assert_false(io_json_has(rt, other->topic));
        assert_true(io_json_has(hb, v->hb_remote));
        assert_true(io_json_has(hb, "heartbeats"));
        assert_true(io_json_has(ck, v->ckpt));
        assert_true(io_json_has(up, v->src));
        assert_false(io_json_has(up, v->dst));
        assert_int_equal(json_object_get_int(get(get(c, "hops"), v->src)), 1);
        assert_int_equal(json_object_get_int(get(get(c, "hops"), v->dst)), -1);
        if (io->own) {
                /* Our own clusters hold nothing else. */
                assert_int_equal(json_object_array_length(rt), 2);
                assert_int_equal(json_object_array_length(hb), 2);
                assert_int_equal(json_object_array_length(ck), 1);
                assert_int_equal(json_object_array_length(up), 1);
        }
}

static struct io io;

static int teardown(void **state) {
        (void)state;
        if (io.dir)
                io_end(&io);
        return 0;
}

static void test_mm2_client_reads_aagw(void **state) {
        struct variant v[2] = {
            {.sep = ".", .id = "first", .group = "g-first", .src = "east",
             .dst = "west"},
            {.sep = "_", .id = "second", .group = "g-second", .src = "west",
             .dst = "east"},
        };
        char  seps[64];
        char *save = NULL, *one, *two;
        (void)state;

        snprintf(seps, sizeof(seps), "%s",
                 getenv("AAGW_TEST_SEPARATORS") ? getenv("AAGW_TEST_SEPARATORS")
                                                : ". _");
        one = strtok_r(seps, " ", &save);
        two = strtok_r(NULL, " ", &save);
        assert_non_null(one);
        assert_non_null(two);
        v[0].sep = one;
        v[1].sep = two;
        print_message("# separators: \"%s\" east -> west, \"%s\" west -> "
                      "east\n",
                      v[0].sep, v[1].sep);

        io_begin(&io, "interop-a2m");
        setup_variant(&io, &v[0], "a");
        setup_variant(&io, &v[1], "b");
        for (int i = 0; i < 2; i++) {
                char        gid[64], grp[96], topic[160];
                snprintf(gid, sizeof(gid), "gateway.id=%s", v[i].id);
                snprintf(grp, sizeof(grp), "replication.groups=%s", v[i].group);
                snprintf(topic, sizeof(topic), "%s", v[i].topic);
                const char *extra[] = {"--separator", v[i].sep, "--set", gid,
                                       "--set", grp, "--topic", topic, NULL};
                io_gateway(&io, v[i].id, v[i].src, extra);
        }
        for (int i = 0; i < 2; i++) {
                struct wait_arg w = {&io, &v[i]};
                if (!harness_wait_until(checkpointed, &w, 90000))
                        fail_msg("no checkpoints of %s's committed offsets "
                                 "in %s at %s (separator \"%s\")",
                                 v[i].group, v[i].ckpt, v[i].dst, v[i].sep);
        }
        json_object *ours[2] = {aagw_translate(&io, &v[0]),
                                aagw_translate(&io, &v[1])};

        const char *q[] = {
            "names",     v[0].sep, "east",   "west",        //
            "names",     v[1].sep, "east",   "west",        //
            "names",     "-",      "east",   "west",        //
            "translate", io_gw_bs(&io, "west"), v[0].sep, "east", v[0].group, //
            "translate", io_gw_bs(&io, "east"), v[1].sep, "west", v[1].group, //
            "client",    io_gw_bs(&io, "west"), v[0].sep, "east", "west",  //
            "client",    io_gw_bs(&io, "east"), v[1].sep, "west", "east",  //
            NULL};
        json_object *a = io_mm2_query(&io, q, 7);

        /* 1. MM2's names (a remote topic, the internal topics) are aagw's,
         * for three separators. */
        const char *names[] = {v[0].sep, v[1].sep, "-"};
        for (int i = 0; i < 3; i++) {
                json_object *n = json_object_array_get_idx(a, (size_t)i);
                char         ck[128], sy[128], rt[128];
                aagw_mm2_checkpoints_topic_sep(names[i], "east", ck, sizeof(ck));
                aagw_mm2_offset_syncs_topic_sep(names[i], "west", sy, sizeof(sy));
                const char *const     sites[] = {"east", "west"};
                struct aagw_repl_conf rc;
                aagw_repl_policy_t   *pol;
                char                  err[256];
                aagw_repl_conf_init(&rc);
                rc.sites     = sites;
                rc.site_cnt  = 2;
                rc.separator = names[i];
                pol          = aagw_repl_policy_new(&rc, err, sizeof(err));
                if (!pol)
                        fail_msg("separator \"%s\": %s", names[i], err);
                assert_int_equal(aagw_repl_remote_topic(pol, "east", "t", rt,
                                                        sizeof(rt)),
                                 AAGW_OK);
                aagw_repl_policy_destroy(pol);
                assert_string_equal(
                    json_object_get_string(get(n, "remote_topic")), rt);
                assert_string_equal(
                    json_object_get_string(get(n, "checkpoints_topic")), ck);
                assert_string_equal(
                    json_object_get_string(get(n, "offset_syncs_topic")), sy);
                assert_string_equal(
                    json_object_get_string(get(n, "heartbeats_topic")),
                    AAGW_MM2_HEARTBEATS_TOPIC);
        }
        /* 2. translateOffsets = aagw offsets translate. */
        int same = 0;
        for (int i = 0; i < 2; i++)
                same += compare_translate(
                    json_object_array_get_idx(a, 3 + (size_t)i), ours[i], &v[i]);
        assert_int_equal(same, 2 * NPART);
        /* 3. MirrorClient sees aagw's topics and east upstream. */
        check_client(&io, json_object_array_get_idx(a, 5), &v[0], &v[1]);
        check_client(&io, json_object_array_get_idx(a, 6), &v[1], &v[0]);
        print_message("# %d partitions: RemoteClusterUtils.translateOffsets "
                      "= aagw offsets translate = prefill + committed\n",
                      same);

        json_object_put(a);
        json_object_put(ours[0]);
        json_object_put(ours[1]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_mm2_client_reads_aagw, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
