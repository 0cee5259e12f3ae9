r"""The benchmark's models, in NumPy, on one flat parameter vector w.

``softmax``  multinomial logistic regression, :math:`p(y=c|x) \propto \exp(x^\top W_c + b_c)`
``mlp``      one hidden layer of 64 ReLU units, then softmax

Both minimise the mean cross-entropy plus :math:`(\lambda/2)\lVert w\rVert^2`, λ = 1e-4. A
client trains as Flower's quickstarts do (:func:`local_train`): E epochs over its own rows in
shuffled mini-batches of 32, plain SGD at the learning rate its round's config gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MODELS", "Model", "local_train"]

REG = 1e-4
HIDDEN = 64
BATCH = 32


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
        rng = np.random.default_rng([seed, 3])
        parts = []
        for shape in self.sizes:
            if len(shape) == 2:
                bound = np.sqrt(6.0 / sum(shape))
                parts.append(rng.uniform(-bound, bound, shape).ravel())
            else:
                parts.append(np.zeros(shape))
        return np.concatenate(parts)

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


#: The model kinds.
MODELS = ("softmax", "mlp")


def local_train(model: Model, w: np.ndarray, X: np.ndarray, y: np.ndarray, *, epochs: int,
                lr: float, rng: np.random.Generator) -> tuple[np.ndarray, float]:  # fmt: skip
    """E epochs of mini-batch SGD over (X, y) from w; returns the new w and the mean loss of
    the batches of the last epoch."""
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
