"""The segmentation engine: an encoder-decoder that learns per-pixel masks from images (tgs-salt's slices)."""
