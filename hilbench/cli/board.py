"""``hilbench ports``, ``hilbench probe list``, ``hilbench load [ELF]``: finding a board and
putting the firmware on it (docs/board.md)."""

from __future__ import annotations

import argparse

from hilbench.cli.progress import TransferBar
from hilbench.errors import HilbenchError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ports",
        help="serial ports and what they are (ST-LINKs by USB id, their probe serials)",
        description="List the serial ports with what each is: an ST-LINK's virtual COM port is "
        "recognised by its USB id (0483:3754 on the STM32N6570-DK) and shown with its serial "
        "number, which is also its debug probe's id (--board SERIAL names the board by it).",
    )
    p.set_defaults(handler=handle_ports)

    p = sub.add_parser("probe", help="debug probes (pyOCD)", description="Debug probes.")
    probe_sub = p.add_subparsers(dest="probe_command", metavar="ACTION", required=True)
    pl = probe_sub.add_parser("list", help="the debug probes pyOCD finds, with their ids")
    pl.set_defaults(handler=handle_probe_list)

    p = sub.add_parser(
        "load",
        help="load the firmware into a board's RAM and start it (development boot)",
        description="Load a firmware ELF into the board's RAM through its debug probe and "
        "start it: halt, write the segments, VTOR, a core reset (never a system reset: it "
        "would erase the RAM), open the serial port, resume, wait for HELLO. Nothing is "
        "loaded when HELLO says the board already runs this build (--force loads anyway). "
        "Without ELF: device_fw/build/stm32n6/hilbench-stm32n6.elf, built with make.",
    )
    p.add_argument("elf", nargs="?", metavar="ELF", help="the firmware (default: build it)")
    p.add_argument(
        "--board",
        default="auto",
        help="a serial port (/dev/ttyACM0), the probe's serial number, or auto (the one "
        "board attached; the default)",
    )
    p.add_argument("--probe", metavar="UID", help="the debug probe's id (default: the board's)")
    p.add_argument("--baud", help="the console's baud rate (default 921600)")
    p.add_argument("--force", action="store_true", help="load even if the build already runs")
    p.add_argument(
        "--gdb",
        metavar="HOST:PORT",
        help="load through a GDB remote stub instead of pyOCD (OpenOCD, pyocd gdbserver, "
        "QEMU -gdb); --board is then the console's port or URL",
    )
    p.add_argument(
        "--machine",
        choices=("stm32n6", "an547"),
        default="stm32n6",
        help="the memory map the ELF must fit (an547: QEMU's MPS3 AN547)",
    )
    p.set_defaults(handler=handle_load)

    p = sub.add_parser(
        "flash",
        help="write the firmware to the board's external flash to boot without a debugger",
        description="Write a boot image to the board's external flash through "
        "STM32CubeProgrammer's CLI or OpenOCD, found on PATH or through $HILBENCH_CUBEPROG / "
        "$HILBENCH_OPENOCD, and verify it. Without IMAGE: hilbench's firmware linked for flash "
        "boot (--fw ELF, else built with make stm32n6-flash), made a .bin and signed with "
        "STM32_SigningTool_CLI ($HILBENCH_SIGNINGTOOL or PATH). Then set BOOT1 low and "
        "power-cycle the board. An ELF linked for development boot is refused: `hilbench load` "
        "starts it.",
    )
    p.add_argument(
        "image",
        metavar="IMAGE",
        nargs="?",
        help="a signed boot image (.bin, .hex) or a flash-boot ELF; default: hilbench's firmware",
    )
    p.add_argument("--fw", metavar="ELF", help="the flash-boot firmware ELF to sign and write")
    p.add_argument("--board", help="the board (port, probe serial or auto); default: the tool's")
    p.add_argument("--probe", metavar="UID", help="the probe's serial number")
    p.add_argument("--tool", choices=("cubeprog", "openocd"), help="default: the one found")
    p.add_argument("--loader", metavar="STLDR", help="STM32CubeProgrammer's external loader")
    p.set_defaults(handler=handle_flash)


def handle_ports(args: argparse.Namespace) -> int:
    from hilbench.board.ports import list_ports

    ports = list_ports()
    if not ports:
        print("no serial ports")
        return 0
    rows = [("PORT", "WHAT", "USB", "SERIAL / PROBE ID", "LOCATION")]
    for p in ports:
        rows.append(
            (p.device, p.stlink or p.description, p.usb_id, p.serial_number or "", p.location or "")
        )
    _table(rows)
    return 0


def handle_probe_list(args: argparse.Namespace) -> int:
    from hilbench.board.ports import list_ports
    from hilbench.board.pyocd_target import list_probes

    probes = list_probes()
    if not probes:
        print("no debug probes found (plug the board's ST-LINK in; `hilbench ports` lists ports)")
        return 0
    by_serial = {(p.serial_number or "").lower(): p.device for p in list_ports()}
    rows = [("PROBE ID", "DESCRIPTION", "PORT")]
    for p in probes:
        rows.append((p.unique_id, p.description, by_serial.get(p.unique_id.lower(), "")))
    _table(rows)
    return 0


def handle_load(args: argparse.Namespace) -> int:
    from hilbench.board import elfimage
    from hilbench.board.firmware import firmware_elf
    from hilbench.board.loader import load
    from hilbench.board.ports import open_board_port, resolve_board
    from hilbench.board.stm32n6 import DEFAULT_BAUD
    from hilbench.client import device_info
    from hilbench.config import parse_baud
    from hilbench.protocol.spec import CAP_DEVICE_INFO

    baud = parse_baud(args.baud) if args.baud is not None else DEFAULT_BAUD
    profile = elfimage.AN547 if args.machine == "an547" else elfimage.STM32N6
    elf = firmware_elf(args.elf, baud if args.baud is not None else None)
    image = elfimage.read_image(elf, profile)
    board = resolve_board(args.board, args.probe)
    if args.gdb:
        connect = _gdb_connector(args.gdb)
        frequencies: tuple[int, ...] = (0,)
    else:
        if not board.probe_id:
            raise HilbenchError(
                f"--board {board.port} is no ST-LINK port, so its probe is unknown",
                "name the probe: --probe UID (`hilbench probe list`)",
            )
        connect = _pyocd_connector(board.probe_id)
        frequencies = ()
    port = open_board_port(board.port, baud)
    with TransferBar() as bar:
        try:
            from hilbench.board.loader import FREQUENCIES

            result = load(
                image,
                connect,
                port,
                board=str(board),
                frequencies=frequencies or FREQUENCIES,
                force=args.force,
                progress=lambda done, total: bar.update(f"loading {elf.name}", done, total),
            )
        except BaseException:
            port.close()
            raise
    info = result.info
    if result.skipped:
        print(f"{board}: already runs build {image.image_id} ({info.firmware}); nothing loaded "
              "(--force loads anyway)")  # fmt: skip
    else:
        seconds = sum(t for _, t in result.steps)
        speed = f" at {result.frequency / 1e6:g} MHz SWD" if result.frequency else ""
        hello = f"{info.device_id}, {info.firmware}, boot nonce {info.boot_nonce:#010x}"
        print(f"{board}: loaded {result.bytes_written} bytes{speed} in {seconds:.1f} s; "
              f"HELLO: {hello}")  # fmt: skip
    try:
        if info.capabilities & CAP_DEVICE_INFO:  # what the firmware set, as it says
            print(f"{board}: {device_info.summary(result.target.device_info())}")
    finally:
        result.target.close()
    return 0


def handle_flash(args: argparse.Namespace) -> int:
    from pathlib import Path

    from hilbench.board.flash import flash
    from hilbench.board.ports import resolve_board

    if args.image and args.fw:
        raise HilbenchError(
            "hilbench flash: both IMAGE and --fw given", "give one: IMAGE or --fw ELF"
        )
    probe = args.probe
    if args.board:
        probe = resolve_board(args.board, args.probe).probe_id
    image = Path(args.image) if args.image else None
    fw = Path(args.fw) if args.fw else None
    last = flash(image, probe, kind=args.tool, loader=args.loader, fw=fw)
    print(f"external flash written and verified: {last}")
    print("to boot from it: set BOOT1 low (flash boot), then power-cycle the board")
    return 0


def _pyocd_connector(probe_id: str):
    from hilbench.board.pyocd_target import PyocdTarget

    return lambda frequency: PyocdTarget.connect(probe_id, frequency)


def _gdb_connector(address: str):
    from hilbench.board.gdbremote import GdbRemoteTarget

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise HilbenchError(
            f"--gdb {address!r} is not HOST:PORT", "write e.g. --gdb localhost:3333"
        )
    return lambda frequency: GdbRemoteTarget(host or "127.0.0.1", int(port))


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
