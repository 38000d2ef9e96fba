"""The box detector: a centre-point network (CenterNet's heads on a timm encoder) that finds labelled boxes."""
