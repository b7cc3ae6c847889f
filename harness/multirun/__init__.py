"""A sweep as Hydra runs it: the sweep callback, the basic and load-aware launchers, the table at the end."""
