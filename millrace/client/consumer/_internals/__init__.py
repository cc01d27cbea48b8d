"""The consumer's machinery; the public API lives one level up."""
