"""Reading along: records of later read-ahead groups read with a group's requests and
kept until their group comes.

:meth:`arrayds.ArrayRecordDataSource.batches` reads the records of a group of batches
together, one coalesced pass per file (:mod:`arrayds.storage.coalesce`: two byte ranges
at most ``gap`` bytes apart become one request, the gap fetched and dropped). In a
shuffled order a group's records lie apart in each file, and most records between them
belong to later groups of the same order: fetched and dropped, they are fetched again
when their group comes, and a gap of more than ``gap`` bytes splits the file's pass
into several requests. Read along and kept, they cost no second fetch and their gap
joins; a file whose later records are all kept is not read again.

The plan of one group (:meth:`ReadAlong.plan`), within ``keep_bytes`` of records kept
(stored bytes, estimated from each file's size per record), in three steps:

1. whole files: in a file the group reads, every record a later group reads is read
   along if no gap left between the records then read (the group's and the later
   ones, up to the last later record at either end) holds more than ``gap`` bytes of
   records no later group reads (*waste*); the files that need the fewest bytes kept
   first;
2. joined gaps: in the other files, a gap between two of the group's records whose
   waste is at most ``gap`` joins once at most ``gap`` bytes of it are dropped, so it
   needs ``max(0, later - (gap - waste))`` bytes of its later records kept (those read
   soonest); the cheapest gaps first;
3. with what room is left, the other later records those joined gaps fetch anyway,
   those read soonest first.

Sizes come from the file sizes a data source knows (a records dataset's manifest);
files of unknown size read nothing along.

>>> ra = ReadAlong(np.array([0, 4, 1, 3]), step=2, keep_bytes=1 << 20)
>>> one_file = lambda idx: (np.zeros_like(idx), idx)  # every record in file 0
>>> ra.plan(0, np.array([0, 4]), one_file, lambda f: 100.0, gap=100).tolist()
[1, 3]
>>> ra.plan(0, np.array([0, 4]), one_file, lambda f: 100.0, gap=99).tolist()  # 2: waste
[]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["ReadAlong"]

Locate = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
"""Record indices -> (the file number of each, its index in that file)."""


class ReadAlong:
    """The records kept for later groups of one order read in groups of ``step``
    records (``order[k * step : (k + 1) * step]`` is group ``k``), within ``keep_bytes``
    (see the module docstring). Used by one reader of groups at a time, group after
    group.

    >>> ra = ReadAlong(np.array([0, 4, 1, 3]), step=2, keep_bytes=1 << 20)
    >>> one_file = lambda idx: (np.zeros_like(idx), idx)
    >>> read = lambda idx: [b"r%d" % i for i in idx]
    >>> ra.read(0, np.array([0, 4]), read, one_file, lambda k: 100.0, gap=100)
    [b'r0', b'r4']
    >>> ra.kept_bytes, ra.read(1, np.array([1, 3]), read, one_file, lambda k: 100.0, gap=100)
    (200, [b'r1', b'r3'])
    >>> ra.kept_bytes
    0
    """

    def __init__(self, order: np.ndarray, step: int, keep_bytes: int) -> None:
        pos = np.argsort(order, kind="stable")
        self._records = order[pos]  # the order's records, sorted
        self._groups = pos // step  # the group of each (ascending among equal records)
        self._keep_bytes = keep_bytes
        self._kept: dict[int, tuple[np.ndarray, list[Any], int]] = {}  # group -> kept
        self._kept_sorted = np.empty(0, dtype=np.int64)  # every record kept, sorted
        self._later_of: tuple[int, np.ndarray, np.ndarray, np.ndarray] = (-1, *[order[:0]] * 3)
        self.kept_bytes = 0
        """The estimated stored bytes of the records kept now."""

    def _later(self, k: int, locate: Locate) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The records a group after ``k`` reads (sorted, unique), the first such group
        of each and the file of each."""
        if self._later_of[0] != k:
            sel = self._groups > k
            records, groups = self._records[sel], self._groups[sel]
            first = np.ones(records.size, dtype=bool)  # sorted: the first of equal records
            np.not_equal(records[1:], records[:-1], out=first[1:])
            records = records[first]
            self._later_of = (k, records, groups[first], locate(records)[0])
        return self._later_of[1:]

    def plan(
        self,
        k: int,
        missing: np.ndarray,
        locate: Locate,
        record_bytes: Callable[[int], float | None],
        gap: int,
    ) -> np.ndarray:
        """The records of later groups to read along with group ``k``'s ``missing``
        records (those it reads from the files): sorted record indices, none kept yet.
        ``record_bytes(f)``: the estimated stored bytes of a record of file ``f``
        (``None``: unknown, nothing read along there); ``gap``: the coalescing gap."""
        room = self._keep_bytes - self.kept_bytes
        none = np.empty(0, dtype=np.int64)
        if room <= 0 or missing.size == 0:
            return none
        later, first, later_file = self._later(k, locate)
        if later.size == 0:
            return none
        m = np.sort(missing)
        m = m[_firsts(m)]
        fid, _ = locate(m)
        f_first = _firsts(fid)
        files = fid[f_first]
        size_f = _sizes(files, record_bytes)
        if np.isnan(size_f).any():  # files of unknown size: nothing read along there
            known = ~np.isnan(size_f)[np.searchsorted(files, fid)]
            m, fid = m[known], fid[known]
            if m.size == 0:
                return none
            f_first = _firsts(fid)
            files = fid[f_first]
            size_f = _sizes(files, record_bytes)
        f_last = np.r_[f_first[1:], m.size] - 1
        kept = self._kept_sorted
        # the gaps between the group's records in one file: records lo .. hi - 1
        inner = np.flatnonzero((fid[1:] == fid[:-1]) & (m[1:] - m[:-1] > 1))
        lo, hi = m[inner] + 1, m[inner + 1]
        gf = np.searchsorted(files, fid[inner])  # the file of each gap, in `files`
        size = size_f[gf]
        later_lo, later_hi = np.searchsorted(later, lo), np.searchsorted(later, hi)
        n_later = later_hi - later_lo
        n_new = n_later - (np.searchsorted(kept, hi) - np.searchsorted(kept, lo))
        waste = (hi - lo - n_later) * size
        # a file whose later records are all read along now is never read again: those
        # of the files that take the fewest bytes to keep go first, each whole, if no
        # gap between the records read in it (at its ends too) drops more than `gap`
        ls = np.searchsorted(later_file, files)
        le = np.searchsorted(later_file, files, side="right")
        first_m, last_m = m[f_first], m[f_last]
        before = np.searchsorted(later, first_m)
        after = np.searchsorted(later, last_m + 1)
        has_before, has_after = before > ls, le > after
        w_before = np.where(has_before, first_m - later[np.minimum(ls, later.size - 1)], 0)
        w_before = (w_before - (before - ls)) * size_f
        w_after = np.where(has_after, later[np.maximum(le - 1, 0)] - last_m, 0)
        w_after = (w_after - (le - after)) * size_f
        worst = np.maximum(w_before, w_after)
        np.maximum.at(worst, gf, waste)
        spans = np.where(le > ls, later[np.maximum(le - 1, 0)] + 1, 0)
        f_new = (le - ls) - (
            np.searchsorted(kept, spans)
            - np.searchsorted(kept, later[np.minimum(ls, later.size - 1)])
        )
        f_new = np.where(le > ls, f_new, 0)
        whole = np.flatnonzero((worst <= gap) & (f_new > 0))
        whole = whole[np.argsort(f_new[whole] * size_f[whole], kind="stable")]
        whole = whole[np.cumsum(f_new[whole] * size_f[whole]) <= room]
        room -= float((f_new[whole] * size_f[whole]).sum())
        done = np.zeros(files.size, dtype=bool)
        done[whole] = True
        counts = le[whole] - ls[whole]
        parts = [_ranges(ls[whole], counts)]
        # other files: gaps that join once the records kept leave at most `gap` bytes to
        # drop, cheapest first (the records read soonest kept); then, within what is
        # left of the room, other records the joined gaps fetch anyway (soonest first)
        cost = np.maximum(0.0, n_new * size - np.maximum(0.0, gap - waste))
        cost = np.ceil(cost / size) * size  # whole records
        ok = np.flatnonzero((waste <= gap) & (n_new > 0) & ~done[gf])
        paid = ok[cost[ok] > 0]
        paid = paid[np.argsort(cost[paid], kind="stable")]
        paid = paid[np.cumsum(cost[paid]) <= room]
        joined = np.union1d(ok[cost[ok] == 0], paid)
        counts = later_hi[joined] - later_lo[joined]
        pos = _ranges(later_lo[joined], counts)
        gid = np.repeat(joined, counts)
        fresh = ~_member(later[pos], kept)
        pos, gid = pos[fresh], gid[fresh]
        when = first[pos]
        nbytes = size[gid]
        by_gap = np.lexsort((when, gid))
        rank = np.empty(pos.size, dtype=np.int64)
        rank[by_gap] = np.arange(pos.size) - np.searchsorted(gid[by_gap], gid[by_gap])
        need = np.zeros(size.size, dtype=np.int64)
        need[paid] = np.ceil(cost[paid] / size[paid]).astype(np.int64)
        must = rank < need[gid]
        rest = np.flatnonzero(~must)
        rest = rest[np.argsort(when[rest], kind="stable")]
        rest = rest[np.cumsum(nbytes[rest]) <= room - float(nbytes[must].sum())]
        parts += [pos[must], pos[rest]]
        along = later[np.concatenate(parts)]
        return np.sort(along[~_member(along, kept)])

    def read(
        self,
        k: int,
        group: np.ndarray,
        read: Callable[[np.ndarray], Sequence[Any]],
        locate: Locate,
        record_bytes: Callable[[int], float | None],
        gap: int,
    ) -> list[Any]:
        """The items of group ``k`` (record indices ``group``), in order: those kept
        for it from before, the others read with ``read(indices)`` (one call, the
        records read along appended, then kept for their groups)."""
        ids, items, nbytes = self._kept.pop(k, (np.empty(0, dtype=np.int64), [], 0))
        held = None
        if ids.size:
            self.kept_bytes -= nbytes
            self._kept_sorted = self._kept_sorted[~_member(self._kept_sorted, ids)]
            held = _member(group, ids)
        missing = group if held is None else group[~held]
        along = self.plan(k, missing, locate, record_bytes, gap)
        got = list(read(np.concatenate([missing, along]))) if missing.size or along.size else []
        if along.size:
            self._keep(k, along, got[missing.size :], locate, record_bytes)
        del got[missing.size :]
        if held is None:
            return got
        # each item: the j-th read, or (after those) the one kept for its record
        where = np.empty(group.size, dtype=np.int64)
        where[~held] = np.arange(missing.size)
        where[held] = missing.size + np.searchsorted(ids, group[held])
        pool = got + items
        return [pool[j] for j in where.tolist()]

    def _keep(
        self,
        k: int,
        along: np.ndarray,
        items: Sequence[Any],
        locate: Locate,
        record_bytes: Callable[[int], float | None],
    ) -> None:
        """Keep the records ``along`` (sorted, read with group ``k``) for their groups."""
        later, first, _ = self._later(k, locate)
        groups = first[np.searchsorted(later, along)]
        fid, _ = locate(along)
        size = _sizes(fid, record_bytes)
        order = np.argsort(groups, kind="stable")
        cuts = np.flatnonzero(np.diff(groups[order])) + 1
        for part in np.split(order, cuts):
            g = int(groups[part[0]])
            ids, kept, nbytes = self._kept.get(g, (np.empty(0, dtype=np.int64), [], 0))
            more = int(size[part].sum())
            ids = np.concatenate([ids, along[part]])
            kept += [items[i] for i in part.tolist()]
            by_id = np.argsort(ids, kind="stable")  # sorted, for searchsorted
            self._kept[g] = (ids[by_id], [kept[i] for i in by_id.tolist()], nbytes + more)
            self.kept_bytes += more
        self._kept_sorted = np.sort(np.concatenate([self._kept_sorted, along]))


def _firsts(sorted_a: np.ndarray) -> np.ndarray:
    """The positions of the first of each run of equal values of ``sorted_a``."""
    return np.flatnonzero(np.r_[True, sorted_a[1:] != sorted_a[:-1]])


def _sizes(files: np.ndarray, record_bytes: Callable[[int], float | None]) -> np.ndarray:
    """``record_bytes`` of each file number of the sorted ``files`` (NaN where it is
    ``None``), asked once per file."""
    if files.size == 0:
        return np.empty(0, dtype=np.float64)
    starts = _firsts(files)
    per = [record_bytes(f) for f in files[starts].tolist()]
    sizes = np.array([np.nan if b is None else b for b in per], dtype=np.float64)
    return np.repeat(sizes, np.diff(np.r_[starts, files.size]))


def _member(a: np.ndarray, sorted_b: np.ndarray) -> np.ndarray:
    """Whether each element of ``a`` is in the sorted array ``sorted_b``."""
    if sorted_b.size == 0:
        return np.zeros(a.shape, dtype=bool)
    i = np.minimum(np.searchsorted(sorted_b, a), sorted_b.size - 1)
    return sorted_b[i] == a


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The integers ``starts[i] .. starts[i] + counts[i] - 1`` of every ``i``, in order."""
    pos = np.repeat(starts - np.cumsum(counts) + counts, counts)
    return pos + np.arange(pos.size)
