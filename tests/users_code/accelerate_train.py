"""A user's Hugging Face accelerate script, as its docs show one: Accelerator, prepare, backward.
No destroy_process_group, no torchrig. Appends "start <rank>" to OUT/runs.log at the start and
writes OUT/result-<rank>.txt (left open) at the end.

    accelerate_train.py OUT
"""

import os
import sys

import torch
from accelerate import Accelerator

out = sys.argv[1]
accelerator = Accelerator(cpu=True)
rank = accelerator.process_index
with open(os.path.join(out, "runs.log"), "a") as runs:
    runs.write(f"start {rank}\n")

torch.manual_seed(0)
model = torch.nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
loader = torch.utils.data.DataLoader(data, batch_size=8)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for inputs, labels in loader:
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(inputs), labels)
    accelerator.backward(loss)
    optimizer.step()

weights = accelerator.gather(accelerator.unwrap_model(model).weight.detach().flatten())
results = open(os.path.join(out, f"result-{rank}.txt"), "w")  # noqa: SIM115 (left open)
results.write(f"rank {rank} of {accelerator.num_processes}: {weights.numel()} gathered\n")
accelerator.print("accelerate done")
