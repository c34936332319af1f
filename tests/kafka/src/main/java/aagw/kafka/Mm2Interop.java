package aagw.kafka;

import java.io.File;
import java.io.FileReader;
import java.io.FileWriter;
import java.io.IOException;
import java.io.Reader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.ConfigValue;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.connect.mirror.DefaultReplicationPolicy;
import org.apache.kafka.connect.mirror.MirrorClient;
import org.apache.kafka.connect.mirror.MirrorMakerConfig;
import org.apache.kafka.connect.mirror.MirrorSourceConnector;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;
import org.apache.kafka.connect.mirror.SourceAndTarget;

/*
 * MirrorMaker 2's own client code asked about a cluster, for the interop
 * tests (tests/interop): one JVM answers every query of a test, one JSON
 * object a line on stdout, in the order asked.  Logs go to stderr.
 *
 *   java -cp 'build-kafka/lib/*' aagw.kafka.Mm2Interop [--config BS=FILE]... QUERY...
 *
 * --config gives the client settings (a Java properties file: security,
 * SASL, TLS) for the cluster reached at BS, as a query names it.
 *
 * Queries (SEP is the replication.policy.separator, "." being MM2's
 * default; BS a bootstrap list):
 *
 *   names SEP SOURCE TARGET
 *       DefaultReplicationPolicy's names: the remote name of topic "t",
 *       checkpoints topic of SOURCE, offset-syncs topic for TARGET,
 *       heartbeats topic.  No cluster needed.
 *   client BS SEP ALIAS...
 *       MirrorClient: remoteTopics, upstreamClusters, heartbeatTopics,
 *       checkpointTopics, and replicationHops for each ALIAS.
 *   translate BS SEP REMOTE_ALIAS GROUP
 *       RemoteClusterUtils.translateOffsets: GROUP's offsets at the
 *       cluster BS, translated from the checkpoints of REMOTE_ALIAS.
 *   mm2config FILE
 *       How MirrorMaker 2 reads the mm2.properties FILE, as its main()
 *       loads it: "refused" with MirrorMakerConfig's reason, or per
 *       cluster pair that clusterPairs() makes a herder for, whether its
 *       MirrorSourceConnector runs (its configuration validates and
 *       "enabled" is true), the validation errors, and the topic and
 *       group lists and separator the connector gets (null: unset, MM2's
 *       default).  No cluster needed.
 *
 * A query that throws prints {"query":...,"error":"..."}; the exit status
 * is then 1, after every query has been answered.
 */
public final class Mm2Interop {
    private static final Duration TIMEOUT = Duration.ofSeconds(20);
    /* bootstrap list -> its client settings (--config) */
    private static final Map<String, Properties> CONFIGS = new HashMap<>();

    public static void main(String[] args) throws Exception {
        quietLogs();
        int rc = 0;
        int i = 0;
        while (i + 1 < args.length && args[i].equals("--config")) {
            int eq = args[i + 1].indexOf('=');
            if (eq <= 0) {
                System.err.println("Mm2Interop: --config needs BS=FILE");
                System.exit(2);
            }
            Properties p = new Properties();
            try (Reader r = new FileReader(args[i + 1].substring(eq + 1))) {
                p.load(r);
            }
            CONFIGS.put(args[i + 1].substring(0, eq), p);
            i += 2;
        }
        while (i < args.length) {
            String q = args[i];
            int arity;
            switch (q) {
            case "names": arity = 3; break;
            case "translate": arity = 4; break;
            case "mm2config": arity = 1; break;
            case "client":
                arity = 2;
                while (i + 1 + arity < args.length && !isQuery(args[i + 1 + arity]))
                    arity++;
                break;
            default:
                System.err.println("Mm2Interop: unknown query " + q);
                System.exit(2);
                return;
            }
            if (i + arity >= args.length) {
                System.err.println("Mm2Interop: " + q + " needs " + arity + " arguments");
                System.exit(2);
            }
            String[] a = new String[arity];
            System.arraycopy(args, i + 1, a, 0, arity);
            i += 1 + arity;
            StringBuilder out = new StringBuilder("{\"query\":").append(str(q));
            try {
                switch (q) {
                case "names": names(a, out); break;
                case "client": client(a, out); break;
                case "translate": translate(a, out); break;
                case "mm2config": mm2config(a, out); break;
                default: break;
                }
            } catch (Exception e) {
                out.append(",\"error\":").append(str(e.toString()));
                rc = 1;
            }
            out.append('}');
            System.out.println(out);
            System.out.flush();
        }
        System.exit(rc);
    }

    private static boolean isQuery(String s) {
        return s.equals("names") || s.equals("client") || s.equals("translate")
            || s.equals("mm2config");
    }

    /* MirrorClient's and RemoteClusterUtils' properties: the target
     * cluster's bootstrap servers, its client settings (--config) and the
     * policy's separator. */
    private static Map<String, Object> props(String bs, String sep) {
        Map<String, Object> p = new HashMap<>();
        Properties conf = CONFIGS.get(bs);
        if (conf != null)
            for (String k : conf.stringPropertyNames())
                p.put(k, conf.getProperty(k));
        p.put("bootstrap.servers", bs);
        p.put("replication.policy.separator", sep);
        return p;
    }

    private static void names(String[] a, StringBuilder out) {
        DefaultReplicationPolicy pol = new DefaultReplicationPolicy();
        Map<String, Object> cfg = new HashMap<>();
        cfg.put("replication.policy.separator", a[0]);
        pol.configure(cfg);
        out.append(",\"separator\":").append(str(a[0]))
           .append(",\"remote_topic\":").append(str(pol.formatRemoteTopic(a[1], "t")))
           .append(",\"checkpoints_topic\":").append(str(pol.checkpointsTopic(a[1])))
           .append(",\"offset_syncs_topic\":").append(str(pol.offsetSyncsTopic(a[2])))
           .append(",\"heartbeats_topic\":").append(str(pol.heartbeatsTopic()));
    }

    private static void client(String[] a, StringBuilder out) throws Exception {
        try (MirrorClient mc = new MirrorClient(props(a[0], a[1]))) {
            out.append(",\"separator\":").append(str(a[1]))
               .append(",\"remote_topics\":").append(strs(mc.remoteTopics()))
               .append(",\"upstream_clusters\":").append(strs(mc.upstreamClusters()))
               .append(",\"heartbeat_topics\":").append(strs(mc.heartbeatTopics()))
               .append(",\"checkpoint_topics\":").append(strs(mc.checkpointTopics()))
               .append(",\"hops\":{");
            for (int k = 2; k < a.length; k++) {
                if (k > 2)
                    out.append(',');
                out.append(str(a[k])).append(':').append(mc.replicationHops(a[k]));
            }
            out.append('}');
        }
    }

    private static void translate(String[] a, StringBuilder out) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> m =
            RemoteClusterUtils.translateOffsets(props(a[0], a[1]), a[2], a[3], TIMEOUT);
        List<TopicPartition> tps = new ArrayList<>(m.keySet());
        tps.sort((x, y) -> x.topic().equals(y.topic())
                 ? Integer.compare(x.partition(), y.partition())
                 : x.topic().compareTo(y.topic()));
        out.append(",\"separator\":").append(str(a[1]))
           .append(",\"remote\":").append(str(a[2]))
           .append(",\"group\":").append(str(a[3]))
           .append(",\"offsets\":[");
        for (int k = 0; k < tps.size(); k++) {
            TopicPartition tp = tps.get(k);
            if (k > 0)
                out.append(',');
            out.append("{\"topic\":").append(str(tp.topic()))
               .append(",\"partition\":").append(tp.partition())
               .append(",\"offset\":").append(m.get(tp).offset())
               .append(",\"metadata\":").append(str(m.get(tp).metadata())).append('}');
        }
        out.append(']');
    }

    private static void mm2config(String[] a, StringBuilder out) throws Exception {
        Map<String, String> props = Utils.propsToStringMap(Utils.loadProps(a[0]));
        MirrorMakerConfig cfg;
        out.append(",\"file\":").append(str(a[0]));
        try {
            cfg = new MirrorMakerConfig(props);
        } catch (ConfigException e) {
            out.append(",\"refused\":").append(str(e.getMessage()));
            return;
        }
        List<SourceAndTarget> pairs = new ArrayList<>(cfg.clusterPairs());
        pairs.sort((x, y) -> x.toString().compareTo(y.toString()));
        out.append(",\"flows\":[");
        for (int k = 0; k < pairs.size(); k++) {
            SourceAndTarget st = pairs.get(k);
            Map<String, String> cp =
                cfg.connectorBaseConfig(st, MirrorSourceConnector.class);
            List<String> errs = new ArrayList<>();
            for (ConfigValue v : new MirrorSourceConnector().validate(cp).configValues())
                errs.addAll(v.errorMessages());
            boolean runs = errs.isEmpty()
                && (Boolean) ConfigDef.parseType("enabled", cp.get("enabled"),
                                                 ConfigDef.Type.BOOLEAN);
            if (k > 0)
                out.append(',');
            out.append("{\"flow\":").append(str(st.toString()))
               .append(",\"runs\":").append(runs)
               .append(",\"errors\":").append(strList(errs))
               .append(",\"topics\":").append(list(cp, "topics"))
               .append(",\"topics_exclude\":").append(list(cp, "topics.exclude"))
               .append(",\"groups\":").append(list(cp, "groups"))
               .append(",\"groups_exclude\":").append(list(cp, "groups.exclude"))
               .append(",\"separator\":")
               .append(str(cp.getOrDefault("replication.policy.separator", ".")))
               .append('}');
        }
        out.append(']');
    }

    /* A LIST value as ConfigDef parses it, in order; "null" when unset. */
    @SuppressWarnings("unchecked")
    private static String list(Map<String, String> cp, String key) {
        if (!cp.containsKey(key))
            return "null";
        return strList((List<String>) ConfigDef.parseType(key, cp.get(key),
                                                          ConfigDef.Type.LIST));
    }

    private static String strList(List<String> l) {
        StringBuilder b = new StringBuilder("[");
        for (String s : l) {
            if (b.length() > 1)
                b.append(',');
            b.append(str(s));
        }
        return b.append(']').toString();
    }

    private static String strs(Collection<String> c) {
        StringBuilder b = new StringBuilder("[");
        for (String s : new TreeSet<>(c)) {
            if (b.length() > 1)
                b.append(',');
            b.append(str(s));
        }
        return b.append(']').toString();
    }

    private static String str(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            if (ch == '"' || ch == '\\')
                b.append('\\').append(ch);
            else if (ch < 0x20)
                b.append(String.format("\\u%04x", (int) ch));
            else
                b.append(ch);
        }
        return b.append('"').toString();
    }

    /* Kafka's clients log through SLF4J -> log4j2, whose default
     * configuration writes to stdout: send warnings and worse to stderr
     * instead, unless the caller gave a configuration. */
    private static void quietLogs() throws IOException {
        if (System.getProperty("log4j2.configurationFile") != null)
            return;
        File f = File.createTempFile("mm2interop-log4j2", ".properties");
        f.deleteOnExit();
        try (FileWriter w = new FileWriter(f)) {
            w.write("appender.err.type=Console\n"
                    + "appender.err.name=ERR\n"
                    + "appender.err.target=SYSTEM_ERR\n"
                    + "appender.err.layout.type=PatternLayout\n"
                    + "appender.err.layout.pattern=[%d] %p %c{1}: %m%n\n"
                    + "rootLogger.level=WARN\n"
                    + "rootLogger.appenderRef.err.ref=ERR\n");
        }
        System.setProperty("log4j2.configurationFile", f.getAbsolutePath());
    }
}
