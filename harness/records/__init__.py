"""What a run leaves: its record, the JSON and MLflow tracking, the sweep state, the store and its kill points."""
