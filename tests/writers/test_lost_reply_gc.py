"""A commit whose reply was lost while other writers committed on top of it and gc
(``keep_versions=3``) removed its version file beside them: the client's resend is
refused, and the append must still recognise that its commit landed (no second copy
of its rows), also when their tiered merges rewrote its shard (the node then names
none of its files). Moto S3 behind the fault proxy: the lost reply is an exact interleaving
(the proxy's ``then`` runs the other writers and gc after the server applied the PUT
and before the client sees the dropped connection)."""

from __future__ import annotations

import uuid

import pytest
from faults.proxy import FaultProxy, Rule

import arrayds
from arrayds.nodes import commit
from arrayds.nodes.commit import referenced_files
from arrayds.nodes.merge import MERGE_FACTOR
from arrayds.storage import get_store
from arrayds.verify import collect_garbage, verify

from .conftest import BUCKET

OTHERS = 4
"""Commits of other writers on top of the lost one: more than ``keep_versions``."""


def _append(url: str, so: dict, value: int, compact: bool | str = False) -> None:
    arrayds.to_arrayrecord([value], url, mode="a", compact=compact, storage_options=so)


@pytest.mark.parametrize(
    ("others", "compact"),
    [
        (OTHERS, False),
        # and their tiered merges rewrote the lost commit's shard into a merged one: the
        # node names none of its files (recognised by the head's ``recent`` write ids)
        (MERGE_FACTOR + 1, "tiered"),
    ],
)
def test_a_lost_commit_reply_is_recognised_after_gc_removed_its_version(
    writers_s3, others, compact
):
    url = f"s3://{BUCKET}/lost-{uuid.uuid4().hex[:8]}"
    so = writers_s3.storage_options()
    arrayds.to_arrayrecord([-1], url, mode="w", serializer="msgpack", storage_options=so)
    before: set[str] = set()

    def others_commit_then_gc() -> None:  # the lost PUT is applied; its reply not sent yet
        before.update(_shards(url, so))  # the lost commit's shard among them
        for v in range(others):
            _append(url, so, v, compact)
        collect_garbage(url, storage_options=so, min_age=600, keep_versions=3)

    head = rf"/{url.split('://')[1]}/arrayds\.json$"
    rule = Rule("lost", methods=("PUT",), keys=head, limit=1, then=others_commit_then_gc)
    with FaultProxy(writers_s3.endpoint_url, [rule]) as p:
        _append(url, writers_s3.storage_options(p.url), 99)
        assert p.injected["lost"] == 1
    got = [int(v) for v in arrayds.open(url, storage_options=so)[:]]
    assert sorted(got) == sorted([-1, *range(others), 99])  # 99 once, nothing lost
    if compact:
        assert not before & _shards(url, so)  # every shard of then was merged away
    assert verify(url, storage_options=so).ok


def _shards(url: str, so: dict) -> set[str]:
    """The shard files the node's manifest names now."""
    store = get_store(url, so)
    return referenced_files(commit.read(store, "").raw)
