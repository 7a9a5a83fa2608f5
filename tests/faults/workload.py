"""A seeded workload of writes and reads through a :class:`proxy.FaultProxy`, shared by
the fault tests (tests/faults/test_faults.py) and benchmarks/bench_faults.py.

:func:`run` applies ``ops`` operations to one array (numpy appends, region writes,
whole rewrites, dask appends, compaction, gc) through the proxy; after each it reads
the array straight from the server (past the proxy) and classifies the attempt:
committed (no error, the array is exactly as after), failed cleanly (an error, the
array exactly as before), or a violation: mixed (neither), lost (no error, but as
before), duplicated (an append applied twice), committed-but-raised. Then it reads
through the proxy: exactly the stored values, or an error (counted). ``verify`` runs
at the end, straight on the server.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

import dask.array as da
import numpy as np

import arrayds
from arrayds.nodes import shards as store_mod
from arrayds.tools.gc import collect_garbage
from arrayds.tools.verify import verify

KINDS = ("append", "region", "dask_append", "rewrite", "compact", "gc")


@dataclass
class Tally:
    """What :func:`run` saw (see the module docstring)."""

    attempted: collections.Counter[str] = field(default_factory=collections.Counter)
    committed: int = 0
    failed: int = 0
    mixed: int = 0
    lost: int = 0
    duplicated: int = 0
    raised_but_committed: int = 0
    reads: int = 0
    reads_failed: int = 0
    reads_wrong: int = 0
    verify_problems: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return (
            self.mixed
            + self.lost
            + self.duplicated
            + self.raised_but_committed
            + self.reads_wrong
            + len(self.verify_problems)
        )


def _read(url: str, opts: dict[str, Any]) -> np.ndarray:
    store_mod.clear_reader_cache()
    return np.asarray(arrayds.open_array(url, "x", storage_options=opts)[:])


def _apply(kind: str, url: str, opts: dict[str, Any], cur: np.ndarray, rng: Any) -> np.ndarray:
    """Run one operation through ``opts``; returns the array it should leave."""
    width = cur.shape[1]
    if kind == "append":
        rows = rng.random((int(rng.integers(1, 4)), width))
        arrayds.open_array(url, "x", mode="a", storage_options=opts).append(rows)
        return np.concatenate([cur, rows])
    if kind == "dask_append":
        rows = rng.random((4, width))
        arrayds.to_arrayrecord(
            da.from_array(rows, chunks=(2, width)), url, "x", mode="a", storage_options=opts
        )
        return np.concatenate([cur, rows])
    if kind == "region":
        i = int(rng.integers(0, cur.shape[0]))
        row = rng.random((1, width))
        arrayds.open_array(url, "x", mode="r+", storage_options=opts)[i : i + 1] = row
        out = cur.copy()
        out[i] = row[0]
        return out
    if kind == "rewrite":
        new = rng.random((int(rng.integers(2, 6)), width))
        arrayds.to_arrayrecord(new, url, "x", mode="w", storage_options=opts)
        return new
    if kind == "compact":
        arrayds.compact(url, "x", storage_options=opts)
        return cur
    collect_garbage(url, storage_options=opts, min_age=0)
    return cur


def run(url: str, opts: dict[str, Any], direct: dict[str, Any], ops: int, seed: int = 0) -> Tally:
    """Apply ``ops`` seeded operations to the array ``x`` at ``url`` through ``opts``
    (the proxy's storage_options); ``direct``: straight to the server."""
    rng = np.random.default_rng(seed)
    tally = Tally()
    cur = rng.random((4, 3))
    arrayds.to_arrayrecord(cur, url, "x", storage_options=direct, shard_size=2)
    for i in range(ops):
        kind = KINDS[i % len(KINDS)]
        tally.attempted[kind] += 1
        try:
            after = _apply(kind, url, opts, cur, rng)
            error: BaseException | None = None
        except Exception as e:  # noqa: BLE001 - classified below
            after, error = None, e
            tally.errors.append(f"{kind}: {type(e).__name__}: {e}")
        got = _read(url, direct)
        if error is None:
            assert after is not None
            if got.shape == after.shape and np.array_equal(got, after):
                tally.committed += 1
            elif got.shape == cur.shape and np.array_equal(got, cur):
                tally.lost += 1
            elif kind.endswith("append") and got.shape[0] > after.shape[0]:
                tally.duplicated += 1
            else:
                tally.mixed += 1
        elif got.shape == cur.shape and np.array_equal(got, cur):
            tally.failed += 1
        else:
            tally.raised_but_committed += 1
        cur = got
        tally.reads += 1
        try:
            seen = _read(url, opts)
        except Exception as e:  # noqa: BLE001 - a clear error is allowed
            tally.reads_failed += 1
            tally.errors.append(f"read: {type(e).__name__}: {e}")
        else:
            if seen.shape != cur.shape or not np.array_equal(seen, cur):
                tally.reads_wrong += 1
    tally.verify_problems = [str(p) for p in verify(url, storage_options=direct).problems]
    return tally
