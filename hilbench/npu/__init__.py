"""Bit-exact INT8 NPU emulator: TFLite-style quantized ops, graph IR, model zoo."""
