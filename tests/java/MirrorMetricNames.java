package org.apache.kafka.connect.mirror;

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import javax.management.MBeanAttributeInfo;
import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.metrics.JmxReporter;
import org.apache.kafka.common.metrics.KafkaMetricsContext;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.common.metrics.internals.PluginMetricsImpl;
import org.apache.kafka.common.utils.Time;

/**
 * The metric names Kafka's own MirrorMaker 2 registers with metric.names.formats = new (KIP-1280), read from
 * Kafka's metric registry and from the JMX MBeans its JmxReporter makes of them, for a test to compare with
 * what mm2py serves. It builds MM2's task metrics the way a Connect worker does: a Metrics registry in the
 * "kafka.connect" namespace and, per task, a PluginMetricsImpl tagged connector=<name>, task=<index>
 * (ConnectMetrics.taskPluginMetrics). In MM2's own package, since those metrics classes are package-private.
 *
 * Arguments: source alias, target alias, remote topic, consumer group. Prints one line per metric:
 * "metric <group> <name> <tag>=<value>,..." and one per MBean: "mbean <object name> <attribute>,...".
 */
public class MirrorMetricNames {
    public static void main(String[] args) throws Exception {
        String source = args[0], target = args[1], remoteTopic = args[2], group = args[3];
        List<MetricsReporter> reporters = new ArrayList<>();
        reporters.add(new JmxReporter());
        Metrics metrics = new Metrics(
            new MetricConfig(), reporters, Time.SYSTEM, new KafkaMetricsContext("kafka.connect"));
        Map<String, String> common = new LinkedHashMap<>();
        common.put("source.cluster.alias", source);
        common.put("target.cluster.alias", target);
        common.put("metric.names.formats", "new");

        Map<String, String> sourceTask = new LinkedHashMap<>(common);
        sourceTask.put("name", "MirrorSourceConnector");
        sourceTask.put("connector.class", MirrorSourceConnector.class.getName());
        String upstream = remoteTopic.substring(source.length() + 1);
        sourceTask.put("task.assigned.partitions", upstream + "-0");
        sourceTask.put("task.index", "0");
        MirrorSourceMetrics sourceMetrics =
            new MirrorSourceTaskConfig(sourceTask).metrics(pluginMetrics(metrics, "MirrorSourceConnector"));
        TopicPartition remote = new TopicPartition(remoteTopic, 0);
        sourceMetrics.countRecord(remote);
        sourceMetrics.recordAge(remote, 5);
        sourceMetrics.replicationLatency(remote, 7);
        sourceMetrics.recordBytes(remote, 100);

        Map<String, String> checkpointTask = new LinkedHashMap<>(common);
        checkpointTask.put("name", "MirrorCheckpointConnector");
        checkpointTask.put("connector.class", MirrorCheckpointConnector.class.getName());
        checkpointTask.put("task.assigned.groups", group);
        checkpointTask.put("task.index", "0");
        MirrorCheckpointMetrics checkpointMetrics =
            new MirrorCheckpointTaskConfig(checkpointTask).metrics(pluginMetrics(metrics, "MirrorCheckpointConnector"));
        checkpointMetrics.checkpointLatency(remote, group, 3);

        for (MetricName name : new ArrayList<>(metrics.metrics().keySet())) {
            if (!name.group().equals("plugins")) continue;
            StringBuilder tags = new StringBuilder();
            for (Map.Entry<String, String> tag : name.tags().entrySet()) {
                if (tags.length() > 0) tags.append(',');
                tags.append(tag.getKey()).append('=').append(tag.getValue());
            }
            System.out.println("metric " + name.group() + " " + name.name() + " " + tags);
        }
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        for (ObjectName bean : new TreeSet<>(server.queryNames(new ObjectName("kafka.connect:type=plugins,*"), null))) {
            StringBuilder attributes = new StringBuilder();
            for (MBeanAttributeInfo attribute : server.getMBeanInfo(bean).getAttributes()) {
                if (attributes.length() > 0) attributes.append(',');
                attributes.append(attribute.getName());
            }
            System.out.println("mbean " + bean + " " + attributes);
        }
        metrics.close();
    }

    private static PluginMetricsImpl pluginMetrics(Metrics metrics, String connector) {
        Map<String, String> tags = new LinkedHashMap<>();
        tags.put("connector", connector);
        tags.put("task", "0");
        return new PluginMetricsImpl(metrics, tags);
    }
}
