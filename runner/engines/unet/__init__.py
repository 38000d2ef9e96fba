"""The image-to-image engine: a U-Net that restores whole pages (denoising), beside the per-pixel table members."""
