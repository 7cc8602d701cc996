import java.lang.reflect.Method;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * A BROADCASTING push consumer for the test suite: it keeps its offsets in a local offsets.json
 * (under -Drocketmq.client.localOffsetStoreDir), prints one line per message, and stops cleanly
 * (persisting its offsets) once it has seen the number of messages it was told to expect.
 *
 * Usage: BroadcastConsumer NAMESRV GROUP TOPIC EXPECTED MAX_WAIT_MS
 *
 * Compiles against the 4.x and the 5.x client: MessageModel moved package between them, so it is
 * looked up by name.
 */
public final class BroadcastConsumer {
    @SuppressWarnings({"unchecked", "rawtypes"})
    private static void broadcasting(DefaultMQPushConsumer consumer) throws Exception {
        for (String name : new String[] {
            "org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel",
            "org.apache.rocketmq.common.protocol.heartbeat.MessageModel"}) {
            Class<?> model;
            try {
                model = Class.forName(name);
            } catch (ClassNotFoundException e) {
                continue;
            }
            Method setter = DefaultMQPushConsumer.class.getMethod("setMessageModel", model);
            setter.invoke(consumer, Enum.valueOf((Class) model, "BROADCASTING"));
            return;
        }
        throw new IllegalStateException("no MessageModel class on the classpath");
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0], group = args[1], topic = args[2];
        int expected = Integer.parseInt(args[3]);
        long maxWait = Long.parseLong(args[4]);
        AtomicInteger seen = new AtomicInteger();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("mqadmin-test");
        broadcasting(consumer);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPersistConsumerOffsetInterval(1000);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                synchronized (System.out) {
                    System.out.println("MSG " + m.getBrokerName() + " " + m.getQueueId() + " " + m.getQueueOffset());
                    System.out.flush();
                }
                seen.incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        System.out.println("STARTED");
        System.out.flush();
        long deadline = System.currentTimeMillis() + maxWait;
        while (seen.get() < expected && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        Thread.sleep(1500); // anything beyond what was expected would show up now
        consumer.shutdown(); // persists every queue's offset to offsets.json
        System.out.println("DONE " + seen.get());
        System.out.flush();
        System.exit(0);
    }
}
