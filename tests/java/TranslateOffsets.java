import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

/**
 * MirrorMaker 2's own offset translation, for tests that hold mm2py's against it.
 *
 * Usage: TranslateOffsets REMOTE_CLUSTER_ALIAS GROUP TIMEOUT_MS KEY=VALUE...
 * The KEY=VALUE pairs are the MirrorClient properties of the cluster the checkpoints live on (at least
 * bootstrap.servers). Calls RemoteClusterUtils.translateOffsets and prints one JSON array on stdout:
 * [{"topic":T,"partition":P,"offset":O}, ...], sorted by topic and partition. Logging goes to stderr.
 */
public final class TranslateOffsets {

    private TranslateOffsets() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: TranslateOffsets REMOTE_CLUSTER_ALIAS GROUP TIMEOUT_MS KEY=VALUE...");
            System.exit(2);
        }
        Map<String, Object> props = new HashMap<>();
        for (int i = 3; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                System.err.println("not KEY=VALUE: " + args[i]);
                System.exit(2);
            }
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        Map<TopicPartition, OffsetAndMetadata> translated = RemoteClusterUtils.translateOffsets(
                props, args[0], args[1], Duration.ofMillis(Long.parseLong(args[2])));
        List<TopicPartition> partitions = new ArrayList<>(translated.keySet());
        partitions.sort((a, b) -> a.topic().equals(b.topic())
                ? Integer.compare(a.partition(), b.partition()) : a.topic().compareTo(b.topic()));
        StringBuilder out = new StringBuilder("[");
        for (TopicPartition tp : partitions) {
            if (out.length() > 1) {
                out.append(',');
            }
            out.append("{\"topic\":").append(jsonString(tp.topic()))
                    .append(",\"partition\":").append(tp.partition())
                    .append(",\"offset\":").append(translated.get(tp).offset()).append('}');
        }
        System.out.println(out.append(']'));
    }

    /** A JSON string literal; topic names are ASCII letters, digits, '.', '_' and '-', but escape anyway. */
    private static String jsonString(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
