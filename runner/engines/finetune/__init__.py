"""The text fine-tuning engine: a pretrained transformer with a new head, trained end to end on the competition's
texts. `models` is the ladder and where each model's files are, `planning` sizes the member for a run (pure),
`tokens` tokenises once and batches by length, `training` runs one fold; `engine` is the `FineTune` engine."""
