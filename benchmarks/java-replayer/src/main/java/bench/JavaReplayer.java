package bench;

import java.io.BufferedOutputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.List;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Replays the store-time window [begin, end) of a topic to JSON lines the way the RocketMQ
 * community documents it with a pull consumer: for each queue, searchOffset(begin) and
 * searchOffset(end), then pull the queue from the first to the second, one pull of at most
 * PULL_SIZE messages after another, keeping the messages stored inside the window.
 *
 * <p>Usage: JavaReplayer NAMESRV TOPIC BEGIN_MS END_MS PULL_SIZE OUT_FILE
 *
 * <p>Each line has the keys of mqadmin's rangeReplay record that the comparison needs (topic,
 * broker, queue_id, queue_offset, commitlog_offset, tags, keys, born/store timestamps and body or
 * body_base64). On stdout: one JSON object with the messages written, the pulls made and the
 * seconds spent starting the consumer, replaying (first searchOffset to the flushed file) and
 * shutting the consumer down.
 */
public final class JavaReplayer {
    private JavaReplayer() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: JavaReplayer NAMESRV TOPIC BEGIN_MS END_MS PULL_SIZE OUT_FILE");
            System.exit(2);
        }
        String namesrv = args[0];
        String topic = args[1];
        long begin = Long.parseLong(args[2]);
        long end = Long.parseLong(args[3]);
        int pullSize = Integer.parseInt(args[4]);
        long t0 = System.nanoTime();
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer("bench_java_replayer");
        consumer.setNamesrvAddr(namesrv);
        consumer.start();
        long started = System.nanoTime();
        long written = 0;
        long pulls = 0;
        long replayed;
        try (OutputStream out = new BufferedOutputStream(new FileOutputStream(args[5]), 1 << 20)) {
            List<MessageQueue> queues = new ArrayList<>(consumer.fetchSubscribeMessageQueues(topic));
            queues.sort(Comparator.comparing(MessageQueue::getBrokerName).thenComparingInt(MessageQueue::getQueueId));
            for (MessageQueue mq : queues) {
                long offset = consumer.searchOffset(mq, begin);
                long stop = consumer.searchOffset(mq, end);
                while (offset < stop) {
                    PullResult result = consumer.pull(mq, "*", offset, pullSize);
                    pulls++;
                    List<MessageExt> found = result.getMsgFoundList();
                    if (found == null || found.isEmpty() || result.getNextBeginOffset() <= offset) {
                        throw new IllegalStateException(
                            mq + " at offset " + offset + " (until " + stop + "): pull answered " + result.getPullStatus());
                    }
                    for (MessageExt msg : found) {
                        long stored = msg.getStoreTimestamp();
                        if (msg.getQueueOffset() < stop && stored >= begin && stored < end) {
                            writeLine(out, msg, mq.getBrokerName());
                            written++;
                        }
                    }
                    offset = result.getNextBeginOffset();
                }
            }
            out.flush();
            replayed = System.nanoTime();
        } finally {
            consumer.shutdown();
        }
        long done = System.nanoTime();
        System.out.println("{\"written\":" + written + ",\"pulls\":" + pulls
            + ",\"start_seconds\":" + (started - t0) / 1e9 + ",\"replay_seconds\":" + (replayed - started) / 1e9
            + ",\"shutdown_seconds\":" + (done - replayed) / 1e9 + "}");
    }

    private static void writeLine(OutputStream out, MessageExt msg, String broker) throws IOException {
        StringBuilder sb = new StringBuilder(msg.getBody().length + 256);
        sb.append("{\"topic\":");
        quote(sb, msg.getTopic());
        sb.append(",\"broker\":");
        quote(sb, broker);
        sb.append(",\"queue_id\":").append(msg.getQueueId());
        sb.append(",\"queue_offset\":").append(msg.getQueueOffset());
        sb.append(",\"commitlog_offset\":").append(msg.getCommitLogOffset());
        sb.append(",\"tags\":");
        quote(sb, msg.getTags());
        sb.append(",\"keys\":");
        quote(sb, msg.getKeys());
        sb.append(",\"born_timestamp\":").append(msg.getBornTimestamp());
        sb.append(",\"store_timestamp\":").append(msg.getStoreTimestamp());
        String text = utf8(msg.getBody());
        if (text != null) {
            sb.append(",\"body\":");
            quote(sb, text);
        } else {
            sb.append(",\"body_base64\":\"").append(Base64.getEncoder().encodeToString(msg.getBody())).append('"');
        }
        sb.append("}\n");
        out.write(sb.toString().getBytes(StandardCharsets.UTF_8));
    }

    /** The body as text when it is valid UTF-8 (as mqadmin decides between body and body_base64). */
    private static String utf8(byte[] body) {
        try {
            return StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT)
                .decode(ByteBuffer.wrap(body))
                .toString();
        } catch (CharacterCodingException e) {
            return null;
        }
    }

    private static void quote(StringBuilder sb, String s) {
        if (s == null) {
            sb.append("null");
            return;
        }
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        sb.append('"');
    }
}
