"""A user's Lightning Fabric script: Fabric(devices=N) under torchrun, as Lightning's docs show it.
Lightning requires devices x num_nodes = WORLD_SIZE. No torchrig. Appends "start <rank>" to
OUT/runs.log at the start and writes OUT/result-<rank>.txt (left open) at the end.

    fabric_train.py OUT DEVICES
"""

import os
import sys

import torch
from lightning_fabric import Fabric

out, devices = sys.argv[1], int(sys.argv[2])
fabric = Fabric(accelerator="cpu", devices=devices, strategy="ddp")
fabric.launch()
rank = fabric.global_rank
with open(os.path.join(out, "runs.log"), "a") as runs:
    runs.write(f"start {rank}\n")

fabric.seed_everything(0)
model = torch.nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = fabric.setup(model, optimizer)
data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
loader = fabric.setup_dataloaders(torch.utils.data.DataLoader(data, batch_size=8))
for inputs, labels in loader:
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(inputs), labels)
    fabric.backward(loss)
    optimizer.step()

total = fabric.all_reduce(torch.ones(1), reduce_op="sum")
results = open(os.path.join(out, f"result-{rank}.txt"), "w")  # noqa: SIM115 (left open)
results.write(f"rank {rank} of {fabric.world_size}: {total.item():g}\n")
fabric.print("fabric done")
