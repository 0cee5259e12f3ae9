"""The app's client, as Flower's quickstart writes one: it trains and reports its loss and
its examples; nothing of eegrad."""

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from label_skew.task import Net, client_rows
from label_skew.task import train as train_fn

app = ClientApp()


@app.train()
def train(msg: Message, context: Context):
    """Train the model on this client's digits."""
    torch.set_num_threads(1)
    model = Net()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    pid = int(context.node_config["partition-id"])
    X, y = client_rows(pid, int(context.node_config["num-partitions"]))
    config = msg.content["config"]
    seed = int(context.run_config.get("seed", 0)) * 100_003 + pid * 1_009 + int(config["server-round"])
    loss = train_fn(model, X, y, int(context.run_config["local-epochs"]), float(config["lr"]), seed)
    content = RecordDict({"arrays": ArrayRecord(model.state_dict()),
                          "metrics": MetricRecord({"train_loss": loss, "num-examples": len(y)})})
    return Message(content=content, reply_to=msg)
