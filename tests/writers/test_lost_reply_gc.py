"""A commit whose reply was lost while other writers committed on top of it and gc
(``keep_versions=3``) removed its version file beside them: the client's resend is
refused, and the append must still recognise that its commit landed (no second copy
of its rows). Moto S3 behind the fault proxy: the lost reply is an exact interleaving
(the proxy's ``then`` runs the other writers and gc after the server applied the PUT
and before the client sees the dropped connection)."""

from __future__ import annotations

import uuid

from faults.proxy import FaultProxy, Rule

import arrayds
from arrayds.verify import collect_garbage, verify

from .conftest import BUCKET

OTHERS = 4
"""Commits of other writers on top of the lost one: more than ``keep_versions``."""


def _append(url: str, so: dict, value: int) -> None:
    arrayds.to_arrayrecord([value], url, mode="a", compact=False, storage_options=so)


def test_a_lost_commit_reply_is_recognised_after_gc_removed_its_version(writers_s3):
    url = f"s3://{BUCKET}/lost-{uuid.uuid4().hex[:8]}"
    so = writers_s3.storage_options()
    arrayds.to_arrayrecord([-1], url, mode="w", serializer="msgpack", storage_options=so)

    def others_commit_then_gc() -> None:  # the lost PUT is applied; its reply not sent yet
        for v in range(OTHERS):
            _append(url, so, v)
        collect_garbage(url, storage_options=so, min_age=600, keep_versions=3)

    head = rf"/{url.split('://')[1]}/arrayds\.json$"
    rule = Rule("lost", methods=("PUT",), keys=head, limit=1, then=others_commit_then_gc)
    with FaultProxy(writers_s3.endpoint_url, [rule]) as p:
        _append(url, writers_s3.storage_options(p.url), 99)
        assert p.injected["lost"] == 1
    got = [int(v) for v in arrayds.open(url, storage_options=so)[:]]
    assert sorted(got) == sorted([-1, *range(OTHERS), 99])  # 99 once, nothing lost
    assert verify(url, storage_options=so).ok
