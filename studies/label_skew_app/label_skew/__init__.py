"""A label-skewed Flower app: FedAvg against eegrad's choose_clients."""
