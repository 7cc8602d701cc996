"""mqadmin: see, move and replay Apache RocketMQ consumer offsets safely."""

__version__ = "0.1.0"
