#!/bin/bash
# Usage: run.sh CMSIS_NN_DIR [SHIFT]: builds main.c against CMSIS-NN (Helium, gcc -O2
# -mcpu=cortex-m55) and prints, per op, CMSIS-NN's executed instructions under QEMU mps3-an547
# -icount shift=SHIFT (default 5: one SysTick tick per ~0.98 instructions) and its checksum.
# CMSIS_NN_DIR: a checkout of ARM-software/CMSIS-NN at 99f736a6 (Include/, Source/).
set -e
NN=${1:?path to a CMSIS-NN checkout (Include/, Source/)}
SHIFT=${2:-5}
H=$(cd "$(dirname "$0")" && pwd)
O=$(mktemp -d)
SRCS="$NN/Source/ConvolutionFunctions/*.c $NN/Source/FullyConnectedFunctions/*.c $NN/Source/NNSupportFunctions/*.c $NN/Source/TransposeFunctions/*.c"
arm-none-eabi-gcc -mcpu=cortex-m55 -mthumb -mfloat-abi=hard -O2 -ffunction-sections -fdata-sections \
  -nostartfiles -I"$NN/Include" -T"$H/link.ld" -Wl,--gc-sections -o "$O/mve.elf" "$H/startup.c" "$H/main.c" \
  $(ls $SRCS | grep -v -E "_f16|_f32") -lm --specs=nano.specs --specs=nosys.specs
timeout 300 qemu-system-arm -M mps3-an547 -nographic -icount shift="$SHIFT" \
  -semihosting-config enable=on,target=native -kernel "$O/mve.elf" 2>&1 | tr -d '\r' |
  awk '/^calib_ticks_for_2M_instr=/ { split($0, a, "="); cal = a[2]; print; next }
       /^op / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                instr = v["ticks"] * 2000000 / cal
                printf "%s instr=%.0f per_mac=%.4f\n", $0, instr, instr / v["macs"]; next }
       { print }'
rm -rf "$O"
