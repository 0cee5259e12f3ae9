"""quickstart: the model, the data and the training loop (Flower's PyTorch quickstart, on
scikit-learn's 8x8 digits instead of CIFAR-10, so that nothing is downloaded)."""

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    """A small CNN for 8x8 images."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def load_data(partition_id: int, num_partitions: int):
    """This client's share of the digits (an IID split), 80 % to train and 20 % to test."""
    digits = load_digits()
    X = torch.tensor(digits.data.reshape(-1, 1, 8, 8) / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.int64)
    order = np.random.default_rng(42).permutation(len(y))
    part = np.array_split(order, num_partitions)[partition_id]
    cut = int(0.8 * len(part))
    train = TensorDataset(X[part[:cut]], y[part[:cut]])
    test = TensorDataset(X[part[cut:]], y[part[cut:]])
    return DataLoader(train, batch_size=32, shuffle=True), DataLoader(test, batch_size=32)


def train(net, trainloader, epochs, lr, device):
    """Train the model on the training set."""
    net.to(device)
    criterion = torch.nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    net.train()
    running_loss = 0.0
    for _ in range(epochs):
        for images, labels in trainloader:
            optimizer.zero_grad()
            loss = criterion(net(images.to(device)), labels.to(device))
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
    return running_loss / (epochs * len(trainloader))


def test(net, testloader, device):
    """Validate the model on the test set."""
    net.to(device)
    criterion = torch.nn.CrossEntropyLoss()
    correct, loss = 0, 0.0
    with torch.no_grad():
        for images, labels in testloader:
            outputs = net(images.to(device))
            loss += criterion(outputs, labels.to(device)).item()
            correct += (torch.max(outputs.data, 1)[1] == labels.to(device)).sum().item()
    return loss / len(testloader), correct / len(testloader.dataset)
