"""quickstart: A Flower / PyTorch app, with eegrad choosing how many clients a round asks."""
