"""Many writers, one dataset: a folder of shards (:mod:`~trajstore.shards.layout`), each an ordinary buffer
folder with its own writer, read as one buffer by :class:`ShardedBuffer` (:mod:`~trajstore.shards.reader`)."""

from trajstore.shards.reader import ShardedBuffer

__all__ = ["ShardedBuffer"]
