"""Official-client producer peer: send N messages, one JSON line per send on stdout.

Runs as its own process (see ``tests/support/official_client.py``), because the C++ client
under ``rocketmq-client-python`` may crash on shutdown.  Lines::

    {"event": "started", "pid": ..., "group": ..., "namesrv": ...}
    {"event": "sent", "i": 0, "status": "OK", "msg_id": "...", "offset": 12, "topic": ..., "tags": ..., "keys": ..., "body": ...}
    {"event": "error", "i": 3, "error": "ProducerSendSyncFailed", "message": "..."}
    {"event": "done", "sent": 50, "failed": 0, "elapsed_ms": 812}
    {"event": "shutdown"}

``offset`` is the queue offset the broker assigned; the C API's send result has no queue id
(only status, message id, offset), so the queue is not reported.  ``msg_id`` is the
client-generated UNIQ_KEY, not the broker's offset message id.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from _peer import LOG_LEVELS, emit, load_client, text


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="send messages with rocketmq-client-python")
    p.add_argument("--namesrv", required=True, help="name server address list, host:port[;host:port]")
    p.add_argument("--topic", required=True)
    p.add_argument("--group", default="mqadmin_peer_producer")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--tag", action="append", default=[], help="repeatable; message i gets tag[i %% len]")
    p.add_argument("--keys", default=None, help="keys template, e.g. 'k{i}'")
    p.add_argument("--body", default="body-{i}", help="body template (UTF-8, no NUL: the C API takes char*)")
    p.add_argument("--property", action="append", default=[], metavar="K=V", help="user property (template)")
    p.add_argument(
        "--sharding-key", default=None, help="template; use the orderly producer, which hashes it to pick the queue"
    )
    p.add_argument("--delay-level", type=int, default=0)
    p.add_argument("--interval", type=float, default=0.0, help="seconds between sends")
    p.add_argument("--timeout-ms", type=int, default=None, help="send timeout (client default 3000)")
    p.add_argument("--keep-going", action="store_true", help="report failed sends and continue (exit 1 at end)")
    p.add_argument("--instance-name", default=None)
    p.add_argument("--log-level", choices=sorted(LOG_LEVELS), default=None)
    p.add_argument("--skip-shutdown", action="store_true", help="exit without shutdown() (like a crash)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    client = load_client()
    orderly = args.sharding_key is not None
    producer = client.Producer(args.group, orderly=orderly, timeout=args.timeout_ms)
    producer.set_name_server_address(args.namesrv)
    if args.instance_name:
        client.dll.SetProducerInstanceName(producer._handle, args.instance_name.encode())
    if args.log_level:
        client.dll.SetProducerLogLevel(producer._handle, LOG_LEVELS[args.log_level])
    producer.start()
    emit("started", pid=os.getpid(), group=args.group, namesrv=args.namesrv, orderly=orderly)

    sent = failed = 0
    started = time.monotonic()
    for i in range(args.count):
        msg = client.Message(args.topic)
        tags = args.tag[i % len(args.tag)].format(i=i) if args.tag else None
        keys = args.keys.format(i=i) if args.keys is not None else None
        body = args.body.format(i=i)
        if tags:
            msg.set_tags(tags)
        if keys:
            msg.set_keys(keys)
        msg.set_body(body)
        for prop in args.property:
            name, _, value = prop.partition("=")
            msg.set_property(name, value.format(i=i))
        if args.delay_level:
            msg.set_delay_time_level(args.delay_level)
        try:
            if orderly:
                result = producer.send_orderly_with_sharding_key(msg, args.sharding_key.format(i=i))
            else:
                result = producer.send_sync(msg)
        except Exception as exc:  # the wrapper raises one class per C status
            failed += 1
            emit("error", i=i, error=type(exc).__name__, message=text(str(exc)))
            if not args.keep_going:
                break
        else:
            sent += 1
            emit(
                "sent",
                i=i,
                status=result.status.name,
                msg_id=result.msg_id,
                offset=result.offset,
                topic=args.topic,
                tags=tags,
                keys=keys,
                body=body,
            )
        finally:
            client.dll.DestroyMessage(msg._handle)
        if args.interval:
            time.sleep(args.interval)
    emit("done", sent=sent, failed=failed, elapsed_ms=round((time.monotonic() - started) * 1000))

    if args.skip_shutdown:
        os._exit(0 if failed == 0 else 1)
    producer.shutdown()
    emit("shutdown")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
