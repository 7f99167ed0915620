"""Zeroth-order math shared by host and device: PRNG, perturbations, integer updates, loss."""
