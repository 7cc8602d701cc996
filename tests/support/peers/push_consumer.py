"""Official-client push-consumer peer: one JSON line per received message on stdout.

Runs as its own process (see ``tests/support/official_client.py``): the C++ client's
``ShutdownPushConsumer`` can segfault, which must show up as a failed peer, not a dead pytest.
Lines::

    {"event": "started", "pid": ..., "group": ..., "topic": ..., "model": "CLUSTERING"}
    {"event": "message", "n": 1, "topic": ..., "queue_id": 2, "queue_offset": 7, "msg_id": ...,
     "tags": ..., "keys": ..., "body": ..., "reconsume_times": 0, "status": "CONSUME_SUCCESS", ...}
    {"event": "stopping", "reason": "max-messages" | "idle" | "signal" | "deadline"}
    {"event": "shutdown", "elapsed_ms": ...}

It stops on SIGTERM/SIGINT, after ``--max-messages`` deliveries, after ``--idle-exit``
seconds without a delivery (counted from start until the first one), or at ``--deadline``.
``shutdown()`` persists the consumed offsets to the broker (clustering) or to
``$HOME/.rocketmq_offsets`` (broadcasting) before the process exits.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time
from collections import Counter
from typing import Any

from _peer import LOG_LEVELS, emit, load_client, text

# Properties worth showing; the C API can only read named properties, not list them.
_PROPERTIES = (
    "UNIQ_KEY",
    "RETRY_TOPIC",
    "ORIGIN_MESSAGE_ID",
    "REAL_TOPIC",
    "REAL_QID",
    "MIN_OFFSET",
    "MAX_OFFSET",
    "DELAY",
    "PGROUP",
    "CONSUME_START_TIME",
    "MAX_RECONSUME_TIMES",
)
_TRACE_OPEN, _TRACE_CLOSE = 0, 1  # CTraceModel


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="consume messages with rocketmq-client-python's PushConsumer")
    p.add_argument("--namesrv", required=True, help="name server address list, host:port[;host:port]")
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--expression", default="*", help="tag expression, e.g. 'TagA || TagB'")
    p.add_argument("--broadcasting", action="store_true", help="BROADCASTING instead of CLUSTERING")
    p.add_argument("--orderly", action="store_true", help="orderly listener (locks queues on the broker)")
    p.add_argument("--max-messages", type=int, default=None, help="stop after this many deliveries")
    p.add_argument("--idle-exit", type=float, default=None, help="stop after this many seconds without one")
    p.add_argument("--deadline", type=float, default=None, help="stop after this many seconds in any case")
    p.add_argument(
        "--linger", type=float, default=0.0, help="seconds to stay online after the stop condition, before shutdown"
    )
    p.add_argument(
        "--fail-times",
        type=int,
        default=0,
        help="answer RECONSUME_LATER for the first N deliveries of each message (send-back path)",
    )
    p.add_argument(
        "--block-after",
        type=int,
        default=None,
        help="after N deliveries the listener blocks until the peer is stopped (a stuck listener)",
    )
    p.add_argument("--thread-count", type=int, default=None)
    p.add_argument("--batch-max-size", type=int, default=None, help="messages per listener call (default 1)")
    p.add_argument("--instance-name", default=None)
    p.add_argument("--log-level", choices=sorted(LOG_LEVELS), default=None)
    p.add_argument(
        "--message-trace",
        action="store_true",
        help="send consume traces to RMQ_SYS_TRACE_TOPIC (off: the trace producer only exists)",
    )
    p.add_argument(
        "--skip-shutdown",
        action="store_true",
        help="exit without shutdown(): no final offset commit, no unregister (like a crash)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    client = load_client()
    model = client.MessageModel.BROADCASTING if args.broadcasting else client.MessageModel.CLUSTERING
    consumer = client.PushConsumer(args.group, orderly=args.orderly, message_model=model)
    consumer.set_name_server_address(args.namesrv)
    if args.instance_name:
        consumer.set_instance_name(args.instance_name)
    if args.thread_count:
        consumer.set_thread_count(args.thread_count)
    if args.batch_max_size:
        consumer.set_message_batch_max_size(args.batch_max_size)
    if args.log_level:
        client.dll.SetPushConsumerLogLevel(consumer._handle, LOG_LEVELS[args.log_level])

    stop = threading.Event()
    reason: list[str] = []
    lock = threading.Lock()
    state = {"n": 0, "last": time.monotonic()}
    deliveries: Counter[str] = Counter()

    def on_message(msg: Any) -> Any:
        with lock:
            key = msg.id
            deliveries[key] += 1
            fail = deliveries[key] <= args.fail_times
            state["n"] += 1
            state["last"] = time.monotonic()
            n = state["n"]
        props = {name: text(msg.get_property(name)) for name in _PROPERTIES}
        status = client.ConsumeStatus.RECONSUME_LATER if fail else client.ConsumeStatus.CONSUME_SUCCESS
        emit(
            "message",
            n=n,
            topic=msg.topic,
            queue_id=msg.queue_id,
            queue_offset=msg.queue_offset,
            msg_id=msg.id,
            tags=text(msg.tags),
            keys=text(msg.keys),
            body=text(msg.body),
            reconsume_times=msg.reconsume_times,
            store_size=msg.store_size,
            born_timestamp=msg.born_timestamp,
            store_timestamp=msg.store_timestamp,
            commit_log_offset=msg.commit_log_offset,
            delay_time_level=msg.delay_time_level,
            properties={k: v for k, v in props.items() if v},
            status=status.name,
        )
        if args.max_messages is not None and n >= args.max_messages:
            reason.append("max-messages")
            stop.set()
        if args.block_after is not None and n > args.block_after:
            emit("blocked", n=n, topic=msg.topic, queue_id=msg.queue_id, queue_offset=msg.queue_offset)
            stop.wait()  # stuck in the listener: the client cannot commit past this message
        return status

    def on_signal(signum: int, _frame: Any) -> None:
        reason.append("signal")
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    consumer.subscribe(args.topic, on_message, args.expression)
    started = time.monotonic()
    # The 2.1.0 library's shutdown first stops the message-trace producer without checking that
    # one exists, so with tracing off (the default) ShutdownPushConsumer dereferences NULL before
    # it persists offsets or unregisters.  Tracing on at start() creates that producer; off again
    # right after keeps trace messages from being sent (the send path does check the flag).
    set_trace = client.dll.SetPushConsumerMessageTrace
    set_trace.argtypes = [ctypes.c_void_p, ctypes.c_int]
    set_trace(consumer._handle, _TRACE_OPEN)
    consumer.start()
    if not args.message_trace:
        set_trace(consumer._handle, _TRACE_CLOSE)
    emit(
        "started",
        pid=os.getpid(),
        group=args.group,
        topic=args.topic,
        expression=args.expression,
        model=model.name,
        orderly=args.orderly,
    )

    while not stop.is_set():
        stop.wait(0.2)
        now = time.monotonic()
        if args.deadline is not None and now - started >= args.deadline:
            reason.append("deadline")
            break
        if args.idle_exit is not None:
            with lock:
                idle = now - state["last"]
            if idle >= args.idle_exit:
                reason.append("idle")
                break
    emit("stopping", reason=reason[0] if reason else "unknown", received=state["n"])
    if args.linger:
        time.sleep(args.linger)

    if args.skip_shutdown:
        os._exit(0)
    t0 = time.monotonic()
    consumer.shutdown()
    emit("shutdown", elapsed_ms=round((time.monotonic() - t0) * 1000))
    return 0


if __name__ == "__main__":
    sys.exit(main())
