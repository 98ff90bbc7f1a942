"""Kernel, bridge, rank actors and memories (private)."""
