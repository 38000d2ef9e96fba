"""The machine a run may use: hardware, the GPUs it is given, named profiles, and the resource monitor."""
