"""Starting the firmware on this host: the SIL program as a child process, the an547 build
under QEMU, and the ``make`` that builds either."""
