"""Train a tiny PyTorch model from a records dataset with a multi-worker DataLoader.

    python examples/torch_loader.py            # 20,000 examples
    python examples/torch_loader.py --n 2000   # smaller (the test does this)

``arrayds.ArrayRecordDataSource(url, decode=True)`` is a map-style dataset: it has
``len`` and random access, pickles without its open files, and reads a whole batch
per shard through ``__getitems__``. ``DataLoader(num_workers=2, shuffle=True)`` runs
it in two worker processes.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np
import torch

import arrayds
from arrayds import records as records

FEATURES = 8


def make_example(i: int) -> dict:
    """A regression example: y = x . w + noise, with a fixed w."""
    rng = np.random.default_rng(i)
    x = rng.standard_normal(FEATURES).astype(np.float32)
    w = np.arange(1, FEATURES + 1, dtype=np.float32) / FEATURES
    return {"id": i, "x": x, "y": np.float32(x @ w + 0.01 * rng.standard_normal())}


def collate(batch: list[dict]) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    x = torch.from_numpy(np.stack([ex["x"] for ex in batch]))
    y = torch.tensor([float(ex["y"]) for ex in batch])
    return x, y, [ex["id"] for ex in batch]


def main(argv: list[str] | None = None) -> float:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=int(os.environ.get("ARRAYDS_EXAMPLE_N", 20_000)))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=128)
    args = p.parse_args(argv)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        url = os.path.join(tmp, "regression")
        items = [make_example(i) for i in range(args.n)]
        arrayds.to_arrayrecord(items, url, num_shards=4)
        src = arrayds.ArrayRecordDataSource(url, decode=True)
        loader = torch.utils.data.DataLoader(
            src,
            batch_size=args.batch_size,
            shuffle=True,
            num_workers=2,
            persistent_workers=True,  # the two workers serve every epoch
            collate_fn=collate,
            generator=torch.Generator().manual_seed(0),
        )
        model = torch.nn.Linear(FEATURES, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = torch.tensor(0.0)
        for epoch in range(args.epochs):
            ids: list[int] = []
            for x, y, batch_ids in loader:
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
                loss.backward()
                opt.step()
                ids.extend(batch_ids)
            assert sorted(ids) == list(range(len(src))), "every example once per epoch"
            print(f"epoch {epoch}: {len(ids)} examples, last batch loss {loss.item():.4f}")
        print(f"records dataset {records.open_records(url)!r}")
        return float(loss.item())


if __name__ == "__main__":
    main()
