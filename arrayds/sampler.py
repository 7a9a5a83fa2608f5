"""An I/O-aware shuffle for training on records in object stores.

:class:`BlockShuffleSampler` orders the record indices ``0 .. num_records - 1`` of one
epoch in two steps:

1. the records are cut into *blocks* of ``block_size`` neighbouring records (the last
   block may be shorter) and the blocks are permuted:
   ``numpy.random.default_rng((seed, epoch)).permutation(num_blocks)``;
2. the permuted blocks are grouped into *windows* of ``window_blocks`` consecutive
   blocks, and the records of window ``w`` are permuted among themselves:
   ``numpy.random.default_rng((seed, epoch, w + 1)).permutation(records_of_window)``.

So a reader only ever needs the records of ``window_blocks`` blocks at a time
(neighbouring records share ArrayRecord chunks and ranged GETs), while every record
moves anywhere in the epoch with its block. ``block_size=1`` and ``window_blocks >=
num_records`` is a full uniform shuffle. The order is a pure function of ``(seed,
epoch)``; epochs ``0 .. num_epochs - 1`` follow each other.

Choosing the sizes: read the order with
:meth:`arrayds.ArrayRecordDataSource.batches`, whose read-ahead (about 32 MiB of
records) fetches many windows' blocks together, one coalesced pass per shard, and
reads along the blocks of later groups that lie between them (kept, up to 32 MiB, until
their group comes), so that on an object store the requests of an epoch depend little
on the block size: on the S3 benchmark (docs/performance.md) blocks of 256 records of
1 KiB (256 KiB) read at 80-96% of a sequential scan's speed. Give windows of as many
blocks as the mixing needs (a window's records are shuffled among themselves).

The concatenated epochs are the sampler's *global sequence*: ``sampler[g]`` is its
``g``-th element (a Grain ``RecordMetadata``, as a Grain index sampler gives). Shard
``shard_index`` of ``shard_count`` (a worker, a host) takes the global positions
``g`` with ``g % shard_count == shard_index``, the way Grain's ``DataLoader`` shards a
sampler: within every epoch the shards are disjoint and cover all records, and they
read the same windows at the same time. Iterating the sampler (a PyTorch ``Sampler``
for a ``DataLoader``) yields its shard's record indices; :meth:`state_dict` /
:meth:`load_state_dict` save and restore where the iteration is (``epoch``,
``position`` in the epoch). :func:`block_shuffle` is the same order as a Grain
``MapDataset`` step.

>>> s = BlockShuffleSampler(10, block_size=2, window_blocks=2, seed=0)
>>> order = list(s)
>>> sorted(order) == list(range(10))
True
>>> s.epoch_order(0).tolist() == order
True
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["BlockShuffleSampler", "block_shuffle"]


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"BlockShuffleSampler: {name} must be an int >= {minimum}, got {value!r}")
    return int(value)


class BlockShuffleSampler:
    """The block-then-window shuffle of ``num_records`` record indices (see the module
    docstring). ``num_epochs=None`` repeats without end.

    >>> s = BlockShuffleSampler(6, block_size=3, window_blocks=1, seed=1)
    >>> o = s.epoch_order(0).tolist(); sorted(o[:3]) in ([0, 1, 2], [3, 4, 5])
    True
    >>> a, b = (BlockShuffleSampler(6, 3, 1, seed=1, shard_index=i, shard_count=2) for i in (0, 1))
    >>> sorted(list(a) + list(b)) == list(range(6)), len(a), a[0].record_key == o[0]
    (True, 3, True)
    """

    def __init__(
        self,
        num_records: int,
        block_size: int,
        window_blocks: int,
        seed: int,
        shard_index: int = 0,
        shard_count: int = 1,
        num_epochs: int | None = 1,
    ) -> None:
        self.num_records = _positive_int("num_records", num_records)
        self.block_size = _positive_int("block_size", block_size)
        self.window_blocks = _positive_int("window_blocks", window_blocks)
        self.seed = _positive_int("seed", seed, 0)
        self.shard_count = _positive_int("shard_count", shard_count)
        self.shard_index = _positive_int("shard_index", shard_index, 0)
        if self.shard_index >= self.shard_count:
            raise ValueError(
                f"BlockShuffleSampler: shard_index must be < shard_count ({shard_count}), "
                f"got {shard_index!r}"
            )
        self.num_epochs = None if num_epochs is None else _positive_int("num_epochs", num_epochs)
        self.num_blocks = -(-self.num_records // self.block_size)
        self._next = self.shard_index  # the next global position this shard yields
        self._epoch_cache: tuple[int, np.ndarray, list[int]] | None = None
        self._window_cache: tuple[int, int, np.ndarray] | None = None

    def __repr__(self) -> str:
        # Grain checkpoints compare the sampler's repr
        return (
            f"BlockShuffleSampler(num_records={self.num_records}, block_size="
            f"{self.block_size}, window_blocks={self.window_blocks}, seed={self.seed}, "
            f"num_epochs={self.num_epochs})"
        )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_epoch_cache"] = state["_window_cache"] = None
        return state

    # -- the order

    def _blocks(self, epoch: int) -> tuple[np.ndarray, list[int]]:
        """The permuted blocks of ``epoch`` and the first position of every window."""
        c = self._epoch_cache
        if c is None or c[0] != epoch:
            perm = np.random.default_rng((self.seed, epoch)).permutation(self.num_blocks)
            sizes = np.full(self.num_blocks, self.block_size, dtype=np.int64)
            sizes[-1] = self.num_records - (self.num_blocks - 1) * self.block_size
            ends = np.cumsum(sizes[perm])
            starts = [0] + ends[self.window_blocks - 1 :: self.window_blocks].tolist()
            c = self._epoch_cache = (
                epoch,
                perm,
                starts[: -(-self.num_blocks // self.window_blocks)],
            )
        return c[1], c[2]

    def _window(self, epoch: int, w: int) -> np.ndarray:
        c = self._window_cache
        if c is None or c[:2] != (epoch, w):
            perm, _ = self._blocks(epoch)
            blocks = perm[w * self.window_blocks : (w + 1) * self.window_blocks]
            records = np.concatenate(
                [
                    np.arange(b * self.block_size, min((b + 1) * self.block_size, self.num_records))
                    for b in blocks
                ]
            )
            rng = np.random.default_rng((self.seed, epoch, w + 1))
            c = self._window_cache = (epoch, w, rng.permutation(records))
        return c[2]

    def record_at(self, g: int) -> int:
        """The record index at global position ``g`` (``IndexError`` past the end)."""
        if g < 0 or (self.num_epochs is not None and g >= self.num_epochs * self.num_records):
            raise IndexError(f"{self!r}: global position {g} out of range")
        epoch, p = divmod(int(g), self.num_records)
        _, starts = self._blocks(epoch)
        w = bisect.bisect_right(starts, p) - 1
        return int(self._window(epoch, w)[p - starts[w]])

    def epoch_order(self, epoch: int) -> np.ndarray:
        """This shard's record indices of ``epoch``, in order (``shard_count=1``: the
        whole epoch)."""
        _, starts = self._blocks(epoch)
        whole = np.concatenate([self._window(epoch, w) for w in range(len(starts))])
        first = (self.shard_index - epoch * self.num_records) % self.shard_count
        return whole[first :: self.shard_count]

    # -- Grain: an index sampler over the global sequence

    def __getitem__(self, index: int) -> Any:
        """Grain's sampler protocol: a ``grain.python.RecordMetadata`` whose
        ``record_key`` is the record at global position ``index``."""
        from grain.python import RecordMetadata

        rng = np.random.Generator(np.random.Philox(key=self.seed + int(index)))
        return RecordMetadata(index=int(index), record_key=self.record_at(index), rng=rng)

    # -- PyTorch: an iterable of this shard's indices, with a checkpoint

    def __len__(self) -> int:
        """How many indices iterating yields from the start (all epochs, this shard)."""
        if self.num_epochs is None:
            raise TypeError(f"{self!r} repeats without end (num_epochs=None): no length")
        total = self.num_epochs * self.num_records
        return max(0, -(-(total - self.shard_index) // self.shard_count))

    def __iter__(self) -> Iterator[int]:
        """This shard's record indices from the saved position on (:meth:`state_dict`),
        to the end of the last epoch."""
        while True:
            try:
                record = self.record_at(self._next)
            except IndexError:
                self._next = self.shard_index  # the next iteration starts over
                return
            self._next += self.shard_count
            yield record

    def state_dict(self) -> dict[str, int]:
        """Where iteration is: ``{"epoch": e, "position": p}``, the next index to yield
        being at position ``p`` of epoch ``e``.

        >>> s = BlockShuffleSampler(5, 2, 1, seed=3)
        >>> it = iter(s); _ = next(it); s.state_dict()
        {'epoch': 0, 'position': 1}
        """
        epoch, position = divmod(self._next, self.num_records)
        return {"epoch": epoch, "position": position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Resume at a :meth:`state_dict` of a sampler of the same arguments; the next
        iteration continues from there. A position that is not this shard's is a
        ``ValueError``."""
        try:
            g = int(state["epoch"]) * self.num_records + int(state["position"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{self!r}: not a sampler state: {state!r}") from e
        if g < 0 or g % self.shard_count != self.shard_index:
            raise ValueError(
                f"{self!r}: state {state!r} is not a position of shard {self.shard_index} "
                f"of {self.shard_count}"
            )
        self._next = g


def block_shuffle(dataset: Any, block_size: int, window_blocks: int, seed: int) -> Any:
    """The Grain ``MapDataset`` ``dataset`` in the order of a
    :class:`BlockShuffleSampler` without end (index ``i`` of the result is in epoch
    ``i // len(dataset)``, as with ``MapDataset.shuffle``): a
    ``BlockShuffleMapDataset``.

    >>> import grain
    >>> ds = block_shuffle(grain.MapDataset.range(8), block_size=4, window_blocks=1, seed=0)
    >>> first = [ds[i] for i in range(4)]
    >>> sorted(ds[i] for i in range(8)), sorted(first) in ([0, 1, 2, 3], [4, 5, 6, 7])
    ([0, 1, 2, 3, 4, 5, 6, 7], True)
    """
    return _map_dataset_class()(dataset, block_size, window_blocks, seed)


_map_dataset: type | None = None


def _map_dataset_class() -> type:
    """``BlockShuffleMapDataset``, made on first use (it subclasses Grain's
    ``MapDataset``; importing grain is slow), reachable as
    ``arrayds.sampler.BlockShuffleMapDataset`` (so that it pickles)."""
    global _map_dataset
    if _map_dataset is not None:
        return _map_dataset
    import grain

    class BlockShuffleMapDataset(grain.MapDataset):  # type: ignore[misc,name-defined]
        """A Grain ``MapDataset`` step: its parent in a :class:`BlockShuffleSampler`
        order (see :func:`block_shuffle`)."""

        def __init__(self, parent: Any, block_size: int, window_blocks: int, seed: int):
            super().__init__(parent)
            n = len(parent)
            self._sampler = BlockShuffleSampler(n, block_size, window_blocks, seed, num_epochs=None)

        def __len__(self) -> int:
            return len(self._parent)

        def __str__(self) -> str:
            return f"BlockShuffleMapDataset({self._sampler!r})"

        def __getitem__(self, index: Any) -> Any:
            if isinstance(index, slice):
                return self.slice(index)
            epoch = int(index) // self._sampler.num_records
            return self._parent[self._sampler.record_at(index) + epoch * self._sampler.num_records]

    BlockShuffleMapDataset.__module__ = __name__
    BlockShuffleMapDataset.__qualname__ = "BlockShuffleMapDataset"
    _map_dataset = BlockShuffleMapDataset
    return BlockShuffleMapDataset


def __getattr__(name: str) -> Any:
    if name == "BlockShuffleMapDataset":
        return _map_dataset_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
