"""The wire protocol: frames (COBS, CRC-32, sequence numbers, version) and messages."""
