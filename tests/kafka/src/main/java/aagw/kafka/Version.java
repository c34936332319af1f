package aagw.kafka;

/* Prints the Kafka client version on the classpath: scripts/kafka-fetch
 * runs it to check that the jar folder is complete and usable. */
public final class Version {
    public static void main(String[] args) {
        System.out.println(org.apache.kafka.common.utils.AppInfoParser.getVersion());
    }
}
