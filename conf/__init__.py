"""The Hydra configs (config groups as folders of YAML), installed as the package harness_conf."""
