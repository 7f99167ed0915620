"""The device twin: what a device does with each command, served over a byte stream."""
