"""Plumbing every layer shares: errors, atomic writes, the budget, CSV reading, untrusted paths, metrics, weights, saved values."""
