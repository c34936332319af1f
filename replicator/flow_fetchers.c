/*
 * replicator/flow_fetchers.c: a flow's partitions spread over several
 * source consumers.
 *
 * A librdkafka consumer has one connection, and so one fetch in flight,
 * per broker: across a long link, what one connection's TCP window lets
 * through per round trip bounds the flow however large its fetch window
 * (aagw_fetch_connections()).  A flow then reads its partitions through
 * several consumers, each with its own queue; the flow thread takes from
 * all of them.  Every call that names partitions (assign, pause, resume,
 * seek, watermarks) goes to the consumer that reads them: the same one
 * for a partition all the flow's life.
 */
#include "flow_int.h"

int flow_fx_of(const aagw_flow_t *f, const char *topic, int32_t p) {
        if (f->nfx <= 1)
                return 0;
        /* The topic's hash turns the round: the first partitions of
         * topics with few of them do not all land on consumer 0. */
        uint32_t h = XXH32(topic, strlen(topic), 0);
        return (int)((h + (uint32_t)p) % (uint32_t)f->nfx);
}

static rd_kafka_error_t *fx_call(rd_kafka_t *c, enum flow_fx_op op,
                                 rd_kafka_topic_partition_list_t *l,
                                 int                              timeout_ms) {
        rd_kafka_resp_err_t err;

        switch (op) {
        case FX_ASSIGN:
                return rd_kafka_incremental_assign(c, l);
        case FX_UNASSIGN:
                return rd_kafka_incremental_unassign(c, l);
        case FX_SEEK:
                return rd_kafka_seek_partitions(c, l, timeout_ms);
        case FX_PAUSE:
        case FX_RESUME:
                err = op == FX_PAUSE ? rd_kafka_pause_partitions(c, l)
                                     : rd_kafka_resume_partitions(c, l);
                return err ? rd_kafka_error_new(err, "%s",
                                                rd_kafka_err2str(err))
                           : NULL;
        }
        return NULL;
}

rd_kafka_error_t *flow_fx_apply(aagw_flow_t *f, enum flow_fx_op op,
                                rd_kafka_topic_partition_list_t *l,
                                int                              timeout_ms) {
        rd_kafka_topic_partition_list_t *sub[AAGW_FETCH_CONNECTIONS_MAX] = {0};
        rd_kafka_error_t                *first                           = NULL;

        if (f->nfx <= 1)
                return fx_call(f->fx[0].c, op, l, timeout_ms);
        /* sub[k]'s element i is l's at[k * l->cnt + i] */
        int *at = malloc(sizeof(*at) * (size_t)f->nfx *
                         (size_t)(l->cnt > 0 ? l->cnt : 1));
        if (!at)
                return rd_kafka_error_new(RD_KAFKA_RESP_ERR__FAIL,
                                          "out of memory");
        for (int k = 0; k < f->nfx; k++)
                sub[k] = rd_kafka_topic_partition_list_new(l->cnt);
        for (int i = 0; i < l->cnt; i++) {
                rd_kafka_topic_partition_t *e = &l->elems[i];
                int k = flow_fx_of(f, e->topic, e->partition);
                at[k * l->cnt + sub[k]->cnt] = i;
                rd_kafka_topic_partition_list_add(sub[k], e->topic,
                                                  e->partition)
                    ->offset = e->offset;
        }
        int done = 0; /* consumers called */
        for (; done < f->nfx && !(first && op == FX_ASSIGN); done++) {
                if (!sub[done]->cnt)
                        continue;
                rd_kafka_error_t *e =
                    fx_call(f->fx[done].c, op, sub[done], timeout_ms);
                for (int i = 0; i < sub[done]->cnt; i++)
                        l->elems[at[done * l->cnt + i]].err =
                            sub[done]->elems[i].err;
                if (e && !first)
                        first = e;
                else if (e)
                        rd_kafka_error_destroy(e);
        }
        /* An assignment is all or nothing: the caller takes a failed one
         * as not made at all and tries it again later, which a consumer
         * still holding part of it would refuse. */
        if (first && op == FX_ASSIGN)
                for (int k = 0; k < done - 1; k++) {
                        rd_kafka_error_t *e =
                            sub[k]->cnt ? rd_kafka_incremental_unassign(
                                              f->fx[k].c, sub[k])
                                        : NULL;
                        if (e)
                                rd_kafka_error_destroy(e);
                }
        for (int k = 0; k < f->nfx; k++)
                rd_kafka_topic_partition_list_destroy(sub[k]);
        free(at);
        return first;
}

int64_t flow_fx_queued(const aagw_flow_t *f) {
        int64_t n = 0;

        for (int k = 0; k < f->nfx; k++)
                if (f->fx[k].q)
                        n += (int64_t)rd_kafka_queue_length(f->fx[k].q);
        return n;
}
