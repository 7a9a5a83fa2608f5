"""Progress reporting shared by writes, conversions and verification.

One rule everywhere: a progress bar is shown only when it was asked for
(``progress=True``) *and* someone can see it — standard error is a terminal, or the
code runs in a Jupyter kernel. Output redirected to a file or a pipe (CI logs, cron
jobs, tests) stays quiet. The environment variable ``ARRAYDS_PROGRESS`` overrides
the terminal check: ``1`` shows bars even without a terminal, ``0`` hides them all.

* :func:`compute` — ``dask.compute`` with a bar: dask's ``ProgressBar`` for the
  local schedulers, ``distributed.progress`` when a ``distributed.Client`` is the
  default scheduler.
* :func:`bar` — a ``tqdm`` bar for loops that are not dask graphs (verification of
  shards one by one, uploads); a silent stand-in when progress is off.

>>> import dask
>>> compute(dask.delayed(sum)([1, 2, 3]), progress=False)
6
>>> with bar(3, "items", progress=False) as b:
...     for _ in range(3):
...         b.update(1)
>>> b.n
3
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any

__all__ = ["bar", "compute", "enabled"]


def _in_jupyter() -> bool:
    ipython = sys.modules.get("IPython")
    if ipython is None or "ipykernel" not in sys.modules:
        return False
    try:
        shell = ipython.get_ipython()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - any failure means "not a notebook"
        return False
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def enabled(progress: bool | None, stream: IO[str] | None = None) -> bool:
    """Whether a bar asked for with ``progress`` should be drawn on ``stream``
    (default ``sys.stderr``).

    ``False``/``None`` never draw. ``True`` draws when ``stream`` is a terminal or in
    Jupyter; ``ARRAYDS_PROGRESS=1`` forces bars on, ``ARRAYDS_PROGRESS=0`` off.

    >>> import io
    >>> enabled(False), enabled(True, io.StringIO()) in (True, False)
    (False, True)
    """
    if not progress:
        return False
    env = os.environ.get("ARRAYDS_PROGRESS", "").strip().lower()
    if env in ("0", "false", "no", "off"):
        return False
    if env in ("1", "true", "yes", "on", "always"):
        return True
    stream = sys.stderr if stream is None else stream
    try:
        if stream.isatty():
            return True
    except (AttributeError, ValueError):  # closed or exotic streams
        pass
    return _in_jupyter()


def _distributed_client() -> Any:
    """The default ``distributed.Client``, if dask uses one now."""
    if "distributed" not in sys.modules:
        return None
    try:
        import dask
        from distributed import default_client
    except ImportError:  # pragma: no cover - distributed is optional
        return None
    if dask.config.get("scheduler", None) not in (None, "dask.distributed", "distributed"):
        return None
    try:
        return default_client()
    except ValueError:
        return None


def compute(
    *objs: Any,
    progress: bool | None = False,
    scheduler: Any = None,
    stream: IO[str] | None = None,
    **kwargs: Any,
) -> Any:
    """``dask.compute(*objs)`` with a progress bar when :func:`enabled`.

    Returns the single result for one object, a tuple for several (unlike
    ``dask.compute``, which always returns a tuple). Under a ``distributed.Client``
    the graph is submitted with ``client.compute`` and followed with
    ``distributed.progress``; otherwise dask's ``ProgressBar`` wraps the local
    scheduler. Bars go to ``stream`` (default standard error).

    >>> import dask
    >>> compute(dask.delayed(len)("abc"), dask.delayed(max)(1, 2))
    (3, 2)
    """
    import dask

    show = enabled(progress, stream)
    out: tuple[Any, ...]
    if not show:
        out = dask.compute(*objs, scheduler=scheduler, **kwargs)
    else:
        client = _distributed_client() if scheduler is None else None
        if client is not None:
            from distributed import progress as dist_progress

            futures = client.compute(list(objs), **kwargs)
            dist_progress(futures)
            out = tuple(client.gather(futures))
        else:
            from dask.diagnostics import ProgressBar

            with ProgressBar(out=sys.stderr if stream is None else stream):
                out = dask.compute(*objs, scheduler=scheduler, **kwargs)
    return out[0] if len(objs) == 1 else out


class _Silent:
    """A stand-in for a tqdm bar that only counts."""

    def __init__(self, total: int | None) -> None:
        self.total = total
        self.n = 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix_str(self, s: str) -> None:  # noqa: ARG002 - tqdm's signature
        return None

    def close(self) -> None:
        return None

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def bar(
    total: int | None,
    desc: str,
    progress: bool | None = True,
    *,
    unit: str = "it",
    unit_scale: bool = False,
    stream: IO[str] | None = None,
) -> Any:
    """A ``tqdm`` bar of ``total`` steps when :func:`enabled`, else a silent
    counter with the same ``update``/``close``/context-manager interface.

    >>> with bar(10, "bytes", progress=False, unit="B", unit_scale=True) as b:
    ...     b.update(4)
    >>> b.n, b.total
    (4, 10)
    """
    if not enabled(progress, stream):
        return _Silent(total)
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is in the [dask] extra
        return _Silent(total)
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=unit_scale,
        file=sys.stderr if stream is None else stream,
        dynamic_ncols=True,
        leave=False,
    )
