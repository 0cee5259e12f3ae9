"""The app's data, model and training: digits split as McMahan et al. split MNIST, a small MLP,
SGD with momentum (as a practitioner's app would train it)."""

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

#: Clients of the federation (the shards are cut for this many).
NUM_CLIENTS = 20
#: The seed of the split: the same federation in every run.
SPLIT_SEED = 2017


class Net(nn.Module):
    """An MLP for 8x8 digits: 64 inputs, 64 ReLU units, 10 outputs."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        return self.layers(x)


def _data():
    digits = load_digits()
    X = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.int64)
    rng = np.random.default_rng(SPLIT_SEED)
    order = rng.permutation(len(y))
    test, train = order[: len(y) // 5], order[len(y) // 5:]
    return X, y, train, test


def test_set():
    """The server's held-out fifth of the digits."""
    X, y, _, test = _data()
    return X[test], y[test]


def client_rows(partition_id: int, num_partitions: int = NUM_CLIENTS):
    """A client's training rows: the training digits sorted by label, cut into 2K shards,
    two shards (drawn once, by the split's seed) a client."""
    X, y, train, _ = _data()
    rng = np.random.default_rng(SPLIT_SEED + 1)
    order = train[np.argsort(y[train].numpy() + rng.random(len(train)) * 0.5, kind="stable")]
    shards = np.array_split(order, 2 * num_partitions)
    perm = rng.permutation(2 * num_partitions)
    mine = np.concatenate([shards[perm[2 * partition_id]], shards[perm[2 * partition_id + 1]]])
    return X[mine], y[mine]


def train(net, X, y, epochs, lr, seed):
    """``epochs`` epochs of SGD with momentum 0.9 in mini-batches of 32; the mean loss."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    net.train()
    total, batches = 0.0, 0
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=generator)
        for i in range(0, len(y), 32):
            idx = order[i:i + 32]
            optimizer.zero_grad()
            loss = criterion(net(X[idx]), y[idx])
            loss.backward()
            optimizer.step()
            total, batches = total + loss.item(), batches + 1
    return total / batches


def evaluate(net, X, y):
    """(mean cross-entropy, accuracy) on (X, y)."""
    net.eval()
    with torch.no_grad():
        out = net(X)
        return float(nn.functional.cross_entropy(out, y)), float((out.argmax(1) == y).float().mean())
