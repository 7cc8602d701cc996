"""A RocketMQ 5 gRPC client peer (``rocketmq-python-client``) talking to a rocketmq-proxy.

``produce`` sends ``--count`` messages with bodies ``<prefix>-<i>`` and exits; ``consume``
runs a SimpleConsumer (it consumes by POP through the proxy) until SIGTERM.  The first
``--hold`` messages it receives are left un-acked, so they stay in flight until their
invisible time runs out and the broker hands them out again.  Events are JSON lines.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from _peer import emit


def _config(endpoint: str, timeout: float) -> object:
    from rocketmq import ClientConfiguration, Credentials

    return ClientConfiguration(endpoint, Credentials(), request_timeout=timeout)


def produce(args: argparse.Namespace) -> int:
    from rocketmq import Message, Producer

    producer = Producer(_config(args.endpoint, 10), (args.topic,))
    producer.startup()
    try:
        for i in range(args.count):
            msg = Message()
            msg.topic = args.topic
            msg.body = f"{args.prefix}-{i}".encode()
            receipt = producer.send(msg)
            queue = receipt.message_queue
            emit(
                "sent",
                body=f"{args.prefix}-{i}",
                msg_id=receipt.message_id,
                queue=queue.message_queue0().id if queue is not None else None,
                offset=receipt.offset,
            )
    finally:
        producer.shutdown()
    return 0


def consume(args: argparse.Namespace) -> int:
    from rocketmq import FilterExpression, SimpleConsumer

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer = SimpleConsumer(
        _config(args.endpoint, args.await_s + 5),
        args.group,
        {args.topic: FilterExpression("*")},
        await_duration=args.await_s,
    )
    consumer.startup()
    emit("started", group=args.group, topic=args.topic)
    held = 0
    deadline = time.monotonic() + args.max_seconds
    try:
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                messages = consumer.receive(args.batch, args.invisible)
            except Exception as exc:  # an empty long poll is reported as an exception by some versions
                emit("receive_error", error=f"{type(exc).__name__}: {exc}")
                stop.wait(0.5)
                continue
            for msg in messages or ():
                hold = held < args.hold
                if hold:
                    held += 1
                else:
                    consumer.ack(msg)
                emit(
                    "message",
                    body=msg.body.decode("utf-8", "backslashreplace"),
                    msg_id=msg.message_id,
                    attempt=msg.delivery_attempt,
                    acked=not hold,
                )
    finally:
        consumer.shutdown()
        emit("stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    prod = sub.add_parser("produce")
    prod.add_argument("--endpoint", required=True)
    prod.add_argument("--topic", required=True)
    prod.add_argument("--count", type=int, required=True)
    prod.add_argument("--prefix", default="m")
    cons = sub.add_parser("consume")
    cons.add_argument("--endpoint", required=True)
    cons.add_argument("--group", required=True)
    cons.add_argument("--topic", required=True)
    cons.add_argument("--hold", type=int, default=0, help="leave the first N received messages un-acked")
    cons.add_argument("--invisible", type=int, default=20, help="seconds a received message stays invisible")
    cons.add_argument("--batch", type=int, default=16)
    cons.add_argument("--await-s", type=int, default=2, help="long-polling time per receive")
    cons.add_argument("--max-seconds", type=float, default=300, help="exit on its own after this long")
    args = parser.parse_args(argv)
    return produce(args) if args.cmd == "produce" else consume(args)


if __name__ == "__main__":
    sys.exit(main())
