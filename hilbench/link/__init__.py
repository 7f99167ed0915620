"""Byte transports between host and device: pyserial URLs, ptys."""
