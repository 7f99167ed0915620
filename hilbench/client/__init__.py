"""The host's side of the wire protocol: the device client, its retransmission timer and the
recovery that reloads a reset device (``DeviceClient``; ``Target`` is its old name)."""
