"""hilbench: hardware-in-the-loop bench for zeroth-order training on INT8 microcontroller NPUs."""

__version__ = "0.1.0"
