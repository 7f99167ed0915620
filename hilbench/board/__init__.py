"""The physical board: finding its serial port and debug probe, reading and loading firmware ELFs
into its RAM (pyOCD, or any GDB remote stub), writing its external flash. docs/board.md."""
