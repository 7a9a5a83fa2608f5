"""A real dask.distributed cluster for the tests in this folder: two worker
processes with one thread each, started once per test session."""

from __future__ import annotations

import pytest

distributed = pytest.importorskip("distributed", reason="distributed is part of the [dask] extra")


@pytest.fixture(scope="session")
def client():
    """A ``Client`` on ``LocalCluster(processes=True, n_workers=2,
    threads_per_worker=1)`` (allowed-failures and nanny restarts at their defaults)."""
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=40,
    )
    # not the default client: only the tests that ask for it (``client.as_current()``)
    # run on the cluster; the rest of the session keeps dask's local schedulers
    c = distributed.Client(cluster, set_as_default=False)
    try:
        yield c
    finally:
        c.close()
        cluster.close()
