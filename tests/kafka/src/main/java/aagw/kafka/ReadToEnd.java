package aagw.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/*
 * Reads topics from their beginning to the end they have when the reader
 * starts (for read_committed: the last stable offset), and prints what it
 * read as JSON lines, in the shape of VerifiableConsumer's events:
 *
 *   {"name":"record_data","topic":T,"partition":P,"offset":O,"key":K,"value":V}
 *   {"name":"partition_end","topic":T,"partition":P,"end_offset":E,"count":N}
 *   {"name":"read_done","count":N}
 *
 * VerifiableConsumer reads in a consumer group until it has consumed
 * --max-messages records: it cannot stop at a known end, so it would
 * either hang (fewer records than expected) or stop before the extra
 * ones (more).  This reader stops exactly at the ends, and assigns its
 * partitions (no group, no commits).
 *
 *   java -cp 'LIB/*' aagw.kafka.ReadToEnd --bootstrap-server BS
 *        [--isolation-level read_committed|read_uncommitted]
 *        [--timeout-ms MS] TOPIC...
 *
 * Exits 0 once every partition was read to its end, 1 if the deadline
 * (default 120 s) passed first (read_done is not printed then), 2 on bad
 * arguments or a topic that does not exist.  Logs go to stderr.
 */
public final class ReadToEnd {
    private static String json(String s) {
        if (s == null)
            return "null";
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\')
                b.append('\\').append(c);
            else if (c < 0x20)
                b.append(String.format("\\u%04x", (int) c));
            else
                b.append(c);
        }
        return b.append('"').toString();
    }

    public static void main(String[] args) {
        String bootstrap = null, isolation = "read_committed";
        long timeoutMs = 120000;
        List<String> topics = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--bootstrap-server") && i + 1 < args.length)
                bootstrap = args[++i];
            else if (a.equals("--isolation-level") && i + 1 < args.length)
                isolation = args[++i];
            else if (a.equals("--timeout-ms") && i + 1 < args.length)
                timeoutMs = Long.parseLong(args[++i]);
            else if (a.startsWith("-")) {
                System.err.println("ReadToEnd: unknown option " + a);
                System.exit(2);
            } else
                topics.add(a);
        }
        if (bootstrap == null || topics.isEmpty()) {
            System.err.println("usage: ReadToEnd --bootstrap-server BS "
                               + "[--isolation-level L] [--timeout-ms MS] TOPIC...");
            System.exit(2);
        }
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5000");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "50");

        long deadline = System.currentTimeMillis() + timeoutMs;
        long total = 0;
        StringBuilder out = new StringBuilder(1 << 16);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> parts = new ArrayList<>();
            for (String t : topics) {
                List<PartitionInfo> ps = c.partitionsFor(t, Duration.ofMillis(timeoutMs));
                if (ps == null || ps.isEmpty()) {
                    System.err.println("ReadToEnd: no topic " + t);
                    System.exit(2);
                }
                for (PartitionInfo pi : ps)
                    parts.add(new TopicPartition(t, pi.partition()));
            }
            c.assign(parts);
            c.seekToBeginning(parts);
            /* With read_committed, endOffsets gives the last stable
             * offset: an open transaction would hold it back. */
            Map<TopicPartition, Long> ends = c.endOffsets(parts, Duration.ofMillis(timeoutMs));
            Map<TopicPartition, Long> counts = new HashMap<>();
            List<TopicPartition> pending = new ArrayList<>();
            for (TopicPartition tp : parts) {
                counts.put(tp, 0L);
                if (c.position(tp, Duration.ofMillis(timeoutMs)) < ends.get(tp))
                    pending.add(tp);
                else
                    done(out, tp, ends.get(tp), 0);
            }
            c.pause(parts);
            c.resume(pending);
            while (!pending.isEmpty()) {
                if (System.currentTimeMillis() > deadline) {
                    System.out.print(out);
                    System.out.flush();
                    System.err.println("ReadToEnd: deadline passed with " + pending.size()
                                       + " partitions short of their end");
                    System.exit(1);
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    if (r.offset() >= ends.get(tp))
                        continue;
                    out.append("{\"name\":\"record_data\",\"topic\":").append(json(r.topic()))
                        .append(",\"partition\":").append(r.partition())
                        .append(",\"offset\":").append(r.offset())
                        .append(",\"key\":").append(json(r.key()))
                        .append(",\"value\":").append(json(r.value())).append("}\n");
                    counts.merge(tp, 1L, Long::sum);
                    total++;
                }
                for (TopicPartition tp : new ArrayList<>(pending))
                    if (c.position(tp) >= ends.get(tp)) {
                        pending.remove(tp);
                        c.pause(List.of(tp));
                        done(out, tp, ends.get(tp), counts.get(tp));
                    }
                if (out.length() > (1 << 20)) {
                    System.out.print(out);
                    out.setLength(0);
                }
            }
        }
        out.append("{\"name\":\"read_done\",\"count\":").append(total).append("}\n");
        System.out.print(out);
        System.out.flush();
    }

    private static void done(StringBuilder out, TopicPartition tp, long end, long n) {
        out.append("{\"name\":\"partition_end\",\"topic\":").append(json(tp.topic()))
            .append(",\"partition\":").append(tp.partition())
            .append(",\"end_offset\":").append(end)
            .append(",\"count\":").append(n).append("}\n");
    }
}
