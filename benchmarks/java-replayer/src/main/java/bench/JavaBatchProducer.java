package bench;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The batch producer an application writes with the official client: THREADS threads share one
 * DefaultMQProducer and each sends batches of BATCH messages of SIZE bytes (tag TagA) to the
 * topic's queues in turn, synchronously, until TOTAL messages are sent. The producer starts and
 * learns the route before the clock starts, so the figure is the broker's ingest, not JVM start.
 *
 * <p>Usage: JavaBatchProducer NAMESRV TOPIC TOTAL THREADS BATCH SIZE
 *
 * <p>On stdout: one JSON object with the messages sent and the seconds the sending took.
 */
public final class JavaBatchProducer {
    private JavaBatchProducer() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: JavaBatchProducer NAMESRV TOPIC TOTAL THREADS BATCH SIZE");
            System.exit(2);
        }
        String namesrv = args[0];
        String topic = args[1];
        long total = Long.parseLong(args[2]);
        int threads = Integer.parseInt(args[3]);
        int batch = Integer.parseInt(args[4]);
        int size = Integer.parseInt(args[5]);

        DefaultMQProducer producer = new DefaultMQProducer("bench_java_producer");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("bench-" + ProcessHandle.current().pid());
        producer.setMaxMessageSize(Math.max(4 * 1024 * 1024, 2 * batch * size));
        producer.setSendMsgTimeout(30_000);
        producer.start();
        try {
            run(producer, topic, total, threads, batch, size);
        } catch (Throwable e) {
            System.err.println("failed: " + e);
            System.exit(1);  // the client's own threads would keep the JVM alive
        }
        producer.shutdown();
    }

    private static void run(DefaultMQProducer producer, String topic, long total, int threads, int batch, int size)
            throws Exception {
        List<MessageQueue> queues = new ArrayList<>();
        for (int attempt = 1; queues.isEmpty(); attempt++) {
            try {  // a cold JVM on a busy machine can miss the client's 3 s route timeout
                queues.addAll(producer.fetchPublishMessageQueues(topic));
            } catch (Exception e) {
                if (attempt == 5) {
                    throw e;
                }
                Thread.sleep(1000);
            }
        }

        long perThread = total / threads / batch;
        CyclicBarrier start = new CyclicBarrier(threads + 1);
        AtomicLong sent = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int threadNo = t;
            Thread worker = new Thread(() -> {
                try {
                    start.await();
                    for (long r = 0; r < perThread && failure.get() == null; r++) {
                        long seq = (threadNo * perThread + r) * batch;
                        List<Message> messages = new ArrayList<>(batch);
                        for (int i = 0; i < batch; i++) {
                            messages.add(new Message(topic, "TagA", body(seq + i, size)));
                        }
                        MessageQueue mq = queues.get((int) ((threadNo + r) % queues.size()));
                        SendResult result = producer.send(messages, mq);
                        if (result.getSendStatus() != SendStatus.SEND_OK) {
                            throw new IllegalStateException("send answered " + result.getSendStatus());
                        }
                        sent.addAndGet(batch);
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            });
            workers.add(worker);
            worker.start();
        }
        start.await();
        long t0 = System.nanoTime();
        for (Thread worker : workers) {
            worker.join();
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        if (failure.get() != null) {
            throw new IllegalStateException("send failed", failure.get());
        }
        System.out.println("{\"sent\": " + sent.get() + ", \"seconds\": " + seconds + "}");
    }

    private static byte[] body(long seq, int size) {
        byte[] unit = String.format("%08d", seq % 100_000_000L).getBytes(StandardCharsets.US_ASCII);
        byte[] out = new byte[size];
        for (int i = 0; i < size; i++) {
            out[i] = unit[i % unit.length];
        }
        return out;
    }
}
