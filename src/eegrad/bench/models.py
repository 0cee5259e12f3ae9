r"""The benchmark's models, in NumPy, on one flat parameter vector w.

``softmax``  multinomial logistic regression, :math:`p(y=c|x) \propto \exp(x^\top W_c + b_c)`
``mlp``      one hidden layer of 64 ReLU units, then softmax
``cnn1d``    a small 1-D CNN in PyTorch, for MNIST-1D (:class:`CNN1d`)
``cnn2d``    a small 2-D CNN in NumPy, for square images (:class:`ConvNet2d`)
``charcnn``  a small character CNN in PyTorch, for next-character prediction (:class:`CharCNN`)

Both minimise the mean cross-entropy plus :math:`(\lambda/2)\lVert w\rVert^2`, λ = 1e-4. A
client trains as Flower's quickstarts do (:func:`local_train`): E epochs over its own rows in
shuffled mini-batches of 32, plain SGD at the learning rate its round's config gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["MODELS", "CNN1d", "CharCNN", "ConvNet2d", "Model", "local_train", "make_model"]

REG = 1e-4
HIDDEN = 64
BATCH = 32


def glorot(sizes: list[tuple[int, ...]], seed: int) -> np.ndarray:
    """A flat vector of Glorot-uniform weights (each 2-D size) and zero biases (each 1-D),
    drawn from the seed's own stream."""
    rng = np.random.default_rng([seed, 3])
    parts = []
    for shape in sizes:
        if len(shape) == 2:
            bound = np.sqrt(6.0 / sum(shape))
            parts.append(rng.uniform(-bound, bound, shape).ravel())
        else:
            parts.append(np.zeros(shape))
    return np.concatenate(parts)


@dataclass(frozen=True)
class Model:
    """A model of ``features`` inputs and ``classes`` outputs: its kind and its sizes."""

    kind: str
    features: int
    classes: int

    @property
    def sizes(self) -> list[tuple[int, ...]]:
        p, c = self.features, self.classes
        if self.kind == "softmax":
            return [(p, c), (c,)]
        return [(p, HIDDEN), (HIDDEN,), (HIDDEN, c), (c,)]

    @property
    def dim(self) -> int:
        return int(sum(np.prod(s) for s in self.sizes))

    def initial(self, seed: int) -> np.ndarray:
        """Zeros for softmax; Glorot-uniform weights and zero biases for the MLP."""
        if self.kind == "softmax":
            return np.zeros(self.dim)
        return glorot(self.sizes, seed)

    def _unpack(self, w: np.ndarray) -> list[np.ndarray]:
        out, i = [], 0
        for shape in self.sizes:
            k = int(np.prod(shape))
            out.append(w[i:i + k].reshape(shape))
            i += k
        return out

    def _logits(self, w: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        if self.kind == "softmax":
            W, b = self._unpack(w)
            return X @ W + b, None
        W1, b1, W2, b2 = self._unpack(w)
        H = np.maximum(X @ W1 + b1, 0.0)
        return H @ W2 + b2, H

    @staticmethod
    def _probabilities(Z: np.ndarray) -> np.ndarray:
        Z = Z - Z.max(axis=1, keepdims=True)
        P = np.exp(Z)
        return P / P.sum(axis=1, keepdims=True)

    def loss(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
        """Mean cross-entropy plus the ℓ2 term."""
        Z, _ = self._logits(w, X)
        P = self._probabilities(Z)
        return float(-np.mean(np.log(P[np.arange(y.size), y] + 1e-300)) + 0.5 * REG * w @ w)

    def accuracy(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
        """The share of rows classified right."""
        Z, _ = self._logits(w, X)
        return float(np.mean(np.argmax(Z, axis=1) == y))

    def loss_grad(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        """The loss and its gradient in w."""
        Z, H = self._logits(w, X)
        P = self._probabilities(Z)
        m = y.size
        loss = float(-np.mean(np.log(P[np.arange(m), y] + 1e-300)) + 0.5 * REG * w @ w)
        P[np.arange(m), y] -= 1.0
        P /= m
        if self.kind == "softmax":
            grads = [X.T @ P, P.sum(axis=0)]
        else:
            _, _, W2, _ = self._unpack(w)
            dH = (P @ W2.T) * (H > 0)
            grads = [X.T @ dH, dH.sum(axis=0), H.T @ P, P.sum(axis=0)]
        return loss, np.concatenate([g.ravel() for g in grads]) + REG * w


#: Channels of :class:`ConvNet2d`'s convolution.
CHANNELS = 8


@dataclass(frozen=True)
class ConvNet2d:
    r"""A small 2-D CNN in NumPy for square images of ``features`` pixels (8×8 digits): one
    3×3 convolution of :data:`CHANNELS` channels (zero padding, ReLU), 2×2 average pooling, a
    linear layer to ``classes``, softmax; the loss and ℓ2 term of :class:`Model`, whose flat
    interface it holds (``dim``, ``initial``, ``loss``, ``accuracy``, ``loss_grad``), so that
    a client trains it with :func:`local_train`."""

    features: int
    classes: int
    kind: str = "cnn2d"

    def __post_init__(self) -> None:
        side = round(self.features ** 0.5)
        if side * side != self.features or side % 2:
            from .._validation import fail

            raise fail("features", "ConvNet2d", "the square of an even side (pixels)",
                       self.features)  # fmt: skip

    @property
    def side(self) -> int:
        return round(self.features ** 0.5)

    @property
    def sizes(self) -> list[tuple[int, ...]]:
        pooled = (self.side // 2) ** 2 * CHANNELS
        return [(9, CHANNELS), (CHANNELS,), (pooled, self.classes), (self.classes,)]

    dim = Model.dim
    _unpack = Model._unpack
    _probabilities = staticmethod(Model._probabilities)

    def initial(self, seed: int) -> np.ndarray:
        """Glorot-uniform weights and zero biases."""
        return glorot(self.sizes, seed)

    def _forward(self, w: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, ...]:
        """The logits, the 3×3 patches, the convolution's ReLU and the pooled features."""
        Wc, bc, Wl, bl = self._unpack(w)
        m, s = X.shape[0], self.side
        padded = np.pad(X.reshape(m, s, s), ((0, 0), (1, 1), (1, 1)))
        patches = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))
        patches = patches.reshape(m * s * s, 9)
        H = np.maximum(patches @ Wc + bc, 0.0).reshape(m, s, s, CHANNELS)
        pooled = H.reshape(m, s // 2, 2, s // 2, 2, CHANNELS).mean(axis=(2, 4)).reshape(m, -1)
        return pooled @ Wl + bl, patches, H, pooled

    def loss(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
        """Mean cross-entropy plus the ℓ2 term."""
        P = self._probabilities(self._forward(w, X)[0])
        return float(-np.mean(np.log(P[np.arange(y.size), y] + 1e-300)) + 0.5 * REG * w @ w)

    def accuracy(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
        """The share of rows classified right."""
        return float(np.mean(np.argmax(self._forward(w, X)[0], axis=1) == y))

    def loss_grad(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        """The loss and its gradient in w."""
        Z, patches, H, pooled = self._forward(w, X)
        _, _, Wl, _ = self._unpack(w)
        P = self._probabilities(Z)
        m, s = y.size, self.side
        loss = float(-np.mean(np.log(P[np.arange(m), y] + 1e-300)) + 0.5 * REG * w @ w)
        P[np.arange(m), y] -= 1.0
        P /= m
        dpool = (P @ Wl.T).reshape(m, s // 2, 1, s // 2, 1, CHANNELS) / 4.0
        dH = np.broadcast_to(dpool, (m, s // 2, 2, s // 2, 2, CHANNELS)).reshape(m, s, s,
                                                                                  CHANNELS)
        dconv = (dH * (H > 0)).reshape(m * s * s, CHANNELS)
        grads = [patches.T @ dconv, dconv.sum(axis=0), pooled.T @ P, P.sum(axis=0)]
        return loss, np.concatenate([g.ravel() for g in grads]) + REG * w


#: The model kinds.
MODELS = ("softmax", "mlp", "cnn1d", "cnn2d", "charcnn")


def local_train(model: Model, w: np.ndarray, X: np.ndarray, y: np.ndarray, *, epochs: int,
                lr: float, rng: np.random.Generator) -> tuple[np.ndarray, float]:  # fmt: skip
    """E epochs of mini-batch SGD over (X, y) from w; returns the new w and the mean loss of
    the batches of the last epoch."""
    if hasattr(model, "train_local"):
        return model.train_local(w, X, y, epochs=epochs, lr=lr, rng=rng)
    w = w.copy()
    losses = []
    for _ in range(epochs):
        order = rng.permutation(y.size)
        losses = []
        for i in range(0, y.size, BATCH):
            batch = order[i:i + BATCH]
            loss, g = model.loss_grad(w, X[batch], y[batch])
            w -= lr * g
            losses.append(loss)
    return w, float(np.mean(losses))


class CNN1d:
    """A small 1-D CNN in PyTorch for signals of ``features`` points (MNIST-1D): two
    convolutions of 16 channels (kernel 5, ReLU, the second of stride 2), global average
    pooling, a linear layer to ``classes``. It holds the flat parameter vector's interface of
    :class:`Model` (``dim``, ``initial``, ``loss``, ``accuracy``), and trains on its own
    (:meth:`train_local`), one thread, so that a run's numbers do not depend on the cores."""

    kind = "cnn1d"

    def __init__(self, features: int, classes: int) -> None:
        self.features, self.classes = features, classes
        self._net = self._build()
        self.dim = int(sum(p.numel() for p in self._net.parameters()))

    def _build(self) -> Any:
        import torch
        from torch import nn

        torch.set_num_threads(1)
        return nn.Sequential(nn.Conv1d(1, 16, 5, padding=2), nn.ReLU(),
                             nn.Conv1d(16, 16, 5, stride=2, padding=2), nn.ReLU(),
                             nn.AdaptiveAvgPool1d(1), nn.Flatten(),
                             nn.Linear(16, self.classes))  # fmt: skip

    def _load(self, w: np.ndarray) -> Any:
        import torch
        from torch.nn.utils import vector_to_parameters

        vector_to_parameters(torch.as_tensor(w, dtype=torch.float32), self._net.parameters())
        return self._net

    def _vector(self) -> np.ndarray:
        from torch.nn.utils import parameters_to_vector

        return parameters_to_vector(self._net.parameters()).detach().numpy().astype(np.float64)

    def initial(self, seed: int) -> np.ndarray:
        """PyTorch's default initialisation, seeded."""
        import torch

        torch.manual_seed(seed)
        self._net = self._build()
        return self._vector()

    @staticmethod
    def _inputs(X: np.ndarray) -> Any:
        """The rows as the network reads them: one channel of floats."""
        import torch

        return torch.as_tensor(X[:, None, :], dtype=torch.float32)

    def _logits(self, w: np.ndarray, X: np.ndarray) -> Any:
        import torch

        net = self._load(w)
        with torch.no_grad():
            return net(self._inputs(X))

    def loss(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
        """Mean cross-entropy plus the ℓ2 term."""
        import torch
        import torch.nn.functional as F

        ce = F.cross_entropy(self._logits(w, X), torch.as_tensor(y)).item()
        return float(ce + 0.5 * REG * w @ w)

    def accuracy(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
        """The share of rows classified right."""
        return float(np.mean(self._logits(w, X).argmax(dim=1).numpy() == y))

    def train_local(self, w: np.ndarray, X: np.ndarray, y: np.ndarray, *, epochs: int,
                    lr: float, rng: np.random.Generator) -> tuple[np.ndarray, float]:  # fmt: skip
        """As :func:`local_train`: E epochs of mini-batch SGD (weight decay λ)."""
        import torch
        import torch.nn.functional as F

        net = self._load(w)
        opt = torch.optim.SGD(net.parameters(), lr=lr, weight_decay=REG)
        Xt = self._inputs(X)
        yt = torch.as_tensor(y)
        losses = []
        for _ in range(epochs):
            order = rng.permutation(y.size)
            losses = []
            for i in range(0, y.size, BATCH):
                batch = torch.as_tensor(order[i:i + BATCH])
                opt.zero_grad()
                loss = F.cross_entropy(net(Xt[batch]), yt[batch])
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return self._vector(), float(np.mean(losses))


class CharCNN(CNN1d):
    """A small character model in PyTorch for windows of ``features`` characters (indices
    into a vocabulary of ``classes``): an embedding of 8, two convolutions of 32 channels
    (kernel 5, ReLU, causal: each position sees the characters up to it), the last position's
    features, a linear layer to the next character's ``classes``. The flat parameter vector's
    interface and one thread, as :class:`CNN1d`."""

    kind = "charcnn"

    def _build(self) -> Any:
        import torch
        from torch import nn

        torch.set_num_threads(1)

        class Net(nn.Module):
            def __init__(self, vocabulary: int) -> None:
                super().__init__()
                self.embed = nn.Embedding(vocabulary, 8)
                self.conv1 = nn.Conv1d(8, 32, 5)
                self.conv2 = nn.Conv1d(32, 32, 5)
                self.out = nn.Linear(32, vocabulary)

            def forward(self, x: Any) -> Any:
                h = self.embed(x).transpose(1, 2)  # (batch, 8, L)
                h = torch.relu(self.conv1(nn.functional.pad(h, (4, 0))))
                h = torch.relu(self.conv2(nn.functional.pad(h, (4, 0))))
                return self.out(h[:, :, -1])

        return Net(self.classes)

    @staticmethod
    def _inputs(X: np.ndarray) -> Any:
        import torch

        return torch.as_tensor(np.asarray(X, dtype=np.int64))

    def _logits(self, w: np.ndarray, X: np.ndarray) -> Any:
        import torch

        net = self._load(w)
        with torch.no_grad():
            return net(self._inputs(X))


def make_model(kind: str, features: int, classes: int) -> Model | ConvNet2d | CNN1d:
    """The model of ``kind`` (one of :data:`MODELS`)."""
    if kind == "cnn1d":
        return CNN1d(features, classes)
    if kind == "cnn2d":
        return ConvNet2d(features, classes)
    if kind == "charcnn":
        return CharCNN(features, classes)
    return Model(kind, features, classes)
