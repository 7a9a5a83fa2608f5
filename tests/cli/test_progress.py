"""arrayds.progress: bars only when asked for and when someone can see them."""

from __future__ import annotations

import io

import dask

from arrayds import progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_enabled_follows_the_terminal_and_the_environment(monkeypatch):
    monkeypatch.delenv("ARRAYDS_PROGRESS", raising=False)
    assert not progress.enabled(False, _Tty())
    assert not progress.enabled(True, io.StringIO())  # redirected: quiet
    assert progress.enabled(True, _Tty())
    monkeypatch.setenv("ARRAYDS_PROGRESS", "0")
    assert not progress.enabled(True, _Tty())
    monkeypatch.setenv("ARRAYDS_PROGRESS", "1")
    assert progress.enabled(True, io.StringIO())
    assert not progress.enabled(False, io.StringIO())


def test_compute_draws_dask_progress_on_a_terminal(monkeypatch):
    monkeypatch.delenv("ARRAYDS_PROGRESS", raising=False)
    tasks = [dask.delayed(pow)(i, 2) for i in range(5)]
    tty = _Tty()
    assert progress.compute(*tasks, progress=True, stream=tty) == (0, 1, 4, 9, 16)
    assert "100% Completed" in tty.getvalue()
    quiet = io.StringIO()
    assert progress.compute(tasks[3], progress=True, stream=quiet) == 9
    assert quiet.getvalue() == ""


def test_bar_counts_silently_or_draws_tqdm(monkeypatch):
    monkeypatch.delenv("ARRAYDS_PROGRESS", raising=False)
    with progress.bar(4, "x", progress=True, stream=io.StringIO()) as b:
        b.update(4)
    assert type(b).__name__ == "_Silent" and b.n == 4
    tty = _Tty()
    with progress.bar(4, "shards", progress=True, stream=tty) as b:
        b.update(4)
    assert type(b).__name__.startswith("tqdm") and "shards" in tty.getvalue()


def test_compute_under_a_distributed_client(monkeypatch):
    from distributed import Client, LocalCluster

    monkeypatch.setenv("ARRAYDS_PROGRESS", "1")
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as c,
        Client(c),
    ):
        tasks = [dask.delayed(pow)(i, 3) for i in range(4)]
        assert progress.compute(*tasks, progress=True) == (0, 1, 8, 27)
