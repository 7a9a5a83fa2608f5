"""Writer options shared by every kind: the compression spec (``"zstd:3"``,
``"brotli"``, ``"snappy"``, ``"none"``) checked, and turned into the engine's writer
options.

>>> check_compression("zstd:5"), writer_options("zstd:5")
('zstd:5', 'group_size:1,zstd:5')
"""

from __future__ import annotations

_LEVELS = {"zstd": (-131072, 22, 3), "brotli": (0, 11, 6), "snappy": (1, 2, None)}


def check_compression(compression: str, name: str = "array") -> str:
    """Validate a compression string and return its canonical form.

    One codec: ``zstd[:L]`` (-131072..22, default 3), ``brotli[:L]`` (0..11, default
    6), ``snappy`` or ``uncompressed``; optionally ``window_log:N`` (zstd 10..31,
    brotli 10..30). Shards are written with ``"group_size:1," + canonical``.

    >>> check_compression("zstd"), check_compression("brotli:9,window_log:18")
    ('zstd:3', 'brotli:9,window_log:18')
    >>> check_compression("lz4")
    Traceback (most recent call last):
    ...
    ValueError: array: unknown compression 'lz4' in 'lz4' (expected one of zstd[:level], ...)
    """
    if not isinstance(compression, str):
        raise TypeError(f"{name}: compression must be a str such as 'zstd:3'")
    expected = (
        "expected one of zstd[:level], brotli[:level], snappy, uncompressed, optionally with "
        "window_log:N"
    )
    codec: str | None = None
    level: int | None = None
    window: int | None = None
    for item in compression.split(","):
        item = item.strip()
        if not item:
            continue
        key, _, value = item.partition(":")
        key, value = key.strip(), value.strip()
        if key in _LEVELS or key == "uncompressed":
            if codec is not None:
                raise ValueError(f"{name}: two codecs ({codec}, {key}) in {compression!r}")
            codec = key
            if key == "uncompressed":
                if value:
                    raise ValueError(f"{name}: 'uncompressed' takes no level in {compression!r}")
                continue
            lo, hi, default = _LEVELS[key]
            if value:
                try:
                    level = int(value)
                except ValueError:
                    raise ValueError(
                        f"{name}: {key} level {value!r} in {compression!r} is not an integer"
                    ) from None
                if not lo <= level <= hi:
                    raise ValueError(
                        f"{name}: {key} level {level} in {compression!r} is out of range {lo}..{hi}"
                    )
            else:
                level = default
        elif key == "window_log":
            try:
                window = int(value)
            except ValueError:
                raise ValueError(
                    f"{name}: window_log {value!r} in {compression!r} is not an integer"
                ) from None
        elif key in ("group_size", "transpose", "pad_to_block_boundary", "max_parallelism"):
            raise ValueError(
                f"{name}: {key!r} cannot be set in compression={compression!r}: array shards "
                f"always use group_size:1 without transpose ({expected})"
            )
        else:
            raise ValueError(f"{name}: unknown compression {key!r} in {compression!r} ({expected})")
    if codec is None:
        raise ValueError(f"{name}: no codec in compression={compression!r} ({expected})")
    if window is not None:
        if codec not in ("zstd", "brotli"):
            raise ValueError(f"{name}: window_log conflicts with {codec} in {compression!r}")
        lo, hi = (10, 31) if codec == "zstd" else (10, 30)
        if not lo <= window <= hi:
            raise ValueError(f"{name}: window_log {window} is out of range {lo}..{hi} for {codec}")
    out = codec if level is None else f"{codec}:{level}"
    if codec == "snappy":
        out = "snappy"
    if window is not None:
        out += f",window_log:{window}"
    try:
        from ..files.arrayrecord import codecs

        available = codecs()
    except Exception:  # pragma: no cover - engine without codecs()
        available = {}
    if codec != "uncompressed" and available and not available.get(codec, False):
        raise ValueError(
            f"{name}: compression {codec!r} is not available in this build of the engine "
            f"(codecs: {sorted(k for k, v in available.items() if v)})"
        )
    return out


def writer_options(compression: str) -> str:
    """The ArrayRecord writer options for an array's shards."""
    return "group_size:1," + compression
