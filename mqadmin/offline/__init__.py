"""Read-only access to brokers' store directories (``-n store:///path/to/store-root``).

``connect()`` opens it for ``store:`` addresses; commands never import it directly.
"""

from __future__ import annotations

from mqadmin.offline.backend import OfflineAdmin, open_store

__all__ = ["OfflineAdmin", "open_store"]
