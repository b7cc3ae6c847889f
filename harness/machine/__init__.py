"""The machine a run measures on: its environment, GPU clocks, and the leases that share it."""
