"""Shards stream to GCS while they are written: a resumable upload
in parts; the object appears at close, and a failed write leaves none."""

from __future__ import annotations

import numpy as np
import pytest

import arrayds
from arrayds.abc import store as store_contract


def _records(n_mib: int) -> list[bytes]:
    rng = np.random.default_rng(3)
    return [rng.integers(0, 256, 1 << 20, dtype=np.uint8).tobytes() for _ in range(n_mib)]


@pytest.fixture
def small_parts(monkeypatch):
    monkeypatch.setattr(store_contract, "UPLOAD_PART_BYTES", 5 << 20)  # a multiple of 256 KiB


def test_a_large_file_streams_and_appears_at_close(small_parts, gcs_opts, gcs_fs, gcs_url):
    url = f"{gcs_url}/big.array_record"
    recs = _records(12)
    with arrayds.ArrayRecordWriter(url, "uncompressed", storage_options=gcs_opts) as w:
        w.write_many(recs[:8])
        gcs_fs.invalidate_cache()
        assert not gcs_fs.exists(url)
        w.write_many(recs[8:])
    with arrayds.ArrayRecordReader(url, storage_options=gcs_opts) as r:
        assert r.num_records() == 12 and r.read(11) == recs[11] and r.read(0) == recs[0]


def test_a_failed_write_leaves_no_object(small_parts, gcs_opts, gcs_fs, gcs_url):
    url = f"{gcs_url}/failed.array_record"
    with pytest.raises(RuntimeError, match="broke"):
        with arrayds.ArrayRecordWriter(url, "uncompressed", storage_options=gcs_opts) as w:
            w.write_many(_records(12))
            raise RuntimeError("the data source broke")
    gcs_fs.invalidate_cache()
    assert not gcs_fs.exists(url)
