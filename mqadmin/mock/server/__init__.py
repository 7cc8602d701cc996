"""The mock broker's wire door: a MockCluster served over TCP in the RocketMQ remoting protocol.

One listener plays the name server, one listener per broker plays that broker, so real clients
(the C++ client behind rocketmq-client-python, Java clients, our own remoting backend) can
produce, consume with a push consumer, commit offsets and receive resets. Every answer comes
from the same model the embedded backend calls (one model, two doors); this package only
speaks the wire.

Where things are:

- ``connection``: one socket, plaintext or TLS (in memory), its outbox and decoded requests;
- ``ioloop``: the selectors loop: accept (with back-off when out of descriptors), read, write,
  idle timeouts;
- ``core``: ``MockServer``: life cycle, worker pool, dispatch, periodic flush, client registry;
- ``longpoll``: pulls held until a message arrives;
- ``role``: the role base class and what every handler shares;
- ``namesrv``: the name-server role and its handlers;
- ``broker``: the broker role's state and checks; its handlers by area in ``messages``,
  ``offsets``, ``clients`` and ``admin``;
- ``handlers``: every request code served, and its handler, in two tables;
- ``serve``: opening a store and serving it for ``mqadmin mockBroker``.

Every module logs to the one logger ``mqadmin.mock.server``.
"""

from __future__ import annotations

from mqadmin.mock.server.broker import MAX_QUEUE_NUMS
from mqadmin.mock.server.core import DEFAULT_BIND, DEFAULT_NAMESRV_PORT, FLUSH_INTERVAL_S, MockServer
from mqadmin.mock.server.serve import ServeReport, ServerReady, open_store, serve_store, tls_context

__all__ = [
    "DEFAULT_BIND",
    "DEFAULT_NAMESRV_PORT",
    "FLUSH_INTERVAL_S",
    "MAX_QUEUE_NUMS",
    "MockServer",
    "ServeReport",
    "ServerReady",
    "open_store",
    "serve_store",
    "tls_context",
]
