"""quickstart: A Flower / PyTorch app, with eegrad choosing how many clients a round asks."""

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from eegrad.flower import choose_clients  # eegrad
from quickstart.task import Net

# Create ServerApp
app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Main entry point for the ServerApp."""
    fraction_train: float = context.run_config["fraction-train"]
    fraction_evaluate: float = context.run_config["fraction-evaluate"]
    num_rounds: int = context.run_config["num-server-rounds"]
    lr: float = context.run_config["lr"]

    # Load global model
    global_model = Net()
    arrays = ArrayRecord(global_model.state_dict())

    # Initialize the strategy: eegrad chooses n, by default within what FedAvg spends (eegrad)
    strategy = choose_clients(FedAvg(fraction_train=fraction_train,
                                     fraction_evaluate=fraction_evaluate),
                              budget=context.run_config.get("budget"),
                              csv_path=context.run_config["csv-path"] or None)

    # Start strategy, run FedAvg for `num_rounds`
    result = strategy.start(
        grid=grid,
        initial_arrays=arrays,
        train_config=ConfigRecord({"lr": lr}),
        num_rounds=num_rounds,
    )

    # Save final model to disk, where the config says
    model_path = context.run_config.get("model-path", "final_model.pt")
    print(f"\nSaving final model to {model_path}...")
    state_dict = result.arrays.to_torch_state_dict()
    torch.save(state_dict, model_path)
