"""The host's view of a device: a client for the wire protocol, board and QEMU helpers."""
